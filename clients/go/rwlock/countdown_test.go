package rwlock

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCountDownLatch(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	l := c.CountDownLatch("latch:basic")
	if n, err := l.Count(bg); l.Name() != "latch:basic" || n != 0 || err != nil {
		t.Fatalf("a new latch: %d %v", n, err)
	}
	if ok, err := l.Await(bg, WithWait(0)); !ok || err != nil {
		t.Fatalf("no latch is open: %v %v", ok, err)
	}
	if ok, err := l.TrySetCount(bg, 2); !ok || err != nil {
		t.Fatalf("try-set: %v %v", ok, err)
	}
	if ok, err := l.TrySetCount(bg, 5); ok || err != nil {
		t.Fatalf("second try-set: %v %v", ok, err)
	}
	if ok, err := l.Await(bg, WithWait(0)); ok || err != nil {
		t.Fatalf("one look at 2: %v %v", ok, err)
	}
	for want := int64(1); want >= 0; want-- {
		if err := l.CountDown(bg); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Count(bg); n != want || err != nil {
			t.Fatalf("count %d %v, want %d", n, err, want)
		}
	}
	if got := s.do(t, "EXISTS", "latch:basic"); got != int64(0) {
		t.Fatal("the latch outlived its last count-down")
	}
	if ok, err := l.TrySetCount(bg, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := l.Delete(bg); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, err := l.Delete(bg); ok || err != nil {
		t.Fatalf("delete again: %v %v", ok, err)
	}
	if _, err := l.Await(bg, WithLease(time.Second)); err == nil {
		t.Fatal("a lease accepted")
	}
	if _, err := c.CountDownLatch("{braces}").TrySetCount(bg, 1); err == nil || !strings.HasPrefix(err.Error(), "ERR") {
		t.Fatalf("a name with braces: %v", err)
	}
}

// TestLatchAwaiters: several workers await one latch at once, each on the
// server, one past the go-redis client's read timeout; the last
// count-down, by another client, wakes them all.
func TestLatchAwaiters(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := impatientClient(t, s)
	other, _ := newClient(t, s)
	if ok, err := other.CountDownLatch("latch:many").TrySetCount(bg, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	const workers = 5
	results := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			opts := []AcquireOption{WithWait(time.Minute)}
			if w == 0 {
				opts = nil // without limit
			}
			ok, err := c.CountDownLatch("latch:many").Await(bg, opts...)
			if err == nil && !ok {
				err = errors.New("the wait ran out")
			}
			results <- err
		}(w)
	}
	waitFor(t, "every awaiter", func() bool { return waiting(t, s, "latch:many") == workers })
	time.Sleep(500 * time.Millisecond) // past the read timeout: the waits go on
	if err := other.CountDownLatch("latch:many").CountDown(bg); err != nil {
		t.Fatal(err)
	}
	if got := waiting(t, s, "latch:many"); got != workers {
		t.Fatalf("%d still wait at count 1, want %d", got, workers)
	}
	if err := other.CountDownLatch("latch:many").CountDown(bg); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Fatal(err)
		}
	}
	nobodyWaits(t, s)
}

// TestLatchAwaitEnded: an await cancelled, past its deadline, or run out
// leaves nobody waiting on the server.
func TestLatchAwaitEnded(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	l := c.CountDownLatch("latch:ended")
	if ok, err := l.TrySetCount(bg, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	endedWaits(t, s, "latch:ended", l.Await)
	if n, err := l.Count(bg); n != 1 || err != nil {
		t.Fatalf("count %d %v", n, err)
	}
}

// TestLostCountDown: a count-down's reply lost is an error, never resent:
// the latch is counted down once.
func TestLostCountDown(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := startProxy(t, s.addr(), "LATCH.COUNTDOWN", false)
	c := proxiedClient(t, p, 0)
	l := c.CountDownLatch("latch:lost")
	if ok, err := l.TrySetCount(bg, 3); !ok || err != nil {
		t.Fatal(ok, err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	if err := l.CountDown(bg); err == nil {
		t.Fatal("a lost count-down reply said nothing")
	}
	if !p.fired.Load() {
		t.Fatal("the proxy lost no reply")
	}
	if got := s.info(t, "commandstats", "cmdstat_latch.countdown"); !strings.HasPrefix(got, "calls=1,") {
		t.Fatalf("count-downs %q, want one", got)
	}
	if got := s.do(t, "GET", "latch:lost"); got != "2" {
		t.Fatalf("count %v, want 2", got)
	}
	// The client goes on.
	if err := l.CountDown(bg); err != nil {
		t.Fatal(err)
	}
	if n, err := l.Count(bg); n != 1 || err != nil {
		t.Fatalf("count %d %v", n, err)
	}
}

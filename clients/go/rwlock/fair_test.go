package rwlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fairLine is the owners in a fair lock's line, in order (FAIRLOCK.INFO).
func fairLine(t *testing.T, s *server, name string) []string {
	t.Helper()
	info, _ := s.do(t, "FAIRLOCK.INFO", name).([]any)
	var owners []string
	for i := 0; i+1 < len(info); i += 2 {
		if info[i] != "line" {
			continue
		}
		entries, _ := info[i+1].([]any)
		for _, e := range entries {
			fields, _ := e.([]any)
			if len(fields) >= 2 {
				owners = append(owners, fmt.Sprint(fields[1]))
			}
		}
	}
	return owners
}

func waitLine(t *testing.T, s *server, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(fairLine(t, s, name)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the line of %s is %v, not %d long", name, fairLine(t, s, name), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFairOrder: four waiters are served in the order they arrived, whoever
// releases; each waits in the line on the server.
func TestFairOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	holder := c.FairLock("fair:order")
	mustAcquire(t, holder, WithWait(0), WithLease(10*time.Second))
	var mu sync.Mutex
	var served []string
	var wg sync.WaitGroup
	waiters := make([]*Lock, 4)
	for i := range waiters {
		w := c.FairLock("fair:order")
		waiters[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := w.Acquire(bg, WithWait(10*time.Second), WithLease(10*time.Second))
			if err != nil || !ok {
				t.Errorf("waiter %s: %v %v", w.Owner(), ok, err)
				return
			}
			mu.Lock()
			served = append(served, w.Owner())
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			if err := w.Release(bg); err != nil {
				t.Errorf("release %s: %v", w.Owner(), err)
			}
		}()
		waitLine(t, s, "fair:order", i+1) // in the line before the next arrives
	}
	if got := fairLine(t, s, "fair:order"); fmt.Sprint(got) != fmt.Sprint([]string{waiters[0].Owner(), waiters[1].Owner(), waiters[2].Owner(), waiters[3].Owner()}) {
		t.Fatalf("line %v", got)
	}
	mustRelease(t, holder)
	wg.Wait()
	want := []string{waiters[0].Owner(), waiters[1].Owner(), waiters[2].Owner(), waiters[3].Owner()}
	if fmt.Sprint(served) != fmt.Sprint(want) {
		t.Fatalf("served %v, arrived %v", served, want)
	}
	if left := s.left(t); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

// TestFairLeaving: a wait that runs out, and one whose context ends, leave
// the line (FAIRLOCK.INFO shows nobody, no blocked client); a try never
// joins it; nothing is left once the holder goes.
func TestFairLeaving(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	holder := c.FairLock("fair:leave")
	mustAcquire(t, holder, WithWait(0), WithLease(10*time.Second))
	w := c.FairLock("fair:leave", WithFairWait(5*time.Second))

	began := time.Now()
	if ok, err := w.Acquire(bg, WithWait(300*time.Millisecond)); ok || err != nil {
		t.Fatalf("timed out wait: %v %v", ok, err)
	}
	if d := time.Since(began); d < 250*time.Millisecond {
		t.Fatalf("refused after %v", d)
	}
	if got := fairLine(t, s, "fair:leave"); len(got) != 0 {
		t.Fatalf("line after the timeout %v", got)
	}

	ctx, cancel := context.WithCancel(bg)
	go func() {
		// In the line (or 5 s gone by): cancel. t.Fatal is for the test's goroutine.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if len(fairLine(t, s, "fair:leave")) == 1 {
				break
			}
		}
		cancel()
	}()
	if ok, err := w.Acquire(ctx); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v %v", ok, err)
	}
	waitLine(t, s, "fair:leave", 0)
	if got := s.info(t, "clients", "blocked_clients"); got != "0" {
		t.Fatalf("blocked_clients %s", got)
	}

	// A try: refused at once, never in the line; Run says NotAcquired.
	err := w.Run(bg, func(context.Context) error { return errors.New("ran") }, WithWait(0))
	var lockErr *Error
	if !errors.As(err, &lockErr) || !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("try: %v", err)
	}
	if got := fairLine(t, s, "fair:leave"); len(got) != 0 {
		t.Fatalf("line after a try %v", got)
	}
	mustRelease(t, holder)
	if left := s.left(t); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

// TestFairHolds: re-entry and its release (LEASE and HELD, no latch), the
// watchdog renewing with LOCK.RENEW, a hold forced open found
// lost, the non-reentrant fair lock, and options it refuses.
func TestFairHolds(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s, WithWatchdogTimeout(time.Second))
	l := c.FairLock("fair:holds")
	mustAcquire(t, l, WithWait(0))
	mustAcquire(t, l, WithWait(0))
	if got := s.do(t, "HGET", "fair:holds", l.Owner()); got != "2" {
		t.Fatalf("count %v", got)
	}
	time.Sleep(2500 * time.Millisecond) // past the 1 s lease: the watchdog renews it
	if pttl, _ := s.do(t, "PTTL", "fair:holds").(int64); pttl <= 0 || !l.Held() {
		t.Fatalf("pttl %d held %v", pttl, l.Held())
	}
	mustRelease(t, l)
	if got := s.do(t, "HGET", "fair:holds", l.Owner()); got != "1" {
		t.Fatalf("count after one release %v", got)
	}
	// HELD writes nothing of its own.
	if got := s.do(t, "KEYS", "*"); len(got.([]any)) != 1 {
		t.Fatalf("keys after a re-entered release %v", got)
	}
	s.do(t, "FAIRLOCK.FORCEUNLOCK", "fair:holds")
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second): // a renewal (every 333 ms) finds it; late on a loaded machine
		t.Fatal("the loss was not reported")
	}
	// FAIRLOCK.UNLOCK of a lock gone replies nil, and the handle knows it too.
	if err := l.Release(bg); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release after the loss: %v", err)
	}

	n := c.FairLock("fair:nr", WithNonReentrant())
	mustAcquire(t, n, WithWait(0), WithLease(5*time.Second))
	if _, err := n.Acquire(bg, WithWait(0)); !errors.Is(err, ErrNotReentrant) {
		t.Fatalf("re-entry: %v", err)
	}
	if got := s.do(t, "HGET", "fair:nr", n.Owner()); got != "1" {
		t.Fatalf("count %v", got)
	}
	mustRelease(t, n)

	for _, bad := range []*Lock{
		c.FairLock("x", WithFenced()), c.FairLock("x", WithSession()), c.FairLock("x", WithFairWait(0)),
		c.Lock("x", WithFairWait(time.Second)), c.MultiLock([]Hold{{KindLock, "x"}}, WithFairWait(time.Second)),
	} {
		if _, err := bad.Acquire(bg, WithWait(0)); err == nil {
			t.Fatal("a bad option accepted")
		}
	}
	if _, err := c.ReadWriteLock("x", WithFairWait(time.Second)).Read().Acquire(bg); err == nil {
		t.Fatal("WithFairWait on a read-write lock accepted")
	}
	if left := s.left(t); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

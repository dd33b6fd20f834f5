package rwlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// waiting is how many clients wait on the server for name, from
// LOCK.WAITING (0 when it lists no such name).
func waiting(t *testing.T, s *server, name string) int64 {
	t.Helper()
	entries, _ := s.do(t, "LOCK.WAITING").([]any)
	for _, e := range entries {
		fields, _ := e.([]any)
		entry := map[string]any{}
		for i := 0; i+1 < len(fields); i += 2 {
			entry[fmt.Sprint(fields[i])] = fields[i+1]
		}
		if entry["lock"] == name {
			n, _ := entry["waiters"].(int64)
			return n
		}
	}
	return 0
}

// nobodyWaits fails unless the server has no parked client at all.
func nobodyWaits(t *testing.T, s *server) {
	t.Helper()
	if got, _ := s.do(t, "LOCK.WAITING").([]any); len(got) != 0 {
		t.Fatalf("LOCK.WAITING: %v", got)
	}
	if got := s.info(t, "clients", "blocked_clients"); got != "0" {
		t.Fatalf("blocked_clients %s", got)
	}
}

// cancelParked runs wait, and once it is parked on the server on name,
// then (nil: nothing), cancels its context; wait's outcome.
func cancelParked(t *testing.T, s *server, name string, wait func(context.Context) (bool, error), then func()) (bool, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	var ok bool
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok, err = wait(ctx)
	}()
	waitFor(t, "the waiter", func() bool { return waiting(t, s, name) == 1 })
	if then != nil {
		then()
	}
	cancel()
	<-done
	return ok, err
}

// endedWaits: wait (on name, nothing free) ended by its context once parked
// on the server, then by its context's deadline, then by its own wait
// running out, each leaving nobody waiting on the server.
func endedWaits(t *testing.T, s *server, name string, wait func(ctx context.Context, opts ...AcquireOption) (bool, error)) {
	t.Helper()
	ok, err := cancelParked(t, s, name, func(ctx context.Context) (bool, error) { return wait(ctx) }, nil)
	if ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v %v", ok, err)
	}
	nobodyWaits(t, s)
	dctx, dcancel := context.WithTimeout(bg, 400*time.Millisecond)
	defer dcancel()
	if ok, err := wait(dctx, WithWait(time.Minute)); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v %v", ok, err)
	}
	nobodyWaits(t, s)
	began := time.Now()
	if ok, err := wait(bg, WithWait(500*time.Millisecond)); ok || err != nil {
		t.Fatalf("run out: %v %v", ok, err)
	}
	if d := time.Since(began); d < 400*time.Millisecond {
		t.Fatalf("ran out after %v", d)
	}
	nobodyWaits(t, s)
}

// raiseTo raises v to n if it is lower.
func raiseTo(v *atomic.Int64, n int64) {
	for m := v.Load(); n > m; m = v.Load() {
		if v.CompareAndSwap(m, n) {
			return
		}
	}
}

func available(t *testing.T, sem *Semaphore) int64 {
	t.Helper()
	n, err := sem.Available(bg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSemaphore(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	sem := c.Semaphore("sem:basic")
	if sem.Name() != "sem:basic" || available(t, sem) != 0 {
		t.Fatal("a new semaphore")
	}
	if ok, err := sem.TrySetPermitsTTL(bg, 3, time.Minute); !ok || err != nil {
		t.Fatalf("try-set: %v %v", ok, err)
	}
	if pttl, _ := s.do(t, "PTTL", "sem:basic").(int64); pttl <= 0 || pttl > 60000 {
		t.Fatalf("pttl %d", pttl)
	}
	if ok, err := sem.TrySetPermits(bg, 5); ok || err != nil {
		t.Fatalf("second try-set: %v %v", ok, err)
	}
	if ok, err := sem.Acquire(bg, 2, WithWait(0)); !ok || err != nil {
		t.Fatalf("acquire 2: %v %v", ok, err)
	}
	if ok, err := sem.Acquire(bg, 2, WithWait(0)); ok || err != nil {
		t.Fatalf("acquire 2 of 1: %v %v", ok, err)
	}
	if err := sem.Release(bg, 2); err != nil {
		t.Fatal(err)
	}
	if err := sem.AddPermits(bg, -5); err != nil || available(t, sem) != -2 {
		t.Fatalf("add -5: %v, %d left", err, available(t, sem))
	}
	if err := sem.AddPermits(bg, 6); err != nil {
		t.Fatal(err)
	}
	if n, err := sem.Drain(bg); n != 4 || err != nil || available(t, sem) != 0 {
		t.Fatalf("drain: %d %v", n, err)
	}
	// Bad input: refused before anything is sent.
	for _, n := range []int64{0, -1} {
		if _, err := sem.Acquire(bg, n); err == nil {
			t.Fatalf("acquire %d accepted", n)
		}
		if err := sem.Release(bg, n); err == nil {
			t.Fatalf("release %d accepted", n)
		}
	}
	if _, err := sem.Acquire(bg, 1, WithLease(time.Second)); err == nil {
		t.Fatal("a lease accepted")
	}
	if _, err := sem.TrySetPermitsTTL(bg, 1, 0); err == nil {
		t.Fatal("a TTL of 0 accepted")
	}
	// A server error passes through: a key of another type.
	s.do(t, "HSET", "sem:hash", "a", "1")
	if _, err := c.Semaphore("sem:hash").Acquire(bg, 1, WithWait(0)); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("a hash: %v", err)
	}
}

// TestSemaphoreWaits: a wait longer than the go-redis client's read
// timeout, served by another client's release; waiters served in arrival
// order, a waiter for 2 before a later one for 1.
func TestSemaphoreWaits(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := impatientClient(t, s)
	other, _ := newClient(t, s)
	sem := c.Semaphore("sem:wait")
	freed := make(chan time.Time, 1)
	go func() {
		time.Sleep(1200 * time.Millisecond)
		freed <- time.Now()
		_ = other.Semaphore("sem:wait").Release(bg, 2)
	}()
	if ok, err := sem.Acquire(bg, 2, WithWait(10*time.Second)); !ok || err != nil {
		t.Fatalf("wait: %v %v", ok, err)
	}
	served := time.Now()
	if at := <-freed; served.Before(at) {
		t.Fatal("served before the release")
	}
	if available(t, sem) != 0 {
		t.Fatal("permits left")
	}

	// Arrival order: the waiter for 2 parks first. One permit freed serves
	// nobody (the head wants 2, and the waiter for 1 behind it does not
	// pass it); a second serves the head alone; a third the waiter for 1.
	replies := map[string]chan error{"two": make(chan error, 1), "one": make(chan error, 1)}
	wait := func(who string, n int64) {
		ok, err := c.Semaphore("sem:wait").Acquire(bg, n, WithWait(time.Minute))
		if err == nil && !ok {
			err = errors.New("the wait ran out")
		}
		replies[who] <- err
	}
	go wait("two", 2)
	waitFor(t, "the first waiter", func() bool { return waiting(t, s, "sem:wait") == 1 })
	go wait("one", 1)
	waitFor(t, "the second waiter", func() bool { return waiting(t, s, "sem:wait") == 2 })
	for _, next := range []string{"", "two", "one"} {
		if err := sem.Release(bg, 1); err != nil {
			t.Fatal(err)
		}
		if next == "" {
			if got := waiting(t, s, "sem:wait"); got != 2 {
				t.Fatalf("a free permit served a waiter behind the head: %d wait", got)
			}
			continue
		}
		if err := <-replies[next]; err != nil {
			t.Fatalf("%s: %v", next, err)
		}
		if next == "two" && waiting(t, s, "sem:wait") != 1 {
			t.Fatal("the waiter for 1 was served with the head's permits")
		}
	}
	if available(t, sem) != 0 {
		t.Fatalf("%d left", available(t, sem))
	}

	nobodyWaits(t, s)
}

// TestSemaphoreGuard: a few workers on two clients take 1 or 2 of 3
// permits over and over, waiting on the server; a guard counts the permits
// held and never sees more than 3.
func TestSemaphoreGuard(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c1, _ := newClient(t, s)
	c2, _ := newClient(t, s)
	const permits, workers, rounds = 3, 6, 15
	if ok, err := c1.Semaphore("sem:guard").TrySetPermits(bg, permits); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var held, most, violations atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		c := c1
		if w%2 == 1 {
			c = c2
		}
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sem := c.Semaphore("sem:guard")
			for i := 0; i < rounds; i++ {
				n := int64(1 + (w+i)%2)
				ok, err := sem.Acquire(bg, n, WithWait(time.Minute))
				if !ok || err != nil {
					t.Errorf("worker %d: %v %v", w, ok, err)
					return
				}
				now := held.Add(n)
				if now > permits {
					violations.Add(1)
				}
				raiseTo(&most, now)
				time.Sleep(time.Millisecond) // inside: let the others contend
				held.Add(-n)
				if err := sem.Release(bg, n); err != nil {
					t.Errorf("worker %d: release: %v", w, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if violations.Load() != 0 {
		t.Fatalf("%d times more than %d permits held", violations.Load(), permits)
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d permits held at once: no contention", most.Load())
	}
	if got := available(t, c1.Semaphore("sem:guard")); got != permits {
		t.Fatalf("%d permits at the end", got)
	}
	t.Logf("violations 0; at most %d of %d permits held at once", most.Load(), permits)
}

// TestSemaphoreCancelled: a wait ended by its context (cancelled, or its
// deadline) ends on the server too, and takes nothing; so does one that
// ran out.
func TestSemaphoreCancelled(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	sem := c.Semaphore("sem:cancel")
	endedWaits(t, s, "sem:cancel", func(ctx context.Context, opts ...AcquireOption) (bool, error) {
		return sem.Acquire(ctx, 2, opts...)
	})
	// No waiter is left to take what comes back.
	if err := sem.Release(bg, 2); err != nil || available(t, sem) != 2 {
		t.Fatalf("after the release: %v, %d", err, available(t, sem))
	}
	if ok, err := sem.Acquire(bg, 2, WithWait(0)); !ok || err != nil {
		t.Fatalf("the client after the cancellations: %v %v", ok, err)
	}
}

// TestSemaphoreLostReplies: an acquisition's reply is lost (the proxy
// closes the connection, or withholds it past the read timeout), with and
// without a wait; the resend, with the
// same request id, is answered from the server's latch: the permits are
// taken once. A release's reply lost: given back once.
func TestSemaphoreLostReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	raw, _ := newClient(t, s)
	// stall: the reply withheld, the connection left open, until the read
	// timeout (300 ms) gives up on it.
	for _, tc := range []struct{ waiting, stall bool }{{false, false}, {true, false}, {false, true}} {
		name := fmt.Sprintf("sem:lost:%v:%v", tc.waiting, tc.stall)
		t.Run(name, func(t *testing.T) {
			p := startProxy(t, s.addr(), "SEMAPHORE.ACQUIRE", tc.stall)
			var readTimeout time.Duration
			if tc.stall {
				readTimeout = 300 * time.Millisecond
			}
			sem := proxiedClient(t, p, readTimeout).Semaphore(name)
			opts := []AcquireOption{WithWait(0)}
			if tc.waiting {
				go func() {
					time.Sleep(300 * time.Millisecond)
					_ = raw.Semaphore(name).AddPermits(bg, 5)
				}()
				opts = []AcquireOption{WithWait(10 * time.Second)}
			} else if err := raw.Semaphore(name).AddPermits(bg, 5); err != nil {
				t.Fatal(err)
			}
			s.do(t, "CONFIG", "RESETSTAT")
			if ok, err := sem.Acquire(bg, 2, opts...); !ok || err != nil {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			if !p.fired.Load() {
				t.Fatal("the proxy lost no reply")
			}
			if got := s.info(t, "commandstats", "cmdstat_semaphore.acquire"); !strings.HasPrefix(got, "calls=2,") {
				t.Fatalf("acquisitions %q, want the first send and its resend", got)
			}
			if got := s.info(t, "commandstats", "cmdstat_pexpire"); !strings.HasPrefix(got, "calls=1,") {
				t.Fatalf("pexpire stats %q", got)
			}
			if got := available(t, sem); got != 3 {
				t.Fatalf("%d of 5 permits left after taking 2", got)
			}
			if err := sem.Release(bg, 2); err != nil || available(t, sem) != 5 {
				t.Fatalf("release: %v, %d", err, available(t, sem))
			}
			if keys, _ := s.do(t, "KEYS", "redisson_lock_request_latch:*").([]any); len(keys) != 0 {
				t.Fatalf("the release's DEL left %v", keys)
			}
		})
	}
	t.Run("release", func(t *testing.T) {
		p := startProxy(t, s.addr(), "SEMAPHORE.RELEASE", false)
		rdb := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1}) // the package's own resend
		t.Cleanup(func() { _ = rdb.Close() })
		c, err := New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		sem := c.Semaphore("sem:lostrelease")
		if err := sem.Release(bg, 3); err != nil {
			t.Fatal(err)
		}
		if !p.fired.Load() {
			t.Fatal("the proxy lost no reply")
		}
		if got := available(t, sem); got != 3 {
			t.Fatalf("%d permits after releasing 3", got)
		}
	})
}

// TestSemaphoreGrantUnheard: a wait granted while its reply is held back
// (the proxy stalls it), then cancelled: CLIENT UNBLOCK finds nobody
// parked, the connection is killed, and no reply ever comes, as on Redis
// 7.0 when the grant and the UNBLOCK share an event-loop turn. The
// acquisition's latch says the permits were taken: they are given back.
func TestSemaphoreGrantUnheard(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := startProxy(t, s.addr(), "SEMAPHORE.ACQUIRE", true)
	sem := proxiedClient(t, p, 0).Semaphore("sem:unheard")
	acquire := func(ctx context.Context) (bool, error) { return sem.Acquire(ctx, 2) }
	ok, err := cancelParked(t, s, "sem:unheard", acquire, func() {
		s.do(t, "SEMAPHORE.RELEASE", "sem:unheard", 2)
		waitFor(t, "the grant held back", p.fired.Load)
		if got := s.do(t, "GET", "sem:unheard"); got != "0" {
			t.Fatalf("count %v after the grant", got)
		}
	})
	if ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v %v", ok, err)
	}
	if got := s.do(t, "GET", "sem:unheard"); got != "2" {
		t.Fatalf("count %v: the unheard grant's permits were not given back", got)
	}
	if keys, _ := s.do(t, "KEYS", "redisson_lock_request_latch:*").([]any); len(keys) != 0 {
		t.Fatalf("the giving back's DEL left %v", keys)
	}
	nobodyWaits(t, s)
}

// TestSemaphoreNotSynced: an acquisition the replicas did not acknowledge
// (one is asked for, none exists) gives its permits back and says so.
func TestSemaphoreNotSynced(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s, WithReplicaSync(ReplicaSync{Enabled: true, Timeout: 100 * time.Millisecond, Replicas: 1}))
	sem := c.Semaphore("sem:sync")
	if err := sem.AddPermits(bg, 2); err != nil {
		t.Fatal(err)
	}
	if ok, err := sem.Acquire(bg, 2, WithWait(0)); ok || !errors.Is(err, ErrNotSynced) {
		t.Fatalf("unacknowledged: %v %v", ok, err)
	}
	if got := available(t, sem); got != 2 {
		t.Fatalf("%d permits after an unacknowledged acquisition of 2", got)
	}
}

package rwlock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var bg = context.Background()

func mustAcquire(t *testing.T, l *Lock, opts ...AcquireOption) {
	t.Helper()
	ok, err := l.Acquire(bg, opts...)
	if err != nil || !ok {
		t.Fatalf("acquire %s: %v %v", l.Name(), ok, err)
	}
}

func mustRelease(t *testing.T, l *Lock) {
	t.Helper()
	if err := l.Release(bg); err != nil {
		t.Fatalf("release %s: %v", l.Name(), err)
	}
}

func TestLockKinds(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	other, _ := newClient(t, s)

	// Plain: re-entry per handle, another handle of the same client refused.
	a, b := c.Lock("kinds:plain"), c.Lock("kinds:plain")
	if a.Owner() == b.Owner() || !strings.HasPrefix(a.Owner(), c.ID()+":") {
		t.Fatalf("owners %s, %s", a.Owner(), b.Owner())
	}
	mustAcquire(t, a, WithWait(0), WithLease(5*time.Second))
	mustAcquire(t, a, WithWait(0), WithLease(5*time.Second))
	if ok, err := b.Acquire(bg, WithWait(0)); ok || err != nil {
		t.Fatalf("second handle: %v %v", ok, err)
	}
	if got := s.do(t, "HGET", "kinds:plain", a.Owner()); got != "2" {
		t.Fatalf("hold count %v", got)
	}
	mustRelease(t, a)
	mustRelease(t, a)
	if err := a.Release(bg); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("third release: %v", err)
	}
	var lockErr *Error
	if err := a.Release(bg); !errors.As(err, &lockErr) || lockErr.Name != "kinds:plain" {
		t.Fatalf("error value: %#v", err)
	}

	// Fenced: tokens grow, across clients.
	f := c.Lock("kinds:fenced", WithFenced())
	mustAcquire(t, f, WithWait(0), WithLease(5*time.Second))
	t1, ok := f.Token()
	if !ok || t1 < 1 {
		t.Fatalf("token %d %v", t1, ok)
	}
	mustRelease(t, f)
	g := other.Lock("kinds:fenced", WithFenced())
	mustAcquire(t, g, WithWait(0), WithLease(5*time.Second))
	if t2, _ := g.Token(); t2 <= t1 {
		t.Fatalf("tokens %d then %d", t1, t2)
	}
	mustRelease(t, g)
	if _, ok := a.Token(); ok {
		t.Fatal("an unfenced lock has a token")
	}

	// Non-reentrant.
	n := c.Lock("kinds:nonreentrant", WithNonReentrant())
	mustAcquire(t, n, WithWait(0), WithLease(5*time.Second))
	if _, err := n.Acquire(bg, WithWait(0)); !errors.Is(err, ErrNotReentrant) {
		t.Fatalf("re-entry: %v", err)
	}
	if !n.Held() {
		t.Fatal("the first hold went with the refused re-entry")
	}
	mustRelease(t, n)

	// Bad input: a clear error, nothing sent.
	if _, err := a.Acquire(bg, WithWait(-time.Second)); err == nil {
		t.Fatal("negative wait accepted")
	}
	if _, err := a.Acquire(bg, WithLease(0)); err == nil {
		t.Fatal("zero lease accepted")
	}
	if _, err := New(redis.NewRing(&redis.RingOptions{})); err == nil {
		t.Fatal("a ring accepted")
	}
	if _, err := New(s.client(), WithClientID("a:b")); err == nil {
		t.Fatal("a client id with ':' accepted")
	}
	// The fencing counter only.
	if left := s.left(t); len(left) != 1 {
		t.Fatalf("left %v", left)
	}

	// Run: the callback under the lock; NotAcquired when busy.
	if err := a.Run(bg, func(ctx context.Context) error {
		if ok, _ := b.Acquire(bg, WithWait(0)); ok {
			return errors.New("b got in")
		}
		return nil
	}, WithWait(time.Second)); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, b, WithWait(0), WithLease(5*time.Second))
	err := a.Run(bg, func(context.Context) error { return errors.New("ran") }, WithWait(0))
	if !errors.As(err, &lockErr) || !errors.Is(err, ErrNotAcquired) || lockErr.PTTL <= 0 {
		t.Fatalf("run on a busy lock: %v", err)
	}
	mustRelease(t, b)
}

func TestReadWriteAndMulti(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	rw := c.ReadWriteLock("rw:doc", WithFenced())
	other := c.ReadWriteLock("rw:doc")
	if rw.Read().Owner() != rw.Write().Owner() {
		t.Fatal("the two sides have different owners")
	}
	mustAcquire(t, rw.Write(), WithWait(0), WithLease(5*time.Second))
	if tok, ok := rw.Write().Token(); !ok || tok < 1 {
		t.Fatal("no write token")
	}
	mustAcquire(t, rw.Read(), WithWait(0), WithLease(5*time.Second)) // downgrade
	if ok, _ := other.Read().Acquire(bg, WithWait(0)); ok {
		t.Fatal("a reader beside a writer")
	}
	mustRelease(t, rw.Write())
	mustAcquire(t, other.Read(), WithWait(0), WithLease(5*time.Second))
	if got := s.do(t, "HGET", "rw:doc", "mode"); got != "read" {
		t.Fatalf("mode %v", got)
	}
	mustRelease(t, rw.Read())
	mustRelease(t, other.Read())
	if _, err := c.ReadWriteLock("x", WithNonReentrant()).Read().Acquire(bg); err == nil {
		t.Fatal("a non-reentrant read-write lock")
	}

	// MultiLock: all or none, renewed by one watchdog, released as one.
	cw, _ := newClient(t, s, WithWatchdogTimeout(time.Second))
	m := cw.MultiLock([]Hold{{KindLock, "{m}:a"}, {KindRead, "{m}:b"}, {KindWrite, "{m}:c"}})
	blocker := c.Lock("{m}:a")
	mustAcquire(t, blocker, WithWait(0), WithLease(5*time.Second))
	if ok, err := m.Acquire(bg, WithWait(0)); ok || err != nil {
		t.Fatalf("multi beside a holder: %v %v", ok, err)
	}
	if got := s.do(t, "EXISTS", "{m}:b", "{m}:c"); got != int64(0) {
		t.Fatal("a refused multi-lock left holds")
	}
	go func() { time.Sleep(300 * time.Millisecond); _ = blocker.Release(bg) }()
	mustAcquire(t, m, WithWait(5*time.Second))
	time.Sleep(1500 * time.Millisecond) // past the 1 s lease: the watchdog renews all three
	if got := s.do(t, "EXISTS", "{m}:a", "{m}:b", "{m}:c"); got != int64(3) {
		t.Fatalf("holds left %v", got)
	}
	mustRelease(t, m)
	if got := s.do(t, "EXISTS", "{m}:a", "{m}:b", "{m}:c"); got != int64(0) {
		t.Fatalf("holds left after release %v", got)
	}
	for _, holds := range [][]Hold{nil, {{"BAD", "x"}}, {{KindLock, "x"}, {KindRead, "x"}}} {
		if _, err := c.MultiLock(holds).Acquire(bg); err == nil {
			t.Fatalf("bad holds %v accepted", holds)
		}
	}
}

func TestWatchdog(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s, WithWatchdogTimeout(time.Second))
	var lostCalls atomic.Int32
	l := c.Lock("dog:lock", WithOnLost(func(*Lock) { lostCalls.Add(1) }))
	mustAcquire(t, l, WithWait(0))
	done := l.Done()
	time.Sleep(3500 * time.Millisecond)
	if pttl, _ := s.do(t, "PTTL", "dog:lock").(int64); pttl <= 0 || !l.Held() || l.Lost() {
		t.Fatalf("after 3.5 s: pttl %d held %v lost %v", pttl, l.Held(), l.Lost())
	}
	select {
	case <-done:
		t.Fatal("done closed while held")
	default:
	}
	s.do(t, "LOCK.FORCEUNLOCK", "dog:lock")
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a renewal (every 333 ms) finds it; late on a loaded machine
		t.Fatal("the loss was not reported within 10 s")
	}
	if !l.Lost() || l.Held() || lostCalls.Load() != 1 {
		t.Fatalf("lost %v held %v callbacks %d", l.Lost(), l.Held(), lostCalls.Load())
	}
	if err := l.Release(bg); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release after the loss: %v", err)
	}
	// Run's context ends with the hold.
	err := l.Run(bg, func(ctx context.Context) error {
		s.do(t, "LOCK.FORCEUNLOCK", "dog:lock")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the run's context outlived the hold")
		}
	})
	if !errors.Is(err, ErrNotHeld) || strings.Contains(err.Error(), "outlived") {
		t.Fatalf("run: %v", err)
	}
}

func TestWaits(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := impatientClient(t, s)
	holder := c.Lock("wait:lock")
	mustAcquire(t, holder, WithLease(10*time.Second))
	l := c.Lock("wait:lock")

	// A wait longer than the 300 ms read timeout.
	go func() { time.Sleep(1200 * time.Millisecond); _ = holder.Release(bg) }()
	began := time.Now()
	mustAcquire(t, l, WithWait(5*time.Second), WithLease(10*time.Second))
	if d := time.Since(began); d < time.Second {
		t.Fatalf("served after %v", d)
	}
	// The other way round: a wait without limit, cancelled.
	ctx, cancel := context.WithCancel(bg)
	go func() { time.Sleep(500 * time.Millisecond); cancel() }()
	began = time.Now()
	ok, err := holder.Acquire(ctx, WithLease(10*time.Second))
	// Cancelled at 500 ms; a wait without limit would never end: 5 s leave a
	// loaded machine room.
	if ok || !errors.Is(err, context.Canceled) || time.Since(began) > 5*time.Second {
		t.Fatalf("cancelled wait: %v %v after %v", ok, err, time.Since(began))
	}
	if got := s.info(t, "clients", "blocked_clients"); got != "0" {
		t.Fatalf("blocked_clients %s after the cancellation", got)
	}
	// A deadline, likewise.
	ctx, cancel2 := context.WithTimeout(bg, 400*time.Millisecond)
	defer cancel2()
	if ok, err := holder.Acquire(ctx, WithWait(time.Minute)); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v %v", ok, err)
	}
	if got := s.info(t, "clients", "blocked_clients"); got != "0" {
		t.Fatalf("blocked_clients %s after the deadline", got)
	}
	if got := s.do(t, "HLEN", "wait:lock"); got != int64(1) || holder.Held() {
		t.Fatal("a cancelled wait left a hold")
	}
	mustRelease(t, l)
	// The client still works: its connections were not spoiled.
	mustAcquire(t, holder, WithWait(0), WithLease(time.Second))
	mustRelease(t, holder)
}

func TestSession(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s, WithWatchdogTimeout(time.Second))
	l := c.Lock("session:lock", WithSession())
	mustAcquire(t, l, WithWait(0))
	mustAcquire(t, l, WithWait(0)) // re-entry, on the same connection
	if got := s.info(t, "rwlock_sessions", "rwlock_session_holds"); got != "2" {
		t.Fatalf("session holds %s", got)
	}
	time.Sleep(1500 * time.Millisecond) // past the lease: the server keeps it
	if got := s.do(t, "HGET", "session:lock", l.Owner()); got != "2" {
		t.Fatalf("hold count %v", got)
	}
	mustRelease(t, l)
	mustRelease(t, l)
	if got := s.do(t, "EXISTS", "session:lock"); got != int64(0) {
		t.Fatal("not released")
	}
	// The connection closing frees the holds, and the handle says so.
	mustAcquire(t, l, WithWait(0))
	s.do(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
	for deadline := time.Now().Add(10 * time.Second); s.do(t, "EXISTS", "session:lock") != int64(0); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a closed session's hold stayed")
		}
	}
	if err := l.Release(bg); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release after the connection closed: %v", err)
	}
	mustAcquire(t, l, WithWait(0))
	mustRelease(t, l)
}

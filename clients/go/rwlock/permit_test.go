package rwlock

import (
	"context"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// taken is the permits of name taken, from PERMIT.ACQUIRED.
func taken(t *testing.T, p *PermitExpirableSemaphore) int64 {
	t.Helper()
	n, err := p.Acquired(bg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPermitSemaphore(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	p := c.PermitExpirableSemaphore("permit:basic")
	if ok, err := p.TrySetPermits(bg, 3); !ok || err != nil {
		t.Fatalf("try-set: %v %v", ok, err)
	}
	ids, err := p.AcquireN(bg, 2, WithLease(NeverExpires), WithWait(0))
	if len(ids) != 2 || ids[0] == ids[1] || err != nil {
		t.Fatalf("acquire 2: %v %v", ids, err)
	}
	if left, err := p.LeaseTime(bg, ids[0]); left != NeverExpires || err != nil {
		t.Fatalf("lease of a permit that never expires: %v %v", left, err)
	}
	if ids, err := p.AcquireN(bg, 2, WithLease(time.Minute), WithWait(0)); ids != nil || err != nil {
		t.Fatalf("acquire 2 of 1: %v %v", ids, err)
	}
	id, err := p.Acquire(bg, WithLease(time.Minute), WithWait(0))
	if len(id) != 32 || err != nil {
		t.Fatalf("acquire 1: %q %v", id, err)
	}
	if id, err := p.Acquire(bg, WithLease(time.Minute), WithWait(0)); id != "" || err != nil {
		t.Fatalf("acquire of none free: %q %v", id, err)
	}
	if err := p.Release(bg, ids[0], "0123456789abcdef0123456789abcdef"); !errors.Is(err, ErrNotHeld) || taken(t, p) != 3 {
		t.Fatalf("release of one held and one not: %v, %d taken", err, taken(t, p))
	}
	if ok, err := p.TryRelease(bg, id); !ok || err != nil {
		t.Fatalf("try-release: %v %v", ok, err)
	}
	if ok, err := p.TryRelease(bg, id); ok || err != nil {
		t.Fatalf("try-release again: %v %v", ok, err)
	}
	if err := p.Release(bg, ids...); err != nil || taken(t, p) != 0 {
		t.Fatalf("release: %v, %d taken", err, taken(t, p))
	}
	if err := p.SetPermits(bg, 5); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPermits(bg, -1); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Permits(bg); n != 4 || err != nil {
		t.Fatalf("permits: %d %v", n, err)
	}
	if _, err := p.AcquireN(bg, 0); err == nil {
		t.Fatal("0 permits taken")
	}
	if _, err := p.Acquire(bg, WithLease(-time.Second)); err == nil {
		t.Fatal("a negative lease other than NeverExpires taken")
	}
	if err := p.Release(bg); err == nil {
		t.Fatal("a release of no id")
	}
}

// TestPermitWaits: a wait is one PERMIT.ACQUIRE … BLOCK, served when
// another connection releases a permit.
func TestPermitWaits(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := impatientClient(t, s)
	other, _ := newClient(t, s)
	holder := other.PermitExpirableSemaphore("permit:wait")
	if err := holder.AddPermits(bg, 1); err != nil {
		t.Fatal(err)
	}
	id, err := holder.Acquire(bg, WithLease(NeverExpires))
	if err != nil {
		t.Fatal(err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	p := c.PermitExpirableSemaphore("permit:wait")
	type served struct {
		id  string
		err error
	}
	done := make(chan served, 1)
	go func() {
		id, err := p.Acquire(bg, WithLease(time.Minute), WithWait(time.Minute))
		done <- served{id, err}
	}()
	waitFor(t, "the waiter", func() bool { return waiting(t, s, "permit:wait") == 1 })
	select {
	case early := <-done:
		t.Fatalf("served before the release: %+v", early)
	default:
	}
	if err := holder.Release(bg, id); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.id == "" || got.err != nil {
		t.Fatalf("wait: %+v", got)
	}
	if n := calls(t, s, "permit.acquire"); n != 1 {
		t.Fatalf("%d PERMIT.ACQUIRE for one wait", n)
	}
	if err := p.Release(bg, got.id); err != nil {
		t.Fatal(err)
	}
	nobodyWaits(t, s)
}

// TestPermitExpiryServes: a holder that never releases (a raw PERMIT.ACQUIRE
// with a short lease); the waiter is served when its permit expires, with
// no other call: the server returns it at its expiry.
func TestPermitExpiryServes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	s.do(t, "PERMIT.TRYSETPERMITS", "permit:expiry", 1)
	began := time.Now()
	s.do(t, "PERMIT.ACQUIRE", "permit:expiry", 1, 800)
	s.do(t, "CONFIG", "RESETSTAT")
	p := c.PermitExpirableSemaphore("permit:expiry")
	id, err := p.Acquire(bg, WithLease(time.Minute), WithWait(time.Minute))
	if id == "" || err != nil {
		t.Fatalf("wait: %q %v", id, err)
	}
	if d := time.Since(began); d < 800*time.Millisecond {
		t.Fatalf("served after %v, before the holder's permit expired", d)
	}
	for _, command := range []string{"permit.acquire", "permit.available", "permit.acquired", "permit.release"} {
		want := map[bool]int64{true: 1, false: 0}[command == "permit.acquire"]
		if n := calls(t, s, command); n != want {
			t.Fatalf("%d calls of %s, want %d", n, command, want)
		}
	}
	if err := p.Release(bg, id); err != nil || taken(t, p) != 0 {
		t.Fatalf("release: %v, %d taken", err, taken(t, p))
	}
}

// TestPermitWatchdog: a permit taken without a lease gets the watchdog
// timeout, renewed (PERMIT.UPDATELEASE) past it until released; then no
// renewal is sent. A permit released by someone else is reported lost.
func TestPermitWatchdog(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const timeout = 600 * time.Millisecond
	lost := make(chan string, 1)
	c, _ := newClient(t, s, WithWatchdogTimeout(timeout))
	p := c.PermitExpirableSemaphore("permit:dog", WithOnPermitLost(func(id string) { lost <- id }))
	if err := p.AddPermits(bg, 2); err != nil {
		t.Fatal(err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	id, err := p.Acquire(bg, WithWait(0))
	if id == "" || err != nil {
		t.Fatalf("acquire: %q %v", id, err)
	}
	began := time.Now()
	waitFor(t, "renewals past three timeouts", func() bool {
		return time.Since(began) > 3*timeout && calls(t, s, "permit.updatelease") >= 3
	})
	if left, err := p.LeaseTime(bg, id); left <= 0 || left > timeout || err != nil {
		t.Fatalf("lease left %v %v", left, err)
	}
	if taken(t, p) != 1 {
		t.Fatal("the permit expired under the watchdog")
	}
	// A release refused (an id not held): the permit stays held, renewed.
	if err := p.Release(bg, id, "0123456789abcdef0123456789abcdef"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("a release with an id not held: %v", err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	refused := time.Now()
	waitFor(t, "renewals past a timeout after the refused release", func() bool {
		return time.Since(refused) > timeout && calls(t, s, "permit.updatelease") >= 2
	})
	if taken(t, p) != 1 {
		t.Fatal("the permit expired after a refused release")
	}
	if err := p.Release(bg, id); err != nil {
		t.Fatal(err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	time.Sleep(2 * timeout) // renewals would come every 200 ms
	if n := calls(t, s, "permit.updatelease"); n != 0 {
		t.Fatalf("%d renewals after the release", n)
	}

	// Released behind the handle's back: the next renewal finds it gone.
	id, err = p.Acquire(bg, WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	s.do(t, "PERMIT.RELEASE", "permit:dog", id)
	select {
	case got := <-lost:
		if got != id {
			t.Fatalf("lost %q, not %q", got, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the watchdog never reported the permit lost")
	}
}

// TestPermitLostReplies: an acquisition's reply is lost (the proxy closes
// the connection); its resend, with the same request id, is answered with
// the same ids and takes nothing, and the release's DEL takes its latch.
// A release's lost reply is returned, never resent.
func TestPermitLostReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	raw, _ := newClient(t, s)
	pa := startProxy(t, s.addr(), "PERMIT.ACQUIRE", false)
	p := proxiedClient(t, pa, 0).PermitExpirableSemaphore("permit:lost")
	if err := raw.PermitExpirableSemaphore("permit:lost").AddPermits(bg, 5); err != nil {
		t.Fatal(err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	ids, err := p.AcquireN(bg, 2, WithLease(time.Minute), WithWait(0))
	if len(ids) != 2 || err != nil {
		t.Fatalf("acquire: %v %v", ids, err)
	}
	if !pa.fired.Load() {
		t.Fatal("the proxy lost no reply")
	}
	if n := calls(t, s, "permit.acquire"); n != 2 {
		t.Fatalf("%d PERMIT.ACQUIRE, want the first send and its resend", n)
	}
	// The set holds the ids' bytes, which Redisson shows in hex.
	members, _ := s.do(t, "ZRANGE", "{permit:lost}:timeout", 0, -1).([]any)
	held := map[string]bool{}
	for _, m := range members {
		held[hex.EncodeToString([]byte(m.(string)))] = true
	}
	if len(held) != 2 || !held[ids[0]] || !held[ids[1]] {
		t.Fatalf("taken %v, replied %v", held, ids)
	}
	if err := p.Release(bg, ids...); err != nil || taken(t, p) != 0 {
		t.Fatalf("release: %v, %d taken", err, taken(t, p))
	}
	if keys, _ := s.do(t, "KEYS", "redisson_lock_request_latch:*").([]any); len(keys) != 0 {
		t.Fatalf("the release's DEL left %v", keys)
	}

	pr := startProxy(t, s.addr(), "PERMIT.RELEASE", false)
	q := proxiedClient(t, pr, 0).PermitExpirableSemaphore("permit:lost")
	id, err := q.Acquire(bg, WithLease(time.Minute), WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	s.do(t, "CONFIG", "RESETSTAT")
	if err := q.Release(bg, id); err == nil || errors.Is(err, ErrNotHeld) {
		t.Fatalf("a lost release reply: %v", err)
	}
	if n := calls(t, s, "permit.release"); n != 1 || taken(t, p) != 0 {
		t.Fatalf("%d PERMIT.RELEASE, %d taken: want one send that released", n, taken(t, p))
	}
}

// TestPermitCancelled: a wait ended by its context (cancelled, or its
// deadline) ends on the server too, and takes nothing; so does one that
// ran out.
func TestPermitCancelled(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	p := c.PermitExpirableSemaphore("permit:cancel")
	endedWaits(t, s, "permit:cancel", func(ctx context.Context, opts ...AcquireOption) (bool, error) {
		ids, err := p.AcquireN(ctx, 2, opts...)
		return ids != nil, err
	})
	if err := p.AddPermits(bg, 2); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.AcquireN(bg, 2, WithWait(0), WithLease(time.Minute)); len(ids) != 2 || err != nil {
		t.Fatalf("the client after the cancellations: %v %v", ids, err)
	}
}

// TestPermitGrantUnheard: a wait granted while its reply is held back,
// then cancelled (see TestSemaphoreGrantUnheard): the latch says the
// permits were taken, the request id asked again names them, and they are
// given back.
func TestPermitGrantUnheard(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	pa := startProxy(t, s.addr(), "PERMIT.ACQUIRE", true)
	p := proxiedClient(t, pa, 0).PermitExpirableSemaphore("permit:unheard")
	acquire := func(ctx context.Context) (bool, error) {
		ids, err := p.AcquireN(ctx, 2, WithLease(NeverExpires))
		return ids != nil, err
	}
	ok, err := cancelParked(t, s, "permit:unheard", acquire, func() {
		s.do(t, "PERMIT.ADDPERMITS", "permit:unheard", 2)
		waitFor(t, "the grant held back", pa.fired.Load)
		if got := s.do(t, "PERMIT.ACQUIRED", "permit:unheard"); got != int64(2) {
			t.Fatalf("%v taken after the grant", got)
		}
	})
	if ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v %v", ok, err)
	}
	if got := s.do(t, "PERMIT.ACQUIRED", "permit:unheard"); got != int64(0) {
		t.Fatalf("%v taken: the unheard grant's permits were not given back", got)
	}
	if keys, _ := s.do(t, "KEYS", "redisson_lock_request_latch:*").([]any); len(keys) != 0 {
		t.Fatalf("the giving back's DEL left %v", keys)
	}
	nobodyWaits(t, s)
}

// TestPermitNotSynced: an acquisition the replicas did not acknowledge
// gives its ids back and says so; its watchdog never starts.
func TestPermitNotSynced(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s, WithReplicaSync(ReplicaSync{Enabled: true, Timeout: 100 * time.Millisecond, Replicas: 1}))
	var lost atomic.Int64
	p := c.PermitExpirableSemaphore("permit:sync", WithOnPermitLost(func(string) { lost.Add(1) }))
	if err := p.AddPermits(bg, 2); err != nil {
		t.Fatal(err)
	}
	if ids, err := p.AcquireN(bg, 2, WithWait(0)); ids != nil || !errors.Is(err, ErrNotSynced) {
		t.Fatalf("unacknowledged: %v %v", ids, err)
	}
	if got := taken(t, p); got != 0 {
		t.Fatalf("%d taken after an unacknowledged acquisition", got)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dogs) != 0 {
		t.Fatalf("watchdogs of permits given back: %v", p.dogs)
	}
}

package rwlock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// NeverExpires, given to [WithLease], takes permits that never expire
// (lease -1, Redisson's leaseTime -1): no watchdog renews them. Only a
// [PermitExpirableSemaphore] takes it.
const NeverExpires time.Duration = -1

// PermitOption configures a [PermitExpirableSemaphore] handle.
type PermitOption func(*PermitExpirableSemaphore)

// WithOnPermitLost sets a callback the watchdog calls, from its goroutine,
// with the id of a permit it renewed and found gone (its lease ran out, or
// the count was reset): the permit no longer guards anything.
func WithOnPermitLost(fn func(id string)) PermitOption {
	return func(s *PermitExpirableSemaphore) { s.onLost = fn }
}

// PermitExpirableSemaphore is Redisson's RPermitExpirableSemaphore on the
// module's PERMIT.* commands: a count of free permits under its name, and
// the permits taken, each an id (32 hex digits) with its own lease, in
// {name}:timeout. Make it with [Client.PermitExpirableSemaphore]; it is
// safe for concurrent use, and one handle may serve every goroutine.
//
// A permit is given back by its id, by anyone who has it. A permit whose
// lease runs out comes back on its own: the server returns it at its
// expiry and serves the waiters then. Taken without [WithLease], a permit
// gets the client's watchdog timeout, renewed every third of it
// (PERMIT.UPDATELEASE) until it is released; with [WithLease]([NeverExpires])
// it never expires.
//
// Waits, request ids and replica acknowledgement are a [Semaphore]'s: a
// wait happens on the server in arrival order; an acquisition's lost reply
// is resent once with the same request id, and the server answers it with
// the same ids, taking nothing; its latch is deleted in the pipeline of
// the handle's next release. Permits taken and not acknowledged by the
// replicas are given back and [ErrNotSynced] returned. A release carries
// no request id: its lost reply is returned as an error, never resent.
type PermitExpirableSemaphore struct {
	c       *Client
	name    string
	onLost  func(id string)
	latches latchBook // for the next release to delete

	mu   sync.Mutex
	dogs map[string]*watchdog // by permit id: the lease-less permits held
}

// PermitExpirableSemaphore makes a handle on the permit-expirable
// semaphore name (Redisson's RPermitExpirableSemaphore). Nothing is sent
// until a call.
func (c *Client) PermitExpirableSemaphore(name string, opts ...PermitOption) *PermitExpirableSemaphore {
	s := &PermitExpirableSemaphore{c: c, name: name, dogs: map[string]*watchdog{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Name is the semaphore's name: the key of its free count.
func (s *PermitExpirableSemaphore) Name() string { return s.name }

// Acquire takes one permit and returns its id (Redisson's acquire() and
// tryAcquire()), or "" when the wait ran out first. The wait ([WithWait];
// default without limit, 0: one try) happens on the server on a connection
// of its own; ctx ending stops it and Acquire returns ctx's error holding
// nothing. [WithLease] gives the permit a lease ([NeverExpires]: none);
// without it the watchdog renews it. Errors: [ErrNotSynced], go-redis's.
func (s *PermitExpirableSemaphore) Acquire(ctx context.Context, opts ...AcquireOption) (string, error) {
	ids, err := s.AcquireN(ctx, 1, opts...)
	if len(ids) == 0 {
		return "", err
	}
	return ids[0], err
}

// AcquireN takes permits (1 or more) at once, each with its own id and the
// same lease, and returns their ids (Redisson's acquire(n) and
// tryAcquire(n, …)), or nil when the wait ran out first; otherwise as
// [PermitExpirableSemaphore.Acquire].
func (s *PermitExpirableSemaphore) AcquireN(ctx context.Context, permits int64, opts ...AcquireOption) ([]string, error) {
	if err := checkPermits(permits); err != nil {
		return nil, err
	}
	r, err := newPermitRequest(opts, s.c.watchdogTimeout)
	if err != nil {
		return nil, err
	}
	var ids []string // the driver reads one reply: the grant's, or none
	a := acquirer{
		name: s.name,
		args: func(r request, id string) []any { return s.acquireArgs(permits, r, id) },
		read: func(reply any, _ request) (outcome, error) {
			var err error
			ids, err = permitIDs(reply, permits)
			return outcome{acquired: ids != nil}, err
		},
		undo: func(*link, request) error { return s.giveBack(ids) },
		// A grant never heard of would hold its permits until their lease
		// ends (never, for NeverExpires): its latch says whether it was
		// made, and the request id asked again replies its ids.
		unheard: func(id string) error {
			ctx, cancel := context.WithTimeout(context.Background(), replyMargin)
			defer cancel()
			key := acquireLatchKey(s.name, id)
			granted, err := integerOf(s.c.command(ctx, s.name, "EXISTS", key))
			if err != nil || granted == 0 {
				return err
			}
			replayed, err := s.c.command(ctx, s.name, s.acquireArgs(permits, request{leaseMs: r.leaseMs, block: -1}, id)...)
			if err != nil {
				return err
			}
			lost, err := permitIDs(replayed, permits)
			if err != nil {
				return err
			}
			s.latches.acquiredAt(key) // for this release's DEL
			return s.giveBack(lost)
		},
		requested: true,
	}
	o, _, id, err := s.c.acquire(ctx, a, r, nil)
	if err != nil || !o.acquired {
		return nil, err
	}
	s.latches.acquiredAt(acquireLatchKey(s.name, id))
	if r.watched {
		lease := time.Duration(r.leaseMs) * time.Millisecond
		s.mu.Lock()
		for _, id := range ids {
			s.watch(id, lease)
		}
		s.mu.Unlock()
	}
	return ids, nil
}

// newPermitRequest is an acquisition's request, a lock's but for
// [NeverExpires] (lease -1, no watchdog).
func newPermitRequest(opts []AcquireOption, watchdogTimeout time.Duration) (request, error) {
	if cfg := configure(opts); cfg.leaseSet && cfg.lease == NeverExpires {
		r, err := cfg.waitRequest()
		r.leaseMs = -1
		return r, err
	}
	return newRequest(opts, watchdogTimeout)
}

func (s *PermitExpirableSemaphore) acquireArgs(permits int64, r request, id string) []any {
	return options([]any{"PERMIT.ACQUIRE", s.name, permits, r.leaseMs}, r, false, id)
}

// permitIDs reads an acquisition's reply: the ids (an array, for one
// permit too); nil when refused (the nearest expiry, or nil).
func permitIDs(reply any, permits int64) ([]string, error) {
	switch v := reply.(type) {
	case nil, int64:
		return nil, nil
	case []any:
		ids := make([]string, 0, len(v))
		for _, e := range v {
			if id, ok := e.(string); ok {
				ids = append(ids, id)
			}
		}
		if int64(len(ids)) == permits && len(ids) == len(v) {
			return ids, nil
		}
	}
	return nil, fmt.Errorf("rwlock: unexpected PERMIT.ACQUIRE reply %#v", reply)
}

// watch starts the watchdog of the lease-less permit id; under mu.
func (s *PermitExpirableSemaphore) watch(id string, lease time.Duration) {
	renew := func(ctx context.Context) (bool, error) {
		return oneOf(s.c.command(ctx, s.name, "PERMIT.UPDATELEASE", s.name, id, lease.Milliseconds()))
	}
	s.dogs[id] = startWatchdog(lease, renew, func(dog *watchdog) { s.markLost(id, dog) })
}

// markLost is a watchdog's report that its permit is gone.
func (s *PermitExpirableSemaphore) markLost(id string, dog *watchdog) {
	s.mu.Lock()
	mine := s.dogs[id] == dog
	if mine {
		delete(s.dogs, id)
	}
	s.mu.Unlock()
	if mine && s.onLost != nil {
		s.onLost(id)
	}
}

// unwatch stops the watchdogs of ids (released, or given a lease of the
// caller's own) and returns the leases they renewed, by id.
func (s *PermitExpirableSemaphore) unwatch(ids []string) map[string]time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	stopped := map[string]time.Duration{}
	for _, id := range ids {
		if dog := s.dogs[id]; dog != nil {
			dog.halt()
			delete(s.dogs, id)
			stopped[id] = dog.lease
		}
	}
	return stopped
}

// Release gives permits back by id, all or none (Redisson's release(id)
// and release(ids)): [ErrNotHeld] when the server released none, because
// one is not held (never taken, released, or its lease ran out): the
// watchdogs of the ids go on (those not held report them lost), as the
// permits held do. Otherwise their watchdogs stop. Sent once, in one pipeline with the DEL of this handle's
// acquisitions' latches: a lost reply is returned as an error, never
// resent (a resend could not tell its own release from an expiry).
func (s *PermitExpirableSemaphore) Release(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return fmt.Errorf("rwlock: no permit id to release")
	}
	// Stopped first: a renewal after the release would report the permit
	// lost. A release whose reply is lost may have run: the permit, if it
	// did not, ends at its lease.
	stopped := s.unwatch(ids)
	released, err := integerOf(s.release(ctx, append([]any{"PERMIT.RELEASE", s.name}, stringArgs(ids)...)))
	if err == nil && released == 0 {
		s.mu.Lock()
		for id, lease := range stopped {
			s.watch(id, lease)
		}
		s.mu.Unlock()
		return newError(ErrNotHeld, s.name, fmt.Sprintf("permits %v not held", ids))
	}
	return err
}

// TryRelease gives one permit back by id (Redisson's tryRelease(id)): true
// when it was held; false when its lease had run out (it came back all the
// same) or it is not held. Its watchdog stops. Sent once, as
// [PermitExpirableSemaphore.Release].
func (s *PermitExpirableSemaphore) TryRelease(ctx context.Context, id string) (bool, error) {
	s.unwatch([]string{id}) // its lease ran out, or it is released
	return oneOf(s.release(ctx, []any{"PERMIT.TRYRELEASE", s.name, id}))
}

// release sends a release once, with the DEL of the latches in its
// pipeline.
func (s *PermitExpirableSemaphore) release(ctx context.Context, args []any) (any, error) {
	rs, err := s.c.oncePipeline(ctx, s.name, s.latches.withDel(args))
	if err != nil {
		return nil, err
	}
	return rs[0].reply, rs[0].err
}

// giveBack releases what an acquisition took and must not keep (its wait
// was cancelled, the replicas did not acknowledge it, or its reply never
// came); a failure here is reported with the acquisition's.
func (s *PermitExpirableSemaphore) giveBack(ids []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), replyMargin)
	defer cancel()
	return s.Release(ctx, ids...)
}

func stringArgs(ids []string) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// UpdateLease gives a held permit a new lease from now ([NeverExpires]:
// none; Redisson's updateLeaseTime): true when it is held. The watchdog, if
// it renewed the permit, stops: the lease is the caller's now.
func (s *PermitExpirableSemaphore) UpdateLease(ctx context.Context, id string, lease time.Duration) (bool, error) {
	ms := int64(-1)
	if lease != NeverExpires {
		var err error
		if ms, err = millis(lease, "lease"); err != nil {
			return false, err
		}
	}
	s.unwatch([]string{id})
	return oneOf(s.c.command(ctx, s.name, "PERMIT.UPDATELEASE", s.name, id, ms))
}

// LeaseTime is what a permit's lease has left (Redisson's getLeaseTime):
// [NeverExpires] when it never expires, 0 when it is not held.
func (s *PermitExpirableSemaphore) LeaseTime(ctx context.Context, id string) (time.Duration, error) {
	ms, err := integerOf(s.c.command(ctx, s.name, "PERMIT.LEASETIME", s.name, id))
	if err != nil {
		return 0, err
	}
	if ms == -1 {
		return NeverExpires, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// TrySetPermits sets the free count when the semaphore has none
// (Redisson's trySetPermits(n)): true when set, false when a count exists.
// Sent once: a lost reply is returned as an error, never resent.
func (s *PermitExpirableSemaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	return oneOf(s.c.once(ctx, s.name, "PERMIT.TRYSETPERMITS", s.name, permits))
}

// SetPermits makes free plus taken permits the total given (Redisson's
// setPermits(n)), serving the waiters it can. Sent once, as TrySetPermits.
func (s *PermitExpirableSemaphore) SetPermits(ctx context.Context, permits int64) error {
	_, err := s.c.once(ctx, s.name, "PERMIT.SETPERMITS", s.name, permits)
	return err
}

// AddPermits adds permits to the free count, a negative number taking them
// away (Redisson's addPermits(n)), serving the waiters it can. Sent once: a
// resend would add twice.
func (s *PermitExpirableSemaphore) AddPermits(ctx context.Context, permits int64) error {
	_, err := s.c.once(ctx, s.name, "PERMIT.ADDPERMITS", s.name, permits)
	return err
}

// Available is the count of free permits, expired ones returned first
// (Redisson's availablePermits(); 0 without a count).
func (s *PermitExpirableSemaphore) Available(ctx context.Context) (int64, error) {
	return s.count(ctx, "PERMIT.AVAILABLE")
}

// Acquired is how many permits are taken (Redisson's acquiredPermits()).
func (s *PermitExpirableSemaphore) Acquired(ctx context.Context) (int64, error) {
	return s.count(ctx, "PERMIT.ACQUIRED")
}

// Permits is free plus taken (Redisson's getPermits(); 0 without a count).
func (s *PermitExpirableSemaphore) Permits(ctx context.Context) (int64, error) {
	return s.count(ctx, "PERMIT.PERMITS")
}

func (s *PermitExpirableSemaphore) count(ctx context.Context, command string) (int64, error) {
	return integerOf(s.c.command(ctx, s.name, command, s.name))
}

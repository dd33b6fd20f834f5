package rwlock

import (
	"context"
	"fmt"
	"time"
)

// Semaphore is Redisson's RSemaphore on the module's SEMAPHORE.* commands:
// a count of permits under its name, taken and given back by anyone
// (permits have no owner). Make it with [Client.Semaphore]; it is safe for
// concurrent use, and one handle may serve every goroutine.
//
// A wait happens on the server (BLOCK), as a lock's: waiters are served in
// arrival order, all of a waiter's permits at once (a waiter for 3 is never
// starved by takers of 1), and a new acquisition never passes them: a wait
// queues behind them, a try ([WithWait](0)) is refused even with permits
// free. Acquisitions and releases carry request ids: a lost reply is
// resent once and never takes or gives permits twice; their latches are
// deleted in the pipeline of the handle's next release. An acquisition
// that never heard its reply looks its latch up and gives back what was
// granted. Acquisitions wait for the replicas as a lock's do
// ([ReplicaSync]): permits taken and not acknowledged are given back and
// [ErrNotSynced] returned.
type Semaphore struct {
	c       *Client
	name    string
	latches latchBook // for the next release to delete
}

// Semaphore makes a handle on the semaphore name (Redisson's
// RSemaphore). Nothing is sent until a call.
func (c *Client) Semaphore(name string) *Semaphore {
	return &Semaphore{c: c, name: name}
}

// Name is the semaphore's name: the key of its count.
func (s *Semaphore) Name() string { return s.name }

// Acquire takes permits (1 or more) at once; true when taken, false when
// the wait ran out first. The wait ([WithWait]; default without limit, 0:
// one try, Redisson's tryAcquire(n)) happens on the server on a connection
// of its own, so it may be longer than the go-redis client's ReadTimeout;
// ctx ending stops it (on the server too) and Acquire returns ctx's error
// holding nothing. [WithLease] is refused: permits have none. Errors:
// [ErrNotSynced], go-redis's.
func (s *Semaphore) Acquire(ctx context.Context, permits int64, opts ...AcquireOption) (bool, error) {
	if err := checkPermits(permits); err != nil {
		return false, err
	}
	r, err := newWait(opts, "a semaphore")
	if err != nil {
		return false, err
	}
	a := acquirer{
		name: s.name,
		args: func(r request, id string) []any {
			return options([]any{"SEMAPHORE.ACQUIRE", s.name, permits}, r, false, id)
		},
		read: readOne,
		undo: func(*link, request) error {
			// A permit has no lease: one not given back is gone for good,
			// so a failure here is reported with the acquisition's.
			ctx, cancel := context.WithTimeout(context.Background(), replyMargin)
			defer cancel()
			return s.Release(ctx, permits)
		},
		// Permits have no lease: a grant never heard of would be taken
		// for good.
		unheard: func(id string) error {
			key := acquireLatchKey(s.name, id)
			ctx, cancel := context.WithTimeout(context.Background(), replyMargin)
			defer cancel()
			granted, err := integerOf(s.c.command(ctx, s.name, "EXISTS", key))
			if err != nil || granted == 0 {
				return err
			}
			s.latches.acquiredAt(key) // for this release's DEL
			return s.Release(ctx, permits)
		},
		requested: true,
	}
	o, _, id, err := s.c.acquire(ctx, a, r, nil)
	if err != nil || !o.acquired {
		return false, err
	}
	s.latches.acquiredAt(acquireLatchKey(s.name, id))
	return true, nil
}

// Release gives permits (1 or more) back (Redisson's release(n)); anyone
// may, whoever took them. A missing count starts at 0. The command carries
// a request id and, in its pipeline, the DEL of the latches of this
// handle's acquisitions and releases before; resent once after a lost
// reply, it is answered from the server's latch and gives nothing twice.
func (s *Semaphore) Release(ctx context.Context, permits int64) error {
	if err := checkPermits(permits); err != nil {
		return err
	}
	_, err := s.latches.release(ctx, s.c, s.name, func(id string) []any {
		return []any{"SEMAPHORE.RELEASE", s.name, permits, "REQUEST", id, unlockLatchTTL}
	})
	return err
}

// TrySetPermits sets the count to permits when the semaphore has none
// (Redisson's trySetPermits(n)): true when set, false when a count exists.
// Sent once: a lost reply is returned as an error, never resent (a resend
// would answer false for a count it set).
func (s *Semaphore) TrySetPermits(ctx context.Context, permits int64) (bool, error) {
	return s.trySet(ctx, []any{"SEMAPHORE.TRYSETPERMITS", s.name, permits})
}

// TrySetPermitsTTL is [Semaphore.TrySetPermits] for a semaphore that lives
// ttl (Redisson's trySetPermits(n, ttl)): acquisitions and releases keep
// that deadline, [Semaphore.AddPermits] and [Semaphore.Drain] drop it.
func (s *Semaphore) TrySetPermitsTTL(ctx context.Context, permits int64, ttl time.Duration) (bool, error) {
	ms, err := millis(ttl, "semaphore TTL")
	if err != nil {
		return false, err
	}
	return s.trySet(ctx, []any{"SEMAPHORE.TRYSETPERMITS", s.name, permits, "TTL", ms})
}

func (s *Semaphore) trySet(ctx context.Context, args []any) (bool, error) {
	return oneOf(s.c.once(ctx, s.name, args...))
}

// AddPermits adds permits to the count, a negative number taking them away
// (the count may go below 0), and serves the waiters it can (Redisson's
// addPermits(n)). Sent once: a lost reply is returned as an error, never
// resent (a resend would add twice).
func (s *Semaphore) AddPermits(ctx context.Context, permits int64) error {
	_, err := s.c.once(ctx, s.name, "SEMAPHORE.ADDPERMITS", s.name, permits)
	return err
}

// Drain takes every free permit and returns how many there were (0 when
// the count is 0, below, or missing; Redisson's drainPermits()). Sent once,
// as [Semaphore.AddPermits].
func (s *Semaphore) Drain(ctx context.Context) (int64, error) {
	return integerOf(s.c.once(ctx, s.name, "SEMAPHORE.DRAIN", s.name))
}

// Available is the count of free permits (Redisson's availablePermits();
// 0 without a count, negative after [Semaphore.AddPermits] took more than
// were free).
func (s *Semaphore) Available(ctx context.Context) (int64, error) {
	return integerOf(s.c.command(ctx, s.name, "SEMAPHORE.AVAILABLE", s.name))
}

// checkPermits refuses what the server would (and Redisson runs nothing
// for 0), before any I/O.
func checkPermits(permits int64) error {
	if permits < 1 {
		return fmt.Errorf("rwlock: permits must be 1 or more: %d", permits)
	}
	return nil
}

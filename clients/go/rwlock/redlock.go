package rwlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Defaults of a [RedLock]: each node's answer is waited for at most
// DefaultNodeTimeout (no retry); a failed round is retried after a random
// pause around DefaultRetryDelay.
const (
	DefaultNodeTimeout = 100 * time.Millisecond
	DefaultRetryDelay  = 200 * time.Millisecond
)

// RedLock runs the Redlock algorithm over independent masters (not one
// cluster's nodes), as Redisson's deprecated RedissonRedLock: it takes the
// plain lock on each node in turn, each bounded by the node timeout, and
// holds it when a majority (N/2+1) said yes with validity left, validity =
// lease − elapsed − drift (1% of the lease + 2 ms). Otherwise it releases on
// every node and retries after a random pause until the wait runs out.
// No watchdog: pick a lease longer than the work.
//
// Why not to use it: Redisson deprecated RedissonRedLock in 3.12.5 after
// Martin Kleppmann's analysis ("How to do distributed locking"): no
// lease-based lock can stop a holder that paused (GC, swapping, a slow
// network) past its lease from acting after the next holder started, and
// Redlock's safety also rests on bounded clock drift and pauses and on nodes
// not restarting without their data. It buys availability when a minority
// of nodes is down, not correctness. When correctness matters use one
// [WithFenced] lock on a master with replicas and have the storage refuse writes
// carrying a token lower than the highest it saw.
type RedLock struct {
	name        string
	nodes       []*Client
	owner       string
	nodeTimeout time.Duration
	retryDelay  time.Duration

	mu         sync.Mutex
	held       bool
	validUntil time.Time
}

// RedLockOption configures a [RedLock].
type RedLockOption func(*RedLock) error

// WithNodeTimeout bounds each node's answer (default 100 ms).
func WithNodeTimeout(d time.Duration) RedLockOption {
	return func(r *RedLock) error {
		if d <= 0 {
			return errors.New("rwlock: a node timeout must be positive")
		}
		r.nodeTimeout = d
		return nil
	}
}

// WithRetryDelay sets the mean pause between rounds (default 200 ms).
func WithRetryDelay(d time.Duration) RedLockOption {
	return func(r *RedLock) error {
		if d <= 0 {
			return errors.New("rwlock: a retry delay must be positive")
		}
		r.retryDelay = d
		return nil
	}
}

// NewRedLock makes a RedLock on name over nodes, one [Client] per
// independent master. The owner is the first node client's UUID and an id
// of this handle's.
func NewRedLock(name string, nodes []*Client, opts ...RedLockOption) (*RedLock, error) {
	if len(nodes) == 0 {
		return nil, errors.New("rwlock: a RedLock needs at least one node")
	}
	for _, n := range nodes {
		if n == nil {
			return nil, errors.New("rwlock: a RedLock node is nil")
		}
	}
	r := &RedLock{
		name:        name,
		nodes:       append([]*Client(nil), nodes...),
		owner:       nodes[0].newOwner(),
		nodeTimeout: DefaultNodeTimeout,
		retryDelay:  DefaultRetryDelay,
	}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Name is the lock's name.
func (r *RedLock) Name() string { return r.name }

// Owner is the owner sent to every node.
func (r *RedLock) Owner() string { return r.owner }

// Held tells whether the lock is held and its validity not yet over.
func (r *RedLock) Held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held && time.Now().Before(r.validUntil)
}

// ValidUntil is when the current hold's validity ends (zero when not held).
func (r *RedLock) ValidUntil() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.validUntil
}

// Acquire runs rounds until a majority grants the lock (true) or the wait
// ([WithWait]; default without limit, 0: one round) runs out (false), or ctx
// ends (its error). [WithLease] is the lease on each node (default the first
// client's watchdog timeout; never renewed).
func (r *RedLock) Acquire(ctx context.Context, opts ...AcquireOption) (bool, error) {
	req, err := newRequest(opts, r.nodes[0].watchdogTimeout)
	if err != nil {
		return false, err
	}
	lease := time.Duration(req.leaseMs) * time.Millisecond
	drift := lease/100 + 2*time.Millisecond
	var deadline time.Time
	if req.block > 0 {
		deadline = time.Now().Add(time.Duration(req.block) * time.Millisecond)
	}
	quorum := len(r.nodes)/2 + 1
	for {
		start := time.Now()
		granted := 0
		for _, n := range r.nodes {
			reply, err := r.call(ctx, n, "LOCK.ACQUIRE", r.name, r.owner, req.leaseMs)
			if err == nil && reply == nil {
				granted++
			}
		}
		validity := lease - time.Since(start) - drift
		if granted >= quorum && validity > 0 {
			r.mu.Lock()
			r.held, r.validUntil = true, start.Add(validity)
			r.mu.Unlock()
			return true, nil
		}
		r.releaseAll(ctx)
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if req.block < 0 || (req.block > 0 && !time.Now().Before(deadline)) {
			return false, nil
		}
		pause := r.retryDelay/2 + rand.N(r.retryDelay)
		if req.block > 0 {
			pause = min(pause, time.Until(deadline))
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// Release releases the lock on every node; [ErrNotHeld] when no node had it.
func (r *RedLock) Release(ctx context.Context) error {
	released := r.releaseAll(ctx)
	r.mu.Lock()
	r.held, r.validUntil = false, time.Time{}
	r.mu.Unlock()
	if released == 0 {
		return newError(ErrNotHeld, r.name, "no node held it for "+r.owner)
	}
	return nil
}

// releaseAll unlocks on every node; how many had a hold of the owner.
func (r *RedLock) releaseAll(ctx context.Context) int {
	released := 0
	for _, n := range r.nodes {
		reply, err := r.call(context.WithoutCancel(ctx), n, "LOCK.UNLOCK", r.name, r.owner)
		if err == nil && reply != nil {
			released++
		}
	}
	return released
}

// call sends one command to a node within the node timeout, without retry,
// on the node's wait pool (its deadlines follow the context).
func (r *RedLock) call(ctx context.Context, n *Client, args ...any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
	defer cancel()
	node, err := n.node(ctx, r.name)
	if err != nil {
		return nil, err
	}
	w, err := n.waiter(node.Options(), node.Options().Addr)
	if err != nil {
		return nil, err
	}
	return nilReply(w.Do(ctx, args...).Result())
}

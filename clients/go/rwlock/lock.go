package rwlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// LockOption configures a lock handle made by a [Client].
type LockOption func(*lockConfig)

type lockConfig struct {
	fenced      bool
	noReentry   bool
	session     bool
	onLost      func(l *Lock)
	fairWait    time.Duration // the fair lock's WAIT, when fairWaitSet
	fairWaitSet bool
}

// WithFenced makes every acquisition take the next fencing token (FENCED,
// Redisson's RFencedLock): [Lock.Token] gives it, for the storage to refuse
// writes of older holders. For a [ReadWriteLock], the write side's.
func WithFenced() LockOption { return func(c *lockConfig) { c.fenced = true } }

// WithNonReentrant makes the holder's second acquisition fail with
// [ErrNotReentrant] (NOREENTRY) instead of adding a hold. Plain and fair
// locks only.
func WithNonReentrant() LockOption { return func(c *lockConfig) { c.noReentry = true } }

// WithSession binds holds to the connection that took them (SESSION): the
// server keeps them alive while it is open and frees them when it closes,
// so a crashed process loses its locks at once. The handle keeps that
// connection out of the pool for the hold's life (re-entries and the
// release use it) and gives it back after the last release. No watchdog.
func WithSession() LockOption { return func(c *lockConfig) { c.session = true } }

// WithFairWait sets a fair lock's thread wait time (WAIT ms; Redisson's
// fairLockWaitTimeout) for the acquisitions without a bounded wait (a wait
// without limit, a try): how long a waiter in the line may be away before
// Redisson's clients count it gone, and how far the waiters' deadlines move
// when one ahead of them acquires or leaves. A bounded wait sends itself,
// as Redisson's tryLock(wait) does. Give the value the Java services sharing
// the line use. Default: the server's rwlock.fair-wait (300 s, Redisson's
// default). Fair locks only.
func WithFairWait(d time.Duration) LockOption {
	return func(c *lockConfig) { c.fairWait, c.fairWaitSet = d, true }
}

// WithOnLost sets a callback the watchdog calls, from its goroutine, when it
// finds the hold gone (the lock forced open, or its lease ran out).
func WithOnLost(fn func(l *Lock)) LockOption { return func(c *lockConfig) { c.onLost = fn } }

// Lock is a lock handle: a plain lock (Redisson's RLock; [WithFenced]:
// RFencedLock; [WithNonReentrant]: the non-reentrant lock), a fair lock
// (RFairLock), one side of a [ReadWriteLock], or a multi-lock (several
// holds as one). Make it with [Client.Lock], [Client.FairLock],
// [ReadWriteLock.Read], [ReadWriteLock.Write] or [Client.MultiLock].
//
// The handle is one owner (<client UUID>:<handle id>): its holds re-enter,
// each [Lock.Acquire] adding one that one [Lock.Release] gives back. A Lock
// is safe for concurrent use, but all its goroutines are that one owner:
// give goroutines that must exclude each other handles of their own. A
// single lock's acquisitions and releases run one at a time, a wait on the
// server included: each sends the handle's count of holds before it (HELD,
// which makes a resend after a lost reply idempotent), which a call beside
// it would change; a call waits for the one in progress or for its context
// to end.
type Lock struct {
	c     *Client
	plan  plan
	name  string
	owner string
	cfg   lockConfig
	err   error // a bad construction, reported by every call

	// turns holds the handle's one call in progress, for the calls that
	// must run one at a time: a single lock's (HELD), a session's (one
	// connection).
	turns chan struct{}

	mu       sync.Mutex
	count    int
	token    int64
	hasToken bool
	lost     bool
	leaseMs  int64
	done     chan struct{} // closed when the hold ends
	ended    bool          // done is closed
	dog      *watchdog
	link     *link // a session's connection
}

func newLock(c *Client, p plan, name, owner string, cfg lockConfig, err error) *Lock {
	done := make(chan struct{})
	close(done)
	return &Lock{c: c, plan: p, name: name, owner: owner, cfg: cfg, err: err, done: done, ended: true, turns: make(chan struct{}, 1)}
}

// turn waits for the handle's turn to acquire or release, when its calls
// run one at a time (see [Lock]), and returns what ends it; ctx's error if
// ctx ended first.
func (l *Lock) turn(ctx context.Context) (func(), error) {
	if !l.plan.counted() && !l.cfg.session {
		return func() {}, nil
	}
	select {
	case l.turns <- struct{}{}:
		return func() { <-l.turns }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// held is the handle's count of holds as the server counts them for its
// owner and kind (HELD): none once the watchdog found the hold gone.
// Called under mu.
func (l *Lock) held() int {
	if l.lost {
		return 0
	}
	return l.count
}

// Name is the lock's name (a multi-lock's first).
func (l *Lock) Name() string { return l.name }

// Owner is the owner this handle sends, <client UUID>:<handle id>.
func (l *Lock) Owner() string { return l.owner }

// Held tells whether this handle holds the lock, as far as this process
// knows (see [Lock.Lost]).
func (l *Lock) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count > 0 && !l.lost
}

// Lost tells whether the watchdog found this handle's hold gone: its lease
// ran out or the lock was forced open. [Lock.Release] then returns
// [ErrNotHeld].
func (l *Lock) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Done returns a channel closed when the current hold ends: released (the
// last hold), or found lost by the watchdog ([Lock.Lost] tells which). With
// no hold, the channel is already closed.
func (l *Lock) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// Token is the fencing token of the handle's latest acquisition, and
// whether there is one (a [WithFenced] lock holding it).
func (l *Lock) Token() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.token, l.hasToken
}

// Acquire takes one hold; true when taken, false when the wait ran out
// first. The wait ([WithWait]; default without limit) happens on the server
// on a connection of its own, so it may be longer than the go-redis
// client's ReadTimeout; ctx ending stops it (on the server too) and
// Acquire returns ctx's error holding nothing. The lease ([WithLease];
// default the watchdog's) is described in the package documentation. After
// the server took it, the replicas are waited for (see [ReplicaSync]).
// Errors: [ErrNotReentrant], [ErrNotSynced], go-redis's.
func (l *Lock) Acquire(ctx context.Context, opts ...AcquireOption) (bool, error) {
	o, err := l.acquire(ctx, opts)
	return o.acquired, err
}

// Run acquires the lock, calls fn with a context that is cancelled if the
// hold is lost, and releases the lock. When the wait runs out it returns an
// *[Error] of kind [ErrNotAcquired] without calling fn.
func (l *Lock) Run(ctx context.Context, fn func(context.Context) error, opts ...AcquireOption) error {
	o, err := l.acquire(ctx, opts)
	if err != nil {
		return err
	}
	if !o.acquired {
		e := newError(ErrNotAcquired, l.name, "the wait ran out")
		e.PTTL = time.Duration(o.pttl) * time.Millisecond
		return e
	}
	done := l.Done()
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-done:
			cancel()
		case <-runCtx.Done():
		}
	}()
	fnErr := fn(runCtx)
	cancel()
	return errors.Join(fnErr, l.Release(context.WithoutCancel(ctx)))
}

func (l *Lock) acquire(ctx context.Context, opts []AcquireOption) (outcome, error) {
	if l.err != nil {
		return outcome{}, l.err
	}
	r, err := newRequest(opts, l.c.watchdogTimeout)
	if err != nil {
		return outcome{}, err
	}
	done, err := l.turn(ctx)
	if err != nil {
		return outcome{}, err
	}
	defer done()
	l.mu.Lock()
	session, held := l.link, l.held()
	l.mu.Unlock()
	a := acquirer{
		name: l.plan.key(),
		args: func(r request, _ string) []any { return l.plan.acquire(l.owner, r, l.cfg.session, held) },
		read: l.plan.outcome,
		// The grant made the count held+1.
		undo:        func(lk *link, r request) error { return l.undo(lk, r, held+1) },
		counted:     l.plan.counted(),
		session:     l.cfg.session,
		abandon:     l.leaveLine,
		sessionLost: l.forget,
	}
	o, kept, _, err := l.c.acquire(ctx, a, r, session)
	if err != nil || !o.acquired {
		return o, err
	}
	l.record(r, o, kept)
	return o, nil
}

// leaveLine takes the owner out of a line (the fair lock's) a failed wait
// may have left it in: the server does so itself when the waiting
// connection closes, but a connection it still believes open would keep
// the owner in the line, holding up everyone behind. Best effort.
func (l *Lock) leaveLine(r request) {
	if args := l.plan.abandon(l.owner, r); args != nil {
		ctx, cancel := context.WithTimeout(context.Background(), replyMargin)
		defer cancel()
		_, _ = l.c.command(ctx, l.plan.key(), args...)
	}
}

// undo releases the hold an acquisition just took on lk, or, when lk
// failed (a replica sync's reply lost), on the client's own connection: a
// non-session hold outlives lk, and must not be left to its lease. held is
// the count the grant made: sent as HELD, the second send never releases an
// earlier hold when the first one's reply was lost. Best effort, reporting
// nothing: a hold it could not release ends at its lease.
func (l *Lock) undo(lk *link, r request, held int) error {
	args := l.releaseArgs(r.leaseMs, held)
	if _, err := lk.do(context.Background(), 0, args...); ioError(err) && !l.cfg.session {
		ctx, cancel := context.WithTimeout(context.Background(), replyMargin)
		defer cancel()
		_, _ = l.c.command(ctx, l.plan.key(), args...)
	}
	return nil
}

// record counts a hold taken (kept: the session's connection, bound to it).
func (l *Lock) record(r request, o outcome, kept *link) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count == 0 || l.lost {
		l.count, l.lost = 0, false
		l.done, l.ended = make(chan struct{}), false
	}
	l.count++
	l.leaseMs = r.leaseMs
	l.token, l.hasToken = o.token, o.hasToken
	if kept != nil && l.link == nil {
		l.link = kept
	}
	if r.watched && !l.cfg.session && l.dog == nil {
		lease := time.Duration(r.leaseMs) * time.Millisecond
		l.dog = startWatchdog(lease, l.renewer(r.leaseMs), l.markLost)
	}
}

// renewer is the watchdog's renewal. Its command is built when it runs:
// most holds end before their first renewal.
func (l *Lock) renewer(leaseMs int64) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		reply, err := l.c.command(ctx, l.plan.key(), l.plan.renew(l.owner, leaseMs)...)
		if err != nil {
			return false, err
		}
		return l.plan.renewed(reply)
	}
}

// markLost is the watchdog's report that the hold is gone: Lost turns
// true, the callback runs, then Done is closed (so that whoever waits on
// Done sees what the callback did).
func (l *Lock) markLost(dog *watchdog) {
	l.mu.Lock()
	if l.dog != dog {
		l.mu.Unlock()
		return
	}
	l.dog, l.lost = nil, true
	done := l.done
	l.mu.Unlock()
	if l.cfg.onLost != nil {
		l.cfg.onLost(l)
	}
	l.mu.Lock()
	if l.done == done {
		l.end()
	}
	l.mu.Unlock()
}

// end closes done; called under mu.
func (l *Lock) end() {
	if !l.ended {
		close(l.done)
		l.ended = true
	}
}

// Release gives back one hold (the lock is free once every hold is). Single
// locks send the handle's count before it (LOCK.UNLOCK … LEASE ms HELD n):
// one command, sent on a connection that never resends it, and once more
// by the package when its reply was lost (the connection failed or timed
// out): the server answers a resend whose first send released a re-entered
// hold as that one did, from the lock's hash. Returns [ErrNotHeld] when the
// server says this handle held nothing: never taken, already released, or
// lost; [ErrReleaseUnknown] when a last hold's release was resent and the
// resend found nothing held (the first send may have freed it: the server
// cannot tell). Either way the handle holds nothing after.
func (l *Lock) Release(ctx context.Context) error {
	if l.err != nil {
		return l.err
	}
	done, err := l.turn(ctx)
	if err != nil {
		return err
	}
	defer done()
	l.mu.Lock()
	lk, leaseMs, wasLost, held := l.link, l.leaseMs, l.lost, l.held()
	l.mu.Unlock()
	if leaseMs == 0 {
		leaseMs, _ = millis(l.c.watchdogTimeout, "watchdog timeout")
	}
	args := l.releaseArgs(leaseMs, held)
	var reply any
	resent := false
	switch {
	case lk != nil:
		reply, err = lk.do(ctx, 0, args...)
		if ioError(err) && ctx.Err() == nil {
			// The session's connection is gone, and its holds with it.
			l.forget()
			return newError(ErrNotHeld, l.name, "the session's connection closed: "+err.Error())
		}
	case l.plan.counted() && !l.cfg.session:
		reply, resent, err = l.c.twice(ctx, l.plan.key(), args)
	default:
		reply, err = l.c.command(ctx, l.plan.key(), args...)
	}
	if err != nil {
		return err
	}
	state, err := l.plan.released(reply)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.count--
	finished := state != 0 || l.count <= 0
	l.mu.Unlock()
	if finished {
		l.forget()
	}
	switch {
	case state == -1 && resent && held <= 1 && !wasLost:
		// The server replays only a re-entered release (HELD 2 and up):
		// a last one's resend finds nothing, whether the first send
		// released the hold or it was gone before.
		return newError(ErrReleaseUnknown, l.name,
			"the release's reply was lost and the owner no longer holds the lock: this release freed it or the hold was gone before it")
	case state == -1 || wasLost:
		// wasLost: the watchdog found the hold gone, whatever the release
		// replied.
		return newError(ErrNotHeld, l.name, "not held by "+l.owner)
	}
	return nil
}

// releaseArgs is the release of one hold of held (the count before it). A
// session's carries no HELD: it goes on the session's own connection and
// is never resent (the connection's failure takes its holds).
func (l *Lock) releaseArgs(leaseMs int64, held int) []any {
	if l.cfg.session {
		held = 0
	}
	return l.plan.release(l.owner, leaseMs, held)
}

// forget drops the handle's holds: stops the watchdog, ends done, gives
// the session's connection back (nothing is bound to it any more).
func (l *Lock) forget() {
	l.mu.Lock()
	if l.dog != nil {
		l.dog.halt()
		l.dog = nil
	}
	l.end()
	l.count, l.lost, l.hasToken, l.leaseMs = 0, false, false, 0
	lk := l.link
	l.link = nil
	l.mu.Unlock()
	if lk != nil {
		lk.close()
	}
}

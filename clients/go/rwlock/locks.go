package rwlock

import (
	"errors"
	"fmt"
)

// Lock makes a handle on the plain lock name (LOCK.*): Redisson's RLock,
// with [WithFenced] its RFencedLock, with [WithNonReentrant] its non-reentrant
// lock; [WithSession] and [WithOnLost] apply too. Nothing is sent until
// [Lock.Acquire].
func (c *Client) Lock(name string, opts ...LockOption) *Lock {
	cfg := configOf(opts)
	var err error
	if cfg.fairWaitSet {
		err = errors.New("rwlock: WithFairWait is a fair lock's option")
	}
	return newLock(c, singlePlan{hold: Hold{KindLock, name}, fenced: cfg.fenced, noReentry: cfg.noReentry}, name, c.newOwner(), cfg, err)
}

// FairLock makes a handle on the fair lock name (FAIRLOCK.*): Redisson's
// RFairLock, with [WithNonReentrant] its non-reentrant fair lock. Waiters are
// served in arrival order, in one line with Redisson's own waiters on that
// lock: a wait ([WithWait] above 0, or none) joins the line and waits in it
// on the server (BLOCK), which takes it out of the line when the wait runs
// out or its context ends; [WithWait](0) is Redisson's tryLock(): one try,
// never joining the line. The watchdog (LOCK.RENEW), leases, [WithOnLost] and
// releases are the plain lock's; [WithFairWait] sets the line's wait time.
// [WithFenced] and [WithSession] are refused (the module's fair lock has neither),
// at the first call.
//
// A fair lock's release of a hold that ran out (the lock no longer exists)
// is [ErrNotHeld], as the plain lock's: FAIRLOCK.UNLOCK replies nil then
// (where Redisson's script replies 1), its resend after a lost reply too.
func (c *Client) FairLock(name string, opts ...LockOption) *Lock {
	cfg := configOf(opts)
	var err error
	var waitMs int64
	switch {
	case cfg.fenced || cfg.session:
		err = errors.New("rwlock: a fair lock cannot be fenced or a session's")
	case cfg.fairWaitSet:
		waitMs, err = millis(cfg.fairWait, "fair wait")
	}
	return newLock(c, fairPlan{name: name, noReentry: cfg.noReentry, waitMs: waitMs}, name, c.newOwner(), cfg, err)
}

func configOf(opts []LockOption) lockConfig {
	cfg := lockConfig{}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// ReadWriteLock is Redisson's RReadWriteLock (RWLOCK.*): any number of
// readers, or one writer. Its two sides are [Lock] handles sharing one
// owner, so the holder of the write side may also take the read side
// (downgrade); a reader is never upgraded.
type ReadWriteLock struct {
	name        string
	read, write *Lock
}

// ReadWriteLock makes a read-write lock on name. [WithFenced] fences its write
// side; [WithSession] and [WithOnLost] apply to both sides; [WithNonReentrant] is
// refused (at the first call) as the module has no such read-write lock.
func (c *Client) ReadWriteLock(name string, opts ...LockOption) *ReadWriteLock {
	cfg := configOf(opts)
	var err error
	if cfg.noReentry || cfg.fairWaitSet {
		err = errors.New("rwlock: a read-write lock cannot be non-reentrant or take WithFairWait")
	}
	owner := c.newOwner()
	readCfg := cfg
	readCfg.fenced = false // RWLOCK.READ takes no token
	return &ReadWriteLock{
		name:  name,
		read:  newLock(c, singlePlan{hold: Hold{KindRead, name}}, name, owner, readCfg, err),
		write: newLock(c, singlePlan{hold: Hold{KindWrite, name}, fenced: cfg.fenced}, name, owner, cfg, err),
	}
}

// Name is the read-write lock's name.
func (rw *ReadWriteLock) Name() string { return rw.name }

// Read is the read side (RWLOCK.READ; Redisson's readLock()).
func (rw *ReadWriteLock) Read() *Lock { return rw.read }

// Write is the write side (RWLOCK.WRITE; Redisson's writeLock()).
func (rw *ReadWriteLock) Write() *Lock { return rw.write }

// MultiLock makes a handle taking several holds as one
// (LOCK.ACQUIREALL/RENEWALL/UNLOCKALL; Redisson's RedissonMultiLock, but
// atomic: all or none, and a wait never deadlocks whatever the order). In a
// cluster every name must share one slot: give them one {tag}. [WithSession] and
// [WithOnLost] apply; [WithFenced] and [WithNonReentrant] are refused. A bad list (empty,
// an unknown kind, a name twice) is reported by the first call.
func (c *Client) MultiLock(holds []Hold, opts ...LockOption) *Lock {
	cfg := configOf(opts)
	list := append([]Hold(nil), holds...)
	err := checkHolds(list)
	if err == nil && (cfg.fenced || cfg.noReentry || cfg.fairWaitSet) {
		err = errors.New("rwlock: a multi-lock cannot be fenced, non-reentrant or take WithFairWait")
	}
	name := ""
	if len(list) > 0 {
		name = list[0].Name
	} else {
		list = []Hold{{}} // keeps plan.key() defined; err refuses every call
	}
	return newLock(c, multiPlan{holds: list}, name, c.newOwner(), cfg, err)
}

func checkHolds(holds []Hold) error {
	if len(holds) == 0 {
		return errors.New("rwlock: a multi-lock needs at least one hold")
	}
	seen := map[string]bool{}
	for _, h := range holds {
		switch h.Kind {
		case KindLock, KindRead, KindWrite:
		default:
			return fmt.Errorf("rwlock: unknown hold kind %q: LOCK, READ or WRITE", h.Kind)
		}
		if seen[h.Name] {
			return fmt.Errorf("rwlock: %q is held twice in one multi-lock", h.Name)
		}
		seen[h.Name] = true
	}
	return nil
}

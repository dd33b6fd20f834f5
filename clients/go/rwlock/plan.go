package rwlock

import (
	"fmt"
	"strings"
)

// HoldKind is the kind of one hold of a [MultiLock].
type HoldKind string

// The kinds of holds a [MultiLock] takes.
const (
	KindLock  HoldKind = "LOCK"  // a plain lock (LOCK.*)
	KindRead  HoldKind = "READ"  // a read-write lock's read side
	KindWrite HoldKind = "WRITE" // a read-write lock's write side
)

// Hold names one hold of a [MultiLock]: its kind and the lock's name.
type Hold struct {
	Kind HoldKind
	Name string
}

// outcome is an acquisition's reply: taken (with its token when fenced),
// or the PTTL of the holds in the way.
type outcome struct {
	acquired bool
	pttl     int64
	token    int64
	hasToken bool
}

// plan is what one kind of lock sends and how its replies read; no I/O.
type plan interface {
	key() string
	// acquire: held is the owner's count of this kind of hold before the
	// call, sent as HELD when the plan counts (see counted) and the
	// acquisition is not a session's.
	acquire(owner string, r request, session bool, held int) []any
	// counted: whether acquisitions and releases carry HELD, the owner's
	// count before them, so that a resend after a lost reply is answered
	// as the first send was (single locks; LOCK.ACQUIREALL has no HELD).
	counted() bool
	// abandon: what takes the owner out of a line its failed wait may
	// have left it in (nil: the kind has no line outside the server's
	// own waiters, which a closed connection ends).
	abandon(owner string, r request) []any
	// outcome reads an acquisition's reply.
	outcome(reply any, r request) (outcome, error)
	// release: held as for acquire (0: none sent).
	release(owner string, leaseMs int64, held int) []any
	// released: -1 the owner held nothing; 0 still held; 1 released.
	released(reply any) (int, error)
	renew(owner string, leaseMs int64) []any
	renewed(reply any) (bool, error)
}

// options appends an acquisition's BLOCK, SESSION and REQUEST id ttl (none
// for requestID "": the locks send HELD instead, the latch neither).
func options(args []any, r request, session bool, requestID string) []any {
	if r.block >= 0 {
		args = append(args, "BLOCK", r.block)
	}
	if session {
		args = append(args, "SESSION")
	}
	if requestID != "" {
		args = append(args, "REQUEST", requestID, r.latchTTL())
	}
	return args
}

func readOutcome(reply any, fenced bool) (outcome, error) {
	if fenced {
		pair, ok := reply.([]any)
		if !ok || len(pair) != 2 {
			return outcome{}, fmt.Errorf("rwlock: unexpected FENCED reply %#v", reply)
		}
		pttl, err1 := integer(pair[0])
		token, err2 := integer(pair[1])
		if err1 != nil || err2 != nil {
			return outcome{}, fmt.Errorf("rwlock: unexpected FENCED reply %#v", reply)
		}
		if token == -1 {
			return outcome{pttl: pttl}, nil
		}
		return outcome{acquired: true, token: token, hasToken: true}, nil
	}
	if reply == nil {
		return outcome{acquired: true}, nil
	}
	pttl, err := integer(reply)
	if err != nil {
		return outcome{}, fmt.Errorf("rwlock: unexpected acquisition reply %#v", reply)
	}
	return outcome{pttl: pttl}, nil
}

// readOne reads a reply that is 1 for taken (or reached), 0 for not.
func readOne(reply any, _ request) (outcome, error) {
	n, err := integer(reply)
	if err != nil {
		return outcome{}, fmt.Errorf("rwlock: unexpected reply %#v", reply)
	}
	return outcome{acquired: n == 1}, nil
}

// integerOf is a command's integer reply, or its error.
func integerOf(reply any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return integer(reply)
}

// oneOf tells whether a command replied 1 (set, deleted), or its error.
func oneOf(reply any, err error) (bool, error) {
	n, err := integerOf(reply, err)
	return n == 1, err
}

func integer(v any) (int64, error) {
	switch n := v.(type) {
	case int64:
		return n, nil
	case int:
		return int64(n), nil
	}
	return 0, fmt.Errorf("rwlock: not an integer reply: %#v", v)
}

func releasedOne(reply any) (int, error) {
	if reply == nil {
		return -1, nil
	}
	n, err := integer(reply)
	if err != nil {
		return 0, err
	}
	if n == 1 {
		return 1, nil
	}
	return 0, nil
}

func renewedOne(reply any) (bool, error) {
	n, err := integer(reply)
	return n == 1, err
}

// withHeld appends HELD n to a single lock's acquisition or release: the
// owner's count of that kind of hold before the call, which makes the
// server answer a resend whose first send took effect as it answered that
// one, from the hash itself. A release of a count of 0 (the handle knows
// of no hold) sends none, nor a last release (1): the server never replays
// either, so HELD 1 would only lengthen every cycle by two arguments.
func withHeld(args []any, held int, release bool) []any {
	if release && held <= 1 {
		return args
	}
	return append(args, "HELD", held)
}

// latchKey is the key under which the server remembers a release's reply,
// Redisson's redisson_unlock_latch:{name}:<id>; a name that already holds a
// hash tag is used as is, so the key stays in the lock's slot.
func latchKey(name, requestID string) string {
	return prefixed("redisson_unlock_latch", name, requestID)
}

// acquireLatchKey is where the server remembers an acquisition's grant
// under its request id (redisson_lock_request_latch:{name}:<id>, design.md
// §14.7), named as the release's latch is.
func acquireLatchKey(name, requestID string) string {
	return prefixed("redisson_lock_request_latch", name, requestID)
}

func prefixed(prefix, name, requestID string) string {
	if strings.Contains(name, "{") {
		return prefix + ":" + name + ":" + requestID
	}
	return prefix + ":{" + name + "}:" + requestID
}

// singlePlan: one hold of one lock, the kind saying which commands: LOCK.*
// (KindLock: Redisson's RLock, RFencedLock and non-reentrant lock) or RWLOCK.*
// in one mode (KindRead, KindWrite: Redisson's RReadWriteLock's two sides),
// which differ only in their names and in the release naming its mode.
type singlePlan struct {
	hold      Hold
	fenced    bool
	noReentry bool // KindLock only: the module has no non-reentrant read-write lock
}

func (p singlePlan) key() string                   { return p.hold.Name }
func (p singlePlan) counted() bool                 { return true }
func (p singlePlan) abandon(string, request) []any { return nil }

// family is the commands' prefix: LOCK or RWLOCK.
func (p singlePlan) family() string {
	if p.hold.Kind == KindLock {
		return "LOCK"
	}
	return "RWLOCK"
}

// acquire: a session's acquisition sends no HELD. The server gives back
// what a closed connection held only in its next turn, so a session's
// resend after a lost reply could find the first send's grant still there
// and be answered from it, binding nothing to the new connection; sent
// plain, it re-enters, and the give-back then takes the dead connection's
// hold.
func (p singlePlan) acquire(owner string, r request, session bool, held int) []any {
	command := "LOCK.ACQUIRE"
	if p.hold.Kind != KindLock {
		command = "RWLOCK." + string(p.hold.Kind)
	}
	args := options([]any{command, p.hold.Name, owner, r.leaseMs}, r, session, "")
	if p.fenced {
		args = append(args, "FENCED")
	}
	if p.noReentry {
		args = append(args, "NOREENTRY")
	}
	if session {
		return args
	}
	return withHeld(args, held, false)
}

func (p singlePlan) outcome(reply any, _ request) (outcome, error) {
	return readOutcome(reply, p.fenced)
}

func (p singlePlan) release(owner string, leaseMs int64, held int) []any {
	args := []any{p.family() + ".UNLOCK", p.hold.Name, owner}
	if p.hold.Kind != KindLock {
		args = append(args, string(p.hold.Kind))
	}
	return withHeld(append(args, "LEASE", leaseMs), held, true)
}

func (p singlePlan) released(reply any) (int, error) { return releasedOne(reply) }

func (p singlePlan) renew(owner string, leaseMs int64) []any {
	return []any{p.family() + ".RENEW", p.hold.Name, owner, leaseMs}
}

func (p singlePlan) renewed(reply any) (bool, error) { return renewedOne(reply) }

// multiPlan: LOCK.ACQUIREALL / UNLOCKALL / RENEWALL, several holds as one,
// routed by the first name (in a cluster all names share a slot).
type multiPlan struct {
	holds []Hold
}

func (p multiPlan) key() string                   { return p.holds[0].Name }
func (p multiPlan) counted() bool                 { return false }
func (p multiPlan) abandon(string, request) []any { return nil }

func (p multiPlan) holdArgs(args []any) []any {
	args = append(args, "HOLDS", len(p.holds))
	for _, h := range p.holds {
		args = append(args, string(h.Kind), h.Name)
	}
	return args
}

func (p multiPlan) acquire(owner string, r request, session bool, _ int) []any {
	return p.holdArgs(options([]any{"LOCK.ACQUIREALL", owner, r.leaseMs}, r, session, ""))
}

func (p multiPlan) outcome(reply any, _ request) (outcome, error) {
	return readOutcome(reply, false)
}

func (p multiPlan) release(owner string, _ int64, _ int) []any {
	return p.holdArgs([]any{"LOCK.UNLOCKALL", owner})
}

// released: each hold is released on its own; one the owner no longer had
// (lost) makes the whole release report not held, after the server released
// the others.
func (p multiPlan) released(reply any) (int, error) {
	replies, ok := reply.([]any)
	if !ok {
		return 0, fmt.Errorf("rwlock: unexpected LOCK.UNLOCKALL reply %#v", reply)
	}
	all := 1
	for _, r := range replies {
		n, err := releasedOne(r)
		if err != nil {
			return 0, err
		}
		if n == -1 {
			return -1, nil
		}
		if n == 0 {
			all = 0
		}
	}
	return all, nil
}

func (p multiPlan) renew(owner string, leaseMs int64) []any {
	return p.holdArgs([]any{"LOCK.RENEWALL", owner, leaseMs})
}

func (p multiPlan) renewed(reply any) (bool, error) {
	replies, ok := reply.([]any)
	if !ok {
		return false, fmt.Errorf("rwlock: unexpected LOCK.RENEWALL reply %#v", reply)
	}
	for _, r := range replies {
		if ok, err := renewedOne(r); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// fairPlan: FAIRLOCK.*, Redisson's RFairLock (and its non-reentrant fair
// lock): waiters are served in arrival order, in one line with Redisson's
// own. The hold is a plain lock's hash, so LOCK.RENEW renews it.
type fairPlan struct {
	name      string
	noReentry bool
	waitMs    int64 // WAIT: Redisson's fairLockWaitTimeout; 0: the server's rwlock.fair-wait
}

// lineWait is an acquisition's WAIT, as Redisson's tryLockInnerAsync picks
// it: a bounded wait is its own thread wait time, otherwise the lock's
// (WithFairWait; 0: none sent, the server's default).
func (p fairPlan) lineWait(r request) int64 {
	if r.waitMs > 0 {
		return r.waitMs
	}
	return p.waitMs
}

func (p fairPlan) key() string   { return p.name }
func (p fairPlan) counted() bool { return true }

// abandon: FAIRLOCK.CANCEL, as Redisson's acquireFailed, with the
// acquisition's WAIT (those behind move up by it).
func (p fairPlan) abandon(owner string, r request) []any {
	return withWait([]any{"FAIRLOCK.CANCEL", p.name, owner}, p.lineWait(r))
}

func withWait(args []any, waitMs int64) []any {
	if waitMs > 0 {
		args = append(args, "WAIT", waitMs)
	}
	return args
}

// acquire: one try is Redisson's tryLock() (NOQUEUE: never joins the line);
// a wait joins the line and waits in it on the server (BLOCK), which also
// takes it out of the line when the wait ends.
func (p fairPlan) acquire(owner string, r request, _ bool, held int) []any {
	args := withWait([]any{"FAIRLOCK.ACQUIRE", p.name, owner, r.leaseMs}, p.lineWait(r))
	if r.block < 0 {
		args = append(args, "NOQUEUE")
	} else {
		args = append(args, "BLOCK", r.block)
	}
	if p.noReentry {
		args = append(args, "NOREENTRY")
	}
	return withHeld(args, held, false)
}

// outcome: a refused NOQUEUE try replies 1, which is no PTTL (0: unknown).
func (p fairPlan) outcome(reply any, r request) (outcome, error) {
	o, err := readOutcome(reply, false)
	if err == nil && !o.acquired && r.block < 0 {
		o.pttl = 0
	}
	return o, err
}

// release: FAIRLOCK.UNLOCK replies nil when the owner holds nothing, the
// lock gone included (where fair_unlock.lua replies 1).
func (p fairPlan) release(owner string, leaseMs int64, held int) []any {
	return withHeld([]any{"FAIRLOCK.UNLOCK", p.name, owner, "LEASE", leaseMs}, held, true)
}

func (p fairPlan) released(reply any) (int, error) { return releasedOne(reply) }

func (p fairPlan) renew(owner string, leaseMs int64) []any {
	return []any{"LOCK.RENEW", p.name, owner, leaseMs}
}

func (p fairPlan) renewed(reply any) (bool, error) { return renewedOne(reply) }

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The lock kinds. fenced is the modes' own workload (main.go's workers,
// one stream per mode, named by the mode); every other kind runs as one
// stream per mode of SAFETY_KIND_MODES, named mode/kind (acked/rw), with
// the mode's acknowledgement pipelined behind its acquisition command.
const (
	KindPlain   = "plain"   // LOCK.ACQUIRE without FENCED: no tokens
	KindFenced  = "fenced"  // LOCK.ACQUIRE … FENCED (the modes' workload)
	KindRW      = "rw"      // RWLOCK.READ (shared) and RWLOCK.WRITE … FENCED
	KindFair    = "fair"    // FAIRLOCK.ACQUIRE … BLOCK: granted from the line by the server
	KindMulti   = "multi"   // LOCK.ACQUIREALL of 2-3 locks at once
	KindSession = "session" // LOCK.ACQUIRE … SESSION FENCED: bound to the connection
	KindBlock   = "block"   // LOCK.ACQUIRE … BLOCK FENCED: a waiter granted as others release
)

var allKinds = []string{KindPlain, KindFenced, KindRW, KindFair, KindMulti, KindSession, KindBlock}

const (
	// blockFor (ms) is the BLOCK of the fair and block kinds: several holds
	// of 20-50 ms, so most waits end in a grant.
	blockFor = 2000
	// fairWait (ms) is the fair lock's WAIT: a waiter left in the line by a
	// failover (its owner gone) is purged within the lock's lease + fairWait.
	fairWait = 3000
	// sessionLease is short so that a quarter of the session holds outlive
	// it (held 3.5-6 s) and stand on the server's renewals alone.
	sessionLease = 3 * time.Second
)

// kindShape is the size of a kind's stream: contention on few locks, so
// that grants follow releases (fair, block) and multi-holds collide.
var kindShape = map[string]struct{ locks, workers int }{
	KindPlain: {2, 2}, KindRW: {2, 3}, KindFair: {1, 3}, KindMulti: {3, 3}, KindSession: {2, 2}, KindBlock: {1, 3},
}

// heldLock is one hold of an attempt: a multi-hold has several.
type heldLock struct {
	lock string
	role Role
}

// attempt is one acquisition of a kind worker (one owner, never re-entered).
type attempt struct {
	owner string
	holds []heldLock
	lease time.Duration
	hold  time.Duration
	// closeAfter: a session hold that ends by closing its connection (the
	// server releases it) instead of an unlock.
	closeAfter bool
}

// closeCeiling bounds how long a session hold may outlive the close of
// its connection: the server releases it at once (design §12.2), and a
// promoted replica's copy ends at its lease (§12.4); the rest is margin
// for a loaded machine and a failover.
const closeCeiling = 10 * time.Second

// noMasterCeiling is how much longer awaitGone asks while no master
// answers: past the harness's own wait for a new master.
const noMasterCeiling = 3 * time.Minute

// sessionReports counts, per stream, the session holds whose loss the
// holder saw before using them (the verification before its write failed),
// with the first few reasons; and the holds ended by closing their
// connection: how long until they were seen gone, how many a master still
// showed after closeCeiling (kept: a violation), and how many no master
// could be asked about for noMasterCeiling more (unverified).
type sessionReports struct {
	mu         sync.Mutex
	lost       map[string]int
	reasons    map[string][]string
	closes     map[string]int
	slowest    map[string]time.Duration
	keptHolds  map[string]int
	unverified map[string]int
}

var reported = &sessionReports{lost: map[string]int{}, reasons: map[string][]string{},
	closes: map[string]int{}, slowest: map[string]time.Duration{}, keptHolds: map[string]int{},
	unverified: map[string]int{}}

// closeOutcome is what the check after a session's close found.
type closeOutcome int

const (
	closeGone closeOutcome = iota
	closeKept
	closeUnverified
)

func (r *sessionReports) closed(stream string, gone time.Duration, outcome closeOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closes[stream]++
	switch outcome {
	case closeKept:
		r.keptHolds[stream]++
	case closeUnverified:
		r.unverified[stream]++
	default:
		r.slowest[stream] = max(r.slowest[stream], gone)
	}
}

// kept is how many of a stream's closed session holds outlived closeCeiling.
func (r *sessionReports) kept(stream string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keptHolds[stream]
}

func (r *sessionReports) add(stream, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost[stream]++
	if len(r.reasons[stream]) < 6 {
		r.reasons[stream] = append(r.reasons[stream], reason)
	}
}

// notes says, per stream, how many session holds were reported lost.
func (r *sessionReports) notes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	var streams []string
	for _, m := range []map[string]int{r.lost, r.closes} {
		for s := range m {
			if !seen[s] {
				seen[s] = true
				streams = append(streams, s)
			}
		}
	}
	sort.Strings(streams)
	var out []string
	for _, s := range streams {
		out = append(out, fmt.Sprintf("  %s: %d session holds reported lost by their holder before use (%s); %d ended by closing the connection, seen gone within %.2fs, %d still held %s after the close, %d not verified (no master answered)",
			s, r.lost[s], strings.Join(r.reasons[s], "; "), r.closes[s], r.slowest[s].Seconds(), r.keptHolds[s], closeCeiling, r.unverified[s]))
	}
	return out
}

// kindWorker takes locks of one kind in a loop, as worker does for fenced
// locks: a new owner per attempt, a hold of 20-50 ms, a write to the fenced
// resource when the hold has a token, the release until its outcome is known.
type kindWorker struct {
	id     int
	stream string
	kind   string
	locks  []string
	p      *cmdPath
	rng    *rand.Rand
	rec    *recorder
	res    *resource
	par    params
	seq    int
}

// startKinds starts the streams of kinds (fenced excepted: it is the modes'
// own) in each of modes and returns their names.
func startKinds(ctx context.Context, wg *sync.WaitGroup, t *topology, rec *recorder, res *resource, par params, seed int64, kinds, modes []string) ([]string, error) {
	for _, k := range kinds {
		if _, ok := kindShape[k]; !ok && k != KindFenced {
			return nil, fmt.Errorf("unknown kind %q (kinds: %s)", k, strings.Join(allKinds, " "))
		}
	}
	for _, m := range modes {
		if m != ModeRaw && m != ModeAcked && m != ModeLegacy {
			return nil, fmt.Errorf("SAFETY_KIND_MODES: %q is not a command mode (raw, acked, legacy)", m)
		}
	}
	var streams []string
	var workers []*kindWorker
	for ki, kind := range allKinds {
		shape, ok := kindShape[kind]
		if !ok || !contains(kinds, kind) {
			continue
		}
		for mi, mode := range modes {
			stream := mode + "/" + kind
			streams = append(streams, stream)
			var locks []string
			for k := 0; k < shape.locks; k++ {
				locks = append(locks, fmt.Sprintf("safety:%s:%d", stream, k))
			}
			for i := 0; i < shape.workers; i++ {
				id := 1000*(ki+1) + 100*mi + i
				group := i % clientGroups
				workers = append(workers, &kindWorker{id: id, stream: stream, kind: kind, locks: locks,
					p: &cmdPath{t: t, group: group, acked: mode == ModeAcked, legacy: mode == ModeLegacy,
						rng: rand.New(rand.NewSource(seed - int64(id)))},
					rng: rand.New(rand.NewSource(seed + int64(id))), rec: rec, res: res, par: par})
			}
		}
	}
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx) }()
	}
	return streams, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (w *kindWorker) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.cycle(ctx)
	}
	w.p.close()
}

func (w *kindWorker) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int63n(int64(hi-lo)+1))
}

func (w *kindWorker) backoff(ctx context.Context) {
	select {
	case <-time.After(w.between(w.par.backoffs[0], w.par.backoffs[1])):
	case <-ctx.Done():
	}
}

func (w *kindWorker) next() attempt {
	w.seq++
	a := attempt{owner: fmt.Sprintf("%s-w%d-%d", w.stream, w.id, w.seq), lease: w.par.lease,
		hold: w.between(w.par.holdMin, w.par.holdMax)}
	a.holds = pickHolds(w.kind, w.locks, w.rng)
	if w.kind == KindSession {
		a.lease = sessionLease
		if w.rng.Intn(4) == 0 {
			a.hold = w.between(sessionLease+500*time.Millisecond, 2*sessionLease)
		}
		a.closeAfter = w.rng.Intn(5) == 0
	}
	return a
}

// pickHolds is what one attempt of kind holds among locks: one lock (a
// read-write lock's read or write side, half each), or for a multi-hold 2
// or 3 of them in any order (the server takes all or none whatever the
// order).
func pickHolds(kind string, locks []string, rng *rand.Rand) []heldLock {
	switch kind {
	case KindMulti:
		var holds []heldLock
		for _, i := range rng.Perm(len(locks))[:2+rng.Intn(len(locks)-1)] {
			holds = append(holds, heldLock{lock: locks[i]})
		}
		return holds
	case KindRW:
		role := RoleWrite
		if rng.Intn(2) == 0 {
			role = RoleRead
		}
		return []heldLock{{lock: locks[rng.Intn(len(locks))], role: role}}
	}
	return []heldLock{{lock: locks[rng.Intn(len(locks))]}}
}

// acquisition is the attempt's command and how to read its reply.
func (w *kindWorker) acquisition(a attempt) ([]any, grantParser) {
	ms := a.lease.Milliseconds()
	h := a.holds[0]
	switch w.kind {
	case KindPlain:
		return []any{"LOCK.ACQUIRE", h.lock, a.owner, ms}, nilReply
	case KindRW:
		if h.role == RoleRead {
			return []any{"RWLOCK.READ", h.lock, a.owner, ms}, nilReply
		}
		return []any{"RWLOCK.WRITE", h.lock, a.owner, ms, "FENCED"}, fencedReply
	case KindFair:
		return []any{"FAIRLOCK.ACQUIRE", h.lock, a.owner, ms, "WAIT", fairWait, "BLOCK", blockFor}, nilReply
	case KindMulti:
		args := []any{"LOCK.ACQUIREALL", a.owner, ms, "HOLDS", len(a.holds)}
		for _, h := range a.holds {
			args = append(args, "LOCK", h.lock)
		}
		return args, nilReply
	case KindSession:
		return []any{"LOCK.ACQUIRE", h.lock, a.owner, ms, "SESSION", "FENCED"}, fencedReply
	default: // KindBlock
		return []any{"LOCK.ACQUIRE", h.lock, a.owner, ms, "BLOCK", blockFor, "FENCED"}, fencedReply
	}
}

// nilReply: nil granted, an integer (the PTTL, or the fair lock's wait
// ended) refused.
func nilReply(reply any) (bool, int64, bool) {
	if reply == nil {
		return true, 0, true
	}
	_, refused := reply.(int64)
	return false, 0, refused
}

func (w *kindWorker) cycle(ctx context.Context) {
	a := w.next()
	args, parse := w.acquisition(a)
	opCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
	call := w.rec.now()
	g := w.p.acquireWith(opCtx, args, parse, w.kind == KindSession)
	ret := w.rec.now()
	cancel()
	record := func(out Outcome, ret int64, lease time.Duration, detail string) {
		for _, h := range a.holds {
			w.rec.op(Op{Mode: w.stream, Lock: h.lock, Worker: w.id, Owner: a.owner, Kind: Acquire, Outcome: out,
				Call: call, Return: ret, Token: g.token, Lease: int64(lease), Detail: detail, Role: h.role})
		}
	}
	switch g.out {
	case Refused:
		w.rec.refusal(w.stream)
		if w.kind == KindFair && g.detail != "" {
			w.leaveLine(a)
		}
		w.backoff(ctx)
		return
	case Maybe:
		// It may take effect until the horizon, as in worker.cycle.
		record(Maybe, max(ret, call+int64(w.par.horizon)), a.lease, g.detail)
		if g.unacked {
			// Fail closed: released on the node that granted it; its reply
			// says nothing of the surviving history.
			rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			rcall := w.rec.now()
			_, detail := w.release(rctx, a)
			cancel()
			w.recordRelease(a, Maybe, rcall, max(w.rec.now(), rcall+int64(w.par.horizon)), "unacknowledged grant: "+detail)
			return
		}
		w.releaseUntilKnown(a, call)
		w.backoff(ctx)
		return
	}
	time.Sleep(a.hold)
	lease, writeLease := a.lease, int64(a.lease)
	if w.kind == KindSession {
		// The holder checks its session before it uses the hold: a loss
		// (the connection replaced, the hold gone, the replicas behind) is
		// reported here, never used silently. Verified, the hold is its
		// own until the check returned, however long past the lease it ran
		// on the server's renewals: another grant before then is an
		// overlap. Bounded by the check's call + half the lease: the hold
		// was there at or after that call, renewed at most a third of a
		// lease before (a late timer takes some of the rest), and the
		// replicas WAIT counted have that renewal, so a promoted one keeps
		// it that long; a client that stalls after the reply cannot stretch
		// its right past that. The write that follows is in the holder's
		// right until the same bound.
		vcall := w.rec.now()
		if reason := w.verify(a, g); reason != "" {
			reported.add(w.stream, reason+" at "+secs(w.rec.now()))
			record(Granted, ret, lease, "")
			w.releaseUntilKnown(a, call)
			return
		}
		bound := vcall + int64(sessionLease/2)
		lease = max(lease, time.Duration(min(w.rec.now(), bound)-call))
		writeLease = max(writeLease, bound-call)
	}
	record(Granted, ret, lease, "")
	if g.token > 0 {
		w.res.write(w.stream, a.holds[0].lock, a.owner, g.token, call, writeLease)
	}
	if a.closeAfter {
		// The session's own end: the connection closes and the server
		// releases the hold (design §12.2), at a moment the client does
		// not see.
		rcall := w.rec.now()
		w.p.drop()
		w.recordRelease(a, Maybe, rcall, rcall+int64(w.par.horizon), "connection closed")
		w.awaitGone(a, rcall)
		return
	}
	w.releaseUntilKnown(a, call)
}

// awaitGone asks the master (as Sentinel names it now, on a new
// connection) until the closed session's hold is gone, for at most
// closeCeiling: a hold a master still shows then is one the close silently
// kept. Only a master can tell: while none answers (a failover that does
// not end), it asks on for noMasterCeiling more, then counts the close as
// unverified.
func (w *kindWorker) awaitGone(a attempt, closed int64) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var held bool
		c, _, err := w.p.conn(ctx)
		if err == nil {
			held, err = c.HExists(ctx, a.holds[0].lock, a.owner).Result()
			if err != nil && !serverError(err) {
				w.p.drop()
			}
		}
		cancel()
		at := time.Duration(w.rec.now() - closed)
		if err == nil && !held {
			reported.closed(w.stream, at, closeGone)
			return
		}
		if at > closeCeiling && err == nil {
			reported.closed(w.stream, at, closeKept)
			return
		}
		if at > closeCeiling+noMasterCeiling {
			reported.closed(w.stream, at, closeUnverified)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaveLine takes a fair waiter whose wait failed with an error (its node
// demoted) out of the line it may have left on the new master, where it
// would stand until its deadline (the lease and fairWait) with nobody
// behind it served. It changes no hold: it is not in the history.
func (w *kindWorker) leaveLine(a attempt) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if c, _, err := w.p.conn(ctx); err == nil {
		c.Do(ctx, "FAIRLOCK.CANCEL", a.holds[0].lock, a.owner, "WAIT", fairWait)
	}
}

func (w *kindWorker) recordRelease(a attempt, out Outcome, call, ret int64, detail string) {
	for _, h := range a.holds {
		w.rec.op(Op{Mode: w.stream, Lock: h.lock, Worker: w.id, Owner: a.owner, Kind: Release, Outcome: out,
			Call: call, Return: ret, Detail: detail, Role: h.role})
	}
}

// verify asks, on the session's own connection, whether it is still the
// one the hold was bound to and the hold is still there, and (acked) that
// the replicas have everything up to now, the server's renewals included.
// It replies why the hold is lost, or "".
func (w *kindWorker) verify(a attempt, g grant) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	pipe := g.conn.Pipeline()
	id := pipe.ClientID(ctx)
	exists := pipe.HExists(ctx, a.holds[0].lock, a.owner)
	var wait *redis.Cmd
	var expected int64
	if st := w.p.state; w.p.acked && st != nil && st.expected > 0 {
		expected = st.expected
		wait = pipe.Do(ctx, "WAIT", expected, syncTimeout)
	}
	_, _ = pipe.Exec(ctx)
	switch {
	case id.Err() != nil:
		if !serverError(id.Err()) {
			w.p.drop()
		}
		return "connection: " + firstWord(id.Err().Error())
	case id.Val() != g.connID:
		return "connection replaced"
	case exists.Err() != nil:
		return "HEXISTS: " + firstWord(exists.Err().Error())
	case !exists.Val():
		return "hold gone"
	case wait != nil:
		if n, err := wait.Int64(); err != nil || n < expected {
			return fmt.Sprintf("WAIT %d replied %d", expected, n)
		}
	}
	return ""
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// release releases every hold of the attempt, each outcome in the holds'
// order.
func (w *kindWorker) release(ctx context.Context, a attempt) ([]Outcome, string) {
	outs := make([]Outcome, len(a.holds))
	fail := func(detail string) ([]Outcome, string) {
		for i := range outs {
			outs[i] = Maybe
		}
		return outs, detail
	}
	c, _, err := w.p.conn(ctx)
	if err != nil {
		return fail("no master: " + err.Error())
	}
	h := a.holds[0]
	var reply any
	switch w.kind {
	case KindMulti:
		args := []any{"LOCK.UNLOCKALL", a.owner, "HOLDS", len(a.holds)}
		for _, h := range a.holds {
			args = append(args, "LOCK", h.lock)
		}
		reply, err = c.Do(ctx, args...).Result()
	case KindRW:
		role := "WRITE"
		if h.role == RoleRead {
			role = "READ"
		}
		reply, err = c.Do(ctx, "RWLOCK.UNLOCK", h.lock, a.owner, role).Result()
	case KindFair:
		// CANCEL takes the owner out of the line if a failed wait left it
		// there, in the release's transaction. FAIRLOCK.UNLOCK replies nil
		// when the owner holds nothing, the lock gone included.
		var unlock *redis.Cmd
		_, _ = c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Do(ctx, "FAIRLOCK.CANCEL", h.lock, a.owner, "WAIT", fairWait)
			unlock = pipe.Do(ctx, "FAIRLOCK.UNLOCK", h.lock, a.owner)
			return nil
		})
		reply, err = unlock.Result()
	default:
		reply, err = c.Do(ctx, "LOCK.UNLOCK", h.lock, a.owner).Result()
	}
	switch {
	case errors.Is(err, redis.Nil):
		return []Outcome{NotHeld}, ""
	case err != nil:
		if !serverError(err) || strings.HasPrefix(err.Error(), "READONLY") {
			w.p.drop()
		}
		return fail(err.Error())
	}
	replies := []any{reply}
	if w.kind == KindMulti {
		replies, _ = reply.([]any)
		if len(replies) != len(a.holds) {
			return fail(fmt.Sprintf("unexpected unlock reply %v", reply))
		}
	}
	var details []string
	for i, r := range replies {
		n, isInt := r.(int64)
		switch {
		case r == nil:
			outs[i] = NotHeld
		case isInt && (n == 1 || (n == 0 && h.role == RoleRead)):
			// A read unlock replies 0 when other readers remain: this
			// owner's hold is gone either way.
			outs[i] = Released
		default:
			outs[i] = Maybe
			details = append(details, fmt.Sprintf("unexpected unlock reply %v", r))
		}
	}
	return outs, strings.Join(details, "; ")
}

// releaseUntilKnown releases the attempt's holds, again after an unknown
// outcome, until the replies say or the lease is over anyway.
func (w *kindWorker) releaseUntilKnown(a attempt, grantCall int64) {
	known := untilKnown(w.rec, grantCall, a.lease, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		call := w.rec.now()
		outs, detail := w.release(ctx, a)
		ret := w.rec.now()
		known := true
		for i, h := range a.holds {
			op := Op{Mode: w.stream, Lock: h.lock, Worker: w.id, Owner: a.owner, Kind: Release, Outcome: outs[i],
				Call: call, Return: ret, Detail: detail, Role: h.role}
			if outs[i] == Maybe {
				op.Return = max(ret, call+int64(w.par.horizon))
				known = false
			}
			w.rec.op(op)
		}
		return known
	})
	// A session hold still bound to a live connection would be renewed for
	// ever: closing it makes the server release it.
	if !known && w.kind == KindSession {
		w.p.drop()
	}
}

package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// ---- the model: a lease lock with fencing tokens ------------------------
//
// State: the holder (an owner, "" when free), the earliest moment its lease
// can end (its grant's call + lease: the server started the lease at or
// after the call), and the highest token granted.
//
// Lease expiry enters through time: an operation that returned at r can
// have taken effect as late as r, so when r is at or past the holder's
// earliest lease end, the lease may have run out before it: the lock may
// be free for it. That only ever allows more (never rejects a legal
// history); holds are released explicitly 20-50 ms into a lease of
// seconds, so it hides nothing but the paused client's hold.
//
// Refusals are not in the history: a refusal is allowed in every state (a
// stale replica may refuse a free lock; refusing is always safe).
//
// Indeterminate operations (Maybe) may have taken effect or not: their
// return is pushed to the horizon, and the model allows both.
//
// Time also orders the operations: at is the earliest moment the latest
// operation linearized so far can have taken effect (each takes effect
// at or after its call and at or after the one before it, and no later
// than its return). An operation that finds the lock free only because a
// lease ran out takes effect at or after that lease's end. Without it an
// acquisition that returned seconds late (its command held in a paused
// master's socket) could take effect before a holder's lease ended and
// explain the holder's release finding nothing: the 50-episode run of
// seed 2911 counted 6 lost holds in legacy that Porcupine accepted so.

type lockState struct {
	holder string
	until  int64
	last   int64
	at     int64
}

type opInput struct {
	kind   OpKind
	role   Role
	owner  string
	token  int64
	call   int64
	ret    int64
	lease  int64
	unsure bool // Maybe
	seed   bool // the piece's first operation: see splitAtRest
}

type opOutput struct {
	out Outcome
}

func step(state, input, output any) []any {
	s := state.(lockState)
	in := input.(opInput)
	out := output.(opOutput).out
	if in.seed {
		return []any{lockState{last: in.token}}
	}
	at := max(s.at, in.call)
	if in.ret < at {
		// It cannot take effect after what is ordered before it.
		if out == Maybe {
			return []any{s}
		}
		return nil
	}
	free := s.holder == "" || in.ret >= s.until
	after := at // when it takes effect, if it finds the lock free
	if s.holder != "" && at < s.until {
		after = s.until // free only once the lease ran out
	}
	same := s
	same.at = at
	switch in.kind {
	case Acquire:
		held := lockState{holder: in.owner, until: in.call + in.lease, last: max(s.last, in.token), at: after}
		switch out {
		case Granted:
			if free && (in.token == 0 || in.token > s.last) {
				return []any{held}
			}
			return nil
		case Maybe:
			next := []any{s}
			if free && (in.token == 0 || in.token > s.last) {
				next = append(next, held)
			}
			return next
		}
	case Release:
		released := lockState{last: s.last, at: at}
		switch out {
		case Released:
			if s.holder == in.owner {
				return []any{released}
			}
			return nil
		case NotHeld:
			if s.holder != in.owner {
				return []any{same}
			}
			if free {
				return []any{lockState{last: s.last, at: after}} // its lease ran out
			}
			return nil // an acknowledged hold is gone before its lease
		case Maybe:
			if s.holder == in.owner {
				return []any{s, released}
			}
			return []any{s}
		}
	}
	return nil
}

var lockModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byLock := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			name := op.Metadata.(string)
			if _, ok := byLock[name]; !ok {
				order = append(order, name)
			}
			byLock[name] = append(byLock[name], op)
		}
		var parts [][]porcupine.Operation
		for _, name := range order {
			parts = append(parts, splitAtRest(byLock[name])...)
		}
		return parts
	},
	Init: func() []any { return []any{lockState{}} },
	Step: step,
}

// splitAtRest cuts one lock's history at its moments of rest, so that
// Porcupine checks pieces of minutes instead of one of an hour (the
// 50-episode run's acked/rw did not finish in 2 minutes as one piece).
//
// A moment of rest T: every operation called before T has returned
// before T (an indeterminate one at its horizon), and every hold that may
// exist (a granted or indeterminate acquisition called before T) is over
// in every linearization: its owner's release answered (released, or not
// held: the model allows neither with the hold still there), or its lease
// ran out (the model's earliest end, call + lease) and its owner does
// nothing more (owners are one per attempt; only a release of its own
// tells a hold that ran out from one that did not). After T the lock is
// free in every linearization and only its highest token carries over:
// each later piece starts with a seed operation setting it to the
// highest token of the granted acquisitions before T. An indeterminate
// one may have taken a higher token; leaving it out lets more histories
// through, never fewer (token order across owners is also counted
// directly: token regressions).
func splitAtRest(ops []porcupine.Operation) [][]porcupine.Operation {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	lastCall := map[string]int64{}
	answered := map[string]int64{} // owner -> its first answered release's return
	for _, op := range sorted {
		in := op.Input.(opInput)
		lastCall[in.owner] = max(lastCall[in.owner], op.Call)
		out := op.Output.(opOutput).out
		if in.kind == Release && (out == Released || out == NotHeld) {
			if at, ok := answered[in.owner]; !ok || op.Return < at {
				answered[in.owner] = op.Return
			}
		}
	}
	var parts [][]porcupine.Operation
	var piece []porcupine.Operation
	var rest, highest, carried int64 // rest: the piece is busy until then
	for _, op := range sorted {
		if len(piece) > 0 && op.Call > rest {
			parts = append(parts, piece)
			piece = nil
			carried = highest
		}
		if len(piece) == 0 && len(parts) > 0 {
			seed := op
			seed.Input = opInput{seed: true, token: carried}
			seed.Output = opOutput{Released}
			seed.Call, seed.Return = op.Call-2, op.Call-1
			piece = append(piece, seed)
		}
		piece = append(piece, op)
		in := op.Input.(opInput)
		rest = max(rest, op.Return)
		out := op.Output.(opOutput).out
		if in.kind == Acquire {
			end := max(op.Call+in.lease, lastCall[in.owner])
			if at, ok := answered[in.owner]; ok && at < end {
				end = at
			}
			rest = max(rest, end)
			if out == Granted {
				highest = max(highest, in.token)
			}
		}
	}
	if len(piece) > 0 {
		parts = append(parts, piece)
	}
	return parts
}

// porcupineOps turns a mode's history into Porcupine's operations (the
// lock name as metadata, for the partition).
//
// Two kinds of operation are left out because they are no-ops in every
// linearization, and each would otherwise stay pending until its horizon,
// multiplying the orders the checker tries: a release by an owner that
// never acquired (its acquisitions were refused), and an indeterminate
// release of an owner whose later release replied 1 (had it taken effect
// first, that one would have replied nil; after it, it changes nothing).
// And an owner's indeterminate releases become one, from the first's call
// to the last's return: once one took effect the others change nothing,
// so one release somewhere in that span allows every outcome they allow.
//
// An owner whose acquisitions were all indeterminate and whose releases
// never replied 1 is left out whole: "it never acquired" explains
// everything it saw (its releases' nil or unknown answers change nothing
// on a lock it does not hold), and allows every other operation at least
// as much as "it acquired" does (a hold, or its token, only ever makes
// others' grants illegal), so the verdict is the same without it. Each
// such owner kept would double the states Porcupine tracks until its
// horizon; readers, which may all hold at once, made the 50-episode run's
// acked/rw undecidable in 2 minutes.
func porcupineOps(ops []Op) []porcupine.Operation {
	acquired := map[holdKey]bool{}
	granted := map[holdKey]bool{}
	releasedAt := map[holdKey]int64{}
	for _, o := range ops {
		switch {
		case o.Kind == Acquire && o.Outcome != Refused:
			acquired[keyOf(o)] = true
			granted[keyOf(o)] = granted[keyOf(o)] || o.Outcome == Granted
		case o.Kind == Release && o.Outcome == Released:
			releasedAt[keyOf(o)] = o.Call
		}
	}
	merged := map[holdKey]*Op{}
	var kept []Op
	for _, o := range ops {
		if o.Outcome == Refused {
			continue
		}
		if k := keyOf(o); acquired[k] && !granted[k] {
			if _, proven := releasedAt[k]; !proven {
				continue
			}
		}
		if o.Kind == Release && o.Outcome == Maybe {
			k := keyOf(o)
			if at, ok := releasedAt[k]; !acquired[k] || (ok && at > o.Call) {
				continue
			}
			if m := merged[k]; m != nil {
				m.Call, m.Return = min(m.Call, o.Call), max(m.Return, o.Return)
				continue
			}
			merged[k] = &o
			continue
		}
		kept = append(kept, o)
	}
	for _, m := range merged {
		kept = append(kept, *m)
	}
	out := make([]porcupine.Operation, 0, len(kept))
	for _, o := range kept {
		out = append(out, porcupine.Operation{
			ClientId: o.Worker,
			Input: opInput{kind: o.Kind, role: o.Role, owner: o.Owner, token: o.Token, call: o.Call, ret: o.Return,
				lease: o.Lease, unsure: o.Outcome == Maybe},
			Call: o.Call, Output: opOutput{o.Outcome}, Return: o.Return, Metadata: o.Lock,
		})
	}
	return out
}

// linearizable checks a mode's history against the model: the read-write
// model when it has shared holds, the exclusive one otherwise.
func linearizable(ops []Op, timeout time.Duration) porcupine.CheckResult {
	model := lockModel
	if hasShared(ops) {
		model = rwModel
	}
	return porcupine.CheckOperationsTimeout(model.ToModel(), porcupineOps(ops), timeout)
}

// ---- the counts -----------------------------------------------------------

// hold is an acknowledged grant with what followed it.
type hold struct {
	Op
	relCall int64 // first release's call (0: none)
	// lostRel: a release said not held before the lease could end, with no
	// indeterminate release of the hold before it (which may have released
	// it: the model allows that too).
	lostRel bool
}

// end is the last moment the holder was certainly entitled to the lock:
// its release or its lease's earliest end, whichever is first.
func (h hold) end() int64 {
	e := h.Call + h.Lease
	if h.relCall != 0 && h.relCall < e {
		e = h.relCall
	}
	return e
}

// Counts are the figures users care about, per mode.
type Counts struct {
	Granted, Maybe, Refused int64
	// Lost: acknowledged holds another owner was granted during (before
	// the first released it, within its lease), or that a release found gone
	// before the lease could end.
	Lost int
	// Overlaps: pairs of holds by different owners, the second granted
	// while the first was certainly held (two read holds may overlap).
	Overlaps int
	// TokenRegressions: grants whose token is not above the token of a grant
	// to another owner that completed before this one was asked.
	TokenRegressions int
	// Writes the resource refused: by a holder still within its lease (a
	// safety failure) and by one past it (the fencing doing its job).
	RejectedInLease, RejectedStale, StaleAccepted int
	Writes                                        int
	// Examples: the first few violations, said in words.
	Examples []string
}

func (c *Counts) example(format string, args ...any) {
	if len(c.Examples) < 6 {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

func secs(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

func holdsOf(ops []Op) map[string][]hold {
	byOwner := map[holdKey]*hold{}
	var order []*hold
	for _, o := range ops {
		if o.Kind == Acquire && o.Outcome == Granted {
			h := &hold{Op: o}
			byOwner[keyOf(o)] = h
			order = append(order, h)
		}
	}
	unsureRel := map[holdKey]int64{} // the first indeterminate release's call
	for _, o := range ops {
		if o.Kind != Release {
			continue
		}
		h := byOwner[keyOf(o)]
		if h == nil {
			continue
		}
		if h.relCall == 0 || o.Call < h.relCall {
			h.relCall = o.Call
		}
		if at, ok := unsureRel[keyOf(o)]; o.Outcome == Maybe && (!ok || o.Call < at) {
			unsureRel[keyOf(o)] = o.Call
		}
	}
	for _, o := range ops {
		h := byOwner[keyOf(o)]
		if o.Kind != Release || h == nil {
			continue
		}
		at, unsure := unsureRel[keyOf(o)]
		if o.Outcome == NotHeld && o.Return < h.Call+h.Lease && !(unsure && at < o.Call) {
			h.lostRel = true
		}
	}
	byLock := map[string][]hold{}
	for _, h := range order {
		byLock[h.Lock] = append(byLock[h.Lock], *h)
	}
	for _, hs := range byLock {
		sort.Slice(hs, func(i, j int) bool { return hs[i].Call < hs[j].Call })
	}
	return byLock
}

func count(ops []Op, writes []Write) Counts {
	var c Counts
	for _, o := range ops {
		if o.Kind != Acquire {
			continue
		}
		switch o.Outcome {
		case Granted:
			c.Granted++
		case Maybe:
			c.Maybe++
		}
	}
	for _, hs := range holdsOf(ops) {
		lost := make([]bool, len(hs))
		for i, h := range hs {
			if h.lostRel {
				lost[i] = true
				c.example("%s: %s granted token %d at %s; its release at %s found it gone", h.Lock, h.Owner, h.Token, secs(h.Return), secs(h.relCall))
			}
			// Grants asked after h was granted and answered while h was
			// certainly held.
			end := h.end()
			for j := sort.Search(len(hs), func(k int) bool { return hs[k].Call >= h.Return }); j < len(hs) && hs[j].Call < end; j++ {
				if hs[j].Owner != h.Owner && hs[j].Return <= end && !(h.Role == RoleRead && hs[j].Role == RoleRead) {
					c.Overlaps++
					lost[i] = true
					c.example("%s: %s held it from %s (token %d) to %s; %s was granted it in [%s, %s] (token %d)",
						h.Lock, h.Owner, secs(h.Return), h.Token, secs(end), hs[j].Owner, secs(hs[j].Call), secs(hs[j].Return), hs[j].Token)
				}
			}
		}
		for _, l := range lost {
			if l {
				c.Lost++
			}
		}
		c.TokenRegressions += regressions(hs, &c)
	}
	for _, w := range writes {
		c.Writes++
		switch {
		case !w.Accepted && w.InLease:
			c.RejectedInLease++
			c.example("%s: the resource refused %s's write with token %d at %s, within its lease", w.Lock, w.Owner, w.Token, secs(w.At))
		case !w.Accepted:
			c.RejectedStale++
		case !w.InLease:
			c.StaleAccepted++
		}
	}
	return c
}

// regressions counts the holds (sorted by call) whose token is not above
// every token of holds that had returned before it was called. Holds
// without a token (the kinds that have none, read holds) are not compared.
func regressions(hs []hold, c *Counts) int {
	byRet := append([]hold(nil), hs...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
	n, k := 0, 0
	var highest int64
	var by hold
	for _, h := range hs {
		for k < len(byRet) && byRet[k].Return < h.Call {
			if byRet[k].Token > highest {
				highest, by = byRet[k].Token, byRet[k]
			}
			k++
		}
		if h.Token > 0 && h.Token <= highest {
			n++
			c.example("%s: %s granted token %d at %s, after %s had been granted token %d at %s",
				h.Lock, h.Owner, h.Token, secs(h.Return), by.Owner, by.Token, secs(by.Return))
		}
	}
	return n
}

// unavailability is, per fault kind, the longest time in any of its
// episodes with no grant of the mode: the longest gap that starts at the
// fault or at a grant during the episode and ends at the next grant (or
// the episode's end when none came).
func unavailability(ops []Op, episodes []Episode) map[string]time.Duration {
	// grantsOf is the sorted return times of the grants of locks (of every
	// lock when locks is empty).
	grantsOf := func(locks []string) []int64 {
		only := map[string]bool{}
		for _, l := range locks {
			only[l] = true
		}
		var grants []int64
		for _, o := range ops {
			if o.Kind == Acquire && o.Outcome == Granted && (len(only) == 0 || only[o.Lock]) {
				grants = append(grants, o.Return)
			}
		}
		sort.Slice(grants, func(i, j int) bool { return grants[i] < grants[j] })
		return grants
	}
	all := grantsOf(nil)
	worst := map[string]time.Duration{}
	for _, e := range episodes {
		grants := all
		if len(e.Locks) > 0 {
			grants = grantsOf(e.Locks)
		}
		prev, longest := e.Start, int64(0)
		i := sort.Search(len(grants), func(k int) bool { return grants[k] >= e.Start })
		for ; i < len(grants) && grants[i] <= e.End; i++ {
			longest = max(longest, grants[i]-prev)
			prev = grants[i]
		}
		last := e.End
		if i < len(grants) {
			last = grants[i]
		}
		longest = max(longest, last-prev)
		worst[e.Kind] = max(worst[e.Kind], time.Duration(longest))
	}
	return worst
}

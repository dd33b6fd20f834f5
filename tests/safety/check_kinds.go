package main

import (
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Role is what a hold excludes.
type Role string

const (
	// RoleExclusive (the zero value): a plain, fenced, fair, multi-lock
	// component, session or BLOCK hold, or a read-write lock's write hold:
	// no other owner may hold the lock with it.
	RoleExclusive Role = ""
	// RoleRead: a read hold of a read-write lock: other read holds may
	// share the lock, a write hold may not.
	RoleRead Role = "read"
	// RoleWrite: a read-write lock's write hold (exclusive).
	RoleWrite Role = "write"
)

// holdKey names one hold: the multi-lock's owner holds several locks, so
// an owner alone does not.
type holdKey struct{ lock, owner string }

func keyOf(o Op) holdKey { return holdKey{o.Lock, o.Owner} }

// hasShared says whether a history has read holds: it then needs the
// read-write model.
func hasShared(ops []Op) bool {
	for _, o := range ops {
		if o.Role == RoleRead {
			return true
		}
	}
	return false
}

// ---- the read-write model --------------------------------------------------
//
// The exclusive model's state (lockState) with read holds beside the
// writer: each reader with the earliest moment its lease can end. Expiry,
// refusals and indeterminate operations enter as in the exclusive model. A
// write hold needs the writer and every reader gone (released, or past the
// earliest end of its lease at the operation's return) and a token above
// the highest; a read hold needs only the writer gone.

type reader struct {
	owner string
	until int64
}

// rwState keeps its readers as one canonical string (sorted by owner), so
// that states compare with ==, as Porcupine's merging of states needs.
type rwState struct {
	writer  string
	wUntil  int64
	readers string
	last    int64
	at      int64 // as lockState's
}

func encodeReaders(rs []reader) string {
	sort.Slice(rs, func(i, j int) bool { return rs[i].owner < rs[j].owner })
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.owner)
		b.WriteByte('\x00')
		b.WriteString(strconv.FormatInt(r.until, 10))
		b.WriteByte('\x01')
	}
	return b.String()
}

func decodeReaders(s string) []reader {
	var rs []reader
	for _, e := range strings.Split(s, "\x01") {
		if e == "" {
			continue
		}
		owner, until, _ := strings.Cut(e, "\x00")
		n, _ := strconv.ParseInt(until, 10, 64)
		rs = append(rs, reader{owner, n})
	}
	return rs
}

func rwStep(state, input, output any) []any {
	s := state.(rwState)
	in := input.(opInput)
	out := output.(opOutput).out
	if in.seed {
		return []any{rwState{last: in.token}}
	}
	at := max(s.at, in.call)
	if in.ret < at {
		// It cannot take effect after what is ordered before it.
		if out == Maybe {
			return []any{s}
		}
		return nil
	}
	rs := decodeReaders(s.readers)
	writerGone := s.writer == "" || in.ret >= s.wUntil
	// afterWriter: when it takes effect if it finds the writer gone (once
	// the writer's lease ran out, if it is still in the state).
	afterWriter := at
	if s.writer != "" {
		afterWriter = max(at, s.wUntil)
	}
	afterReaders := afterWriter // and every other reader gone too
	var live []reader           // readers whose lease may not have ended by in.ret
	var mine *reader
	var others []reader
	for i, r := range rs {
		if in.ret < r.until {
			live = append(live, r)
		} else {
			afterReaders = max(afterReaders, r.until)
		}
		if r.owner == in.owner {
			mine = &rs[i]
		} else {
			others = append(others, r)
		}
	}
	same := s
	same.at = at
	if in.kind == Acquire {
		var next rwState
		var legal bool
		if in.role == RoleRead {
			legal = writerGone
			next = rwState{readers: encodeReaders(append(others, reader{in.owner, in.call + in.lease})), last: s.last, at: afterWriter}
		} else {
			legal = writerGone && len(live) == 0 && (in.token == 0 || in.token > s.last)
			next = rwState{writer: in.owner, wUntil: in.call + in.lease, last: max(s.last, in.token), at: afterReaders}
		}
		switch out {
		case Granted:
			if legal {
				return []any{next}
			}
			return nil
		case Maybe:
			if legal {
				return []any{s, next}
			}
			return []any{s}
		}
		return nil
	}
	// A release of the caller's hold of its role.
	held, gone, expired := s.writer == in.owner, writerGone, afterWriter
	released := rwState{readers: s.readers, last: s.last, at: at}
	if in.role == RoleRead {
		held = mine != nil
		gone = held && in.ret >= mine.until
		if held {
			expired = max(at, mine.until)
		}
		released = rwState{writer: s.writer, wUntil: s.wUntil, readers: encodeReaders(others), last: s.last, at: at}
	}
	switch out {
	case Released:
		if held {
			return []any{released}
		}
	case NotHeld:
		switch {
		case !held:
			return []any{same}
		case gone:
			ran := released
			ran.at = expired
			return []any{ran} // its lease ran out
		}
	case Maybe:
		if held {
			return []any{s, released}
		}
		return []any{s}
	}
	return nil
}

var rwModel = porcupine.NondeterministicModel{
	Partition: lockModel.Partition,
	Init:      func() []any { return []any{rwState{}} },
	Step:      rwStep,
}

// covers says whether a claim names a stream: a mode names itself and the
// streams of every kind it runs (acked covers acked/rw, acked/session, …);
// a stream names itself. (An expected violation names one stream exactly:
// raw is the fenced kind's raw stream.)
func covers(claim, stream string) bool {
	return claim == stream || strings.HasPrefix(stream, claim+"/")
}

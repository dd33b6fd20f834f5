package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The client modes' other kinds. A client mode's workers take fenced plain
// locks (the mode's own stream) and, every other attempt on average, a
// lock of the kind the rotation gives their client at the moment, through
// the package's own API for it, recorded in the stream mode/kind
// (pyclient/rw) on locks of that stream. The workers and their driver
// processes are the mode's: the kinds add streams to the report, not load.
//
// The rotation: the kinds of SAFETY_KINDS but fenced, in allKinds' order;
// client c (its place in clientModes) runs kinds[(seed + c + e) mod n]
// from the start of episode e (e = 0 until the first episode ends), so
// one run gives the five clients different kinds at every moment, each
// client every kind once n episodes have passed (the short run's 12
// episodes twice over six kinds; make safety's 300 fifty times each), and
// consecutive seeds start each client one kind further on.

// clientModes are the modes whose workers go through a client package, in
// the rotation's order.
var clientModes = []string{ModeGoClient, ModePyClient, ModeNodeClient, ModeJavaClient, ModeRustClient}

// kindPath is a client path that takes locks of every kind through its
// package's API.
type kindPath interface {
	// acquireKind replies Granted with the token (0 for the kinds without),
	// Refused, or Maybe (an error, NotSynced: the caller releases).
	acquireKind(ctx context.Context, req kindRequest) (out Outcome, token int64, detail string)
	// releaseKind releases every hold of the attempt: one outcome for all.
	releaseKind(ctx context.Context, req kindRequest) (Outcome, string)
}

// kindRequest is one attempt of a client kind: what the package is asked.
type kindRequest struct {
	kind  string
	holds []heldLock // one, or a multi-hold's 2-3 (each with its role for rw)
	owner string
	lease time.Duration
	wait  time.Duration // > 0: the package's waiting acquisition (BLOCK on the server)
}

// waitOf is the wait each kind's acquisition is given: the fair lock and
// block kinds wait in the server (the package's BLOCK path), the others
// try once.
func waitOf(kind string) time.Duration {
	if kind == KindFair || kind == KindBlock {
		return blockFor * time.Millisecond
	}
	return 0
}

// rotation is which kind each client runs, from the seed and the episode.
type rotation struct {
	kinds   []string
	seed    int64
	episode atomic.Int64

	mu   sync.Mutex
	used map[string]bool // the streams that ran
}

// newRotation rotates the client modes through kinds (fenced excepted:
// it is the modes' own stream); nil when there is no other kind.
func newRotation(kinds []string, seed int64) *rotation {
	r := &rotation{seed: seed, used: map[string]bool{}}
	for _, k := range allKinds {
		if k != KindFenced && contains(kinds, k) {
			r.kinds = append(r.kinds, k)
		}
	}
	if len(r.kinds) == 0 {
		return nil
	}
	return r
}

// kindOf is the kind client mode runs now ("" for none).
func (r *rotation) kindOf(mode string) string {
	c := -1
	for i, m := range clientModes {
		if m == mode {
			c = i
		}
	}
	if r == nil || c < 0 {
		return ""
	}
	n := int64(len(r.kinds))
	return r.kinds[((r.seed+int64(c)+r.episode.Load())%n+n)%n]
}

// next moves every client to its next kind (an episode ended).
func (r *rotation) next() {
	if r != nil {
		r.episode.Add(1)
	}
}

func (r *rotation) use(stream string) {
	r.mu.Lock()
	r.used[stream] = true
	r.mu.Unlock()
}

// streams are the client kind streams that ran, per mode of modes in the
// rotation's order.
func (r *rotation) streams(modes []string) []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range modes {
		for _, k := range r.kinds {
			if s := m + "/" + k; r.used[s] {
				out = append(out, s)
			}
		}
	}
	return out
}

// rotating says whether a stream is a client mode's kind stream, which
// runs in turns with the client's other kinds.
func rotating(stream string) bool {
	mode, _, found := strings.Cut(stream, "/")
	return found && contains(clientModes, mode)
}

// kindLocksOf are the locks of a client kind stream, shaped as the command
// modes' streams of that kind (kindShape).
func kindLocksOf(stream, kind string) []string {
	var locks []string
	for k := 0; k < kindShape[kind].locks; k++ {
		locks = append(locks, fmt.Sprintf("safety:%s:%d", stream, k))
	}
	return locks
}

// kindCycle is one attempt of kind through the worker's package, as the
// command streams' kindWorker.cycle: a new owner, a hold of 20-50 ms
// within a 10 s lease, a write to the fenced resource when the hold has a
// token, the release until its outcome is known.
func (w *worker) kindCycle(ctx context.Context, p kindPath, kind string) {
	stream := w.mode + "/" + kind
	w.rot.use(stream)
	w.seq++
	req := kindRequest{kind: kind, holds: pickHolds(kind, kindLocksOf(stream, kind), w.rng),
		owner: fmt.Sprintf("%s-w%d-%d", stream, w.id, w.seq), lease: w.par.lease, wait: waitOf(kind)}
	opCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
	call := w.rec.now()
	out, token, detail := p.acquireKind(opCtx, req)
	ret := w.rec.now()
	cancel()
	record := func(out Outcome, ret int64) {
		for _, h := range req.holds {
			w.rec.op(Op{Mode: stream, Lock: h.lock, Worker: w.id, Owner: req.owner, Kind: Acquire, Outcome: out,
				Call: call, Return: ret, Token: token, Lease: int64(req.lease), Detail: detail, Role: h.role})
		}
	}
	switch out {
	case Refused:
		w.rec.refusal(stream)
		w.sleep(ctx, w.between(w.par.backoffs[0], w.par.backoffs[1]))
		return
	case Maybe:
		record(Maybe, max(ret, call+int64(w.par.horizon)))
		w.releaseKindUntilKnown(p, req, stream, call)
		w.sleep(ctx, w.between(w.par.backoffs[0], w.par.backoffs[1]))
		return
	}
	record(Granted, ret)
	w.sleep(context.Background(), w.between(w.par.holdMin, w.par.holdMax))
	if token > 0 {
		w.res.write(stream, req.holds[0].lock, req.owner, token, call, int64(req.lease))
	}
	w.releaseKindUntilKnown(p, req, stream, call)
}

// sessionClosed: the package's NotHeld for a session hold whose
// connection failed during its release (every package words it so; Rust
// returns the I/O error itself). The server ends a session hold when its
// connection closes, at a moment the client does not see: the release's
// outcome is unknown, not "never held".
func sessionClosed(kind, detail string) bool {
	return kind == KindSession && strings.Contains(detail, "session's connection closed")
}

// releaseKindUntilKnown releases the attempt's holds, again after an
// unknown outcome, until a reply says or the lease is over anyway. A
// multi-hold's one outcome is each of its locks': all released, or none
// held (a multi-lock's NotHeld when only some were held is a hold lost,
// which the checker flags on the locks that were).
func (w *worker) releaseKindUntilKnown(p kindPath, req kindRequest, stream string, grantCall int64) {
	untilKnown(w.rec, grantCall, req.lease, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		call := w.rec.now()
		out, detail := p.releaseKind(ctx, req)
		ret := w.rec.now()
		known := out != Maybe
		switch {
		case out == NotHeld && sessionClosed(req.kind, detail):
			out, known = Maybe, false
			ret = max(ret, call+int64(w.par.horizon))
		case out == Maybe:
			ret = max(ret, call+int64(w.par.horizon))
		}
		for _, h := range req.holds {
			w.rec.op(Op{Mode: stream, Lock: h.lock, Worker: w.id, Owner: req.owner, Kind: Release, Outcome: out,
				Call: call, Return: ret, Detail: detail, Role: h.role})
		}
		return known
	})
}

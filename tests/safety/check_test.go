package main

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const ms = int64(time.Millisecond)

// acq and rel build histories on lock "L" with a 10 s lease, times in ms.
func acq(owner string, call, ret int64, out Outcome, token int64) Op {
	return Op{Mode: "m", Lock: "L", Owner: owner, Kind: Acquire, Outcome: out, Call: call * ms, Return: ret * ms, Token: token, Lease: 10_000 * ms}
}

func rel(owner string, call, ret int64, out Outcome) Op {
	return Op{Mode: "m", Lock: "L", Owner: owner, Kind: Release, Outcome: out, Call: call * ms, Return: ret * ms}
}

func checkModel(t *testing.T, name string, ops []Op, want porcupine.CheckResult) {
	t.Helper()
	if got := linearizable(ops, 30*time.Second); got != want {
		t.Errorf("%s: Porcupine says %s, want %s", name, got, want)
	}
}

func TestCleanHandoffIsLegal(t *testing.T) {
	ops := []Op{
		acq("a", 0, 2, Granted, 1), rel("a", 30, 31, Released),
		acq("b", 10, 12, Refused, 0), // refused while a held it: not in the model
		acq("b", 40, 42, Granted, 2), rel("b", 70, 71, Released),
		acq("c", 80, 81, Granted, 1000), // a jump in tokens (a promoted replica's gap) is fine
		rel("c", 90, 91, Released),
	}
	checkModel(t, "clean", ops, porcupine.Ok)
	c := count(ops, nil)
	if c.Lost != 0 || c.Overlaps != 0 || c.TokenRegressions != 0 || c.Granted != 3 {
		t.Errorf("counts %+v, want 3 grants and no violation", c)
	}
}

func TestOverlapIsCaught(t *testing.T) {
	// b is granted while a's acknowledged hold is neither released nor
	// past its lease: a's acquisition was lost.
	ops := []Op{
		acq("a", 0, 2, Granted, 1),
		acq("b", 10, 12, Granted, 2), rel("b", 40, 41, Released),
		rel("a", 50, 51, Released),
	}
	checkModel(t, "overlap", ops, porcupine.Illegal)
	c := count(ops, nil)
	if c.Overlaps != 1 || c.Lost != 1 {
		t.Errorf("counts %+v, want 1 overlap and 1 lost", c)
	}
}

func TestReleaseFindingTheHoldGoneIsCaught(t *testing.T) {
	ops := []Op{acq("a", 0, 2, Granted, 1), rel("a", 30, 31, NotHeld)}
	checkModel(t, "lost", ops, porcupine.Illegal)
	if c := count(ops, nil); c.Lost != 1 {
		t.Errorf("counts %+v, want 1 lost", c)
	}
}

// A release whose reply was lost may have released the hold: the one
// asked after it finding the hold gone is no loss (Porcupine agrees); one
// asked before any indeterminate release still is.
func TestHoldGoneAfterAnIndeterminateReleaseIsNoLoss(t *testing.T) {
	ops := []Op{acq("a", 0, 2, Granted, 1), rel("a", 30, 8030, Maybe), rel("a", 300, 301, NotHeld)}
	checkModel(t, "after a maybe", ops, porcupine.Ok)
	if c := count(ops, nil); c.Lost != 0 {
		t.Errorf("counts %+v, want no loss", c)
	}
	ops = []Op{acq("a", 0, 2, Granted, 1), rel("a", 30, 31, NotHeld), rel("a", 300, 8300, Maybe)}
	checkModel(t, "before a maybe", ops, porcupine.Illegal)
	if c := count(ops, nil); c.Lost != 1 {
		t.Errorf("counts %+v, want 1 lost", c)
	}
}

func TestRepeatedTokenIsCaught(t *testing.T) {
	// The promoted replica's counter was behind: b gets a's token again.
	ops := []Op{
		acq("a", 0, 2, Granted, 5), rel("a", 30, 31, Released),
		acq("b", 40, 42, Granted, 5), rel("b", 70, 71, Released),
		acq("c", 80, 82, Granted, 4), rel("c", 90, 91, Released),
	}
	checkModel(t, "repeat", ops, porcupine.Illegal)
	if c := count(ops, nil); c.TokenRegressions != 2 {
		t.Errorf("counts %+v, want 2 regressions", c)
	}
}

func TestIndeterminateMayHaveHappenedOrNot(t *testing.T) {
	// a's acquisition timed out: it may hold the lock (b is refused, not in
	// the model) or not (c is granted). Its token is unknown.
	notHappened := []Op{
		acq("a", 0, 8000, Maybe, 0), rel("a", 100, 8100, Maybe),
		acq("c", 200, 202, Granted, 2), rel("c", 230, 231, Released),
	}
	checkModel(t, "maybe-not", notHappened, porcupine.Ok)
	// It happened, with token 7, and was released: a later grant below 7
	// is a regression only if it happened; it may not have, so it is legal.
	happened := []Op{
		acq("a", 0, 8000, Maybe, 7), rel("a", 100, 8100, Maybe),
		acq("c", 200, 202, Granted, 3), rel("c", 230, 231, Released),
	}
	checkModel(t, "maybe-token", happened, porcupine.Ok)
	// But a definite release by a that replied 1 says it happened.
	released := []Op{
		acq("a", 0, 8000, Maybe, 7), rel("a", 100, 101, Released),
		acq("c", 200, 202, Granted, 3), rel("c", 230, 231, Released),
	}
	checkModel(t, "maybe-then-released", released, porcupine.Illegal)
}

func TestLeaseExpiryIsAllowedOnlyAfterTheLease(t *testing.T) {
	short := func(o Op) Op { o.Lease = 100 * ms; return o }
	after := []Op{short(acq("a", 0, 2, Granted, 1)), acq("b", 150, 152, Granted, 2), rel("a", 300, 301, NotHeld)}
	checkModel(t, "expired", after, porcupine.Ok)
	if c := count(after, nil); c.Lost != 0 || c.Overlaps != 0 {
		t.Errorf("counts %+v: a grant after the lease ran out is no overlap", c)
	}
	before := []Op{short(acq("a", 0, 2, Granted, 1)), acq("b", 50, 52, Granted, 2)}
	checkModel(t, "within lease", before, porcupine.Illegal)
}

func TestManyIndeterminateReleasesStayCheap(t *testing.T) {
	// A failover: dozens of release retries that failed, then one that
	// said. The checker must answer at once, not try their orders.
	ops := []Op{acq("a", 0, 2, Granted, 1)}
	for i := int64(0); i < 60; i++ {
		ops = append(ops, rel("a", 10+i*5, 8000+i*5, Maybe))
	}
	ops = append(ops, rel("a", 400, 401, Released), acq("b", 500, 501, Granted, 2), rel("b", 510, 511, Released))
	start := time.Now()
	checkModel(t, "retries", ops, porcupine.Ok)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("checking took %s", d)
	}
}

func TestResourceRefusesLowerTokens(t *testing.T) {
	rec := newRecorder()
	res := newResource(rec)
	lease := int64(time.Hour)
	if !res.write("m", "L", "a", 5, rec.now(), lease) || res.write("m", "L", "b", 5, rec.now(), lease) || res.write("m", "L", "c", 4, rec.now(), lease) {
		t.Fatal("the resource must take 5 once and refuse 5 and 4 after it")
	}
	// A paused holder: its lease is over when it writes.
	if res.write("m", "L", "d", 3, rec.now()-2*lease, lease) {
		t.Fatal("a lower token was accepted")
	}
	c := count(nil, rec.writes)
	if c.RejectedInLease != 2 || c.RejectedStale != 1 || c.Writes != 4 {
		t.Errorf("counts %+v, want 2 refused in lease, 1 stale", c)
	}
}

func TestUnavailability(t *testing.T) {
	ops := []Op{acq("a", 0, 1000, Granted, 1), acq("b", 0, 1500, Granted, 2), acq("c", 0, 4500, Granted, 3), acq("d", 0, 9000, Granted, 4)}
	eps := []Episode{{Kind: "k", Start: 1200 * ms, End: 5000 * ms}}
	// Gaps start at the fault or a grant within the episode and end at the
	// next grant, in the episode or after it: 1.2-1.5, 1.5-4.5, 4.5-9.
	if got := unavailability(ops, eps)["k"]; got != 4500*time.Millisecond {
		t.Errorf("unavailability %s, want 4.5s (from 4.5 s to 9 s)", got)
	}
	eps = []Episode{{Kind: "k", Start: 5000 * ms, End: 6000 * ms}}
	if got := unavailability(ops, eps)["k"]; got != 4000*time.Millisecond {
		t.Errorf("unavailability %s, want 4s (no grant until 9 s)", got)
	}
	// In a cluster only the grants of the locks on the master under fault
	// end its gaps: another shard's grant at 1.5 s does not.
	ops[1].Lock = "other"
	eps = []Episode{{Kind: "k", Start: 1200 * ms, End: 4000 * ms, Locks: []string{"L"}}}
	if got := unavailability(ops, eps)["k"]; got != 3300*time.Millisecond {
		t.Errorf("unavailability %s, want 3.3s (from the fault at 1.2 s to L's grant at 4.5 s)", got)
	}
}

func TestSchedule(t *testing.T) {
	a := schedule([]string{"x", "y"}, 3, rand.New(rand.NewSource(7)))
	b := schedule([]string{"x", "y"}, 3, rand.New(rand.NewSource(7)))
	if len(a) != 6 || strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("schedules %v and %v: the same seed must give the same six episodes", a, b)
	}
}

// on puts an operation on lock with role (the kinds' histories).
func on(lock string, role Role, o Op) Op {
	o.Lock, o.Role = lock, role
	return o
}

func TestKindsWithoutTokensAreCheckedForExclusion(t *testing.T) {
	// plain, fair and multi holds carry no token (0): a handoff is legal
	// and no grant is a regression.
	clean := []Op{
		acq("a", 0, 2, Granted, 0), rel("a", 30, 31, Released),
		acq("b", 40, 42, Granted, 0), rel("b", 70, 71, Released),
	}
	checkModel(t, "untokened handoff", clean, porcupine.Ok)
	if c := count(clean, nil); c.Lost != 0 || c.Overlaps != 0 || c.TokenRegressions != 0 || c.Granted != 2 {
		t.Errorf("counts %+v, want 2 grants and no violation", c)
	}
	overlap := []Op{
		acq("a", 0, 2, Granted, 0),
		acq("b", 10, 12, Granted, 0), rel("b", 40, 41, Released),
		rel("a", 50, 51, Released),
	}
	checkModel(t, "untokened overlap", overlap, porcupine.Illegal)
	if c := count(overlap, nil); c.Overlaps != 1 || c.Lost != 1 || c.TokenRegressions != 0 {
		t.Errorf("counts %+v, want 1 overlap, 1 lost, no regression", c)
	}
}

func TestReadersShareAndAWriterExcludes(t *testing.T) {
	r, w := func(o Op) Op { return on("L", RoleRead, o) }, func(o Op) Op { return on("L", RoleWrite, o) }
	shared := []Op{
		r(acq("r1", 0, 2, Granted, 0)), r(acq("r2", 5, 7, Granted, 0)),
		r(rel("r1", 30, 31, Released)), r(rel("r2", 35, 36, Released)),
		w(acq("w", 40, 42, Granted, 3)), w(rel("w", 60, 61, Released)),
		r(acq("r3", 70, 72, Granted, 0)), r(rel("r3", 80, 81, Released)),
	}
	checkModel(t, "readers share", shared, porcupine.Ok)
	if c := count(shared, nil); c.Overlaps != 0 || c.Lost != 0 || c.TokenRegressions != 0 {
		t.Errorf("counts %+v: two readers together are no overlap", c)
	}
	writerDuringRead := []Op{
		r(acq("r1", 0, 2, Granted, 0)),
		w(acq("w", 10, 12, Granted, 3)), w(rel("w", 20, 21, Released)),
		r(rel("r1", 30, 31, Released)),
	}
	checkModel(t, "writer while a reader holds", writerDuringRead, porcupine.Illegal)
	if c := count(writerDuringRead, nil); c.Overlaps != 1 || c.Lost != 1 {
		t.Errorf("counts %+v, want 1 overlap and 1 lost", c)
	}
	readDuringWrite := []Op{
		w(acq("w", 0, 2, Granted, 3)),
		r(acq("r1", 10, 12, Granted, 0)), r(rel("r1", 20, 21, Released)),
		w(rel("w", 30, 31, Released)),
	}
	checkModel(t, "reader while the writer holds", readDuringWrite, porcupine.Illegal)
	if c := count(readDuringWrite, nil); c.Overlaps != 1 {
		t.Errorf("counts %+v, want 1 overlap", c)
	}
	// A read that may not have happened does not keep the writer out.
	maybeRead := []Op{
		r(acq("r1", 0, 8000, Maybe, 0)), r(rel("r1", 100, 8100, Maybe)),
		w(acq("w", 200, 202, Granted, 3)), w(rel("w", 230, 231, Released)),
	}
	checkModel(t, "indeterminate read", maybeRead, porcupine.Ok)
}

func TestReadHoldLostAndWriterTokensAreCaught(t *testing.T) {
	r, w := func(o Op) Op { return on("L", RoleRead, o) }, func(o Op) Op { return on("L", RoleWrite, o) }
	lost := []Op{r(acq("r1", 0, 2, Granted, 0)), r(acq("r2", 3, 4, Granted, 0)), r(rel("r1", 30, 31, NotHeld)), r(rel("r2", 32, 33, Released))}
	checkModel(t, "read hold gone", lost, porcupine.Illegal)
	if c := count(lost, nil); c.Lost != 1 || c.Overlaps != 0 {
		t.Errorf("counts %+v, want 1 lost, no overlap", c)
	}
	// Writers' tokens must grow; readers between them have none.
	repeat := []Op{
		w(acq("w1", 0, 2, Granted, 9)), w(rel("w1", 10, 11, Released)),
		r(acq("r1", 20, 22, Granted, 0)), r(rel("r1", 30, 31, Released)),
		w(acq("w2", 40, 42, Granted, 9)), w(rel("w2", 50, 51, Released)),
	}
	checkModel(t, "writer token repeated", repeat, porcupine.Illegal)
	if c := count(repeat, nil); c.TokenRegressions != 1 {
		t.Errorf("counts %+v, want 1 regression (the reader's missing token is none)", c)
	}
}

func TestMultiHoldComponentsAreCheckedApart(t *testing.T) {
	// m holds L1 and L2 with one command and releases both; b takes L2
	// after: legal. One owner on two locks must not be confused.
	m := func(lock string, o Op) Op { return on(lock, RoleExclusive, o) }
	clean := []Op{
		m("L1", acq("m", 0, 2, Granted, 0)), m("L2", acq("m", 0, 2, Granted, 0)),
		m("L1", rel("m", 30, 31, Released)), m("L2", rel("m", 30, 31, Released)),
		m("L2", acq("b", 40, 42, Granted, 0)), m("L2", rel("b", 50, 51, Released)),
	}
	checkModel(t, "multi clean", clean, porcupine.Ok)
	if c := count(clean, nil); c.Lost != 0 || c.Overlaps != 0 || c.Granted != 3 {
		t.Errorf("counts %+v, want 3 grants and no violation", c)
	}
	// b is granted L2 while m holds it; L1 is fine.
	overlap := []Op{
		m("L1", acq("m", 0, 2, Granted, 0)), m("L2", acq("m", 0, 2, Granted, 0)),
		m("L2", acq("b", 10, 12, Granted, 0)), m("L2", rel("b", 20, 21, Released)),
		m("L1", rel("m", 30, 31, Released)), m("L2", rel("m", 30, 31, Released)),
	}
	checkModel(t, "multi component overlap", overlap, porcupine.Illegal)
	if c := count(overlap, nil); c.Overlaps != 1 || c.Lost != 1 {
		t.Errorf("counts %+v, want 1 overlap and 1 lost (L2 only)", c)
	}
	// One component gone at the release, the other released.
	partial := []Op{
		m("L1", acq("m", 0, 2, Granted, 0)), m("L2", acq("m", 0, 2, Granted, 0)),
		m("L1", rel("m", 30, 31, Released)), m("L2", rel("m", 30, 31, NotHeld)),
	}
	checkModel(t, "multi component lost", partial, porcupine.Illegal)
	if c := count(partial, nil); c.Lost != 1 {
		t.Errorf("counts %+v, want 1 lost", c)
	}
}

func TestSessionHoldIsOwnedUntilVerified(t *testing.T) {
	// A session hold of 1.5 s held 3 s on the server's renewals, whose
	// check returned at 3 s, is recorded with a 3 s lease: b's grant at 2 s
	// is an overlap, b's grant after the release is not.
	session := func(o Op) Op { o.Lease = 3000 * ms; return o }
	overlap := []Op{session(acq("s", 0, 2, Granted, 4)), acq("b", 2000, 2002, Granted, 5), rel("b", 2100, 2101, Released), rel("s", 3050, 3051, NotHeld)}
	checkModel(t, "session overlap", overlap, porcupine.Illegal)
	if c := count(overlap, nil); c.Overlaps != 1 {
		t.Errorf("counts %+v, want 1 overlap", c)
	}
	clean := []Op{session(acq("s", 0, 2, Granted, 4)), rel("s", 3050, 3051, Released), acq("b", 3100, 3102, Granted, 5), rel("b", 3200, 3201, Released)}
	checkModel(t, "session clean", clean, porcupine.Ok)
}

func TestClaimsCoverTheModesKinds(t *testing.T) {
	for _, c := range []struct {
		claim, stream string
		want          bool
	}{{"acked", "acked", true}, {"acked", "acked/rw", true}, {"acked/rw", "acked/rw", true}, {"acked", "raw/rw", false}, {"ack", "acked/rw", false}, {"acked/rw", "acked", false}} {
		if got := covers(c.claim, c.stream); got != c.want {
			t.Errorf("covers(%q, %q) = %v, want %v", c.claim, c.stream, got, c.want)
		}
	}
}

// A history cut at its moments of rest: many pieces, each checked alone,
// and a violation in a late piece, or a token lower than one granted
// pieces before, is still caught.
func TestHistoryIsCutAtRest(t *testing.T) {
	var ops []Op
	for i := int64(0); i < 40; i++ {
		at := i * 100
		owner := "o" + strconv.FormatInt(i, 10)
		ops = append(ops, acq(owner, at, at+2, Granted, i+1), rel(owner, at+30, at+31, Released))
	}
	pieces := splitAtRest(porcupineOps(ops))
	if len(pieces) != 40 {
		t.Fatalf("%d pieces, want 40 (one per hold)", len(pieces))
	}
	checkModel(t, "cut, clean", ops, porcupine.Ok)

	overlap := append(append([]Op(nil), ops...),
		acq("x", 3_900, 3_902, Granted, 100), acq("y", 3_910, 3_912, Granted, 101),
		rel("y", 3_940, 3_941, Released), rel("x", 3_950, 3_951, Released))
	checkModel(t, "cut, overlap in the last piece", overlap, porcupine.Illegal)

	lower := append(append([]Op(nil), ops...), acq("z", 5_000, 5_002, Granted, 3), rel("z", 5_030, 5_031, Released))
	checkModel(t, "cut, a token below one granted pieces before", lower, porcupine.Illegal)
}

// No cut while a hold may still exist: an indeterminate acquisition's
// lease (10 s) spans the rest of this history, and its owner's release
// came back indeterminate too.
func TestNoCutWhileAHoldMayExist(t *testing.T) {
	ops := []Op{
		acq("a", 0, 8_000, Maybe, 0), rel("a", 100, 8_100, Maybe),
		acq("b", 9_000, 9_002, Granted, 5), rel("b", 9_030, 9_031, Released),
		acq("c", 12_000, 12_002, Granted, 6), rel("c", 12_030, 12_031, Released),
	}
	if pieces := splitAtRest(porcupineOps(ops)); len(pieces) != 2 {
		t.Errorf("%d pieces, want 2 (one cut, after a's lease)", len(pieces))
	}
	checkModel(t, "maybe spanning", ops, porcupine.Ok)
}

// An acquisition that returned seconds late may have found the lock free
// only once the holder's lease ran out, so it cannot explain the holder's
// release finding nothing long before that.
func TestALateGrantDoesNotHideALostHold(t *testing.T) {
	lost := []Op{
		acq("a", 0, 2, Granted, 1),
		acq("b", 1, 12_000, Granted, 2), // held in a paused master's socket
		rel("a", 30, 31, NotHeld),       // a's acknowledged hold is gone
		rel("b", 12_030, 12_031, Released),
	}
	checkModel(t, "late grant, holder's release finds nothing", lost, porcupine.Illegal)
	if c := count(lost, nil); c.Lost != 1 {
		t.Errorf("counts %+v, want 1 lost", c)
	}
	legal := []Op{
		acq("a", 0, 2, Granted, 1),
		acq("b", 1, 12_000, Granted, 2),
		rel("a", 30, 31, Released), // b took effect after this
		rel("b", 12_030, 12_031, Released),
	}
	checkModel(t, "late grant after the release", legal, porcupine.Ok)
	expired := []Op{
		acq("a", 0, 2, Granted, 1),
		acq("b", 1, 12_000, Granted, 2), // after a's lease (10 s) ran out
		rel("b", 12_030, 12_031, Released),
		rel("a", 12_040, 12_041, NotHeld),
	}
	checkModel(t, "late grant after the lease", expired, porcupine.Ok)
}

// The same in the read-write model: a late writer cannot take effect
// before a reader's lease ended and explain the reader's nil.
func TestALateWriterDoesNotHideALostReadHold(t *testing.T) {
	read := func(o Op) Op { o.Role = RoleRead; return o }
	ops := []Op{
		read(acq("r", 0, 2, Granted, 0)),
		read(acq("s", 3, 5, Granted, 0)), // shares: the model is the read-write one
		read(rel("s", 20, 21, Released)),
		acq("w", 1, 12_000, Granted, 5),
		read(rel("r", 30, 31, NotHeld)),
		rel("w", 12_030, 12_031, Released),
	}
	checkModel(t, "late writer, reader's release finds nothing", ops, porcupine.Illegal)
}

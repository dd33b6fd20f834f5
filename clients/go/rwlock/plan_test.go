package rwlock

import (
	"fmt"
	"testing"
	"time"
)

// The commands on the wire, as README.md "Commands" and the client contract
// spell them.
func TestPlans(t *testing.T) {
	try := request{leaseMs: 5000, block: -1}
	wait := request{leaseMs: 5000, block: 0}
	cases := []struct {
		got  []any
		want string
	}{
		// HELD: the owner's count of that kind of hold before the call; a
		// session's acquisition sends none, a release of a count of 0 or 1
		// (a last release, never replayed) none.
		{singlePlan{hold: Hold{KindLock, "a"}}.acquire("u:1", try, false, 0), "[LOCK.ACQUIRE a u:1 5000 HELD 0]"},
		{singlePlan{hold: Hold{KindLock, "a"}}.acquire("u:1", try, false, 2), "[LOCK.ACQUIRE a u:1 5000 HELD 2]"},
		{singlePlan{hold: Hold{KindLock, "a"}, fenced: true, noReentry: true}.acquire("u:1", wait, true, 1), "[LOCK.ACQUIRE a u:1 5000 BLOCK 0 SESSION FENCED NOREENTRY]"},
		{singlePlan{hold: Hold{KindLock, "a"}}.release("u:1", 30000, 1), "[LOCK.UNLOCK a u:1 LEASE 30000]"},
		{singlePlan{hold: Hold{KindLock, "a"}}.release("u:1", 30000, 2), "[LOCK.UNLOCK a u:1 LEASE 30000 HELD 2]"},
		{fairPlan{name: "f"}.release("u:4", 30000, 1), "[FAIRLOCK.UNLOCK f u:4 LEASE 30000]"},
		{singlePlan{hold: Hold{KindLock, "a"}}.release("u:1", 30000, 0), "[LOCK.UNLOCK a u:1 LEASE 30000]"},
		{singlePlan{hold: Hold{KindLock, "a"}}.renew("u:1", 900), "[LOCK.RENEW a u:1 900]"},
		{singlePlan{hold: Hold{KindWrite, "b"}, fenced: true}.acquire("u:2", request{leaseMs: 1, block: 250, waitMs: 250}, false, 0), "[RWLOCK.WRITE b u:2 1 BLOCK 250 FENCED HELD 0]"},
		{singlePlan{hold: Hold{KindRead, "b"}}.release("u:2", 7, 3), "[RWLOCK.UNLOCK b u:2 READ LEASE 7 HELD 3]"},
		{singlePlan{hold: Hold{KindRead, "b"}}.renew("u:2", 7), "[RWLOCK.RENEW b u:2 7]"},
		// The multi-lock counts nothing.
		{multiPlan{holds: []Hold{{KindLock, "{t}1"}, {KindRead, "{t}2"}}}.acquire("u:3", wait, true, 4), "[LOCK.ACQUIREALL u:3 5000 BLOCK 0 SESSION HOLDS 2 LOCK {t}1 READ {t}2]"},
		{multiPlan{holds: []Hold{{KindWrite, "x"}}}.release("u:3", 5000, 4), "[LOCK.UNLOCKALL u:3 HOLDS 1 WRITE x]"},
		{multiPlan{holds: []Hold{{KindWrite, "x"}}}.renew("u:3", 5000), "[LOCK.RENEWALL u:3 5000 HOLDS 1 WRITE x]"},
		{fairPlan{name: "f"}.acquire("u:4", try, false, 0), "[FAIRLOCK.ACQUIRE f u:4 5000 NOQUEUE HELD 0]"},
		// A bounded wait is its own WAIT (Redisson's tryLock(w)), else WithFairWait's.
		{fairPlan{name: "f", noReentry: true, waitMs: 5000}.acquire("u:4", request{leaseMs: 9, block: 250, waitMs: 250}, false, 0), "[FAIRLOCK.ACQUIRE f u:4 9 WAIT 250 BLOCK 250 NOREENTRY HELD 0]"},
		{fairPlan{name: "f", waitMs: 5000}.acquire("u:4", wait, false, 1), "[FAIRLOCK.ACQUIRE f u:4 5000 WAIT 5000 BLOCK 0 HELD 1]"},
		{fairPlan{name: "f"}.acquire("u:4", request{leaseMs: 9, block: 100, waitMs: 250}, false, 0), "[FAIRLOCK.ACQUIRE f u:4 9 WAIT 250 BLOCK 100 HELD 0]"},
		{fairPlan{name: "f", waitMs: 5000}.abandon("u:4", wait), "[FAIRLOCK.CANCEL f u:4 WAIT 5000]"},
		{fairPlan{name: "f", waitMs: 5000}.abandon("u:4", request{waitMs: 250}), "[FAIRLOCK.CANCEL f u:4 WAIT 250]"},
		{singlePlan{hold: Hold{KindLock, "a"}}.abandon("u:4", wait), "[]"},
		{fairPlan{name: "f"}.release("u:4", 30000, 2), "[FAIRLOCK.UNLOCK f u:4 LEASE 30000 HELD 2]"},
		{fairPlan{name: "f"}.renew("u:4", 900), "[LOCK.RENEW f u:4 900]"},
		// Semaphores keep their request ids; the latch lives 13.5 s plus a
		// bounded wait.
		{options([]any{"SEMAPHORE.ACQUIRE", "s", 1}, request{block: 250, waitMs: 250}, false, "q"), "[SEMAPHORE.ACQUIRE s 1 BLOCK 250 REQUEST q 13750]"},
		{options([]any{"LATCH.AWAIT", "l"}, try, false, ""), "[LATCH.AWAIT l]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(c.got); got != c.want {
			t.Errorf("got %s, want %s", got, c.want)
		}
	}
	if got := latchKey("orders", "r"); got != "redisson_unlock_latch:{orders}:r" {
		t.Error(got)
	}
	if got := latchKey("{acct}:1", "r"); got != "redisson_unlock_latch:{acct}:1:r" {
		t.Error(got)
	}
	if got := acquireLatchKey("orders", "q"); got != "redisson_lock_request_latch:{orders}:q" {
		t.Error(got)
	}
	if got := acquireLatchKey("{acct}:1", "q"); got != "redisson_lock_request_latch:{acct}:1:q" {
		t.Error(got)
	}
	// A fair try's refusal (1) is no PTTL; a wait's is.
	if o, _ := (fairPlan{}).outcome(int64(1), try); o.acquired || o.pttl != 0 {
		t.Errorf("fair try refused: %+v", o)
	}
	if o, _ := (fairPlan{}).outcome(int64(900), wait); o.acquired || o.pttl != 900 {
		t.Errorf("fair wait refused: %+v", o)
	}
	// A resend waits what is left of a bounded wait; none left: one try.
	if r := (request{block: 1000, waitMs: 1000}).remaining(300 * time.Millisecond); r.block != 700 || r.waitMs != 1000 {
		t.Errorf("remaining: %+v", r)
	}
	if r := (request{block: 1000}).remaining(2 * time.Second); r.block != -1 {
		t.Errorf("nothing remaining: %+v", r)
	}
	if r := (request{block: 0}).remaining(time.Hour); r.block != 0 {
		t.Errorf("no limit: %+v", r)
	}
	// Replies.
	if o, _ := readOutcome(nil, false); !o.acquired {
		t.Error("nil is acquired")
	}
	if o, _ := readOutcome(int64(1234), false); o.acquired || o.pttl != 1234 {
		t.Error("an integer is refused with the PTTL")
	}
	if o, _ := readOutcome([]any{int64(-1), int64(7)}, true); !o.acquired || o.token != 7 {
		t.Error("[-1, token] is acquired")
	}
	if o, _ := readOutcome([]any{int64(99), int64(-1)}, true); o.acquired || o.pttl != 99 {
		t.Error("[pttl, -1] is refused")
	}
	if _, err := readOutcome("OK", false); err == nil {
		t.Error("a string reply accepted")
	}
	m := multiPlan{holds: []Hold{{KindLock, "a"}, {KindLock, "b"}}}
	for reply, want := range map[string]int{"[1 1]": 1, "[0 1]": 0, "[1 <nil>]": -1} {
		var r []any
		switch reply {
		case "[1 1]":
			r = []any{int64(1), int64(1)}
		case "[0 1]":
			r = []any{int64(0), int64(1)}
		default:
			r = []any{int64(1), nil}
		}
		if got, _ := m.released(r); got != want {
			t.Errorf("UNLOCKALL %s: %d, want %d", reply, got, want)
		}
	}
	// Durations: rounded up to whole ms, checked.
	if ms, _ := millis(1500*time.Microsecond, "lease"); ms != 2 {
		t.Errorf("1.5 ms -> %d", ms)
	}
	for _, d := range []time.Duration{0, -time.Second, 11 * 365 * 24 * time.Hour} {
		if _, err := millis(d, "lease"); err == nil {
			t.Errorf("%v accepted", d)
		}
	}
	if r, _ := newRequest([]AcquireOption{WithWait(0)}, time.Second); r.block != -1 || !r.watched || r.leaseMs != 1000 {
		t.Errorf("WithWait(0): %+v", r)
	}
	if r, _ := newRequest([]AcquireOption{WithWait(time.Second)}, time.Second); r.block != 1000 || r.waitMs != 1000 {
		t.Errorf("WithWait(1s): %+v", r)
	}
	if r, _ := newRequest(nil, time.Second); r.block != 0 || r.waitMs != 0 {
		t.Errorf("no wait: %+v", r)
	}
}

// TestLatchBookBounded: a handle that only acquires keeps the newest
// maxLatches latches for its next release's DEL; the older expire.
func TestLatchBookBounded(t *testing.T) {
	var b latchBook
	for i := 0; i < 3*maxLatches; i++ {
		b.acquiredAt(fmt.Sprint(i))
	}
	if len(b.acquired) != maxLatches || b.acquired[0] != fmt.Sprint(2*maxLatches) || b.acquired[maxLatches-1] != fmt.Sprint(3*maxLatches-1) {
		t.Fatalf("kept %d: %v … %v", len(b.acquired), b.acquired[0], b.acquired[len(b.acquired)-1])
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A driver answering one request and exiting: its grant is read, the next
// request finds it gone (indeterminate, never a verdict), and the one after
// starts a new driver.
func TestDriverPathRestartsAGoneDriver(t *testing.T) {
	script := `read line; case "$line" in *'"op":"acquire"'*) echo '{"outcome":"granted","token":7,"owner":"o:1"}';; *) echo '{"outcome":"released"}';; esac`
	p := &driverPath{mode: ModePyClient, argv: []string{"sh", "-c", script}, env: os.Environ(),
		logPath: filepath.Join(t.TempDir(), "driver.log")}
	defer p.close()
	ctx := context.Background()

	out, token, unacked, detail := p.acquire(ctx, "l", "w-1", time.Second)
	if out != Granted || token != 7 || unacked || detail != "owner o:1" {
		t.Fatalf("first acquire: %v %d %v %q", out, token, unacked, detail)
	}
	out, _, _, detail = p.acquire(ctx, "l", "w-2", time.Second)
	// Gone before the request was written (the write finds the pipe closed
	// on our side, or the reader gone: EPIPE), or after: indeterminate
	// either way.
	gone := strings.Contains(detail, "driver exited") || strings.Contains(detail, "file already closed") ||
		strings.Contains(detail, "broken pipe")
	if out != Maybe || !gone {
		t.Fatalf("acquire of a gone driver: %v %q", out, detail)
	}
	if out, detail := p.release(ctx, "l", "w-2"); out != Released {
		t.Fatalf("release by a new driver: %v %q", out, detail)
	}
}

// Each reply maps to the history's outcome; anything else is indeterminate.
func TestDriverPathOutcomes(t *testing.T) {
	cases := []struct {
		reply   string
		acquire bool
		want    Outcome
	}{
		{`{"outcome":"refused"}`, true, Refused},
		{`{"outcome":"notsynced","detail":"WAIT replied 0"}`, true, Maybe},
		{`{"outcome":"maybe","detail":"timeout"}`, true, Maybe},
		{`{"outcome":"what"}`, true, Maybe},
		{`{"outcome":"notheld"}`, false, NotHeld},
		{`{"outcome":"maybe"}`, false, Maybe},
		{`not json`, false, Maybe},
	}
	for _, c := range cases {
		p := &driverPath{mode: ModeRustClient, argv: []string{"sh", "-c", "read line; echo '" + c.reply + "'; read line"},
			env: os.Environ(), logPath: filepath.Join(t.TempDir(), "driver.log")}
		var got Outcome
		if c.acquire {
			got, _, _, _ = p.acquire(context.Background(), "l", "w", time.Second)
		} else {
			got, _ = p.release(context.Background(), "l", "w")
		}
		p.close()
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.reply, got, c.want)
		}
	}
}

// Every client runs every kind once the rotation's length of episodes has
// passed; at any moment the five clients run five different kinds; the
// next seed starts each client one kind further on.
func TestRotationCoversEveryKindForEveryClient(t *testing.T) {
	r := newRotation(allKinds, 820888)
	if len(r.kinds) != 6 || contains(r.kinds, KindFenced) {
		t.Fatalf("kinds %v: every kind but fenced", r.kinds)
	}
	seen := map[string]map[string]bool{}
	for e := 0; e < len(r.kinds); e++ {
		now := map[string]bool{}
		for _, m := range clientModes {
			k := r.kindOf(m)
			if now[k] {
				t.Fatalf("episode %d: two clients run %s", e, k)
			}
			now[k] = true
			if seen[m] == nil {
				seen[m] = map[string]bool{}
			}
			seen[m][k] = true
		}
		r.next()
	}
	for _, m := range clientModes {
		if len(seen[m]) != len(r.kinds) {
			t.Errorf("%s ran %v over %d episodes", m, seen[m], len(r.kinds))
		}
	}
	a, b := newRotation(allKinds, 7), newRotation(allKinds, 8)
	for i, m := range clientModes {
		if b.kindOf(m) != a.kinds[(7+i+1)%6] || a.kindOf(m) != a.kinds[(7+i)%6] {
			t.Errorf("%s: seed 7 %s, seed 8 %s", m, a.kindOf(m), b.kindOf(m))
		}
	}
	if r.kindOf(ModeAcked) != "" || newRotation([]string{KindFenced}, 1) != nil || newRotation(nil, 1).kindOf(ModeGoClient) != "" {
		t.Error("a command mode, or no kind but fenced, must run no client kind")
	}
}

// What the drivers read for each kind.
func TestKindRequestOf(t *testing.T) {
	read := kindRequest{kind: KindRW, holds: []heldLock{{lock: "a", role: RoleRead}}, owner: "o", lease: 10 * time.Second}
	if r := kindRequestOf("acquire", read); r.Side != "read" || r.Lock != "a" || r.LeaseMs != 10000 || r.WaitMs != 0 {
		t.Errorf("read: %+v", r)
	}
	multi := kindRequest{kind: KindMulti, holds: []heldLock{{lock: "b"}, {lock: "a"}}, owner: "o", lease: time.Second}
	if r := kindRequestOf("release", multi); r.Lock != "b" || len(r.Locks) != 2 || r.Locks[1] != "a" || r.LeaseMs != 0 {
		t.Errorf("multi release: %+v", r)
	}
	block := kindRequest{kind: KindBlock, holds: []heldLock{{lock: "c"}}, owner: "o", lease: time.Second, wait: waitOf(KindBlock)}
	if r := kindRequestOf("acquire", block); r.WaitMs != blockFor || r.Side != "" || waitOf(KindPlain) != 0 {
		t.Errorf("block: %+v", r)
	}
}

// scriptedKinds answers a kind path's releases from a list.
type scriptedKinds struct {
	releases []driverReply
}

func (s *scriptedKinds) acquireKind(context.Context, kindRequest) (Outcome, int64, string) {
	return Granted, 1, ""
}

func (s *scriptedKinds) releaseKind(context.Context, kindRequest) (Outcome, string) {
	r := s.releases[0]
	s.releases = s.releases[1:]
	return map[string]Outcome{"released": Released, "notheld": NotHeld, "maybe": Maybe}[r.Outcome], r.Detail
}

// A session's release that found its connection closed is indeterminate
// (the server ended the hold with the connection, when the client cannot
// tell), and the release is asked again until a reply says; a multi-hold's
// one outcome is every lock's; a fair lock's "released" is exact (its
// release of a lock already gone replies nil: not held).
func TestReleaseKindUntilKnown(t *testing.T) {
	rec := newRecorder()
	w := &worker{id: 1, mode: ModePyClient, rec: rec, par: params{horizon: time.Second}}
	p := &scriptedKinds{releases: []driverReply{
		{Outcome: "notheld", Detail: "NotHeld: safety:l: the session's connection closed"},
		{Outcome: "notheld"},
		{Outcome: "maybe", Detail: "timeout"},
		{Outcome: "released"},
		{Outcome: "released"},
	}}
	session := kindRequest{kind: KindSession, holds: []heldLock{{lock: "l"}}, owner: "o1", lease: time.Minute}
	w.releaseKindUntilKnown(p, session, "pyclient/session", rec.now())
	multi := kindRequest{kind: KindMulti, holds: []heldLock{{lock: "a"}, {lock: "b"}}, owner: "o2", lease: time.Minute}
	w.releaseKindUntilKnown(p, multi, "pyclient/multi", rec.now())
	// A fair lock's release that replies "released" released it: nothing
	// to ask again.
	fair := kindRequest{kind: KindFair, holds: []heldLock{{lock: "f"}}, owner: "o3", lease: time.Minute}
	w.releaseKindUntilKnown(p, fair, "pyclient/fair", rec.now())
	if len(p.releases) != 0 {
		t.Errorf("%d replies left", len(p.releases))
	}
	var got []string
	for _, o := range rec.ops {
		got = append(got, o.Mode+" "+o.Lock+" "+o.Outcome.String())
	}
	want := []string{"pyclient/session l maybe", "pyclient/session l not-held",
		"pyclient/multi a maybe", "pyclient/multi b maybe", "pyclient/multi a released", "pyclient/multi b released",
		"pyclient/fair f released"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if rec.ops[0].Return < rec.ops[0].Call+int64(time.Second) {
		t.Error("an indeterminate release must stay open until the horizon")
	}
	if last := rec.ops[len(rec.ops)-1]; last.Return >= last.Call+int64(time.Second) {
		t.Error("a fair release's reply came: its outcome is open within the call only")
	}
}

// A release whose outcome never becomes known is asked again until the
// lease taken at the grant is over (and a second more), no longer; one
// that becomes known is not asked again.
func TestUntilKnownStopsAtTheLeasesEnd(t *testing.T) {
	rec := newRecorder()
	tries := 0
	known := untilKnown(rec, rec.now(), 0, func() bool { tries++; return false })
	if known || tries < 2 || rec.now() < int64(time.Second) {
		t.Errorf("never known: known %v after %d tries and %v", known, tries, time.Duration(rec.now()))
	}
	tries = 0
	if !untilKnown(rec, rec.now(), time.Minute, func() bool { tries++; return tries == 3 }) || tries != 3 {
		t.Errorf("known at the third try: %d tries", tries)
	}
}

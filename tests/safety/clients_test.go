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

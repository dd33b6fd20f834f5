package main

import (
	"strings"
	"testing"
	"time"
)

// A close only a master can judge: a hold a master still shows past the
// ceiling is kept (a violation), one no master could be asked about is
// unverified (not one), and the slowest close counts the ones seen gone.
func TestSessionClosesAreKeptOnlyWhenAMasterShowsThem(t *testing.T) {
	r := &sessionReports{lost: map[string]int{}, reasons: map[string][]string{},
		closes: map[string]int{}, slowest: map[string]time.Duration{}, keptHolds: map[string]int{},
		unverified: map[string]int{}}
	r.closed("s", 2*time.Second, closeGone)
	r.closed("s", 11*time.Second, closeKept)
	r.closed("s", closeCeiling+noMasterCeiling+time.Second, closeUnverified)
	if got := r.kept("s"); got != 1 {
		t.Fatalf("kept %d, want 1", got)
	}
	notes := strings.Join(r.notes(), "\n")
	for _, want := range []string{"3 ended by closing the connection", "seen gone within 2.00s",
		"1 still held 10s after the close", "1 not verified (no master answered)"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q: %s", want, notes)
		}
	}
}

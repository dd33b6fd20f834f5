package rwlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The watchdog's schedule, no server: a fake renewal.

// lostWithin waits for the watchdog's report, with a ceiling for a loaded
// machine.
func lostWithin(t *testing.T, lost <-chan *watchdog, w *watchdog) {
	t.Helper()
	select {
	case got := <-lost:
		if got != w {
			t.Fatal("the report names another watchdog")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no loss reported within 10 s")
	}
}

func TestWatchdogRenewsUntilNotHeld(t *testing.T) {
	t.Parallel()
	var renewals atomic.Int32
	renew := func(context.Context) (bool, error) { return renewals.Add(1) < 3, nil }
	lost := make(chan *watchdog, 2)
	w := startWatchdog(30*time.Millisecond, renew, func(w *watchdog) { lost <- w })
	lostWithin(t, lost, w)
	if n := renewals.Load(); n != 3 {
		t.Fatalf("lost after %d renewals, want 3", n)
	}
	// Nothing renews after the loss, nor reports it twice.
	time.Sleep(100 * time.Millisecond)
	if n := renewals.Load(); n != 3 || len(lost) != 0 {
		t.Fatalf("after the loss: %d renewals, %d more reports", n, len(lost))
	}
}

func TestWatchdogKeepsTryingForALease(t *testing.T) {
	t.Parallel()
	var renewals atomic.Int32
	renew := func(context.Context) (bool, error) {
		renewals.Add(1)
		return false, errors.New("connection refused")
	}
	lost := make(chan *watchdog, 1)
	lease := 60 * time.Millisecond
	began := time.Now()
	w := startWatchdog(lease, renew, func(w *watchdog) { lost <- w })
	lostWithin(t, lost, w)
	// Failed renewals count as lost only once the lease may have run out
	// (how many tries fit in it depends on the machine's load).
	if since := time.Since(began); since < lease || renewals.Load() < 1 {
		t.Fatalf("lost after %v and %d renewals: want at least the lease (%v)", since, renewals.Load(), lease)
	}
}

func TestWatchdogHaltedDuringARenewal(t *testing.T) {
	t.Parallel()
	entered, answer := make(chan struct{}), make(chan struct{})
	var renewals atomic.Int32
	renew := func(context.Context) (bool, error) {
		if renewals.Add(1) == 1 {
			close(entered)
			<-answer
		}
		return false, nil
	}
	var reports atomic.Int32
	w := startWatchdog(30*time.Millisecond, renew, func(*watchdog) { reports.Add(1) })
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal within 10 s")
	}
	w.halt()
	close(answer) // "not held", but released meanwhile: stale
	time.Sleep(100 * time.Millisecond)
	if reports.Load() != 0 || renewals.Load() != 1 {
		t.Fatalf("after halt: %d reports, %d renewals", reports.Load(), renewals.Load())
	}
}

func TestWatchdogTicksOnItsGrid(t *testing.T) {
	w := &watchdog{period: 10 * time.Millisecond, timer: time.AfterFunc(time.Hour, func() {})}
	defer w.timer.Stop()
	start := time.Now()
	w.due = start.Add(10 * time.Millisecond)
	w.rearm(start.Add(15 * time.Millisecond)) // a quick renewal: the next tick
	if got := w.due.Sub(start); got != 20*time.Millisecond {
		t.Fatalf("after a quick renewal: due at %v, want 20ms", got)
	}
	w.rearm(start.Add(45 * time.Millisecond)) // a slow one overran 30 and 40 ms
	if got := w.due.Sub(start); got != 50*time.Millisecond {
		t.Fatalf("after a slow renewal: due at %v, want 50ms", got)
	}
	w.rearm(start.Add(60 * time.Millisecond)) // ended on a tick: the one after
	if got := w.due.Sub(start); got != 70*time.Millisecond {
		t.Fatalf("after a renewal ending on a tick: due at %v, want 70ms", got)
	}
}

package rwlock

import (
	"context"
	"sync"
	"time"
)

// watchdog renews a hold every third of its lease while it lives, as
// Redisson's lock watchdog does. It stops when told to, or when a renewal
// says the owner no longer holds the lock (or none succeeded for a whole
// lease: the server unreachable), which it reports once through lost.
//
// It is a timer, not a goroutine: a renewal runs on the timer's own
// goroutine when it fires. Most holds end before their first renewal, and
// a goroutine started and woken to stop for each of them was a large part
// of an uncontended cycle's cost on the client.
type watchdog struct {
	lease, period time.Duration
	renew         func(context.Context) (bool, error)
	lost          func(*watchdog)

	mu      sync.Mutex
	timer   *time.Timer
	due     time.Time // when the timer fires: every period from the start
	last    time.Time // the last renewal that succeeded (the start before any)
	stopped bool
}

func startWatchdog(lease time.Duration, renew func(context.Context) (bool, error), lost func(*watchdog)) *watchdog {
	now := time.Now()
	w := &watchdog{lease: lease, period: lease / 3, renew: renew, lost: lost, last: now}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.due = now.Add(w.period)
	w.timer = time.AfterFunc(w.period, w.tick)
	return w
}

func (w *watchdog) tick() {
	ctx, cancel := context.WithTimeout(context.Background(), w.period)
	held, err := w.renew(ctx)
	cancel()
	if w.settle(held, err) {
		w.lost(w)
	}
}

// settle reads a renewal's answer: the timer set for the next tick, or
// true when the hold is gone (reported by the caller, outside mu).
func (w *watchdog) settle(held bool, err error) (gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped { // released meanwhile: the renewal's answer is stale
		return false
	}
	now := time.Now()
	if err != nil {
		// The connection: try again at the next tick while the lease may
		// still be running on the server.
		if now.Sub(w.last) < w.lease {
			w.rearm(now)
			return false
		}
		return true
	}
	if !held {
		return true
	}
	w.last = now
	w.rearm(now)
	return false
}

// rearm sets the timer for the next tick on the period's grid, skipping
// the ticks a slow renewal overran (as a time.Ticker drops them); under mu.
func (w *watchdog) rearm(now time.Time) {
	w.due = w.due.Add(w.period)
	if !w.due.After(now) {
		w.due = w.due.Add((now.Sub(w.due)/w.period + 1) * w.period)
	}
	w.timer.Reset(w.due.Sub(now))
}

// halt stops the watchdog without waiting for it: it may be the watchdog's
// own callback releasing the lock.
func (w *watchdog) halt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

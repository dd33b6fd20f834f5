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
type watchdog struct {
	stop chan struct{}
	once sync.Once
}

func startWatchdog(lease time.Duration, renew func(context.Context) (bool, error), lost func(*watchdog)) *watchdog {
	w := &watchdog{stop: make(chan struct{})}
	go w.run(lease, renew, lost)
	return w
}

func (w *watchdog) run(lease time.Duration, renew func(context.Context) (bool, error), lost func(*watchdog)) {
	period := lease / 3
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	last := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), period)
		held, err := renew(ctx)
		cancel()
		select {
		case <-w.stop: // released meanwhile: the renewal's answer is stale
			return
		default:
		}
		if err != nil {
			// The connection: try again at the next tick while the lease
			// may still be running on the server.
			if time.Since(last) < lease {
				continue
			}
			held = false
		}
		if !held {
			lost(w)
			return
		}
		last = time.Now()
	}
}

// halt stops the watchdog without waiting for it: it may be the watchdog's
// own callback releasing the lock.
func (w *watchdog) halt() { w.once.Do(func() { close(w.stop) }) }

package rwlock

import (
	"fmt"
	"math"
	"time"
)

// DefaultWatchdogTimeout is Redisson's lockWatchdogTimeout: the lease of a
// hold taken without one, renewed every third of it.
const DefaultWatchdogTimeout = 30 * time.Second

// DefaultSyncTimeout is Redisson's slavesSyncTimeout: how long an
// acquisition waits for the master's replicas to acknowledge it.
const DefaultSyncTimeout = time.Second

// replyMargin is added to a wait for its reply to come back: the server
// answers when the wait ends, the network and a busy server need a little
// more.
const replyMargin = 5 * time.Second

// unlockLatchTTL is how long the server remembers a release's reply under
// its request id (Redisson's 13.5 s), so that a retried release is answered
// as the first one was. Acquisitions use it too: their one retry comes
// within a wait plus a reply margin of the first send, and a latch outliving
// that costs nothing but a key until it expires (or the release deletes it).
const unlockLatchTTL = 13500

// maxMillis is the module's largest lease or wait (ten years).
const maxMillis = 315360000000

// ReplicaSync says what an acquisition waits for once the master granted
// it, as Redisson's checkLockSyncedSlaves (on by default). WAIT and WAITAOF
// go in the acquisition's own pipeline, so they cost no round trip. When
// what was asked for did not acknowledge within Timeout, the hold is
// released and the acquisition fails with [ErrNotSynced]; so does one the
// master refused with NOREPLICAS (its min-replicas-to-write).
type ReplicaSync struct {
	// Enabled: off, an acquisition returns as soon as the master has it.
	Enabled bool
	// Timeout bounds WAIT and WAITAOF (Redisson's slavesSyncTimeout, 1 s).
	Timeout time.Duration
	// Replicas: [ReplicasAuto] (0, the default) waits for the highest
	// number of replicas the Client ever learned the master to have (from
	// INFO, before its first acquisition there and every 5 s after, in an
	// acquisition's pipeline). A master that later says it has fewer (one
	// paused, or cut off and about to be demoted) does not lower it: its
	// acquisitions fail instead of going unreplicated. Lowering it takes a
	// new Client, or an explicit count. N > 0 waits for exactly N replicas;
	// [NoReplicas] never waits for replicas.
	Replicas int
	// AOF: [AOFAuto] (the default) waits for the master's fsync (WAITAOF
	// 1 0) when its INFO says it writes an AOF and it has WAITAOF (Redis
	// 7.2+); [AOFRequired] always (a master without an AOF or WAITAOF then
	// fails every acquisition); [AOFOff] never.
	AOF AOFPolicy
}

// The values of [ReplicaSync.Replicas] that are not a count.
const (
	// ReplicasAuto learns the count from the master, as a high-water mark.
	ReplicasAuto = 0
	// NoReplicas never waits for replicas (an explicit 0).
	NoReplicas = -1
)

// AOFPolicy says when an acquisition waits for the master's AOF fsync.
type AOFPolicy int

// The AOF policies.
const (
	AOFAuto     AOFPolicy = iota // when the master says it writes an AOF
	AOFRequired                  // always
	AOFOff                       // never
)

// DefaultReplicaSync is the default policy: enabled, 1 s, replicas and AOF
// learned from the master.
var DefaultReplicaSync = ReplicaSync{Enabled: true, Timeout: DefaultSyncTimeout}

// expected is the number of replicas to wait for, given the most seen.
func (s ReplicaSync) expected(seen int) int {
	switch {
	case s.Replicas == ReplicasAuto:
		return seen
	case s.Replicas == NoReplicas:
		return 0
	}
	return s.Replicas
}

// learns tells whether acquisitions need what the master's INFO says.
func (s ReplicaSync) learns() bool {
	return s.Enabled && (s.Replicas == ReplicasAuto || s.AOF == AOFAuto)
}

func (s ReplicaSync) check() error {
	if !s.Enabled {
		return nil
	}
	if _, err := millis(s.Timeout, "replica sync timeout"); err != nil {
		return err
	}
	if s.Replicas < NoReplicas {
		return fmt.Errorf("rwlock: ReplicaSync.Replicas %d: ReplicasAuto, NoReplicas or a count", s.Replicas)
	}
	if s.AOF < AOFAuto || s.AOF > AOFOff {
		return fmt.Errorf("rwlock: ReplicaSync.AOF %d: AOFAuto, AOFRequired or AOFOff", s.AOF)
	}
	return nil
}

// AcquireOption sets one acquisition's wait and lease ([Semaphore.Acquire]
// and [CountDownLatch.Await] take a wait only).
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	wait     time.Duration
	waitSet  bool
	lease    time.Duration
	leaseSet bool
}

// WithWait bounds the wait on the server: 0 tries once (no BLOCK), d waits
// up to d (BLOCK d, any longer than the connection's read timeout). Without
// it, an acquisition waits without limit (BLOCK 0) or until its context ends.
func WithWait(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.wait, c.waitSet = d, true }
}

// WithLease gives the hold a lease: it ends when the lease does, and no
// watchdog renews it. Without it, the hold gets the client's watchdog timeout
// and the watchdog renews it while held.
func WithLease(d time.Duration) AcquireOption {
	return func(c *acquireConfig) { c.lease, c.leaseSet = d, true }
}

// request is one acquisition's arguments, checked before any I/O.
type request struct {
	leaseMs int64
	block   int64 // -1: no BLOCK; 0: without limit; else ms
	waitMs  int64 // the bounded wait asked for (ms; 0: none), kept by remaining
	watched bool  // no lease given: the watchdog renews it
}

// latchTTL is how long the server keeps the acquisition's latch: the
// release's 13.5 s, plus a bounded wait. A parked call's latch is stored
// when it is served, and its lost reply is seen at the latest the wait
// plus the reply margin after the send, so the resend still finds it.
func (r request) latchTTL() int64 { return unlockLatchTTL + r.waitMs }

func newRequest(opts []AcquireOption, watchdogTimeout time.Duration) (request, error) {
	cfg := configure(opts)
	r, err := cfg.waitRequest()
	if err != nil {
		return r, err
	}
	lease := watchdogTimeout
	if cfg.leaseSet {
		lease = cfg.lease
	} else {
		r.watched = true
	}
	ms, err := millis(lease, "lease")
	if err != nil {
		return r, err
	}
	r.leaseMs = ms
	return r, nil
}

// newWait is the request of what waits but takes no lease (a semaphore's
// permits, a latch's wait for zero, named by what): [WithLease] is refused.
func newWait(opts []AcquireOption, what string) (request, error) {
	cfg := configure(opts)
	if cfg.leaseSet {
		return request{}, fmt.Errorf("rwlock: %s takes no lease", what)
	}
	return cfg.waitRequest()
}

func configure(opts []AcquireOption) acquireConfig {
	var cfg acquireConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// waitRequest is the request's wait: BLOCK without limit by default.
func (cfg acquireConfig) waitRequest() (request, error) {
	r := request{block: 0}
	if cfg.waitSet {
		switch {
		case cfg.wait < 0:
			return r, fmt.Errorf("rwlock: a wait cannot be negative: %v", cfg.wait)
		case cfg.wait == 0:
			r.block = -1
		default:
			ms, err := millis(cfg.wait, "wait")
			if err != nil {
				return r, err
			}
			r.block, r.waitMs = ms, ms
		}
	}
	return r, nil
}

// millis is d in the module's whole milliseconds, rounded up so that a
// short duration never becomes 0, within the module's range.
func millis(d time.Duration, what string) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("rwlock: a %s must be positive: %v", what, d)
	}
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	if ms > maxMillis {
		return 0, fmt.Errorf("rwlock: a %s cannot exceed ten years: %v", what, d)
	}
	return ms, nil
}

func containsAny(s, chars string) bool {
	for _, r := range s {
		for _, c := range chars {
			if r == c {
				return true
			}
		}
	}
	return false
}

// remaining is the request to resend after elapsed: the same lease, and
// what is left of a bounded wait (none left: one try, no BLOCK); a wait
// without limit, or none, stays as it was.
func (r request) remaining(elapsed time.Duration) request {
	if r.block > 0 {
		left := r.block - elapsed.Milliseconds()
		if left < 1 {
			left = -1
		}
		r.block = left
	}
	return r
}

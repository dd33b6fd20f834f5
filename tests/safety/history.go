package main

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// Outcome is how an operation ended, as its client saw it.
type Outcome int

const (
	// Granted: the acquisition was granted and acknowledged as the path
	// acknowledges (raw: the reply; acked: the reply and WAIT).
	Granted Outcome = iota
	// Refused: the lock was held (or the server refused to write): nothing
	// happened.
	Refused
	// Maybe: indeterminate. It may have taken effect or not (an error, a
	// timeout, a grant the replicas did not acknowledge).
	Maybe
	// Released: the release replied 1.
	Released
	// NotHeld: the release replied nil: the owner held nothing.
	NotHeld
)

func (o Outcome) String() string {
	return [...]string{"granted", "refused", "maybe", "released", "not-held"}[o]
}

// OpKind is an acquisition or a release.
type OpKind int

const (
	Acquire OpKind = iota
	Release
)

// Op is one operation of the history: times are nanoseconds since the
// run's start, on the one clock every process of this host shares.
type Op struct {
	Mode    string
	Lock    string
	Worker  int
	Owner   string
	Kind    OpKind
	Outcome Outcome
	Call    int64
	Return  int64
	Token   int64 // granted (or unacknowledged-grant) token, 0 when unknown
	Lease   int64 // ns
	Detail  string
	// Role: RoleRead for a read hold of a read-write lock, which other read
	// holds may share; every other hold excludes all others.
	Role Role `json:",omitempty"`
}

// Write is one write to the fenced resource.
type Write struct {
	Mode     string
	Lock     string
	Owner    string
	Token    int64
	At       int64
	Accepted bool
	// InLease: written before the holder's lease could have ended (grant
	// call + lease): a holder in its right.
	InLease bool
}

// Episode is one injected fault, from injection to the topology healthy again.
type Episode struct {
	Kind       string
	Start, End int64
	Failover   bool // Sentinel elected a new master during it
	Detail     string
	// Locks: in a cluster, the locks on the master under fault, whose
	// grants alone end its unavailability (the other shards serve on).
	Locks []string `json:",omitempty"`
}

// recorder collects the history of a run.
type recorder struct {
	start time.Time

	Modes, Faults []string

	mu       sync.Mutex
	ops      []Op
	writes   []Write
	episodes []Episode
	refused  map[string]int64 // refused acquisitions per mode (not in the history)
}

func (r *recorder) refusal(mode string) {
	r.mu.Lock()
	r.refused[mode]++
	r.mu.Unlock()
}

func (r *recorder) refusedOf(mode string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused[mode]
}

// saved is a run's history as written to a file.
type saved struct {
	Modes, Faults []string
	Ops           []Op
	Writes        []Write
	Episodes      []Episode
	Refused       map[string]int64
}

func (r *recorder) save(path string) error {
	r.mu.Lock()
	data, err := json.Marshal(saved{r.Modes, r.Faults, r.ops, r.writes, r.episodes, r.refused})
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func load(path string) (*recorder, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s saved
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &recorder{Modes: s.Modes, Faults: s.Faults, ops: s.Ops, writes: s.Writes, episodes: s.Episodes, refused: s.Refused}, nil
}

func newRecorder() *recorder { return &recorder{start: time.Now(), refused: map[string]int64{}} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) op(o Op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) episode(e Episode) {
	r.mu.Lock()
	r.episodes = append(r.episodes, e)
	r.mu.Unlock()
}

// resource is the fenced resource: per lock, it accepts a write only with
// a token strictly higher than every token it accepted before, and the
// check and the write are one step (the compare-and-set the fencing recipe
// asks of the storage).
type resource struct {
	rec *recorder
	mu  sync.Mutex
	max map[string]int64
}

func newResource(rec *recorder) *resource { return &resource{rec: rec, max: map[string]int64{}} }

// write tries a write by owner with token; grantCall+lease bounds the
// earliest moment the holder's lease may end.
func (r *resource) write(mode, lock, owner string, token, grantCall, lease int64) bool {
	r.mu.Lock()
	at := r.rec.now()
	ok := token > r.max[lock]
	if ok {
		r.max[lock] = token
	}
	r.mu.Unlock()
	r.rec.mu.Lock()
	r.rec.writes = append(r.rec.writes, Write{Mode: mode, Lock: lock, Owner: owner, Token: token, At: at, Accepted: ok, InLease: at < grantCall+lease})
	r.rec.mu.Unlock()
	return ok
}

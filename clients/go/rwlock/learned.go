package rwlock

import (
	"strconv"
	"sync"
	"time"
)

// refreshInterval is how often what a Client learned of a master is
// refreshed: an INFO added to an acquisition's pipeline, no round trip of
// its own.
const refreshInterval = 5 * time.Second

// infoArgs asks a master what the replica sync needs of it.
var infoArgs = []any{"INFO", "replication", "persistence"}

// learned is what a Client learned of one master for its acquisitions'
// replica sync: expected, the most replicas the master ever said it had
// (only ever raised: a master paused or cut off says 0 until it is
// demoted, and must not be believed), whether it writes an AOF (the latest
// INFO's word: turning the AOF off is a configuration change, not a
// failure), and whether it lacks WAITAOF (learned from "unknown command").
type learned struct {
	mu        sync.Mutex
	known     bool // an INFO reply came: until then each acquisition asks first
	expected  int
	aof       bool
	noWaitAOF bool
	asked     time.Time // when an INFO was last sent
}

// learn reads an INFO replication/persistence reply: expected only rises.
func (m *learned) learn(info map[string]string, now time.Time) {
	replicas, _ := strconv.Atoi(info["connected_slaves"])
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expected = max(m.expected, replicas)
	m.aof = info["aof_enabled"] == "1"
	if !m.known {
		m.known, m.asked = true, now
	}
}

func (m *learned) isKnown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known
}

// refreshDue tells whether this acquisition adds an INFO to its pipeline:
// at most one every refreshInterval, whichever acquisition sends it.
func (m *learned) refreshDue(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known || now.Sub(m.asked) < refreshInterval {
		return false
	}
	m.asked = now
	return true
}

func (m *learned) lacksWaitAOF() {
	m.mu.Lock()
	m.noWaitAOF = true
	m.mu.Unlock()
}

// syncCommands is what follows an acquisition in its pipeline: WAIT for
// the replicas expected, WAITAOF 1 0 when the AOF is waited for.
func (m *learned) syncCommands(s ReplicaSync) [][]any {
	if !s.Enabled {
		return nil
	}
	timeoutMs, err := millis(s.Timeout, "replica sync timeout")
	if err != nil {
		return nil // refused by WithReplicaSync: never here
	}
	m.mu.Lock()
	expected, aof, noWaitAOF := s.expected(m.expected), m.aof, m.noWaitAOF
	m.mu.Unlock()
	var cmds [][]any
	if expected > 0 {
		cmds = append(cmds, []any{"WAIT", int64(expected), timeoutMs})
	}
	if s.AOF == AOFRequired || (s.AOF == AOFAuto && aof && !noWaitAOF) {
		cmds = append(cmds, []any{"WAITAOF", int64(1), int64(0), timeoutMs})
	}
	return cmds
}

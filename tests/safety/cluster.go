package main

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The topologies (SAFETY_TOPOLOGY).
const (
	// TopologySentinel: a master, 2 replicas and 3 Sentinels (topology.go).
	TopologySentinel = "sentinel"
	// TopologyCluster: a Redis Cluster of 3 masters, each with a replica,
	// that fails over by itself; each fault hits one master, the shards in
	// turn, and every mode's locks lie on every shard.
	TopologyCluster = "cluster"
)

const (
	clusterShards = 3
	// nodeTimeoutMs is cluster-node-timeout: a master unreachable this long
	// is PFAIL, then FAIL once a majority of masters agree, and its replica
	// is elected within about a second more (as Sentinel's down-after).
	nodeTimeoutMs = 1000
)

// slotRange is the slots shard i is given at the start (and keeps: the
// harness never migrates slots).
func slotRange(i int) (lo, hi int) {
	return i * 16384 / clusterShards, (i+1)*16384/clusterShards - 1
}

// shardOfSlot is the shard whose range holds slot.
func shardOfSlot(slot int64) int {
	for s := 0; s < clusterShards-1; s++ {
		if _, hi := slotRange(s); int(slot) <= hi {
			return s
		}
	}
	return clusterShards - 1
}

// startCluster starts 6 nodes with the module, nodes 2i and 2i+1 forming
// shard i (2i the first master, with slotRange(i)). Each node announces its
// replication proxy as its address and its bus proxy as its cluster bus
// port, so the harness can cut a master's replication link and cluster bus
// (repl-partition) and delay its replication (lag-kill) as under Sentinel,
// and the clients reach it through their group's proxy. Each node opens its
// connections from an address of its own, 127.0.1.<i+1> (all of 127/8 is
// the loopback on Linux), so repl-partition also cuts the links it opens
// to the others' bus: without that its pings still reached them and the
// cluster never failed it over.
func startCluster(server, module, root string) (*topology, error) {
	t := &topology{server: server, module: module, root: root, cluster: true, slots: map[string]int64{}}
	for i := 0; i < 2*clusterShards; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		busPort, err := freePort()
		if err != nil {
			return nil, err
		}
		n, dir, err := newNode(root, i, port)
		if err != nil {
			return nil, err
		}
		if n.bus, err = newProxy(fmt.Sprintf("bus%d", i), "127.0.0.1:"+strconv.Itoa(busPort)); err != nil {
			return nil, err
		}
		n.src = fmt.Sprintf("127.0.1.%d", i+1)
		args := append(nodeArgs(dir, module, port, n.repl.port()),
			"--bind-source-addr", n.src,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(nodeTimeoutMs),
			"--cluster-port", strconv.Itoa(busPort),
			"--cluster-announce-ip", "127.0.0.1",
			"--cluster-announce-port", strconv.Itoa(n.repl.port()),
			"--cluster-announce-bus-port", strconv.Itoa(n.bus.port()),
			// A replica cut off by the fault stands for election whatever
			// its data's age: the harness faults the master, never both.
			"--cluster-replica-validity-factor", "0",
			// The other shards serve while one fails over.
			"--cluster-require-full-coverage", "no")
		n.proc = &process{name: fmt.Sprintf("node%d", i), port: port, dir: dir, args: args}
		register(n.proc)
		t.nodes = append(t.nodes, n)
		if err := n.proc.start(server); err != nil {
			return t, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for s := 0; s < clusterShards; s++ {
		lo, hi := slotRange(s)
		if err := nodeDo(ctx, t.nodes[2*s], "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return t, fmt.Errorf("node%d: ADDSLOTSRANGE: %w", 2*s, err)
		}
	}
	for _, n := range t.nodes[1:] {
		if err := nodeDo(ctx, t.nodes[0], "CLUSTER", "MEET", "127.0.0.1", n.repl.port(), n.bus.port()).Err(); err != nil {
			return t, fmt.Errorf("CLUSTER MEET node%d: %w", n.idx, err)
		}
	}
	// A node takes CLUSTER REPLICATE once gossip told it of the master.
	deadline := time.Now().Add(healthCeiling)
	for s := 0; s < clusterShards; s++ {
		m, r := t.nodes[2*s], t.nodes[2*s+1]
		id, err := nodeDo(ctx, m, "CLUSTER", "MYID").Text()
		if err != nil {
			return t, err
		}
		for {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := nodeDo(rctx, r, "CLUSTER", "REPLICATE", id).Err()
			rcancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return t, fmt.Errorf("node%d: CLUSTER REPLICATE node%d: %w", r.idx, m.idx, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return t, nil
}

// cutFrom holds every connection m opens to the other nodes (their bus and
// replication proxies) until healFrom; a no-op under Sentinel, where a
// master opens none.
func (t *topology) cutFrom(m *node) {
	if m.src == "" {
		return
	}
	for _, n := range t.nodes {
		if n != m {
			n.repl.blockFrom(m.src)
			n.bus.blockFrom(m.src)
		}
	}
}

func (t *topology) healFrom(m *node) {
	if m.src == "" {
		return
	}
	for _, n := range t.nodes {
		if n != m {
			n.repl.unblockFrom()
			n.bus.unblockFrom()
		}
	}
}

// nodeDo runs one command on n's server itself (no proxy), on a connection
// of its own.
func nodeDo(ctx context.Context, n *node, args ...any) *redis.Cmd {
	c := redis.NewClient(&redis.Options{Addr: n.proc.addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	return c.Do(ctx, args...)
}

// clusterSlots is n's view of which announced port serves each shard's
// range (CLUSTER SLOTS).
func clusterSlots(ctx context.Context, n *node) (map[int]int64, error) {
	entries, err := nodeDo(ctx, n, "CLUSTER", "SLOTS").Slice()
	if err != nil {
		return nil, err
	}
	served := map[int]int64{}
	for _, e := range entries {
		r, _ := e.([]any)
		if len(r) < 3 {
			continue
		}
		start, _ := r[0].(int64)
		m, _ := r[2].([]any)
		if len(m) < 2 {
			continue
		}
		port, _ := m[1].(int64)
		served[shardOfSlot(start)] = port
	}
	return served, nil
}

// clusterHealthy says why the cluster is not back to each shard having one
// master with its replica online, every node agreeing on who serves each
// shard and flagging no node as failing ("" when it is). Its node is the
// master of shard t.target, the one the next fault hits.
func (t *topology) clusterHealthy(ctx context.Context) (*node, string) {
	masters := make([]*node, clusterShards)
	for s := 0; s < clusterShards; s++ {
		a, b := t.nodes[2*s], t.nodes[2*s+1]
		ia, err := info(ctx, a.proc.addr(), "replication")
		if err != nil {
			return nil, fmt.Sprintf("node%d: %v", a.idx, err)
		}
		ib, err := info(ctx, b.proc.addr(), "replication")
		if err != nil {
			return nil, fmt.Sprintf("node%d: %v", b.idx, err)
		}
		m, mi, ri := a, ia, ib
		if ib["role"] == "master" {
			m, mi, ri = b, ib, ia
		}
		if mi["role"] != "master" || ri["role"] != "slave" {
			return nil, fmt.Sprintf("shard %d: node%d role:%s, node%d role:%s", s, a.idx, ia["role"], b.idx, ib["role"])
		}
		if ri["master_link_status"] != "up" || ri["master_port"] != strconv.Itoa(m.repl.port()) {
			return nil, fmt.Sprintf("shard %d: the replica's link %s to port %s", s, ri["master_link_status"], ri["master_port"])
		}
		if !strings.Contains(mi["slave0"], "state=online") {
			return nil, fmt.Sprintf("shard %d: master node%d has no online replica", s, m.idx)
		}
		masters[s] = m
	}
	for _, n := range t.nodes {
		text, err := nodeDo(ctx, n, "CLUSTER", "INFO").Text()
		if err != nil {
			return nil, fmt.Sprintf("node%d: %v", n.idx, err)
		}
		ci := parseInfo(text)
		if ci["cluster_state"] != "ok" || ci["cluster_known_nodes"] != strconv.Itoa(len(t.nodes)) {
			return nil, fmt.Sprintf("node%d: cluster_state:%s, %s known nodes", n.idx, ci["cluster_state"], ci["cluster_known_nodes"])
		}
		nodes, err := nodeDo(ctx, n, "CLUSTER", "NODES").Text()
		if err != nil {
			return nil, fmt.Sprintf("node%d: %v", n.idx, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
			if f := strings.Fields(line); len(f) > 2 && (strings.Contains(f[2], "fail") || strings.Contains(f[2], "handshake")) {
				return nil, fmt.Sprintf("node%d flags %s: %s", n.idx, f[1], f[2])
			}
		}
		served, err := clusterSlots(ctx, n)
		if err != nil {
			return nil, fmt.Sprintf("node%d: %v", n.idx, err)
		}
		for s, m := range masters {
			if served[s] != int64(m.repl.port()) {
				return nil, fmt.Sprintf("node%d sees shard %d served by port %d, not node%d", n.idx, s, served[s], m.idx)
			}
		}
	}
	return masters[t.target], ""
}

// clusterNewMaster is the node promoted in old's shard, once it says
// role:master and serves the shard's slots (nil while not yet).
func (t *topology) clusterNewMaster(ctx context.Context, old *node) *node {
	partner := t.nodes[old.idx^1]
	pi, err := info(ctx, partner.proc.addr(), "replication")
	if err != nil || pi["role"] != "master" {
		return nil
	}
	served, err := clusterSlots(ctx, partner)
	if err != nil || served[old.idx/2] != int64(partner.repl.port()) {
		return nil
	}
	return partner
}

// clusterMasterOf is the announced address of the master serving slot, as
// a node the harness asks (any, from a random one on, as a client's seed
// list) says.
func (t *topology) clusterMasterOf(ctx context.Context, slot int64, rng *rand.Rand) (string, error) {
	start := rng.Intn(len(t.nodes))
	err := fmt.Errorf("no node answers")
	for i := range t.nodes {
		n := t.nodes[(start+i)%len(t.nodes)]
		var served map[int]int64
		if served, err = clusterSlots(ctx, n); err == nil {
			if port, ok := served[shardOfSlot(slot)]; ok {
				return "127.0.0.1:" + strconv.FormatInt(port, 10), nil
			}
			err = fmt.Errorf("node%d knows no master of slot %d", n.idx, slot)
		}
	}
	return "", err
}

// spreadLocks names n locks prefix:<j>, the i-th on shard i mod 3, and
// records their slots (t.slots, written before any worker starts).
func (t *topology) spreadLocks(prefix string, n int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for j := 0; len(out) < n; j++ {
		if j > 1000 {
			return nil, fmt.Errorf("no name %s:<j> on shard %d", prefix, len(out)%clusterShards)
		}
		name := fmt.Sprintf("%s:%d", prefix, j)
		slot, err := nodeDo(ctx, t.nodes[0], "CLUSTER", "KEYSLOT", name).Int64()
		if err != nil {
			return nil, err
		}
		if shardOfSlot(slot) == len(out)%clusterShards {
			out = append(out, name)
			t.slots[name] = slot
		}
	}
	return out, nil
}

// locksOn is the locks on shard s (of every mode), sorted.
func (t *topology) locksOn(s int) []string {
	var out []string
	for l, slot := range t.slots {
		if shardOfSlot(slot) == s {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// shardedPath is the raw or acked path in the cluster: one command path per
// lock, each following the master of its lock's slot (so the acked state
// is learned per shard, as the Go package's is).
type shardedPath struct {
	paths map[string]*cmdPath
}

func newShardedPath(t *topology, group int, mode string, locks []string, rng *rand.Rand) *shardedPath {
	s := &shardedPath{paths: map[string]*cmdPath{}}
	for _, l := range locks {
		s.paths[l] = &cmdPath{t: t, group: group, acked: mode == ModeAcked, key: l, rng: rand.New(rand.NewSource(rng.Int63()))}
	}
	return s
}

func (s *shardedPath) acquire(ctx context.Context, lock, owner string, lease time.Duration) (Outcome, int64, bool, string) {
	return s.paths[lock].acquire(ctx, lock, owner, lease)
}

func (s *shardedPath) release(ctx context.Context, lock, owner string) (Outcome, string) {
	return s.paths[lock].release(ctx, lock, owner)
}

func (s *shardedPath) close() {
	for _, p := range s.paths {
		p.close()
	}
}

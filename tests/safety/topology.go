package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	masterName        = "mymaster"
	downAfterMs       = 1000
	failoverTimeoutMs = 2000
	clientGroups      = 2
)

// node is one data node: the server, and the proxies in front of it. The
// node announces its replication proxy's address (replica-announce-port),
// so Sentinel, the replicas and the clients all know it by that address:
// every replication link and every Sentinel check goes through repl, where
// the harness can delay or cut it. Clients map that address to their
// group's own proxy (clients[g]), which goes straight to the server, so a
// partition of one client group leaves replication alone.
type node struct {
	idx     int
	proc    *process
	repl    *proxy
	clients [clientGroups]*proxy
	// bus is the proxy in front of a cluster node's bus port, announced as
	// it (nil under Sentinel).
	bus *proxy
	// src is a cluster node's own loopback address, the source of every
	// connection it opens (bind-source-addr), so the other nodes' proxies
	// can tell its connections apart and cut them ("" under Sentinel).
	src string
}

// topology is a master, 2 replicas and 3 Sentinels, or a cluster of 3
// masters each with a replica (cluster.go), all on 127.0.0.1.
type topology struct {
	server    string
	module    string
	root      string
	nodes     []*node
	sentinels []*process

	cluster bool
	// target is the shard whose master the next fault hits (cluster).
	target int
	// slots is each lock's slot (cluster; written before the workers start).
	slots map[string]int64

	mu           sync.Mutex
	lastFailover time.Time
}

func nodeArgs(dir, module string, port, announce int) []string {
	return []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--loadmodule", module,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "",
		// The recommended settings: a master without a replica acknowledging
		// for 10 s refuses writes (NOREPLICAS), so an old master that comes
		// back from a pause or a partition alone takes no lock.
		"--min-replicas-to-write", "1", "--min-replicas-max-lag", "10",
		"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", strconv.Itoa(announce),
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		"--protected-mode", "no", "--logfile", "",
	}
}

// newNode makes node i's folder under root and the proxies in front of
// its port: its replication link's and each client group's (Sentinel and
// cluster topologies alike).
func newNode(root string, i, port int) (*node, string, error) {
	dir := filepath.Join(root, fmt.Sprintf("node%d", i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	target := "127.0.0.1:" + strconv.Itoa(port)
	n := &node{idx: i}
	var err error
	if n.repl, err = newProxy(fmt.Sprintf("repl%d", i), target); err != nil {
		return nil, "", err
	}
	for g := range n.clients {
		if n.clients[g], err = newProxy(fmt.Sprintf("group%d->node%d", g, i), target); err != nil {
			return nil, "", err
		}
	}
	return n, dir, nil
}

func startTopology(server, module, root string) (*topology, error) {
	t := &topology{server: server, module: module, root: root}
	for i := 0; i < 3; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		n, dir, err := newNode(root, i, port)
		if err != nil {
			return nil, err
		}
		n.proc = &process{name: fmt.Sprintf("node%d", i), port: port, dir: dir, args: nodeArgs(dir, module, port, n.repl.port())}
		register(n.proc)
		t.nodes = append(t.nodes, n)
	}
	if err := t.nodes[0].proc.start(server); err != nil {
		return nil, err
	}
	for _, n := range t.nodes[1:] {
		if err := n.proc.start(server, "--replicaof", "127.0.0.1", strconv.Itoa(t.nodes[0].repl.port())); err != nil {
			return nil, err
		}
	}
	for i := 0; i < 3; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(root, fmt.Sprintf("sentinel%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\nprotected-mode no\ndir %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s %d\n"+
			"sentinel failover-timeout %s %d\n"+
			"sentinel parallel-syncs %s 2\n",
			port, dir, masterName, t.nodes[0].repl.port(), masterName, downAfterMs,
			masterName, failoverTimeoutMs, masterName)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		p := &process{name: fmt.Sprintf("sentinel%d", i), port: port, dir: dir, args: []string{conf, "--sentinel"}}
		register(p)
		if err := p.start(server); err != nil {
			return nil, err
		}
		t.sentinels = append(t.sentinels, p)
	}
	return t, nil
}

func (t *topology) close() {
	stopAll()
	for _, n := range t.nodes {
		n.repl.close()
		if n.bus != nil {
			n.bus.close()
		}
		for _, c := range n.clients {
			c.close()
		}
	}
}

// nodeByAnnounced is the node whose announced (replication proxy) address
// is addr.
func (t *topology) nodeByAnnounced(addr string) *node {
	for _, n := range t.nodes {
		if n.repl.addr() == addr {
			return n
		}
	}
	return nil
}

// askMaster asks one Sentinel for the master's announced address.
func askMaster(ctx context.Context, sentinel string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: sentinel, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	res, err := c.Do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName).StringSlice()
	if err != nil {
		return "", err
	}
	if len(res) != 2 {
		return "", fmt.Errorf("sentinel %s: no master", sentinel)
	}
	return res[0] + ":" + res[1], nil
}

func info(ctx context.Context, addr string, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, PoolSize: 1})
	defer c.Close()
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	return parseInfo(text), nil
}

func parseInfo(text string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(name, "#") {
			fields[name] = value
		}
	}
	return fields
}

// master is the node every Sentinel names as master, when they agree.
func (t *topology) master(ctx context.Context) (*node, error) {
	var agreed string
	for _, s := range t.sentinels {
		addr, err := askMaster(ctx, s.addr())
		if err != nil {
			return nil, err
		}
		if agreed != "" && addr != agreed {
			return nil, fmt.Errorf("sentinels disagree: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	n := t.nodeByAnnounced(agreed)
	if n == nil {
		return nil, fmt.Errorf("sentinels name an unknown master %s", agreed)
	}
	return n, nil
}

// healthy says why the topology is not back to a master with 2 online
// replicas that every Sentinel agrees on ("" when it is).
func (t *topology) healthy(ctx context.Context) (*node, string) {
	if t.cluster {
		return t.clusterHealthy(ctx)
	}
	m, err := t.master(ctx)
	if err != nil {
		return nil, err.Error()
	}
	mi, err := info(ctx, m.proc.addr(), "replication")
	if err != nil {
		return nil, "master: " + err.Error()
	}
	if mi["role"] != "master" {
		return nil, fmt.Sprintf("node%d named master says role:%s", m.idx, mi["role"])
	}
	online := 0
	for k, v := range mi {
		if strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online") {
			online++
		}
	}
	if online != 2 {
		return nil, fmt.Sprintf("master node%d has %d online replicas", m.idx, online)
	}
	for _, n := range t.nodes {
		if n == m {
			continue
		}
		ri, err := info(ctx, n.proc.addr(), "replication")
		if err != nil {
			return nil, fmt.Sprintf("node%d: %v", n.idx, err)
		}
		if ri["role"] != "slave" || ri["master_link_status"] != "up" || ri["master_port"] != strconv.Itoa(m.repl.port()) {
			return nil, fmt.Sprintf("node%d: role %s link %s master port %s", n.idx, ri["role"], ri["master_link_status"], ri["master_port"])
		}
	}
	for _, s := range t.sentinels {
		c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1, ReadTimeout: time.Second, PoolSize: 1})
		reps, err := c.Do(ctx, "SENTINEL", "REPLICAS", masterName).Slice()
		sents, err2 := c.Do(ctx, "SENTINEL", "SENTINELS", masterName).Slice()
		c.Close()
		if err != nil || err2 != nil {
			return nil, fmt.Sprintf("%s: %v %v", s.name, err, err2)
		}
		if len(sents) != 2 {
			return nil, fmt.Sprintf("%s knows %d other sentinels", s.name, len(sents))
		}
		good := 0
		for _, r := range reps {
			if f := fieldOf(r, "flags"); f == "slave" {
				good++
			}
		}
		if good != 2 {
			return nil, fmt.Sprintf("%s sees %d healthy replicas", s.name, good)
		}
	}
	return m, ""
}

// fieldOf reads a field of a SENTINEL REPLICAS entry (a flat array or a
// map, by protocol).
func fieldOf(entry any, name string) string {
	switch e := entry.(type) {
	case []any:
		for i := 0; i+1 < len(e); i += 2 {
			if k, _ := e[i].(string); k == name {
				v, _ := e[i+1].(string)
				return v
			}
		}
	case map[any]any:
		v, _ := e[name].(string)
		return v
	}
	return ""
}

// waitHealthy waits for healthy, and for Sentinel to be able to fail over
// again (it starts no new failover of a master within twice the failover
// timeout of the last one; a cluster replica waits as long, twice its
// election timeout of 2 s, before it stands for election again).
func (t *topology) waitHealthy(ceiling time.Duration) (*node, error) {
	deadline := time.Now().Add(ceiling)
	why := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, reason := t.healthy(ctx)
		cancel()
		if reason == "" {
			t.mu.Lock()
			ready := t.lastFailover.Add(2*failoverTimeoutMs*time.Millisecond + 500*time.Millisecond)
			t.mu.Unlock()
			if wait := time.Until(ready); wait > 0 {
				time.Sleep(wait)
			}
			return m, nil
		}
		why = reason
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("topology not healthy within %s: %s", ceiling, why)
}

// waitNewMaster waits until every Sentinel names a master other than old
// and that node says role:master (in a cluster: until old's shard has a
// new master serving its slots).
func (t *topology) waitNewMaster(old *node, ceiling time.Duration) (*node, error) {
	deadline := time.Now().Add(ceiling)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if t.cluster {
			m := t.clusterNewMaster(ctx, old)
			cancel()
			if m != nil {
				t.mu.Lock()
				t.lastFailover = time.Now()
				t.mu.Unlock()
				return m, nil
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		m, err := t.master(ctx)
		if err == nil && m != old {
			mi, err := info(ctx, m.proc.addr(), "replication")
			if err == nil && mi["role"] == "master" {
				cancel()
				t.mu.Lock()
				t.lastFailover = time.Now()
				t.mu.Unlock()
				return m, nil
			}
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("no new master within %s", ceiling)
}

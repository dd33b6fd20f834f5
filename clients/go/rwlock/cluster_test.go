package rwlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startCluster starts 3 masters, splits the slots between them, and waits
// for every node to say cluster_state:ok.
func startCluster(t *testing.T) []*server {
	nodes := []*server{start(t, true), start(t, true), start(t, true)}
	for i, n := range nodes {
		lo, hi := i*16384/3, (i+1)*16384/3-1
		n.do(t, "CLUSTER", "ADDSLOTSRANGE", lo, hi)
	}
	for _, n := range nodes[1:] {
		nodes[0].do(t, "CLUSTER", "MEET", "127.0.0.1", n.port)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		for n.info(t, "cluster", "cluster_state") != "ok" || n.info(t, "cluster", "cluster_known_nodes") != "3" {
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok: %s", n.do(t, "CLUSTER", "INFO"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

func nodeID(t *testing.T, s *server) string {
	id, _ := s.do(t, "CLUSTER", "MYID").(string)
	return id
}

// moveSlot hands the empty slot from one master to another as a reshard
// does: IMPORTING on the target and MIGRATING on the owner first, so that the
// target's SETSLOT NODE raises its config epoch above every other node's. A
// bare SETSLOT NODE on each node in turn can lose a race on a busy machine:
// gossip from a node not yet told still claims the slot with a higher epoch
// and takes it back. Returns once every node says the target serves it.
func moveSlot(t *testing.T, nodes []*server, slot int64, from, to *server) {
	t.Helper()
	toID, fromID := nodeID(t, to), nodeID(t, from)
	to.do(t, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	from.do(t, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	to.do(t, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	from.do(t, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	for _, n := range nodes {
		if n != to && n != from {
			n.do(t, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		agreed := true
		for _, n := range nodes {
			if servingPort(t, n, slot) != int64(to.port) {
				agreed = false
			}
		}
		if agreed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes still disagree on slot %d after 30 s", slot)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// servingPort is the port of the master serving slot in n's own view (0 if
// none).
func servingPort(t *testing.T, n *server, slot int64) int64 {
	ranges, _ := n.do(t, "CLUSTER", "SLOTS").([]any)
	for _, r := range ranges {
		row, _ := r.([]any)
		if len(row) < 3 {
			continue
		}
		first, _ := row[0].(int64)
		last, _ := row[1].(int64)
		master, _ := row[2].([]any)
		if slot >= first && slot <= last && len(master) > 1 {
			port, _ := master[1].(int64)
			return port
		}
	}
	return 0
}

// owning is the node serving key's slot, as that node itself says (a
// formula over startCluster's ranges put their last slots on the wrong node).
func owning(t *testing.T, nodes []*server, key string) *server {
	slot, _ := nodes[0].do(t, "CLUSTER", "KEYSLOT", key).(int64)
	for _, n := range nodes {
		if servingPort(t, n, slot) == int64(n.port) {
			return n
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return nil
}

func TestCluster(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{nodes[0].addr(), nodes[1].addr(), nodes[2].addr()}, ReadTimeout: 300 * time.Millisecond,
	})
	defer rdb.Close()
	c, err := New(rdb, WithWatchdogTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Names on every master: each hold is on the master of its slot.
	served := map[int]bool{}
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("cluster:%d", i)
		l := c.Lock(name, WithFenced())
		mustAcquire(t, l, WithWait(0))
		owner := owning(t, nodes, name)
		served[owner.port] = true
		if got := owner.do(t, "HGET", name, l.Owner()); got != "1" {
			t.Fatalf("%s not on its slot's master: %v", name, got)
		}
		mustRelease(t, l)
	}
	if len(served) != 3 {
		t.Fatalf("names landed on %d masters", len(served))
	}
	// A wait past the read timeout, in the cluster.
	holder, waiter := c.Lock("cluster:wait"), c.Lock("cluster:wait")
	mustAcquire(t, holder, WithLease(10*time.Second))
	go func() { time.Sleep(800 * time.Millisecond); _ = holder.Release(context.Background()) }()
	mustAcquire(t, waiter, WithWait(5*time.Second))
	mustRelease(t, waiter)
	// A multi-lock in one slot, and its watchdog.
	m := c.MultiLock([]Hold{{KindLock, "{acct}:1"}, {KindWrite, "{acct}:2"}})
	mustAcquire(t, m, WithWait(0))
	time.Sleep(1200 * time.Millisecond)
	if got := owning(t, nodes, "{acct}").do(t, "EXISTS", "{acct}:1", "{acct}:2"); got != int64(2) {
		t.Fatalf("multi-lock holds %v", got)
	}
	mustRelease(t, m)
	// Names in two slots: the server's error, nothing held.
	bad := c.MultiLock([]Hold{{KindLock, "{a}x"}, {KindLock, "{b}y"}})
	if _, err := bad.Acquire(context.Background(), WithWait(0)); err == nil {
		t.Fatal("a multi-lock across slots")
	}

	// A reshard: the slot moves to another master, go-redis's map is stale,
	// the MOVED reply is followed.
	name := "cluster:moved"
	l := c.Lock(name)
	mustAcquire(t, l, WithWait(0), WithLease(5*time.Second))
	mustRelease(t, l)
	from := owning(t, nodes, name)
	// The move below migrates no keys: the cycle left none in the slot
	// (HELD writes no latch).
	slot, _ := from.do(t, "CLUSTER", "KEYSLOT", name).(int64)
	if got := from.do(t, "CLUSTER", "COUNTKEYSINSLOT", slot); got != int64(0) {
		t.Fatalf("%v keys left in the slot", got)
	}
	var to *server
	for _, n := range nodes {
		if n != from {
			to = n
			break
		}
	}
	moveSlot(t, nodes, slot, from, to)
	from.do(t, "CONFIG", "RESETSTAT")
	mustAcquire(t, l, WithWait(0), WithLease(5*time.Second))
	if stats, _ := from.do(t, "INFO", "commandstats").(string); !strings.Contains(stats, "cmdstat_lock.acquire:calls=0,") || !strings.Contains(stats, "rejected_calls=1,") {
		t.Fatalf("the old master did not answer MOVED to the acquisition: %s", stats)
	}
	if got := to.do(t, "HGET", name, l.Owner()); got != "1" {
		t.Fatalf("after the move: %v", got)
	}
	mustRelease(t, l)
	if got := to.do(t, "EXISTS", name); got != int64(0) {
		t.Fatal("not released after the move")
	}

	// The semaphore's commands follow a MOVED reply too, those sent once
	// included: the slot moves back (empty again).
	if got := to.do(t, "CLUSTER", "COUNTKEYSINSLOT", slot); got != int64(0) {
		t.Fatalf("%v keys left in the slot", got)
	}
	moveSlot(t, nodes, slot, to, from)
	to.do(t, "CONFIG", "RESETSTAT")
	sem := c.Semaphore("{" + name + "}:sem")
	if err := sem.AddPermits(bg, 2); err != nil {
		t.Fatalf("add after the move back: %v", err)
	}
	if stats, _ := to.do(t, "INFO", "commandstats").(string); !strings.Contains(stats, "cmdstat_semaphore.addpermits:calls=0,") || !strings.Contains(stats, "rejected_calls=1,") {
		t.Fatalf("the old master did not answer MOVED to the add: %s", stats)
	}
	if ok, err := sem.Acquire(bg, 1, WithWait(0)); !ok || err != nil {
		t.Fatalf("acquire after the move back: %v %v", ok, err)
	}
	if err := sem.Release(bg, 1); err != nil {
		t.Fatal(err)
	}
	if got := from.do(t, "GET", sem.Name()); got != "2" {
		t.Fatalf("the count on the slot's master: %v", got)
	}
	// A latch in the cluster: its wait, on the slot's master, served there.
	latch := c.CountDownLatch("cluster:latch")
	if ok, err := latch.TrySetCount(bg, 1); !ok || err != nil {
		t.Fatal(ok, err)
	}
	go func() { time.Sleep(300 * time.Millisecond); _ = latch.CountDown(bg) }()
	if ok, err := latch.Await(bg, WithWait(10*time.Second)); !ok || err != nil {
		t.Fatalf("await in the cluster: %v %v", ok, err)
	}
	// A permit semaphore in the cluster: its count, permits and latches in
	// the name's slot, on its master.
	pes := c.PermitExpirableSemaphore("cluster:permit")
	if err := pes.AddPermits(bg, 2); err != nil {
		t.Fatal(err)
	}
	ids, err := pes.AcquireN(bg, 2, WithWait(0))
	if len(ids) != 2 || err != nil {
		t.Fatalf("permits in the cluster: %v %v", ids, err)
	}
	if got := owning(t, nodes, pes.Name()).do(t, "ZCARD", "{cluster:permit}:timeout"); got != int64(2) {
		t.Fatalf("permits taken on the slot's master: %v", got)
	}
	if err := pes.Release(bg, ids...); err != nil {
		t.Fatal(err)
	}
}

func TestReplicaSync(t *testing.T) {
	t.Parallel()
	master := startServer(t)
	replica := startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.port))
	deadline := time.Now().Add(15 * time.Second)
	for replica.info(t, "replication", "master_link_status") != "up" || master.info(t, "replication", "connected_slaves") != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not connect")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c, _ := newClient(t, master)
	l := c.Lock("sync:lock")
	mustAcquire(t, l, WithWait(0), WithLease(10*time.Second))
	mustRelease(t, l)

	replica.pause()
	defer replica.resume()
	began := time.Now()
	_, err := l.Acquire(context.Background(), WithWait(0), WithLease(10*time.Second))
	if !errors.Is(err, ErrNotSynced) || !strings.Contains(err.Error(), "WAIT") {
		t.Fatalf("frozen replica: %v", err)
	}
	if d := time.Since(began); d < 900*time.Millisecond || d > 4*time.Second {
		t.Fatalf("NotSynced after %v, want about the 1 s sync timeout", d)
	}
	if got := master.do(t, "EXISTS", "sync:lock"); got != int64(0) || l.Held() {
		t.Fatal("a NotSynced acquisition left its hold")
	}
	// A master writing an AOF: WAITAOF 1 0 (Redis 7.2+), skipped where the
	// server has no WAITAOF (7.0).
	aof := startServer(t, "--appendonly", "yes")
	ac, _ := newClient(t, aof)
	al := ac.Lock("sync:aof")
	mustAcquire(t, al, WithWait(0), WithLease(10*time.Second))
	mustRelease(t, al)
	// Disabled, the frozen replica is not waited for.
	off, _ := newClient(t, master, WithReplicaSync(ReplicaSync{}))
	o := off.Lock("sync:lock")
	mustAcquire(t, o, WithWait(0), WithLease(10*time.Second))
	mustRelease(t, o)
}

func TestRedLock(t *testing.T) {
	t.Parallel()
	var servers []*server
	var clients []*Client
	for i := 0; i < 5; i++ {
		s := startServer(t)
		c, _ := newClient(t, s)
		servers, clients = append(servers, s), append(clients, c)
	}
	if _, err := NewRedLock("x", nil); err == nil {
		t.Fatal("a RedLock without nodes")
	}
	r, err := NewRedLock("red:lock", clients, WithRetryDelay(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewRedLock("red:lock", clients)
	began := time.Now()
	ok, err := r.Acquire(context.Background(), WithWait(0), WithLease(10*time.Second))
	if !ok || err != nil || !r.Held() {
		t.Fatalf("all nodes up: %v %v", ok, err)
	}
	// Valid for the lease less the drift (102 ms) and the time the round
	// took, however long a loaded machine made it: twice, as the validity
	// (lease - round - drift) is counted from the round's start.
	if left := time.Until(r.ValidUntil()); left+2*time.Since(began)+102*time.Millisecond < 10*time.Second {
		t.Fatalf("valid for %v only", left)
	}
	if ok, _ := other.Acquire(context.Background(), WithWait(200*time.Millisecond)); ok {
		t.Fatal("two holders")
	}
	if err := r.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	servers[0].stop()
	servers[1].stop()
	ok, err = r.Acquire(context.Background(), WithWait(0), WithLease(10*time.Second))
	if !ok || err != nil {
		t.Fatalf("2 of 5 stopped: %v %v", ok, err)
	}
	if err := r.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	servers[2].stop()
	began = time.Now()
	ok, err = r.Acquire(context.Background(), WithWait(500*time.Millisecond), WithLease(10*time.Second))
	if ok || err != nil || r.Held() {
		t.Fatalf("3 of 5 stopped: %v %v", ok, err)
	}
	// At the end of its 500 ms wait (stopped nodes refuse connections at
	// once), not after retries past it; 4 s leave a loaded machine room.
	if d := time.Since(began); d < 400*time.Millisecond || d > 4*time.Second {
		t.Fatalf("refused after %v", d)
	}
	for _, s := range servers[3:] {
		if got := s.do(t, "EXISTS", "red:lock"); got != int64(0) {
			t.Fatal("a refused RedLock left a hold")
		}
	}
	if err := r.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release of nothing: %v", err)
	}
}

package rwlock

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The learned state and the acquisition's pipeline, no server.

func learnedOf(info map[string]string) *learned {
	m := &learned{}
	m.learn(info, time.Now())
	return m
}

func TestLearnedOnlyRises(t *testing.T) {
	m := learnedOf(map[string]string{"connected_slaves": "1"})
	m.learn(map[string]string{"connected_slaves": "2"}, time.Now())
	// A paused (or cut off) master says 0 until it is demoted: not believed.
	m.learn(map[string]string{"connected_slaves": "0"}, time.Now())
	if got := fmt.Sprint(m.syncCommands(DefaultReplicaSync)); got != "[[WAIT 2 1000]]" {
		t.Fatalf("after 1, 2, 0: %s", got)
	}
}

func TestLearnedPolicies(t *testing.T) {
	three := learnedOf(map[string]string{"connected_slaves": "3"})
	none := learnedOf(map[string]string{"connected_slaves": "0"})
	aof := learnedOf(map[string]string{"connected_slaves": "0", "aof_enabled": "1"})
	sync := func(replicas int, policy AOFPolicy) ReplicaSync {
		return ReplicaSync{Enabled: true, Timeout: 250 * time.Millisecond, Replicas: replicas, AOF: policy}
	}
	cases := []struct {
		what string
		m    *learned
		s    ReplicaSync
		want string
	}{
		{"auto", three, sync(ReplicasAuto, AOFAuto), "[[WAIT 3 250]]"},
		{"explicit count overrides", three, sync(1, AOFAuto), "[[WAIT 1 250]]"},
		{"explicit count without replicas learned", none, sync(2, AOFAuto), "[[WAIT 2 250]]"},
		{"explicit none", three, sync(NoReplicas, AOFAuto), "[]"},
		{"disabled", three, ReplicaSync{}, "[]"},
		{"no replicas, no AOF", none, sync(ReplicasAuto, AOFAuto), "[]"},
		{"AOF learned", aof, sync(ReplicasAuto, AOFAuto), "[[WAITAOF 1 0 250]]"},
		{"AOF required", none, sync(ReplicasAuto, AOFRequired), "[[WAITAOF 1 0 250]]"},
		{"AOF off", aof, sync(ReplicasAuto, AOFOff), "[]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(c.m.syncCommands(c.s)); got != c.want {
			t.Errorf("%s: %s, want %s", c.what, got, c.want)
		}
	}
	// The AOF turned off is believed (a configuration change, not a failure).
	aof.learn(map[string]string{"aof_enabled": "0"}, time.Now())
	if got := aof.syncCommands(DefaultReplicaSync); len(got) != 0 {
		t.Errorf("AOF turned off: %v", got)
	}
	// A server without WAITAOF (before 7.2): AUTO stops sending it.
	aof.learn(map[string]string{"aof_enabled": "1"}, time.Now())
	aof.lacksWaitAOF()
	if got := aof.syncCommands(DefaultReplicaSync); len(got) != 0 {
		t.Errorf("without WAITAOF: %v", got)
	}
	if got := fmt.Sprint(aof.syncCommands(sync(ReplicasAuto, AOFRequired))); got != "[[WAITAOF 1 0 250]]" {
		t.Errorf("required without WAITAOF: %s", got)
	}
}

func TestLearnedRefresh(t *testing.T) {
	m := &learned{}
	now := time.Now()
	if m.refreshDue(now) {
		t.Fatal("never learned: the first INFO is a round trip of its own, not a refresh")
	}
	m.learn(nil, now)
	if m.refreshDue(now.Add(refreshInterval - time.Millisecond)) {
		t.Fatal("due too early")
	}
	if !m.refreshDue(now.Add(refreshInterval)) || m.refreshDue(now.Add(refreshInterval)) {
		t.Fatal("due once after the interval, to one acquisition")
	}
}

func TestReplicaSyncChecked(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, bad := range []ReplicaSync{
		{Enabled: true, Timeout: time.Second, Replicas: -2},
		{Enabled: true, Timeout: time.Second, AOF: AOFPolicy(7)},
		{Enabled: true},
	} {
		if _, err := New(rdb, WithReplicaSync(bad)); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// names is the command names of an acquisition's pipeline.
func names(p acquisition) string {
	var out []string
	for _, c := range p.cmds {
		out = append(out, fmt.Sprint(c[0]))
	}
	return strings.Join(out, " ")
}

func TestAcquisitionPipeline(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := newRequest([]AcquireOption{WithWait(0), WithLease(time.Second)}, c.watchdogTimeout)
	one := learnedOf(map[string]string{"connected_slaves": "1"})
	none := learnedOf(map[string]string{"connected_slaves": "0"})
	both := learnedOf(map[string]string{"connected_slaves": "2", "aof_enabled": "1"})
	stale := &learned{}
	stale.learn(map[string]string{"connected_slaves": "1"}, time.Now().Add(-refreshInterval))
	l := c.Lock("p")
	args := l.plan.acquire(l.owner, r, false, 0)
	cases := []struct {
		what string
		p    acquisition
		want string
	}{
		{"sync off", l.c.acquisition(l.name, args, nil, r, ""), "LOCK.ACQUIRE"},
		{"no replicas", l.c.acquisition(l.name, args, none, r, ""), "LOCK.ACQUIRE"},
		{"a replica", l.c.acquisition(l.name, args, one, r, ""), "LOCK.ACQUIRE WAIT"},
		{"replicas and AOF", l.c.acquisition(l.name, args, both, r, ""), "LOCK.ACQUIRE WAIT WAITAOF"},
		// A resend with a request id (a semaphore's): its latch's expiry set
		// again; a lock's (HELD, no id) sends none.
		{"resent with an id", l.c.acquisition(l.name, args, one, r, "id"), "LOCK.ACQUIRE PEXPIRE WAIT"},
		{"refresh due", l.c.acquisition(l.name, args, stale, r, ""), "LOCK.ACQUIRE WAIT INFO"},
		{"refresh sent", l.c.acquisition(l.name, args, stale, r, ""), "LOCK.ACQUIRE WAIT"},
	}
	for _, k := range cases {
		if got := names(k.p); got != k.want {
			t.Errorf("%s: %q, want %q", k.what, got, k.want)
		}
	}
	if p := l.c.acquisition(l.name, args, one, r, ""); p.extra != time.Second+replyMargin {
		t.Errorf("a WAIT's reply allowance %v", p.extra)
	}
	// Every kind goes the same way.
	for _, k := range []*Lock{c.ReadWriteLock("p").Write(), c.FairLock("p"), c.MultiLock([]Hold{{KindLock, "{p}:a"}})} {
		p := k.c.acquisition(k.name, k.plan.acquire(k.owner, r, false, 0), one, r, "")
		if got := names(p); !strings.HasSuffix(got, " WAIT") || strings.Count(got, " ") != 1 {
			t.Errorf("%s: %q", k.plan.key(), got)
		}
	}
	// An explicit count and no AOF learning: no INFO ever.
	fixed, _ := New(rdb, WithReplicaSync(ReplicaSync{Enabled: true, Timeout: time.Second, Replicas: 1, AOF: AOFOff}))
	stale2 := &learned{}
	stale2.learn(nil, time.Now().Add(-refreshInterval))
	fl := fixed.Lock("p")
	if got := names(fl.c.acquisition(l.name, args, stale2, r, "")); got != "LOCK.ACQUIRE WAIT" {
		t.Errorf("explicit: %q", got)
	}
}

// Real servers.

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicaGone: the paused-master bug in miniature. Once its replica
// left, the master says connected_slaves:0, and is not believed: the next
// acquisition fails and leaves nothing held; told replicas=0, it succeeds.
func TestReplicaGone(t *testing.T) {
	t.Parallel()
	master := startServer(t, "--repl-diskless-sync-delay", "0")
	replica := startServer(t, "--replicaof", "127.0.0.1", fmt.Sprint(master.port))
	waitFor(t, "the replica", func() bool {
		return replica.info(t, "replication", "master_link_status") == "up" &&
			master.info(t, "replication", "connected_slaves") == "1" && master.acknowledged(t)
	})
	// A generous timeout: a replica on a busy machine may take more than 1 s.
	c, _ := newClient(t, master, WithReplicaSync(ReplicaSync{Enabled: true, Timeout: 3 * time.Second}))
	// Told there are none, after learning there is one.
	told, _ := newClient(t, master, WithReplicaSync(ReplicaSync{Enabled: true, Timeout: time.Second, Replicas: NoReplicas}))
	tl := told.Lock("gone")
	mustAcquire(t, tl, WithWait(0), WithLease(10*time.Second))
	mustRelease(t, tl)
	l := c.Lock("gone")
	mustAcquire(t, l, WithWait(0), WithLease(10*time.Second))
	if got := replica.do(t, "HGET", "gone", l.Owner()); got != "1" {
		t.Fatalf("not on the replica when Acquire returned: %v", got)
	}
	mustRelease(t, l)
	// A wait: its WAIT is pipelined behind the blocked acquisition.
	master.do(t, "LOCK.ACQUIRE", "gone", "other:1", 10000)
	go func() {
		time.Sleep(300 * time.Millisecond)
		master.do(t, "LOCK.UNLOCK", "gone", "other:1")
	}()
	mustAcquire(t, l, WithWait(10*time.Second), WithLease(10*time.Second))
	if got := replica.do(t, "HGET", "gone", l.Owner()); got != "1" {
		t.Fatalf("a wait's grant not on the replica: %v", got)
	}
	mustRelease(t, l)

	replica.do(t, "REPLICAOF", "NO", "ONE")
	waitFor(t, "the master to see no replica", func() bool {
		return master.info(t, "replication", "connected_slaves") == "0"
	})
	for _, k := range []*Lock{l, c.ReadWriteLock("gone-rw").Write(), c.FairLock("gone-fair")} {
		_, err := k.Acquire(bg, WithWait(0), WithLease(10*time.Second))
		if !errors.Is(err, ErrNotSynced) || !strings.Contains(err.Error(), "WAIT 1 3000 replied 0") {
			t.Fatalf("%s, a replica gone: %v", k.Name(), err)
		}
		if got := master.do(t, "EXISTS", k.Name()); got != int64(0) || k.Held() {
			t.Fatalf("%s: a NotSynced acquisition left its hold", k.Name())
		}
	}
	// Told there are none: no wait, whatever was learned.
	mustAcquire(t, tl, WithWait(0), WithLease(10*time.Second))
	mustRelease(t, tl)
	// A new Client learns afresh (0 replicas): lowering takes a new Client.
	fresh, _ := newClient(t, master)
	fl := fresh.Lock("gone")
	mustAcquire(t, fl, WithWait(0), WithLease(10*time.Second))
	mustRelease(t, fl)
}

// TestNoReplicas: a master whose min-replicas-to-write refuses the write
// fails the acquisition with ErrNotSynced, and nothing is written.
func TestNoReplicas(t *testing.T) {
	t.Parallel()
	s := startServer(t, "--min-replicas-to-write", "1", "--min-replicas-max-lag", "10")
	c, _ := newClient(t, s)
	for _, k := range []*Lock{c.Lock("norepl"), c.FairLock("norepl"), c.MultiLock([]Hold{{KindWrite, "norepl"}})} {
		ok, err := k.Acquire(bg, WithWait(0), WithLease(10*time.Second))
		if ok || !errors.Is(err, ErrNotSynced) || !strings.Contains(err.Error(), "NOREPLICAS") {
			t.Fatalf("%v %v", ok, err)
		}
		if k.Held() {
			t.Fatal("held after NOREPLICAS")
		}
	}
	if keys, _ := s.do(t, "KEYS", "*").([]any); len(keys) != 0 {
		t.Fatalf("written: %v", keys)
	}
}

// countingProxy forwards both ways and counts round trips: a chunk the
// client sends after the server last answered on that connection (or as
// its first) starts one; the rest of a pipeline, sent before a reply came,
// is part of it. The sum over its connections.
type countingProxy struct {
	ln     net.Listener
	target string
	turns  atomic.Int64
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *countingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		var answered atomic.Bool
		answered.Store(true)
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if answered.Swap(false) {
						p.turns.Add(1)
					}
					if _, werr := u.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = u.Close()
		}()
		go func() { // server -> client
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := u.Read(buf)
				if n > 0 {
					answered.Store(true)
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = c.Close()
		}()
	}
}

func (p *countingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func calls(t *testing.T, s *server, command string) int64 {
	t.Helper()
	stat := s.info(t, "commandstats", "cmdstat_"+command)
	var n int64
	if stat != "" {
		if _, err := fmt.Sscanf(stat, "calls=%d,", &n); err != nil {
			t.Fatalf("%s: %q", command, stat)
		}
	}
	return n
}

// commands is the calls of every command the server ran, but INFO and
// HELLO: the test reads the counts with INFO on a connection of its own
// (the client's periodic INFO is counted apart, and a connection the
// client opened is a round trip the proxy counts).
func commands(t *testing.T, s *server) int64 {
	t.Helper()
	stats, _ := s.do(t, "INFO", "commandstats").(string)
	var total int64
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" || name == "cmdstat_hello" {
			continue
		}
		var n int64
		if _, err := fmt.Sscanf(rest, "calls=%d,", &n); err != nil {
			t.Fatalf("%s: %q", name, rest)
		}
		total += n
	}
	return total
}

// TestRoundTripsPerCycle: no replica, no AOF: after the first cycle (the
// connections' hello, the master's first INFO), each uncontended
// acquire+release is two round trips, counted by a proxy that sees when the
// client writes after a reply: a lock's are two commands (the acquisition
// and the release, with HELD: no DEL, no latch), a semaphore's three (its
// release pipelines the DEL of its latches). Waits (BLOCK) ask CLIENT ID
// once per connection.
func TestRoundTripsPerCycle(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := startCountingProxy(t, s.addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.ln.Addr().String()})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const cycles = 20
	// Locks' cycles, and a semaphore's (taking 2 of 2 permits).
	lockCycle := func(l *Lock) func(time.Duration) {
		return func(wait time.Duration) {
			mustAcquire(t, l, WithWait(wait), WithLease(10*time.Second))
			mustRelease(t, l)
		}
	}
	sem := c.Semaphore("cycle:sem")
	if ok, err := sem.TrySetPermits(bg, 2); !ok || err != nil {
		t.Fatal(ok, err)
	}
	semCycle := func(wait time.Duration) {
		if ok, err := sem.Acquire(bg, 2, WithWait(wait)); !ok || err != nil {
			t.Fatalf("semaphore: %v %v", ok, err)
		}
		if err := sem.Release(bg, 2); err != nil {
			t.Fatal(err)
		}
	}
	rw := c.ReadWriteLock("cycle:rw")
	for _, k := range []struct {
		name     string
		wait     time.Duration
		cycle    func(time.Duration)
		commands int64 // per cycle
		dels     int64 // per cycle
	}{
		{"lock", 0, lockCycle(c.Lock("cycle:0")), 2, 0},
		{"lock", 5 * time.Second, lockCycle(c.Lock("cycle:5s")), 2, 0},
		{"fair", 5 * time.Second, lockCycle(c.FairLock("cycle:fair")), 2, 0},
		{"read", 0, lockCycle(rw.Read()), 2, 0},
		{"write", 0, lockCycle(rw.Write()), 2, 0},
		{"semaphore", 5 * time.Second, semCycle, 3, 1},
	} {
		wait := k.wait
		began := time.Now() // the first: before the master's first INFO
		k.cycle(wait)
		dels, ids := calls(t, s, "del"), calls(t, s, "client|id")
		turns, infos, sent := p.turns.Load(), calls(t, s, "info"), commands(t, s)
		for i := 0; i < cycles; i++ {
			k.cycle(wait)
		}
		elapsed := time.Since(began)
		// The test's own INFO commandstats (the ones reading infos and
		// sent) count 2.
		sentInfos := calls(t, s, "info") - infos - 2
		if got := p.turns.Load() - turns; got != 2*cycles {
			t.Fatalf("%s, wait %v: %d round trips in %d cycles", k.name, wait, got, cycles)
		}
		// The periodic INFO rides in an acquisition's pipeline, at most
		// one per 5 s: no round trip of its own.
		if sentInfos > int64(elapsed/refreshInterval) {
			t.Fatalf("%s, wait %v: %d INFO in %v", k.name, wait, sentInfos, elapsed)
		}
		// The test's own calls in between are INFO and HELLO, which
		// commands leaves out.
		if got := commands(t, s) - sent; got != k.commands*cycles {
			t.Fatalf("%s, wait %v: %d commands in %d cycles", k.name, wait, got, cycles)
		}
		if got := calls(t, s, "del") - dels; got != k.dels*cycles {
			t.Fatalf("%s, wait %v: %d DEL", k.name, wait, got)
		}
		if got := calls(t, s, "client|id") - ids; got != 0 {
			t.Fatalf("%s, wait %v: CLIENT ID sent %d times on a connection that knew its id", k.name, wait, got)
		}
	}
	// The locks leave nothing; the semaphore its count and its last
	// release's latch (for a resend after a lost reply), until its next
	// release or its expiry.
	if keys, _ := s.do(t, "KEYS", "*").([]any); len(keys) != 2 {
		t.Fatalf("keys left: %v, want the semaphore's count and one unlock latch", keys)
	}
}

// TestHeldCounts: each acquisition and release sends the handle's count of
// that kind of hold before it (HELD), the count the server's hash holds for
// the owner: re-entries, a read-write lock's two sides apart (one owner,
// two fields), a fenced lock's token; nothing but the lock's hash is
// written.
func TestHeldCounts(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	monitor := startMonitor(t, s)
	field := func(name, f string) any { return s.do(t, "HGET", name, f) }

	l := c.Lock("held:plain", WithFenced())
	rw := c.ReadWriteLock("held:rw")
	for i := 0; i < 2; i++ {
		mustAcquire(t, l, WithWait(0), WithLease(10*time.Second))
	}
	mustAcquire(t, rw.Write(), WithWait(0), WithLease(10*time.Second))
	mustAcquire(t, rw.Read(), WithWait(0), WithLease(10*time.Second)) // a downgrade: the writer reads
	mustAcquire(t, rw.Read(), WithWait(0), WithLease(10*time.Second))
	if got := field("held:plain", l.Owner()); got != "2" {
		t.Fatalf("plain count %v", got)
	}
	if got, w := field("held:rw", rw.Read().Owner()), field("held:rw", rw.Read().Owner()+":write"); got != "2" || w != "1" {
		t.Fatalf("read count %v, write count %v", got, w)
	}
	mustRelease(t, l)
	mustRelease(t, rw.Read())
	if got := field("held:plain", l.Owner()); got != "1" {
		t.Fatalf("plain count after a release %v", got)
	}
	if got := field("held:rw", rw.Read().Owner()); got != "1" {
		t.Fatalf("read count after a release %v", got)
	}
	if keys, _ := s.do(t, "KEYS", "redisson_*latch*").([]any); len(keys) != 0 {
		t.Fatalf("latches %v", keys)
	}
	mustRelease(t, l)
	mustRelease(t, rw.Read())
	mustRelease(t, rw.Write())
	if got := s.do(t, "EXISTS", "held:plain", "held:rw"); got != int64(0) {
		t.Fatalf("%v locks still held", got)
	}
	want := []string{
		"LOCK.ACQUIRE held:plain " + l.Owner() + " 10000 FENCED HELD 0",
		"LOCK.ACQUIRE held:plain " + l.Owner() + " 10000 FENCED HELD 1",
		"RWLOCK.WRITE held:rw " + rw.Write().Owner() + " 10000 HELD 0",
		"RWLOCK.READ held:rw " + rw.Read().Owner() + " 10000 HELD 0",
		"RWLOCK.READ held:rw " + rw.Read().Owner() + " 10000 HELD 1",
		"LOCK.UNLOCK held:plain " + l.Owner() + " LEASE 10000 HELD 2",
		"RWLOCK.UNLOCK held:rw " + rw.Read().Owner() + " READ LEASE 10000 HELD 2",
		"LOCK.UNLOCK held:plain " + l.Owner() + " LEASE 10000",
		"RWLOCK.UNLOCK held:rw " + rw.Read().Owner() + " READ LEASE 10000",
		"RWLOCK.UNLOCK held:rw " + rw.Write().Owner() + " WRITE LEASE 10000",
	}
	if got := monitor.locks(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOneHandleCallsInTurn: goroutines sharing one handle (one owner) all
// acquire at once, then all release at once. Each call sends the count
// before it (HELD), so they run one at a time and the server's count never
// parts from the handle's: side by side, two acquisitions would send the
// same count and the second be answered as a resend (one hold for two),
// two releases likewise (the lock left held with the handle holding none).
func TestOneHandleCallsInTurn(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	l := c.Lock("turns")
	const goroutines, rounds = 8, 5
	together := func(call func() error) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < goroutines; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := call(); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	for i := 0; i < rounds; i++ {
		together(func() error {
			if ok, err := l.Acquire(bg, WithWait(0), WithLease(30*time.Second)); !ok || err != nil {
				return fmt.Errorf("acquire: %v %v", ok, err)
			}
			return nil
		})
		if got := s.do(t, "HGET", "turns", l.Owner()); got != fmt.Sprint(goroutines) {
			t.Fatalf("round %d: %d acquisitions, the server counts %v", i, goroutines, got)
		}
		together(func() error { return l.Release(bg) })
		if got := s.do(t, "EXISTS", "turns"); got != int64(0) || l.Held() {
			t.Fatalf("round %d: after as many releases: key %v, the handle holds %v", i, got, l.Held())
		}
	}
}

// Outside a cluster every master a Client meets is one deployment's: a
// newly promoted master, first met while a replica restarts, must be
// waited on for the count its predecessor reported, not learn afresh.
func TestOneDeploymentSharesWhatItLearnedAcrossMasters(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer func() { _ = rdb.Close() }()
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	c.master("10.0.0.1:6379").learn(map[string]string{"connected_slaves": "2"}, time.Now())
	promoted := c.master("10.0.0.2:6379")
	promoted.learn(map[string]string{"connected_slaves": "1"}, time.Now())
	if promoted.expected != 2 {
		t.Fatalf("a promoted master expects %d replicas, want the deployment's 2", promoted.expected)
	}

	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer func() { _ = cluster.Close() }()
	cc, err := New(cluster)
	if err != nil {
		t.Fatal(err)
	}
	cc.master("10.0.0.1:6379").learn(map[string]string{"connected_slaves": "2"}, time.Now())
	if other := cc.master("10.0.0.3:6379"); other.expected != 0 || other.isKnown() {
		t.Fatal("in a cluster each master node is its own shard's")
	}
}

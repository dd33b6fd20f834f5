package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rwlock/rwlock/clients/go/rwlock"
)

// The modes: how a worker takes a lock and what it calls acknowledged.
const (
	// ModeRaw: LOCK.ACQUIRE … FENCED and nothing else; the reply is the grant.
	ModeRaw = "raw"
	// ModeAcked: the acquisition pipelined with WAIT <expected> 1000, where
	// expected is the highest replica count ever learned from the
	// deployment's masters' INFO (never lowered by what a master says
	// later, nor started afresh at a new master); a grant with fewer
	// acknowledgements is released and not used: the client contract's
	// fail-closed acknowledgement.
	ModeAcked = "acked"
	// ModeLegacy: the acknowledgement the clients had before issue 31: INFO
	// on the same connection before each acquisition, then WAIT
	// <connected_slaves> only when the master says it has replicas. Kept to
	// show the checker catching it: a paused master that comes back says 0.
	ModeLegacy = "legacy"
	// ModeGoClient: the repository's Go package with its default options,
	// over a go-redis Sentinel (failover) client.
	ModeGoClient = "goclient"
)

const (
	opTimeout   = 8 * time.Second
	readTimeout = 6 * time.Second // longer than the 4 s pause: a command sent to a paused master runs when it resumes
	syncTimeout = 1000            // ms, WAIT's timeout
)

// params are a run's knobs.
type params struct {
	lease    time.Duration // of every ordinary hold: released explicitly long before
	gcLease  time.Duration // of the paused client's hold
	gcPause  time.Duration // how long the paused client stops holding it
	horizon  time.Duration // bound on how late an indeterminate operation can take effect
	locks    int           // per mode
	workers  int           // per mode
	holdMin  time.Duration
	holdMax  time.Duration
	backoffs [2]time.Duration
}

// path is one way of taking and releasing a fenced plain lock.
type path interface {
	// acquire replies Granted with the token, Refused, or Maybe (with the
	// token of a grant that was not acknowledged, and unacked true: the
	// caller then releases it and counts nothing).
	acquire(ctx context.Context, lock, owner string, lease time.Duration) (out Outcome, token int64, unacked bool, detail string)
	release(ctx context.Context, lock, owner string) (Outcome, string)
	close()
}

// worker takes locks of its mode in a loop: one owner per attempt (so no
// hold re-enters), a hold of 20-50 ms with one write to the resource, then
// the release.
type worker struct {
	id    int
	mode  string
	group int
	locks []string
	p     path
	rng   *rand.Rand
	rec   *recorder
	res   *resource
	par   params
	seq   int

	// gc asks the worker to pause its next hold past its lease.
	gc     atomic.Bool
	gcDone chan struct{}

	// rot gives a client mode's worker the other kind it takes besides
	// fenced locks (clientkinds.go); nil or "" for none.
	rot *rotation
}

func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.cycle(ctx)
	}
	w.p.close()
}

func (w *worker) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func (w *worker) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int63n(int64(hi-lo)+1))
}

func (w *worker) cycle(ctx context.Context) {
	// A client path takes its kind every other attempt on average; the
	// paused client's hold is always a fenced one.
	if kp, ok := w.p.(kindPath); ok && !w.gc.Load() {
		if kind := w.rot.kindOf(w.mode); kind != "" && w.rng.Intn(2) == 0 {
			w.kindCycle(ctx, kp, kind)
			return
		}
	}
	w.seq++
	lock := w.locks[w.rng.Intn(len(w.locks))]
	owner := fmt.Sprintf("%s-w%d-%d", w.mode, w.id, w.seq)
	gc := w.gc.Load()
	lease := w.par.lease
	if gc {
		lease = w.par.gcLease
	}
	opCtx, cancel := context.WithTimeout(context.Background(), opTimeout)
	call := w.rec.now()
	out, token, unacked, detail := w.p.acquire(opCtx, lock, owner, lease)
	ret := w.rec.now()
	cancel()
	op := Op{Mode: w.mode, Lock: lock, Worker: w.id, Owner: owner, Kind: Acquire, Outcome: out,
		Call: call, Return: ret, Token: token, Lease: int64(lease), Detail: detail}
	switch out {
	case Refused:
		w.rec.refusal(w.mode)
		w.sleep(ctx, w.between(w.par.backoffs[0], w.par.backoffs[1]))
		return
	case Maybe:
		// It may take effect until the horizon (a command waiting in a
		// paused server's socket runs when it resumes).
		op.Return = max(ret, call+int64(w.par.horizon))
		w.rec.op(op)
		if unacked {
			// The fail-closed path: the grant was not acknowledged, so it is
			// released on the node that made it; whatever that node replies
			// says nothing of the surviving history.
			rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			rcall := w.rec.now()
			_, rdetail := w.p.release(rctx, lock, owner)
			cancel()
			w.rec.op(Op{Mode: w.mode, Lock: lock, Worker: w.id, Owner: owner, Kind: Release, Outcome: Maybe,
				Call: rcall, Return: max(w.rec.now(), rcall+int64(w.par.horizon)), Detail: "unacknowledged grant: " + rdetail})
			return
		}
		// An unknown outcome may still hold the lock: release it.
		w.releaseUntilKnown(lock, owner, call, lease)
		w.sleep(ctx, w.between(w.par.backoffs[0], w.par.backoffs[1]))
		return
	}
	w.rec.op(op)
	if gc {
		// The paused client: it holds the token past its lease, then writes
		// as if nothing happened. The resource must refuse it when another
		// owner wrote with a higher token meanwhile.
		w.sleep(context.Background(), lease+w.par.gcPause)
	} else {
		w.sleep(context.Background(), w.between(w.par.holdMin, w.par.holdMax))
	}
	w.res.write(w.mode, lock, owner, token, call, int64(lease))
	w.releaseUntilKnown(lock, owner, call, lease)
	if gc {
		w.gc.Store(false)
		w.gcDone <- struct{}{}
	}
}

// untilKnown calls release (one try, which records its operations and says
// whether its outcome is known) until the outcome is known or the lease
// taken at grantCall is over anyway (a second past it); it waits 250 ms
// between tries and says whether the outcome became known.
func untilKnown(rec *recorder, grantCall int64, lease time.Duration, release func() (known bool)) bool {
	until := grantCall + int64(lease) + int64(time.Second)
	for {
		if release() {
			return true
		}
		if rec.now() > until {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// releaseUntilKnown releases owner's hold, again after an unknown outcome,
// until a reply says (released or not held) or the lease is over anyway.
func (w *worker) releaseUntilKnown(lock, owner string, grantCall int64, lease time.Duration) {
	untilKnown(w.rec, grantCall, lease, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		call := w.rec.now()
		out, detail := w.p.release(ctx, lock, owner)
		ret := w.rec.now()
		op := Op{Mode: w.mode, Lock: lock, Worker: w.id, Owner: owner, Kind: Release, Outcome: out, Call: call, Return: ret, Detail: detail}
		if out == Maybe {
			op.Return = max(ret, call+int64(w.par.horizon))
		}
		w.rec.op(op)
		return out != Maybe
	})
}

// dialer maps the announced address (a node's replication proxy) to this
// client group's own proxy in front of the same node.
func (t *topology) dialer(group int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if n := t.nodeByAnnounced(addr); n != nil {
			addr = n.clients[group].addr()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// ---- raw and acked: the commands themselves ----------------------------

// learned is what the acked path learned of the deployment's masters.
type learned struct {
	expected int64
	infoAt   time.Time
}

// cmdPath is the raw or the acked path: one connection to the master
// Sentinel names, asked again after any failure and every second (a
// client's view of +switch-master, a little late); in a cluster, to the
// master a node names for key's slot.
type cmdPath struct {
	t      *topology
	group  int
	acked  bool
	legacy bool
	key    string // the lock it serves (cluster: shardedPath)
	rng    *rand.Rand
	addr   string
	c      *redis.Client
	askAt  time.Time
	state  *learned // what acked learned of the deployment (nil: nothing yet)
}

func (p *cmdPath) close() {
	if p.c != nil {
		p.c.Close()
		p.c = nil
	}
}

func (p *cmdPath) conn(ctx context.Context) (*redis.Client, string, error) {
	if p.c != nil && time.Since(p.askAt) < time.Second {
		return p.c, p.addr, nil
	}
	addr, err := p.locate(ctx)
	if err != nil {
		return nil, "", err
	}
	p.askAt = time.Now()
	if addr != p.addr || p.c == nil {
		p.close()
		p.addr = addr
		p.c = redis.NewClient(&redis.Options{
			Addr: addr, Dialer: p.t.dialer(p.group), PoolSize: 1, MaxRetries: -1,
			DialTimeout: 2 * time.Second, ReadTimeout: readTimeout, WriteTimeout: readTimeout,
			ContextTimeoutEnabled: true,
		})
	}
	return p.c, p.addr, nil
}

// locate is the master's announced address: as a Sentinel (any, from a
// random one on) names it, or in a cluster as a node names key's.
func (p *cmdPath) locate(ctx context.Context) (string, error) {
	if p.t.cluster {
		return p.t.clusterMasterOf(ctx, p.t.slots[p.key], p.rng)
	}
	start := p.rng.Intn(len(p.t.sentinels))
	var err error
	for i := range p.t.sentinels {
		var addr string
		if addr, err = askMaster(ctx, p.t.sentinels[(start+i)%len(p.t.sentinels)].addr()); err == nil {
			return addr, nil
		}
	}
	return "", err
}

// drop forgets the connection after a failure: the next call asks Sentinel.
func (p *cmdPath) drop() {
	p.close()
	p.addr = ""
}

// refusedBeforeWriting: the server refused the command before it wrote
// anything (min-replicas-to-write, a replica, a node loading its data, a
// cluster node not serving the slot or the slot's shard down).
func refusedBeforeWriting(err error) bool {
	if !serverError(err) {
		return false
	}
	for _, prefix := range []string{"NOREPLICAS", "READONLY", "LOADING", "MOVED", "CLUSTERDOWN"} {
		if strings.HasPrefix(err.Error(), prefix) {
			return true
		}
	}
	return false
}

func serverError(err error) bool {
	var rerr redis.Error
	return err != nil && errors.As(err, &rerr)
}

func (p *cmdPath) acquire(ctx context.Context, lock, owner string, lease time.Duration) (Outcome, int64, bool, string) {
	g := p.acquireWith(ctx, []any{"LOCK.ACQUIRE", lock, owner, lease.Milliseconds(), "FENCED"}, fencedReply, false)
	return g.out, g.token, g.unacked, g.detail
}

// grantParser reads an acquisition's reply (nil for a nil reply): granted
// with its token (0 for the kinds that have none), or refused; ok false
// for a reply of no known shape.
type grantParser func(reply any) (granted bool, token int64, ok bool)

// fencedReply: [-1, token] granted, [pttl, -1] refused.
func fencedReply(reply any) (bool, int64, bool) {
	r, _ := reply.([]any)
	if len(r) != 2 {
		return false, 0, false
	}
	first, _ := r[0].(int64)
	token, _ := r[1].(int64)
	return first == -1, token, true
}

// grant is an acquisition's outcome on the command paths.
type grant struct {
	out     Outcome
	token   int64
	unacked bool // a grant the replicas did not acknowledge (out is Maybe)
	detail  string
	// With withID: the client and the connection's CLIENT ID the
	// acquisition ran on (a session hold is bound to that connection).
	conn   *redis.Client
	connID int64
}

// acquireWith runs one acquisition command on the path: alone (raw), or
// with the acknowledgement of acked or legacy pipelined behind it.
func (p *cmdPath) acquireWith(ctx context.Context, args []any, parse grantParser, withID bool) grant {
	c, _, err := p.conn(ctx)
	if err != nil {
		return grant{out: Refused, detail: "no master: " + err.Error()}
	}
	var st *learned
	// legacy asks before every acquisition; acked once: what the first
	// master has. INFO may only raise it later, whichever master answers:
	// every master is the one deployment's, and a newly promoted one first
	// met while a replica restarts says one replica fewer (a second
	// failover then loses grants WAIT counted: docs/safety.md).
	if p.legacy || (p.acked && p.state == nil) {
		text, err := c.Info(ctx, "replication").Result()
		if err != nil {
			p.drop()
			return grant{out: Refused, detail: "INFO: " + err.Error()}
		}
		n, _ := strconv.ParseInt(parseInfo(text)["connected_slaves"], 10, 64)
		st = &learned{expected: n, infoAt: time.Now()}
		if p.acked {
			p.state = st
		}
	} else if p.acked {
		st = p.state
	}
	pipe := c.Pipeline()
	var id *redis.IntCmd
	if withID {
		id = pipe.ClientID(ctx)
	}
	acq := pipe.Do(ctx, args...)
	var wait *redis.Cmd
	var inf *redis.StringCmd
	if st != nil {
		if st.expected > 0 {
			wait = pipe.Do(ctx, "WAIT", st.expected, syncTimeout)
		}
		if !p.legacy && time.Since(st.infoAt) > 5*time.Second {
			inf = pipe.Info(ctx, "replication")
		}
	}
	_, _ = pipe.Exec(ctx)
	var reply any
	switch err := acq.Err(); {
	case errors.Is(err, redis.Nil):
	case err != nil:
		if refusedBeforeWriting(err) {
			p.drop()
			return grant{out: Refused, detail: err.Error()}
		}
		if !serverError(err) {
			p.drop()
		}
		return grant{out: Maybe, detail: err.Error()}
	default:
		reply = acq.Val()
	}
	granted, token, ok := parse(reply)
	if !ok {
		return grant{out: Maybe, detail: fmt.Sprintf("unexpected reply %#v", reply)}
	}
	if !granted {
		return grant{out: Refused}
	}
	if inf != nil && inf.Err() == nil {
		n, _ := strconv.ParseInt(parseInfo(inf.Val())["connected_slaves"], 10, 64)
		st.expected = max(st.expected, n)
		st.infoAt = time.Now()
	}
	g := grant{out: Granted, token: token, conn: c}
	if id != nil {
		g.connID = id.Val()
	}
	if wait != nil {
		acked, err := wait.Int64()
		if err != nil || acked < st.expected {
			if err != nil && !serverError(err) {
				p.drop()
			}
			g.out, g.unacked = Maybe, err == nil || serverError(err)
			g.detail = fmt.Sprintf("WAIT %d replied %d %v", st.expected, acked, err)
		}
	}
	return g
}

func (p *cmdPath) release(ctx context.Context, lock, owner string) (Outcome, string) {
	c, _, err := p.conn(ctx)
	if err != nil {
		return Maybe, "no master: " + err.Error()
	}
	reply, err := c.Do(ctx, "LOCK.UNLOCK", lock, owner).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return NotHeld, ""
	case err != nil:
		if !serverError(err) || refusedBeforeWriting(err) {
			p.drop()
		}
		return Maybe, err.Error()
	}
	if n, _ := reply.(int64); n == 1 {
		return Released, ""
	}
	return Maybe, fmt.Sprintf("unexpected unlock reply %v", reply)
}

// ---- the Go client package --------------------------------------------

type goClientPath struct {
	rdb   redis.UniversalClient
	locks *rwlock.Client
	mu    sync.Mutex
	held  map[string]*rwlock.Lock // by owner
}

func newGoClientPath(t *topology, group int) (*goClientPath, error) {
	var rdb redis.UniversalClient
	if t.cluster {
		// The seeds are the nodes' announced addresses, which the dialer
		// maps to this group's proxies as it does the nodes CLUSTER SLOTS names.
		var seeds []string
		for _, n := range t.nodes {
			seeds = append(seeds, n.repl.addr())
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: seeds, Dialer: t.dialer(group),
			ReadTimeout: readTimeout, WriteTimeout: readTimeout, DialTimeout: 2 * time.Second,
		})
	} else {
		var sentinels []string
		for _, s := range t.sentinels {
			sentinels = append(sentinels, s.addr())
		}
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: masterName, SentinelAddrs: sentinels, Dialer: t.dialer(group),
			ReadTimeout: readTimeout, WriteTimeout: readTimeout, DialTimeout: 2 * time.Second,
		})
	}
	locks, err := rwlock.New(rdb)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &goClientPath{rdb: rdb, locks: locks, held: map[string]*rwlock.Lock{}}, nil
}

func (p *goClientPath) close() {
	p.locks.Close()
	p.rdb.Close()
}

func (p *goClientPath) acquire(ctx context.Context, lock, owner string, lease time.Duration) (Outcome, int64, bool, string) {
	out, token, detail := p.take(ctx, p.locks.Lock(lock, rwlock.WithFenced()), owner, 0, lease)
	return out, token, false, detail
}

// handle is the package's handle for a kind's attempt, with the options
// the kind needs and the package's defaults otherwise (the read-write
// lock's write side, the session and block kinds fenced, as the command
// streams are).
func (p *goClientPath) handle(req kindRequest) *rwlock.Lock {
	h := req.holds[0]
	switch req.kind {
	case KindPlain:
		return p.locks.Lock(h.lock)
	case KindRW:
		rw := p.locks.ReadWriteLock(h.lock, rwlock.WithFenced())
		if h.role == RoleRead {
			return rw.Read()
		}
		return rw.Write()
	case KindFair:
		return p.locks.FairLock(h.lock)
	case KindMulti:
		var holds []rwlock.Hold
		for _, h := range req.holds {
			holds = append(holds, rwlock.Hold{Kind: rwlock.KindLock, Name: h.lock})
		}
		return p.locks.MultiLock(holds)
	case KindSession:
		return p.locks.Lock(h.lock, rwlock.WithFenced(), rwlock.WithSession())
	}
	return p.locks.Lock(h.lock, rwlock.WithFenced()) // KindBlock: fenced, with a wait
}

func (p *goClientPath) acquireKind(ctx context.Context, req kindRequest) (Outcome, int64, string) {
	return p.take(ctx, p.handle(req), req.owner, req.wait, req.lease)
}

func (p *goClientPath) releaseKind(ctx context.Context, req kindRequest) (Outcome, string) {
	return p.release(ctx, req.holds[0].lock, req.owner)
}

// take acquires with the handle l for owner, keeping the handle for the
// release.
func (p *goClientPath) take(ctx context.Context, l *rwlock.Lock, owner string, wait, lease time.Duration) (Outcome, int64, string) {
	ok, err := l.Acquire(ctx, rwlock.WithWait(wait), rwlock.WithLease(lease))
	switch {
	case errors.Is(err, rwlock.ErrNotSynced):
		// The package released it already.
		return Maybe, 0, err.Error()
	case err != nil && refusedBeforeWriting(err):
		return Refused, 0, err.Error()
	case err != nil:
		p.mu.Lock()
		p.held[owner] = l // may hold it: the release below is asked
		p.mu.Unlock()
		return Maybe, 0, err.Error()
	case !ok:
		return Refused, 0, ""
	}
	token, _ := l.Token()
	p.mu.Lock()
	p.held[owner] = l
	p.mu.Unlock()
	return Granted, token, ""
}

// release releases the handle made for owner. Owners of this path are the
// package's own (<uuid>:<n>), so the history's owner names the handle.
func (p *goClientPath) release(ctx context.Context, lock, owner string) (Outcome, string) {
	p.mu.Lock()
	l := p.held[owner]
	p.mu.Unlock()
	if l == nil {
		return NotHeld, "no handle"
	}
	err := l.Release(ctx)
	switch {
	case err == nil:
		p.forget(owner)
		return Released, ""
	case errors.Is(err, rwlock.ErrNotHeld):
		// The detail says why (a session's connection closed: clientkinds.go).
		p.forget(owner)
		return NotHeld, err.Error()
	}
	return Maybe, err.Error()
}

func (p *goClientPath) forget(owner string) {
	p.mu.Lock()
	delete(p.held, owner)
	p.mu.Unlock()
}

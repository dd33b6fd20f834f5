package rwlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Client makes lock handles over one go-redis client. It carries the UUID
// of every owner it makes (one per Client, as Redisson has one per
// RedissonClient), the watchdog timeout and the replica sync policy. Safe
// for concurrent use.
//
// Next to the go-redis client it keeps, per master, a pool of connections
// for waits: no read timeout of their own (each call sets a deadline of its
// wait plus a margin) and no retries (an acquisition must never be sent
// twice). [Client.Close] closes those pools, never the go-redis client.
type Client struct {
	rdb             redis.UniversalClient
	id              string
	watchdogTimeout time.Duration
	sync            ReplicaSync

	mu      sync.Mutex
	waiters map[string]*redis.Client // by node address
	idle    *idleLinks               // wait connections not in use
	masters map[string]*learned      // what the replica sync learned: by node address in a cluster, else one (key "")
	closed  bool
}

// ClientOption configures a [Client] (see [New]).
type ClientOption func(*Client) error

// WithClientID sets the client's UUID, the first part of every owner
// (<UUID>:<id>). Default: a random UUID v4. Never give a UUID a Redisson
// instance uses: its threads' owners would collide with these.
func WithClientID(id string) ClientOption {
	return func(c *Client) error {
		if id == "" || containsAny(id, ": \t\r\n") {
			return fmt.Errorf("rwlock: client id %q: must be non-empty, without ':' or spaces", id)
		}
		c.id = id
		return nil
	}
}

// WithWatchdogTimeout sets the lease of holds taken without one (default
// 30 s); the watchdog renews them every third of it.
func WithWatchdogTimeout(d time.Duration) ClientOption {
	return func(c *Client) error {
		if _, err := millis(d, "watchdog timeout"); err != nil {
			return err
		}
		c.watchdogTimeout = d
		return nil
	}
}

// WithReplicaSync sets the replica acknowledgement policy (default
// [DefaultReplicaSync]).
func WithReplicaSync(s ReplicaSync) ClientOption {
	return func(c *Client) error {
		if err := s.check(); err != nil {
			return err
		}
		c.sync = s
		return nil
	}
}

// handles numbers the lock handles of the process: the second part of an
// owner. Never reused, so two handles never share an owner.
var handles atomic.Uint64

// New makes a Client over rdb: a *redis.Client (standalone, or a failover
// client) or a *redis.ClusterClient, in which every command goes to the
// master of the lock name's slot.
func New(rdb redis.UniversalClient, opts ...ClientOption) (*Client, error) {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		return nil, fmt.Errorf("rwlock: unsupported client %T: use a *redis.Client or *redis.ClusterClient", rdb)
	}
	c := &Client{
		rdb:             rdb,
		id:              uuid.NewString(),
		watchdogTimeout: DefaultWatchdogTimeout,
		sync:            DefaultReplicaSync,
		waiters:         map[string]*redis.Client{},
		idle:            newIdleLinks(),
		masters:         map[string]*learned{},
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ID is the client's UUID, the first part of its owners.
func (c *Client) ID() string { return c.id }

// Redis is the go-redis client the locks talk through.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Close closes the connections kept for waits. Locks still held stay held
// until released or their leases end; the go-redis client stays open.
func (c *Client) Close() error {
	c.mu.Lock()
	waiters := c.waiters
	c.waiters, c.closed = map[string]*redis.Client{}, true
	c.mu.Unlock()
	errs := []error{c.idle.closeAll()}
	for _, w := range waiters {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}

func (c *Client) newOwner() string {
	return fmt.Sprintf("%s:%d", c.id, handles.Add(1))
}

// node is the client for the master serving key: the client itself when
// standalone, the slot's master in a cluster.
func (c *Client) node(ctx context.Context, key string) (*redis.Client, error) {
	switch rdb := c.rdb.(type) {
	case *redis.Client:
		return rdb, nil
	case *redis.ClusterClient:
		return rdb.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("rwlock: unsupported client %T", c.rdb)
}

// waiter is the pool of wait connections to the node at addr (created on
// first use from the node's options: same auth, TLS and dialer).
func (c *Client) waiter(template *redis.Options, addr string) (*redis.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("rwlock: client closed")
	}
	if w, ok := c.waiters[addr]; ok {
		return w, nil
	}
	// A client of its own for the node, with the node's identity (auth,
	// TLS, dialer, database) and none of its machinery (push processors,
	// caches): those are bound to the client that made them. It speaks
	// RESP2: what the package reads on it (the module's replies, INFO,
	// CLIENT ID, WAIT, WAITAOF) reads the same in both protocols, and a
	// wait connection, held out of its pool between commands, subscribes to
	// nothing; in RESP3 go-redis would look for push notifications on it
	// around every command (three socket peeks, system calls, per command:
	// a tenth of an uncontended cycle's CPU on the client).
	opt := redis.Options{
		Network:                      template.Network,
		Addr:                         addr,
		ClientName:                   template.ClientName,
		Dialer:                       template.Dialer,
		OnConnect:                    template.OnConnect,
		Protocol:                     2,
		Username:                     template.Username,
		Password:                     template.Password,
		CredentialsProvider:          template.CredentialsProvider,
		CredentialsProviderContext:   template.CredentialsProviderContext,
		StreamingCredentialsProvider: template.StreamingCredentialsProvider,
		DB:                           template.DB,
		DialTimeout:                  template.DialTimeout,
		WriteTimeout:                 template.WriteTimeout,
		TLSConfig:                    template.TLSConfig,
		DisableIdentity:              template.DisableIdentity,
		IdentitySuffix:               template.IdentitySuffix,
		ReadTimeout:                  -1,   // no deadline of the pool's: each call sets its own
		ContextTimeoutEnabled:        true, // ... from its context
		MaxRetries:                   -1,   // an acquisition must never be sent twice
		DialerRetries:                1,    // a node down answers at once (RedLock's node timeout)
		MaintNotificationsConfig:     &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	w := redis.NewClient(&opt)
	c.waiters[addr] = w
	return w, nil
}

// command runs an ordinary (non-waiting) command on the master of key. In a
// cluster, a MOVED reply (the slot was resharded) makes go-redis's cluster
// client route it again, once.
func (c *Client) command(ctx context.Context, key string, args ...any) (any, error) {
	node, err := c.node(ctx, key)
	if err != nil {
		return nil, err
	}
	reply, err := node.Do(ctx, args...).Result()
	if _, ok := movedTo(err); ok {
		if cluster, isCluster := c.rdb.(*redis.ClusterClient); isCluster {
			cluster.ReloadState(ctx)
			return cluster.Do(ctx, args...).Result()
		}
	}
	return nilReply(reply, err)
}

// pipeline runs cmds at once (one round trip) on the master of key; in a
// cluster, a MOVED reply to the first makes go-redis's cluster client route
// them again, once. Each command's reply (nil for a nil reply) and error.
func (c *Client) pipeline(ctx context.Context, key string, cmds [][]any) ([]result, error) {
	node, err := c.node(ctx, key)
	if err != nil {
		return nil, err
	}
	run := func(p redis.Pipeliner) []result {
		issued := make([]*redis.Cmd, len(cmds))
		for i, args := range cmds {
			issued[i] = p.Do(ctx, args...)
		}
		_, execErr := p.Exec(ctx)
		return pipeResults(issued, execErr)
	}
	rs := run(node.Pipeline())
	if _, ok := movedTo(rs[0].err); ok {
		if cluster, isCluster := c.rdb.(*redis.ClusterClient); isCluster {
			cluster.ReloadState(ctx)
			rs = run(cluster.Pipeline())
		}
	}
	return rs, nil
}

// openLink takes a wait connection to the master of key.
func (c *Client) openLink(ctx context.Context, key string) (*link, error) {
	node, err := c.node(ctx, key)
	if err != nil {
		return nil, err
	}
	return c.linkTo(node.Options(), node.Options().Addr)
}

func (c *Client) linkTo(template *redis.Options, addr string) (*link, error) {
	if lk := c.idle.take(addr); lk != nil {
		return lk, nil
	}
	w, err := c.waiter(template, addr)
	if err != nil {
		return nil, err
	}
	return &link{idle: c.idle, addr: addr, conn: w.Conn(), waiter: w, template: template, timeout: template.ReadTimeout}, nil
}

// moved gives lk up and opens a link to the master at addr, which a MOVED
// reply named (a reshard: the command did not run), after go-redis's
// cluster client learned the new slots.
func (c *Client) moved(ctx context.Context, lk *link, addr string) (*link, error) {
	if cluster, ok := c.rdb.(*redis.ClusterClient); ok {
		cluster.ReloadState(ctx)
	}
	template := lk.template
	lk.close()
	return c.linkTo(template, addr)
}

// once runs a command that must not run twice (an add of permits, a
// count-down) on the master of key, on a wait connection: go-redis's client
// would resend it after an I/O error (its MaxRetries), a wait connection
// never does, so a lost reply is returned as the error. A MOVED reply is
// asked of the new master.
func (c *Client) once(ctx context.Context, key string, args ...any) (any, error) {
	rs, err := c.oncePipeline(ctx, key, [][]any{args})
	if err != nil {
		return nil, err
	}
	return rs[0].reply, rs[0].err
}

// oncePipeline is [Client.once] for a pipeline: cmds at once, never resent;
// a MOVED reply to the first asks them all of the new master.
func (c *Client) oncePipeline(ctx context.Context, key string, cmds [][]any) ([]result, error) {
	lk, err := c.openLink(ctx, key)
	if err != nil {
		return nil, err
	}
	rs, _ := lk.wait(ctx, -1, 0, cmds)
	if addr, ok := movedTo(rs[0].err); ok {
		if lk, err = c.moved(ctx, lk, addr); err != nil {
			return nil, err
		}
		rs, _ = lk.wait(ctx, -1, 0, cmds)
	}
	lk.close()
	return rs, nil
}

// twice runs a command whose resend is answered as its first send was (a
// lock's release with HELD) on the master of key, on a wait connection,
// which go-redis never resends; when the reply is lost (the connection
// failed or the reply's deadline passed, ctx still on), once more on a new
// connection. resent tells the caller that the reply is the resend's: the
// first send may have run.
func (c *Client) twice(ctx context.Context, key string, args []any) (reply any, resent bool, err error) {
	cmds := [][]any{args}
	rs, err := c.oncePipeline(ctx, key, cmds)
	if err != nil {
		return nil, false, err // never sent
	}
	if ioError(rs[0].err) && ctx.Err() == nil {
		again, err := c.oncePipeline(ctx, key, cmds)
		if err != nil {
			// No resend: the first send's fate stays unknown.
			return nil, false, errors.Join(rs[0].err, err)
		}
		rs, resent = again, true
	}
	return rs[0].reply, resent, rs[0].err
}

// master is the learned state of the master at addr. Outside a cluster
// every master the Client meets is the same deployment's (Sentinel promotes
// one of its replicas), so they share one state: a newly promoted master,
// first met while a replica restarts, reports one replica fewer than the
// deployment has, and a count learned afresh from it would acknowledge
// grants that a second failover loses (tests/safety, docs/safety.md). In a
// cluster each master is its own shard's.
func (c *Client) master(addr string) *learned {
	if _, isCluster := c.rdb.(*redis.ClusterClient); !isCluster {
		addr = ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.masters[addr]
	if !ok {
		m = &learned{}
		c.masters[addr] = m
	}
	return m
}

package rwlock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// unblockTries bounds how long a cancelled wait is asked to end with
// CLIENT UNBLOCK (every unblockPause) before its connection is killed: the
// command may not have reached the server when the first UNBLOCK did.
const (
	unblockTries = 50
	unblockPause = 20 * time.Millisecond
)

// maxIdleLinks bounds the wait connections a Client keeps per node between
// acquisitions (their CLIENT ID known); more are given back to the pool.
const maxIdleLinks = 32

// link is one wait connection to a key's master: taken for an acquisition
// and its replica sync (they must share a connection: WAIT counts what this
// connection wrote), or kept for a session hold's whole life. Between
// acquisitions it waits in the Client's idle list, so that its CLIENT ID
// (needed to end a cancelled wait) is asked once per connection.
type link struct {
	c        *Client
	addr     string
	conn     *redis.Conn
	waiter   *redis.Client  // the pool conn came from: other connections to the same node
	template *redis.Options // the node's options: a MOVED reply opens a link to another node with them
	timeout  time.Duration  // the go-redis client's ReadTimeout for ordinary commands (0: none)
	id       int64          // CLIENT ID; 0 until asked
	broken   bool           // a call failed midway: the connection is not reused
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
	c.mu.Lock()
	if idle := c.idle[addr]; len(idle) > 0 {
		lk := idle[len(idle)-1]
		c.idle[addr] = idle[:len(idle)-1]
		c.mu.Unlock()
		return lk, nil
	}
	c.mu.Unlock()
	w, err := c.waiter(template, addr)
	if err != nil {
		return nil, err
	}
	return &link{c: c, addr: addr, conn: w.Conn(), waiter: w, template: template, timeout: template.ReadTimeout}, nil
}

// close puts the connection back in the Client's idle list, or closes it
// (back to go-redis's pool, which drops it if a call failed midway) when it
// failed, the list is full or the Client closed.
func (l *link) close() {
	if !l.broken {
		c := l.c
		c.mu.Lock()
		if !c.closed && len(c.idle[l.addr]) < maxIdleLinks {
			c.idle[l.addr] = append(c.idle[l.addr], l)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
	_ = l.conn.Close()
}

// failed marks the link broken when err is the connection's (not a reply).
func (l *link) failed(err error) {
	if ioError(err) {
		l.broken = true
	}
}

// do sends one command and reads its reply within timeout (0: the go-redis
// client's read timeout).
func (l *link) do(ctx context.Context, timeout time.Duration, args ...any) (any, error) {
	if timeout == 0 {
		timeout = l.timeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	reply, err := nilReply(l.conn.Do(ctx, args...).Result())
	l.failed(err)
	return reply, err
}

type result struct {
	reply any
	err   error
}

// wait sends a pipeline whose first command may BLOCK for blockMs (0:
// without limit; -1: no BLOCK), and reads every reply however long the
// wait, whatever the go-redis client's read timeout: the deadline is the
// wait plus a margin, plus extra for the commands behind it (WAIT). When
// ctx ends first, the server-side wait is ended with CLIENT UNBLOCK from
// another connection, and wait returns the commands' own outcome (served
// or not: the caller releases what was served) and ctx's error as
// cancelled. An I/O failure leaves every result with its error.
func (l *link) wait(ctx context.Context, blockMs int64, extra time.Duration, cmds [][]any) (rs []result, cancelled error) {
	if err := ctx.Err(); err != nil {
		return failedAll(cmds, err), nil // never sent
	}
	if blockMs < 0 {
		callCtx := ctx
		if l.timeout > 0 {
			var cancel context.CancelFunc
			callCtx, cancel = context.WithTimeout(ctx, l.timeout+extra)
			defer cancel()
		}
		return l.pipe(callCtx, cmds), nil
	}
	if l.id == 0 {
		// Once per connection: the link keeps it while idle.
		id, err := l.conn.ClientID(ctx).Result()
		if err != nil {
			l.failed(err)
			return failedAll(cmds, err), nil
		}
		l.id = id
	}
	callCtx := context.WithoutCancel(ctx)
	if blockMs > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(callCtx, time.Duration(blockMs)*time.Millisecond+replyMargin+extra)
		defer cancel()
	}
	done := make(chan []result, 1)
	go func() { done <- l.pipe(callCtx, cmds) }()
	select {
	case rs := <-done:
		return rs, nil
	case <-ctx.Done():
	}
	return l.unblock(l.id, done), ctx.Err()
}

// pipe sends cmds at once and reads each reply (nil for a nil reply).
func (l *link) pipe(ctx context.Context, cmds [][]any) []result {
	p := l.conn.Pipeline()
	issued := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		issued[i] = p.Do(ctx, args...)
	}
	_, execErr := p.Exec(ctx)
	rs := pipeResults(issued, execErr)
	for _, r := range rs {
		l.failed(r.err)
	}
	return rs
}

// pipeResults is each command's reply (nil for a nil reply) and error. A
// command never read (Exec failed before it: a context ended, no
// connection) has neither value nor error of its own: it gets Exec's.
func pipeResults(issued []*redis.Cmd, execErr error) []result {
	rs := make([]result, len(issued))
	for i, cmd := range issued {
		reply, err := cmd.Result()
		if err == nil && reply == nil && ioError(execErr) && !errors.Is(execErr, redis.Nil) {
			err = execErr
		}
		rs[i].reply, rs[i].err = nilReply(reply, err)
	}
	return rs
}

func failedAll(cmds [][]any, err error) []result {
	rs := make([]result, len(cmds))
	for i := range rs {
		rs[i].err = err
	}
	return rs
}

// unblock ends the wait of the connection with CLIENT ID id: CLIENT UNBLOCK
// (the module then answers as if the wait ran out) until the reply comes,
// and if it does not, CLIENT KILL, which ends the wait with the connection.
func (l *link) unblock(id int64, done <-chan []result) []result {
	bg := context.Background()
	for i := 0; i < unblockTries; i++ {
		ctx, cancel := context.WithTimeout(bg, time.Second)
		_ = l.waiter.Do(ctx, "CLIENT", "UNBLOCK", id).Err()
		cancel()
		select {
		case r := <-done:
			return r
		case <-time.After(unblockPause):
		}
	}
	ctx, cancel := context.WithTimeout(bg, time.Second)
	_ = l.waiter.Do(ctx, "CLIENT", "KILL", "ID", id).Err()
	cancel()
	return <-done
}

// parseInfo reads the field:value lines of an INFO reply.
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

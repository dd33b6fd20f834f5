package rwlock

import (
	"context"
	"errors"
	"strings"
	"sync"
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
	idle     *idleLinks // where it waits between acquisitions
	addr     string
	conn     *redis.Conn
	waiter   *redis.Client  // the pool conn came from: other connections to the same node
	template *redis.Options // the node's options: a MOVED reply opens a link to another node with them
	timeout  time.Duration  // the go-redis client's ReadTimeout for ordinary commands (0: none)
	id       int64          // CLIENT ID; 0 until asked
	broken   bool           // a call failed midway: the connection is not reused
}

// close puts the connection back in the Client's idle list, or closes it
// (back to go-redis's pool, which drops it if a call failed midway) when it
// failed, the list is full or the Client closed.
func (l *link) close() {
	if !l.broken && l.idle.put(l) {
		return
	}
	_ = l.conn.Close()
}

// idleLinks are a Client's wait connections between acquisitions, by node
// address.
type idleLinks struct {
	mu     sync.Mutex
	byAddr map[string][]*link
	closed bool
}

func newIdleLinks() *idleLinks { return &idleLinks{byAddr: map[string][]*link{}} }

// take is an idle link to addr, or nil.
func (i *idleLinks) take(addr string) *link {
	i.mu.Lock()
	defer i.mu.Unlock()
	links := i.byAddr[addr]
	if len(links) == 0 {
		return nil
	}
	i.byAddr[addr] = links[:len(links)-1]
	return links[len(links)-1]
}

// put keeps lk unless the list is full or closed.
func (i *idleLinks) put(lk *link) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed || len(i.byAddr[lk.addr]) >= maxIdleLinks {
		return false
	}
	i.byAddr[lk.addr] = append(i.byAddr[lk.addr], lk)
	return true
}

// closeAll closes every idle link's connection, and keeps none after.
func (i *idleLinks) closeAll() error {
	i.mu.Lock()
	byAddr := i.byAddr
	i.byAddr, i.closed = map[string][]*link{}, true
	i.mu.Unlock()
	var errs []error
	for _, links := range byAddr {
		for _, lk := range links {
			errs = append(errs, lk.conn.Close())
		}
	}
	return errors.Join(errs...)
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

// wait sends a pipeline whose first command may BLOCK for blockMs (0:
// without limit; -1: no BLOCK), and reads every reply however long the
// wait, whatever the go-redis client's read timeout: the deadline is the
// wait plus a margin, plus extra for the commands behind it (WAIT). When
// ctx ends first, the server-side wait is ended with CLIENT UNBLOCK from
// another connection, and wait returns the commands' own outcome (served
// or not: the caller releases what was served) and ctx's error as
// cancelled. An I/O failure leaves every result with its error.
//
// The calling goroutine reads the replies itself; ctx's end is watched by
// context.AfterFunc, which starts a goroutine only if ctx ends: a
// goroutine per wait, and the wake-ups of handing its replies back, would
// be most of an uncontended acquisition's cost on the client.
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
	// The wait's own deadline only: ctx's end is watched below.
	callCtx := ctx
	if ctx.Done() != nil {
		callCtx = context.WithoutCancel(ctx)
	}
	if blockMs > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(callCtx, time.Duration(blockMs)*time.Millisecond+replyMargin+extra)
		defer cancel()
	}
	if ctx.Done() == nil { // a context that never ends: nothing to watch
		return l.pipe(callCtx, cmds), nil
	}
	replied := make(chan struct{})
	unblocked := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(unblocked)
		l.unblock(l.id, replied)
	})
	rs = l.pipe(callCtx, cmds)
	close(replied)
	if stop() {
		return rs, nil
	}
	// ctx ended before the replies came: the unblocking must be over
	// before the connection serves another wait, which a late CLIENT
	// UNBLOCK would end.
	<-unblocked
	return rs, ctx.Err()
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

// unblock ends the wait of the connection with CLIENT ID id, until replied
// is closed: CLIENT UNBLOCK (the module then answers as if the wait ran
// out) until the reply comes, and if it does not, CLIENT KILL, which ends
// the wait with the connection.
func (l *link) unblock(id int64, replied <-chan struct{}) {
	bg := context.Background()
	for i := 0; i < unblockTries; i++ {
		select {
		case <-replied:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(bg, time.Second)
		_ = l.waiter.Do(ctx, "CLIENT", "UNBLOCK", id).Err()
		cancel()
		select {
		case <-replied:
			return
		case <-time.After(unblockPause):
		}
	}
	ctx, cancel := context.WithTimeout(bg, time.Second)
	_ = l.waiter.Do(ctx, "CLIENT", "KILL", "ID", id).Err()
	cancel()
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

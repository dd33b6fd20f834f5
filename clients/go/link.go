package rwlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// link is one wait connection to a key's master: taken for an acquisition
// and its replica sync (they must share a connection: WAIT counts what this
// connection wrote), or kept for a session hold's whole life.
type link struct {
	conn     *redis.Conn
	waiter   *redis.Client  // the pool conn came from: other connections to the same node
	template *redis.Options // the node's options: a MOVED reply opens a link to another node with them
	timeout  time.Duration  // the go-redis client's ReadTimeout for ordinary commands (0: none)
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
	w, err := c.waiter(template, addr)
	if err != nil {
		return nil, err
	}
	return &link{conn: w.Conn(), waiter: w, template: template, timeout: template.ReadTimeout}, nil
}

// close gives the connection back to the pool (go-redis drops it instead
// if a call failed midway).
func (l *link) close() { _ = l.conn.Close() }

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
	return nilReply(l.conn.Do(ctx, args...).Result())
}

type result struct {
	reply any
	err   error
}

// wait sends a command that may BLOCK for blockMs (0: without limit; -1: no
// BLOCK) and reads its reply however long the wait, whatever the go-redis
// client's read timeout: the deadline is the wait plus a margin. When ctx
// ends first, the server-side wait is ended with CLIENT UNBLOCK from another
// connection, and wait returns the command's own outcome (served or not:
// the caller releases what was served) and ctx's error as cancelled.
func (l *link) wait(ctx context.Context, blockMs int64, args ...any) (r result, cancelled error) {
	if blockMs < 0 {
		reply, err := l.do(ctx, 0, args...)
		return result{reply, err}, nil
	}
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	id, err := l.conn.ClientID(ctx).Result()
	if err != nil {
		return result{err: err}, nil
	}
	callCtx := context.WithoutCancel(ctx)
	if blockMs > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(callCtx, time.Duration(blockMs)*time.Millisecond+replyMargin)
		defer cancel()
	}
	done := make(chan result, 1)
	go func() {
		r, e := nilReply(l.conn.Do(callCtx, args...).Result())
		done <- result{r, e}
	}()
	select {
	case r := <-done:
		return r, nil
	case <-ctx.Done():
	}
	return l.unblock(id, done), ctx.Err()
}

// unblock ends the wait of the connection with CLIENT ID id: CLIENT UNBLOCK
// (the module then answers as if the wait ran out) until the reply comes,
// and if it does not, CLIENT KILL, which ends the wait with the connection.
func (l *link) unblock(id int64, done <-chan result) result {
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

// synced waits for the master's replicas (and AOF) to acknowledge what this
// connection wrote, per policy; "" when they did, else what fell short.
func (l *link) synced(ctx context.Context, policy ReplicaSync) (string, error) {
	if !policy.Enabled {
		return "", nil
	}
	reply, err := l.do(ctx, 0, "INFO", "replication", "persistence")
	if err != nil {
		return "", err
	}
	text, _ := reply.(string)
	info := parseInfo(text)
	timeoutMs, err := millis(policy.Timeout, "replica sync timeout")
	if err != nil {
		return "", err
	}
	replyTimeout := policy.Timeout + replyMargin
	if replicas, _ := strconv.ParseInt(info["connected_slaves"], 10, 64); replicas > 0 {
		reply, err := l.do(ctx, replyTimeout, "WAIT", replicas, timeoutMs)
		if err != nil {
			return "", err
		}
		if acked, err := integer(reply); err != nil || acked < replicas {
			return fmt.Sprintf("WAIT %d %d replied %v", replicas, timeoutMs, reply), err
		}
	}
	if policy.AOF && info["aof_enabled"] == "1" {
		reply, err := l.do(ctx, replyTimeout, "WAITAOF", 1, 0, timeoutMs)
		var rerr redis.Error
		if errors.As(err, &rerr) && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			return "", nil // before Redis 7.2: WAIT alone
		}
		if err != nil {
			return "", err
		}
		pair, _ := reply.([]any)
		if len(pair) != 2 {
			return "", fmt.Errorf("rwlock: unexpected WAITAOF reply %#v", reply)
		}
		if local, err := integer(pair[0]); err != nil || local < 1 {
			return fmt.Sprintf("WAITAOF 1 0 %d replied %v", timeoutMs, reply), err
		}
	}
	return "", nil
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

package rwlock

// Reading replies: go-redis's errors and nils as the locks need them.

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// nilReply turns go-redis's redis.Nil into a nil reply: the module answers
// nil for "acquired" and "not held".
func nilReply(reply any, err error) (any, error) {
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return reply, err
}

// movedTo is the address of a MOVED error reply.
func movedTo(err error) (string, bool) {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return "", false
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "MOVED ") {
		return "", false
	}
	fields := strings.Fields(msg)
	if len(fields) != 3 {
		return "", false
	}
	return fields[2], true
}

// ioError tells a failure of the connection (worth one retry of an
// idempotent command) from an error reply of the server.
func ioError(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	return !errors.As(err, &rerr)
}

type result struct {
	reply any
	err   error
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

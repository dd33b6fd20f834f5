package rwlock

import (
	"errors"
	"fmt"
	"time"
)

// The error kinds every rwlock client names alike. Test for them with
// errors.Is; the errors returned are *[Error] values wrapping one of them.
// Errors of go-redis (connections, timeouts, redis.Error replies) are
// returned as they are.
var (
	// ErrNotAcquired: the wait ran out before the lock could be taken
	// (returned by [Lock.Run]; [Lock.Acquire] answers false instead).
	ErrNotAcquired = errors.New("NotAcquired")
	// ErrNotHeld: a release (or renewal) by an owner that holds nothing:
	// never taken, already released, or lost.
	ErrNotHeld = errors.New("NotHeld")
	// ErrNotReentrant: the holder of a non-reentrant lock asked for it again;
	// nothing changed on the server.
	ErrNotReentrant = errors.New("NotReentrant")
	// ErrNotSynced: the master's replicas (or its AOF) did not acknowledge
	// the acquisition in time; the hold was released again.
	ErrNotSynced = errors.New("NotSynced")
	// ErrReleaseUnknown: a last release's reply was lost, and its resend
	// found the owner holding nothing: the first send freed the lock, or
	// the hold was gone before it (lease run out, failover, key deleted).
	// Which one cannot be known, so it is not [ErrNotHeld]; the handle
	// holds nothing either way.
	ErrReleaseUnknown = errors.New("ReleaseUnknown")
)

// Error is an rwlock error: its Kind is one of the Err* values above, Name
// the lock, and PTTL (for [ErrNotAcquired]) what the holds in the way had
// left when the wait ran out.
type Error struct {
	Kind   error
	Name   string
	PTTL   time.Duration
	Detail string
}

// Error says the kind, the lock and the detail.
func (e *Error) Error() string {
	msg := fmt.Sprintf("rwlock: %s: %s", e.Kind, e.Name)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap gives the kind, for errors.Is.
func (e *Error) Unwrap() error { return e.Kind }

func newError(kind error, name, detail string) *Error {
	return &Error{Kind: kind, Name: name, Detail: detail}
}

package rwlock

import "context"

// CountDownLatch is Redisson's RCountDownLatch on the module's LATCH.*
// commands: a count under its name, counted down by anyone, and a wait
// for zero on the server. Make it with [Client.CountDownLatch]; it is safe
// for concurrent use. The name may hold no braces (the server refuses them:
// Redisson's channel would land in another slot).
type CountDownLatch struct {
	c    *Client
	name string
}

// CountDownLatch makes a handle on the latch name (Redisson's
// RCountDownLatch). Nothing is sent until a call.
func (c *Client) CountDownLatch(name string) *CountDownLatch {
	return &CountDownLatch{c: c, name: name}
}

// Name is the latch's name: the key of its count.
func (l *CountDownLatch) Name() string { return l.name }

// TrySetCount sets the count when there is no latch (Redisson's
// trySetCount(n)): true when set, false when one exists. Sent once: a lost
// reply is returned as an error, never resent (a resend would answer false
// for a count it set).
func (l *CountDownLatch) TrySetCount(ctx context.Context, count int64) (bool, error) {
	return oneOf(l.c.once(ctx, l.name, "LATCH.TRYSETCOUNT", l.name, count))
}

// CountDown counts down once (Redisson's countDown()); the latch is
// deleted when the count reaches 0, and every waiter is served. Sent once,
// without a request id (LATCH.COUNTDOWN has none): a lost reply is returned
// as an error, never resent, since a resend would count down twice.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	_, err := l.c.once(ctx, l.name, "LATCH.COUNTDOWN", l.name)
	return err
}

// Count is the count (Redisson's getCount()); 0 without a latch.
func (l *CountDownLatch) Count(ctx context.Context) (int64, error) {
	return integerOf(l.c.command(ctx, l.name, "LATCH.COUNT", l.name))
}

// Delete deletes the latch, serving every waiter (Redisson's delete()):
// true when there was one. Sent once, as [CountDownLatch.TrySetCount].
func (l *CountDownLatch) Delete(ctx context.Context) (bool, error) {
	return oneOf(l.c.once(ctx, l.name, "LATCH.DELETE", l.name))
}

// Await waits for the count to reach 0 (or the latch to go): true when it
// did, false when the wait ran out first (Redisson's await(timeout);
// without [WithWait], await(): without limit; [WithWait](0): one look).
// The wait is one LATCH.AWAIT … BLOCK on the server, on a connection of its
// own, so it may be longer than the go-redis client's ReadTimeout; ctx
// ending stops it (on the server too) and Await returns ctx's error. A lost
// reply is asked once more, with what is left of the wait (the command
// writes nothing). [WithLease] is refused.
func (l *CountDownLatch) Await(ctx context.Context, opts ...AcquireOption) (bool, error) {
	r, err := newWait(opts, "a latch's wait")
	if err != nil {
		return false, err
	}
	a := acquirer{
		name: l.name,
		args: func(r request, _ string) []any { return options([]any{"LATCH.AWAIT", l.name}, r, false, "") },
		read: readOne,
		// Nothing is taken: a wait served as it was cancelled leaves
		// nothing to give back.
		undo:     func(*link, request) error { return nil },
		readOnly: true,
	}
	o, _, _, err := l.c.acquire(ctx, a, r, nil)
	return o.acquired, err
}

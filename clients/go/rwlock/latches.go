package rwlock

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// maxLatches bounds each list of a latchBook: a semaphore handle that only
// acquires (another releases) must not grow without end, and a DEL of
// more keys costs more than letting the oldest expire (13.5 s plus their
// wait), which the contract allows.
const maxLatches = 64

// latchBook keeps the request latches one object (a semaphore, a permit
// semaphore) left on the server, for its next release to delete them in
// its own pipeline: no round trip of their own. Safe for concurrent use.
type latchBook struct {
	mu sync.Mutex
	// acquired: the latches of acquisitions whose replies came, since the
	// last release.
	acquired []string
	// released: the latches of releases whose replies came (or failed): a
	// release's own latch must outlive its reply, so the next release
	// deletes it, or it expires.
	released []string
}

// acquiredAt records the latch of an acquisition whose reply came.
func (b *latchBook) acquiredAt(key string) {
	b.mu.Lock()
	b.acquired = bounded(b.acquired, key)
	b.mu.Unlock()
}

// bounded is keys with key appended, the oldest left out past maxLatches
// (left to expire).
func bounded(keys []string, key string) []string {
	if len(keys) >= maxLatches {
		keys = append(keys[:0:0], keys[len(keys)-maxLatches+1:]...)
	}
	return append(keys, key)
}

// withDel is the pipeline of a release: its command, then a DEL of the
// latches recorded so far (none: no DEL), which the book forgets.
func (b *latchBook) withDel(release []any) [][]any {
	b.mu.Lock()
	del := []any{"DEL"}
	for _, k := range append(b.released, b.acquired...) {
		del = append(del, k)
	}
	b.acquired, b.released = nil, nil
	b.mu.Unlock()
	if len(del) == 1 {
		return [][]any{release}
	}
	return [][]any{release, del}
}

// release sends the release command(id) on the master of name with a fresh
// request id and, in its pipeline, a DEL of the latches recorded so far;
// once more with the same id when the reply was lost, which the server
// answers from its latch as it answered the first send (never giving back
// twice). The release's own latch is never in its own DEL: it is recorded
// only once the reply came (or both sends failed), so that no release
// running beside it deletes it while a resend may still need it. A DEL that
// failed leaves its latches to expire (13.5 s).
func (b *latchBook) release(ctx context.Context, c *Client, name string, command func(id string) []any) (any, error) {
	id := uuid.NewString()
	cmds := b.withDel(command(id))
	defer func() {
		b.mu.Lock()
		b.released = bounded(b.released, latchKey(name, id))
		b.mu.Unlock()
	}()
	rs, err := c.pipeline(ctx, name, cmds)
	if err == nil {
		err = rs[0].err
	}
	if ioError(err) && ctx.Err() == nil {
		if rs, err = c.pipeline(ctx, name, cmds); err == nil {
			err = rs[0].err
		}
	}
	if err != nil {
		return nil, err
	}
	return rs[0].reply, nil
}

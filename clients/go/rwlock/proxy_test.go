package rwlock

// A TCP proxy between the client and the server that loses one reply: the
// first command whose bytes hold a given pattern reaches the server, and
// the connection is closed (or, stalling, left silent) before the reply
// comes back. The fault a lost reply is, for real: the server acted, the
// client cannot know how.

import (
	"bytes"
	"context"
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

type faultProxy struct {
	ln      net.Listener
	target  string
	match   []byte
	stall   bool // keep the connection open, silent, instead of closing it
	tripped atomic.Bool
	fired   atomic.Bool // the fault happened: a reply was withheld
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

// startProxy forwards to target; the first command holding command (the
// name as sent, e.g. LOCK.ACQUIRE) loses its reply.
func startProxy(t testing.TB, target, command string, stall bool) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// As RESP sends it: a bulk string of its own, so LOCK.ACQUIRE never
	// matches FAIRLOCK.ACQUIRE or LOCK.ACQUIREALL.
	match := []byte(fmt.Sprintf("$%d\r\n%s\r\n", len(command), command))
	p := &faultProxy{ln: ln, target: target, match: match, stall: stall}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *faultProxy) accept() {
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
		p.track(c)
		p.track(u)
		var armed atomic.Bool
		p.wg.Add(2)
		go func() { // client -> server
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					// Armed before the command goes on: its reply may come back
					// before this goroutine runs again.
					if bytes.Contains(buf[:n], p.match) && p.tripped.CompareAndSwap(false, true) {
						armed.Store(true)
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
				if n > 0 && armed.Load() {
					// The reply of the armed command (or a later one): lost.
					p.fired.Store(true)
					if p.stall {
						continue
					}
					break
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			_ = c.Close()
			_ = u.Close()
		}()
	}
}

func (p *faultProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// proxiedClient is an rwlock Client whose every connection goes through p.
func proxiedClient(t testing.TB, p *faultProxy, readTimeout time.Duration) *Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: p.addr(), ReadTimeout: readTimeout})
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
	return c
}

// TestLostReplies: for every kind of single lock, with and without a wait,
// the acquisition's reply is lost once; the client resends it (same request
// id), the acquisition succeeds, and the server holds exactly one hold (a
// fenced one: the token it issued once). One release frees it.
func TestLostReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	type kind struct {
		name    string
		command string
		make    func(c *Client, name string) *Lock
		hold    []string // a raw holder in the way, for the wait: acquire ..., release ...
		free    []string
	}
	plainHold := []string{"LOCK.ACQUIRE", "", "other:1", "10000"}
	plainFree := []string{"LOCK.UNLOCK", "", "other:1"}
	kinds := []kind{
		{"plain", "LOCK.ACQUIRE", func(c *Client, n string) *Lock { return c.Lock(n) }, plainHold, plainFree},
		{"fenced", "LOCK.ACQUIRE", func(c *Client, n string) *Lock { return c.Lock(n, WithFenced()) }, plainHold, plainFree},
		{"nonreentrant", "LOCK.ACQUIRE", func(c *Client, n string) *Lock { return c.Lock(n, WithNonReentrant()) }, plainHold, plainFree},
		{"session", "LOCK.ACQUIRE", func(c *Client, n string) *Lock { return c.Lock(n, WithSession()) }, plainHold, plainFree},
		{"read", "RWLOCK.READ", func(c *Client, n string) *Lock { return c.ReadWriteLock(n).Read() },
			[]string{"RWLOCK.WRITE", "", "other:1", "10000"}, []string{"RWLOCK.UNLOCK", "", "other:1", "WRITE"}},
		{"write", "RWLOCK.WRITE", func(c *Client, n string) *Lock { return c.ReadWriteLock(n, WithFenced()).Write() },
			[]string{"RWLOCK.WRITE", "", "other:1", "10000"}, []string{"RWLOCK.UNLOCK", "", "other:1", "WRITE"}},
		{"fair", "FAIRLOCK.ACQUIRE", func(c *Client, n string) *Lock { return c.FairLock(n) },
			[]string{"FAIRLOCK.ACQUIRE", "", "other:1", "10000"}, []string{"FAIRLOCK.UNLOCK", "", "other:1"}},
	}
	raw := func(words []string, name string) []any {
		args := make([]any, len(words))
		for i, w := range words {
			args[i] = w
		}
		args[1] = name
		return args
	}
	for _, k := range kinds {
		for _, waiting := range []bool{false, true} {
			name := "lost:" + k.name
			if waiting {
				name += ":wait"
			}
			t.Run(name, func(t *testing.T) {
				p := startProxy(t, s.addr(), k.command, false)
				c := proxiedClient(t, p, 0)
				l := k.make(c, name)
				opts := []AcquireOption{WithWait(0)}
				// When the holder's release was sent: the waiter cannot be
				// served before it, however slow the machine.
				freeing := make(chan time.Time, 1)
				if waiting {
					s.do(t, raw(k.hold, name)...)
					go func() {
						time.Sleep(300 * time.Millisecond)
						freeing <- time.Now()
						s.do(t, raw(k.free, name)...)
					}()
					opts = []AcquireOption{WithWait(5 * time.Second)}
				}
				s.do(t, "CONFIG", "RESETSTAT")
				ok, err := l.Acquire(bg, opts...)
				served := time.Now()
				if err != nil || !ok {
					t.Fatalf("acquire: %v %v", ok, err)
				}
				// After the resend, one PEXPIRE of its latch on the new
				// connection, for the replica check's WAIT to cover the grant.
				if got := s.info(t, "commandstats", "cmdstat_pexpire"); !strings.HasPrefix(got, "calls=1,") {
					t.Fatalf("pexpire stats %q", got)
				}
				if !p.fired.Load() {
					t.Fatal("the proxy lost no reply")
				}
				if waiting {
					select {
					case at := <-freeing:
						if served.Before(at) {
							t.Fatalf("served %v before the holder left", at.Sub(served))
						}
					default:
						t.Fatal("served before the holder left")
					}
				}
				// Exactly one hold (a session's: once the server saw the
				// first connection close, which frees what it took).
				field := l.Owner()
				if k.name == "write" {
					field += ":write" // Redisson's write hold field
				}
				deadline := time.Now().Add(2 * time.Second)
				for s.do(t, "HGET", name, field) != "1" && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if got := s.do(t, "HGET", name, field); got != "1" {
					t.Fatalf("hold count %v", got)
				}
				if k.name == "fenced" || k.name == "write" {
					token, has := l.Token()
					if got := s.do(t, "GET", "redisson_lock_token:{"+name+"}"); !has || fmt.Sprint(token) != got {
						t.Fatalf("token %d %v, the server issued up to %v", token, has, got)
					}
				}
				if k.name == "session" {
					if got := s.info(t, "rwlock_sessions", "rwlock_session_holds"); got != "1" {
						t.Fatalf("session holds %s", got)
					}
				}
				mustRelease(t, l)
				if got := s.do(t, "EXISTS", name); got != int64(0) {
					t.Fatal("one release left a hold")
				}
				// The release's DEL took the acquisition's latch too. A
				// session's two sends each took a hold (the first freed with
				// its connection) under an id of its own; its release sends
				// no DEL, and the latches expire.
				want := 0
				if k.name == "session" {
					want = 2
				}
				if got := s.do(t, "KEYS", "redisson_lock_request_latch:{"+name+"}:*"); len(got.([]any)) != want {
					t.Fatalf("latches left: %v, want %d", got, want)
				}
			})
		}
	}
}

// TestRequestSent: an acquisition sends REQUEST (its latch is on the server
// while held, with Redisson's 13.5 s), a multi-lock's does not, and a read
// timeout (the reply withheld, the connection left open) is retried too.
func TestRequestSent(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	l := c.Lock("req:plain", WithFenced())
	mustAcquire(t, l, WithWait(0), WithLease(5*time.Second))
	keys, _ := s.do(t, "KEYS", "redisson_lock_request_latch:*").([]any)
	if len(keys) != 1 || !strings.HasPrefix(keys[0].(string), "redisson_lock_request_latch:{req:plain}:") {
		t.Fatalf("latches %v", keys)
	}
	if pttl, _ := s.do(t, "PTTL", keys[0]).(int64); pttl <= 12000 || pttl > 13500 {
		t.Fatalf("latch pttl %d", pttl)
	}
	token, _ := l.Token()
	if got := s.do(t, "GET", keys[0]); got != fmt.Sprint(token) {
		t.Fatalf("latch %v, token %d", got, token)
	}
	mustRelease(t, l)
	m := c.MultiLock([]Hold{{KindLock, "{req}:a"}, {KindWrite, "{req}:b"}})
	mustAcquire(t, m, WithWait(0), WithLease(5*time.Second))
	if got := s.do(t, "KEYS", "redisson_lock_request_latch:*"); len(got.([]any)) != 0 {
		t.Fatalf("a multi-lock left latches %v", got)
	}
	mustRelease(t, m)

	// A read timeout (300 ms) instead of a closed connection.
	p := startProxy(t, s.addr(), "RWLOCK.WRITE", true)
	pc := proxiedClient(t, p, 300*time.Millisecond)
	w := pc.ReadWriteLock("req:stall").Write()
	mustAcquire(t, w, WithWait(0))
	if !p.fired.Load() {
		t.Fatal("the proxy withheld no reply")
	}
	if got := s.do(t, "HGET", "req:stall", w.Owner()+":write"); got != "1" {
		t.Fatalf("hold count %v", got)
	}
	mustRelease(t, w)
	if got := s.do(t, "EXISTS", "req:stall"); got != int64(0) {
		t.Fatal("one release left a hold")
	}
	// A context ended is not a lost reply: no resend.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := w.Acquire(ctx, WithWait(0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestLostReleaseReplies: a release's reply is lost once and the client
// resends it with the same request id, answered from the server's latch as
// the first send was. A last hold held: released, once. A re-entered hold:
// one hold left. A hold already gone (its key deleted) before the release:
// NotHeld, though the first send's pipeline ran too (the resend must not
// guess "the first send released it"). The release's own latch is not in
// its own DEL: it stays (13.5 s at most) until the handle's next release.
// The resend is go-redis's own (its default MaxRetries) or, with go-redis
// retries off (MaxRetries -1, as the safety suite runs), the package's.
func TestLostReleaseReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	latches := func(t *testing.T, name string) []any {
		t.Helper()
		keys, _ := s.do(t, "KEYS", "redisson_unlock_latch:{"+name+"}:*").([]any)
		return keys
	}
	type lost struct {
		name    string
		holds   int  // acquisitions before the release
		gone    bool // the lock key deleted before the release
		retries int  // go-redis's MaxRetries (0: its default)
	}
	var cases []lost
	for _, retries := range []int{0, -1} {
		cases = append(cases,
			lost{"held", 1, false, retries}, lost{"reentered", 2, false, retries}, lost{"gone", 1, true, retries})
	}
	for _, tc := range cases {
		name := fmt.Sprintf("lostrelease:%s:%d", tc.name, tc.retries)
		t.Run(name, func(t *testing.T) {
			p := startProxy(t, s.addr(), "LOCK.UNLOCK", false)
			rdb := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: tc.retries})
			c, err := New(rdb)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
			l := c.Lock(name)
			for i := 0; i < tc.holds; i++ {
				mustAcquire(t, l, WithWait(0), WithLease(10*time.Second))
			}
			if tc.gone {
				s.do(t, "DEL", name)
			}
			err = l.Release(bg)
			if !p.fired.Load() {
				t.Fatal("the proxy lost no reply")
			}
			switch {
			case tc.gone:
				if !errors.Is(err, ErrNotHeld) {
					t.Fatalf("release of a hold gone, reply lost: %v, want ErrNotHeld", err)
				}
				if l.Held() {
					t.Fatal("the handle still holds")
				}
			case err != nil:
				t.Fatalf("release, reply lost: %v", err)
			}
			want := any(nil)
			if tc.holds == 2 {
				want = "1"
			}
			if got := s.do(t, "HGET", name, l.Owner()); got != want {
				t.Fatalf("hold count %v, want %v", got, want)
			}
			// A release that found nothing held records no latch: the
			// resend found none either and replied "not held" again.
			first := latches(t, name)
			if tc.gone {
				if len(first) != 0 {
					t.Fatalf("latches after a release of nothing: %v", first)
				}
				return
			}
			if len(first) != 1 {
				t.Fatalf("latches after the release: %v", first)
			}
			if pttl, _ := s.do(t, "PTTL", first[0]).(int64); pttl <= 0 || pttl > 13500 {
				t.Fatalf("latch pttl %d", pttl)
			}
			// The handle's next cycle deletes the first release's latch
			// and keeps its own.
			for l.Held() {
				mustRelease(t, l)
			}
			mustAcquire(t, l, WithWait(0), WithLease(10*time.Second))
			mustRelease(t, l)
			if got := s.do(t, "EXISTS", name); got != int64(0) {
				t.Fatal("a hold left")
			}
			if got := s.do(t, "EXISTS", first[0]); got != int64(0) {
				t.Fatalf("the first release's latch %v outlived the next release", first[0])
			}
			if got := latches(t, name); len(got) != 1 {
				t.Fatalf("latches after the next cycle: %v", got)
			}
		})
	}
}

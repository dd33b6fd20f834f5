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
// the acquisition's reply is lost once; the client resends the same command
// (HELD 0: the count before; a session's without HELD, and what is left of
// a wait), the acquisition succeeds, and the server holds exactly one hold
// (a fenced one: the token it issued once). No PEXPIRE follows the resend
// (the server's replay replicates a write of its own) and no latch is
// written. One release frees it.
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
				monitor := startMonitor(t, s)
				s.do(t, "CONFIG", "RESETSTAT")
				ok, err := l.Acquire(bg, opts...)
				served := time.Now()
				if err != nil || !ok {
					t.Fatalf("acquire: %v %v", ok, err)
				}
				if got := s.info(t, "commandstats", "cmdstat_pexpire"); got != "" {
					t.Fatalf("pexpire stats %q", got)
				}
				if !p.fired.Load() {
					t.Fatal("the proxy lost no reply")
				}
				// The first send and the resend, the same but for what is
				// left of a wait.
				var sent []string
				for _, cmd := range monitor.locks(t) {
					if strings.Contains(cmd, l.Owner()) {
						sent = append(sent, cmd)
					}
				}
				if len(sent) != 2 {
					t.Fatalf("sent %q, want the first send and one resend", sent)
				}
				for _, cmd := range sent {
					if held := strings.HasSuffix(cmd, " HELD 0"); held == (k.name == "session") {
						t.Fatalf("sent %q (a session's sends no HELD, the others HELD 0)", cmd)
					}
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
				deadline := time.Now().Add(15 * time.Second)
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
				if got := s.do(t, "KEYS", "redisson_*latch*"); len(got.([]any)) != 0 {
					t.Fatalf("latches %v", got)
				}
			})
		}
	}
}

// TestHeldSent: a single lock's acquisition and release carry HELD and
// write nothing but the lock, a multi-lock's and a session's carry none,
// and a read timeout (the reply withheld, the connection left open) is
// resent too.
func TestHeldSent(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, _ := newClient(t, s)
	monitor := startMonitor(t, s)
	l := c.Lock("held:sent", WithFenced())
	mustAcquire(t, l, WithWait(0), WithLease(5*time.Second))
	if keys, _ := s.do(t, "KEYS", "*").([]any); len(keys) != 2 { // the lock and its fencing counter
		t.Fatalf("keys %v", keys)
	}
	mustRelease(t, l)
	m := c.MultiLock([]Hold{{KindLock, "{req}:a"}, {KindWrite, "{req}:b"}})
	mustAcquire(t, m, WithWait(0), WithLease(5*time.Second))
	mustRelease(t, m)
	session := c.Lock("held:session", WithSession())
	mustAcquire(t, session, WithWait(0))
	mustAcquire(t, session, WithWait(0))
	mustRelease(t, session)
	mustRelease(t, session)
	want := []string{
		"LOCK.ACQUIRE held:sent " + l.Owner() + " 5000 FENCED HELD 0",
		"LOCK.UNLOCK held:sent " + l.Owner() + " LEASE 5000",
		"LOCK.ACQUIREALL " + m.Owner() + " 5000 HOLDS 2 LOCK {req}:a WRITE {req}:b",
		"LOCK.UNLOCKALL " + m.Owner() + " HOLDS 2 LOCK {req}:a WRITE {req}:b",
		"LOCK.ACQUIRE held:session " + session.Owner() + " 30000 SESSION",
		"LOCK.ACQUIRE held:session " + session.Owner() + " 30000 SESSION",
		"LOCK.UNLOCK held:session " + session.Owner() + " LEASE 30000",
		"LOCK.UNLOCK held:session " + session.Owner() + " LEASE 30000",
	}
	if got := monitor.locks(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if keys, _ := s.do(t, "KEYS", "*").([]any); len(keys) != 1 { // the fencing counter
		t.Fatalf("keys %v", keys)
	}

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

// TestLostReleaseReplies: a release's reply is lost once and the package
// resends the same command (HELD, the count before) once, on a connection
// of its own; go-redis never resends it, whatever its MaxRetries (its
// default, or -1 as the safety suite runs). A re-entered hold: the resend
// is answered as the first send was (released, one hold left). A last hold
// held: the first send freed it, and the resend, finding nothing, cannot
// tell that from a hold gone before: ErrReleaseUnknown, the lock free. A
// last hold gone before the release (its key deleted): ErrReleaseUnknown
// too (never NotHeld: the first send might have freed it). A re-entered
// hold gone: the resend's "not held" is ErrNotHeld (a first send that
// released would have left one hold, and the resend would be answered
// from it). Never "released" from a resend's "not held".
func TestLostReleaseReplies(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	type lost struct {
		name    string
		holds   int   // acquisitions before the release
		gone    bool  // the lock key deleted before the release
		want    error // nil: released
		retries int   // go-redis's MaxRetries (0: its default)
	}
	var cases []lost
	for _, retries := range []int{0, -1} {
		cases = append(cases,
			lost{"held", 1, false, ErrReleaseUnknown, retries}, lost{"reentered", 2, false, nil, retries},
			lost{"gone", 1, true, ErrReleaseUnknown, retries}, lost{"reenteredgone", 2, true, ErrNotHeld, retries})
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
				mustAcquire(t, l, WithWait(0)) // the watchdog's lease: stopped when the handle holds nothing
			}
			if tc.gone {
				s.do(t, "DEL", name)
			}
			s.do(t, "CONFIG", "RESETSTAT")
			err = l.Release(bg)
			if !p.fired.Load() {
				t.Fatal("the proxy lost no reply")
			}
			if got := s.info(t, "commandstats", "cmdstat_lock.unlock"); !strings.HasPrefix(got, "calls=2,") {
				t.Fatalf("unlock stats %q, want the first send and one resend", got)
			}
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("release, reply lost: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("release, reply lost: %v, want %v", err, tc.want)
			case errors.Is(err, ErrReleaseUnknown) && errors.Is(err, ErrNotHeld):
				t.Fatalf("%v is NotHeld too", err)
			}
			want := any(nil)
			if tc.name == "reentered" {
				want = "1"
			}
			if got := s.do(t, "HGET", name, l.Owner()); got != want {
				t.Fatalf("hold count %v, want %v", got, want)
			}
			if l.Held() != (want != nil) {
				t.Fatalf("the handle holds %v, the server %v", l.Held(), want)
			}
			if want == nil {
				select {
				case <-l.Done():
				default:
					t.Fatal("the hold did not end on the handle")
				}
			}
			for l.Held() {
				mustRelease(t, l)
			}
			// The handle's count is the server's again: a next cycle frees it.
			mustAcquire(t, l, WithWait(0), WithLease(10*time.Second))
			mustRelease(t, l)
			if got := s.do(t, "EXISTS", name); got != int64(0) {
				t.Fatal("a hold left")
			}
		})
	}
}

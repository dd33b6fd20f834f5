package rwlock

// Real servers for the tests: redis-server processes with the module
// loaded, on free 127.0.0.1 ports, each in a temp dir, stopped by its own
// PID when the test ends.
//
// RWLOCK_REDIS_SERVER: the server binary (default redis-server on PATH).
// RWLOCK_MODULE: the module (default <repo>/target/release/librwlock.so). A
// missing one fails the tests, never skips them.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	startTimeout = 10 * time.Second
	stopTimeout  = 5 * time.Second
)

func serverBinary(t testing.TB) string {
	if s := os.Getenv("RWLOCK_REDIS_SERVER"); s != "" {
		return s
	}
	s, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("no redis-server: install it or set RWLOCK_REDIS_SERVER")
	}
	return s
}

func modulePath(t testing.TB) string {
	p := os.Getenv("RWLOCK_MODULE")
	if p == "" {
		abs, err := filepath.Abs("../../../target/release/librwlock.so")
		if err != nil {
			t.Fatal(err)
		}
		p = abs
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		t.Fatalf("no module at %s: cargo build --release, or set RWLOCK_MODULE", p)
	}
	return p
}

// freePort is a port free now (and port+10000 too, for a cluster's bus).
func freePort(t testing.TB, bus bool) int {
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		b, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000))
		if err != nil {
			continue
		}
		_ = b.Close()
		return port
	}
	t.Fatal("no free port")
	return 0
}

// server is one redis-server with the module.
type server struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

func startServer(t testing.TB, args ...string) *server { return start(t, false, args...) }

func start(t testing.TB, cluster bool, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{t: t, port: freePort(t, cluster), dir: dir, done: make(chan struct{})}
	argv := []string{
		"--port", fmt.Sprint(s.port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--loadmodule", modulePath(t),
	}
	if cluster {
		argv = append(argv, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	}
	argv = append(argv, args...)
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.log = log
	s.cmd = exec.Command(serverBinary(t), argv...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("redis-server exited: %s", s.readLog())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %s", s.readLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// client is a go-redis client of the server (RESP2, so replies read as the
// scenarios write them).
func (s *server) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr(), Protocol: 2, ReadTimeout: 10 * time.Second, MaxRetries: -1})
}

func (s *server) readLog() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func (s *server) signal(sig syscall.Signal) {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

func (s *server) pause()  { s.signal(syscall.SIGSTOP) }
func (s *server) resume() { s.signal(syscall.SIGCONT) }

// stop: SIGCONT (it may be paused), SIGTERM, SIGKILL if it lingers; by PID.
func (s *server) stop() {
	select {
	case <-s.done:
	default:
		s.resume()
		s.signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(stopTimeout):
			s.signal(syscall.SIGKILL)
			<-s.done
		}
	}
	_ = s.log.Close()
}

// do runs one command on a fresh connection of the test's own.
func (s *server) do(t testing.TB, args ...any) any {
	t.Helper()
	c := s.client()
	defer c.Close()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// left is the server's keys: a lock's acquisitions and releases write
// none of their own (HELD), so a lock released leaves nothing.
func (s *server) left(t testing.TB) []any {
	t.Helper()
	keys, _ := s.do(t, "KEYS", "*").([]any)
	return keys
}

// acknowledged is whether a replica acknowledges what this master streams
// now. A replica reports its link up once it has loaded the master's data,
// but after a diskless sync the master streams to it only from its first
// acknowledgement, up to a second later: a WAIT meanwhile lasts that long,
// and an acquisition on a loaded machine fails with NotSynced. The probe is
// a PUBLISH (replicated, writing no key) and WAIT on the same connection.
func (s *server) acknowledged(t testing.TB) bool {
	t.Helper()
	c := s.client()
	defer c.Close()
	ctx := context.Background()
	pipe := c.Pipeline()
	pipe.Publish(ctx, "__rwlock_test_replica", "probe")
	acked := pipe.Do(ctx, "WAIT", 1, 100)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("replica probe: %v", err)
	}
	n, _ := acked.Int64()
	return n >= 1
}

// info is one field of INFO.
func (s *server) info(t testing.TB, section, field string) string {
	t.Helper()
	args := []any{"INFO", section}
	if section == "cluster" { // INFO's cluster section has cluster_enabled only
		args = []any{"CLUSTER", "INFO"}
	}
	text, _ := s.do(t, args...).(string)
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			return v
		}
	}
	return ""
}

// newClient is an rwlock Client over a fresh go-redis client of s.
func newClient(t testing.TB, s *server, opts ...ClientOption) (*Client, *redis.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr()})
	c, err := New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
	return c, rdb
}

// impatientClient is an rwlock Client whose go-redis client reads with a
// 300 ms timeout: the waits on the server must outlast it.
func impatientClient(t testing.TB, s *server) *Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), ReadTimeout: 300 * time.Millisecond})
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
	return c
}

// monitor is a MONITOR connection to a server: what it ran, in order.
type monitor struct {
	s    *server
	conn net.Conn
	r    *bufio.Reader
}

func startMonitor(t testing.TB, s *server) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", s.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	m := &monitor{s: s, conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := m.r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	return m
}

// monitorArg is one quoted argument of a MONITOR line.
var monitorArg = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// locks is the lock commands (LOCK.*, RWLOCK.*, FAIRLOCK.*) the server ran
// since the last call, each as its words joined by spaces: the feed is
// read up to an ECHO sent now, which the server runs after them.
func (m *monitor) locks(t testing.TB) []string {
	t.Helper()
	marker := fmt.Sprintf("monitor-mark-%d", time.Now().UnixNano())
	m.s.do(t, "ECHO", marker)
	if err := m.conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		line, err := m.r.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR feed: %v (so far %v)", err, got)
		}
		var words []string
		for _, q := range monitorArg.FindAllString(line, -1) {
			w, err := strconv.Unquote(q)
			if err != nil {
				t.Fatalf("MONITOR line %q: %v", line, err)
			}
			words = append(words, w)
		}
		if len(words) == 0 {
			continue
		}
		if strings.EqualFold(words[0], "ECHO") && len(words) == 2 && words[1] == marker {
			return got
		}
		name := strings.ToUpper(words[0])
		if strings.HasPrefix(name, "LOCK.") || strings.HasPrefix(name, "RWLOCK.") || strings.HasPrefix(name, "FAIRLOCK.") {
			got = append(got, strings.Join(words, " "))
		}
	}
}

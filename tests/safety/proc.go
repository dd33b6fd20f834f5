package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// procs is every server process the harness started, so that stopAll can
// end them by PID on any exit path (a failed check, a panic, a signal).
var procs = struct {
	sync.Mutex
	list []*process
}{}

// process is one redis-server (node or Sentinel) the harness started.
type process struct {
	name string
	port int
	dir  string
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when the current incarnation's Wait returned.
	exited chan struct{}
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the process (again, after a kill) with its arguments and
// waits until it answers PING.
func (p *process) start(server string, extra ...string) error {
	p.mu.Lock()
	args := append(append([]string{}, p.args...), extra...)
	// Not niced: on a machine kept busy at normal priority a niced server
	// and its Sentinels get a sliver of a core, Sentinel's 1 s down-after
	// then fires on starvation (spurious failovers) and a restarted node's
	// full sync outlasts the health ceiling.
	cmd := exec.Command(server, args...)
	cmd.Dir = p.dir
	log, err := os.OpenFile(filepath.Join(p.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	// The server dies with the harness even when the harness is killed
	// (SIGKILL leaves no deferred cleanup): the kernel sends it SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		log.Close()
		return err
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	return p.waitPing(30 * time.Second)
}

// waitPing waits until the server answers PING (or fails when it exited).
func (p *process) waitPing(ceiling time.Duration) error {
	deadline := time.Now().Add(ceiling)
	c := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	for time.Now().Before(deadline) {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start; see %s", p.name, filepath.Join(p.dir, "server.log"))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: no PONG within %s", p.name, ceiling)
}

func (p *process) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the running incarnation, by PID.
func (p *process) signal(sig syscall.Signal) error {
	if !p.running() {
		return fmt.Errorf("%s: not running", p.name)
	}
	return syscall.Kill(p.pid(), sig)
}

// running is whether the current incarnation has not exited (so its PID is
// still its own, never a reused one).
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill9 kills the running incarnation and waits for it to be gone.
func (p *process) kill9() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: still running 30 s after SIGKILL", p.name)
	}
}

// stopAll kills every process started, stopped ones too (SIGKILL ends a
// stopped process; SIGCONT first would let it run a little).
func stopAll() {
	procs.Lock()
	list := procs.list
	procs.list = nil
	procs.Unlock()
	for _, p := range list {
		if p.running() {
			_ = p.kill9()
		}
	}
}

func register(p *process) {
	procs.Lock()
	procs.list = append(procs.list, p)
	procs.Unlock()
}

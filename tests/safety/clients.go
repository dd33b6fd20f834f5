package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The other four clients' default paths: each worker runs one driver
// program of its own (tests/safety/drivers, clients/rust/examples) that
// finds the master through Sentinel with its language's Redis library and
// takes locks of the kind asked (fenced, and the kind clientkinds.go's
// rotation gives the mode) with the package's default options, answering
// JSON lines on stdin/stdout.
const (
	ModePyClient   = "pyclient"
	ModeNodeClient = "nodeclient"
	ModeJavaClient = "javaclient"
	ModeRustClient = "rustclient"
)

// driverModes maps each driver mode to the variable holding its command
// (set by the Makefile, which builds what it runs).
var driverModes = map[string]string{
	ModePyClient:   "SAFETY_PYCLIENT",
	ModeNodeClient: "SAFETY_NODECLIENT",
	ModeJavaClient: "SAFETY_JAVACLIENT",
	ModeRustClient: "SAFETY_RUSTCLIENT",
}

// driverCeiling bounds the wait for one reply. Each driver's own timeouts
// (the connections' 6 s, the packages' reply margins, a resend) end a
// request long before; a driver silent this long is stuck, and is killed
// and started again (a new client object, as a restarted process).
const driverCeiling = 90 * time.Second

// driverRequest is one line the harness writes. A release repeats the
// acquisition's fields (a driver keeps its handle by owner; one started
// again after a crash has none, and answers notheld).
type driverRequest struct {
	Op    string `json:"op"` // acquire | release
	Kind  string `json:"kind"`
	Lock  string `json:"lock"`
	Owner string `json:"owner"`
	// Side: a read-write lock's "read" or "write" (kind rw).
	Side string `json:"side,omitempty"`
	// Locks: a multi-lock's locks (kind multi; Lock is the first).
	Locks   []string `json:"locks,omitempty"`
	LeaseMs int64    `json:"lease_ms,omitempty"`
	// WaitMs: > 0, the package's waiting acquisition (kinds fair, block).
	WaitMs int64 `json:"wait_ms,omitempty"`
}

// driverReply is one line a driver answers: acquire -> granted (token,
// owner: the package's owner on the server) | refused | notsynced | maybe;
// release -> released | notheld | maybe. detail says why.
type driverReply struct {
	Outcome string `json:"outcome"`
	Token   int64  `json:"token"`
	Owner   string `json:"owner"`
	Detail  string `json:"detail"`
}

// driverPath is one worker's driver process.
type driverPath struct {
	mode    string
	argv    []string
	env     []string
	logPath string

	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan string
	quit    chan struct{} // closed by stop: replies nobody waits for are dropped
	exited  chan struct{}
}

// newDriverPath prepares a worker's driver (started at its first request):
// the Sentinels, the master's name, and how this client group reaches each
// node (announced address -> the group's proxy).
func newDriverPath(t *topology, group int, mode string, worker int, root string) (*driverPath, error) {
	variable := driverModes[mode]
	command := strings.Fields(os.Getenv(variable))
	if len(command) == 0 {
		return nil, fmt.Errorf("mode %s: set %s to its driver's command (make test-safety sets it)", mode, variable)
	}
	var sentinels, nat []string
	for _, s := range t.sentinels {
		sentinels = append(sentinels, s.addr())
	}
	for _, n := range t.nodes {
		nat = append(nat, n.repl.addr()+"="+n.clients[group].addr())
	}
	env := append(os.Environ(),
		"SAFETY_SENTINELS="+strings.Join(sentinels, ","),
		"SAFETY_MASTER_NAME="+masterName,
		"SAFETY_NAT="+strings.Join(nat, ","),
		fmt.Sprintf("SAFETY_TIMEOUT_MS=%d", readTimeout.Milliseconds()),
	)
	return &driverPath{mode: mode, argv: command, env: env,
		logPath: filepath.Join(root, fmt.Sprintf("driver-%s-%d.log", mode, worker))}, nil
}

func (p *driverPath) start() error {
	log, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = p.env
	cmd.Stderr = log
	// The driver dies with the harness, as the servers do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		log.Close()
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		log.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	replies := make(chan string)
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 64*1024), 1<<20)
		for scanner.Scan() {
			select {
			case replies <- scanner.Text():
			case <-quit:
			}
		}
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	p.cmd, p.stdin, p.replies, p.quit, p.exited = cmd, stdin, replies, quit, exited
	return nil
}

// stop ends the driver: EOF on its stdin, then SIGKILL (by its PID) if it
// has not exited within the ceiling.
func (p *driverPath) stop(ceiling time.Duration) {
	if p.cmd == nil {
		return
	}
	close(p.quit)
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(ceiling):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

// call sends one request and reads its reply. A driver that died or went
// silent is stopped; the operation is indeterminate, and the next request
// starts a new driver.
func (p *driverPath) call(req driverRequest) (driverReply, error) {
	if p.cmd == nil {
		if err := p.start(); err != nil {
			return driverReply{}, fmt.Errorf("starting the driver: %w", err)
		}
	}
	line, _ := json.Marshal(req)
	if _, err := p.stdin.Write(append(line, '\n')); err != nil {
		p.stop(0)
		return driverReply{}, fmt.Errorf("driver: %w (log %s)", err, p.logPath)
	}
	select {
	case text := <-p.replies:
		var reply driverReply
		if err := json.Unmarshal([]byte(text), &reply); err != nil {
			return driverReply{}, fmt.Errorf("driver replied %q: %w", text, err)
		}
		return reply, nil
	case <-p.exited:
		p.stop(0)
		return driverReply{}, fmt.Errorf("driver exited (log %s)", p.logPath)
	case <-time.After(driverCeiling):
		p.stop(0)
		return driverReply{}, fmt.Errorf("driver silent for %s, killed (log %s)", driverCeiling, p.logPath)
	}
}

func (p *driverPath) close() { p.stop(30 * time.Second) }

// acquire: the package's own answer. NotSynced and an error are
// indeterminate: the package released an unacknowledged grant itself (or
// the master refused to write), but that release may have failed, and an
// error may have left a hold; the worker then releases until a reply says,
// and the driver asks the server.
func (p *driverPath) acquire(_ context.Context, lock, owner string, lease time.Duration) (Outcome, int64, bool, string) {
	out, token, detail := p.acquireWith(driverRequest{Op: "acquire", Kind: KindFenced, Lock: lock, Owner: owner, LeaseMs: lease.Milliseconds()})
	return out, token, false, detail
}

func (p *driverPath) acquireWith(req driverRequest) (Outcome, int64, string) {
	reply, err := p.call(req)
	if err != nil {
		return Maybe, 0, err.Error()
	}
	switch reply.Outcome {
	case "granted":
		return Granted, reply.Token, "owner " + reply.Owner
	case "refused":
		return Refused, 0, reply.Detail
	case "notsynced":
		return Maybe, 0, "NotSynced: " + reply.Detail
	case "maybe":
		return Maybe, 0, reply.Detail
	}
	return Maybe, 0, fmt.Sprintf("unexpected driver reply %+v", reply)
}

// kindRequestOf is a client kind's attempt as the drivers read it.
func kindRequestOf(op string, req kindRequest) driverRequest {
	r := driverRequest{Op: op, Kind: req.kind, Lock: req.holds[0].lock, Owner: req.owner}
	if op == "acquire" {
		r.LeaseMs, r.WaitMs = req.lease.Milliseconds(), req.wait.Milliseconds()
	}
	switch req.kind {
	case KindRW:
		r.Side = "write"
		if req.holds[0].role == RoleRead {
			r.Side = "read"
		}
	case KindMulti:
		for _, h := range req.holds {
			r.Locks = append(r.Locks, h.lock)
		}
	}
	return r
}

func (p *driverPath) acquireKind(_ context.Context, req kindRequest) (Outcome, int64, string) {
	return p.acquireWith(kindRequestOf("acquire", req))
}

func (p *driverPath) releaseKind(_ context.Context, req kindRequest) (Outcome, string) {
	return p.releaseWith(kindRequestOf("release", req))
}

func (p *driverPath) release(_ context.Context, lock, owner string) (Outcome, string) {
	return p.releaseWith(driverRequest{Op: "release", Kind: KindFenced, Lock: lock, Owner: owner})
}

func (p *driverPath) releaseWith(req driverRequest) (Outcome, string) {
	reply, err := p.call(req)
	if err != nil {
		return Maybe, err.Error()
	}
	switch reply.Outcome {
	case "released":
		return Released, ""
	case "notheld":
		return NotHeld, reply.Detail
	case "maybe":
		return Maybe, reply.Detail
	}
	return Maybe, fmt.Sprintf("unexpected driver reply %+v", reply)
}

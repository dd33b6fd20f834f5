package rwlock

// The shared scenarios (../../contract/scenarios.json, or RWLOCK_SCENARIOS),
// run through this package's public API against one real server, as
// clients/contract/README.md describes. A step or field this runner does
// not know fails the scenario.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

type scenarioFile struct {
	Version   int        `json:"version"`
	Scenarios []scenario `json:"scenarios"`
}

type scenario struct {
	Name    string                       `json:"name"`
	Clients map[string]scenarioClient    `json:"clients"`
	Locks   map[string]scenarioLock      `json:"locks"`
	Steps   []map[string]json.RawMessage `json:"steps"`
}

type scenarioClient struct {
	WatchdogTimeoutMs *int64 `json:"watchdog_timeout_ms"`
	SocketTimeoutMs   *int64 `json:"socket_timeout_ms"`
}

type scenarioLock struct {
	Client  string     `json:"client"`
	Kind    string     `json:"kind"`
	Name    string     `json:"name"`
	Session bool       `json:"session"`
	Holds   [][]string `json:"holds"`
}

func strictDecode(raw []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

func TestScenarios(t *testing.T) {
	t.Parallel()
	path := os.Getenv("RWLOCK_SCENARIOS")
	if path == "" {
		path = "../../contract/scenarios.json"
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file scenarioFile
	if err := strictDecode(raw, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if file.Version != 1 || len(file.Scenarios) == 0 {
		t.Fatalf("%s: version %d with %d scenarios: this runner reads version 1", path, file.Version, len(file.Scenarios))
	}
	s := startServer(t)
	for _, sc := range file.Scenarios {
		t.Run(sc.Name, func(t *testing.T) { runScenario(t, s, sc) })
	}
}

// run is one scenario's state.
type run struct {
	t      *testing.T
	s      *server
	raw    *redis.Client
	locks  map[string]*Lock
	sems   map[string]*Semaphore
	pes    map[string]*PermitExpirableSemaphore
	ids    map[string][]string        // the permit ids acquisitions saved, by name
	counts map[string]*CountDownLatch // the latches
	saved  map[string]any
	laters sync.WaitGroup
	mu     sync.Mutex
	failed []string // the later steps' failures
}

func runScenario(t *testing.T, s *server, sc scenario) {
	r := &run{t: t, s: s, raw: s.client(), locks: map[string]*Lock{}, sems: map[string]*Semaphore{},
		pes: map[string]*PermitExpirableSemaphore{}, ids: map[string][]string{},
		counts: map[string]*CountDownLatch{}, saved: map[string]any{}}
	defer r.raw.Close()
	ctx := context.Background()
	if err := r.raw.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.raw.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	clients := map[string]*Client{}
	for name, cfg := range sc.Clients {
		opt := &redis.Options{Addr: s.addr()}
		if cfg.SocketTimeoutMs != nil {
			opt.ReadTimeout = time.Duration(*cfg.SocketTimeoutMs) * time.Millisecond
		}
		rdb := redis.NewClient(opt)
		var opts []ClientOption
		if cfg.WatchdogTimeoutMs != nil {
			opts = append(opts, WithWatchdogTimeout(time.Duration(*cfg.WatchdogTimeoutMs)*time.Millisecond))
		}
		c, err := New(rdb, opts...)
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = c
		defer func() { _ = c.Close(); _ = rdb.Close() }()
	}
	rws := map[string]*ReadWriteLock{}
	for name, spec := range sc.Locks {
		c, ok := clients[spec.Client]
		if !ok {
			t.Fatalf("lock %s: unknown client %q", name, spec.Client)
		}
		var opts []LockOption
		if spec.Session {
			opts = append(opts, WithSession())
		}
		if spec.Kind != "multi" && spec.Holds != nil {
			t.Fatalf("lock %s: holds on a %s lock", name, spec.Kind)
		}
		switch spec.Kind {
		case "plain":
			r.locks[name] = c.Lock(spec.Name, opts...)
		case "fenced":
			r.locks[name] = c.Lock(spec.Name, append(opts, WithFenced())...)
		case "nonreentrant":
			r.locks[name] = c.Lock(spec.Name, append(opts, WithNonReentrant())...)
		case "fair":
			if spec.Session {
				t.Fatalf("lock %s: a fair lock takes no session holds", name)
			}
			r.locks[name] = c.FairLock(spec.Name, opts...)
		case "read", "write":
			key := spec.Client + "\x00" + spec.Name
			rw, ok := rws[key]
			if !ok {
				rw = c.ReadWriteLock(spec.Name, opts...)
				rws[key] = rw
			}
			if spec.Kind == "read" {
				r.locks[name] = rw.Read()
			} else {
				r.locks[name] = rw.Write()
			}
		case "semaphore", "permit", "latch":
			// Permits and latches have no owner, so no session holds yet.
			if spec.Session {
				t.Fatalf("lock %s: a %s takes no session", name, spec.Kind)
			}
			switch spec.Kind {
			case "semaphore":
				r.sems[name] = c.Semaphore(spec.Name)
			case "permit":
				r.pes[name] = c.PermitExpirableSemaphore(spec.Name)
			default:
				r.counts[name] = c.CountDownLatch(spec.Name)
			}
		case "multi":
			var holds []Hold
			for _, h := range spec.Holds {
				if len(h) != 2 {
					t.Fatalf("lock %s: a hold is [kind, name], not %v", name, h)
				}
				holds = append(holds, Hold{Kind: HoldKind(h[0]), Name: h[1]})
			}
			r.locks[name] = c.MultiLock(holds, opts...)
		default:
			t.Fatalf("lock %s: unknown kind %q", name, spec.Kind)
		}
	}
	defer func() {
		// Whatever a failed scenario left held: its watchdogs stop.
		for _, p := range r.pes {
			stopWatchdogs(p)
		}
		for _, l := range r.locks {
			for l.Held() {
				if l.Release(ctx) != nil {
					break
				}
			}
		}
	}()
	for i, step := range sc.Steps {
		if err := r.step(step); err != nil {
			r.laters.Wait()
			t.Fatalf("step %d %s: %v", i, compact(step), err)
		}
	}
	r.laters.Wait()
	if len(r.failed) > 0 {
		t.Fatalf("later steps: %s", strings.Join(r.failed, "; "))
	}
}

func compact(step map[string]json.RawMessage) string {
	b, _ := json.Marshal(step)
	return string(b)
}

// fields checks a step has only the given fields (besides its action).
func fields(step map[string]json.RawMessage, allowed ...string) error {
	for k := range step {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	return nil
}

func (r *run) lock(raw json.RawMessage) (*Lock, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return nil, err
	}
	l, ok := r.locks[name]
	if !ok {
		return nil, fmt.Errorf("unknown lock %q", name)
	}
	return l, nil
}

func (r *run) step(step map[string]json.RawMessage) error {
	ctx := context.Background()
	switch {
	case step["acquire"] != nil && r.sems[stepName(step["acquire"])] != nil:
		permits, opts, err := countedAcquire(step)
		if err != nil {
			return err
		}
		began := time.Now()
		ok, err := r.sems[stepName(step["acquire"])].Acquire(ctx, permits, opts...)
		return r.outcome(step, began, outcomeName(ok, err, "acquired", "refused"))
	case step["acquire"] != nil && r.pes[stepName(step["acquire"])] != nil:
		return r.acquirePermits(ctx, step)
	case step["acquire"] != nil:
		if err := fields(step, "acquire", "wait_ms", "lease_ms", "expect", "elapsed_ms", "save_token"); err != nil {
			return err
		}
		l, err := r.lock(step["acquire"])
		if err != nil {
			return err
		}
		opts, err := waitOf(step)
		if err != nil {
			return err
		}
		if opts, err = withLeaseOf(step, opts); err != nil {
			return err
		}
		began := time.Now()
		ok, err := l.Acquire(ctx, opts...)
		if err := r.outcome(step, began, outcomeName(ok, err, "acquired", "refused")); err != nil {
			return err
		}
		if raw := step["save_token"]; raw != nil {
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return err
			}
			token, has := l.Token()
			if !has {
				return errors.New("save_token: no token")
			}
			r.saved[name] = token
		}
		return nil
	case step["release"] != nil && r.sems[stepName(step["release"])] != nil:
		if err := fields(step, "release", "permits", "expect"); err != nil {
			return err
		}
		permits, err := intField(step, "permits", 1)
		if err != nil {
			return err
		}
		err = r.sems[stepName(step["release"])].Release(ctx, permits)
		return r.outcome(step, time.Now(), outcomeName(true, err, "ok", ""))
	case step["release"] != nil && r.pes[stepName(step["release"])] != nil:
		if err := fields(step, "release", "ids", "expect"); err != nil {
			return err
		}
		ids, err := r.savedIDs(step)
		if err != nil {
			return err
		}
		err = r.pes[stepName(step["release"])].Release(ctx, ids...)
		return r.outcome(step, time.Now(), outcomeName(true, err, "ok", ""))
	case step["release"] != nil:
		if err := fields(step, "release", "expect"); err != nil {
			return err
		}
		l, err := r.lock(step["release"])
		if err != nil {
			return err
		}
		return r.outcome(step, time.Now(), outcomeName(true, l.Release(ctx), "ok", ""))
	case step["held"] != nil, step["lost"] != nil:
		action := "held"
		if step["lost"] != nil {
			action = "lost"
		}
		if err := fields(step, action, "expect", "within_ms"); err != nil {
			return err
		}
		l, err := r.lock(step[action])
		if err != nil {
			return err
		}
		var expect bool
		if err := strictDecode(step["expect"], &expect); err != nil {
			return err
		}
		// within_ms: what the watchdog finds in the background, polled until it
		// is as expected.
		var within int64
		if raw := step["within_ms"]; raw != nil {
			if err := strictDecode(raw, &within); err != nil {
				return err
			}
		}
		view := func() bool {
			if action == "lost" {
				return l.Lost()
			}
			return l.Held()
		}
		deadline := time.Now().Add(time.Duration(within) * time.Millisecond)
		got := view()
		for got != expect && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			got = view()
		}
		if got != expect {
			return fmt.Errorf("%s: got %v, want %v (within %d ms)", action, got, expect, within)
		}
		return nil
	case step["token"] != nil:
		if err := fields(step, "token", "expect"); err != nil {
			return err
		}
		l, err := r.lock(step["token"])
		if err != nil {
			return err
		}
		var got any
		if token, has := l.Token(); has {
			got = token
		}
		return r.expect(got, nil, step["expect"])
	case step["redis"] != nil:
		if err := fields(step, "redis", "expect", "save"); err != nil {
			return err
		}
		reply, err := r.redis(ctx, r.raw, step["redis"])
		if err2 := r.expect(reply, err, step["expect"]); err2 != nil {
			return err2
		}
		if raw := step["save"]; raw != nil {
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return err
			}
			r.saved[name] = reply
		}
		return nil
	case step["later"] != nil:
		if err := fields(step, "later"); err != nil {
			return err
		}
		var later map[string]json.RawMessage
		if err := json.Unmarshal(step["later"], &later); err != nil {
			return err
		}
		if err := fields(later, "after_ms", "redis", "expect"); err != nil {
			return err
		}
		var after int64
		if err := json.Unmarshal(later["after_ms"], &after); err != nil {
			return err
		}
		conn := r.s.client()
		r.laters.Add(1)
		go func() {
			defer r.laters.Done()
			defer conn.Close()
			time.Sleep(time.Duration(after) * time.Millisecond)
			reply, err := r.redis(ctx, conn, later["redis"])
			if err := r.expect(reply, err, later["expect"]); err != nil {
				r.mu.Lock()
				r.failed = append(r.failed, fmt.Sprintf("%s: %v", compact(later), err))
				r.mu.Unlock()
			}
		}()
		return nil
	case step["sleep_ms"] != nil:
		if err := fields(step, "sleep_ms"); err != nil {
			return err
		}
		var ms int64
		if err := json.Unmarshal(step["sleep_ms"], &ms); err != nil {
			return err
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return nil
	case step["calls"] != nil:
		if err := fields(step, "calls"); err != nil {
			return err
		}
		var calls map[string]json.RawMessage
		if err := json.Unmarshal(step["calls"], &calls); err != nil {
			return err
		}
		stats, err := r.raw.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for command, want := range calls {
			var n int64
			prefix := "cmdstat_" + command + ":calls="
			for _, line := range strings.Split(stats, "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
					n, _ = strconv.ParseInt(strings.Split(rest, ",")[0], 10, 64)
				}
			}
			if err := r.expect(n, nil, want); err != nil {
				return fmt.Errorf("calls of %s: %v", command, err)
			}
		}
		return nil
	case step["reset_calls"] != nil:
		if err := fields(step, "reset_calls"); err != nil {
			return err
		}
		return r.raw.ConfigResetStat(ctx).Err()
	}
	if known, err := r.objectStep(ctx, step); known {
		return err
	}
	return fmt.Errorf("unknown step")
}

// objectSteps are the steps of semaphores and latches besides acquire and
// release, each with its other fields; try_set_count before count, whose
// name is also try_set_count's field.
var objectSteps = []struct {
	action string
	fields []string
}{
	{"try_set_permits", []string{"permits", "expect"}},
	{"update_lease", []string{"ids", "lease_ms", "expect"}},
	{"lease_left", []string{"ids", "expect"}},
	{"acquired", []string{"expect"}},
	{"add_permits", []string{"permits"}},
	{"available", []string{"expect"}},
	{"drain", []string{"expect"}},
	{"try_set_count", []string{"count", "expect"}},
	{"count_down", nil},
	{"count", []string{"expect"}},
	{"await", []string{"wait_ms", "expect", "elapsed_ms"}},
	{"delete", []string{"expect"}},
}

// objectStep runs one of objectSteps, or says the step is none of them.
func (r *run) objectStep(ctx context.Context, step map[string]json.RawMessage) (bool, error) {
	i := 0
	for i < len(objectSteps) && step[objectSteps[i].action] == nil {
		i++
	}
	if i == len(objectSteps) {
		return false, nil
	}
	action := objectSteps[i].action
	if err := fields(step, append(objectSteps[i].fields, action)...); err != nil {
		return true, err
	}
	name := stepName(step[action])
	s, p, l := r.sems[name], r.pes[name], r.counts[name]
	var got any
	var err error
	switch {
	case p != nil:
		got, err = r.permitStep(ctx, p, action, step)
		if action == "add_permits" {
			return true, err
		}
	case s != nil && action == "try_set_permits":
		var permits int64
		if permits, err = intField(step, "permits", required); err == nil {
			got, err = s.TrySetPermits(ctx, permits)
		}
	case s != nil && action == "add_permits":
		var permits int64
		if permits, err = intField(step, "permits", required); err == nil {
			err = s.AddPermits(ctx, permits)
		}
		return true, err
	case s != nil && action == "available":
		got, err = s.Available(ctx)
	case s != nil && action == "drain":
		got, err = s.Drain(ctx)
	case l != nil && action == "try_set_count":
		var count int64
		if count, err = intField(step, "count", required); err == nil {
			got, err = l.TrySetCount(ctx, count)
		}
	case l != nil && action == "count_down":
		return true, l.CountDown(ctx)
	case l != nil && action == "count":
		got, err = l.Count(ctx)
	case l != nil && action == "await":
		opts, err := waitOf(step)
		if err != nil {
			return true, err
		}
		began := time.Now()
		reached, err := l.Await(ctx, opts...)
		if err != nil {
			return true, fmt.Errorf("await: %v", err)
		}
		return true, r.outcome(step, began, reached)
	case l != nil && action == "delete":
		got, err = l.Delete(ctx)
	default:
		return true, fmt.Errorf("%s: %q is no semaphore, permit semaphore or latch that takes it", action, name)
	}
	return true, r.expect(got, err, step["expect"])
}

// countedAcquire reads the acquire step of a semaphore of either kind,
// whose other fields may be more: how many permits, and the wait.
func countedAcquire(step map[string]json.RawMessage, more ...string) (int64, []AcquireOption, error) {
	if err := fields(step, append([]string{"acquire", "permits", "wait_ms", "expect", "elapsed_ms"}, more...)...); err != nil {
		return 0, nil, err
	}
	permits, err := intField(step, "permits", 1)
	if err != nil {
		return 0, nil, err
	}
	opts, err := waitOf(step)
	return permits, opts, err
}

// acquirePermits runs a permit semaphore's acquire step.
func (r *run) acquirePermits(ctx context.Context, step map[string]json.RawMessage) error {
	permits, opts, err := countedAcquire(step, "lease_ms", "save_ids")
	if err != nil {
		return err
	}
	if opts, err = withLeaseOf(step, opts); err != nil {
		return err
	}
	began := time.Now()
	ids, err := r.pes[stepName(step["acquire"])].AcquireN(ctx, permits, opts...)
	if err := r.outcome(step, began, outcomeName(ids != nil, err, "acquired", "refused")); err != nil {
		return err
	}
	if raw := step["save_ids"]; raw != nil {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return err
		}
		for _, id := range ids {
			if !permitID.MatchString(id) {
				return fmt.Errorf("permit id %q is not 32 hex digits", id)
			}
		}
		r.ids[name] = ids
	}
	return nil
}

var permitID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// savedIDs is the ids saved under the step's "ids".
func (r *run) savedIDs(step map[string]json.RawMessage) ([]string, error) {
	name := stepName(step["ids"])
	ids, ok := r.ids[name]
	if !ok {
		return nil, fmt.Errorf("no ids saved under %q", name)
	}
	return ids, nil
}

// savedID is the one id saved under the step's "ids".
func (r *run) savedID(step map[string]json.RawMessage) (string, error) {
	ids, err := r.savedIDs(step)
	if err == nil && len(ids) != 1 {
		err = fmt.Errorf("%d ids saved where one is asked for", len(ids))
	}
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// permitStep runs one of objectSteps on a permit semaphore.
func (r *run) permitStep(ctx context.Context, p *PermitExpirableSemaphore, action string, step map[string]json.RawMessage) (any, error) {
	switch action {
	case "try_set_permits":
		permits, err := intField(step, "permits", required)
		if err != nil {
			return nil, err
		}
		return p.TrySetPermits(ctx, permits)
	case "add_permits":
		permits, err := intField(step, "permits", required)
		if err != nil {
			return nil, err
		}
		return nil, p.AddPermits(ctx, permits)
	case "available":
		return p.Available(ctx)
	case "acquired":
		return p.Acquired(ctx)
	case "update_lease":
		id, err := r.savedID(step)
		if err != nil {
			return nil, err
		}
		lease, err := intField(step, "lease_ms", required)
		if err != nil {
			return nil, err
		}
		return p.UpdateLease(ctx, id, permitLease(lease))
	case "lease_left":
		id, err := r.savedID(step)
		if err != nil {
			return nil, err
		}
		left, err := p.LeaseTime(ctx, id)
		if left == NeverExpires {
			return int64(-1), err
		}
		return left.Milliseconds(), err
	}
	return nil, fmt.Errorf("%s: a permit semaphore takes no such step", action)
}

// withLeaseOf is opts with the step's lease_ms, which it must have: null
// takes the watchdog's, -1 never expires (permits only).
func withLeaseOf(step map[string]json.RawMessage, opts []AcquireOption) ([]AcquireOption, error) {
	if step["lease_ms"] == nil {
		return nil, errors.New("acquire needs lease_ms")
	}
	var lease *int64
	if err := strictDecode(step["lease_ms"], &lease); err != nil {
		return nil, err
	}
	if lease == nil {
		return opts, nil
	}
	return append(opts, WithLease(permitLease(*lease))), nil
}

// permitLease is a scenario's lease_ms: -1 never expires.
func permitLease(ms int64) time.Duration {
	if ms == -1 {
		return NeverExpires
	}
	return time.Duration(ms) * time.Millisecond
}

// stopWatchdogs stops the watchdogs of whatever a failed scenario left
// taken on p.
func stopWatchdogs(p *PermitExpirableSemaphore) {
	p.mu.Lock()
	var ids []string
	for id := range p.dogs {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	p.unwatch(ids)
}

// stepName is the object a step names ("" when not a string).
func stepName(raw json.RawMessage) string {
	var name string
	_ = json.Unmarshal(raw, &name)
	return name
}

// waitOf is a step's wait_ms, which it must have: null waits without
// limit, 0 tries once, W waits up to W ms.
func waitOf(step map[string]json.RawMessage) ([]AcquireOption, error) {
	raw, ok := step["wait_ms"]
	if !ok {
		return nil, errors.New("the step needs wait_ms")
	}
	var wait *int64
	if err := strictDecode(raw, &wait); err != nil {
		return nil, err
	}
	if wait == nil {
		return nil, nil
	}
	return []AcquireOption{WithWait(time.Duration(*wait) * time.Millisecond)}, nil
}

// required is intField's def of a field the step must have.
const required = 0

// intField is the step's integer field; when missing, def, or an error
// for a required one.
func intField(step map[string]json.RawMessage, field string, def int64) (int64, error) {
	raw, ok := step[field]
	if !ok {
		if def == required {
			return 0, fmt.Errorf("the step needs %s", field)
		}
		return def, nil
	}
	var n int64
	err := strictDecode(raw, &n)
	return n, err
}

// outcome checks a call's outcome (a name, or a bool) against the step's
// expect, which it must have, and how long it took against its optional
// elapsed_ms.
func (r *run) outcome(step map[string]json.RawMessage, began time.Time, got any) error {
	elapsed := time.Since(began).Milliseconds()
	if step["expect"] == nil {
		return errors.New("the step needs expect")
	}
	var want any
	if err := strictDecode(step["expect"], &want); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("got %v, want %v", got, want)
	}
	if raw := step["elapsed_ms"]; raw != nil {
		var bounds [2]int64
		if err := strictDecode(raw, &bounds); err != nil {
			return err
		}
		if elapsed < bounds[0] || elapsed > bounds[1] {
			return fmt.Errorf("took %d ms, want %v", elapsed, bounds)
		}
	}
	return nil
}

// outcomeName names a call's outcome as the scenarios do.
func outcomeName(ok bool, err error, yes, no string) string {
	for _, kind := range []error{ErrNotAcquired, ErrNotHeld, ErrNotReentrant, ErrNotSynced, ErrReleaseUnknown} {
		if errors.Is(err, kind) {
			return kind.Error()
		}
	}
	if err != nil {
		return "error " + err.Error()
	}
	if ok {
		return yes
	}
	return no
}

var ownerRef = regexp.MustCompile(`\$owner\(([^)]*)\)`)

// redis sends a raw command, its arguments' $owner(L) and $saved replaced.
func (r *run) redis(ctx context.Context, conn *redis.Client, raw json.RawMessage) (any, error) {
	var words []string
	if err := strictDecode(raw, &words); err != nil {
		return nil, err
	}
	args := make([]any, len(words))
	for i, w := range words {
		w = ownerRef.ReplaceAllStringFunc(w, func(m string) string {
			if l, ok := r.locks[ownerRef.FindStringSubmatch(m)[1]]; ok {
				return l.Owner()
			}
			return m
		})
		if strings.HasPrefix(w, "$") {
			if v, ok := r.saved[w[1:]]; ok {
				w = fmt.Sprint(v)
			}
		}
		args[i] = w
	}
	reply, err := conn.Do(ctx, args...).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return reply, err
}

// expect compares a reply (or error) with an expected value (README "Expected values").
func (r *run) expect(got any, gotErr error, raw json.RawMessage) error {
	var want any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&want); err != nil {
		return err
	}
	obj, isObj := want.(map[string]any)
	if isObj {
		if len(obj) != 1 {
			return fmt.Errorf("an expected object has one key: %s", raw)
		}
		if prefix, ok := obj["error"]; ok {
			if gotErr == nil || !strings.HasPrefix(gotErr.Error(), fmt.Sprint(prefix)) {
				return fmt.Errorf("got %v (%v), want an error starting %v", got, gotErr, prefix)
			}
			return nil
		}
	}
	if gotErr != nil {
		return fmt.Errorf("error %v, want %s", gotErr, raw)
	}
	if !isObj {
		if !sameJSON(got, want) {
			return fmt.Errorf("got %#v, want %s", got, raw)
		}
		return nil
	}
	for op, arg := range obj {
		switch op {
		case "between":
			bounds, _ := arg.([]any)
			n, ok := asInt(got)
			lo, ok1 := asInt(jsonNumber(bounds, 0))
			hi, ok2 := asInt(jsonNumber(bounds, 1))
			if !ok1 || !ok2 || len(bounds) != 2 {
				return fmt.Errorf("bad between %s", raw)
			}
			if !ok || n < lo || n > hi {
				return fmt.Errorf("got %#v, want between %d and %d", got, lo, hi)
			}
		case "match", "each_match":
			re, err := regexp.Compile(`^(?:` + fmt.Sprint(arg) + `)$`)
			if err != nil {
				return err
			}
			items := []any{got}
			if op == "each_match" {
				list, ok := got.([]any)
				if !ok {
					return fmt.Errorf("got %#v, want an array", got)
				}
				items = list
			}
			for _, item := range items {
				s, ok := item.(string)
				if !ok || !re.MatchString(s) {
					return fmt.Errorf("got %#v, want a match of %v", item, arg)
				}
			}
		case "len":
			list, ok := got.([]any)
			n, _ := asInt(arg)
			if !ok || int64(len(list)) != n {
				return fmt.Errorf("got %#v, want %d elements", got, n)
			}
		case "gt", "eq":
			ref, _ := arg.(string)
			saved, ok := r.saved[strings.TrimPrefix(ref, "$")]
			if !ok || !strings.HasPrefix(ref, "$") {
				return fmt.Errorf("%s: no saved value %q", op, ref)
			}
			a, ok1 := asInt(got)
			b, ok2 := asInt(saved)
			if !ok1 || !ok2 || (op == "gt" && a <= b) || (op == "eq" && a != b) {
				return fmt.Errorf("got %#v, want %s %#v", got, op, saved)
			}
		default:
			return fmt.Errorf("unknown expectation %q", op)
		}
	}
	return nil
}

func jsonNumber(list []any, i int) any {
	if i < len(list) {
		return list[i]
	}
	return nil
}

// asInt reads an integer reply, a JSON number or a string of one.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

// sameJSON compares a decoded reply with an expected JSON value.
func sameJSON(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case json.Number:
		g, ok := got.(int64)
		n, err := w.Int64()
		return ok && err == nil && g == n
	case string:
		g, ok := got.(string)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameJSON(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// TestScenarioRunnerRefusesTheUnknown: a step or field the runner does not
// know fails, before anything is sent.
func TestScenarioRunnerRefusesTheUnknown(t *testing.T) {
	c := &Client{}
	r := &run{t: t, locks: map[string]*Lock{"a": c.Lock("a")}, saved: map[string]any{},
		sems: map[string]*Semaphore{"s": c.Semaphore("s")}, counts: map[string]*CountDownLatch{"l": c.CountDownLatch("l")}}
	for _, step := range []string{
		`{"acquire": "s", "wait_ms": 0, "lease_ms": 1000, "expect": "acquired"}`,
		`{"acquire": "a", "permits": 2, "wait_ms": 0, "lease_ms": null, "expect": "acquired"}`,
		`{"release": "s", "expect": "ok", "lease_ms": 1}`,
		`{"available": "s", "expect": 0, "permits": 1}`,
		`{"add_permits": "s"}`,
		`{"count_down": "l", "expect": null}`,
		`{"await": "l", "expect": true}`,
		`{"try_set_count": "l", "expect": true}`,
		`{"dance": "a"}`,
		`{"sleep_ms": 1, "extra": true}`,
		`{"release": "a", "expect": "ok", "wait_ms": 0}`,
		`{"later": {"after_ms": 1, "redis": ["PING"], "expect": "PONG", "then": 1}}`,
	} {
		var parsed map[string]json.RawMessage
		if err := json.Unmarshal([]byte(step), &parsed); err != nil {
			t.Fatal(err)
		}
		if err := r.step(parsed); err == nil {
			t.Errorf("step %s accepted", step)
		}
	}
	if err := r.expect(int64(1), nil, json.RawMessage(`{"around": 1}`)); err == nil {
		t.Error("an unknown expectation accepted")
	}
	var file scenarioFile
	if err := strictDecode([]byte(`{"version": 1, "scenarios": [], "extra": 1}`), &file); err == nil {
		t.Error("an unknown top-level field accepted")
	}
}

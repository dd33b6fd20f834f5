// Command safety is the rwlock safety suite: a master, 2 replicas and 3
// Sentinels with the module (or a cluster of 3 masters each with a
// replica: SAFETY_TOPOLOGY=cluster, cluster.go), workers taking locks of
// every kind through several paths while faults are injected from a seed, and
// checkers over the history (Porcupine against a lease-lock model, and the
// counts).
//
// Environment: RWLOCK_MODULE (the module, required), RWLOCK_REDIS_SERVER
// (default redis-server), SAFETY_TOPOLOGY (sentinel or cluster),
// SAFETY_SEED, SAFETY_FAILOVERS (episodes per fault kind, default 3),
// SAFETY_FAULTS, SAFETY_MODES, SAFETY_CLAIM (the modes
// that must show no violation: default acked), SAFETY_WORKERS (per mode),
// SAFETY_LOCKS (per mode), SAFETY_KINDS (lock kinds: kinds.go; the
// client modes rotate through them too: clientkinds.go),
// SAFETY_KIND_MODES (the command modes the kinds other than fenced run in),
// SAFETY_VERBOSE, SAFETY_KEEP (keep the servers' directory),
// SAFETY_EXPECT_VIOLATION (streams that must show one: the checker's own
// test), and for the driver modes (clients.go) each driver's command:
// SAFETY_PYCLIENT, SAFETY_NODECLIENT, SAFETY_JAVACLIENT, SAFETY_RUSTCLIENT
// (the Makefile sets them).
package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	v, err := strconv.Atoi(env(name, strconv.Itoa(def)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	return v
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func main() {
	code := run()
	stopAll()
	os.Exit(code)
}

func run() int {
	redis.SetLogger(quietLogger{})
	if len(os.Args) == 3 && os.Args[1] == "check" {
		// Check a saved history again (SAFETY_OUT of an earlier run).
		rec, err := load(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "safety:", err)
			return 2
		}
		if !report(rec, rec.Modes, list(env("SAFETY_CLAIM", ModeAcked)), list(env("SAFETY_EXPECT_VIOLATION", "")), rec.Faults) {
			return 1
		}
		return 0
	}
	module := os.Getenv("RWLOCK_MODULE")
	if module == "" {
		fmt.Fprintln(os.Stderr, "safety: set RWLOCK_MODULE to the module's .so")
		return 2
	}
	server := env("RWLOCK_REDIS_SERVER", "redis-server")
	seed := int64(envInt("SAFETY_SEED", int(time.Now().UnixNano()%1_000_000)))
	episodesPerKind := envInt("SAFETY_FAILOVERS", 3)
	faults := list(env("SAFETY_FAULTS", strings.Join(allFaults, ",")))
	topo := env("SAFETY_TOPOLOGY", TopologySentinel)
	defModes := []string{ModeAcked, ModeRaw, ModeLegacy, ModeGoClient, ModePyClient, ModeNodeClient, ModeJavaClient, ModeRustClient}
	defKinds := strings.Join(allKinds, ",")
	switch topo {
	case TopologySentinel:
	case TopologyCluster:
		// The cluster runs fenced plain locks through the commands and the
		// Go package (the other packages' drivers and the other kinds'
		// streams follow Sentinel only).
		defModes, defKinds = []string{ModeAcked, ModeRaw, ModeGoClient}, ""
	default:
		fmt.Fprintf(os.Stderr, "safety: SAFETY_TOPOLOGY %q: sentinel or cluster\n", topo)
		return 2
	}
	modes := list(env("SAFETY_MODES", strings.Join(defModes, ",")))
	kinds := list(env("SAFETY_KINDS", defKinds))
	if topo == TopologyCluster {
		for _, m := range modes {
			if m != ModeAcked && m != ModeRaw && m != ModeGoClient {
				fmt.Fprintf(os.Stderr, "safety: the cluster topology runs the modes acked, raw and goclient, not %s\n", m)
				return 2
			}
		}
		if len(kinds) > 0 {
			fmt.Fprintln(os.Stderr, "safety: the cluster topology runs fenced plain locks only: leave SAFETY_KINDS empty")
			return 2
		}
	}
	kindModes := list(env("SAFETY_KIND_MODES", ModeAcked+","+ModeRaw))
	claims := list(env("SAFETY_CLAIM", ModeAcked))
	expectViolation := list(env("SAFETY_EXPECT_VIOLATION", ""))
	verbose := env("SAFETY_VERBOSE", "1") != "0"
	par := params{
		lease: 10 * time.Second, gcLease: 400 * time.Millisecond, gcPause: 800 * time.Millisecond,
		horizon: 8 * time.Second,
		locks:   envInt("SAFETY_LOCKS", 2), workers: envInt("SAFETY_WORKERS", 3),
		holdMin: 20 * time.Millisecond, holdMax: 50 * time.Millisecond,
		backoffs: [2]time.Duration{10 * time.Millisecond, 30 * time.Millisecond},
	}
	fmt.Printf("safety: %s topology; seed %d, %d episodes of each of %s; modes %s (claiming safety: %s)\n",
		topo, seed, episodesPerKind, strings.Join(faults, " "), strings.Join(modes, " "), strings.Join(claims, " "))
	fmt.Printf("safety: kinds %s in modes %s\n", strings.Join(kinds, " "), strings.Join(kindModes, " "))
	rot := newRotation(kinds, seed)
	if rot != nil {
		var now []string
		for _, m := range clientModes {
			if contains(modes, m) {
				now = append(now, m+" "+rot.kindOf(m))
			}
		}
		if len(now) > 0 {
			fmt.Printf("safety: the client modes rotate through %s, one kind further at each episode; first %s\n",
				strings.Join(rot.kinds, " "), strings.Join(now, ", "))
		}
	}
	fmt.Printf("safety: reproduce with SAFETY_TOPOLOGY=%s SAFETY_SEED=%d SAFETY_FAILOVERS=%d SAFETY_FAULTS=%s SAFETY_MODES=%s SAFETY_KINDS=%s SAFETY_KIND_MODES=%s\n",
		topo, seed, episodesPerKind, strings.Join(faults, ","), strings.Join(modes, ","), strings.Join(kinds, ","), strings.Join(kindModes, ","))

	root, err := os.MkdirTemp("", "rwlock-safety-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	keep := env("SAFETY_KEEP", "") != ""
	failed := false
	defer func() {
		if keep || failed {
			fmt.Printf("safety: server directories kept in %s\n", root)
		} else {
			os.RemoveAll(root)
		}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		stopAll()
		fmt.Fprintf(os.Stderr, "safety: interrupted; servers stopped; directories in %s\n", root)
		os.Exit(130)
	}()

	var t *topology
	if topo == TopologyCluster {
		t, err = startCluster(server, module, root)
	} else {
		t, err = startTopology(server, module, root)
	}
	if t != nil {
		defer t.close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "safety: start:", err)
		failed = true
		return 2
	}
	if _, err := t.waitHealthy(healthCeiling); err != nil {
		fmt.Fprintln(os.Stderr, "safety:", err)
		failed = true
		return 2
	}

	rec := newRecorder()
	rec.Modes, rec.Faults = modes, faults
	res := newResource(rec)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var gcWorkers []*worker
	var all []*worker
	for mi, mode := range modes {
		var locks []string
		if t.cluster {
			// Locks on every shard, whichever master a fault hits.
			if locks, err = t.spreadLocks("safety:"+mode, max(par.locks, clusterShards)); err != nil {
				fmt.Fprintln(os.Stderr, "safety:", err)
				stop()
				failed = true
				return 2
			}
		} else {
			for k := 0; k < par.locks; k++ {
				locks = append(locks, fmt.Sprintf("safety:%s:%d", mode, k))
			}
		}
		for i := 0; i < par.workers; i++ {
			w := &worker{id: mi*100 + i, mode: mode, group: i % clientGroups, locks: locks,
				rng: rand.New(rand.NewSource(seed + int64(mi*100+i+1))), rec: rec, res: res, par: par,
				gcDone: make(chan struct{}, 1)}
			var err error
			switch {
			case t.cluster && (mode == ModeRaw || mode == ModeAcked):
				w.p = newShardedPath(t, w.group, mode, locks, rand.New(rand.NewSource(seed-int64(w.id))))
			case mode == ModeRaw || mode == ModeAcked || mode == ModeLegacy:
				w.p = &cmdPath{t: t, group: w.group, acked: mode == ModeAcked, legacy: mode == ModeLegacy, rng: rand.New(rand.NewSource(seed - int64(w.id)))}
			case mode == ModeGoClient:
				w.p, err = newGoClientPath(t, w.group)
			case driverModes[mode] != "":
				w.p, err = newDriverPath(t, w.group, mode, w.id, root)
			default:
				fmt.Fprintf(os.Stderr, "safety: unknown mode %q\n", mode)
				stop()
				return 2
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "safety:", err)
				stop()
				failed = true
				return 2
			}
			if !t.cluster {
				w.rot = rot
			}
			if i == 0 {
				gcWorkers = append(gcWorkers, w)
			}
			all = append(all, w)
		}
	}
	for _, w := range all {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx) }()
	}
	streams, err := startKinds(ctx, &wg, t, rec, res, par, seed, kinds, kindModes)
	if err != nil {
		fmt.Fprintln(os.Stderr, "safety:", err)
		stop()
		return 2
	}
	modes = append(modes, streams...)
	rec.Modes = modes

	in := &injector{t: t, rec: rec, gc: gcWorkers, verbose: verbose}
	rng := rand.New(rand.NewSource(seed))
	plan := schedule(faults, episodesPerKind, rng)
	runErr := error(nil)
	time.Sleep(2 * time.Second) // every path past its first grant
	for i, kind := range plan {
		if err := in.episode(kind, rng); err != nil {
			runErr = fmt.Errorf("episode %d (%s): %w", i+1, kind, err)
			break
		}
		time.Sleep(time.Duration(500+rng.Intn(1000)) * time.Millisecond)
		rot.next()
	}
	stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "safety: workers did not stop within 2 min")
	}
	modes = append(modes, rot.streams(clientModes)...)
	rec.Modes = modes
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "safety: harness:", runErr)
		failed = true
	}
	if out := os.Getenv("SAFETY_OUT"); out != "" {
		if err := rec.save(out); err != nil {
			fmt.Fprintln(os.Stderr, "safety: saving the history:", err)
		} else {
			fmt.Printf("safety: history written to %s\n", out)
		}
	}
	ok := report(rec, modes, claims, expectViolation, faults)
	if !ok || runErr != nil {
		failed = true
		return 1
	}
	return 0
}

// report prints the tables and says whether every claim held.
func report(rec *recorder, modes, claims, expectViolation, faults []string) bool {
	rec.mu.Lock()
	ops, writes, episodes := rec.ops, rec.writes, rec.episodes
	rec.mu.Unlock()
	failovers := map[string]int{}
	perKind := map[string]int{}
	for _, e := range episodes {
		perKind[e.Kind]++
		if e.Failover {
			failovers[e.Kind]++
		}
	}
	fmt.Println()
	fmt.Println("episodes (failovers Sentinel or the cluster made during them):")
	for _, k := range faults {
		fmt.Printf("  %-17s %3d episodes, %3d failovers\n", k, perKind[k], failovers[k])
	}
	fmt.Println()
	fmt.Printf("%-15s %8s %6s %8s %5s %8s %10s %12s %10s %9s %10s\n",
		"mode", "granted", "maybe", "refused", "lost", "overlaps", "token-regr", "rej-in-lease", "rej-stale", "stale-ok", "porcupine")
	ok := true
	var notes []string
	byMode := map[string][]Op{}
	for _, o := range ops {
		byMode[o.Mode] = append(byMode[o.Mode], o)
	}
	wByMode := map[string][]Write{}
	for _, w := range writes {
		wByMode[w.Mode] = append(wByMode[w.Mode], w)
	}
	for _, mode := range modes {
		c := count(byMode[mode], wByMode[mode])
		lin := linearizable(byMode[mode], 2*time.Minute)
		fmt.Printf("%-15s %8d %6d %8s %5d %8d %10d %12d %10d %9d %10s\n",
			mode, c.Granted, c.Maybe, strconv.FormatInt(rec.refusedOf(mode), 10), c.Lost, c.Overlaps, c.TokenRegressions, c.RejectedInLease, c.RejectedStale, c.StaleAccepted, lin)
		if details := topDetails(byMode[mode]); details != "" {
			notes = append(notes, fmt.Sprintf("  %s: indeterminate outcomes: %s", mode, details))
		}
		for _, e := range c.Examples {
			notes = append(notes, fmt.Sprintf("  %s: %s", mode, e))
		}
		violated := c.Lost > 0 || c.Overlaps > 0 || c.TokenRegressions > 0 || c.RejectedInLease > 0 || lin == porcupine.Illegal || reported.kept(mode) > 0
		for _, m := range claims {
			if covers(m, mode) && violated {
				fmt.Printf("FAIL: %s claims safety and shows a violation\n", mode)
				ok = false
			}
		}
		for _, m := range expectViolation {
			if m == mode && !violated {
				fmt.Printf("FAIL: %s was expected to show a violation (the checker's own test) and shows none\n", mode)
				ok = false
			}
		}
	}
	for _, n := range append(notes, reported.notes()...) {
		fmt.Println(n)
	}
	fmt.Println()
	fmt.Println("longest unavailability (no grant) per fault kind, in seconds:")
	fmt.Printf("%-15s", "mode")
	kinds := append([]string(nil), faults...)
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Printf(" %17s", k)
	}
	fmt.Println()
	turns := false
	for _, mode := range modes {
		if rotating(mode) {
			turns = true
			continue
		}
		u := unavailability(byMode[mode], episodes)
		fmt.Printf("%-15s", mode)
		for _, k := range kinds {
			fmt.Printf(" %17.2f", u[k].Seconds())
		}
		fmt.Println()
	}
	if turns {
		fmt.Println("(not shown: the client modes' kind streams, which run in turns; each client's availability is its fenced stream's)")
	}
	if ok {
		fmt.Println("\nsafety: PASS")
	}
	return ok
}

// topDetails summarises why operations of a mode were indeterminate.
func topDetails(ops []Op) string {
	seen := map[string]int{}
	for _, o := range ops {
		if o.Outcome != Maybe {
			continue
		}
		d := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return '#'
			}
			return r
		}, o.Detail)
		if len(d) > 70 {
			d = d[:70]
		}
		seen[d]++
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return seen[keys[i]] > seen[keys[j]] })
	var parts []string
	for i, k := range keys {
		if i == 4 {
			break
		}
		parts = append(parts, fmt.Sprintf("%d× %q", seen[k], k))
	}
	return strings.Join(parts, "; ")
}

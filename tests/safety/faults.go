package main

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The fault kinds.
const (
	FaultKill            = "kill"             // kill -9 of the master, restarted from its AOF as a replica
	FaultPause           = "pause"            // SIGSTOP of the master for 4 s (past down-after), then SIGCONT
	FaultLagKill         = "lag-kill"         // the replicas lag (a delayed link), then kill -9 of the master
	FaultClientPartition = "client-partition" // one client group cut from the master for 3 s
	FaultReplPartition   = "repl-partition"   // the master cut from its replicas and Sentinels (cluster: its bus both ways) for 4 s
	FaultGCPause         = "gc-pause"         // a client holds its token past its lease, then writes
)

var allFaults = []string{FaultKill, FaultPause, FaultLagKill, FaultClientPartition, FaultReplPartition, FaultGCPause}

const (
	pauseFor      = 4 * time.Second
	partitionFor  = 3 * time.Second
	replCutFor    = 4 * time.Second
	healthCeiling = 150 * time.Second // a loaded 2-core machine's full syncs and Sentinel rounds
)

// injector runs the fault episodes against a topology.
type injector struct {
	t       *topology
	rec     *recorder
	gc      []*worker // one per mode: the paused client
	verbose bool
	n       int // episodes begun: in a cluster, the shards are hit in turn
}

func (in *injector) logf(format string, args ...any) {
	if in.verbose {
		fmt.Printf("%8.1fs  %s\n", float64(in.rec.now())/1e9, fmt.Sprintf(format, args...))
	}
}

// episode injects one fault of kind and waits for the topology to be
// healthy again.
func (in *injector) episode(kind string, rng *rand.Rand) error {
	if in.t.cluster {
		in.t.target = in.n % clusterShards
	}
	in.n++
	m, err := in.t.waitHealthy(healthCeiling)
	if err != nil {
		return err
	}
	ep := Episode{Kind: kind, Start: in.rec.now()}
	if in.t.cluster {
		ep.Detail = fmt.Sprintf("shard %d", in.t.target)
		ep.Locks = in.t.locksOn(in.t.target)
	}
	switch kind {
	case FaultKill, FaultLagKill:
		if kind == FaultLagKill {
			delay := time.Duration(200+rng.Intn(300)) * time.Millisecond
			ep.Detail = strings.TrimSpace(ep.Detail + " delay " + delay.String())
			m.repl.setDelay(delay)
			time.Sleep(1500 * time.Millisecond)
		}
		in.logf("%s: kill -9 node%d %s", kind, m.idx, ep.Detail)
		if err := m.proc.kill9(); err != nil {
			return err
		}
		// The bytes the killed master had not yet delivered die with it.
		m.repl.dropAll()
		m.repl.setDelay(0)
		if m.bus != nil {
			m.bus.dropAll()
		}
		for _, c := range m.clients {
			c.dropAll()
		}
		nm, err := in.t.waitNewMaster(m, healthCeiling)
		if err != nil {
			return err
		}
		ep.Failover = true
		in.logf("%s: node%d promoted; restarting node%d from its AOF as its replica", kind, nm.idx, m.idx)
		// A cluster node rejoins from its nodes.conf and becomes the
		// replica of the master that took its slots.
		var rejoin []string
		if !in.t.cluster {
			rejoin = []string{"--replicaof", "127.0.0.1", strconv.Itoa(nm.repl.port())}
		}
		if err := m.proc.start(in.t.server, rejoin...); err != nil {
			return err
		}
	case FaultPause:
		in.logf("pause: SIGSTOP node%d", m.idx)
		if err := m.proc.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		nm, err := in.t.waitNewMaster(m, pauseFor)
		ep.Failover = err == nil
		time.Sleep(pauseFor - time.Duration(in.rec.now()-ep.Start))
		if err := m.proc.signal(syscall.SIGCONT); err != nil {
			return err
		}
		if nm != nil {
			in.logf("pause: SIGCONT node%d (node%d was promoted)", m.idx, nm.idx)
		} else {
			in.logf("pause: SIGCONT node%d (no failover yet)", m.idx)
		}
	case FaultClientPartition:
		g := rng.Intn(clientGroups)
		ep.Detail = strings.TrimSpace(fmt.Sprintf("%s group %d", ep.Detail, g))
		in.logf("client-partition: group %d cut from node%d", g, m.idx)
		m.clients[g].block()
		time.Sleep(partitionFor)
		m.clients[g].unblock()
	case FaultReplPartition:
		in.logf("repl-partition: node%d cut from its replicas and the Sentinels (or the cluster bus, both ways)", m.idx)
		m.repl.block()
		if m.bus != nil {
			m.bus.block()
		}
		// In a cluster the master also opens links of its own, to the
		// others' bus: they are cut too, so no ping of its gets through
		// either way, as the Sentinels' checks do not under Sentinel.
		in.t.cutFrom(m)
		nm, err := in.t.waitNewMaster(m, replCutFor)
		ep.Failover = err == nil
		time.Sleep(replCutFor - time.Duration(in.rec.now()-ep.Start))
		m.repl.unblock()
		if m.bus != nil {
			m.bus.unblock()
		}
		in.t.healFrom(m)
		if nm != nil {
			in.logf("repl-partition: healed (node%d was promoted)", nm.idx)
		}
	case FaultGCPause:
		in.logf("gc-pause: one client per mode holds past its lease")
		for _, w := range in.gc {
			w.gc.Store(true)
		}
		for _, w := range in.gc {
			select {
			case <-w.gcDone:
			case <-time.After(healthCeiling):
				return fmt.Errorf("gc-pause: the %s worker did not finish a paused hold within %s", w.mode, healthCeiling)
			}
		}
	default:
		return fmt.Errorf("unknown fault %q", kind)
	}
	if _, err := in.t.waitHealthy(healthCeiling); err != nil {
		return fmt.Errorf("after %s: %w", kind, err)
	}
	ep.End = in.rec.now()
	in.rec.episode(ep)
	return nil
}

// schedule is the seeded order of the episodes: each kind n times.
func schedule(kinds []string, n int, rng *rand.Rand) []string {
	var s []string
	for _, k := range kinds {
		for i := 0; i < n; i++ {
			s = append(s, k)
		}
	}
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

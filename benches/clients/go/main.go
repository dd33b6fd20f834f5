// Command go-bench runs one scenario of make bench-clients (benches/clients/run.py)
// with one library: this repository's Go client ("rwlock") or go-redsync v4
// ("redsync"), both on one go-redis client with the same pool size. It warms
// up, prints READY, runs the scenario for --seconds once it reads GO, prints
// its counts as one JSON line, and releases what it holds once its standard
// input closes (after run.py read the server's counters).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/rwlock/rwlock/clients/go/rwlock"
)

// poolSize is the go-redis pool of either library: more connections than
// workers, so no worker waits for one.
const poolSize = 32

// locker is one worker's handle on a lock, whatever the library.
type locker interface {
	// lock waits for the lock (as long as the library waits by default);
	// false when the library gave up.
	lock(ctx context.Context) (bool, error)
	// try takes the lock only if it is free.
	try(ctx context.Context) (bool, error)
	unlock(ctx context.Context) error
}

type ours struct{ l *rwlock.Lock }

func (o ours) lock(ctx context.Context) (bool, error) { return o.l.Acquire(ctx) }
func (o ours) try(ctx context.Context) (bool, error) {
	return o.l.Acquire(ctx, rwlock.WithWait(0))
}
func (o ours) unlock(ctx context.Context) error { return o.l.Release(ctx) }

type peer struct{ m *redsync.Mutex }

func (p peer) lock(ctx context.Context) (bool, error) { return acquired(p.m.LockContext(ctx)) }
func (p peer) try(ctx context.Context) (bool, error)  { return acquired(p.m.TryLockContext(ctx)) }

// acquired reads redsync's answer to an acquisition: taken, refused (the
// lock is another's: ErrFailed, ErrTaken) or failed.
func acquired(err error) (bool, error) {
	var taken *redsync.ErrTaken
	if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) {
		return false, nil
	}
	return err == nil, err
}
func (p peer) unlock(ctx context.Context) error {
	ok, err := p.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock found the lock gone")
	}
	return err
}

type result struct {
	Cycles       int64     `json:"cycles"`
	Failed       int64     `json:"failed"`
	ElapsedS     float64   `json:"elapsed_s"`
	PerWorker    []int64   `json:"per_worker"`
	HandoffUs    []float64 `json:"handoff_us,omitempty"`
	SameAgain    *float64  `json:"same_again,omitempty"`
	WriterWaitUs []float64 `json:"writer_wait_us,omitempty"`
}

// handoff records, on one contended lock, the time from a holder starting
// its release to the next holder's acquisition returning, when that next
// holder is another worker. Only the holder writes it.
type handoff struct {
	mu        sync.Mutex
	releaseAt time.Time
	last      int
	samples   []float64
	same      int64
	changes   int64
}

func (h *handoff) acquired(worker int) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == worker {
		h.same++
	} else if h.last >= 0 {
		h.changes++
		h.samples = append(h.samples, float64(now.Sub(h.releaseAt).Nanoseconds())/1e3)
	}
	h.last = worker
}

func (h *handoff) releasing() {
	h.mu.Lock()
	h.releaseAt = time.Now()
	h.mu.Unlock()
}

type bench struct {
	scenario string
	workers  []locker
	writer   locker // rw: the writer among the readers
}

// phase runs every worker until d has passed; each finishes its cycle.
func (b *bench) phase(d time.Duration) result {
	ctx := context.Background()
	var stop atomic.Bool
	per := make([]int64, len(b.workers))
	var failed atomic.Int64
	h := &handoff{last: -1}
	var waits []float64
	var wg sync.WaitGroup
	start := time.Now()
	fail := func(err error) { log.Fatalf("%s: %v", b.scenario, err) }
	for i, w := range b.workers {
		wg.Add(1)
		go func(i int, w locker) {
			defer wg.Done()
			for !stop.Load() {
				if b.scenario == "try" {
					ok, err := w.try(ctx)
					if err != nil {
						fail(err)
					}
					if ok {
						fail(errors.New("a try took a held lock"))
					}
					per[i]++
					continue
				}
				ok, err := w.lock(ctx)
				if err != nil {
					fail(err)
				}
				if !ok {
					failed.Add(1)
					continue
				}
				if b.scenario == "contended" {
					h.acquired(i)
					h.releasing()
				}
				if err := w.unlock(ctx); err != nil {
					fail(err)
				}
				per[i]++
			}
		}(i, w)
	}
	if b.writer != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				t0 := time.Now()
				ok, err := b.writer.lock(ctx)
				if err != nil {
					fail(err)
				}
				if !ok {
					failed.Add(1)
					continue
				}
				waits = append(waits, float64(time.Since(t0).Nanoseconds())/1e3)
				if err := b.writer.unlock(ctx); err != nil {
					fail(err)
				}
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	r := result{ElapsedS: time.Since(start).Seconds(), PerWorker: per, Failed: failed.Load()}
	for _, n := range per {
		r.Cycles += n
	}
	r.Cycles += int64(len(waits))
	if b.scenario == "contended" {
		r.HandoffUs = h.samples
		if total := h.same + h.changes; total > 0 {
			share := float64(h.same) / float64(total)
			r.SameAgain = &share
		}
	}
	r.WriterWaitUs = waits
	return r
}

func main() {
	port := flag.Int("port", 0, "server port on 127.0.0.1")
	lib := flag.String("lib", "rwlock", "rwlock or redsync")
	scenario := flag.String("scenario", "uncontended", "uncontended, contended, rw or try")
	workers := flag.Int("workers", 1, "workers (rw: readers)")
	seconds := flag.Float64("seconds", 3, "measured seconds")
	warmup := flag.Float64("warmup", 0.5, "warm-up seconds")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the measured phase to this file (go tool pprof)")
	flag.Parse()
	ctx := context.Background()

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(*port), PoolSize: poolSize})
	defer rdb.Close()
	var newLocker func(name string) locker
	var newRW func(name string, write bool) locker
	switch *lib {
	case "rwlock":
		locks, err := rwlock.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		defer locks.Close()
		newLocker = func(name string) locker { return ours{locks.Lock(name)} }
		newRW = func(name string, write bool) locker {
			rw := locks.ReadWriteLock(name)
			if write {
				return ours{rw.Write()}
			}
			return ours{rw.Read()}
		}
	case "redsync":
		rs := redsync.New(goredis.NewPool(rdb))
		// Its defaults but the lease: our watchdog's 30 s, so that no hold
		// ends by itself during a run.
		newLocker = func(name string) locker { return peer{rs.NewMutex(name, redsync.WithExpiry(30*time.Second))} }
	default:
		log.Fatalf("unknown library %q", *lib)
	}

	b := &bench{scenario: *scenario}
	var holder locker
	switch *scenario {
	case "uncontended":
		for i := 0; i < *workers; i++ {
			b.workers = append(b.workers, newLocker(fmt.Sprintf("bench:u:%d", i)))
		}
	case "contended":
		for i := 0; i < *workers; i++ {
			b.workers = append(b.workers, newLocker("bench:c"))
		}
	case "try":
		holder = newLocker("bench:t")
		if ok, err := holder.lock(ctx); err != nil || !ok {
			log.Fatalf("try: the holder did not get the lock: %v %v", ok, err)
		}
		for i := 0; i < *workers; i++ {
			b.workers = append(b.workers, newLocker("bench:t"))
		}
	case "rw":
		if newRW == nil {
			log.Fatalf("%s has no read-write lock", *lib)
		}
		for i := 0; i < *workers; i++ {
			b.workers = append(b.workers, newRW("bench:rw", false))
		}
		b.writer = newRW("bench:rw", true)
	default:
		log.Fatalf("unknown scenario %q", *scenario)
	}

	b.phase(time.Duration(*warmup * float64(time.Second)))
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("READY")
	if !in.Scan() || in.Text() != "GO" {
		log.Fatal("expected GO on standard input")
	}
	var profile *os.File
	if *cpuProfile != "" {
		var err error
		if profile, err = os.Create(*cpuProfile); err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(profile); err != nil {
			log.Fatal(err)
		}
	}
	measured := b.phase(time.Duration(*seconds * float64(time.Second)))
	if profile != nil {
		pprof.StopCPUProfile()
		if err := profile.Close(); err != nil {
			log.Fatal(err)
		}
	}
	out, err := json.Marshal(measured)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// run.py reads the server's counters, then closes our input.
	for in.Scan() {
	}
	if holder != nil {
		if err := holder.unlock(ctx); err != nil {
			log.Fatal(err)
		}
	}
}

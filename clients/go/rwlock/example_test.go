package rwlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rwlock/rwlock/clients/go/rwlock"
)

// The examples that talk to a server have no Output comment: `go test`
// compiles them but does not run them. They expect `make run`'s server on
// port 6399.

func Example() {
	ctx := context.Background()
	client, err := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	lock := client.Lock("invoice:42")
	ok, err := lock.Acquire(ctx, rwlock.WithWait(5*time.Second)) // waits on the server
	if err != nil {
		log.Fatal(err)
	}
	if !ok {
		log.Fatal("busy")
	}
	defer lock.Release(ctx) // the watchdog renews it until then
}

func ExampleNew() {
	// A ring shards by its own rule, not by the cluster's slots: refused.
	_, err := rwlock.New(redis.NewRing(&redis.RingOptions{}))
	fmt.Println(err)
	// Output: rwlock: unsupported client *redis.Ring: use a *redis.Client or *redis.ClusterClient
}

func ExampleNew_cluster() {
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"localhost:7000"}})
	client, err := rwlock.New(cluster, rwlock.WithWatchdogTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	// Every call goes to the master of the name's slot.
	_ = client.Lock("orders:7")
}

func ExampleLock_Acquire() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	lock := client.Lock("report")
	// One try, a 10 s lease and no watchdog.
	if ok, err := lock.Acquire(ctx, rwlock.WithWait(0), rwlock.WithLease(10*time.Second)); err == nil && ok {
		defer lock.Release(ctx)
	}
}

func ExampleLock_Run() {
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	err := client.Lock("nightly-job").Run(context.Background(), func(ctx context.Context) error {
		// ctx is cancelled if the watchdog finds the lock lost.
		return nil
	}, rwlock.WithWait(time.Second))
	if errors.Is(err, rwlock.ErrNotAcquired) {
		fmt.Println("another instance runs it")
	}
}

func ExampleWithFenced() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	lock := client.Lock("ledger", rwlock.WithFenced())
	if ok, _ := lock.Acquire(ctx); ok {
		token, _ := lock.Token()
		fmt.Println("write with fence", token) // the storage refuses lower tokens
		_ = lock.Release(ctx)
	}
}

func ExampleWithOnLost() {
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	lock := client.Lock("leader", rwlock.WithOnLost(func(l *rwlock.Lock) {
		log.Printf("lost %s", l.Name())
	}))
	if ok, _ := lock.Acquire(context.Background()); ok {
		<-lock.Done() // closed when released or lost
	}
}

func ExampleClient_ReadWriteLock() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	rw := client.ReadWriteLock("catalog")
	if ok, _ := rw.Read().Acquire(ctx, rwlock.WithWait(time.Second)); ok {
		defer rw.Read().Release(ctx) // other readers may hold it too
	}
}

func ExampleClient_MultiLock() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	transfer := client.MultiLock([]rwlock.Hold{
		{Kind: rwlock.KindLock, Name: "{acct}:1"},
		{Kind: rwlock.KindLock, Name: "{acct}:2"},
	})
	if ok, _ := transfer.Acquire(ctx, rwlock.WithWait(time.Second)); ok { // both, or none
		defer transfer.Release(ctx)
	}
}

func ExampleClient_FairLock() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	// Served in arrival order, in one line with Redisson's RFairLock
	// waiters, who use a 5 s fairLockWaitTimeout here.
	lock := client.FairLock("payouts", rwlock.WithFairWait(5*time.Second))
	err := lock.Run(ctx, func(ctx context.Context) error {
		fmt.Println("paying out")
		return nil
	}, rwlock.WithWait(30*time.Second))
	if errors.Is(err, rwlock.ErrNotAcquired) {
		fmt.Println("still 30 s behind others: try later")
	}
}

func ExampleWithSession() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	lock := client.Lock("worker:3", rwlock.WithSession()) // freed if this process dies
	if ok, _ := lock.Acquire(ctx, rwlock.WithWait(0)); ok {
		defer lock.Release(ctx)
	}
}

func ExampleNewRedLock() {
	var nodes []*rwlock.Client
	for _, addr := range []string{"localhost:7001", "localhost:7002", "localhost:7003"} {
		c, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: addr}))
		nodes = append(nodes, c)
	}
	red, _ := rwlock.NewRedLock("payments", nodes)
	if ok, _ := red.Acquire(context.Background(), rwlock.WithLease(5*time.Second)); ok {
		fmt.Println("valid until", red.ValidUntil())
	}
}

func ExampleClient_Semaphore() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	sem := client.Semaphore("backend:connections")
	_, _ = sem.TrySetPermits(ctx, 3) // false when another process set it first
	// Up to 10 s on the server, served in arrival order.
	if ok, err := sem.Acquire(ctx, 1, rwlock.WithWait(10*time.Second)); err == nil && ok {
		defer sem.Release(ctx, 1)
	}
}

func ExampleClient_PermitExpirableSemaphore() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	sem := client.PermitExpirableSemaphore("backend:connections")
	_, _ = sem.TrySetPermits(ctx, 3)
	// A permit of its own id, renewed by the watchdog until released
	// (rwlock.WithLease(d): it ends at its lease instead).
	if id, err := sem.Acquire(ctx, rwlock.WithWait(10*time.Second)); err == nil && id != "" {
		defer sem.Release(ctx, id)
	}
}

func ExampleClient_CountDownLatch() {
	ctx := context.Background()
	client, _ := rwlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6399"}))
	latch := client.CountDownLatch("batch:17")
	_, _ = latch.TrySetCount(ctx, 3)
	for i := 0; i < 3; i++ {
		go func() { _ = latch.CountDown(ctx) }() // each worker, its part done
	}
	if done, err := latch.Await(ctx, rwlock.WithWait(time.Minute)); err == nil && done {
		fmt.Println("all three parts done")
	}
}

//! The semaphore (`SEMAPHORE.*`) and the count-down latch (`LATCH.*`),
//! blocking and async, against a real server with the module: a wait
//! served by another connection's release, never more permits out than
//! the count under concurrent workers, a wait that runs out or is
//! cancelled leaving no waiter on the server, and a latch's waiters all
//! answered by the last count-down.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{aio, Client, Error, Options, Replicas, SyncOptions};
use testkit::{query, wait_for_waiters, wait_until, waiters, Server};

/// Generous: a busy two-core machine may be slow, never this slow.
const CEILING: Duration = Duration::from_secs(10);

/// Waits until no client is parked in the module, and checks that
/// `LOCK.WAITING` lists nothing.
fn nobody_waits(conn: &mut testkit::Conn) {
    wait_until(CEILING, "no waiter left", || {
        (waiters(conn) == 0).then_some(())
    });
    let listed: Vec<redis::Value> = query(conn, &["LOCK.WAITING"]);
    assert!(listed.is_empty(), "LOCK.WAITING: {listed:?}");
}

#[test]
fn a_wait_is_served_by_another_connections_release() {
    let (server, mut conn) = Server::started(&[]);
    let sem = Client::new(server.client()).semaphore("sem:served");
    assert!(sem.try_set_permits(1).expect("set"));
    let first = sem
        .try_acquire(1, Duration::ZERO)
        .expect("try")
        .expect("free");
    let waiter = {
        let sem = sem.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let taken = sem.try_acquire(2, CEILING).expect("wait");
            (taken, started.elapsed())
        })
    };
    wait_for_waiters(&mut conn, 1);
    let listed: Vec<redis::Value> = query(&mut conn, &["LOCK.WAITING"]);
    assert_eq!(listed.len(), 1, "{listed:?}");
    // Another connection gives back two: the waiter for two is served.
    let _: () = query(&mut conn, &["SEMAPHORE.RELEASE", "sem:served", "2"]);
    let (taken, took) = waiter.join().expect("waiter");
    let taken = taken.expect("served, not refused");
    assert_eq!(taken.permits(), 2);
    assert!(
        took < CEILING,
        "served at the release, not at the end: {took:?}"
    );
    assert_eq!(sem.available_permits().expect("available"), 0);
    drop(taken);
    assert_eq!(sem.available_permits().expect("available"), 2);
    first.release().expect("release");
    assert_eq!(sem.available_permits().expect("available"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_wait_is_served_by_another_connections_release() {
    let (server, mut conn) = Server::started(&[]);
    let sem = aio::Client::new(server.client()).semaphore("sem:served:async");
    let waiting = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1).await })
    };
    let mut watch = server.conn();
    tokio::task::spawn_blocking(move || wait_for_waiters(&mut watch, 1))
        .await
        .expect("waiters");
    let _: () = query(
        &mut conn,
        &["SEMAPHORE.ADDPERMITS", "sem:served:async", "1"],
    );
    let taken = tokio::time::timeout(CEILING, waiting)
        .await
        .expect("served in time")
        .expect("task")
        .expect("acquired");
    assert_eq!(sem.available_permits().await.expect("available"), 0);
    taken.release().await.expect("release");
    assert_eq!(sem.available_permits().await.expect("available"), 1);
}

/// Permits in use by the workers, and how often more than `limit` were.
struct Counter {
    in_use: AtomicI64,
    violations: AtomicU64,
    limit: i64,
}

impl Counter {
    fn new(limit: i64) -> Arc<Counter> {
        Arc::new(Counter {
            in_use: AtomicI64::new(0),
            violations: AtomicU64::new(0),
            limit,
        })
    }

    fn enter(&self, permits: u64) {
        let now = self.in_use.fetch_add(permits as i64, Ordering::SeqCst) + permits as i64;
        if now > self.limit {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, permits: u64) {
        self.in_use.fetch_sub(permits as i64, Ordering::SeqCst);
    }
}

#[test]
fn permits_out_never_exceed_the_count_under_concurrent_threads() {
    let (server, _conn) = Server::started(&[]);
    let sem = Client::new(server.client()).semaphore("sem:threads");
    assert!(sem.try_set_permits(3).expect("set"));
    let counter = Counter::new(3);
    let workers: Vec<_> = (0..4u64)
        .map(|i| {
            let (sem, counter) = (sem.clone(), Arc::clone(&counter));
            thread::spawn(move || {
                // Takers of one and of two, so a wait for two must not be
                // starved by ones.
                let permits = 1 + i % 2;
                for _ in 0..20 {
                    let taken = sem.acquire(permits).expect("acquire");
                    counter.enter(permits);
                    thread::sleep(Duration::from_millis(1));
                    counter.leave(permits);
                    taken.release().expect("release");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    assert_eq!(counter.violations.load(Ordering::SeqCst), 0);
    assert_eq!(sem.available_permits().expect("available"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_out_never_exceed_the_count_under_concurrent_tasks() {
    let (server, _conn) = Server::started(&[]);
    let sem = aio::Client::new(server.client()).semaphore("sem:tasks");
    assert!(sem.try_set_permits(2).await.expect("set"));
    let counter = Counter::new(2);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (sem, counter) = (sem.clone(), Arc::clone(&counter));
            tokio::spawn(async move {
                for _ in 0..20 {
                    let taken = sem.acquire(1).await.expect("acquire");
                    counter.enter(1);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    counter.leave(1);
                    taken.release().await.expect("release");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    assert_eq!(counter.violations.load(Ordering::SeqCst), 0);
    assert_eq!(sem.available_permits().await.expect("available"), 2);
}

#[test]
fn a_wait_that_runs_out_leaves_nothing() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let sem = locks.semaphore("sem:out");
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    assert!(sem.try_acquire(1, wait).expect("try").is_none());
    assert!(started.elapsed() >= wait, "waited on the server");
    let latch = locks.count_down_latch("latch:out");
    assert!(latch.try_set_count(1).expect("set"));
    let started = Instant::now();
    assert!(!latch.wait_timeout(wait).expect("wait"));
    assert!(started.elapsed() >= wait, "waited on the server");
    nobody_waits(&mut conn);
    // Nothing parked takes what comes next.
    sem.release(1).expect("release");
    assert_eq!(sem.available_permits().expect("available"), 1);
    assert_eq!(latch.count().expect("count"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_nothing() {
    let (server, conn) = Server::started(&[]);
    let locks = aio::Client::new(server.client());
    let sem = locks.semaphore("sem:cancelled");
    let latch = locks.count_down_latch("latch:cancelled");
    assert!(latch.try_set_count(1).await.expect("set"));
    let (sem_wait, latch_wait) = (sem.clone(), latch.clone());
    let acquiring = tokio::spawn(async move { sem_wait.acquire(1).await.map(|_| ()) });
    let awaiting = tokio::spawn(async move { latch_wait.wait().await });
    let conn = tokio::task::spawn_blocking(move || {
        let mut conn = conn;
        wait_for_waiters(&mut conn, 2);
        conn
    })
    .await
    .expect("waiters");
    // Cancelled: the futures are dropped, and their connections closed.
    acquiring.abort();
    awaiting.abort();
    assert!(acquiring.await.is_err_and(|e| e.is_cancelled()));
    assert!(awaiting.await.is_err_and(|e| e.is_cancelled()));
    let mut conn = tokio::task::spawn_blocking(move || {
        let mut conn = conn;
        nobody_waits(&mut conn);
        conn
    })
    .await
    .expect("no waiter");
    // Nothing parked takes what comes next.
    sem.add_permits(1).await.expect("add");
    assert_eq!(sem.available_permits().await.expect("available"), 1);
    let count: i64 = query(&mut conn, &["LATCH.COUNT", "latch:cancelled"]);
    assert_eq!(count, 1);
}

#[test]
fn the_last_count_down_answers_every_waiter_at_once() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let latch = locks.count_down_latch("latch:all");
    assert!(latch.try_set_count(2).expect("set"));
    let waiting: Vec<_> = (0..4)
        .map(|_| {
            let latch = latch.clone();
            thread::spawn(move || latch.wait())
        })
        .collect();
    wait_for_waiters(&mut conn, 4);
    latch.count_down().expect("count down");
    assert_eq!(latch.count().expect("count"), 1);
    assert_eq!(waiters(&mut conn), 4, "not zero yet: all still wait");
    // Another client's count-down reaches zero.
    let _: () = query(&mut conn, &["LATCH.COUNTDOWN", "latch:all"]);
    for waiter in waiting {
        waiter.join().expect("waiter").expect("reached zero");
    }
    nobody_waits(&mut conn);
    assert_eq!(latch.count().expect("count"), 0);
    assert!(
        latch.wait_timeout(Duration::ZERO).expect("look"),
        "no latch: reached"
    );
    assert!(!latch.delete().expect("delete"), "gone at zero");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_waiters_are_all_answered_by_a_delete() {
    let (server, conn) = Server::started(&[]);
    let latch = aio::Client::new(server.client()).count_down_latch("latch:deleted");
    assert!(latch.try_set_count(5).await.expect("set"));
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let latch = latch.clone();
            tokio::spawn(async move { latch.wait_timeout(CEILING).await })
        })
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut conn = conn;
        wait_for_waiters(&mut conn, 3);
    })
    .await
    .expect("waiters");
    assert!(latch.delete().await.expect("delete"));
    for waiter in waiting {
        let reached = tokio::time::timeout(CEILING, waiter)
            .await
            .expect("answered in time")
            .expect("task")
            .expect("wait");
        assert!(reached, "a deleted latch is reached");
    }
    assert_eq!(latch.count().await.expect("count"), 0);
}

#[test]
fn bad_arguments_are_refused_before_anything_is_sent() {
    let (server, _conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let sem = locks.semaphore("sem:bad");
    assert!(matches!(sem.acquire(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(sem.release(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        locks.count_down_latch("").count(),
        Err(Error::InvalidArgument(_))
    ));
    // The server's own refusals pass through: a latch name with braces.
    assert!(matches!(
        locks.count_down_latch("{x}").try_set_count(1),
        Err(Error::Redis(_))
    ));
}

#[test]
fn permits_no_replica_acknowledged_are_given_back_as_not_synced() {
    let (server, _conn) = Server::started(&[]);
    // One replica expected of a master that has none: WAIT replies 0.
    let options = Options {
        sync: SyncOptions {
            replicas: Replicas::Exactly(1),
            timeout: Duration::from_millis(100),
            ..SyncOptions::default()
        },
        ..Options::default()
    };
    let locks = Client::new(server.client()).with_options(options);
    let sem = locks.semaphore("sem:unsynced");
    assert!(sem.try_set_permits(2).expect("set"));
    assert!(matches!(
        sem.try_acquire(2, Duration::ZERO),
        Err(Error::NotSynced { replicas: 1, .. })
    ));
    assert_eq!(sem.available_permits().expect("available"), 2, "given back");
    // A permit-expirable semaphore's ids are released.
    let permits = locks.permit_expirable_semaphore("permit:unsynced");
    assert!(permits.try_set_permits(2).expect("set"));
    assert!(matches!(
        permits.try_acquire(2, Duration::ZERO),
        Err(Error::NotSynced { replicas: 1, .. })
    ));
    assert_eq!(permits.available_permits().expect("available"), 2);
    assert_eq!(permits.acquired_permits().expect("acquired"), 0);
}

#[test]
fn waits_longer_than_the_response_timeout() {
    let (server, mut conn) = Server::started(&[]);
    let options = Options {
        response_timeout: Some(Duration::from_millis(200)),
        ..Options::default()
    };
    let locks = Client::new(server.client()).with_options(options);
    let sem = locks.semaphore("sem:long");
    let latch = locks.count_down_latch("latch:long");
    assert!(latch.try_set_count(1).expect("set"));
    let (waiting_sem, waiting_latch) = (sem.clone(), latch.clone());
    let taker = thread::spawn(move || waiting_sem.try_acquire(1, CEILING));
    let awaiter = thread::spawn(move || waiting_latch.wait());
    wait_for_waiters(&mut conn, 2);
    // Past the response timeout: the waits' own read timeouts cover them.
    thread::sleep(Duration::from_millis(600));
    sem.release(1).expect("release");
    latch.count_down().expect("count down");
    let taken = taker.join().expect("taker").expect("wait");
    assert_eq!(taken.map(|p| p.permits()), Some(1));
    awaiter.join().expect("awaiter").expect("reached");
}

//! The fair lock (`Client::fair_lock`, Redisson's `RFairLock` on
//! `FAIRLOCK.*`): waiters served in arrival order, a wait that runs out
//! leaves the line (the server's own timeout path) and leaves no key, a try
//! never joins it, the watchdog renews a fair hold with `LOCK.RENEW` and
//! reports it lost, re-entry and the non-reentrant fair lock, async.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{aio, Client, Error, Options};
use testkit::{all_keys, query, wait_until, Server};

/// The owners waiting in `name`'s line, in order.
fn line(conn: &mut testkit::Conn, name: &str) -> Vec<String> {
    query(
        conn,
        &[
            "LRANGE",
            &format!("redisson_lock_queue:{{{name}}}"),
            "0",
            "-1",
        ],
    )
}

fn count(conn: &mut testkit::Conn, name: &str, owner: &str) -> Option<i64> {
    query(conn, &["HGET", name, owner])
}

#[test]
fn waiters_are_served_in_arrival_order_and_leave_no_key() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let lease = Duration::from_secs(30);
    let holder = locks
        .fair_lock("fair:order")
        .with_lease(lease)
        .try_acquire(Duration::ZERO)
        .expect("holder");
    let served = Arc::new(Mutex::new(Vec::new()));
    let mut owners = Vec::new();
    let mut waiters = Vec::new();
    for number in 0..4 {
        let (lock, served) = (
            locks.fair_lock("fair:order").with_lease(lease),
            Arc::clone(&served),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        waiters.push(thread::spawn(move || {
            tx.send(lock.owner()).expect("owner");
            let guard = lock.try_acquire(Duration::from_secs(20)).expect("served");
            served.lock().expect("served").push(number);
            thread::sleep(Duration::from_millis(30));
            guard.release().expect("released");
        }));
        owners.push(rx.recv().expect("owner"));
        // Each joins the line before the next starts.
        wait_until(Duration::from_secs(10), "the waiter in line", || {
            (line(&mut conn, "fair:order").len() == number + 1).then_some(())
        });
    }
    assert_eq!(
        line(&mut conn, "fair:order"),
        owners,
        "the line is in arrival order"
    );
    holder.release().expect("released");
    for waiter in waiters {
        waiter.join().expect("waiter");
    }
    assert_eq!(*served.lock().expect("served"), vec![0, 1, 2, 3]);
    assert!(
        all_keys(&mut conn).is_empty(),
        "no lock, line, deadline or latch left"
    );
}

#[test]
fn a_wait_that_runs_out_leaves_the_line_and_a_try_never_joins_it() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let holder = locks
        .fair_lock("fair:timeout")
        .with_owner("holder:1")
        .with_lease(Duration::from_secs(30))
        .try_acquire(Duration::ZERO)
        .expect("holder");
    let waiter = locks.fair_lock("fair:timeout");
    let started = Instant::now();
    match waiter.try_acquire(Duration::from_millis(500)) {
        Err(Error::NotAcquired { pttl }) => assert!(pttl > 0 && pttl <= 30_000, "{pttl}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let took = started.elapsed();
    // Never before the 500 ms wait is over; after it by what a loaded machine
    // takes to reply.
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(
        line(&mut conn, "fair:timeout").is_empty(),
        "the server took it out of the line"
    );
    assert!(matches!(
        waiter.try_acquire(Duration::ZERO),
        Err(Error::NotAcquired { pttl: 0 })
    ));
    assert!(
        line(&mut conn, "fair:timeout").is_empty(),
        "a try never joins"
    );
    assert!(!waiter.is_held().expect("is_held"));
    holder.release().expect("released");
    assert!(
        all_keys(&mut conn).is_empty(),
        "no line, no deadlines, no latch left"
    );
}

#[test]
fn reentry_and_the_non_reentrant_fair_lock() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let lock = locks.fair_lock("fair:reentry");
    let first = lock.try_acquire(Duration::ZERO).expect("first");
    let second = lock.try_acquire(Duration::from_secs(1)).expect("re-entry");
    assert_eq!(count(&mut conn, "fair:reentry", &lock.owner()), Some(2));
    assert_eq!(first.token(), None, "no fencing tokens");
    second.release().expect("released");
    assert_eq!(count(&mut conn, "fair:reentry", &lock.owner()), Some(1));
    first.release().expect("released");
    assert!(all_keys(&mut conn).is_empty());

    let once = locks.fair_lock("fair:once").non_reentrant();
    let held = once.try_acquire(Duration::ZERO).expect("first");
    assert!(matches!(
        once.try_acquire(Duration::ZERO),
        Err(Error::NotReentrant)
    ));
    assert_eq!(count(&mut conn, "fair:once", &once.owner()), Some(1));
    held.release().expect("released");
    assert!(matches!(
        locks.fair_lock("f").fenced().try_acquire(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        locks
            .fair_lock("f")
            .with_session()
            .try_acquire(Duration::ZERO),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn the_watchdog_renews_a_fair_hold_and_reports_it_lost() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client()).with_options(Options {
        watchdog_timeout: Duration::from_secs(1),
        ..Options::default()
    });
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    let lock = locks.fair_lock("fair:watchdog");
    let guard = lock.acquire().expect("acquired");
    thread::sleep(Duration::from_millis(2_500));
    assert!(!guard.is_lost() && lock.is_held().expect("is_held"));
    let pttl: i64 = query(&mut conn, &["PTTL", "fair:watchdog"]);
    assert!(pttl > 0 && pttl <= 1000, "{pttl}");
    let info: String = query(&mut conn, &["INFO", "commandstats"]);
    assert!(
        info.contains("cmdstat_lock.renew:calls="),
        "renewed with LOCK.RENEW"
    );
    guard.release().expect("released");
    assert!(all_keys(&mut conn).is_empty());

    let guard = lock.acquire().expect("acquired");
    let forced: i64 = query(&mut conn, &["FAIRLOCK.FORCEUNLOCK", "fair:watchdog"]);
    assert_eq!(forced, 1);
    wait_until(Duration::from_secs(10), "the loss seen", || {
        guard.is_lost().then_some(())
    });
    assert!(matches!(guard.release(), Err(Error::NotHeld)));
}

#[test]
fn the_async_fair_lock_serves_in_arrival_order() {
    let (server, mut conn) = Server::started(&[]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let locks = aio::Client::new(server.client());
    let served = Arc::new(Mutex::new(Vec::new()));
    runtime.block_on(async {
        let holder = locks
            .fair_lock("fair:async")
            .try_acquire(Duration::ZERO)
            .await
            .expect("holder");
        let mut tasks = Vec::new();
        for number in 0..3 {
            let (lock, served) = (locks.fair_lock("fair:async"), Arc::clone(&served));
            tasks.push(tokio::spawn(async move {
                let guard = lock
                    .try_acquire(Duration::from_secs(20))
                    .await
                    .expect("served");
                served.lock().expect("served").push(number);
                guard.release().await.expect("released");
            }));
            while line(&mut conn, "fair:async").len() < number + 1 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        holder.release().await.expect("released");
        for task in tasks {
            task.await.expect("task");
        }
    });
    assert_eq!(*served.lock().expect("served"), vec![0, 1, 2]);
    assert!(all_keys(&mut conn).is_empty());
}

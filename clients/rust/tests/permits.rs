//! The permit-expirable semaphore (`PERMIT.*`), blocking and async, against
//! a real server with the module: a wait served by another connection's
//! release, a permit of a holder that never releases coming back at its
//! expiry and serving a waiter with no other call, the watchdog keeping a
//! lease-less permit past its timeout and stopping at the release (or
//! reporting it lost when it is gone), a cancelled wait leaving no waiter
//! on the server. (Permits no replica acknowledged: tests/semaphores.rs.)

use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{aio, Client, Error, Options};
use testkit::{command_calls, query, wait_for_waiters, wait_until, waiters, Server};

/// Generous: a busy two-core machine may be slow, never this slow.
const CEILING: Duration = Duration::from_secs(10);

/// The permit commands that ran since the statistics were reset.
fn permit_calls(conn: &mut testkit::Conn) -> Vec<String> {
    let info: String = query(conn, &["INFO", "commandstats"]);
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_permit."))
        .map(|l| l.split(',').next().unwrap_or_default().to_string())
        .collect()
}

fn with_watchdog(timeout: Duration) -> Options {
    Options {
        watchdog_timeout: timeout,
        ..Options::default()
    }
}

#[test]
fn a_wait_is_served_by_another_connections_release() {
    let (server, mut conn) = Server::started(&[]);
    let sem = Client::new(server.client())
        .permit_expirable_semaphore("permit:served")
        .with_lease(CEILING * 3);
    assert!(sem.try_set_permits(1).expect("set"));
    let first = sem
        .try_acquire(1, Duration::ZERO)
        .expect("try")
        .expect("free");
    let [id] = first.ids() else {
        panic!("one id: {:?}", first.ids())
    };
    assert_eq!(id.len(), 32, "Redisson's 16 bytes in hex: {id}");
    let waiter = {
        let sem = sem.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let taken = sem.try_acquire(1, CEILING).expect("wait");
            (taken, started.elapsed())
        })
    };
    wait_for_waiters(&mut conn, 1);
    let listed: Vec<redis::Value> = query(&mut conn, &["LOCK.WAITING"]);
    assert_eq!(listed.len(), 1, "{listed:?}");
    // Another connection releases the first permit by its id.
    let released: i64 = query(&mut conn, &["PERMIT.RELEASE", "permit:served", id]);
    assert_eq!(released, 1);
    let (taken, took) = waiter.join().expect("waiter");
    let taken = taken.expect("served, not refused");
    assert!(took < CEILING, "served at the release: {took:?}");
    assert_ne!(taken.ids(), first.ids());
    // The first guard's permit is gone: its release releases none.
    assert!(matches!(first.release(), Err(Error::NotHeld)));
    assert_eq!(sem.acquired_permits().expect("acquired"), 1);
    drop(taken);
    assert_eq!(sem.available_permits().expect("available"), 1);
    assert_eq!(sem.acquired_permits().expect("acquired"), 0);
}

#[test]
fn an_expired_permit_of_a_holder_that_never_releases_serves_a_waiter() {
    let (server, mut conn) = Server::started(&[]);
    let name = "permit:expired";
    let sem = Client::new(server.client())
        .permit_expirable_semaphore(name)
        .with_lease(CEILING * 3);
    assert!(sem.try_set_permits(1).expect("set"));
    // Warm up: the client's first acquisition asks INFO first.
    drop(
        sem.try_acquire(1, Duration::ZERO)
            .expect("try")
            .expect("free"),
    );
    // A holder that never releases: a raw acquisition with a short lease.
    let crashed: Vec<String> = query(&mut conn, &["PERMIT.ACQUIRE", name, "1", "700"]);
    assert_eq!(crashed.len(), 1);
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    let started = Instant::now();
    let taken = sem.try_acquire(1, CEILING).expect("wait");
    let took = started.elapsed();
    let taken = taken.expect("served at the expiry");
    assert!(
        took >= Duration::from_millis(300) && took < CEILING,
        "served when the crashed holder's lease ran out: {took:?}"
    );
    // Nothing but the one parked acquisition ran: the server's timer gave
    // the permit back.
    assert_eq!(permit_calls(&mut conn), vec!["acquire:calls=1".to_string()]);
    let held: i64 = query(&mut conn, &["PERMIT.LEASETIME", name, &crashed[0]]);
    assert_eq!(held, 0, "the crashed holder's permit is gone");
    taken.release().expect("release");
    assert_eq!(sem.available_permits().expect("available"), 1);
}

#[test]
fn the_watchdog_keeps_a_lease_less_permit_and_stops_at_the_release() {
    let (server, mut conn) = Server::started(&[]);
    let name = "permit:watched";
    let timeout = Duration::from_millis(600);
    let sem = Client::new(server.client())
        .with_options(with_watchdog(timeout))
        .permit_expirable_semaphore(name);
    assert!(sem.try_set_permits(3).expect("set"));
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    let taken = sem.acquire(2).expect("acquire");
    let started = Instant::now();
    // Renewed every third of the timeout, per id: six renewals are three
    // turns, past the timeout.
    wait_until(CEILING, "three renewals of both permits", || {
        (command_calls(&mut conn, "permit.updatelease") >= 6).then_some(())
    });
    assert!(started.elapsed() >= timeout * 2 / 3);
    wait_until(CEILING, "past the timeout", || {
        (started.elapsed() > timeout).then_some(())
    });
    for id in taken.ids() {
        let left = sem.lease_time(id).expect("held").expect("leased");
        assert!(left <= timeout, "{left:?}");
    }
    assert_eq!(sem.acquired_permits().expect("acquired"), 2);
    assert!(!taken.is_lost());
    taken.release().expect("release");
    let renewed = command_calls(&mut conn, "permit.updatelease");
    // The release joined the watchdog: no renewal after it, however long.
    thread::sleep(timeout);
    assert_eq!(command_calls(&mut conn, "permit.updatelease"), renewed);
    assert_eq!(sem.available_permits().expect("available"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_watchdog_reports_a_permit_released_elsewhere_lost() {
    let (server, conn) = Server::started(&[]);
    let name = "permit:lost";
    let lost = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let told = std::sync::Arc::clone(&lost);
    let sem = aio::Client::new(server.client())
        .with_options(with_watchdog(Duration::from_millis(600)))
        .permit_expirable_semaphore(name)
        .on_lost(move |hold| {
            assert_eq!(hold.names, vec![name.to_string()]);
            told.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    assert!(sem.try_set_permits(1).await.expect("set"));
    let taken = sem.acquire(1).await.expect("acquire");
    let id = taken.ids()[0].clone();
    // Released by id elsewhere: the next renewal replies 0.
    assert!(sem.try_release(&id).await.expect("try release"));
    let deadline = Instant::now() + CEILING;
    while !taken.is_lost() {
        assert!(Instant::now() < deadline, "never reported lost");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(lost.load(std::sync::atomic::Ordering::SeqCst));
    assert!(matches!(taken.release().await, Err(Error::NotHeld)));
    drop(conn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_nothing() {
    let (server, conn) = Server::started(&[]);
    let sem = aio::Client::new(server.client())
        .permit_expirable_semaphore("permit:cancelled")
        .never_expiring();
    assert!(sem.try_set_permits(1).await.expect("set"));
    let held = sem.acquire(1).await.expect("acquire");
    assert_eq!(sem.lease_time(&held.ids()[0]).await.expect("held"), None);
    let waiting = sem.clone();
    let acquiring = tokio::spawn(async move { waiting.acquire(1).await.map(|_| ()) });
    let conn = tokio::task::spawn_blocking(move || {
        let mut conn = conn;
        wait_for_waiters(&mut conn, 1);
        conn
    })
    .await
    .expect("waiter");
    // Cancelled: the future is dropped, and its connection closed.
    acquiring.abort();
    assert!(acquiring.await.is_err_and(|e| e.is_cancelled()));
    tokio::task::spawn_blocking(move || {
        let mut conn = conn;
        wait_until(CEILING, "no waiter left", || {
            (waiters(&mut conn) == 0).then_some(())
        });
        let listed: Vec<redis::Value> = query(&mut conn, &["LOCK.WAITING"]);
        assert!(listed.is_empty(), "LOCK.WAITING: {listed:?}");
    })
    .await
    .expect("no waiter");
    // Nothing parked takes the permit released next.
    held.release().await.expect("release");
    assert_eq!(sem.available_permits().await.expect("available"), 1);
    assert_eq!(sem.acquired_permits().await.expect("acquired"), 0);
}

#[test]
fn the_counts_and_ids_as_redisson_keeps_them() {
    let (server, mut conn) = Server::started(&[]);
    let name = "permit:counts";
    let sem = Client::new(server.client())
        .permit_expirable_semaphore(name)
        .never_expiring();
    sem.set_permits(3).expect("set");
    assert_eq!(sem.permits().expect("permits"), 3);
    let taken = sem
        .try_acquire(2, Duration::ZERO)
        .expect("try")
        .expect("free");
    // Members are Redisson's 16 bytes (the ids are their hex), scored as
    // Redisson scores a permit that never expires.
    let never: i64 = query(
        &mut conn,
        &[
            "ZCOUNT",
            "{permit:counts}:timeout",
            "922337203685477",
            "922337203685477",
        ],
    );
    assert_eq!(never, 2);
    assert!(sem
        .update_lease_time(&taken.ids()[1], Some(CEILING))
        .expect("update"));
    let left = sem
        .lease_time(&taken.ids()[1])
        .expect("held")
        .expect("leased");
    assert!(left <= CEILING && left > Duration::ZERO, "{left:?}");
    // All or none: one id not held releases nothing.
    let ids = [taken.ids()[0].as_str(), "00000000000000000000000000000000"];
    assert!(matches!(sem.release(&ids), Err(Error::NotHeld)));
    assert_eq!(sem.acquired_permits().expect("acquired"), 2);
    assert!(matches!(
        sem.lease_time("00000000000000000000000000000000"),
        Err(Error::NotHeld)
    ));
    sem.add_permits(-1).expect("add");
    assert_eq!(sem.available_permits().expect("available"), 0);
    assert_eq!(sem.permits().expect("permits"), 2);
    taken.release().expect("release");
    assert_eq!(sem.available_permits().expect("available"), 2);
    assert!(matches!(
        sem.release::<&str>(&[]),
        Err(Error::InvalidArgument(_))
    ));
}

//! The multi-lock (`LOCK.ACQUIREALL`, `LOCK.UNLOCKALL`, `LOCK.RENEWALL`):
//! all holds or none, waiting on the server past the response timeout, the
//! watchdog renewing them all and finding one gone. Blocking and async.
//! The commands must be in the module under test: on one without them
//! these tests fail.

use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{aio, Client, Error, Options};
use testkit::{query, wait_until, Server};

fn one_second_watchdog() -> Options {
    Options {
        watchdog_timeout: Duration::from_secs(1),
        response_timeout: Some(Duration::from_millis(500)),
        ..Options::default()
    }
}

fn exists(conn: &mut testkit::Conn, key: &str) -> bool {
    query(conn, &["EXISTS", key])
}

#[test]
fn a_multi_lock_takes_all_or_nothing_and_releases_all() {
    let (server, mut conn) = Server::started(&[]);
    let a = Client::new(server.client());
    let b = Client::new(server.client());
    let multi = a.multi_lock().lock("m:a").write("m:b").read("m:c");
    let held = multi.acquire().expect("all three");
    for key in ["m:a", "m:b", "m:c"] {
        assert!(exists(&mut conn, key), "{key} taken");
    }
    // Another owner: refused as a whole, nothing of it taken.
    let rival = b.multi_lock().lock("m:free").read("m:b");
    match rival.try_acquire(Duration::ZERO) {
        Err(Error::NotAcquired { pttl }) => assert!(pttl > 0, "{pttl}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!exists(&mut conn, "m:free"), "nothing taken in part");
    // Readers share with the multi-lock's read hold.
    let _reader = b
        .read_write_lock("m:c")
        .try_read(Duration::ZERO)
        .expect("shared read");
    held.release().expect("every hold was held");
    for key in ["m:a", "m:b"] {
        assert!(!exists(&mut conn, key), "{key} released");
    }
    assert!(matches!(
        a.multi_lock().acquire(),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_multi_lock_waits_on_the_server_and_its_watchdog_renews_all() {
    let (server, mut conn) = Server::started(&[]);
    let holder = Client::new(server.client()).with_options(one_second_watchdog());
    let waiter = Client::new(server.client()).with_options(one_second_watchdog());
    let blocker = holder.lock("w:a").acquire().expect("lock");
    let release = thread::spawn(move || {
        thread::sleep(Duration::from_millis(1_200));
        drop(blocker);
    });
    let start = Instant::now();
    let held = waiter
        .multi_lock()
        .lock("w:a")
        .write("w:b")
        .try_acquire(Duration::from_secs(5))
        .expect("waited past the 0.5 s response timeout");
    assert!(start.elapsed() >= Duration::from_millis(1_000));
    release.join().expect("releaser");
    thread::sleep(Duration::from_millis(3_500));
    for key in ["w:a", "w:b"] {
        let pttl: i64 = query(&mut conn, &["PTTL", key]);
        assert!(pttl > 0 && pttl <= 1_000, "{key} renewed: PTTL {pttl}");
    }
    assert!(!held.is_lost());
    let _: i64 = query(&mut conn, &["DEL", "w:b"]);
    // Found at the next renewal, a third of the lease away (later on a loaded
    // machine).
    wait_until(
        Duration::from_secs(10),
        "one hold gone: the multi-lock lost",
        || held.is_lost().then_some(()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_multi_lock() {
    let (server, mut conn) = Server::started(&[]);
    let locks = aio::Client::new(server.client()).with_options(one_second_watchdog());
    let held = locks
        .multi_lock()
        .lock("am:a")
        .write("am:b")
        .acquire()
        .await
        .expect("multi-lock");
    let rival = aio::Client::new(server.client());
    let refused = rival.lock("am:a").try_acquire(Duration::ZERO).await;
    assert!(
        matches!(refused, Err(Error::NotAcquired { .. })),
        "{refused:?}"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        exists(&mut conn, "am:a") && exists(&mut conn, "am:b"),
        "renewed"
    );
    held.release().await.expect("release");
    assert!(!exists(&mut conn, "am:a") && !exists(&mut conn, "am:b"));
}

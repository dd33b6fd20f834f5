//! The async client (tokio) against a real server with the module: each
//! lock kind, waits longer than the response timeout on a multiplexed
//! connection, the watchdog task keeping a 1 s lease and finding the hold
//! gone, and guards released on drop by a spawned task.

use std::time::{Duration, Instant};

use rwlock_client::aio::Client;
use rwlock_client::{Error, Options};
use testkit::{all_keys, query, rwlock_counter, wait_until, Server};

fn locks(server: &Server, options: Options) -> Client {
    Client::new(server.client()).with_options(options)
}

fn refused<T: std::fmt::Debug>(attempt: Result<T, Error>) -> i64 {
    match attempt {
        Err(Error::NotAcquired { pttl }) => pttl,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_lock() {
    let (server, mut conn) = Server::started(&[]);
    let a = locks(&server, Options::default());
    let b = locks(&server, Options::default());

    let rw = a.read_write_lock("orders");
    let read = rw.read().await.expect("read");
    let shared = b
        .read_write_lock("orders")
        .try_read(Duration::ZERO)
        .await
        .expect("shared");
    assert!(refused(b.read_write_lock("orders").try_write(Duration::ZERO).await) > 0);
    assert!(
        refused(rw.try_write(Duration::ZERO).await) > 0,
        "no upgrade"
    );
    read.release().await.expect("release");
    shared.release().await.expect("release");
    let write = rw.clone().fenced().write().await.expect("write");
    let again = rw
        .clone()
        .fenced()
        .try_write(Duration::ZERO)
        .await
        .expect("re-entry");
    assert!(again.token() > write.token(), "tokens grow");
    drop(again);
    drop(write);

    let fenced = a.fenced_lock("invoice");
    let first = fenced
        .acquire()
        .await
        .expect("lock")
        .token()
        .expect("token");
    let second = fenced
        .acquire()
        .await
        .expect("lock")
        .token()
        .expect("token");
    assert!(second > first);

    let plain = a.lock("job");
    let held = plain.acquire().await.expect("lock");
    let reentered = plain
        .clone()
        .try_acquire(Duration::ZERO)
        .await
        .expect("same handle");
    assert!(
        refused(a.lock("job").try_acquire(Duration::ZERO).await) > 0,
        "another handle"
    );
    assert_eq!(held.owner(), plain.owner());
    drop(reentered);
    drop(held);

    let strict = a.lock("strict").non_reentrant();
    let _held = strict.acquire().await.expect("lock");
    let again = strict.try_acquire(Duration::ZERO).await;
    assert!(matches!(&again, Err(Error::NotReentrant)), "{again:?}");
    drop(_held);

    // Dropped guards are released by spawned tasks, a handle's one after
    // the other (each says the owner's count): the locks must be gone, and
    // no latch written (a fenced lock's counter stays, as Redisson's).
    wait_until(Duration::from_secs(10), "every guard released", || {
        all_keys(&mut conn)
            .iter()
            .all(|k| k.starts_with("redisson_lock_token"))
            .then_some(())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_longer_than_the_response_timeout_works() {
    let server = Server::start(&[]);
    let options = Options {
        response_timeout: Some(Duration::from_millis(500)),
        ..Options::default()
    };
    let holder = locks(&server, options.clone());
    let waiter = locks(&server, options);
    let held = holder.read_write_lock("slow").write().await.expect("write");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        held.release().await.expect("release");
    });
    let start = Instant::now();
    // Served at the release, 1.5 s on; a wait of 5 s leaves a loaded machine
    // room to be late with it.
    let got = waiter
        .read_write_lock("slow")
        .try_read(Duration::from_secs(5))
        .await;
    assert!(got.is_ok(), "{got:?}");
    assert!(start.elapsed() >= Duration::from_millis(1_300));
    release.await.expect("releaser");
    drop(got);

    let held = holder.lock("forever").acquire().await.expect("lock");
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        drop(held);
    });
    let start = Instant::now();
    let got = waiter.lock("forever").acquire().await;
    assert!(
        got.is_ok() && start.elapsed() >= Duration::from_millis(1_000),
        "{got:?}"
    );
    release.await.expect("releaser");

    let _busy = holder.lock("busy").acquire().await.expect("lock");
    let start = Instant::now();
    let pttl = refused(
        waiter
            .lock("busy")
            .try_acquire(Duration::from_millis(800))
            .await,
    );
    assert!(pttl > 0 && start.elapsed() >= Duration::from_millis(750));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_task_keeps_a_one_second_lease_and_finds_it_gone() {
    let (server, mut conn) = Server::started(&[]);
    let options = Options {
        watchdog_timeout: Duration::from_secs(1),
        ..Options::default()
    };
    let locks = locks(&server, options);
    let plain = locks.lock("long-task").acquire().await.expect("lock");
    let (told, mut lost) = tokio::sync::mpsc::unbounded_channel();
    let write = locks
        .read_write_lock("long-rw")
        .on_lost(move |hold| told.send(hold.clone()).expect("the test listens"))
        .write()
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    for name in ["long-task", "long-rw"] {
        let pttl: i64 = query(&mut conn, &["PTTL", name]);
        assert!(pttl > 0 && pttl <= 1_000, "{name}: PTTL {pttl}");
    }
    assert!(!plain.is_lost() && !write.is_lost());
    assert!(rwlock_counter(&mut conn, "renewals") >= 10);

    let _: i64 = query(&mut conn, &["LOCK.FORCEUNLOCK", "long-task"]);
    let _: i64 = query(&mut conn, &["DEL", "long-rw"]);
    // Found at the next renewal, a third of the lease away (later on a loaded
    // machine).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(plain.is_lost() && write.is_lost()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(plain.is_lost() && write.is_lost(), "both found gone");
    let hold = lost.try_recv().expect("on_lost called");
    assert_eq!(hold.names, vec!["long-rw".to_string()]);
    assert_eq!(hold.owner, write.owner());
    assert!(
        matches!(plain.release().await, Err(Error::NotHeld)),
        "nothing left to release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_asks_the_server_whether_it_holds_and_unlocks_without_a_guard() {
    let (server, _conn) = Server::started(&[]);
    let locks = locks(&server, Options::default());
    let lease = Duration::from_secs(10);
    let plain = locks.lock("asked").with_lease(lease);
    assert!(!plain.is_held().await.expect("is_held"));
    // A guard out of reach (forgotten): the lock's own release frees it.
    std::mem::forget(plain.acquire().await.expect("lock"));
    assert!(plain.is_held().await.expect("is_held"));
    assert!(
        !locks.lock("asked").is_held().await.expect("is_held"),
        "another handle is another owner"
    );
    plain.unlock().await.expect("unlock");
    assert!(!plain.is_held().await.expect("is_held"));
    assert!(matches!(plain.unlock().await, Err(Error::NotHeld)));

    let rw = locks.read_write_lock("asked-rw").with_lease(lease);
    std::mem::forget(rw.write().await.expect("write"));
    assert!(rw.is_write_held().await.expect("is_write_held"));
    assert!(!rw.is_read_held().await.expect("is_read_held"));
    rw.unlock_write().await.expect("unlock_write");
    assert!(matches!(rw.unlock_read().await, Err(Error::NotHeld)));

    let multi = locks
        .multi_lock()
        .lock("m-a")
        .write("m-b")
        .with_lease(lease);
    std::mem::forget(multi.acquire().await.expect("both"));
    assert!(multi.is_held().await.expect("is_held"));
    multi.unlock().await.expect("unlock");
    assert!(!multi.is_held().await.expect("is_held"));
}

/// A handle's clones share its owner, so their holds re-enter each other
/// and each acquisition and release says the owner's count (`HELD`): used
/// from several tasks at once (and guards dropped together, released by
/// spawned tasks), their calls on the lock take turns, so no count sent is
/// stale and every release releases: the lock ends free, each release Ok.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handles_clones_used_at_once_take_turns() {
    let (server, mut conn) = Server::started(&[]);
    let lock = locks(&server, Options::default())
        .lock("clones")
        .with_lease(Duration::from_secs(30));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let lock = lock.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    let outer = lock.acquire().await?;
                    let inner = lock.try_acquire(Duration::ZERO).await?;
                    inner.release().await?;
                    outer.release().await?;
                    // Dropped together: two spawned releases.
                    drop((lock.acquire().await?, lock.acquire().await?));
                }
                Ok::<_, Error>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task").expect("every cycle");
    }
    wait_until(Duration::from_secs(30), "every guard released", || {
        all_keys(&mut conn).is_empty().then_some(())
    });
    assert!(!lock.is_held().await.expect("is_held"));
}

//! What a lock cycle costs the server (issue 35): once the client knows the
//! master, an acquisition and its release open no connection and send two
//! commands, the acquiring one and the release (each saying the owner's
//! count, `HELD`: no latch to delete), nothing else; blocking and async,
//! waiting and not. A
//! cancelled async wait closes its connection (the server drops the
//! waiter), and the next acquisition still works.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Value;
use rwlock_client::{aio, Client};
use testkit::{command_calls, info_field, query, wait_for_waiters, wait_until, waiters, Server};

const CYCLES: usize = 20;

/// `INFO commandstats` as command -> calls, without what the test itself
/// sends (INFO, CONFIG).
fn calls(conn: &mut testkit::Conn) -> BTreeMap<String, u64> {
    let info: String = query(conn, &["INFO", "commandstats"]);
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let n = rest.split(',').next()?.parse().ok()?;
            Some((name.to_string(), n))
        })
        .filter(|(name, _)| !name.starts_with("info") && !name.starts_with("config"))
        .collect()
}

fn connections(conn: &mut testkit::Conn) -> u64 {
    info_field(conn, "stats", "total_connections_received")
        .and_then(|n| n.parse().ok())
        .expect("total_connections_received")
}

/// Resets the server's counters: the cycles after it are counted alone.
fn reset(conn: &mut testkit::Conn) {
    let _: () = query(conn, &["CONFIG", "RESETSTAT"]);
}

/// The commands `CYCLES` cycles must have sent, nothing else:
/// `LOCK.ACQUIRE` and `LOCK.UNLOCK` once each.
fn assert_two_requests_a_cycle(conn: &mut testkit::Conn, opened_before: u64) {
    let n = CYCLES as u64;
    let expected: BTreeMap<String, u64> = [("lock.acquire", n), ("lock.unlock", n)]
        .into_iter()
        .map(|(c, n)| (c.to_string(), n))
        .collect();
    assert_eq!(calls(conn), expected, "the commands of {CYCLES} cycles");
    assert_eq!(connections(conn), opened_before, "no connection opened");
}

#[test]
fn a_blocking_cycle_reuses_its_connection() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let lock = locks.lock("c:blocking");
    // The first cycle connects and learns the master (INFO).
    lock.acquire().expect("acquire").release().expect("release");
    reset(&mut conn);
    let opened = connections(&mut conn);
    for i in 0..CYCLES {
        let guard = if i % 2 == 0 {
            lock.acquire()
        } else {
            lock.try_acquire(Duration::ZERO)
        };
        guard.expect("acquire").release().expect("release");
    }
    assert_two_requests_a_cycle(&mut conn, opened);
}

/// A connection to `server` in `MONITOR` mode.
fn monitor(server: &Server) -> testkit::Conn {
    let mut monitor = server.conn();
    monitor
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    monitor
        .send_packed_command(&redis::cmd("MONITOR").get_packed_command())
        .expect("MONITOR");
    assert_eq!(monitor.recv_response().expect("MONITOR"), Value::Okay);
    monitor
}

/// The next `n` lock commands (`LOCK.*`) a `MONITOR` connection sees, as
/// their quoted words.
fn monitored(monitor: &mut testkit::Conn, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let line = match monitor.recv_response().expect("a MONITOR line") {
            Value::SimpleString(line) => line,
            other => panic!("{other:?}"),
        };
        // `<time> [<db> <address>] "WORD" "WORD"...`
        let words = line.split_once("] ").map_or(line.as_str(), |(_, w)| w);
        if words.starts_with("\"LOCK.") {
            seen.push(words.to_string());
        }
    }
    seen
}

/// What a cycle sends, word for word: each acquisition and release says
/// the owner's count before it (`HELD n`), re-entered ones too; a
/// multi-lock's and a session's say nothing.
#[test]
fn a_cycle_says_the_owners_count_and_nothing_else() {
    let (server, _conn) = Server::started(&[]);
    let locks = Client::new(server.client());
    let lock = locks.lock("c:held").with_lease(Duration::from_secs(10));
    lock.acquire().expect("acquire").release().expect("release");
    let mut monitor = monitor(&server);
    let outer = lock.acquire().expect("acquire");
    let inner = lock.acquire().expect("re-entry");
    inner.release().expect("release");
    outer.release().expect("release");
    let multi = locks
        .multi_lock()
        .lock("{c}:a")
        .with_lease(Duration::from_secs(10));
    multi.acquire().expect("multi").release().expect("release");
    lock.try_acquire(Duration::ZERO)
        .expect("a try")
        .release()
        .expect("release");
    let session = locks.lock("c:session").with_session();
    session
        .try_acquire(Duration::ZERO)
        .expect("a session's")
        .release()
        .expect("release");
    let owner = lock.owner();
    let quoted = |words: &str| {
        words
            .replace("OWNER", &owner)
            .split(' ')
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let expected: Vec<String> = [
        "LOCK.ACQUIRE c:held OWNER 10000 BLOCK 0 HELD 0",
        "LOCK.ACQUIRE c:held OWNER 10000 BLOCK 0 HELD 1",
        "LOCK.UNLOCK c:held OWNER LEASE 10000 HELD 2",
        "LOCK.UNLOCK c:held OWNER LEASE 10000",
        "LOCK.ACQUIREALL OWNER 10000 BLOCK 0 HOLDS 1 LOCK {c}:a",
        "LOCK.UNLOCKALL OWNER HOLDS 1 LOCK {c}:a",
        "LOCK.ACQUIRE c:held OWNER 10000 HELD 0",
        "LOCK.UNLOCK c:held OWNER LEASE 10000",
        "LOCK.ACQUIRE c:session OWNER 30000 SESSION",
        "LOCK.UNLOCK c:session OWNER LEASE 30000",
    ]
    .iter()
    .map(|w| quoted(w))
    .collect();
    assert_eq!(monitored(&mut monitor, expected.len()), expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_cycle_reuses_its_connection() {
    let (server, mut conn) = Server::started(&[]);
    let locks = aio::Client::new(server.client());
    let lock = locks.lock("c:async");
    let first = lock.acquire().await.expect("acquire");
    first.release().await.expect("release");
    reset(&mut conn);
    let opened = connections(&mut conn);
    for i in 0..CYCLES {
        let guard = if i % 2 == 0 {
            lock.acquire().await
        } else {
            lock.try_acquire(Duration::ZERO).await
        };
        guard.expect("acquire").release().await.expect("release");
    }
    assert_two_requests_a_cycle(&mut conn, opened);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_closes_its_connection_and_leaves_nothing() {
    let (server, mut conn) = Server::started(&[]);
    let locks = aio::Client::new(server.client());
    let holder = locks.lock("c:cancel");
    let held = holder.acquire().await.expect("held");
    let waiter = locks.lock("c:cancel");
    let blocked = |conn: &mut testkit::Conn| -> u64 {
        info_field(conn, "clients", "blocked_clients")
            .and_then(|n| n.parse().ok())
            .expect("blocked_clients")
    };
    let wait = tokio::spawn(async move { waiter.acquire().await.map(|_| ()) });
    wait_until(Duration::from_secs(10), "the waiter parked", || {
        (blocked(&mut conn) == 1).then_some(())
    });
    wait.abort();
    assert!(wait.await.expect_err("aborted").is_cancelled());
    wait_until(Duration::from_secs(10), "the waiter gone", || {
        (blocked(&mut conn) == 0).then_some(())
    });
    held.release().await.expect("release");
    // The pool gave nothing broken back: the lock is free for anyone.
    let again = locks.lock("c:cancel").try_acquire(Duration::ZERO).await;
    again.expect("free").release().await.expect("release");
    assert!(!holder.is_held().await.expect("is_held"));
}

/// A lock this client already waits for on the server is taken: a second
/// acquisition that may wait goes straight to waiting (one `LOCK.ACQUIRE`,
/// where the first sent a refused try and then its wait), and they are
/// served in turn. Once no wait is left, an acquisition tries first again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_behind_a_wait_of_the_same_client_skips_the_try() {
    let (server, mut conn) = Server::started(&[]);
    let locks = aio::Client::new(server.client());
    let held = locks.lock("c:line").acquire().await.expect("held");
    reset(&mut conn);
    let first = locks.lock("c:line");
    let first = tokio::spawn(async move { first.acquire().await.map(|g| g.owner().to_string()) });
    wait_for_waiters(&mut conn, 1);
    let second = locks.lock("c:line");
    let second = tokio::spawn(async move { second.acquire().await.map(|g| g.owner().to_string()) });
    wait_for_waiters(&mut conn, 2);
    assert_eq!(
        command_calls(&mut conn, "lock.acquire"),
        3,
        "the first waiter's try and wait, the second's wait"
    );
    held.release().await.expect("release");
    first.await.expect("first").expect("first served");
    second.await.expect("second").expect("second served");
    assert_eq!(waiters(&mut conn), 0);
    // The second's guard, dropped in its task, is released by a task of
    // its own: done once the lock is gone.
    wait_until(Duration::from_secs(10), "the line's last release", || {
        (query::<i64, &str>(&mut conn, &["EXISTS", "c:line"]) == 0).then_some(())
    });
    // No wait left: a free lock is taken by one try on the shared
    // connection, no `BLOCK`.
    let mut monitor = monitor(&server);
    let lock = locks.lock("c:free");
    lock.acquire()
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    let seen = monitored(&mut monitor, 2);
    assert!(
        seen[0].starts_with("\"LOCK.ACQUIRE\" \"c:free\"") && !seen[0].contains("\"BLOCK\""),
        "{seen:?}"
    );
}

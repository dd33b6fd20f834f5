//! The replica check after an acquisition: on a master with a replica the
//! lock is acknowledged by it (`WAIT`); when the replica does not answer,
//! the lock is released and the acquisition fails, as Redisson's
//! `checkLockSyncedSlaves` does; on a master without replicas nothing is
//! waited for; and it can be turned off.

use std::time::{Duration, Instant};

use rwlock_client::{asynchronous, Error, Locks, Options, SyncOptions};
use testkit::{all_keys, Server};

/// How many times the server ran `command` (INFO commandstats).
fn calls(conn: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The replicas the master's `ROLE` lists.
fn replicas_of(conn: &mut redis::Connection) -> usize {
    let role: redis::Value = redis::cmd("ROLE").query(conn).expect("ROLE");
    match role {
        redis::Value::Array(items) => match items.get(2) {
            Some(redis::Value::Array(replicas)) => replicas.len(),
            _ => 0,
        },
        _ => 0,
    }
}

fn options(timeout_ms: u64, aof: bool) -> Options {
    Options {
        sync: SyncOptions {
            enabled: true,
            timeout: Duration::from_millis(timeout_ms),
            aof,
        },
        ..Options::default()
    }
}

#[test]
fn without_replicas_nothing_is_waited_for() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Locks::new(server.client()).with_options(options(1_000, false));
    let _held = locks.lock("alone").acquire().expect("lock");
    assert_eq!(calls(&mut conn, "wait"), 0, "no WAIT without replicas");
    assert_eq!(calls(&mut conn, "role"), 1, "ROLE asked once");
}

#[test]
fn a_replica_acknowledges_the_lock_and_a_frozen_one_makes_it_fail() {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = master.start_replica(&[]);
    let mut conn = master.conn();
    let locks = Locks::new(master.client()).with_options(options(300, false));
    let waits = calls(&mut conn, "wait");

    let held = locks.lock("synced").acquire().expect("lock");
    let rw = locks.read_write_lock("synced-rw").write().expect("write");
    assert_eq!(
        calls(&mut conn, "wait"),
        waits + 2,
        "each acquisition waited"
    );
    let mut on_replica = replica.conn();
    let exists: bool = redis::cmd("EXISTS")
        .arg("synced")
        .query(&mut on_replica)
        .expect("EXISTS");
    assert!(exists, "the replica has the lock");
    drop((held, rw));

    // WAITAOF: where the server lacks it (Redis 7.0) the client falls back
    // to WAIT; where it has it, the replica without an AOF never confirms.
    let aof = Locks::new(master.client()).with_options(options(300, true));
    let with_aof = aof.lock("aof").acquire();
    let has_waitaof = calls(&mut conn, "waitaof") > 0;
    if has_waitaof {
        assert!(
            matches!(with_aof, Err(Error::NotSynced { .. })),
            "{with_aof:?}"
        );
        // A replica writing an AOF (fsync on every write) confirms it.
        let aof_replica = master.start_replica(&["--appendonly", "yes", "--appendfsync", "always"]);
        // It confirms only once it is attached (start_replica returns once
        // one replica acknowledges) and has written its first AOF (a
        // rewrite after the sync).
        testkit::wait_until(Duration::from_secs(10), "both replicas online", || {
            (replicas_of(&mut conn) == 2).then_some(())
        });
        let mut on_aof_replica = aof_replica.conn();
        testkit::wait_until(Duration::from_secs(10), "the replica's AOF written", || {
            let mut info = |field| testkit::info_field(&mut on_aof_replica, "persistence", field);
            let done = info("aof_rewrite_in_progress").as_deref() == Some("0")
                && info("aof_rewrite_scheduled").as_deref() == Some("0")
                && info("aof_last_bgrewrite_status").as_deref() == Some("ok")
                && info("aof_enabled").as_deref() == Some("1");
            done.then_some(())
        });
        // Valkey's replicas report their fsynced offset a second or two
        // later, not when asked: a longer sync timeout.
        let patient = Locks::new(master.client()).with_options(options(5_000, true));
        let confirmed = patient.lock("aof").acquire();
        assert!(confirmed.is_ok(), "{confirmed:?}");
        drop(confirmed);
        drop(aof_replica);
        testkit::wait_until(Duration::from_secs(5), "the AOF replica gone", || {
            (replicas_of(&mut conn) == 1).then_some(())
        });
    } else {
        assert!(with_aof.is_ok(), "fell back to WAIT: {with_aof:?}");
    }
    drop(with_aof);

    // A frozen replica acknowledges nothing: the lock is released again,
    // also when it was handed over after a wait on the server.
    let blocker = locks.lock("handed-over").acquire().expect("lock");
    replica.signal("STOP");
    let waiter = {
        let locks = Locks::new(master.client()).with_options(options(300, false));
        std::thread::spawn(move || {
            locks
                .lock("handed-over")
                .try_acquire(Duration::from_secs(5))
        })
    };
    testkit::wait_until(Duration::from_secs(5), "the waiter parked", || {
        (testkit::rwlock_counter(&mut conn, "waiters") == 1).then_some(())
    });
    drop(blocker);
    let handed_over = waiter.join().expect("waiter");
    assert!(
        matches!(handed_over, Err(Error::NotSynced { .. })),
        "{handed_over:?}"
    );
    let start = Instant::now();
    let attempt = locks.lock("unsynced").acquire();
    let async_attempt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let locks = asynchronous::Locks::new(master.client()).with_options(options(300, false));
            locks
                .read_write_lock("unsynced-async")
                .write()
                .await
                .map(|_| ())
        });
    replica.signal("CONT");
    match attempt {
        Err(Error::NotSynced { replicas, waited }) => {
            assert_eq!((replicas, waited), (1, Duration::from_millis(300)));
        }
        other => panic!("expected NotSynced, got {other:?}"),
    }
    assert!(
        matches!(async_attempt, Err(Error::NotSynced { .. })),
        "{async_attempt:?}"
    );
    assert!(
        start.elapsed() >= Duration::from_millis(600),
        "waited 300 ms each"
    );
    assert!(
        all_keys(&mut conn).is_empty(),
        "both released again: {:?}",
        all_keys(&mut conn)
    );

    // Turned off, nothing is waited for.
    let unchecked = Locks::new(master.client()).with_options(Options {
        sync: SyncOptions {
            enabled: false,
            ..SyncOptions::default()
        },
        ..Options::default()
    });
    let waits = calls(&mut conn, "wait");
    let _held = unchecked.lock("unchecked").acquire().expect("lock");
    assert_eq!(calls(&mut conn, "wait"), waits);
}

//! The replica check after an acquisition: on a master with a replica the
//! lock is acknowledged by it (`WAIT`); when the replica does not answer,
//! the lock is released and the acquisition fails, as Redisson's
//! `checkLockSyncedSlaves` does; on a master without replicas nothing is
//! waited for; a master writing an AOF confirms its fsync (`WAITAOF 1 0`);
//! and it can be turned off.

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
    let locks = Locks::new(server.client()).with_options(options(1_000, true));
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .expect("RESETSTAT");
    let _held = locks.lock("alone").acquire().expect("lock");
    // Read first: each INFO commandstats below counts as an INFO too.
    assert_eq!(calls(&mut conn, "info"), 1, "INFO asked once");
    assert_eq!(calls(&mut conn, "wait"), 0, "no WAIT without replicas");
    assert_eq!(calls(&mut conn, "waitaof"), 0, "no WAITAOF without an AOF");
}

#[test]
fn a_master_writing_an_aof_confirms_its_fsync() {
    let (server, mut conn) = Server::started(&["--appendonly", "yes"]);
    // Redis 7.0 lacks WAITAOF (COMMAND INFO replies nil for it): there the
    // client's WAITAOF is refused as unknown and WAIT alone is the check.
    let known: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("WAITAOF")
        .query(&mut conn)
        .expect("COMMAND INFO");
    let has_waitaof = known.first().is_some_and(|v| *v != redis::Value::Nil);
    let before = calls(&mut conn, "waitaof");
    let locks = Locks::new(server.client()).with_options(options(1_000, true));
    let held = locks.lock("durable").acquire();
    assert!(held.is_ok(), "{held:?}");
    let sent = calls(&mut conn, "waitaof") - before;
    assert_eq!(
        sent,
        u64::from(has_waitaof),
        "WAITAOF where the server has it"
    );
    drop(held);
    // Turned off, nothing is waited for.
    let quick = Locks::new(server.client()).with_options(options(1_000, false));
    let _held = quick.lock("quick").acquire().expect("lock");
    assert_eq!(calls(&mut conn, "waitaof") - before, sent);
}

#[test]
fn a_replica_acknowledges_the_lock_and_a_frozen_one_makes_it_fail() {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = master.start_replica(&[]);
    let mut conn = master.conn();
    // A live replica acknowledges well within 2 s, however loaded the
    // machine; the frozen one below is given 300 ms.
    let synced = Locks::new(master.client()).with_options(options(2_000, false));
    let locks = Locks::new(master.client()).with_options(options(300, false));
    let waits = calls(&mut conn, "wait");

    let held = synced.lock("synced").acquire().expect("lock");
    let rw = synced.read_write_lock("synced-rw").write().expect("write");
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

    // A frozen replica acknowledges nothing: the lock is released again,
    // also when it was handed over after a wait on the server.
    let blocker = synced.lock("handed-over").acquire().expect("lock");
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

//! The replica check after an acquisition: on a master with a replica the
//! lock is acknowledged by it (`WAIT`); when the replica does not answer,
//! the lock is released and the acquisition fails, as Redisson's
//! `checkLockSyncedSlaves` does; a master that lost its replica since the
//! client learned of it fails acquisitions instead of acknowledging them
//! with nobody (the paused-master failover in miniature), and so does a
//! promoted replica the same client is pointed at; a master refusing
//! writes for want of replicas (`min-replicas-to-write`) fails them too; on
//! a master without replicas nothing is waited for, and an acquire-release
//! cycle is two round trips; a master writing an AOF confirms its fsync
//! (`WAITAOF 1 0`); and it can be turned off.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{aio, Aof, Client, Error, Options, Replicas, SyncOptions};
use testkit::{all_keys, info_field, query, wait_until, Server};

/// How many times the server ran `command` (INFO commandstats).
fn calls(conn: &mut testkit::Conn, command: &str) -> u64 {
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
            timeout: Duration::from_millis(timeout_ms),
            aof: if aof { Aof::Auto } else { Aof::Off },
            ..SyncOptions::default()
        },
        ..Options::default()
    }
}

fn replicas(n: usize) -> Options {
    Options {
        sync: SyncOptions {
            replicas: Replicas::Exactly(n),
            ..SyncOptions::default()
        },
        ..Options::default()
    }
}

/// A TCP proxy counting round trips: a round trip begins each time the
/// client sends after the server last spoke (or first), however many
/// commands (a pipeline) and TCP reads that send takes.
struct TurnProxy {
    port: u16,
    turns: Arc<AtomicU64>,
}

impl TurnProxy {
    fn start(server_port: u16) -> TurnProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let turns = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&turns);
        // Lives as long as the test process: each test starts its own.
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let upstream = TcpStream::connect(("127.0.0.1", server_port)).expect("upstream");
                // Per connection: did the server speak since the client last did?
                let answered = Arc::new(AtomicBool::new(true));
                let (mut from_client, mut to_server) = (
                    client.try_clone().expect("clone"),
                    upstream.try_clone().expect("clone"),
                );
                let (turns, asked) = (Arc::clone(&counted), Arc::clone(&answered));
                thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from_client.read(&mut buf) {
                        if asked.swap(false, Ordering::SeqCst) {
                            turns.fetch_add(1, Ordering::SeqCst);
                        }
                        if to_server.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown(Shutdown::Both);
                });
                let (mut from_server, mut to_client) = (upstream, client);
                thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = from_server.read(&mut buf) {
                        // Set before the reply is passed on: the client's
                        // next send comes after it.
                        answered.store(true, Ordering::SeqCst);
                        if to_client.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to_client.shutdown(Shutdown::Both);
                });
            }
        });
        TurnProxy { port, turns }
    }

    /// A client through the proxy that sends no `CLIENT SETINFO` when it
    /// connects: redis-rs otherwise pipelines it on every new connection,
    /// one round trip more, which is the connection's, not the lock's (the
    /// cycles reuse their connections: tests/connections.rs).
    fn client(&self) -> redis::Client {
        let url = format!("redis://127.0.0.1:{}/", self.port);
        let info = redis::IntoConnectionInfo::into_connection_info(url.as_str()).expect("url");
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        redis::Client::open(info.set_redis_settings(settings)).expect("client")
    }

    fn turns(&self) -> u64 {
        self.turns.load(Ordering::SeqCst)
    }
}

#[test]
fn without_replicas_nothing_is_waited_for() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client()).with_options(options(1_000, true));
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut conn)
        .expect("RESETSTAT");
    let held = locks.lock("alone").acquire().expect("lock");
    drop(held);
    let _held = locks.lock("alone").acquire().expect("lock");
    // Read first: each INFO commandstats below counts as an INFO too.
    assert_eq!(
        calls(&mut conn, "info"),
        1,
        "INFO asked once, before the first acquisition"
    );
    assert_eq!(calls(&mut conn, "wait"), 0, "no WAIT without replicas");
    assert_eq!(calls(&mut conn, "waitaof"), 0, "no WAITAOF without an AOF");
}

/// Round trips counted by a proxy between the client and the server: after
/// the first acquisition on a master (which asks its INFO once), an
/// uncontended acquire-release cycle is the acquisition's round trip and
/// the release's, one command each (no latch to delete), in both clients;
/// the connection's set-up aside (see `TurnProxy::client`).
#[test]
fn an_uncontended_cycle_is_two_round_trips() {
    let (server, mut conn) = Server::started(&[]);
    let proxy = TurnProxy::start(server.port);
    let lease = Duration::from_secs(10);
    let locks = Client::new(proxy.client());
    let lock = locks.lock("cycle").with_lease(lease);
    lock.acquire().expect("first").release().expect("released");
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    let before = proxy.turns();
    for _ in 0..3 {
        lock.acquire().expect("lock").release().expect("released");
    }
    assert_eq!(proxy.turns() - before, 6, "two round trips per cycle");
    for (command, n) in [("lock.acquire", 3), ("lock.unlock", 3), ("del", 0)] {
        assert_eq!(calls(&mut conn, command), n, "{command}");
    }
    assert_eq!(calls(&mut conn, "wait"), 0);
    // The async client, the same.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let turns = runtime.block_on(async {
        let locks = aio::Client::new(proxy.client());
        let lock = locks.lock("cycle-async").with_lease(lease);
        lock.acquire()
            .await
            .expect("first")
            .release()
            .await
            .expect("released");
        let before = proxy.turns();
        for _ in 0..3 {
            lock.acquire()
                .await
                .expect("lock")
                .release()
                .await
                .expect("released");
        }
        proxy.turns() - before
    });
    assert_eq!(turns, 6, "two round trips per cycle (async)");
    assert!(all_keys(&mut conn).is_empty(), "{:?}", all_keys(&mut conn));
}

/// The paused-master failover in miniature: the client learned the master
/// had a replica; the replica goes (the master now says
/// `connected_slaves:0`, as a paused master does until it is demoted), and
/// the next acquisition is not acknowledged by nobody: it fails and is
/// released. With `Replicas::Exactly(0)` it succeeds.
#[test]
fn a_master_that_lost_its_replica_fails_acquisitions() {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = master.start_replica(&[]);
    let mut conn = master.conn();
    let locks = Client::new(master.client()).with_options(options(2_000, false));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let async_locks = aio::Client::new(master.client()).with_options(options(2_000, false));
    let held = locks.lock("known").acquire().expect("acknowledged");
    let mut on_replica = replica.conn();
    let on: i64 = query(&mut on_replica, &["EXISTS", "known"]);
    assert_eq!(on, 1, "the replica has the lock");
    drop(held);
    runtime
        .block_on(async {
            async_locks
                .lock("known-async")
                .acquire()
                .await?
                .release()
                .await
        })
        .expect("acknowledged (async)");

    let _: () = query(&mut on_replica, &["REPLICAOF", "NO", "ONE"]);
    wait_until(
        Duration::from_secs(30),
        "the master saw its replica go",
        || {
            (info_field(&mut conn, "replication", "connected_slaves").as_deref() == Some("0"))
                .then_some(())
        },
    );
    match locks.lock("lost").acquire() {
        Err(Error::NotSynced {
            replicas, replied, ..
        }) => {
            assert_eq!(replicas, 1, "the replica learned before is expected");
            assert_eq!(replied, "WAIT 1 replied 0");
        }
        other => panic!("expected NotSynced, got {other:?}"),
    }
    let lost_async =
        runtime.block_on(async { async_locks.lock("lost-async").acquire().await.map(|_| ()) });
    assert!(
        matches!(lost_async, Err(Error::NotSynced { .. })),
        "{lost_async:?}"
    );
    assert!(
        all_keys(&mut conn).is_empty(),
        "released again: {:?}",
        all_keys(&mut conn)
    );
    // Pointed at the former replica, a master now (what a Sentinel names
    // after a failover), the same Client expects the deployment's replica
    // there too: a node just promoted has none yet.
    let promoted = locks.clone().with_master(replica.client());
    match promoted.lock("moved").acquire() {
        Err(Error::NotSynced { replicas: 1, .. }) => {}
        other => panic!("expected NotSynced on the promoted node, got {other:?}"),
    }
    let moved_async = runtime.block_on(async {
        let promoted = async_locks.clone().with_master(replica.client());
        promoted.lock("moved-async").acquire().await.map(|_| ())
    });
    assert!(
        matches!(moved_async, Err(Error::NotSynced { replicas: 1, .. })),
        "{moved_async:?}"
    );
    assert!(all_keys(&mut on_replica).is_empty(), "released again");
    // The user says no replica is needed: acknowledged by the master alone.
    let alone = Client::new(master.client()).with_options(replicas(0));
    let _held = alone.lock("lost").acquire().expect("no replica expected");
}

/// `min-replicas-to-write 1` on a master without replicas: the acquisition
/// is refused by the server (`NOREPLICAS`) and fails as NotSynced, having
/// written nothing.
#[test]
fn a_master_refusing_writes_without_replicas_fails_acquisitions() {
    let (server, mut conn) = Server::started(&["--min-replicas-to-write", "1"]);
    let locks = Client::new(server.client());
    match locks.lock("refused").acquire() {
        Err(Error::NotSynced { replied, .. }) => {
            assert!(replied.contains("NOREPLICAS"), "{replied}");
        }
        other => panic!("expected NotSynced, got {other:?}"),
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let refused = runtime.block_on(async {
        let locks = aio::Client::new(server.client());
        locks.fair_lock("refused-fair").acquire().await.map(|_| ())
    });
    assert!(
        matches!(refused, Err(Error::NotSynced { .. })),
        "{refused:?}"
    );
    assert!(all_keys(&mut conn).is_empty(), "{:?}", all_keys(&mut conn));
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
    let locks = Client::new(server.client()).with_options(options(1_000, true));
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
    let quick = Client::new(server.client()).with_options(options(1_000, false));
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
    let synced = Client::new(master.client()).with_options(options(2_000, false));
    let locks = Client::new(master.client()).with_options(options(300, false));
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
        let locks = Client::new(master.client()).with_options(options(300, false));
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
            let locks = aio::Client::new(master.client()).with_options(options(300, false));
            locks
                .read_write_lock("unsynced-async")
                .write()
                .await
                .map(|_| ())
        });
    replica.signal("CONT");
    match attempt {
        Err(Error::NotSynced {
            replicas, waited, ..
        }) => {
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
    let unchecked = Client::new(master.client()).with_options(Options {
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

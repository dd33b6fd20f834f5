//! `Client::sentinel` and `aio::Client::sentinel` against a real Sentinel: a
//! master with the module, its replica, and a `redis-server --sentinel`
//! (quorum 1, down-after 1 s). The master is paused past its failover;
//! Sentinel promotes the replica; both clients follow it (the blocking one
//! while the old master is still paused: its calls time out there; the
//! async one once it is killed: its connections are refused), a hold taken
//! before is renewed by its watchdog and released on the promoted node,
//! and what the clients learned of the replicas stays the deployment's: the
//! promoted node, without a replica, fails acquisitions closed (`NotSynced`)
//! until a replica is back, and grants a higher token after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rwlock_client::{aio, Client, Error, Sentinels};
use testkit::{query, redis_server_bin, unique, wait_until, Server};

const NAME: &str = "rwlock-rust";

/// Every wait for the deployment: a loaded 2-core machine makes Sentinel
/// slow, never wrong.
const CEILING: Duration = Duration::from_secs(120);

/// A Sentinel (no module: it runs no data command) watching `master` as
/// [`NAME`], quorum 1 (a failover needs no other Sentinel), down-after
/// 1 s. `redis-server --sentinel` wants its configuration file (which it
/// rewrites) first: a script in a directory of the test's own puts it
/// there before the harness's arguments.
fn sentinel(master: &Server) -> (Server, PathBuf) {
    let dir = std::env::temp_dir().join(unique("rwlock-sentinel"));
    std::fs::create_dir_all(&dir).expect("the Sentinel's directory");
    let conf = dir.join("sentinel.conf");
    let text = format!(
        "sentinel monitor {NAME} 127.0.0.1 {} 1\n\
         sentinel down-after-milliseconds {NAME} 1000\n\
         sentinel failover-timeout {NAME} 10000\n",
        master.port
    );
    std::fs::write(&conf, text).expect("sentinel.conf");
    let script = dir.join("sentinel.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nexec \"$SENTINEL_SERVER\" \"$SENTINEL_CONF\" --sentinel \"$@\"\n",
    )
    .expect("sentinel.sh");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&script, mode).expect("chmod");
    let server = redis_server_bin();
    let conf_path = conf.to_string_lossy().into_owned();
    let envs = [
        ("SENTINEL_SERVER", server.as_str()),
        ("SENTINEL_CONF", conf_path.as_str()),
    ];
    (Server::start_via(&script, &envs, &[]), dir)
}

/// The port of the master the Sentinel names.
fn named(sentinel: &mut testkit::Conn) -> u16 {
    let (_, port): (String, u16) = query(sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME]);
    port
}

/// The flags of the replicas the Sentinel knows.
fn replica_flags(sentinel: &mut testkit::Conn) -> Vec<String> {
    let replicas: Vec<std::collections::HashMap<String, String>> =
        query(sentinel, &["SENTINEL", "REPLICAS", NAME]);
    replicas
        .into_iter()
        .filter_map(|mut r| r.remove("flags"))
        .collect()
}

/// How many times the server ran `command` since its stats were reset.
fn calls(conn: &mut testkit::Conn, command: &str) -> u64 {
    let info: String = query(conn, &["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn not_synced<T: std::fmt::Debug>(attempt: Result<T, Error>) -> String {
    match attempt {
        Err(Error::NotSynced {
            replicas: 1,
            replied,
            ..
        }) => replied,
        other => panic!("expected NotSynced for the deployment's replica, got {other:?}"),
    }
}

#[test]
fn the_locks_follow_a_failover_and_keep_the_deployments_replica_count() {
    let mut first = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let second = first.start_replica(&["--repl-diskless-sync-delay", "0"]);
    let (sentinel, dir) = sentinel(&first);
    let mut watching = sentinel.conn();
    // A failover needs a replica Sentinel has asked INFO of itself.
    wait_until(CEILING, "Sentinel to know the replica", || {
        (replica_flags(&mut watching) == ["slave"]).then_some(())
    });

    // Nobody watches this name: the constructor says so.
    let unknown = Sentinels::new([sentinel.url()], "nobody").expect("sentinels");
    match Client::sentinel(unknown) {
        Err(Error::Redis(e)) => {
            assert_eq!(e.kind(), redis::ErrorKind::MasterNameNotFoundBySentinel)
        }
        Err(other) => panic!("expected the master not found, got {other:?}"),
        Ok(_) => panic!("expected the master not found"),
    }

    // The announced addresses go through the map (here, to themselves).
    let mapped = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&mapped);
    let sentinels = Sentinels::new([sentinel.url()], NAME)
        .expect("sentinels")
        .with_address_map(move |host, port| {
            counted.fetch_add(1, Ordering::SeqCst);
            (host.to_string(), port)
        });
    let locks = Client::sentinel(sentinels.clone()).expect("the master");
    assert_eq!(
        mapped.load(Ordering::SeqCst),
        1,
        "the master's address mapped"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let async_locks = runtime
        .block_on(aio::Client::sentinel(sentinels))
        .expect("the master (async)");

    let lease = Duration::from_secs(60);
    let fenced = locks.fenced_lock("s:fenced").with_lease(lease);
    let before = fenced.try_acquire(Duration::ZERO).expect("granted").token();
    let async_fenced = async_locks.fenced_lock("s:fenced").with_lease(lease);
    let async_before = runtime
        .block_on(async {
            let held = async_fenced.try_acquire(Duration::ZERO).await?;
            let token = held.token();
            held.release().await.map(|()| token)
        })
        .expect("granted (async)");
    let before = before.max(async_before).expect("a fenced lock's token");
    // Held across the failover: one with a lease, released afterwards; one
    // the watchdog renews (every 10 s, a 30 s lease: it outlives the
    // failover). Both acknowledged by the replica.
    let kept = locks
        .lock("s:kept")
        .with_lease(lease)
        .try_acquire(Duration::ZERO)
        .expect("granted");
    let renewed = locks
        .lock("s:renewed")
        .try_acquire(Duration::ZERO)
        .expect("granted");

    // The first master pauses past down-after: Sentinel promotes the replica.
    first.signal("STOP");
    wait_until(CEILING, "Sentinel to promote the replica", || {
        (named(&mut watching) == second.port).then_some(())
    });
    let mut promoted = second.conn();
    let _: () = query(&mut promoted, &["CONFIG", "RESETSTAT"]);

    // The blocking client's next call times out on the paused node, asks
    // the Sentinels, and is sent again to the promoted node, which has no
    // replica where the deployment had one: fail closed, released there.
    let replied = not_synced(fenced.try_acquire(Duration::ZERO));
    assert_eq!(replied, "WAIT 1 replied 0");
    assert!(mapped.load(Ordering::SeqCst) >= 3, "the new address mapped");
    assert!(
        calls(&mut promoted, "wait") >= 1,
        "sent to the promoted node"
    );
    let exists: i64 = query(&mut promoted, &["EXISTS", "s:fenced"]);
    assert_eq!(exists, 0, "released again");

    // The hold taken before is on the promoted node (it was acknowledged),
    // and renewed there by its watchdog.
    wait_until(
        CEILING,
        "the watchdog to renew on the promoted node",
        || (calls(&mut promoted, "lock.renew") >= 1).then_some(()),
    );
    assert!(
        !renewed.is_lost(),
        "the hold was replicated before the pause"
    );

    // Killed, the paused node cannot come back as a master: the async
    // client's connections to it are refused, and it follows too.
    first.kill9();
    let replied = not_synced(runtime.block_on(async_fenced.try_acquire(Duration::ZERO)));
    assert_eq!(replied, "WAIT 1 replied 0");
    assert!(calls(&mut promoted, "wait") >= 2, "the async one too");

    // Released where they are now.
    kept.release().expect("released on the promoted node");
    renewed.release().expect("released on the promoted node");
    let left: i64 = query(&mut promoted, &["EXISTS", "s:kept", "s:renewed"]);
    assert_eq!(left, 0);

    // A replica again: granted, with a higher token than the old master's.
    let _third = second.start_replica(&[]);
    let token = fenced
        .try_acquire(Duration::ZERO)
        .and_then(|held| {
            let token = held.token();
            held.release().map(|()| token)
        })
        .expect("granted with a replica back")
        .expect("a token");
    assert!(token > before, "{token} after {before}");
    let async_token = runtime
        .block_on(async {
            let held = async_fenced.try_acquire(Duration::ZERO).await?;
            let token = held.token();
            held.release().await.map(|()| token)
        })
        .expect("granted with a replica back (async)")
        .expect("a token");
    assert!(async_token > token, "{async_token} after {token}");
    drop(sentinel);
    let _ = std::fs::remove_dir_all(dir);
}

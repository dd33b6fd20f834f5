//! The module skips propagating and announcing its writes only while nobody
//! could receive them (src/observers.rs). These tests change who listens
//! while the server runs and check that nothing is lost: a replica attached
//! later, a replica reconnecting into the backlog, the AOF switched on, the
//! RDB save points, keyspace events switched on.

use std::time::Duration;

use redis::Value;
use testkit::Conn;
use testkit::{
    events_str, info_field, ok, query, snapshot, wait_replica, wait_until, Collector, Server,
};

const WAIT_UP_TO: Duration = Duration::from_secs(10);

/// Locks of every shape: read (two owners, re-entered), write, and a
/// downgraded writer; then some released, so deletions are in the stream.
fn writes(conn: &mut Conn, tag: &str) {
    let (r, w, d, gone) = (
        format!("r{tag}"),
        format!("w{tag}"),
        format!("d{tag}"),
        format!("g{tag}"),
    );
    for args in [
        &["RWLOCK.READ", &r, "a:1", "60000"][..],
        &["RWLOCK.READ", &r, "a:1", "90000"],
        &["RWLOCK.READ", &r, "b:1", "70000"],
        &["RWLOCK.WRITE", &w, "a:1", "80000"],
        &["RWLOCK.WRITE", &w, "a:1", "80000"],
        &["RWLOCK.WRITE", &d, "a:1", "80000"],
        &["RWLOCK.READ", &d, "a:1", "50000"],
        &["RWLOCK.UNLOCK", &d, "a:1", "WRITE"],
        &["RWLOCK.WRITE", &gone, "a:1", "80000"],
        &["RWLOCK.UNLOCK", &gone, "a:1", "WRITE"],
        &["RWLOCK.UNLOCK", &r, "a:1", "READ"],
        &["RWLOCK.RENEW", &r, "b:1", "120000"],
    ] {
        let reply = ok(conn, args);
        assert!(
            !matches!(reply, Value::ServerError(_)),
            "{args:?} replied {reply:?}"
        );
    }
}

fn replica_of(master: &Server) -> Server {
    let port = master.port.to_string();
    let replica = Server::start_plain(&["--replicaof", "127.0.0.1", port.as_str()]);
    let mut conn = replica.conn();
    wait_until(WAIT_UP_TO, "replica link up", || {
        (info_field(&mut conn, "replication", "master_link_status").as_deref() == Some("up"))
            .then_some(())
    });
    replica
}

#[test]
fn a_replica_attached_later_gets_every_write_before_and_after() {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let mut m = master.conn();
    // No replica, no backlog, no AOF: these writes go nowhere but the dataset.
    writes(&mut m, "1");
    let replica = replica_of(&master);
    let mut r = replica.conn();
    writes(&mut m, "2");
    wait_replica(&mut m);
    let on_master = snapshot(&mut m);
    assert!(on_master.len() >= 8, "too few keys: {on_master:?}");
    assert_eq!(on_master, snapshot(&mut r), "master and replica differ");
}

#[test]
fn a_replica_back_from_a_broken_link_gets_the_writes_from_the_backlog() {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let mut m = master.conn();
    let replica = replica_of(&master);
    let mut r = replica.conn();
    writes(&mut m, "1");
    wait_replica(&mut m);
    let partial_before: i64 = info_field(&mut m, "stats", "sync_partial_ok")
        .and_then(|v| v.parse().ok())
        .expect("sync_partial_ok");
    // Stop the replica's link, write while it is away, let it reconnect.
    let _: () = query(&mut r, &["CONFIG", "SET", "repl-timeout", "60"]);
    let killed: i64 = query(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1);
    writes(&mut m, "2");
    wait_replica(&mut m);
    let partial_after: i64 = info_field(&mut m, "stats", "sync_partial_ok")
        .and_then(|v| v.parse().ok())
        .expect("sync_partial_ok");
    assert_eq!(
        partial_after,
        partial_before + 1,
        "the replica came back by a partial resync"
    );
    assert_eq!(
        snapshot(&mut m),
        snapshot(&mut r),
        "master and replica differ"
    );
}

#[test]
fn the_aof_switched_on_at_run_time_holds_every_write() {
    let (server, mut c) = Server::started(&[]);
    writes(&mut c, "1");
    let _: () = query(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    wait_until(WAIT_UP_TO, "the AOF rewrite", || {
        (info_field(&mut c, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
            && info_field(&mut c, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
            && info_field(&mut c, "persistence", "aof_enabled").as_deref() == Some("1"))
        .then_some(())
    });
    writes(&mut c, "2");
    let before = snapshot(&mut c);
    let _: () = query(&mut c, &["CONFIG", "SET", "appendfsync", "always"]);
    ok(&mut c, &["RWLOCK.WRITE", "last", "a:1", "60000"]);
    let before = {
        let mut b = before;
        b.extend(snapshot(&mut c).into_iter().filter(|(k, _)| k.0 == b"last"));
        b
    };
    // The AOF, loaded by a server without the module, gives the same state.
    let copy = server.copy_aof().to_string_lossy().into_owned();
    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", copy.as_str()]);
    let loaded = snapshot(&mut plain.conn());
    drop(plain);
    assert_eq!(before, loaded, "the AOF does not reproduce the dataset");
}

#[test]
fn module_writes_count_towards_save_points() {
    let (_server, mut c) = Server::started(&[]);
    let changes = |c: &mut Conn| -> i64 {
        info_field(c, "persistence", "rdb_changes_since_last_save")
            .and_then(|v| v.parse().ok())
            .expect("rdb_changes_since_last_save")
    };
    let before = changes(&mut c);
    ok(&mut c, &["RWLOCK.READ", "L", "a:1", "60000"]);
    // HSET mode, HSET a:1, SET … PXAT, PEXPIREAT: one change each.
    assert_eq!(changes(&mut c), before + 4);
    ok(&mut c, &["RWLOCK.UNLOCK", "L", "a:1", "READ"]);
    // HINCRBY, HDEL, DEL of the lease key, DEL of the hash.
    assert_eq!(changes(&mut c), before + 8);
}

#[test]
fn keyspace_events_switched_on_at_run_time_are_raised() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.READ", "L", "a:1", "60000"]);
    let collector = Collector::start(&server, &["__keyevent@0__:*"]);
    let _: () = query(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Eh"]);
    ok(&mut c, &["RWLOCK.READ", "L", "b:1", "60000"]);
    // Hash events only: the class configured.
    let got = events_str(&collector.sync(&mut c));
    assert_eq!(
        got,
        vec![("__keyevent@0__:hincrby".to_string(), "L".to_string())],
        "events raised"
    );
}

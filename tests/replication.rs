//! Replication and persistence of the module's effects (docs/design.md, contract §6).
//!
//! Each command must propagate its effects (HSET, HINCRBY, HDEL, SET … PXAT,
//! PEXPIREAT, DEL, PUBLISH) with absolute deadlines, never itself, so that a
//! replica and an AOF reload reproduce the same keys, the same contents and
//! the same deadlines, and so that neither needs the module to apply them.
//!
//! The workloads are random but seeded (`RWLOCK_TEST_SEED` overrides the seed;
//! the seed is printed so that a failure can be replayed).

use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{
    diff, info_field, ok, seed, snapshot, wait_replica, Bytes, Collector, Rng, Server, Snapshot,
};

// ---------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------

/// How long a replica may take to report `master_link_status:up`.
const LINK_TIMEOUT: Duration = Duration::from_secs(10);
/// Leases of the workloads: long enough that nothing expires during a test.
const MIN_LEASE: i64 = 60_000;
const MAX_LEASE: i64 = 600_000;
/// Lease of the owners that always use the same one (a watchdog's default).
const FIXED_LEASE: i64 = 120_000;

const LOCKS: &[&str] = &["L0", "L1", "{t}:a", "x{t}y"];
const OWNERS: &[&str] = &["c1:1", "c1:2", "c2:7", "fixed:1", "fixed:2"];
const REQUEST_IDS: &[&str] = &["r1", "r2", "r3", "r4"];

fn assert_same(left: &Snapshot, right: &Snapshot, lname: &str, rname: &str) {
    let d = diff(left, right, lname, rname);
    assert!(d.is_empty(), "{lname} and {rname} differ:\n{d}");
}

/// What the workload's commands replied, to show that it did something.
#[derive(Debug, Default)]
struct Stats {
    acquired: u32,
    refused: u32,
    unlock_nil: u32,
    unlock_0: u32,
    unlock_1: u32,
    renewed: u32,
    not_renewed: u32,
    forced: u32,
    infos: u32,
    with_lease: u32,
    with_request: u32,
}

fn lease_for(rng: &mut Rng, owner: &str) -> i64 {
    if owner.starts_with("fixed:") {
        FIXED_LEASE
    } else {
        rng.range(MIN_LEASE, MAX_LEASE)
    }
}

/// `ops` random well-formed commands over [`LOCKS`] and [`OWNERS`]; panics on
/// any error reply (none is malformed).
fn workload(conn: &mut testkit::Conn, rng: &mut Rng, ops: usize) -> Stats {
    let mut stats = Stats::default();
    for _ in 0..ops {
        let lock = *rng.pick(LOCKS);
        let owner = *rng.pick(OWNERS);
        let lease = lease_for(rng, owner);
        let kind = rng.below(100);
        // A command on the lock by the owner, for the lease.
        let owned = |name: &str| {
            let mut cmd = redis::cmd(name);
            cmd.arg(lock).arg(owner).arg(lease);
            cmd
        };
        let (cmd, label) = match kind {
            0..=29 => (owned("RWLOCK.READ"), "acquire"),
            30..=47 => (owned("RWLOCK.WRITE"), "acquire"),
            48..=77 => {
                let mut cmd = redis::cmd("RWLOCK.UNLOCK");
                cmd.arg(lock)
                    .arg(owner)
                    .arg(if kind < 63 { "READ" } else { "WRITE" });
                let lease_opt = rng.chance(40);
                let request_opt = rng.chance(40);
                let lease_first = rng.chance(50);
                let request_id = *rng.pick(REQUEST_IDS);
                let request_ttl = rng.range(MIN_LEASE, MAX_LEASE);
                let add_lease = |cmd: &mut redis::Cmd| {
                    if lease_opt {
                        cmd.arg("LEASE").arg(lease);
                    }
                };
                if lease_first {
                    add_lease(&mut cmd);
                }
                if request_opt {
                    cmd.arg("REQUEST").arg(request_id).arg(request_ttl);
                }
                if !lease_first {
                    add_lease(&mut cmd);
                }
                stats.with_lease += u32::from(lease_opt);
                stats.with_request += u32::from(request_opt);
                (cmd, "unlock")
            }
            78..=89 => (owned("RWLOCK.RENEW"), "renew"),
            90..=94 => {
                let mut cmd = redis::cmd("RWLOCK.FORCEUNLOCK");
                cmd.arg(lock);
                match rng.below(3) {
                    0 => {}
                    1 => {
                        cmd.arg("READ");
                    }
                    _ => {
                        cmd.arg("WRITE");
                    }
                }
                (cmd, "force")
            }
            _ => {
                let mut cmd = redis::cmd("RWLOCK.INFO");
                cmd.arg(lock);
                (cmd, "info")
            }
        };
        let reply: redis::Value = cmd
            .query(conn)
            .unwrap_or_else(|e| panic!("{label} command {:?} failed: {e}", cmd_text(&cmd)));
        match (label, &reply) {
            ("acquire", redis::Value::Nil) => stats.acquired += 1,
            ("acquire", redis::Value::Int(_)) => stats.refused += 1,
            ("unlock", redis::Value::Nil) => stats.unlock_nil += 1,
            ("unlock", redis::Value::Int(0)) => stats.unlock_0 += 1,
            ("unlock", redis::Value::Int(1)) => stats.unlock_1 += 1,
            ("renew", redis::Value::Int(1)) => stats.renewed += 1,
            ("renew", redis::Value::Int(0)) => stats.not_renewed += 1,
            ("force", redis::Value::Int(1)) => stats.forced += 1,
            ("force", redis::Value::Int(0)) => {}
            ("info", redis::Value::Array(_)) => stats.infos += 1,
            _ => panic!("unexpected reply {reply:?} to {:?}", cmd_text(&cmd)),
        }
    }
    eprintln!("workload: {stats:?}");
    assert!(
        stats.acquired >= 20,
        "workload acquired too little: {stats:?}"
    );
    assert!(stats.refused >= 1, "workload was never refused: {stats:?}");
    assert!(
        stats.unlock_0 + stats.unlock_1 >= 10,
        "workload released too little: {stats:?}"
    );
    assert!(stats.renewed >= 1, "workload never renewed: {stats:?}");
    stats
}

fn cmd_text(cmd: &redis::Cmd) -> String {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "<arg>".to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits (bounded) until the replica reports its link to the master up.
fn wait_link_up(replica: &Server) {
    let mut conn = replica.conn();
    let deadline = Instant::now() + LINK_TIMEOUT;
    loop {
        let status = info_field(&mut conn, "replication", "master_link_status");
        if status.as_deref() == Some("up") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replica link not up within {LINK_TIMEOUT:?} (status {status:?})\n---- replica log ----\n{}",
            replica.log()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn digest(conn: &mut testkit::Conn) -> String {
    redis::cmd("DEBUG")
        .arg("DIGEST")
        .query(conn)
        .expect("DEBUG DIGEST")
}

/// The master and the replica hold the same data and the same deadlines.
fn assert_replica_matches(master: &mut testkit::Conn, replica: &mut testkit::Conn) {
    wait_replica(master);
    let (dm, dr) = (digest(master), digest(replica));
    assert!(
        dm.chars().any(|c| c != '0'),
        "the master's dataset is empty (digest {dm})"
    );
    let m = snapshot(master);
    let r = snapshot(replica);
    let mkeys: Vec<&Bytes> = m.keys().collect();
    let rkeys: Vec<&Bytes> = r.keys().collect();
    assert_eq!(mkeys, rkeys, "key sets differ");
    // Deadlines key by key (DEBUG DIGEST does not cover them), exactly.
    for (k, ms) in &m {
        assert_eq!(
            ms.expire_at, r[k].expire_at,
            "PEXPIRETIME of {k:?} differs: master {ms:?}, replica {:?}",
            r[k]
        );
    }
    assert_same(&m, &r, "master", "replica");
    assert_eq!(dm, dr, "DEBUG DIGEST differs between master and replica");
    assert!(
        m.values().any(|s| s.expire_at > 0),
        "no key with a deadline: the comparison proves little"
    );
}

fn start_replica_pair(plain_replica: bool) -> (Server, Server) {
    // No diskless-sync delay: the replica's first sync starts at once.
    let master = Server::start(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let port = master.port.to_string();
    let args = [
        "--replicaof",
        "127.0.0.1",
        port.as_str(),
        "--enable-debug-command",
        "yes",
    ];
    let replica = if plain_replica {
        Server::start_plain(&args)
    } else {
        Server::start(&args)
    };
    wait_link_up(&replica);
    (master, replica)
}

fn expect_readonly(conn: &mut testkit::Conn, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(conn) {
        Ok(v) => panic!("{args:?} on the replica replied {v:?}, expected a READONLY error"),
        Err(e) => assert_eq!(
            e.code(),
            Some("READONLY"),
            "{args:?} on the replica: expected READONLY, got {e}"
        ),
    }
}

// ---------------------------------------------------------------------------
// Master and replica
// ---------------------------------------------------------------------------

/// A master and its replica (one without the module when
/// `replica_without_module`), connected to, after `ops` random commands on
/// the master that the replica is checked to reproduce; and the generator.
fn replicated(
    replica_without_module: bool,
    default_seed: u64,
    ops: usize,
) -> (Server, Server, testkit::Conn, testkit::Conn, Rng) {
    let (master, replica) = start_replica_pair(replica_without_module);
    let mut m = master.conn();
    let mut r = replica.conn();
    let mut rng = Rng(seed(default_seed));
    workload(&mut m, &mut rng, ops);
    assert_replica_matches(&mut m, &mut r);
    (master, replica, m, r, rng)
}

#[test]
fn replica_with_module_reproduces_state_and_deadlines() {
    let (_master, _replica, mut m, mut r, mut rng) = replicated(false, 0x5EED_0001, 400);

    // A second round on top of the first: same again.
    workload(&mut m, &mut rng, 200);
    assert_replica_matches(&mut m, &mut r);

    // The replica refuses the module's writes, and serves INFO.
    let before = snapshot(&mut r);
    for args in [
        &["RWLOCK.READ", "L0", "c9:1", "60000"][..],
        &["RWLOCK.WRITE", "L0", "c9:1", "60000"],
        &["RWLOCK.WRITE", "Lnew", "c9:1", "60000"],
        &["RWLOCK.UNLOCK", "L0", "c1:1", "READ"],
        &["RWLOCK.UNLOCK", "L0", "c1:1", "WRITE", "LEASE", "60000"],
        &["RWLOCK.UNLOCK", "Lnew", "c1:1", "WRITE"],
        &["RWLOCK.RENEW", "L0", "c1:1", "60000"],
        &["RWLOCK.FORCEUNLOCK", "L0"],
        &["RWLOCK.FORCEUNLOCK", "L1", "READ"],
    ] {
        expect_readonly(&mut r, args);
    }
    assert_same(
        &before,
        &snapshot(&mut r),
        "replica before",
        "replica after",
    );
    for lock in LOCKS {
        let info_r = ok(&mut r, &["RWLOCK.INFO", lock]);
        let info_m = ok(&mut m, &["RWLOCK.INFO", lock]);
        // Same mode (the TTLs are relative, hence not compared).
        let mode = |v: &redis::Value| match v {
            redis::Value::Array(items) => items.get(1).cloned(),
            _ => None,
        };
        assert!(mode(&info_r).is_some(), "INFO on the replica: {info_r:?}");
        assert_eq!(mode(&info_r), mode(&info_m), "INFO {lock} mode differs");
    }
}

#[test]
fn replica_without_module_applies_the_stream() {
    // contract §6: a replica never needs the module to apply the stream.
    replicated(true, 0x5EED_0002, 400);
}

#[test]
fn lock_messages_reach_subscribers_on_the_replica() {
    let (master, replica) = start_replica_pair(false);
    let mut m = master.conn();
    let mut r = replica.conn();
    let on_replica = Collector::start(&replica, &["redisson_rwlock:{R}", "redisson_rwlock:{Q}"]);
    let on_master = Collector::start(&master, &["redisson_rwlock:{R}", "redisson_rwlock:{Q}"]);

    let run = |conn: &mut testkit::Conn, args: &[&str]| -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(conn)
            .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
    };
    use redis::Value::{Int, Nil};
    // Write lock taken and released: message `1`.
    assert_eq!(run(&mut m, &["RWLOCK.WRITE", "R", "w:1", "60000"]), Nil);
    assert_eq!(run(&mut m, &["RWLOCK.UNLOCK", "R", "w:1", "WRITE"]), Int(1));
    // Two readers; only the last release publishes `0`.
    assert_eq!(run(&mut m, &["RWLOCK.READ", "Q", "a:1", "60000"]), Nil);
    assert_eq!(run(&mut m, &["RWLOCK.READ", "Q", "b:1", "60000"]), Nil);
    assert_eq!(run(&mut m, &["RWLOCK.UNLOCK", "Q", "a:1", "READ"]), Int(0));
    assert_eq!(run(&mut m, &["RWLOCK.UNLOCK", "Q", "b:1", "READ"]), Int(1));
    // A forced unlock of a write lock: `1` again.
    assert_eq!(run(&mut m, &["RWLOCK.WRITE", "R", "w:2", "60000"]), Nil);
    assert_eq!(run(&mut m, &["RWLOCK.FORCEUNLOCK", "R"]), Int(1));

    let expected = vec![
        ("redisson_rwlock:{R}".to_string(), "1".to_string()),
        ("redisson_rwlock:{Q}".to_string(), "0".to_string()),
        ("redisson_rwlock:{R}".to_string(), "1".to_string()),
    ];
    // WAIT: the replica has applied the stream, PUBLISH included; its
    // subscriber then has the messages before the collector's marker.
    wait_replica(&mut m);
    let got = testkit::events_str(&on_replica.sync(&mut r));
    assert_eq!(got, expected, "messages received on the replica");
    let got = testkit::events_str(&on_master.sync(&mut m));
    assert_eq!(got, expected, "messages received on the master");
}

// ---------------------------------------------------------------------------
// AOF
// ---------------------------------------------------------------------------

fn aof_files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let aof_dir = dir.join("appendonlydir");
    let mut files: Vec<PathBuf> = fs::read_dir(&aof_dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", aof_dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Records, lets time pass (a relative TTL replayed would then land on
/// another deadline), restarts with `restart`, and compares.
fn check_reload(server: &mut Server, what: &str, restart: impl FnOnce(&mut Server)) -> Snapshot {
    let before = snapshot(&mut server.conn());
    assert!(
        before.values().any(|s| s.expire_at > 0),
        "nothing with a deadline to compare"
    );
    thread::sleep(Duration::from_millis(300));
    restart(server);
    let after = snapshot(&mut server.conn());
    assert_same(&before, &after, "before", what);
    before
}

#[test]
fn aof_reload_reproduces_state_and_deadlines() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut rng = Rng(seed(0x5EED_0003));

    // Graceful restart.
    workload(&mut server.conn(), &mut rng, 400);
    check_reload(&mut server, "after graceful restart", |s| s.restart());

    // Crash: every acknowledged write survives with appendfsync always.
    workload(&mut server.conn(), &mut rng, 300);
    let last = check_reload(&mut server, "after kill -9 and restart", |s| {
        s.kill9();
        s.restart();
    });

    // The AOF holds the effects, with absolute deadlines, never the commands.
    let incr = aof_files(server.dir(), ".incr.aof");
    assert!(
        !incr.is_empty(),
        "no *.incr.aof in {}",
        server.dir().display()
    );
    let mut text = Vec::new();
    for f in &incr {
        text.extend(fs::read(f).unwrap_or_else(|e| panic!("read {}: {e}", f.display())));
    }
    let lower = text.to_ascii_lowercase();
    for needle in [
        &b"$9\r\npexpireat\r\n"[..],
        b"$7\r\nhincrby\r\n",
        b"$4\r\nhset\r\n",
        b"$4\r\npxat\r\n",
        b"$4\r\nhdel\r\n",
        b"$3\r\ndel\r\n",
    ] {
        assert!(
            contains(&lower, needle),
            "the AOF has no {:?}",
            needle.escape_ascii().to_string()
        );
    }
    for command in [
        "rwlock.read",
        "rwlock.write",
        "rwlock.unlock",
        "rwlock.renew",
        "rwlock.forceunlock",
        "rwlock.info",
        "rwlock.",
    ] {
        assert!(
            !contains(&lower, command.as_bytes()),
            "the AOF contains the module command {command}"
        );
    }
    // No relative deadline: neither PEXPIRE/EXPIRE nor SET … PX/EX.
    for relative in [
        &b"$7\r\npexpire\r\n"[..],
        b"$6\r\nexpire\r\n",
        b"$2\r\npx\r\n",
        b"$2\r\nex\r\n",
    ] {
        assert!(
            !contains(&lower, relative),
            "the AOF has a relative deadline: {:?}",
            relative.escape_ascii().to_string()
        );
    }

    // The AOF loads without the module (a copy, on a plain server).
    server.stop();
    let copy = server.copy_aof().to_string_lossy().into_owned();
    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", copy.as_str()]);
    let loaded = snapshot(&mut plain.conn());
    drop(plain);
    assert_same(&last, &loaded, "before", "AOF loaded without the module");
}

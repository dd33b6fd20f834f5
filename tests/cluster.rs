//! Redis Cluster (docs/design.md, contract §6): a local cluster of 3 masters and 3
//! replicas, every node with the module loaded, all on 127.0.0.1.
//!
//! - Locks spread over every master; a cluster-aware client (the `redis`
//!   crate's cluster client) routes each command by its lock name, and every
//!   key of a lock lands on the node that owns the name's slot.
//! - With `rwlock.publish auto` a release is an SPUBLISH: it reaches shard
//!   subscribers on the master and on its replica, once, and not classic
//!   subscribers.
//! - A lock name whose derived keys would leave its slot is refused.
//! - Failover: after `kill -9` of a master and `CLUSTER FAILOVER TAKEOVER` on
//!   its replica, the locks acknowledged with `WAIT` are there with the same
//!   absolute deadlines; waiters on the dead master fail with a connection
//!   error instead of hanging; waiters on a master demoted by a coordinated
//!   `CLUSTER FAILOVER` get an error at once.
//! - The count-down latch: its messages on its shard channel, its waiter
//!   answered by a count-down from either side.
//! - The semaphore: a slot-safe name, its counts by `SPUBLISH` (a release, a
//!   `SESSION` holder's close), a waiter on the slot's master served, `MOVED`
//!   from the other masters.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    call, channel, diff, expect_reply, info_field, ok, query, reply_text, snapshot, timeout_key,
    wait_replica, wait_until, waiters, Call, Server, Snapshot,
};

/// How long cluster creation, convergence and failovers may take.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a waiter may take to learn that its wait ended.
const WAITER_TIMEOUT: Duration = Duration::from_secs(10);
/// Leases long enough that nothing expires during a test.
const LEASE: &str = "120000";

// ---------------------------------------------------------------------------
// A local cluster
// ---------------------------------------------------------------------------

struct Shard {
    master: usize,
    replica: usize,
}

struct Cluster {
    nodes: Vec<Server>,
    shards: Vec<Shard>,
}

fn node_args() -> Vec<&'static str> {
    vec![
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "3000",
        // Failovers happen when a test says so (TAKEOVER or a coordinated
        // FAILOVER), never on their own in the middle of an assertion.
        "--cluster-replica-no-failover",
        "yes",
        "--appendonly",
        "no",
    ]
}

/// Runs `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`,
/// killed by PID if it takes longer than [`CLUSTER_TIMEOUT`].
fn create_cluster(nodes: &[Server]) {
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let log = nodes[0].dir().join("cluster-create.log");
    let out = std::fs::File::create(&log).expect("create cluster-create.log");
    let err = out.try_clone().expect("dup log");
    let mut child = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", "1", "--cluster-yes"])
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .expect("run redis-cli --cluster create");
    let deadline = Instant::now() + CLUSTER_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait redis-cli") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "redis-cli --cluster create took over {CLUSTER_TIMEOUT:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "redis-cli --cluster create failed ({status}):\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// One line of `CLUSTER NODES`.
struct NodeLine {
    port: u16,
    id: String,
    master: bool,
    failed: bool,
    master_id: String,
    slots: usize,
}

fn cluster_nodes(conn: &mut Conn) -> Vec<NodeLine> {
    let text = reply_text(conn, &["CLUSTER", "NODES"]);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let port = f[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
                .unwrap_or_else(|| panic!("CLUSTER NODES address in {l:?}"));
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((a, b)) => {
                        b.parse::<usize>().expect("slot") - a.parse::<usize>().expect("slot") + 1
                    }
                    None => 1,
                })
                .sum();
            let flags: Vec<&str> = f[2].split(',').collect();
            NodeLine {
                port,
                id: f[0].to_string(),
                master: flags.contains(&"master"),
                failed: flags.contains(&"fail") || flags.contains(&"fail?"),
                master_id: f[3].to_string(),
                slots,
            }
        })
        .collect()
}

/// `cluster_state` of `CLUSTER INFO`.
fn cluster_state(conn: &mut Conn) -> Option<String> {
    let text = reply_text(conn, &["CLUSTER", "INFO"]);
    text.lines()
        .find_map(|l| l.strip_prefix("cluster_state:"))
        .map(|v| v.trim().to_string())
}

fn role(conn: &mut Conn) -> String {
    info_field(conn, "replication", "role").unwrap_or_default()
}

impl Cluster {
    fn start() -> Cluster {
        let nodes: Vec<Server> = (0..6)
            .map(|_| Server::start_cluster_node(&["publish", "auto"], &node_args()))
            .collect();
        create_cluster(&nodes);
        let mut cluster = Cluster {
            nodes,
            shards: Vec::new(),
        };
        cluster.shards = cluster.converge(&[]);
        cluster
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// Waits (bounded) until every live node reports `cluster_state:ok` and
    /// the same topology of 3 masters owning all slots, each with one
    /// replica whose link is up (or none, for a shard whose replica took
    /// over from a dead master). Returns the shards.
    fn converge(&self, dead: &[usize]) -> Vec<Shard> {
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        loop {
            match self.topology(dead) {
                Ok(shards) => return shards,
                Err(why) => assert!(
                    Instant::now() < deadline,
                    "the cluster did not converge within {CLUSTER_TIMEOUT:?}: {why}"
                ),
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The shards, when every live node agrees on them (else why not).
    fn topology(&self, dead: &[usize]) -> Result<Vec<Shard>, String> {
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|i| !dead.contains(i))
            .collect();
        let mut views = Vec::new();
        for &i in &live {
            let mut c = self.nodes[i].conn();
            let state = cluster_state(&mut c);
            if state.as_deref() != Some("ok") {
                return Err(format!("node {i}: cluster_state {state:?}"));
            }
            let lines = cluster_nodes(&mut c);
            let mut shards: Vec<(u16, Vec<u16>)> = Vec::new();
            for m in lines
                .iter()
                .filter(|n| n.master && !n.failed && n.slots > 0)
            {
                let replicas: Vec<u16> = lines
                    .iter()
                    .filter(|r| r.master_id == m.id && !r.failed)
                    .map(|r| r.port)
                    .collect();
                shards.push((m.port, replicas));
            }
            let slots: usize = shards
                .iter()
                .map(|(p, _)| lines.iter().find(|n| n.port == *p).map_or(0, |n| n.slots))
                .sum();
            if shards.len() != 3 || slots != 16384 {
                return Err(format!(
                    "node {i}: {} masters, {slots} slots: {shards:?}",
                    shards.len()
                ));
            }
            shards.sort();
            views.push(shards);
        }
        if let Some(w) = views.windows(2).find(|w| w[0] != w[1]) {
            return Err(format!("views differ: {:?} vs {:?}", w[0], w[1]));
        }
        let mut shards = Vec::new();
        for (master, replicas) in &views[0] {
            let master = self.index_of(*master);
            let replica = match replicas.as_slice() {
                [] => usize::MAX,
                [r] => self.index_of(*r),
                more => return Err(format!("master {master} has replicas {more:?}")),
            };
            if replica != usize::MAX {
                let mut c = self.nodes[replica].conn();
                let link = info_field(&mut c, "replication", "master_link_status");
                if link.as_deref() != Some("up") {
                    return Err(format!("replica {replica}: link {link:?}"));
                }
            }
            shards.push(Shard { master, replica });
        }
        Ok(shards)
    }

    /// A cluster client seeded with the live nodes.
    fn client(&self, dead: &[usize]) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = (0..self.nodes.len())
            .filter(|i| !dead.contains(i))
            .map(|i| self.nodes[i].url())
            .collect();
        redis::cluster::ClusterClient::builder(urls)
            .connection_timeout(testkit::IO_TIMEOUT)
            .response_timeout(testkit::IO_TIMEOUT)
            .build()
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }

    /// `n` lock names per shard, named from `prefix`.
    fn names_per_shard(&self, prefix: &str, n: usize) -> Vec<Vec<String>> {
        let mut per: Vec<Vec<String>> = vec![Vec::new(); self.shards.len()];
        let mut c = self.nodes[self.shards[0].master].conn();
        let ranges = slot_owners(&mut c);
        let mut i = 0;
        while per.iter().any(|v| v.len() < n) {
            let name = if i % 3 == 2 {
                format!("{{{prefix}-t{i}}}:lock")
            } else {
                format!("{prefix}:{i}")
            };
            i += 1;
            let slot: i64 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(&name)
                .query(&mut c)
                .expect("CLUSTER KEYSLOT");
            let port = ranges
                .iter()
                .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
                .map(|(_, _, p)| *p)
                .expect("slot covered");
            let s = self
                .shards
                .iter()
                .position(|sh| self.nodes[sh.master].port == port)
                .expect("slot owner is a shard master");
            if per[s].len() < n {
                per[s].push(name);
            }
        }
        per
    }
}

/// `(first slot, last slot, master port)` of every range in `CLUSTER SLOTS`.
fn slot_owners(c: &mut Conn) -> Vec<(i64, i64, u16)> {
    let ranges: Vec<Value> = query(c, &["CLUSTER", "SLOTS"]);
    ranges
        .into_iter()
        .filter_map(|r| {
            let Value::Array(items) = r else { return None };
            let (Value::Int(lo), Value::Int(hi), Value::Array(owner)) =
                (&items[0], &items[1], &items[2])
            else {
                return None;
            };
            let Value::Int(port) = owner[1] else {
                return None;
            };
            Some((*lo, *hi, port as u16))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Sharded pub/sub on a raw connection
// ---------------------------------------------------------------------------

/// A connection in (sharded or classic) subscribe mode.
struct Subscriber {
    conn: Conn,
}

impl Subscriber {
    fn new(server: &Server, verb: &str, channel: &str) -> Subscriber {
        let mut conn = server.conn();
        conn.send_packed_command(&redis::cmd(verb).arg(channel).get_packed_command())
            .expect("send subscribe");
        let reply = conn.recv_response().expect("subscribe confirmation");
        let parts = testkit::flatten(&reply);
        assert_eq!(
            parts[0].0.to_ascii_lowercase(),
            verb.to_ascii_lowercase().into_bytes(),
            "{verb} confirmation: {reply:?}"
        );
        Subscriber { conn }
    }

    /// The next (channel, payload) pushed to this connection.
    fn next(&mut self) -> (String, String) {
        let reply = self
            .conn
            .recv_response()
            .expect("a message within the read timeout");
        let parts: Vec<String> = testkit::flatten(&reply)
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .collect();
        assert!(
            parts.len() == 3 && (parts[0] == "smessage" || parts[0] == "message"),
            "not a message: {parts:?}"
        );
        (parts[1].clone(), parts[2].clone())
    }
}

// ---------------------------------------------------------------------------
// Routing, slots, refused names, shard channels
// ---------------------------------------------------------------------------

#[test]
fn locks_spread_over_masters_route_by_name_and_publish_on_shard_channels() {
    let cluster = Cluster::start();
    let mut cc = cluster.client(&[]);
    let names = cluster.names_per_shard("order", 11);
    let mut per_master = BTreeMap::new();
    for (s, shard_names) in names.iter().enumerate() {
        for lock in &shard_names[..8] {
            // Every command through the cluster client, routed by the name.
            expect_reply(&mut cc, &["RWLOCK.WRITE", lock, "u:1", LEASE], Value::Nil);
            expect_reply(&mut cc, &["RWLOCK.READ", lock, "u:1", LEASE], Value::Nil);
            match ok(&mut cc, &["RWLOCK.READ", lock, "u:2", LEASE]) {
                Value::Int(pttl) => assert!(pttl > 0, "{lock}: refused with PTTL {pttl}"),
                other => panic!("{lock}: a second owner's read got {other:?}"),
            }
            expect_reply(
                &mut cc,
                &["RWLOCK.RENEW", lock, "u:1", LEASE],
                Value::Int(1),
            );
            let info = testkit::flatten(&ok(&mut cc, &["RWLOCK.INFO", lock]));
            assert_eq!(info[1].0, b"write", "{lock}: INFO {info:?}");
            // Every key of the lock is on the master that owns its slot.
            let master = &cluster.nodes[cluster.shards[s].master];
            let mut m = master.conn();
            let tk = timeout_key(lock, "u:1", 1);
            let here: i64 = redis::cmd("EXISTS")
                .arg(lock)
                .arg(&tk)
                .query(&mut m)
                .expect("EXISTS");
            assert_eq!(here, 2, "{lock} and {tk} on master :{}", master.port);
            *per_master.entry(master.port).or_insert(0) += 1;
        }
    }
    assert_eq!(per_master.len(), 3, "locks on every master: {per_master:?}");
    // The masters hold exactly the locks' keys (hash + one timeout key each).
    let total: i64 = cluster
        .shards
        .iter()
        .map(|sh| {
            let mut c = cluster.nodes[sh.master].conn();
            redis::cmd("DBSIZE").query::<i64>(&mut c).expect("DBSIZE")
        })
        .sum();
    assert_eq!(total, 2 * 3 * 8);

    // Sent to a master that does not own the slot: a redirect, not a write.
    let lock = &names[0][0];
    let mut wrong = cluster.nodes[cluster.shards[1].master].conn();
    let e = call(&mut wrong, &["RWLOCK.WRITE", lock, "u:9", LEASE]).expect_err("a redirect");
    assert_eq!(e.code(), Some("MOVED"), "{e}");
    let e = call(&mut wrong, &["RWLOCK.INFO", lock]).expect_err("a redirect");
    assert_eq!(e.code(), Some("MOVED"), "{e}");

    // Names whose derived keys would land in another slot are refused.
    for bad in ["a{b", "{}x", "x}y", "{"] {
        let e = call(&mut cc, &["RWLOCK.WRITE", bad, "u:1", LEASE]).expect_err("refused");
        assert!(e.to_string().contains("slot"), "{bad}: {e}");
    }

    // A multi-hold (contract §11): names in one slot (a hash tag) are
    // routed and taken as one; names in two slots are refused with
    // CROSSSLOT by the server, from the keys the command reports, and
    // nothing is taken.
    let holds = ["LOCK", "{grp}:a", "WRITE", "{grp}:b"];
    let acquire = [&["LOCK.ACQUIREALL", "m:1", LEASE, "HOLDS", "2"][..], &holds].concat();
    expect_reply(&mut cc, &acquire, Value::Nil);
    let release = [&["LOCK.UNLOCKALL", "m:1", "HOLDS", "2"][..], &holds].concat();
    expect_reply(
        &mut cc,
        &release,
        Value::Array(vec![Value::Int(1), Value::Int(1)]),
    );
    let (a, b) = (&names[0][10], &names[1][10]);
    for (s, own) in [(0, a), (1, b)] {
        let mut node = cluster.nodes[cluster.shards[s].master].conn();
        let spread = [
            "LOCK.ACQUIREALL",
            "m:1",
            LEASE,
            "HOLDS",
            "2",
            "LOCK",
            a,
            "READ",
            b,
        ];
        let e = call(&mut node, &spread).expect_err("two slots");
        assert_eq!(e.code(), Some("CROSSSLOT"), "{e}");
        let taken: i64 = query(&mut node, &["EXISTS", own.as_str()]);
        assert_eq!(taken, 0, "{own} not taken");
    }

    // Releases are SPUBLISHed: shard subscribers on the master and on its
    // replica get each message once; classic subscribers get nothing.
    for (s, shard) in cluster.shards.iter().enumerate() {
        let master = &cluster.nodes[shard.master];
        let replica = &cluster.nodes[shard.replica];
        let wlock = &names[s][8];
        let rlock = &names[s][9];
        expect_reply(&mut cc, &["RWLOCK.WRITE", wlock, "w:1", LEASE], Value::Nil);
        expect_reply(&mut cc, &["RWLOCK.READ", rlock, "r:1", LEASE], Value::Nil);
        let mut subs: Vec<(Subscriber, String)> = Vec::new();
        for node in [master, replica] {
            for lock in [wlock, rlock] {
                subs.push((
                    Subscriber::new(node, "SSUBSCRIBE", &channel(lock)),
                    lock.clone(),
                ));
            }
        }
        let mut classic = Subscriber::new(master, "SUBSCRIBE", &channel(wlock));

        // Still held (a write re-entry of the same lock), then released.
        expect_reply(&mut cc, &["RWLOCK.WRITE", wlock, "w:1", LEASE], Value::Nil);
        expect_reply(
            &mut cc,
            &["RWLOCK.UNLOCK", wlock, "w:1", "WRITE"],
            Value::Int(0),
        );
        expect_reply(
            &mut cc,
            &["RWLOCK.UNLOCK", wlock, "w:1", "WRITE"],
            Value::Int(1),
        );
        expect_reply(
            &mut cc,
            &["RWLOCK.UNLOCK", rlock, "r:1", "READ"],
            Value::Int(1),
        );

        let mut m = master.conn();
        for (sub, lock) in &mut subs {
            let expected = if lock == wlock { "1" } else { "0" };
            assert_eq!(sub.next(), (channel(lock), expected.to_string()), "{lock}");
            // The next message is our marker: the release came once.
            ok(&mut m, &["SPUBLISH", &channel(lock), "marker"]);
            assert_eq!(sub.next(), (channel(lock), "marker".to_string()), "{lock}");
        }
        ok(&mut m, &["PUBLISH", &channel(wlock), "classic-marker"]);
        assert_eq!(
            classic.next(),
            (channel(wlock), "classic-marker".to_string()),
            "a classic subscriber got a lock message: the release was not SPUBLISH"
        );
    }
}

// ---------------------------------------------------------------------------
// Failover
// ---------------------------------------------------------------------------

/// A BLOCK call on its own connection to `server`.
fn spawn_waiter(server: &Server, lock: &str, owner: &str) -> Call {
    server.spawn_call(&["RWLOCK.WRITE", lock, owner, LEASE, "BLOCK", "0"])
}

/// On `master`, the holds of `take_holds` on `locks`, then three writers
/// (owners `tag:0` to `tag:2`) parked on the first lock: the master's
/// connection, a snapshot of the locks, and the waiters.
fn holds_and_three_waiters(
    master: &Server,
    locks: &[String],
    tag: &str,
) -> (Conn, Snapshot, Vec<Call>) {
    let mut c = master.conn();
    take_holds(&mut c, locks);
    let before = lock_snapshot(&mut c);
    let parked: Vec<_> = (0..3)
        .map(|i| spawn_waiter(master, &locks[0], &format!("{tag}:{i}")))
        .collect();
    wait_until(WAITER_TIMEOUT, "3 waiters parked", || {
        (waiters(&mut c) == 3).then_some(())
    });
    (c, before, parked)
}

/// Keys of `locks` (and their timeout keys) in a full snapshot of `conn`.
fn lock_snapshot(conn: &mut Conn) -> Snapshot {
    let snap = snapshot(conn);
    assert!(
        snap.values().any(|k| k.expire_at > 0),
        "nothing with a deadline to compare"
    );
    snap
}

/// Holds of several kinds on `locks` through `conn` (a master), acknowledged
/// by the replica with `WAIT`.
fn take_holds(conn: &mut Conn, locks: &[String]) {
    for (i, lock) in locks.iter().enumerate() {
        match i % 3 {
            0 => {
                ok(conn, &["RWLOCK.WRITE", lock, "w:1", LEASE]);
                ok(conn, &["RWLOCK.WRITE", lock, "w:1", LEASE]);
                ok(conn, &["RWLOCK.READ", lock, "w:1", LEASE]);
            }
            1 => {
                for owner in ["r:1", "r:2", "r:1"] {
                    ok(conn, &["RWLOCK.READ", lock, owner, LEASE]);
                }
            }
            _ => {
                ok(conn, &["RWLOCK.READ", lock, "r:3", LEASE]);
                ok(conn, &["RWLOCK.READ", lock, "r:3", LEASE]);
                ok(conn, &["RWLOCK.UNLOCK", lock, "r:3", "READ"]);
            }
        }
    }
    wait_replica(conn);
}

#[test]
fn failover_keeps_acknowledged_locks_and_ends_every_wait() {
    let mut cluster = Cluster::start();
    let names = cluster.names_per_shard("stock", 6);
    let (a, b) = (0, 1);
    let (ma, ra) = (cluster.shards[a].master, cluster.shards[a].replica);
    let (mb, rb) = (cluster.shards[b].master, cluster.shards[b].replica);

    // --- Shard A: kill -9 of the master, takeover by its replica. ---
    let (c, before, parked) = holds_and_three_waiters(&cluster.nodes[ma], &names[a], "x");
    let held = &names[a][0];
    drop(c);
    cluster.nodes[ma].kill9();
    for w in parked {
        let (reply, waited) = w.join().expect("waiter thread");
        let e = reply.expect_err("a waiter on a dead master must fail");
        assert!(
            (e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error())
                && !e.is_timeout(),
            "a waiter on the dead master got {e} (kind {:?}) after {waited:?}",
            e.kind()
        );
        assert!(waited < WAITER_TIMEOUT, "the waiter hung for {waited:?}");
    }
    let mut r = cluster.nodes[ra].conn();
    ok(&mut r, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    wait_until(CLUSTER_TIMEOUT, "the replica to take over", || {
        (role(&mut r) == "master").then_some(())
    });
    let after = snapshot(&mut r);
    let d = diff(&before, &after, "old master", "promoted replica");
    assert!(
        d.is_empty(),
        "acknowledged locks changed in the failover:\n{d}"
    );

    // The promoted node enforces the locks it took over, and serves waiters.
    match ok(&mut r, &["RWLOCK.WRITE", held, "x:9", LEASE]) {
        Value::Int(pttl) => assert!(pttl > 0, "refused with PTTL {pttl}"),
        other => panic!("another owner got a held lock after failover: {other:?}"),
    }
    let w = spawn_waiter(&cluster.nodes[ra], held, "x:9");
    wait_until(WAITER_TIMEOUT, "a waiter parked on the new master", || {
        (waiters(&mut r) == 1).then_some(())
    });
    ok(&mut r, &["RWLOCK.UNLOCK", held, "w:1", "READ"]);
    ok(&mut r, &["RWLOCK.UNLOCK", held, "w:1", "WRITE"]);
    expect_reply(
        &mut r,
        &["RWLOCK.UNLOCK", held, "w:1", "WRITE"],
        Value::Int(1),
    );
    let (reply, _) = w.join().expect("waiter thread");
    assert_eq!(reply.expect("the waiter gets the lock"), Value::Nil);

    // The rest of the cluster routes the shard's names to the new master.
    let shards = cluster.converge(&[ma]);
    assert!(
        shards.iter().any(|s| s.master == ra),
        "{ra} is not a master"
    );
    let reader_lock = &names[a][1];
    let mut cc = cluster.client(&[ma]);
    let info = wait_until(
        CLUSTER_TIMEOUT,
        "the cluster client to reach the new master",
        || call(&mut cc, &["RWLOCK.INFO", reader_lock]).ok(),
    );
    let info = testkit::flatten(&info);
    assert_eq!(info[1].0, b"read", "{reader_lock}: {info:?}");

    // --- Shard B: a coordinated failover demotes a live master. ---
    let (mut c, before, parked) = holds_and_three_waiters(&cluster.nodes[mb], &names[b], "y");
    let held = &names[b][0];
    let mut r = cluster.nodes[rb].conn();
    ok(&mut r, &["CLUSTER", "FAILOVER"]);
    let mut seen = Vec::new();
    for w in parked {
        let (reply, waited) = w.join().expect("waiter thread");
        let e = reply.expect_err("a waiter on a demoted master must fail");
        assert!(
            e.code() == Some("READONLY") || e.code() == Some("UNBLOCKED"),
            "a waiter on the demoted master got {e}"
        );
        assert!(e.to_string().contains("replica"), "{e}");
        assert!(waited < WAITER_TIMEOUT, "the waiter hung for {waited:?}");
        seen.push(e.code().unwrap_or_default().to_string());
    }
    eprintln!("waiters on the demoted master got: {seen:?}");
    wait_until(
        CLUSTER_TIMEOUT,
        "the old master to become a replica",
        || (role(&mut c) == "slave").then_some(()),
    );
    assert_eq!(waiters(&mut c), 0, "waiters left on the demoted master");
    let after = snapshot(&mut r);
    let d = diff(&before, &after, "old master", "new master");
    assert!(
        d.is_empty(),
        "acknowledged locks changed in the failover:\n{d}"
    );
    let e = call(&mut c, &["RWLOCK.WRITE", held, "y:9", LEASE]).expect_err("not a master now");
    assert!(
        e.code() == Some("MOVED") || e.code() == Some("READONLY"),
        "a write on the demoted master: {e}"
    );
}

/// The fair lock in a cluster (contract §13): routed by the name, its line's
/// keys on the same master, the head told on its own shard channel.
#[test]
fn a_fair_lock_keeps_its_line_on_its_master_and_tells_the_head_by_spublish() {
    let cluster = Cluster::start();
    let mut cc = cluster.client(&[]);
    let lock = &cluster.names_per_shard("fair", 1)[1][0];
    let master = &cluster.nodes[cluster.shards[1].master];
    // Redisson's prefixName: a braced name is used as is.
    let derived = |prefix: &str| {
        if lock.contains('{') {
            format!("{prefix}:{lock}")
        } else {
            format!("{prefix}:{{{lock}}}")
        }
    };
    let head_channel = format!("{}:w:1", derived("redisson_lock__channel"));
    let mut head = Subscriber::new(master, "SSUBSCRIBE", &head_channel);
    expect_reply(
        &mut cc,
        &["FAIRLOCK.ACQUIRE", lock, "h:1", LEASE],
        Value::Nil,
    );
    for owner in ["w:1", "v:1"] {
        match ok(
            &mut cc,
            &["FAIRLOCK.ACQUIRE", lock, owner, LEASE, "WAIT", "5000"],
        ) {
            Value::Int(ttl) => assert!(ttl > 0, "{owner}: ttl {ttl}"),
            other => panic!("{owner} was not queued: {other:?}"),
        }
    }
    let mut m = master.conn();
    let queue = derived("redisson_lock_queue");
    let line: Vec<String> = query(&mut m, &["LRANGE", &queue, "0", "-1"]);
    assert_eq!(line, ["w:1", "v:1"]);
    expect_reply(&mut cc, &["FAIRLOCK.UNLOCK", lock, "h:1"], Value::Int(1));
    assert_eq!(head.next(), (head_channel, "0".to_string()));
    expect_reply(
        &mut cc,
        &["FAIRLOCK.ACQUIRE", lock, "w:1", LEASE],
        Value::Nil,
    );
    // A name whose line would leave its slot is refused.
    let e = call(&mut cc, &["FAIRLOCK.ACQUIRE", "a{b", "u:1", LEASE]).expect_err("refused");
    assert!(e.to_string().contains("slot"), "{e}");
}

/// The count-down latch in a cluster (contract §16): routed by its name, its
/// messages on its shard channel, a parked `LATCH.AWAIT` answered by a
/// count-down through the cluster client and by Redisson's script with
/// `SPUBLISH`; a name with braces (whose channel would leave the slot) is
/// refused.
#[test]
fn a_latch_publishes_on_its_shard_channel_and_its_waiter_is_answered() {
    let cluster = Cluster::start();
    let mut cc = cluster.client(&[]);
    // A latch's name has no braces (a third of these names have a tag).
    let names = cluster.names_per_shard("latch", 4);
    let latch = names[2]
        .iter()
        .find(|n| !n.contains('{'))
        .expect("a name without braces in the third shard");
    let master = &cluster.nodes[cluster.shards[2].master];
    let ch = format!("redisson_countdownlatch__channel__{{{latch}}}");
    let mut sub = Subscriber::new(master, "SSUBSCRIBE", &ch);
    expect_reply(&mut cc, &["LATCH.TRYSETCOUNT", latch, "2"], Value::Int(1));
    assert_eq!(sub.next(), (ch.clone(), "1".to_string()));
    let mut m = master.conn();
    let waiter = master.spawn_call(&["LATCH.AWAIT", latch, "BLOCK", "0"]);
    testkit::wait_for_waiters(&mut m, 1);
    expect_reply(&mut cc, &["LATCH.COUNTDOWN", latch], Value::Nil);
    let count_down = testkit::lua_script_of(testkit::LOCK_LUA, "latch_count_down");
    ok(
        &mut m,
        &["EVAL", &count_down, "2", latch, &ch, "0", "SPUBLISH"],
    );
    assert_eq!(sub.next(), (ch.clone(), "0".to_string()));
    let (reply, _) = waiter.join().expect("the waiter's thread");
    assert_eq!(reply.expect("the waiter's reply"), Value::Int(1));
    assert_eq!(waiters(&mut m), 0);
    let e = call(&mut cc, &["LATCH.TRYSETCOUNT", "{t}:a", "1"]).expect_err("refused");
    assert!(e.to_string().contains("slot"), "{e}");
}

/// The semaphore in a cluster (contract §15.4): a slot-safe name (`{t}:a`)
/// routed to its master, its counts on its shard channel by `SPUBLISH`
/// under `rwlock.publish auto` (a release through the cluster client, and
/// a `SESSION` holder's close on the master), a waiter parked on the
/// slot's master served by a release, and `MOVED` from any other master.
#[test]
fn a_semaphore_publishes_on_its_shard_channel_and_its_waiter_is_served() {
    let cluster = Cluster::start();
    let mut cc = cluster.client(&[]);
    let name = "{t}:a";
    let mut c = cluster.nodes[cluster.shards[0].master].conn();
    let slot: i64 = query(&mut c, &["CLUSTER", "KEYSLOT", name]);
    let port = slot_owners(&mut c)
        .into_iter()
        .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
        .map(|(_, _, p)| p)
        .expect("the slot's owner");
    let master = &cluster.nodes[cluster.index_of(port)];
    // A braced name is used as is in the channel: in the name's slot.
    let ch = format!("redisson_sc:{name}");
    let mut sub = Subscriber::new(master, "SSUBSCRIBE", &ch);
    expect_reply(
        &mut cc,
        &["SEMAPHORE.TRYSETPERMITS", name, "0"],
        Value::Int(1),
    );
    assert_eq!(sub.next(), (ch.clone(), "0".to_string()));
    let mut m = master.conn();
    let waiter = master.spawn_call(&["SEMAPHORE.ACQUIRE", name, "2", "BLOCK", "0"]);
    testkit::wait_for_waiters(&mut m, 1);
    expect_reply(&mut cc, &["SEMAPHORE.RELEASE", name, "3"], Value::Nil);
    assert_eq!(sub.next(), (ch.clone(), "3".to_string()));
    let (reply, _) = waiter.join().expect("the waiter's thread");
    assert_eq!(reply.expect("the waiter's reply"), Value::Int(1));
    assert_eq!(waiters(&mut m), 0);
    // A session holder on the master: its close gives back by SPUBLISH.
    let mut holder = master.conn();
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", name, "1", "SESSION"],
        Value::Int(1),
    );
    drop(holder);
    assert_eq!(sub.next(), (ch.clone(), "1".to_string()));
    let count: i64 = query(&mut m, &["GET", name]);
    assert_eq!(count, 1);
    // Every other master redirects to the slot's.
    for shard in &cluster.shards {
        let node = &cluster.nodes[shard.master];
        if node.port == port {
            continue;
        }
        let e = call(&mut node.conn(), &["SEMAPHORE.ACQUIRE", name, "1"]).expect_err("MOVED");
        assert_eq!(e.code(), Some("MOVED"), "{e}");
        assert!(e.to_string().contains(&port.to_string()), "{e}");
    }
}

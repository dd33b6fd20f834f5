//! The semaphore, `SEMAPHORE.*` (docs/design.md §15), against real servers:
//! a differential test against Redisson 4.7.0's own `RSemaphore` scripts
//! (random sequences; replies, the count, its TTL, the messages and the
//! keyspace events compared after every step), `BLOCK` (arrival order, no
//! barging, partial availability, every wake path, timeouts, idempotent
//! retries, demotion to replica, what `LOCK.WAITING` and `INFO` show),
//! `SESSION` (permits given back when their connection closes, §15.6), bad
//! input, ACL key patterns, and a replica and an AOF reload equal to the
//! master.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::{
    assert_counters, call, diff, eval_lua_of, events_str, expect_reply, info_field, ok, query,
    rwlock_counter, scaled, seed, snapshot, snapshot_of, timer_slack, wait_replica, wait_until,
    waiters, Call, Collector, Conn, Rng, Server, Snapshot, LOCK_LUA,
};

/// The channel Redisson's `RSemaphore` publishes a semaphore's counts on.
fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_sc:{name}")
    } else {
        format!("redisson_sc:{{{name}}}")
    }
}

/// The reply of a waiter's thread, which must have had one.
#[track_caller]
fn reply_of(waiter: Call) -> (Value, Duration) {
    let (reply, waited) = waiter.join().expect("the waiter's thread");
    (reply.expect("the waiter's reply"), waited)
}

fn count(c: &mut Conn, name: &str) -> Option<i64> {
    query(c, &["GET", name])
}

// ---------------------------------------------------------------------------
// Differential: the module against Redisson 4.7.0's scripts
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Acquire(i64),
    Release(i64),
    ReleaseIfExists(i64),
    TrySet(i64),
    TrySetTtl(i64, i64),
    Add(i64),
    Drain,
    Available,
    /// Another client deletes the count.
    Del,
}

fn gen_op(rng: &mut Rng) -> Op {
    match rng.below(20) {
        0..=4 => Op::Acquire(rng.range(1, 5)),
        5..=7 => Op::Release(rng.range(1, 5)),
        8 | 9 => Op::ReleaseIfExists(rng.range(1, 3)),
        10 | 11 => Op::TrySet(rng.range(-2, 8)),
        12 => Op::TrySetTtl(rng.range(0, 8), rng.range(30_000, 60_000)),
        13..=15 => Op::Add(rng.range(-6, 6)),
        16 => Op::Drain,
        17 | 18 => Op::Available,
        _ => Op::Del,
    }
}

/// The module's command for `op`.
fn module_cmd(name: &str, op: &Op) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    match op {
        Op::Acquire(n) => s(&["SEMAPHORE.ACQUIRE", name, &n.to_string()]),
        Op::Release(n) => s(&["SEMAPHORE.RELEASE", name, &n.to_string()]),
        Op::ReleaseIfExists(n) => s(&["SEMAPHORE.RELEASE", name, &n.to_string(), "IFEXISTS"]),
        Op::TrySet(n) => s(&["SEMAPHORE.TRYSETPERMITS", name, &n.to_string()]),
        Op::TrySetTtl(n, ttl) => s(&[
            "SEMAPHORE.TRYSETPERMITS",
            name,
            &n.to_string(),
            "TTL",
            &ttl.to_string(),
        ]),
        Op::Add(n) => s(&["SEMAPHORE.ADDPERMITS", name, &n.to_string()]),
        Op::Drain => s(&["SEMAPHORE.DRAIN", name]),
        Op::Available => s(&["SEMAPHORE.AVAILABLE", name]),
        Op::Del => s(&["DEL", name]),
    }
}

/// What Redisson's client runs for `op`: its script (KEYS, ARGV), or a
/// plain command.
fn oracle(conn: &mut Conn, name: &str, op: &Op) -> redis::RedisResult<Value> {
    let ch = channel(name);
    let keys = [name, ch.as_str()];
    let lua = |conn: &mut Conn, script: &str, keys: &[&str], args: &[&str]| {
        eval_lua_of(conn, LOCK_LUA, script, keys, args)
    };
    match op {
        Op::Acquire(n) => lua(conn, "semaphore_acquire", &[name], &[&n.to_string()]),
        Op::Release(n) => lua(
            conn,
            "semaphore_release",
            &keys,
            &[&n.to_string(), "PUBLISH"],
        ),
        Op::ReleaseIfExists(n) => lua(
            conn,
            "semaphore_release_if_exists",
            &keys,
            &[&n.to_string(), "PUBLISH"],
        ),
        Op::TrySet(n) => lua(
            conn,
            "semaphore_try_set",
            &keys,
            &[&n.to_string(), "PUBLISH"],
        ),
        Op::TrySetTtl(n, ttl) => lua(
            conn,
            "semaphore_try_set_ttl",
            &keys,
            &[&n.to_string(), "PUBLISH", &ttl.to_string()],
        ),
        Op::Add(n) => lua(conn, "semaphore_add", &keys, &[&n.to_string(), "PUBLISH"]),
        Op::Drain => lua(conn, "semaphore_drain", &[name], &[]),
        // availablePermits(): a GET, nil read as 0.
        Op::Available => call(conn, &["GET", name]).map(|v| match v {
            Value::Nil => Value::Int(0),
            other => other,
        }),
        Op::Del => call(conn, &["DEL", name]),
    }
}

/// The drain script replies the count's string, the command an integer
/// (design §15.5): the same number either way.
fn normalized(op: &Op, reply: Value) -> Value {
    match (op, reply) {
        (Op::Drain | Op::Available, Value::BulkString(b)) => {
            let text = String::from_utf8(b).expect("utf-8");
            Value::Int(text.parse().expect("an integer"))
        }
        (_, reply) => reply,
    }
}

/// Key by key, the count equal and the deadline within `slack` (each side
/// computed it from its own clock, a few ms apart).
fn same_state(o: &Snapshot, m: &Snapshot, slack: i64) -> Result<(), String> {
    let (ok_keys, mk) = (o.keys().collect::<Vec<_>>(), m.keys().collect::<Vec<_>>());
    if ok_keys != mk {
        return Err(diff(o, m, "redisson", "module"));
    }
    for (k, os) in o {
        let ms = &m[k];
        let close = match (os.expire_at, ms.expire_at) {
            (a, b) if a < 0 || b < 0 => a == b,
            (a, b) => (a - b).abs() <= slack,
        };
        if os.kind != ms.kind || os.content != ms.content || !close {
            return Err(format!("{k:?}: redisson {os:?}, module {ms:?}"));
        }
    }
    Ok(())
}

/// How a differential run spaces its steps.
#[derive(Clone, Copy)]
enum Spacing {
    /// One step after the other: TTLs are long and never run out.
    Back,
    /// A pause of up to 400 ms before every other step, and counts that expire
    /// within `margin` ms of a step or a comparison waited out first on
    /// both servers, so that every expiry falls between two steps.
    Expiring { margin: i64 },
}

/// Random sequences of `gen`'s operations on a few names, each run on
/// Redisson 4.7.0's scripts and on the module: the replies, then the key
/// (count, TTL), the messages and the keyspace events compared after every
/// step. Returns the module's server and a connection to it, for its
/// counters.
fn differential(
    base: u64,
    steps: usize,
    gen: fn(&mut Rng) -> Op,
    spacing: Spacing,
) -> (Server, Conn) {
    let events = ["--notify-keyspace-events", "KEA"];
    let oracle_server = Server::start_plain(&events);
    let module_server = Server::start(&events);
    let (mut o, mut m) = (oracle_server.conn(), module_server.conn());
    let patterns = ["__keyevent@0__:*", "redisson_sc:*"];
    let (oc, mc) = (
        Collector::start(&oracle_server, &patterns),
        Collector::start(&module_server, &patterns),
    );
    let slack = timer_slack().as_millis() as i64;
    let mut done = 0;
    for (i, name) in ["S", "{t}:a", "sem:x"].iter().enumerate() {
        let seed = base + i as u64;
        let mut rng = Rng(seed);
        let key = [name.as_bytes().to_vec()];
        for step in 0..steps {
            let op = gen(&mut rng);
            let cmd = module_cmd(name, &op);
            if let Spacing::Expiring { margin } = spacing {
                if rng.chance(50) {
                    thread::sleep(Duration::from_millis(rng.range(1, 400) as u64));
                }
                settle(&mut o, &mut m, name, margin);
            }
            let want = oracle(&mut o, name, &op).map(|r| normalized(&op, r));
            let got = call(&mut m, &cmd);
            let at = format!("seed {seed:#x} step {step} {cmd:?}");
            match (&want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{at}: reply"),
                _ => panic!("{at}: redisson {want:?}, module {got:?}"),
            }
            if let Spacing::Expiring { margin } = spacing {
                settle(&mut o, &mut m, name, margin);
            }
            let (os, ms) = (snapshot_of(&mut o, &key), snapshot_of(&mut m, &key));
            if let Err(e) = same_state(&os, &ms, slack) {
                panic!("{at}: {e}");
            }
            assert_eq!(
                events_str(&mc.sync(&mut m)),
                events_str(&oc.sync(&mut o)),
                "{at}: messages and keyspace events"
            );
            done += 1;
        }
        // A count left with a TTL would expire during the next name's
        // steps, on each server at its own moment.
        let (od, md) = (call(&mut o, &["DEL", name]), call(&mut m, &["DEL", name]));
        assert_eq!(md.ok(), od.ok(), "{name}: the last DEL");
        assert_eq!(
            events_str(&mc.sync(&mut m)),
            events_str(&oc.sync(&mut o)),
            "{name}: the last DEL's events"
        );
    }
    assert_eq!(done, 3 * steps);
    (module_server, m)
}

/// Waits until neither server's count of `name` expires within `margin` ms
/// of now: a count about to run out (or past due) is waited out and read
/// on both (the read deletes it, raising `expired`), so that no step and
/// no comparison straddles an expiry on one server only.
fn settle(o: &mut Conn, m: &mut Conn, name: &str, margin: i64) {
    loop {
        let due: Vec<i64> = [&mut *o, &mut *m]
            .into_iter()
            .map(|c| query::<i64, _>(c, &["PEXPIRETIME", name]))
            .filter(|at| *at > 0)
            .collect();
        let now = testkit::wall_us() / 1000;
        let Some(&last) = due.iter().max() else {
            return;
        };
        if due.iter().all(|at| at - now > margin) {
            return;
        }
        thread::sleep(Duration::from_millis((last - now + 1).max(0) as u64));
        for c in [&mut *o, &mut *m] {
            let _: i64 = query(c, &["PTTL", name]);
        }
    }
}

#[test]
fn semaphore_commands_match_redissons_scripts() {
    let (_server, mut m) = differential(seed(0x5E4A_0034), 120, gen_op, Spacing::Back);
    // The sequences went through every kind of state.
    assert!(rwlock_counter(&mut m, "permits_acquired") > 10);
    assert!(rwlock_counter(&mut m, "permits_released") > 10);
}

/// Counts set with TTLs of a few ms to a few hundred, expiring between
/// steps (design §15.1: the TTL is the semaphore's lifetime).
fn gen_expiring_op(rng: &mut Rng) -> Op {
    // A try-set writes only where there is no count, and a release on none
    // (or an add, a drain) leaves one without a TTL: deletions keep TTLs
    // coming.
    match rng.below(20) {
        0..=4 => Op::Acquire(rng.range(1, 4)),
        5 | 6 => Op::Release(rng.range(1, 4)),
        7 => Op::ReleaseIfExists(rng.range(1, 3)),
        8..=12 => Op::TrySetTtl(rng.range(-1, 8), rng.range(2, 300)),
        13 => Op::TrySet(rng.range(0, 5)),
        14 => Op::Add(rng.range(-3, 4)),
        15 => Op::Drain,
        16 | 17 => Op::Available,
        _ => Op::Del,
    }
}

#[test]
fn semaphore_commands_match_redissons_scripts_as_counts_expire() {
    // Far above a step's few milliseconds, so that an expiry never falls
    // inside one on a loaded machine; below most TTLs drawn, so that
    // commands run on counts that still have one.
    let margin = testkit::scaled(Duration::from_millis(150)).as_millis() as i64;
    let (_server, mut m) = differential(
        seed(0x5E4A_0036),
        100,
        gen_expiring_op,
        Spacing::Expiring { margin },
    );
    let expired: u64 = info_field(&mut m, "stats", "expired_keys")
        .and_then(|v| v.parse().ok())
        .expect("expired_keys");
    eprintln!("counts expired on the module's server: {expired}");
    assert!(expired >= 5, "only {expired} counts expired");
    assert!(rwlock_counter(&mut m, "permits_acquired") > 10);
}

/// A module client and a Redisson client take turns on one semaphore: each
/// sees the other's permits, and `RELEASE … REQUEST` is the unlock latch.
#[test]
fn module_and_redisson_share_one_semaphore() {
    let (server, mut c) = Server::started(&[]);
    let lua = |c: &mut Conn, script: &str, keys: &[&str], args: &[&str]| {
        eval_lua_of(c, LOCK_LUA, script, keys, args).expect(script)
    };
    let ch = channel("P");
    assert_eq!(
        lua(
            &mut c,
            "semaphore_try_set",
            &["P", ch.as_str()],
            &["2", "PUBLISH"]
        ),
        Value::Int(1)
    );
    expect_reply(&mut c, &["SEMAPHORE.ACQUIRE", "P", "2"], Value::Int(1));
    assert_eq!(
        lua(&mut c, "semaphore_acquire", &["P"], &["1"]),
        Value::Int(0)
    );
    expect_reply(
        &mut c,
        &["SEMAPHORE.RELEASE", "P", "1", "REQUEST", "r1", "60000"],
        Value::Nil,
    );
    // The retry gives nothing back.
    expect_reply(
        &mut c,
        &[
            "SEMAPHORE.RELEASE",
            "P",
            "1",
            "IFEXISTS",
            "REQUEST",
            "r1",
            "60000",
        ],
        Value::Int(1),
    );
    assert_eq!(count(&mut c, "P"), Some(1));
    let latch: String = query(&mut c, &["GET", "redisson_unlock_latch:{P}:r1"]);
    assert_eq!(latch, "1");
    assert_eq!(
        lua(&mut c, "semaphore_acquire", &["P"], &["1"]),
        Value::Int(1)
    );
    expect_reply(&mut c, &["SEMAPHORE.AVAILABLE", "P"], Value::Int(0));
    drop(server);
}

/// `rwlock.publish` picks the semaphore's publish command as the locks'
/// (`auto`: `SPUBLISH` in cluster mode, as Redisson's sharded pub/sub).
#[test]
fn counts_are_published_as_rwlock_publish_says() {
    let (server, mut c) = Server::started(&[]);
    let mut sharded = server.conn();
    ok(&mut sharded, &["SSUBSCRIBE", "redisson_sc:{P}"]);
    let plain = Collector::start(&server, &["redisson_sc:*"]);
    expect_reply(
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "P", "1"],
        Value::Int(1),
    );
    assert_eq!(
        events_str(&plain.sync(&mut c)),
        vec![("redisson_sc:{P}".to_string(), "1".to_string())]
    );
    ok(&mut c, &["CONFIG", "SET", "rwlock.publish", "spublish"]);
    expect_reply(&mut c, &["SEMAPHORE.ADDPERMITS", "P", "-3"], Value::Nil);
    sharded
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let push = match sharded.recv_response().expect("a pushed message") {
        Value::Array(items) => items,
        Value::Push { data, .. } => data,
        other => panic!("unexpected push {other:?}"),
    };
    assert_eq!(
        push,
        [
            Value::BulkString(b"smessage".to_vec()),
            Value::BulkString(b"redisson_sc:{P}".to_vec()),
            Value::BulkString(b"-2".to_vec()),
        ]
    );
    assert!(plain.sync(&mut c).is_empty(), "no PUBLISH in spublish mode");
}

// ---------------------------------------------------------------------------
// BLOCK
// ---------------------------------------------------------------------------

/// `SEMAPHORE.ACQUIRE name permits BLOCK 10000` in a thread, once parked
/// behind the clients already waiting.
fn park(server: &Server, c: &mut Conn, name: &str, permits: i64) -> Call {
    server.park(
        c,
        &[
            "SEMAPHORE.ACQUIRE",
            name,
            &permits.to_string(),
            "BLOCK",
            "10000",
        ],
    )
}

#[test]
fn waiters_are_served_in_arrival_order_and_nobody_barges() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "Q", "0"],
        Value::Int(1),
    );
    let three = park(&server, &mut c, "Q", 3);
    let one = park(&server, &mut c, "Q", 1);
    let last = park(&server, &mut c, "Q", 1);
    // Two free: the head wants 3, so the permits stay free for it, and
    // neither the waiters behind it nor a new taker of 1 get them.
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "Q", "2"], Value::Nil);
    expect_reply(&mut c, &["SEMAPHORE.ACQUIRE", "Q", "1"], Value::Int(0));
    assert_eq!(count(&mut c, "Q"), Some(2));
    assert_eq!(waiters(&mut c), 3);
    // LOCK.WAITING shows the semaphore, its first waiter wanting permits.
    let listing = format!("{:?}", ok(&mut c, &["LOCK.WAITING"]));
    assert!(listing.contains("semaphore"), "{listing}");
    // Two more: the head takes 3 and the next 1, in the release itself;
    // the last waits for one more.
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "Q", "2"], Value::Nil);
    assert_eq!(reply_of(three).0, Value::Int(1));
    assert_eq!(reply_of(one).0, Value::Int(1));
    assert_eq!(count(&mut c, "Q"), Some(0));
    assert_eq!(waiters(&mut c), 1);
    expect_reply(&mut c, &["SEMAPHORE.ADDPERMITS", "Q", "1"], Value::Nil);
    assert_eq!(reply_of(last).0, Value::Int(1));
    assert_eq!(count(&mut c, "Q"), Some(0));
    assert_counters(
        &mut c,
        &[
            ("waiters", 0),
            ("waits_started", 3),
            ("waits_served", 3),
            ("permits_acquired", 3),
        ],
    );
}

/// How permits come back to a semaphore with a waiter for 2.
enum Way {
    Command(&'static [&'static str]),
    /// Redisson 4.7's script, KEYS and ARGV.
    Lua(&'static str, &'static [&'static str]),
}

#[test]
fn every_way_permits_come_back_wakes_the_waiter() {
    let ch = channel("W");
    let ways = [
        Way::Command(&["SEMAPHORE.RELEASE", "W", "2"]),
        Way::Command(&["SEMAPHORE.ADDPERMITS", "W", "5"]),
        Way::Lua("semaphore_release", &["2", "PUBLISH"]),
        Way::Lua("semaphore_add", &["3", "PUBLISH"]),
        Way::Command(&["SET", "W", "2"]),
        Way::Command(&["INCRBY", "W", "2"]),
    ];
    let (server, mut c) = Server::started(&[]);
    for way in ways {
        ok(&mut c, &["SET", "W", "0"]);
        let waiter = park(&server, &mut c, "W", 2);
        let what = match way {
            Way::Command(args) => {
                ok(&mut c, args);
                format!("{args:?}")
            }
            Way::Lua(script, args) => {
                eval_lua_of(&mut c, LOCK_LUA, script, &["W", ch.as_str()], args).expect(script);
                script.to_string()
            }
        };
        let (reply, _) = reply_of(waiter);
        assert_eq!(reply, Value::Int(1), "{what}");
        assert_eq!(waiters(&mut c), 0, "{what}");
    }
    // A semaphore set where there was none.
    ok(&mut c, &["DEL", "W"]);
    let waiter = park(&server, &mut c, "W", 2);
    expect_reply(
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "W", "2"],
        Value::Int(1),
    );
    assert_eq!(reply_of(waiter).0, Value::Int(1));
    assert_eq!(count(&mut c, "W"), Some(0));
}

#[test]
fn del_and_flush_make_waiters_look_and_wait_on() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["SET", "D", "1"]);
    let waiter = park(&server, &mut c, "D", 2);
    for (i, args) in [&["DEL", "D"][..], &["FLUSHALL"]].iter().enumerate() {
        let before = rwlock_counter(&mut c, "wait_rechecks");
        ok(&mut c, args);
        // The waiter looked again (a timer after the event) and, finding
        // no permits, still waits.
        let looked = Instant::now() + timer_slack();
        while rwlock_counter(&mut c, "wait_rechecks") == before {
            assert!(Instant::now() < looked, "{args:?}: no look");
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(waiters(&mut c), 1, "{args:?}");
        ok(&mut c, &["SET", "D", &i.to_string()]);
    }
    expect_reply(&mut c, &["SEMAPHORE.ADDPERMITS", "D", "1"], Value::Nil);
    assert_eq!(reply_of(waiter).0, Value::Int(1));
    assert_eq!(count(&mut c, "D"), Some(0));
}

#[test]
fn a_wait_times_out_with_0_and_a_retried_acquisition_takes_once() {
    let (server, mut c) = Server::started(&[]);
    let waiter = server.spawn_call(&["SEMAPHORE.ACQUIRE", "T", "1", "BLOCK", "200"]);
    let (reply, waited) = reply_of(waiter);
    assert_eq!(reply, Value::Int(0));
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    assert_eq!(count(&mut c, "T"), None, "nothing written");
    // REQUEST: a parked acquisition records its latch when served; the
    // retry replies 1 and takes nothing.
    let req = [
        "SEMAPHORE.ACQUIRE",
        "T",
        "2",
        "BLOCK",
        "10000",
        "REQUEST",
        "a1",
        "60000",
    ];
    let waiter = server.park(&mut c, &req);
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "T", "3"], Value::Nil);
    assert_eq!(reply_of(waiter).0, Value::Int(1));
    expect_reply(&mut c, &req, Value::Int(1));
    assert_eq!(count(&mut c, "T"), Some(1));
    let latch: String = query(&mut c, &["GET", "redisson_lock_request_latch:{T}:a1"]);
    assert_eq!(latch, "0");
}

#[test]
fn waiters_fail_at_once_when_the_node_becomes_a_replica() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    let parked: Vec<Call> = (1..=2).map(|n| park(&node, &mut c, "R", n)).collect();
    node.demote_failing_waiters(&mut c, &master, parked);
    assert_counters(&mut c, &[("waiters", 0), ("waits_aborted", 2)]);
}

// ---------------------------------------------------------------------------
// SESSION: permits given back when their connection closes (§15.6)
// ---------------------------------------------------------------------------

/// The arguments of a server whose idle event loop wakes for its own
/// `serverCron` once a second (`hz 1`), for tests that time a give-back
/// against it (as tests/session.rs).
const SLOW_CRON: [&str; 2] = ["--hz", "1"];

/// How soon the give-back must follow the close on a [`SLOW_CRON`] server:
/// one turn of the event loop, with room for a loaded machine, and half
/// the 1000 ms such a server may wait for its next `serverCron`.
fn prompt() -> Duration {
    scaled(Duration::from_millis(500))
}

fn client_id(c: &mut Conn) -> String {
    let id: i64 = query(c, &["CLIENT", "ID"]);
    id.to_string()
}

/// Polls until the count of `name` reads `n`.
fn until_count(c: &mut Conn, name: &str, n: i64) {
    wait_until(Duration::from_secs(5), "the count", || {
        if count(c, name) == Some(n) {
            return Some(());
        }
        thread::sleep(Duration::from_millis(1));
        None
    });
}

/// Polls until the connection `id` is gone from `CLIENT LIST`.
fn until_closed(c: &mut Conn, id: &str) {
    wait_until(Duration::from_secs(5), "the close", || {
        let listed: String = query(c, &["CLIENT", "LIST", "ID", id]);
        if listed.is_empty() {
            return Some(());
        }
        thread::sleep(Duration::from_millis(2));
        None
    });
}

/// The `holders` of the one semaphore `LOCK.WAITING` lists.
fn waiting_holders(c: &mut Conn) -> Vec<Value> {
    let listing = ok(c, &["LOCK.WAITING"]);
    let Value::Array(locks) = listing else {
        panic!("LOCK.WAITING replied {listing:?}")
    };
    assert_eq!(locks.len(), 1, "{locks:?}");
    let Value::Array(fields) = &locks[0] else {
        panic!("{locks:?}")
    };
    let at = fields
        .iter()
        .position(|v| matches!(v, Value::SimpleString(s) if s == "holders"))
        .expect("holders");
    match &fields[at + 1] {
        Value::Array(holders) => holders.clone(),
        other => panic!("holders is {other:?}"),
    }
}

#[test]
fn session_permits_come_back_on_client_kill_and_serve_the_waiter() {
    let server = Server::start(&SLOW_CRON);
    let mut c = server.conn();
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    expect_reply(
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "K", "3"],
        Value::Int(1),
    );
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "K", "2", "SESSION"],
        Value::Int(1),
    );
    // A permit taken without SESSION on the same connection stays taken.
    expect_reply(&mut holder, &["SEMAPHORE.ACQUIRE", "K", "1"], Value::Int(1));
    let waiter = park(&server, &mut c, "K", 2);
    let holders = format!("{:?}", waiting_holders(&mut c));
    for shown in ["permits", &id, "count"] {
        assert!(holders.contains(shown), "{shown} in {holders}");
    }
    assert_counters(
        &mut c,
        &[
            ("session_clients", 1),
            ("session_permits", 2),
            ("session_holds", 0),
            ("session_binds", 1),
        ],
    );
    let killed = Instant::now();
    let n: i64 = query(&mut c, &["CLIENT", "KILL", "ID", &id]);
    assert_eq!(n, 1, "client {id} killed");
    let (reply, _) = reply_of(waiter);
    let served = killed.elapsed();
    assert_eq!(reply, Value::Int(1), "served");
    eprintln!("CLIENT KILL to the semaphore waiter served: {served:?}");
    assert!(served < prompt(), "served after {served:?}");
    assert_eq!(count(&mut c, "K"), Some(0), "2 back, 2 to the waiter");
    assert_counters(
        &mut c,
        &[
            ("session_clients", 0),
            ("session_permits", 0),
            ("session_permits_released", 2),
            ("session_releases", 0),
            ("permits_released", 1),
            ("waits_served", 1),
        ],
    );
}

#[test]
fn a_killed_client_process_gives_its_session_permits_back() {
    let server = Server::start(&SLOW_CRON);
    let mut c = server.conn();
    ok(&mut c, &["SET", "X", "1"]);
    // A client of its own process: it takes the permit with SESSION, and
    // sleeps, its socket open, until killed.
    let (mut child, reply) = server.client_process("SEMAPHORE.ACQUIRE X 1 SESSION", 4);
    assert_eq!(&reply, b":1\r\n", "it took the permit");
    assert_eq!(count(&mut c, "X"), Some(0));
    let waiter = park(&server, &mut c, "X", 1);
    let killed = Instant::now();
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let (reply, _) = reply_of(waiter);
    let served = killed.elapsed();
    assert_eq!(reply, Value::Int(1), "served");
    eprintln!("kill -9 of the client process to the semaphore waiter served: {served:?}");
    assert!(served < prompt(), "served after {served:?}");
    assert_eq!(count(&mut c, "X"), Some(0));
    assert_eq!(rwlock_counter(&mut c, "session_permits_released"), 1);
}

#[test]
fn quit_gives_session_permits_back_at_once() {
    let server = Server::start(&SLOW_CRON);
    let mut holder = server.conn();
    ok(&mut holder, &["SET", "Q", "4"]);
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "Q", "3", "SESSION"],
        Value::Int(1),
    );
    // Nothing else talks to the server: the give-back's message is
    // awaited, not polled for.
    let mut listener = server.conn();
    listener.subscribe(&channel("Q")).expect("SUBSCRIBE");
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let quit = Instant::now();
    // Redis 7.2+ and Valkey no longer know QUIT as a command but still close.
    let _ = call(&mut holder, &["QUIT"]);
    let message = listener.next_message().expect("the give-back's message");
    let took = quit.elapsed();
    assert_eq!(message.payload_str(), "4", "the new count");
    eprintln!("QUIT to the semaphore's message on an idle server: {took:?}");
    assert!(took < prompt(), "given back after {took:?}");
    drop(listener);
    let mut c = server.conn();
    assert_eq!(count(&mut c, "Q"), Some(4));
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 0);
}

#[test]
fn block_and_session_bind_the_permits_when_the_waiter_is_served() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["SET", "B", "0"]);
    // The waiter's connection outlives its call: it is handed back.
    let mut w = server.conn();
    let before = waiters(&mut c);
    let waiter = thread::spawn(move || {
        let reply = call(
            &mut w,
            &["SEMAPHORE.ACQUIRE", "B", "2", "BLOCK", "10000", "SESSION"],
        );
        (reply, w)
    });
    testkit::wait_for_waiters(&mut c, before + 1);
    assert_eq!(
        rwlock_counter(&mut c, "session_permits"),
        0,
        "none while it waits"
    );
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "B", "3"], Value::Nil);
    let (reply, w) = waiter.join().expect("the waiter's thread");
    assert_eq!(reply.expect("its reply"), Value::Int(1));
    assert_eq!(count(&mut c, "B"), Some(1));
    assert_counters(&mut c, &[("session_permits", 2), ("session_binds", 1)]);
    drop(w);
    until_count(&mut c, "B", 3);
    // A waiter that goes away before it is served binds nothing.
    ok(&mut c, &["SET", "B", "0"]);
    server.park_and_hang_up(
        &mut c,
        &["SEMAPHORE.ACQUIRE", "B", "1", "BLOCK", "0", "SESSION"],
    );
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "B", "1"], Value::Nil);
    assert_eq!(count(&mut c, "B"), Some(1));
    assert_counters(&mut c, &[("session_permits", 0), ("session_binds", 1)]);
}

#[test]
fn a_release_by_the_binding_connection_unbinds_its_session_permits_first() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["SET", "U", "5"]);
    let mut holder = server.conn();
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "U", "3", "SESSION"],
        Value::Int(1),
    );
    expect_reply(&mut holder, &["SEMAPHORE.ACQUIRE", "U", "1"], Value::Int(1));
    // Its own release gives back session permits first: 1 stays bound.
    expect_reply(&mut holder, &["SEMAPHORE.RELEASE", "U", "2"], Value::Nil);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 1);
    // A retried release replays and unbinds nothing more.
    let retried = ["SEMAPHORE.RELEASE", "U", "1", "REQUEST", "r1", "60000"];
    expect_reply(&mut holder, &retried, Value::Nil);
    expect_reply(&mut holder, &retried, Value::Nil);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 0);
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "U", "2", "SESSION"],
        Value::Int(1),
    );
    // Another connection's release is nobody's in particular: the holder's
    // two stay bound and come back at its close.
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "U", "1"], Value::Nil);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 2);
    assert_eq!(count(&mut c, "U"), Some(3));
    drop(holder);
    until_count(&mut c, "U", 5);
    assert_eq!(rwlock_counter(&mut c, "session_permits_released"), 2);
}

#[test]
fn a_semaphore_gone_since_gets_no_session_permits_back() {
    let (server, mut c) = Server::started(&[]);
    // What each case does between the acquisition of 2 of 5 permits with
    // SESSION and the close; whether the 2 stay bound; the count after.
    type Case = (
        &'static str,
        &'static [&'static [&'static str]],
        bool,
        Option<i64>,
    );
    let cases: [Case; 8] = [
        (
            "deleted, made again",
            &[&["DEL", "G"], &["SEMAPHORE.TRYSETPERMITS", "G", "1"]],
            false,
            Some(1),
        ),
        (
            "flushed, made again",
            &[&["FLUSHALL"], &["SET", "G", "1"]],
            false,
            Some(1),
        ),
        (
            "deleted in a script",
            &[&[
                "EVAL",
                "redis.call('DEL', KEYS[1]); return redis.call('SET', KEYS[1], '1')",
                "1",
                "G",
            ]],
            false,
            Some(1),
        ),
        (
            "deleted by LATCH.DELETE",
            &[&["LATCH.DELETE", "G"], &["SET", "G", "1"]],
            false,
            Some(1),
        ),
        (
            "replaced by a hash",
            &[&["DEL", "G"], &["HSET", "G", "f", "1"]],
            false,
            None,
        ),
        (
            "renamed away",
            &[&["RENAME", "G", "elsewhere"]],
            false,
            None,
        ),
        // The same semaphore: its bound permits are still out.
        (
            "drained, added to",
            &[
                &["SEMAPHORE.DRAIN", "G"],
                &["SEMAPHORE.ADDPERMITS", "G", "1"],
            ],
            true,
            Some(3),
        ),
        ("set by a plain SET", &[&["SET", "G", "7"]], true, Some(9)),
    ];
    for (what, between, kept, after) in cases {
        ok(&mut c, &["FLUSHALL"]);
        ok(&mut c, &["SET", "G", "5"]);
        let mut holder = server.conn();
        let id = client_id(&mut holder);
        expect_reply(
            &mut holder,
            &["SEMAPHORE.ACQUIRE", "G", "2", "SESSION"],
            Value::Int(1),
        );
        for args in between {
            ok(&mut c, args);
        }
        let bound = rwlock_counter(&mut c, "session_permits");
        assert_eq!(bound, if kept { 2 } else { 0 }, "{what}: bound");
        let given = rwlock_counter(&mut c, "session_permits_released");
        drop(holder);
        until_closed(&mut c, &id);
        if let (true, Some(n)) = (kept, after) {
            until_count(&mut c, "G", n);
            let now = rwlock_counter(&mut c, "session_permits_released");
            assert_eq!(now, given + 2, "{what}");
        } else {
            // Nothing was bound at the close: nothing is given back, now
            // or later.
            let kind: String = query(&mut c, &["TYPE", "G"]);
            let now = if kind == "string" {
                count(&mut c, "G")
            } else {
                None
            };
            assert_eq!(now, after, "{what}");
        }
    }
    // A semaphore whose TTL ran out, made again.
    ok(&mut c, &["FLUSHALL"]);
    expect_reply(
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "E", "5", "TTL", "100"],
        Value::Int(1),
    );
    let mut holder = server.conn();
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "E", "2", "SESSION"],
        Value::Int(1),
    );
    wait_until(Duration::from_secs(5), "the expiry", || {
        thread::sleep(Duration::from_millis(10));
        (query::<i64, _>(&mut c, &["EXISTS", "E"]) == 0).then_some(())
    });
    expect_reply(
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "E", "1"],
        Value::Int(1),
    );
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 0);
    drop(holder);
    assert_eq!(count(&mut c, "E"), Some(1), "the new semaphore got nothing");
}

#[test]
fn session_in_a_script_is_refused_and_in_multi_binds_to_the_client() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["SET", "M", "3"]);
    let e = call(
        &mut c,
        &[
            "EVAL",
            "return redis.call('SEMAPHORE.ACQUIRE', KEYS[1], '1', 'SESSION')",
            "1",
            "M",
        ],
    )
    .expect_err("no connection in a script");
    assert!(e.to_string().contains("SESSION binds"), "{e}");
    assert_eq!(count(&mut c, "M"), Some(3), "nothing taken");
    let mut holder = server.conn();
    ok(&mut holder, &["MULTI"]);
    ok(&mut holder, &["SEMAPHORE.ACQUIRE", "M", "2", "SESSION"]);
    let replies = ok(&mut holder, &["EXEC"]);
    assert_eq!(replies, Value::Array(vec![Value::Int(1)]));
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 2);
    drop(holder);
    until_count(&mut c, "M", 3);
}

#[test]
fn a_replica_and_the_aof_equal_the_master_after_a_give_back() {
    let (master, replica) = master_and_replica();
    let mut r = replica.conn();
    let mut m = master.conn();
    expect_reply(
        &mut m,
        &["SEMAPHORE.TRYSETPERMITS", "A", "4", "TTL", "600000"],
        Value::Int(1),
    );
    let mut holder = master.conn();
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "A", "3", "SESSION"],
        Value::Int(1),
    );
    let waiter = park(&master, &mut m, "A", 2);
    drop(holder);
    assert_eq!(reply_of(waiter).0, Value::Int(1));
    wait_replica(&mut m);
    let on_master = snapshot(&mut m);
    assert_eq!(count(&mut m, "A"), Some(2), "1 + 3 back - 2 served");
    assert_equal_with_deadlines(&on_master, &snapshot(&mut r), "replica");
    let mut master = master;
    master.kill9();
    master.restart();
    assert_equal_with_deadlines(&on_master, &snapshot(&mut master.conn()), "AOF reload");
}

#[test]
fn a_demoted_master_forgets_its_session_permits() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    ok(&mut c, &["SET", "F", "2"]);
    let mut holder = node.conn();
    expect_reply(
        &mut holder,
        &["SEMAPHORE.ACQUIRE", "F", "2", "SESSION"],
        Value::Int(1),
    );
    ok(
        &mut c,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 0);
    let id = client_id(&mut holder);
    drop(holder);
    until_closed(&mut c, &id);
    assert_eq!(
        rwlock_counter(&mut c, "session_permits_released"),
        0,
        "it never writes"
    );
}

/// Why the deadlock graph has no edge through permits (§15.3): A holds L
/// and waits for S, whose one permit B's connection holds with SESSION; B
/// waits for L. Through the permits this looks like a cycle, yet anyone may
/// give permits back: C does, A goes on and lets go of L, and B gets it.
/// Neither wait is refused.
#[test]
fn a_wait_through_session_permits_is_not_refused_as_a_deadlock() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["SET", "S", "1"]);
    let (mut a, mut b) = (server.conn(), server.conn());
    ok(&mut a, &["LOCK.ACQUIRE", "L", "a:1", "30000"]);
    expect_reply(
        &mut b,
        &["SEMAPHORE.ACQUIRE", "S", "1", "SESSION"],
        Value::Int(1),
    );
    let a_waits = thread::spawn(move || {
        let reply = call(&mut a, &["SEMAPHORE.ACQUIRE", "S", "1", "BLOCK", "10000"]);
        (reply, a)
    });
    testkit::wait_for_waiters(&mut c, 1);
    let b_waits = thread::spawn(move || {
        let reply = call(
            &mut b,
            &["LOCK.ACQUIRE", "L", "b:1", "30000", "BLOCK", "10000"],
        );
        (reply, b)
    });
    testkit::wait_for_waiters(&mut c, 2);
    assert_eq!(rwlock_counter(&mut c, "deadlocks"), 0);
    expect_reply(&mut c, &["SEMAPHORE.RELEASE", "S", "1"], Value::Nil);
    let (reply, mut a) = a_waits.join().expect("A's thread");
    assert_eq!(reply.expect("A's reply"), Value::Int(1));
    ok(&mut a, &["LOCK.UNLOCK", "L", "a:1"]);
    let (reply, _b) = b_waits.join().expect("B's thread");
    assert_eq!(reply.expect("B's reply"), Value::Nil, "B took L");
    assert_eq!(rwlock_counter(&mut c, "deadlocks"), 0);
}

// ---------------------------------------------------------------------------
// Bad input, ACL
// ---------------------------------------------------------------------------

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let events = ["--notify-keyspace-events", "KEA"];
    let server = Server::start(&events);
    let mut c = server.conn();
    ok(&mut c, &["SET", "B", "3"]);
    ok(&mut c, &["SET", "junk", "1.5"]);
    ok(&mut c, &["HSET", "h", "f", "1"]);
    let collector = Collector::start(&server, &["__keyevent@0__:*", "redisson_sc:*"]);
    let before = snapshot(&mut c);
    let permits = "ERR permits must be an integer from 1 to 9223372036854775807";
    let count_err = "ERR permits must be an integer";
    let ttl = "ERR TTL must be an integer number of milliseconds from 1 to 315360000000";
    let timeout = "ERR BLOCK timeout must be";
    let corrupt = "ERR corrupt semaphore: its count is not an integer";
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["SEMAPHORE.ACQUIRE", "B"],
            "ERR wrong number of arguments",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "B", "0"], permits),
        (vec!["SEMAPHORE.ACQUIRE", "B", "-1"], permits),
        (vec!["SEMAPHORE.ACQUIRE", "B", "01"], permits),
        (vec!["SEMAPHORE.ACQUIRE", "B", "x"], permits),
        (
            vec!["SEMAPHORE.ACQUIRE", "B", "1", "BLOCK"],
            "ERR syntax error",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "B", "1", "BLOCK", "-1"], timeout),
        (
            vec!["SEMAPHORE.ACQUIRE", "B", "1", "BLOCK", "1", "BLOCK", "1"],
            "ERR syntax error",
        ),
        (
            vec!["SEMAPHORE.ACQUIRE", "B", "1", "SESSION", "SESSION"],
            "ERR syntax error",
        ),
        (
            vec!["SEMAPHORE.ACQUIRE", "B", "1", "REQUEST", "", "10"],
            "ERR request id must be non-empty",
        ),
        (
            vec!["SEMAPHORE.ACQUIRE", "B", "1", "REQUEST", "r", "0"],
            "ERR request ttl must be",
        ),
        (
            vec!["SEMAPHORE.ACQUIRE", "a{b", "1"],
            "ERR lock name must be",
        ),
        (vec!["SEMAPHORE.ACQUIRE", "h", "1"], "WRONGTYPE"),
        (vec!["SEMAPHORE.ACQUIRE", "junk", "1"], corrupt),
        (
            vec!["SEMAPHORE.RELEASE", "B"],
            "ERR wrong number of arguments",
        ),
        (vec!["SEMAPHORE.RELEASE", "B", "0"], permits),
        (
            vec!["SEMAPHORE.RELEASE", "B", "1", "IFEXISTS", "IFEXISTS"],
            "ERR syntax error",
        ),
        (
            vec!["SEMAPHORE.RELEASE", "B", "1", "LEASE", "10"],
            "ERR syntax error",
        ),
        (
            vec!["SEMAPHORE.RELEASE", "B", "9223372036854775807"],
            "ERR overflow",
        ),
        (vec!["SEMAPHORE.RELEASE", "h", "1"], "WRONGTYPE"),
        (vec!["SEMAPHORE.RELEASE", "junk", "1"], corrupt),
        (
            vec!["SEMAPHORE.TRYSETPERMITS", "N"],
            "ERR wrong number of arguments",
        ),
        (vec!["SEMAPHORE.TRYSETPERMITS", "N", "1.5"], count_err),
        (
            vec!["SEMAPHORE.TRYSETPERMITS", "N", "1", "TTL"],
            "ERR wrong number of arguments",
        ),
        (vec!["SEMAPHORE.TRYSETPERMITS", "N", "1", "TTL", "0"], ttl),
        (
            vec!["SEMAPHORE.TRYSETPERMITS", "N", "1", "PX", "10"],
            "ERR syntax error",
        ),
        (vec!["SEMAPHORE.TRYSETPERMITS", "h", "1"], "WRONGTYPE"),
        (
            vec!["SEMAPHORE.ADDPERMITS", "B"],
            "ERR wrong number of arguments",
        ),
        (vec!["SEMAPHORE.ADDPERMITS", "B", "+1"], count_err),
        (
            vec!["SEMAPHORE.ADDPERMITS", "B", "9223372036854775807"],
            "ERR overflow",
        ),
        (vec!["SEMAPHORE.ADDPERMITS", "junk", "1"], corrupt),
        (vec!["SEMAPHORE.DRAIN"], "ERR wrong number of arguments"),
        (vec!["SEMAPHORE.DRAIN", "junk"], corrupt),
        (vec!["SEMAPHORE.DRAIN", "h"], "WRONGTYPE"),
        (
            vec!["SEMAPHORE.AVAILABLE", "B", "x"],
            "ERR wrong number of arguments",
        ),
        (vec!["SEMAPHORE.AVAILABLE", "junk"], corrupt),
    ];
    for (args, error) in &cases {
        match call(&mut c, args) {
            Ok(v) => panic!("{args:?} replied {v:?}"),
            Err(e) => {
                // The error line as the server sent it: code, then detail.
                let line = format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""));
                assert!(line.starts_with(error), "{args:?}: {line}");
            }
        }
    }
    assert_eq!(diff(&before, &snapshot(&mut c), "before", "after"), "");
    assert_eq!(events_str(&collector.sync(&mut c)), vec![]);
    assert_counters(&mut c, &[("permits_acquired", 0), ("permits_released", 0)]);
}

#[test]
fn acl_key_patterns_confine_a_user_to_its_own_semaphores() {
    let (server, mut admin) = Server::started(&[]);
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "app", "on", ">app-pw", "~app:*", "&*", "+@all",
        ],
    );
    ok(&mut admin, &["SET", "other", "5"]);
    let mut app = server.conn();
    ok(&mut app, &["AUTH", "app", "app-pw"]);
    let calls: [&[&str]; 6] = [
        &["SEMAPHORE.ACQUIRE", "NAME", "1", "BLOCK", "1"],
        &["SEMAPHORE.RELEASE", "NAME", "1", "REQUEST", "r", "1000"],
        &["SEMAPHORE.TRYSETPERMITS", "NAME", "1", "TTL", "1000"],
        &["SEMAPHORE.ADDPERMITS", "NAME", "1"],
        &["SEMAPHORE.DRAIN", "NAME"],
        &["SEMAPHORE.AVAILABLE", "NAME"],
    ];
    testkit::denied_theirs_allowed_mine(&mut app, &calls, "other", "app:s");
    assert_eq!(count(&mut admin, "other"), Some(5));
    // Module commands have no ACL category on Redis 7.0 (no module API
    // gives them one before 7.2): rules name them. A user allowed only
    // SEMAPHORE.AVAILABLE may read counts, not take permits.
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "reader",
            "on",
            ">r-pw",
            "~*",
            "&*",
            "+semaphore.available",
        ],
    );
    let mut reader = server.conn();
    ok(&mut reader, &["AUTH", "reader", "r-pw"]);
    expect_reply(
        &mut reader,
        &["SEMAPHORE.AVAILABLE", "other"],
        Value::Int(5),
    );
    let e = call(&mut reader, &["SEMAPHORE.ACQUIRE", "other", "1"]).expect_err("a write");
    assert_eq!(e.code(), Some("NOPERM"), "{e}");
}

// ---------------------------------------------------------------------------
// Replica and AOF
// ---------------------------------------------------------------------------

/// Random semaphore commands on a few names, TTLs included.
fn workload(c: &mut Conn, rng: &mut Rng, ops: usize) {
    for _ in 0..ops {
        let name = format!("s{}", rng.below(4));
        let op = gen_op(rng);
        let cmd = module_cmd(&name, &op);
        ok(c, &cmd);
    }
    // Something with a deadline to compare, whatever the sequence did.
    ok(c, &["DEL", "ttl"]);
    ok(c, &["SEMAPHORE.TRYSETPERMITS", "ttl", "3", "TTL", "60000"]);
    ok(c, &["SEMAPHORE.ACQUIRE", "ttl", "2"]);
}

/// A master writing its AOF on every write, and its replica, linked.
fn master_and_replica() -> (Server, Server) {
    let master = Server::start(&testkit::DURABLE_MASTER);
    let port = master.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    let up = Instant::now() + Duration::from_secs(20);
    while info_field(&mut r, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(Instant::now() < up, "replica link not up");
        thread::sleep(Duration::from_millis(20));
    }
    (master, replica)
}

fn assert_equal_with_deadlines(left: &Snapshot, right: &Snapshot, what: &str) {
    assert_eq!(diff(left, right, "master", what), "", "{what}");
    assert!(
        left.values().any(|s| s.expire_at > 0),
        "no deadline to compare"
    );
}

#[test]
fn replica_and_aof_reload_equal_the_master() {
    let (master, replica) = master_and_replica();
    let mut r = replica.conn();
    let mut m = master.conn();
    let mut rng = Rng(seed(0x5E4A_0035));
    workload(&mut m, &mut rng, 300);
    wait_replica(&mut m);
    let on_master = snapshot(&mut m);
    assert_equal_with_deadlines(&on_master, &snapshot(&mut r), "replica");
    // The AOF holds effects with absolute deadlines: a reload after time
    // passed lands on the same deadlines.
    let mut master = master;
    thread::sleep(Duration::from_millis(300));
    master.kill9();
    master.restart();
    assert_equal_with_deadlines(&on_master, &snapshot(&mut master.conn()), "AOF reload");
}

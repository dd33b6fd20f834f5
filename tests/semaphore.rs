//! The semaphore, `SEMAPHORE.*` (docs/design.md §15), against real servers:
//! a differential test against Redisson 4.7.0's own `RSemaphore` scripts
//! (random sequences; replies, the count, its TTL, the messages and the
//! keyspace events compared after every step), `BLOCK` (arrival order, no
//! barging, partial availability, every wake path, timeouts, idempotent
//! retries, demotion to replica, what `LOCK.WAITING` and `INFO` show), bad
//! input, ACL key patterns, and a replica and an AOF reload equal to the
//! master.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::{
    assert_counters, call, diff, eval_lua_of, events_str, expect_reply, info_field, ok, query,
    rwlock_counter, seed, snapshot, snapshot_of, timer_slack, wait_replica, waiters, Call,
    Collector, Conn, Rng, Server, Snapshot, LOCK_LUA,
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

#[test]
fn semaphore_commands_match_redissons_scripts() {
    let events = ["--notify-keyspace-events", "KEA"];
    let oracle_server = Server::start_plain(&events);
    let module_server = Server::start(&events);
    let (mut o, mut m) = (oracle_server.conn(), module_server.conn());
    let patterns = ["__keyevent@0__:*", "redisson_sc:*"];
    let (oc, mc) = (
        Collector::start(&oracle_server, &patterns),
        Collector::start(&module_server, &patterns),
    );
    let base = seed(0x5E4A_0034);
    let slack = timer_slack().as_millis() as i64;
    let mut steps = 0;
    for (i, name) in ["S", "{t}:a", "sem:x"].iter().enumerate() {
        let seed = base + i as u64;
        let mut rng = Rng(seed);
        let key = [name.as_bytes().to_vec()];
        for step in 0..120 {
            let op = gen_op(&mut rng);
            let cmd = module_cmd(name, &op);
            let want = oracle(&mut o, name, &op).map(|r| normalized(&op, r));
            let got = call(&mut m, &cmd);
            let at = format!("seed {seed:#x} step {step} {cmd:?}");
            match (&want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{at}: reply"),
                _ => panic!("{at}: redisson {want:?}, module {got:?}"),
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
            steps += 1;
        }
    }
    // The sequences went through every kind of state.
    assert_eq!(steps, 360);
    assert!(rwlock_counter(&mut m, "permits_acquired") > 10);
    assert!(rwlock_counter(&mut m, "permits_released") > 10);
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
            vec!["SEMAPHORE.ACQUIRE", "B", "1", "SESSION"],
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
    for args in calls {
        let theirs: Vec<&str> = args
            .iter()
            .map(|a| if *a == "NAME" { "other" } else { a })
            .collect();
        match call(&mut app, &theirs) {
            Ok(v) => panic!("{theirs:?} was allowed: {v:?}"),
            Err(e) => assert_eq!(e.code(), Some("NOPERM"), "{theirs:?}: {e}"),
        }
        let mine: Vec<&str> = args
            .iter()
            .map(|a| if *a == "NAME" { "app:s" } else { a })
            .collect();
        ok(&mut app, &mine);
    }
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

fn assert_equal_with_deadlines(left: &Snapshot, right: &Snapshot, what: &str) {
    assert_eq!(diff(left, right, "master", what), "", "{what}");
    assert!(
        left.values().any(|s| s.expire_at > 0),
        "no deadline to compare"
    );
}

#[test]
fn replica_and_aof_reload_equal_the_master() {
    let master = Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let port = master.port.to_string();
    let replica = Server::start(&["--replicaof", "127.0.0.1", &port]);
    let mut r = replica.conn();
    let up = Instant::now() + Duration::from_secs(20);
    while info_field(&mut r, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(Instant::now() < up, "replica link not up");
        thread::sleep(Duration::from_millis(20));
    }
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

//! The permit-expirable semaphore, `PERMIT.*` (docs/design.md §17), against
//! real servers: a differential test against Redisson 4.7.0's own
//! `RPermitExpirableSemaphore` scripts (random sequences with leases that
//! run out between steps, permits that never expire and negative counts;
//! replies, the count, the set of permits with its scores, the messages and
//! the keyspace events compared after every step), `BLOCK` (arrival order,
//! every wake path, a waiter served at a permit's expiry with no other
//! call, timeouts, idempotent retries, demotion), `SESSION` (permits
//! released when their connection closes, §17.6), bad input, ACL key
//! patterns, and a replica and an AOF reload equal to the master.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::{
    assert_counters, call, events_str, expect_reply, lua_script_of, ok, query, rwlock_counter,
    seed, snapshot, snapshot_of, timer_slack, wait_replica, waiters, Call, Collector, Conn, Rng,
    Server, Snapshot, LOCK_LUA,
};

/// Redisson's `nonExpirableTimeout`: the score of a permit without lease.
const NEVER: i64 = 922_337_203_685_477;

fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_sc:{name}")
    } else {
        format!("redisson_sc:{{{name}}}")
    }
}

/// The set of permits taken: Redisson's `suffixName(name, "timeout")`.
fn timeouts(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// `EVAL` of Redisson's script `name` with byte arguments (permit ids are
/// 16 raw bytes in its ARGV).
fn eval(c: &mut Conn, name: &str, keys: &[&str], args: &[Vec<u8>]) -> redis::RedisResult<Value> {
    redis::cmd("EVAL")
        .arg(lua_script_of(LOCK_LUA, name))
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(c)
}

fn s(v: &str) -> Vec<u8> {
    v.as_bytes().to_vec()
}

/// The reply of a waiter's thread, which must have had one.
#[track_caller]
fn reply_of(waiter: Call) -> Value {
    let (reply, _) = waiter.join().expect("the waiter's thread");
    reply.expect("the waiter's reply")
}

/// The ids of a granted acquisition's reply.
#[track_caller]
fn ids_of(reply: &Value) -> Vec<String> {
    match reply {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
                other => panic!("an id {other:?}"),
            })
            .collect(),
        other => panic!("not granted: {other:?}"),
    }
}

fn count(c: &mut Conn, name: &str) -> Option<i64> {
    query(c, &["GET", name])
}

// ---------------------------------------------------------------------------
// Differential: the module against Redisson 4.7.0's scripts
// ---------------------------------------------------------------------------

/// A lease: short ones run out before the next step (a pause follows).
#[derive(Debug, Clone, Copy)]
enum Lease {
    Short,
    Long,
    Never,
}

#[derive(Debug, Clone)]
enum Op {
    Acquire(i64, Lease),
    /// Ids by index among those taken (wrapping); `None`: never taken.
    Release(Vec<Option<usize>>),
    TryRelease(Option<usize>),
    UpdateLease(Option<usize>, Lease),
    LeaseTime(Option<usize>),
    TrySet(i64),
    Set(i64),
    Add(i64),
    Available,
    Permits,
    Acquired,
    /// Another client deletes the count.
    Del,
}

fn gen_lease(rng: &mut Rng) -> Lease {
    match rng.below(4) {
        0 => Lease::Short,
        1 => Lease::Never,
        _ => Lease::Long,
    }
}

fn gen_pick(rng: &mut Rng) -> Option<usize> {
    (rng.below(8) != 0).then(|| rng.below(6) as usize)
}

fn gen_op(rng: &mut Rng) -> Op {
    match rng.below(24) {
        0..=5 => Op::Acquire(rng.range(1, 4), gen_lease(rng)),
        6..=8 => Op::Release((0..rng.range(1, 3)).map(|_| gen_pick(rng)).collect()),
        9 | 10 => Op::TryRelease(gen_pick(rng)),
        11 => Op::UpdateLease(gen_pick(rng), gen_lease(rng)),
        12 => Op::LeaseTime(gen_pick(rng)),
        13 | 14 => Op::TrySet(rng.range(-2, 6)),
        15 => Op::Set(rng.range(-2, 8)),
        16 | 17 => Op::Add(rng.range(-4, 5)),
        18 => Op::Available,
        19 => Op::Permits,
        20 => Op::Acquired,
        21 => Op::Del,
        _ => Op::Acquire(rng.range(1, 3), Lease::Long),
    }
}

/// A short lease, and the pause after a step that took or renewed one: the
/// lease runs out on both sides before the next step, however far apart
/// their clocks were read.
const SHORT_MS: i64 = 20;

fn lease_ms(lease: Lease) -> i64 {
    match lease {
        Lease::Short => SHORT_MS,
        Lease::Long => 600_000,
        Lease::Never => -1,
    }
}

fn pick(taken: &[String], which: Option<usize>) -> String {
    match which {
        Some(i) if !taken.is_empty() => taken[i % taken.len()].clone(),
        _ => "ee".repeat(16),
    }
}

/// The module's command for `op`.
fn module_cmd(name: &str, op: &Op, taken: &[String]) -> Vec<String> {
    let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match op {
        Op::Acquire(n, l) => v(&[
            "PERMIT.ACQUIRE",
            name,
            &n.to_string(),
            &lease_ms(*l).to_string(),
        ]),
        Op::Release(which) => {
            let mut cmd = v(&["PERMIT.RELEASE", name]);
            cmd.extend(which.iter().map(|w| pick(taken, *w)));
            cmd
        }
        Op::TryRelease(w) => v(&["PERMIT.TRYRELEASE", name, &pick(taken, *w)]),
        Op::UpdateLease(w, l) => v(&[
            "PERMIT.UPDATELEASE",
            name,
            &pick(taken, *w),
            &lease_ms(*l).to_string(),
        ]),
        Op::LeaseTime(w) => v(&["PERMIT.LEASETIME", name, &pick(taken, *w)]),
        Op::TrySet(n) => v(&["PERMIT.TRYSETPERMITS", name, &n.to_string()]),
        Op::Set(n) => v(&["PERMIT.SETPERMITS", name, &n.to_string()]),
        Op::Add(n) => v(&["PERMIT.ADDPERMITS", name, &n.to_string()]),
        Op::Available => v(&["PERMIT.AVAILABLE", name]),
        Op::Permits => v(&["PERMIT.PERMITS", name]),
        Op::Acquired => v(&["PERMIT.ACQUIRED", name]),
        Op::Del => v(&["DEL", name]),
    }
}

/// Redisson's expiry for a lease taken now: `calcTimeout`.
fn expiry(now: i64, lease: Lease) -> i64 {
    match lease {
        Lease::Never => NEVER,
        l => now + lease_ms(l),
    }
}

/// What Redisson's client runs for `op`, with the ids the module's
/// acquisition took (`ids`, hex), so both sets hold the same members.
fn oracle(c: &mut Conn, name: &str, op: &Op, taken: &[String], ids: &[String]) -> Value {
    let (ch, set) = (channel(name), timeouts(name));
    let now = s(&now_ms().to_string());
    let read = [name, set.as_str(), ch.as_str()];
    let write = [name, ch.as_str(), set.as_str()];
    let publish = s("PUBLISH");
    let id = |w: &Option<usize>| unhex(&pick(taken, *w));
    let reply = match op {
        Op::Acquire(n, l) => {
            let mut args = vec![
                s(&n.to_string()),
                s(&expiry(now_ms(), *l).to_string()),
                now,
                s(&NEVER.to_string()),
                publish,
            ];
            args.extend(ids.iter().map(|i| unhex(i)));
            eval(c, "permit_acquire", &read, &args)
        }
        Op::Release(which) => {
            let mut args = vec![s(&which.len().to_string()), now, publish];
            args.extend(which.iter().map(id));
            eval(c, "permit_release_list", &write, &args)
        }
        Op::TryRelease(w) => eval(c, "permit_release", &write, &[id(w), s("1"), now, publish]),
        Op::UpdateLease(w, l) => eval(
            c,
            "permit_update_lease",
            &read,
            &[id(w), s(&expiry(now_ms(), *l).to_string()), now, publish],
        ),
        Op::LeaseTime(w) => eval(
            c,
            "permit_lease_time",
            &read,
            &[id(w), s(&NEVER.to_string()), now, publish],
        ),
        Op::TrySet(n) => eval(
            c,
            "permit_try_set",
            &[name, &ch],
            &[s(&n.to_string()), publish],
        ),
        Op::Set(n) => eval(c, "permit_set", &write, &[s(&n.to_string()), publish]),
        Op::Add(n) => eval(c, "permit_add", &[name, &ch], &[s(&n.to_string()), publish]),
        Op::Available => eval(c, "permit_available", &read, &[now, publish]),
        Op::Permits => eval(c, "permit_get_permits", &read, &[now, publish]),
        Op::Acquired => eval(c, "permit_acquired", &read, &[now, publish]),
        Op::Del => call(c, &["DEL", name]),
    };
    let reply = reply.unwrap_or_else(|e| panic!("{op:?}: {e}"));
    match (op, reply) {
        // 'OK': the ids it was given, as the command replies them.
        (Op::Acquire(..), Value::BulkString(b)) if b == b"OK" => Value::Array(
            ids.iter()
                .map(|i| Value::BulkString(i.as_bytes().to_vec()))
                .collect(),
        ),
        // ':<score>': the first expiry, an integer in the command's reply.
        (Op::Acquire(..), Value::BulkString(b)) => {
            let text = String::from_utf8(b).expect("utf-8");
            Value::Int(text[1..].parse().expect("a score"))
        }
        // availablePermits() reads the count's string when nothing expired.
        (Op::Available, Value::BulkString(b)) => {
            Value::Int(String::from_utf8(b).expect("utf-8").parse().expect("int"))
        }
        (_, reply) => reply,
    }
}

/// The replies equal, expiries (a refusal's first expiry, a lease's time
/// left) within `slack`: each side read its own clock.
fn same_reply(op: &Op, oracle: &Value, module: &Value, slack: i64) -> bool {
    match (op, oracle, module) {
        (Op::Acquire(..) | Op::LeaseTime(_), Value::Int(o), Value::Int(m)) => {
            *o == *m || (*o != NEVER && *o > 0 && (o - m).abs() <= slack)
        }
        _ => oracle == module,
    }
}

/// Key by key, the count equal, the set's members equal and each score
/// within `slack`, the deadlines within `slack`.
fn same_state(o: &Snapshot, m: &Snapshot, slack: i64) -> Result<(), String> {
    let keys = |s: &Snapshot| s.keys().cloned().collect::<Vec<_>>();
    if keys(o) != keys(m) {
        return Err(testkit::diff(o, m, "redisson", "module"));
    }
    for (k, os) in o {
        let ms = &m[k];
        let close = |a: i64, b: i64| a == b || (a > 0 && b > 0 && (a - b).abs() <= slack);
        let content = if os.kind == "zset" {
            let pairs = |s: &testkit::KeyState| {
                let mut p: Vec<(Vec<u8>, i64)> = s
                    .content
                    .chunks(2)
                    .map(|c| {
                        let score = String::from_utf8_lossy(&c[1].0).parse().expect("score");
                        (c[0].0.clone(), score)
                    })
                    .collect();
                p.sort();
                p
            };
            let (op, mp) = (pairs(os), pairs(ms));
            op.len() == mp.len()
                && op
                    .iter()
                    .zip(&mp)
                    .all(|((om, oscore), (mm, mscore))| om == mm && close(*oscore, *mscore))
        } else {
            os.content == ms.content
        };
        if os.kind != ms.kind || !content || !close(os.expire_at, ms.expire_at) {
            return Err(format!("{k:?}: redisson {os:?}, module {ms:?}"));
        }
    }
    Ok(())
}

#[test]
fn permit_commands_match_redissons_scripts() {
    let events = ["--notify-keyspace-events", "KEA"];
    let oracle_server = Server::start_plain(&events);
    let module_server = Server::start(&events);
    let (mut o, mut m) = (oracle_server.conn(), module_server.conn());
    let patterns = ["__keyevent@0__:*", "redisson_sc:*"];
    let (oc, mc) = (
        Collector::start(&oracle_server, &patterns),
        Collector::start(&module_server, &patterns),
    );
    let base = seed(0x9E41_0034);
    let slack = timer_slack().as_millis() as i64;
    let (mut steps, mut granted, mut reclaimed) = (0, 0, 0);
    for (i, name) in ["P", "{t}:a"].iter().enumerate() {
        let seed = base + i as u64;
        let mut rng = Rng(seed);
        let keys = [name.as_bytes().to_vec(), timeouts(name).into_bytes()];
        let mut taken: Vec<String> = Vec::new();
        for step in 0..150 {
            let op = gen_op(&mut rng);
            let cmd = module_cmd(name, &op, &taken);
            let at = format!("seed {seed:#x} step {step} {cmd:?}");
            let got = call(&mut m, &cmd).unwrap_or_else(|e| panic!("{at}: {e}"));
            let ids = match (&op, &got) {
                (Op::Acquire(..), Value::Array(_)) => ids_of(&got),
                // Refused: the script gets fresh ids, which it must not take.
                (Op::Acquire(n, _), _) => (0..*n).map(|k| format!("{k:02x}").repeat(16)).collect(),
                _ => Vec::new(),
            };
            let want = oracle(&mut o, name, &op, &taken, &ids);
            assert!(
                same_reply(&op, &want, &got, slack),
                "{at}: redisson {want:?}, module {got:?}"
            );
            if matches!(got, Value::Array(_)) {
                granted += 1;
                taken.extend(ids);
            }
            let (os, ms) = (snapshot_of(&mut o, &keys), snapshot_of(&mut m, &keys));
            if let Err(e) = same_state(&os, &ms, slack) {
                panic!("{at}: {e}");
            }
            let (oe, me) = (events_str(&oc.sync(&mut o)), events_str(&mc.sync(&mut m)));
            reclaimed += usize::from(me.iter().any(|(ch, _)| ch.ends_with(":zrem")));
            assert_eq!(me, oe, "{at}: messages and keyspace events");
            if matches!(
                op,
                Op::Acquire(_, Lease::Short) | Op::UpdateLease(_, Lease::Short)
            ) {
                thread::sleep(Duration::from_millis(SHORT_MS as u64 + 30));
            }
            steps += 1;
        }
    }
    // The sequences went through every kind of state.
    assert_eq!(steps, 300);
    assert!(granted > 10, "{granted} acquisitions granted");
    assert!(reclaimed > 5, "{reclaimed} steps removed permits");
    assert_eq!(rwlock_counter(&mut m, "permits_acquired"), granted);
}

/// A module client and a Redisson client take turns on one semaphore: each
/// releases the other's permits, and a Redisson acquisition sees the
/// module's permits taken.
#[test]
fn module_and_redisson_share_one_semaphore() {
    let (_server, mut c) = Server::started(&[]);
    let (ch, set) = (channel("Q"), timeouts("Q"));
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "Q", "2"], Value::Int(1));
    let mine = ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "Q", "1", "60000"]).expect("acquire"));
    let theirs = [7u8; 16];
    let now = now_ms();
    let args = [
        s("1"),
        s(&(now + 60_000).to_string()),
        s(&now.to_string()),
        s(&NEVER.to_string()),
        s("PUBLISH"),
        theirs.to_vec(),
    ];
    let read = ["Q", set.as_str(), ch.as_str()];
    assert_eq!(
        eval(&mut c, "permit_acquire", &read, &args).expect("acquire"),
        Value::BulkString(b"OK".to_vec())
    );
    // None left: a Redisson caller learns the first expiry.
    let refused = eval(&mut c, "permit_acquire", &read, &args).expect("acquire");
    assert!(
        matches!(refused, Value::BulkString(ref b) if b.starts_with(b":")),
        "{refused:?}"
    );
    expect_reply(&mut c, &["PERMIT.ACQUIRED", "Q"], Value::Int(2));
    // Each gives back the other's.
    expect_reply(
        &mut c,
        &["PERMIT.RELEASE", "Q", &hex(&theirs)],
        Value::Int(1),
    );
    let write = ["Q", ch.as_str(), set.as_str()];
    let released = eval(
        &mut c,
        "permit_release",
        &write,
        &[
            unhex(&mine[0]),
            s("1"),
            s(&now_ms().to_string()),
            s("PUBLISH"),
        ],
    )
    .expect("release");
    assert_eq!(released, Value::Int(1));
    expect_reply(&mut c, &["PERMIT.AVAILABLE", "Q"], Value::Int(2));
    assert_eq!(count(&mut c, "Q"), Some(2));
}

// ---------------------------------------------------------------------------
// BLOCK
// ---------------------------------------------------------------------------

/// `PERMIT.ACQUIRE name permits lease BLOCK 10000` in a thread, once parked
/// behind the clients already waiting.
fn park(server: &Server, c: &mut Conn, name: &str, permits: i64, lease: i64) -> Call {
    server.park(
        c,
        &[
            "PERMIT.ACQUIRE",
            name,
            &permits.to_string(),
            &lease.to_string(),
            "BLOCK",
            "10000",
        ],
    )
}

#[test]
fn waiters_are_served_in_arrival_order_and_nobody_barges() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "W", "2"], Value::Int(1));
    let held = ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "W", "2", "-1"]).expect("acquire"));
    let two = park(&server, &mut c, "W", 2, 60_000);
    let one = park(&server, &mut c, "W", 1, -1);
    // One back: the head wants 2, so it stays free for it; the waiter for
    // 1 behind it and a new taker of 1 get nothing.
    expect_reply(&mut c, &["PERMIT.RELEASE", "W", &held[0]], Value::Int(1));
    expect_reply(&mut c, &["PERMIT.ACQUIRE", "W", "1", "-1"], Value::Nil);
    assert_eq!(waiters(&mut c), 2);
    let listing = format!("{:?}", ok(&mut c, &["LOCK.WAITING"]));
    assert!(listing.contains("permit"), "{listing}");
    // One more released: the head takes 2 in the command itself; one added:
    // the next takes it.
    expect_reply(&mut c, &["PERMIT.TRYRELEASE", "W", &held[1]], Value::Int(1));
    assert_eq!(ids_of(&reply_of(two)).len(), 2);
    assert_eq!(waiters(&mut c), 1);
    expect_reply(&mut c, &["PERMIT.ADDPERMITS", "W", "1"], Value::Nil);
    assert_eq!(ids_of(&reply_of(one)).len(), 1);
    expect_reply(&mut c, &["PERMIT.AVAILABLE", "W"], Value::Int(0));
    expect_reply(&mut c, &["PERMIT.ACQUIRED", "W"], Value::Int(3));
}

/// A holder that never comes back (a crashed Redisson client): its permit's
/// expiry serves the waiter, with no command of anyone in between.
#[test]
fn a_waiter_is_served_when_a_permit_expires() {
    let (server, mut c) = Server::started(&["--notify-keyspace-events", "KEA"]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "X", "1"], Value::Int(1));
    let lease = 300;
    let held =
        ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "X", "1", &lease.to_string()]).expect("acquire"));
    let events = Collector::start(&server, &["__keyevent@0__:*", "redisson_sc:*"]);
    let started = Instant::now();
    let waiter = park(&server, &mut c, "X", 1, -1);
    let got = ids_of(&reply_of(waiter));
    assert_eq!(got.len(), 1);
    assert_ne!(got, held);
    assert!(started.elapsed() < Duration::from_millis(lease as u64) + timer_slack());
    expect_reply(&mut c, &["PERMIT.LEASETIME", "X", &got[0]], Value::Int(-1));
    expect_reply(&mut c, &["PERMIT.LEASETIME", "X", &held[0]], Value::Int(0));
    // The reclaim as the scripts make it: one ZREM, INCRBY, the new count
    // published; then the waiter's DECRBY and ZADD.
    let seen: Vec<String> = events_str(&events.sync(&mut c))
        .into_iter()
        .map(|(ch, msg)| format!("{ch} {msg}"))
        .collect();
    let want = [
        "__keyevent@0__:zrem {X}:timeout",
        "__keyevent@0__:del {X}:timeout",
        "__keyevent@0__:incrby X",
        "redisson_sc:{X} 1",
        "__keyevent@0__:incrby X",
        "__keyevent@0__:zadd {X}:timeout",
    ];
    assert_eq!(seen, want);
}

/// The script of Redisson's `release(id)`, as another client runs it.
fn redisson_release(c: &mut Conn, name: &str, id: &str) -> Value {
    let (ch, set) = (channel(name), timeouts(name));
    eval(
        c,
        "permit_release",
        &[name, &ch, &set],
        &[unhex(id), s("1"), s(&now_ms().to_string()), s("PUBLISH")],
    )
    .expect("permit_release")
}

#[test]
fn every_way_permits_come_back_wakes_the_waiter() {
    let (server, mut c) = Server::started(&[]);
    // Each way gives the one permit back (or makes one) to a waiter for 1.
    type Way = fn(&mut Conn, &str) -> Value;
    let ways: [(&str, Way); 7] = [
        ("PERMIT.RELEASE", |c, id| {
            call(c, &["PERMIT.RELEASE", "V", id]).expect("release")
        }),
        ("PERMIT.TRYRELEASE", |c, id| {
            call(c, &["PERMIT.TRYRELEASE", "V", id]).expect("release")
        }),
        ("Redisson's release", |c, id| redisson_release(c, "V", id)),
        ("PERMIT.ADDPERMITS", |c, _| {
            call(c, &["PERMIT.ADDPERMITS", "V", "1"]).expect("add")
        }),
        ("PERMIT.SETPERMITS", |c, _| {
            call(c, &["PERMIT.SETPERMITS", "V", "2"]).expect("set")
        }),
        ("INCRBY", |c, _| {
            call(c, &["INCRBY", "V", "1"]).expect("incrby")
        }),
        ("a lease shortened by UPDATELEASE", |c, id| {
            call(c, &["PERMIT.UPDATELEASE", "V", id, "1"]).expect("update")
        }),
    ];
    for (what, way) in ways {
        ok(&mut c, &["DEL", "V", "{V}:timeout"]);
        expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "V", "1"], Value::Int(1));
        let held = ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "V", "1", "600000"]).expect("take"));
        let waiter = park(&server, &mut c, "V", 1, 600_000);
        way(&mut c, &held[0]);
        assert_eq!(ids_of(&reply_of(waiter)).len(), 1, "{what}");
        assert_eq!(waiters(&mut c), 0, "{what}");
    }
    // A lease shortened by Redisson's own script: the set's zadd event
    // moves the waiters' next look.
    ok(&mut c, &["DEL", "V", "{V}:timeout"]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "V", "1"], Value::Int(1));
    let held = ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "V", "1", "600000"]).expect("take"));
    let waiter = park(&server, &mut c, "V", 1, -1);
    let now = now_ms();
    let updated = eval(
        &mut c,
        "permit_update_lease",
        &["V", "{V}:timeout", "redisson_sc:{V}"],
        &[
            unhex(&held[0]),
            s(&(now + 100).to_string()),
            s(&now.to_string()),
            s("PUBLISH"),
        ],
    )
    .expect("update");
    assert_eq!(updated, Value::Int(1));
    assert_eq!(
        ids_of(&reply_of(waiter)).len(),
        1,
        "Redisson's updateLeaseTime"
    );
}

#[test]
fn del_and_flush_make_waiters_look_and_wait_on_and_timeouts_reply_nil() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "D", "0"], Value::Int(1));
    let waiter = park(&server, &mut c, "D", 1, -1);
    ok(&mut c, &["DEL", "D"]);
    testkit::poll_until(
        Duration::from_secs(10),
        Duration::from_millis(5),
        "a look after DEL",
        || (rwlock_counter(&mut c, "wait_rechecks") >= 1).then_some(()),
    );
    ok(&mut c, &["FLUSHALL"]);
    // Nothing came back: each look finds no permit and the waiter waits on,
    // first in line for the next.
    assert_eq!(waiters(&mut c), 1);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "D", "1"], Value::Int(1));
    assert_eq!(ids_of(&reply_of(waiter)).len(), 1);
    // A wait that ends answers as a refusal: nil, no permit will expire.
    let refused = call(&mut c, &["PERMIT.ACQUIRE", "D", "1", "-1", "BLOCK", "50"]);
    assert_eq!(refused.expect("a reply"), Value::Nil);
    assert_eq!(waiters(&mut c), 0);
}

#[test]
fn a_retried_acquisition_replies_the_same_ids_and_takes_once() {
    let (_server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "R", "3"], Value::Int(1));
    let args = [
        "PERMIT.ACQUIRE",
        "R",
        "2",
        "60000",
        "REQUEST",
        "req-1",
        "60000",
    ];
    let first = call(&mut c, &args).expect("acquire");
    let again = call(&mut c, &args).expect("retry");
    assert_eq!(first, again);
    assert_eq!(ids_of(&first).len(), 2);
    expect_reply(&mut c, &["PERMIT.AVAILABLE", "R"], Value::Int(1));
    let latch: String = query(&mut c, &["GET", "redisson_lock_request_latch:{R}:req-1"]);
    assert_eq!(latch, "0");
}

#[test]
fn waiters_fail_at_once_when_the_node_becomes_a_replica() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "F", "0"], Value::Int(1));
    let parked: Vec<Call> = (1..=2).map(|n| park(&node, &mut c, "F", n, -1)).collect();
    node.demote_failing_waiters(&mut c, &master, parked);
    assert_counters(&mut c, &[("waiters", 0), ("waits_aborted", 2)]);
}

// ---------------------------------------------------------------------------
// Bad input and ACL
// ---------------------------------------------------------------------------

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["SET", "B", "2"]);
    ok(&mut c, &["SET", "junk", "x"]);
    ok(&mut c, &["HSET", "h", "f", "1"]);
    ok(&mut c, &["SET", "z", "1"]);
    ok(&mut c, &["RPUSH", "{z}:timeout", "a"]);
    let id = "ab".repeat(16);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["PERMIT.ACQUIRE", "B", "1"],
            "wrong number of arguments",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "0", "10"],
            "ERR permits must be",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "100001", "10"],
            "ERR permits must be",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "x", "10"],
            "ERR permits must be",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "0"],
            "ERR lease must be -1",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "-2"],
            "ERR lease must be -1",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "1.5"],
            "ERR lease must be -1",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "10", "BLOCK"],
            "ERR syntax error",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "10", "BLOCK", "-1"],
            "ERR BLOCK timeout",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "10", "NOPE"],
            "ERR syntax error",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "10", "REQUEST", "", "10"],
            "ERR request id",
        ),
        (
            vec!["PERMIT.ACQUIRE", "B", "1", "10", "REQUEST", "r", "0"],
            "ERR request ttl",
        ),
        (vec!["PERMIT.ACQUIRE", "{B", "1", "10"], "ERR lock name"),
        (
            vec!["PERMIT.ACQUIRE", "junk", "1", "10"],
            "ERR corrupt semaphore",
        ),
        (vec!["PERMIT.ACQUIRE", "h", "1", "10"], "WRONGTYPE"),
        (vec!["PERMIT.ACQUIRE", "z", "1", "10"], "WRONGTYPE"),
        (vec!["PERMIT.RELEASE", "B"], "wrong number of arguments"),
        (vec!["PERMIT.RELEASE", "B", "abc"], "ERR permit id"),
        (vec!["PERMIT.RELEASE", "B", &id, "xyz1"], "ERR permit id"),
        (vec!["PERMIT.RELEASE", "junk", &id], "ERR corrupt semaphore"),
        (
            vec!["PERMIT.TRYRELEASE", "B", &id, &id],
            "wrong number of arguments",
        ),
        (vec!["PERMIT.TRYRELEASE", "z", &id], "WRONGTYPE"),
        (
            vec!["PERMIT.UPDATELEASE", "B", &id],
            "wrong number of arguments",
        ),
        (
            vec!["PERMIT.UPDATELEASE", "B", &id, "0"],
            "ERR lease must be -1",
        ),
        (vec!["PERMIT.LEASETIME", "B", ""], "ERR permit id"),
        (
            vec!["PERMIT.TRYSETPERMITS", "B", "1.5"],
            "ERR permits must be an integer",
        ),
        (vec!["PERMIT.TRYSETPERMITS", "h", "1"], "WRONGTYPE"),
        (vec!["PERMIT.SETPERMITS", "B"], "wrong number of arguments"),
        (
            vec!["PERMIT.SETPERMITS", "junk", "1"],
            "ERR corrupt semaphore",
        ),
        (
            vec!["PERMIT.ADDPERMITS", "B", "99999999999999999999"],
            "ERR permits must be an integer",
        ),
        (
            vec!["PERMIT.ADDPERMITS", "B", "9223372036854775807"],
            "ERR overflow",
        ),
        (
            vec!["PERMIT.AVAILABLE", "B", "x"],
            "wrong number of arguments",
        ),
        (vec!["PERMIT.PERMITS", "z"], "WRONGTYPE"),
        (vec!["PERMIT.ACQUIRED", "h"], "WRONGTYPE"),
    ];
    let before = snapshot(&mut c);
    for (args, want) in cases {
        let e = call(&mut c, &args).expect_err(&format!("{args:?} must fail"));
        // The error's code is shown apart from its text.
        let text = want.trim_start_matches("ERR ");
        assert!(e.to_string().contains(text), "{args:?}: {e}");
    }
    assert_eq!(
        testkit::diff(&before, &snapshot(&mut c), "before", "after"),
        ""
    );
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
    let id = "ab".repeat(16);
    let calls: [&[&str]; 11] = [
        &["PERMIT.ACQUIRE", "NAME", "1", "100", "BLOCK", "1"],
        &["PERMIT.RELEASE", "NAME", &id],
        &["PERMIT.TRYRELEASE", "NAME", &id],
        &["PERMIT.UPDATELEASE", "NAME", &id, "100"],
        &["PERMIT.LEASETIME", "NAME", &id],
        &["PERMIT.TRYSETPERMITS", "NAME", "1"],
        &["PERMIT.SETPERMITS", "NAME", "1"],
        &["PERMIT.ADDPERMITS", "NAME", "1"],
        &["PERMIT.AVAILABLE", "NAME"],
        &["PERMIT.PERMITS", "NAME"],
        &["PERMIT.ACQUIRED", "NAME"],
    ];
    testkit::denied_theirs_allowed_mine(&mut app, &calls, "other", "app:p");
    assert_eq!(count(&mut admin, "other"), Some(5));
}

// ---------------------------------------------------------------------------
// Replica and AOF
// ---------------------------------------------------------------------------

/// Random permit commands on a few names, with leases that do not run out
/// during the test (each side's expiries must be the master's).
fn workload(c: &mut Conn, rng: &mut Rng, ops: usize) {
    let mut taken: Vec<String> = Vec::new();
    for _ in 0..ops {
        let name = format!("p{}", rng.below(3));
        let op = match gen_op(rng) {
            Op::Acquire(n, Lease::Short) => Op::Acquire(n, Lease::Long),
            Op::UpdateLease(w, Lease::Short) => Op::UpdateLease(w, Lease::Long),
            op => op,
        };
        let reply = call(c, &module_cmd(&name, &op, &taken)).expect("a workload command");
        if let (Op::Acquire(..), Value::Array(_)) = (&op, &reply) {
            taken.extend(ids_of(&reply));
        }
    }
    // Something with a deadline to compare, whatever the sequence did.
    ok(c, &["DEL", "ttl", "{ttl}:timeout"]);
    ok(c, &["SET", "ttl", "3", "PX", "600000"]);
    ids_of(&call(c, &["PERMIT.ACQUIRE", "ttl", "2", "600000"]).expect("acquire"));
}

#[test]
fn replica_and_aof_reload_equal_the_master() {
    let master = Server::start(&testkit::DURABLE_MASTER);
    let replica = master.start_replica(&[]);
    let mut r = replica.conn();
    let mut m = master.conn();
    let mut rng = Rng(seed(0x9E41_0035));
    workload(&mut m, &mut rng, 300);
    wait_replica(&mut m);
    let on_master = snapshot(&mut m);
    assert!(
        on_master.values().any(|s| s.kind == "zset"),
        "no permits taken"
    );
    assert!(
        on_master.values().any(|s| s.expire_at > 0),
        "no deadline to compare"
    );
    assert_eq!(
        testkit::diff(&on_master, &snapshot(&mut r), "master", "replica"),
        ""
    );
    let mut master = master;
    thread::sleep(Duration::from_millis(300));
    master.kill9();
    master.restart();
    let reloaded = snapshot(&mut master.conn());
    assert_eq!(
        testkit::diff(&on_master, &reloaded, "master", "AOF reload"),
        ""
    );
}

// ---------------------------------------------------------------------------
// SESSION: permits released when their connection closes
// ---------------------------------------------------------------------------

/// How soon the release must follow the close on a server started with
/// `--hz 1`, whose idle event loop wakes for its own `serverCron` once a
/// second: one turn of the loop, with room for a loaded machine, and half
/// the second such a server may wait.
fn prompt() -> Duration {
    testkit::scaled(Duration::from_millis(500))
}

/// Polls until `what` holds.
fn until(c: &mut Conn, what: &str, mut holds: impl FnMut(&mut Conn) -> bool) {
    testkit::wait_until(Duration::from_secs(5), what, || {
        if holds(c) {
            return Some(());
        }
        thread::sleep(Duration::from_millis(2));
        None
    });
}

/// `PERMIT.ACQUIRE name permits lease SESSION` on `c`: the ids taken.
fn take_bound(c: &mut Conn, name: &str, permits: i64, lease: i64) -> Vec<String> {
    let (n, lease) = (permits.to_string(), lease.to_string());
    ids_of(&call(c, &["PERMIT.ACQUIRE", name, &n, &lease, "SESSION"]).expect("acquire"))
}

#[test]
fn session_permits_come_back_on_client_kill_and_serve_the_waiter() {
    let server = Server::start(&["--hz", "1"]);
    let mut c = server.conn();
    let mut holder = server.conn();
    let id: i64 = query(&mut holder, &["CLIENT", "ID"]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "K", "3"], Value::Int(1));
    let bound = take_bound(&mut holder, "K", 2, 60_000);
    // A permit taken without SESSION on the same connection stays taken.
    let plain = ids_of(&call(&mut holder, &["PERMIT.ACQUIRE", "K", "1", "-1"]).expect("acquire"));
    let waiter = park(&server, &mut c, "K", 2, -1);
    assert_counters(
        &mut c,
        &[
            ("session_clients", 1),
            ("session_permits", 2),
            ("session_binds", 1),
        ],
    );
    let killed = Instant::now();
    let n: i64 = query(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert_eq!(n, 1, "client {id} killed");
    let got = ids_of(&reply_of(waiter));
    let served = killed.elapsed();
    eprintln!("CLIENT KILL to the permit waiter served: {served:?}");
    assert!(served < prompt(), "served after {served:?}");
    assert_eq!(got.len(), 2);
    for gone in &bound {
        expect_reply(&mut c, &["PERMIT.LEASETIME", "K", gone], Value::Int(0));
    }
    expect_reply(
        &mut c,
        &["PERMIT.LEASETIME", "K", &plain[0]],
        Value::Int(-1),
    );
    expect_reply(&mut c, &["PERMIT.ACQUIRED", "K"], Value::Int(3));
    assert_eq!(count(&mut c, "K"), Some(0), "2 back, 2 to the waiter");
    assert_counters(&mut c, &[("session_permits", 0), ("waits_served", 1)]);
    // One release of the two ids.
    assert_counters(
        &mut c,
        &[("session_permits_released", 2), ("permits_released", 1)],
    );
}

#[test]
fn a_killed_client_process_gives_its_session_permits_back() {
    let server = Server::start(&["--hz", "1"]);
    let mut c = server.conn();
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "X", "1"], Value::Int(1));
    // Its own process takes the permit with SESSION and sleeps, its socket
    // open, until killed. The reply: `*1`, `$32`, the id.
    let (mut child, reply) = server.client_process("PERMIT.ACQUIRE X 1 -1 SESSION", 43);
    let reply = String::from_utf8(reply).expect("utf-8");
    assert!(reply.starts_with("*1\r\n$32\r\n"), "{reply:?}");
    let held = reply[9..41].to_string();
    let waiter = park(&server, &mut c, "X", 1, 60_000);
    let killed = Instant::now();
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let got = ids_of(&reply_of(waiter));
    let served = killed.elapsed();
    eprintln!("kill -9 of the client process to the permit waiter served: {served:?}");
    assert!(served < prompt(), "served after {served:?}");
    assert_ne!(got, vec![held.clone()]);
    expect_reply(&mut c, &["PERMIT.LEASETIME", "X", &held], Value::Int(0));
    assert_eq!(rwlock_counter(&mut c, "session_permits_released"), 1);
}

#[test]
fn block_and_session_bind_the_ids_when_the_waiter_is_served() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "B", "2"], Value::Int(1));
    let held = ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "B", "2", "-1"]).expect("acquire"));
    // The waiter's connection outlives its call: it is handed back.
    let mut w = server.conn();
    let before = waiters(&mut c);
    let waiter = thread::spawn(move || {
        let wait = [
            "PERMIT.ACQUIRE",
            "B",
            "2",
            "60000",
            "BLOCK",
            "10000",
            "SESSION",
        ];
        (call(&mut w, &wait), w)
    });
    testkit::wait_for_waiters(&mut c, before + 1);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 0, "none yet");
    expect_reply(
        &mut c,
        &["PERMIT.RELEASE", "B", &held[0], &held[1]],
        Value::Int(2),
    );
    let (reply, w) = waiter.join().expect("the waiter's thread");
    let got = ids_of(&reply.expect("its reply"));
    assert_counters(&mut c, &[("session_permits", 2), ("session_binds", 1)]);
    drop(w);
    until(&mut c, "the give-back", |c| count(c, "B") == Some(2));
    for id in &got {
        expect_reply(&mut c, &["PERMIT.LEASETIME", "B", id], Value::Int(0));
    }
    assert_counters(
        &mut c,
        &[("session_permits", 0), ("session_permits_released", 2)],
    );
}

/// Ids are owned: whoever gives one back (a `PERMIT.RELEASE` or
/// `TRYRELEASE` of another connection, a script, its expiry) unbinds it,
/// and the close releases only the ids still held, each once.
#[test]
fn a_bound_id_given_back_by_anyone_is_not_released_again() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "U", "6"], Value::Int(1));
    let mut holder = server.conn();
    let id: i64 = query(&mut holder, &["CLIENT", "ID"]);
    let bound = take_bound(&mut holder, "U", 4, 60_000);
    let short = take_bound(&mut holder, "U", 1, 100);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 5);
    expect_reply(&mut c, &["PERMIT.RELEASE", "U", &bound[0]], Value::Int(1));
    expect_reply(
        &mut c,
        &["PERMIT.TRYRELEASE", "U", &bound[1]],
        Value::Int(1),
    );
    // A script's ZREM and INCRBY, as Redisson's release makes them.
    let released = redis::cmd("EVAL")
        .arg("redis.call('ZREM', KEYS[2], ARGV[1]); return redis.call('INCRBY', KEYS[1], 1)")
        .arg(2)
        .arg("U")
        .arg(timeouts("U"))
        .arg(unhex(&bound[2]))
        .query::<i64>(&mut c)
        .expect("the script's release");
    assert_eq!(released, 4);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 2);
    // The short lease runs out; a read reclaims it.
    until(&mut c, "the reclaim", |c| {
        query::<i64, _>(c, &["PERMIT.LEASETIME", "U", &short[0]]) == 0
    });
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 1);
    // Another taker now holds what came back: the close gives back the one
    // bound id left, and nothing of theirs.
    let others = ids_of(&call(&mut c, &["PERMIT.ACQUIRE", "U", "5", "-1"]).expect("acquire"));
    drop(holder);
    until(&mut c, "the give-back", |c| count(c, "U") == Some(1));
    assert_counters(
        &mut c,
        &[("session_permits", 0), ("session_permits_released", 1)],
    );
    for mine in &others {
        expect_reply(&mut c, &["PERMIT.LEASETIME", "U", mine], Value::Int(-1));
    }
    let listed: String = query(&mut c, &["CLIENT", "LIST", "ID", &id.to_string()]);
    assert!(listed.is_empty(), "closed: {listed}");
}

#[test]
fn a_semaphore_gone_forgets_its_session_ids() {
    let (server, mut c) = Server::started(&[]);
    // What each case does between the acquisition of 2 of 5 permits with
    // SESSION and the close: each leaves the permits nobody's to give back.
    let cases: [(&str, &[&[&str]]); 4] = [
        (
            "count deleted",
            &[&["DEL", "G"], &["PERMIT.TRYSETPERMITS", "G", "5"]],
        ),
        ("set deleted", &[&["DEL", "{G}:timeout"]]),
        ("count replaced", &[&["DEL", "G"], &["HSET", "G", "f", "1"]]),
        ("flushed", &[&["FLUSHALL"], &["SET", "G", "5"]]),
    ];
    for (what, between) in cases {
        ok(&mut c, &["FLUSHALL"]);
        expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "G", "5"], Value::Int(1));
        let mut holder = server.conn();
        let id: i64 = query(&mut holder, &["CLIENT", "ID"]);
        take_bound(&mut holder, "G", 2, 60_000);
        for args in between {
            ok(&mut c, args);
        }
        assert_eq!(rwlock_counter(&mut c, "session_permits"), 0, "{what}");
        let before = ok(&mut c, &["DUMP", "G"]);
        let closes = rwlock_counter(&mut c, "session_permits_released");
        drop(holder);
        let id = id.to_string();
        until(&mut c, "the close", |c| {
            query::<String, _>(c, &["CLIENT", "LIST", "ID", &id]).is_empty()
        });
        assert_eq!(ok(&mut c, &["DUMP", "G"]), before, "{what}");
        assert_eq!(rwlock_counter(&mut c, "session_permits_released"), closes);
    }
}

#[test]
fn session_twice_or_in_a_script_is_refused_and_in_multi_binds_to_the_client() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["PERMIT.TRYSETPERMITS", "M", "3"], Value::Int(1));
    let twice = ["PERMIT.ACQUIRE", "M", "1", "-1", "SESSION", "SESSION"];
    assert!(call(&mut c, &twice).is_err(), "SESSION twice");
    let script = "return redis.call('PERMIT.ACQUIRE', KEYS[1], '1', '-1', 'SESSION')";
    let e = call(&mut c, &["EVAL", script, "1", "M"]).expect_err("no connection in a script");
    assert!(e.to_string().contains("SESSION binds"), "{e}");
    assert_eq!(count(&mut c, "M"), Some(3), "nothing taken");
    let mut holder = server.conn();
    ok(&mut holder, &["MULTI"]);
    ok(&mut holder, &["PERMIT.ACQUIRE", "M", "2", "-1", "SESSION"]);
    let replies = ok(&mut holder, &["EXEC"]);
    let Value::Array(replies) = replies else {
        panic!("EXEC replied {replies:?}")
    };
    assert_eq!(ids_of(&replies[0]).len(), 2);
    assert_eq!(rwlock_counter(&mut c, "session_permits"), 2);
    drop(holder);
    until(&mut c, "the give-back", |c| count(c, "M") == Some(3));
}

#[test]
fn a_replica_and_the_aof_equal_the_master_after_a_give_back() {
    let master = Server::start(&testkit::DURABLE_MASTER);
    let replica = master.start_replica(&[]);
    let mut r = replica.conn();
    let mut m = master.conn();
    ok(&mut m, &["SET", "A", "4", "PX", "600000"]);
    let mut holder = master.conn();
    take_bound(&mut holder, "A", 3, 600_000);
    let kept = ids_of(&call(&mut m, &["PERMIT.ACQUIRE", "A", "1", "600000"]).expect("acquire"));
    let waiter = park(&master, &mut m, "A", 2, 600_000);
    drop(holder);
    assert_eq!(ids_of(&reply_of(waiter)).len(), 2);
    expect_reply(&mut m, &["PERMIT.ACQUIRED", "A"], Value::Int(3));
    let left: i64 = query(&mut m, &["PERMIT.LEASETIME", "A", &kept[0]]);
    assert!(
        left > 0,
        "the permit taken without SESSION is still held: {left}"
    );
    wait_replica(&mut m);
    let on_master = snapshot(&mut m);
    assert_eq!(count(&mut m, "A"), Some(1), "3 back, 2 served");
    assert!(on_master.values().any(|s| s.expire_at > 0), "a deadline");
    assert_eq!(
        testkit::diff(&on_master, &snapshot(&mut r), "master", "replica"),
        ""
    );
    let mut master = master;
    master.kill9();
    master.restart();
    let reloaded = snapshot(&mut master.conn());
    assert_eq!(
        testkit::diff(&on_master, &reloaded, "master", "AOF reload"),
        ""
    );
}

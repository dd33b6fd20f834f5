//! The count-down latch, `LATCH.*` (docs/design.md, contract §16), on a
//! real server:
//!
//! - a differential run against Redisson 4.7.0's own `RCountDownLatch`
//!   scripts (`latch_try_set_count.lua`, `latch_count_down.lua`,
//!   `latch_delete.lua` in `$RWLOCK_REDISSON_LOCK_LUA`, read at run time) on
//!   a plain server: random sequences over two latches, the replies, every
//!   key with its TTL, and the keyspace events and channel messages compared
//!   after every step;
//! - `LATCH.AWAIT … BLOCK` woken by every path that brings the count to zero
//!   or removes the latch, all waiters at once, its timeout answered 0,
//!   `CLIENT UNBLOCK` answered 0 as the timeout, a hung-up waiter gone,
//!   seen in `LOCK.WAITING` and `INFO rwlock`, failed at once on a node
//!   that becomes a replica;
//! - bad input (a clear error, nothing changed), ACL rules, and a replica
//!   and an AOF reload equal to the master.
//!
//! Mapping, each as Redisson 4.7 calls it:
//!
//! | module | oracle |
//! |---|---|
//! | `LATCH.TRYSETCOUNT L n` | `latch_try_set_count.lua` KEYS `L`, channel; ARGV `1`, n, `PUBLISH` |
//! | `LATCH.COUNTDOWN L` | `latch_count_down.lua` KEYS `L`, channel; ARGV `0`, `PUBLISH` |
//! | `LATCH.DELETE L` | `latch_delete.lua` KEYS `L`, channel; ARGV `1`, `PUBLISH` |
//! | `LATCH.COUNT L` | `GET L` read as Redisson's `getCount` (nil: 0) |
//! | `LATCH.AWAIT L` | `getCount() == 0`: 1, else 0 |
//! | `DEL L` | `DEL L` |
//!
//! Environment: `RWLOCK_DIFF_SEQUENCES` (default 200), `RWLOCK_DIFF_SEED`.

use std::time::Duration;

use redis::Value;
use testkit::{
    assert_took, call, diff, eval_lua_of, events_str, expect_reply, ok, query, rwlock_counter,
    seed, snapshot, timer_slack, wait_replica, waiters, Call, Collector, Conn, Rng, Server,
    LOCK_LUA,
};

fn channel(latch: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{latch}}}")
}

/// Runs one of Redisson's latch scripts on `c`, as Redisson 4.7 calls it.
fn script(c: &mut Conn, name: &str, latch: &str, argv: &[&str]) -> redis::RedisResult<Value> {
    let ch = channel(latch);
    eval_lua_of(c, LOCK_LUA, name, &[latch, &ch], argv)
}

/// Both servers' events and messages since the last sync, in order.
fn events(c: &Collector, conn: &mut Conn) -> Vec<(String, String)> {
    events_str(&c.sync(conn))
}

const EVENTS: &[&str] = &["__keyevent@0__:*", "redisson_countdownlatch__channel__*"];

#[test]
fn the_commands_do_what_redisson_s_scripts_do() {
    let sequences = testkit::env_usize("RWLOCK_DIFF_SEQUENCES", 200);
    let seed = seed(34);
    let module = Server::start(&["--notify-keyspace-events", "KEA"]);
    let oracle = Server::start_plain(&["--notify-keyspace-events", "KEA"]);
    let (mut m, mut o) = (module.conn(), oracle.conn());
    let (mc, oc) = (
        Collector::start(&module, EVENTS),
        Collector::start(&oracle, EVENTS),
    );
    let mut rng = Rng(seed);
    let mut seen = [0usize; 6];
    for sequence in 0..sequences {
        let latches = [format!("s{sequence}:a"), format!("s{sequence}:b")];
        for step in 0..12 {
            let latch = rng.pick(&latches).clone();
            let what = rng.below(6) as usize;
            seen[what] += 1;
            let (mine, theirs) = match what {
                0 => {
                    let n = rng.range(0, 3).to_string();
                    (
                        call(&mut m, &["LATCH.TRYSETCOUNT", &latch, &n]),
                        script(&mut o, "latch_try_set_count", &latch, &["1", &n, "PUBLISH"]),
                    )
                }
                1 | 2 => (
                    call(&mut m, &["LATCH.COUNTDOWN", &latch]),
                    script(&mut o, "latch_count_down", &latch, &["0", "PUBLISH"]),
                ),
                3 => (
                    call(&mut m, &["LATCH.DELETE", &latch]),
                    script(&mut o, "latch_delete", &latch, &["1", "PUBLISH"]),
                ),
                4 => {
                    let count: Option<i64> = query(&mut o, &["GET", &latch]);
                    let count = count.unwrap_or(0);
                    if rng.chance(50) {
                        (
                            call(&mut m, &["LATCH.COUNT", &latch]),
                            Ok(Value::Int(count)),
                        )
                    } else {
                        let reached = Value::Int((count == 0).into());
                        (call(&mut m, &["LATCH.AWAIT", &latch]), Ok(reached))
                    }
                }
                _ => (
                    call(&mut m, &["DEL", &latch]),
                    call(&mut o, &["DEL", &latch]),
                ),
            };
            let at = format!("seed {seed} sequence {sequence} step {step} op {what} on {latch}");
            assert_eq!(mine, theirs, "{at}: replies");
            let (ms, os) = (snapshot(&mut m), snapshot(&mut o));
            assert!(
                ms == os,
                "{at}: keys differ\n{}",
                diff(&ms, &os, "module", "oracle")
            );
            assert_eq!(
                events(&mc, &mut m),
                events(&oc, &mut o),
                "{at}: events and messages"
            );
        }
    }
    assert!(seen.iter().all(|&n| n > 0), "every operation ran: {seen:?}");
}

/// `LATCH.AWAIT latch BLOCK 10000` on a connection of its own, once parked.
fn park(server: &Server, c: &mut Conn, latch: &str) -> Call {
    server.park(c, &["LATCH.AWAIT", latch, "BLOCK", "10000"])
}

#[track_caller]
fn answered(waiter: Call) -> (Value, Duration) {
    let (reply, waited) = waiter.join().expect("the waiter's thread");
    (reply.expect("the waiter's reply"), waited)
}

#[test]
fn every_way_to_zero_or_away_answers_every_waiter_1() {
    let (server, mut c) = Server::started(&[]);
    type Path = fn(&mut Conn, &str);
    let paths: [(&str, Path); 7] = [
        ("LATCH.COUNTDOWN", |c, l| {
            for _ in 0..2 {
                expect_reply(c, &["LATCH.COUNTDOWN", l], Value::Nil);
            }
        }),
        ("Redisson's countDown script", |c, l| {
            for _ in 0..2 {
                script(c, "latch_count_down", l, &["0", "PUBLISH"]).expect("countDown");
            }
        }),
        ("LATCH.DELETE", |c, l| {
            expect_reply(c, &["LATCH.DELETE", l], Value::Int(1));
        }),
        ("Redisson's delete script", |c, l| {
            let deleted = script(c, "latch_delete", l, &["1", "PUBLISH"]).expect("delete");
            assert_eq!(deleted, Value::Int(1));
        }),
        ("DEL", |c, l| {
            expect_reply(c, &["DEL", l], Value::Int(1));
        }),
        ("FLUSHALL", |c, _| {
            ok(c, &["FLUSHALL"]);
        }),
        ("expiry", |c, l| {
            expect_reply(c, &["PEXPIRE", l, "50"], Value::Int(1));
        }),
    ];
    for (i, (how, path)) in paths.iter().enumerate() {
        let latch = format!("wake{i}");
        expect_reply(&mut c, &["LATCH.TRYSETCOUNT", &latch, "2"], Value::Int(1));
        let parked: Vec<Call> = (0..3).map(|_| park(&server, &mut c, &latch)).collect();
        path(&mut c, &latch);
        for waiter in parked {
            let (reply, waited) = answered(waiter);
            assert_eq!(reply, Value::Int(1), "{how}");
            assert!(
                waited < Duration::from_secs(10),
                "{how}: not before the timeout"
            );
        }
        assert_eq!(waiters(&mut c), 0, "{how}");
    }
    assert_eq!(rwlock_counter(&mut c, "latch_awaited"), 21);
}

#[test]
fn a_count_above_zero_keeps_the_waiter_until_its_timeout_answers_0() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["LATCH.AWAIT", "t"], Value::Int(1));
    expect_reply(&mut c, &["LATCH.TRYSETCOUNT", "t", "2"], Value::Int(1));
    expect_reply(&mut c, &["LATCH.AWAIT", "t"], Value::Int(0));
    let waiter = server.park(&mut c, &["LATCH.AWAIT", "t", "BLOCK", "200"]);
    expect_reply(&mut c, &["LATCH.COUNTDOWN", "t"], Value::Nil);
    let (reply, waited) = answered(waiter);
    assert_eq!(reply, Value::Int(0));
    let due = Duration::from_millis(200);
    assert_took(waited, due, due + timer_slack(), "the wait's timeout");
    expect_reply(&mut c, &["LATCH.COUNT", "t"], Value::Int(1));
    // A count of zero is reached: await answers 1 while the key is there.
    expect_reply(&mut c, &["LATCH.TRYSETCOUNT", "z", "0"], Value::Int(1));
    expect_reply(&mut c, &["LATCH.AWAIT", "z", "BLOCK", "0"], Value::Int(1));
    // MULTI cannot wait: one look, answered at once.
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LATCH.AWAIT")
        .arg("t")
        .arg("BLOCK")
        .arg("0")
        .query(&mut c)
        .expect("MULTI");
    assert_eq!(replies, vec![Value::Int(0)]);
}

#[test]
fn client_unblock_answers_0_and_a_hung_up_waiter_leaves_nothing() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["LATCH.TRYSETCOUNT", "u", "1"], Value::Int(1));
    let mut waiter = server.conn();
    let id: i64 = query(&mut waiter, &["CLIENT", "ID"]);
    waiter
        .send_packed_command(
            &testkit::cmd_of(&["LATCH.AWAIT", "u", "BLOCK", "0"]).get_packed_command(),
        )
        .expect("send LATCH.AWAIT");
    testkit::wait_for_waiters(&mut c, 1);
    expect_reply(
        &mut c,
        &["CLIENT", "UNBLOCK", &id.to_string()],
        Value::Int(1),
    );
    assert_eq!(waiter.recv_response().expect("the reply"), Value::Int(0));
    assert_eq!(waiters(&mut c), 0);
    server.park_and_hang_up(&mut c, &["LATCH.AWAIT", "u", "BLOCK", "0"]);
    assert_eq!(rwlock_counter(&mut c, "locks_with_waiters"), 0);
    expect_reply(&mut c, &["LATCH.COUNTDOWN", "u"], Value::Nil);
    assert!(snapshot(&mut c).is_empty(), "the latch went at zero");
}

#[test]
fn waiters_are_seen_and_a_demotion_fails_them_at_once() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["LATCH.TRYSETCOUNT", "seen", "1"], Value::Int(1));
    let waiter = park(&server, &mut c, "seen");
    let listed = format!("{:?}", ok(&mut c, &["LOCK.WAITING"]));
    assert!(
        listed.contains("seen") && listed.contains("latch"),
        "LOCK.WAITING: {listed}"
    );
    assert_eq!(rwlock_counter(&mut c, "locks_with_waiters"), 1);
    let master = Server::start_plain(&[]);
    let port = master.port.to_string();
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &port]);
    let (reply, waited) = waiter.join().expect("the waiter's thread");
    let error = reply.expect_err("an error once the node is a replica");
    assert!(
        format!("{error}").contains("replica") || format!("{error}").contains("UNBLOCKED"),
        "{error}"
    );
    assert!(waited < Duration::from_secs(10), "failed at once");
    assert_eq!(waiters(&mut c), 0);
}

#[test]
fn bad_input_is_refused_with_nothing_changed() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["HSET", "h", "f", "1"]);
    ok(&mut c, &["SET", "x", "not a number"]);
    ok(&mut c, &["SET", "min", &i64::MIN.to_string()]);
    expect_reply(&mut c, &["LATCH.TRYSETCOUNT", "n", "3"], Value::Int(1));
    let before = snapshot(&mut c);
    let refused: &[(&[&str], &str)] = &[
        (&["LATCH.TRYSETCOUNT", "n"], "wrong number of arguments"),
        (
            &["LATCH.TRYSETCOUNT", "q", "-1"],
            "count must be an integer",
        ),
        (
            &["LATCH.TRYSETCOUNT", "q", "1x"],
            "count must be an integer",
        ),
        (&["LATCH.TRYSETCOUNT", "{q}", "1"], "latch name"),
        (&["LATCH.COUNTDOWN", "a}b"], "latch name"),
        (&["LATCH.COUNTDOWN", ""], "latch name"),
        (
            &["LATCH.COUNTDOWN", "n", "extra"],
            "wrong number of arguments",
        ),
        (&["LATCH.COUNTDOWN", "h"], "WRONGTYPE"),
        (&["LATCH.COUNTDOWN", "x"], "corrupt latch count"),
        (&["LATCH.COUNTDOWN", "min"], "overflow"),
        (&["LATCH.COUNT", "h"], "WRONGTYPE"),
        (&["LATCH.COUNT", "x"], "corrupt latch count"),
        (&["LATCH.DELETE", "h"], "WRONGTYPE"),
        (&["LATCH.AWAIT", "h", "BLOCK", "100"], "WRONGTYPE"),
        (&["LATCH.AWAIT", "x"], "corrupt latch count"),
        (&["LATCH.AWAIT", "n", "BLOCK", "-1"], "BLOCK timeout"),
        (&["LATCH.AWAIT", "n", "WAIT", "1"], "syntax error"),
        (&["LATCH.AWAIT", "n", "BLOCK"], "wrong number of arguments"),
    ];
    for (args, needle) in refused {
        let error = call(&mut c, args).expect_err("an error");
        assert!(format!("{error}").contains(needle), "{args:?}: {error}");
    }
    assert!(snapshot(&mut c) == before, "an error changed data");
    // A key of another type is there: trySetCount replies 0, as the script.
    expect_reply(&mut c, &["LATCH.TRYSETCOUNT", "h", "1"], Value::Int(0));
}

/// An ACL refusal (redis-rs shows the code as `NoPerm`).
fn denied(e: &redis::RedisError) -> bool {
    e.to_string().to_lowercase().contains("noperm")
}

#[test]
fn acl_key_patterns_apply_through_the_key_specs() {
    let (server, mut admin) = Server::started(&[]);
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "app", "on", ">pw", "~app:*", "&*", "+@all",
        ],
    );
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "reader", "on", ">pw", "%R~*", "&*", "+@all",
        ],
    );
    let login = |user: &str| {
        let mut c = server.conn();
        ok(&mut c, &["AUTH", user, "pw"]);
        c
    };
    let mut app = login("app");
    expect_reply(
        &mut app,
        &["LATCH.TRYSETCOUNT", "app:1", "1"],
        Value::Int(1),
    );
    for args in [
        &["LATCH.TRYSETCOUNT", "other", "1"][..],
        &["LATCH.COUNTDOWN", "other"],
        &["LATCH.COUNT", "other"],
        &["LATCH.DELETE", "other"],
        &["LATCH.AWAIT", "other", "BLOCK", "10"],
    ] {
        let error = call(&mut app, args).expect_err("NOPERM");
        assert!(denied(&error), "{args:?}: {error}");
    }
    // Read-only key access: the key specs let COUNT and AWAIT (RO) through.
    let mut reader = login("reader");
    expect_reply(&mut reader, &["LATCH.COUNT", "app:1"], Value::Int(1));
    expect_reply(&mut reader, &["LATCH.AWAIT", "app:1"], Value::Int(0));
    for args in [
        &["LATCH.TRYSETCOUNT", "r", "1"][..],
        &["LATCH.COUNTDOWN", "app:1"],
        &["LATCH.DELETE", "app:1"],
    ] {
        let error = call(&mut reader, args).expect_err("NOPERM");
        assert!(denied(&error), "{args:?}: {error}");
    }
    expect_reply(&mut admin, &["LATCH.COUNT", "app:1"], Value::Int(1));
    assert_eq!(snapshot(&mut admin).len(), 1, "nothing refused wrote");
}

#[test]
fn a_replica_and_an_aof_reload_hold_what_the_master_holds() {
    let master = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let script_steps: &[&[&str]] = &[
        &["LATCH.TRYSETCOUNT", "r1", "3"],
        &["LATCH.TRYSETCOUNT", "r2", "1"],
        &["LATCH.COUNTDOWN", "r1"],
        &["LATCH.COUNTDOWN", "r2"],
        &["LATCH.COUNTDOWN", "r3"],
        &["LATCH.TRYSETCOUNT", "r4", "5"],
        &["LATCH.DELETE", "r4"],
        &["LATCH.TRYSETCOUNT", "r5", "2"],
        &["PEXPIRE", "r5", "600000"],
        &["LATCH.COUNTDOWN", "r5"],
    ];
    for step in script_steps {
        ok(&mut m, step);
    }
    let want = snapshot(&mut m);
    assert_eq!(
        format!("{:?}", want.keys().collect::<Vec<_>>()),
        r#"["r1", "r5"]"#
    );
    wait_replica(&mut m);
    let got = snapshot(&mut replica.conn());
    assert!(
        got == want,
        "replica\n{}",
        diff(&got, &want, "replica", "master")
    );
    drop(replica);
    // Effects, never the commands: the AOF holds SET, INCRBY and DEL.
    let copy = master.copy_aof();
    let mut aof = Vec::new();
    for entry in std::fs::read_dir(copy.join("appendonlydir")).expect("the AOF copy") {
        aof.extend(std::fs::read(entry.expect("an AOF file").path()).expect("read it"));
    }
    let aof = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(!aof.contains("latch."), "the AOF holds a LATCH command");
    assert!(aof.contains("incrby") && aof.contains("\r\nset\r\n"));
    let copy = copy.to_string_lossy().into_owned();
    let reloaded = Server::start_plain(&["--appendonly", "yes", "--dir", &copy]);
    let got = snapshot(&mut reloaded.conn());
    assert!(got == want, "AOF\n{}", diff(&got, &want, "aof", "master"));
}

//! The fair lock on a live server beyond what the differential test
//! compares (contract §13): one line shared with Redisson-style waiters
//! (the scripts, as Redisson's client runs them), the head told when the
//! holder's lease runs out (#3730, where the scripts publish nothing), no
//! key left when the line empties, and a replica holding the same line.

use std::time::Duration;

use redis::Value;
use testkit::{eval_lua_of, expect_reply, ok, query, wait_replica, Collector, Server, LOCK_LUA};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// `fair_lock.lua` as Redisson's `tryLock(wait)` sends it.
fn script_lock(c: &mut testkit::Conn, lock: &str, owner: &str, lease: i64, wait: i64) -> Value {
    let (q, t) = (
        format!("redisson_lock_queue:{{{lock}}}"),
        format!("redisson_lock_timeout:{{{lock}}}"),
    );
    let (lease, wait, now) = (lease.to_string(), wait.to_string(), now_ms().to_string());
    eval_lua_of(
        c,
        LOCK_LUA,
        "fair_lock",
        &[lock, &q, &t],
        &[&lease, owner, &wait, &now],
    )
    .expect("fair_lock.lua")
}

fn line(c: &mut testkit::Conn, lock: &str) -> Vec<String> {
    query(
        c,
        &[
            "LRANGE",
            &format!("redisson_lock_queue:{{{lock}}}"),
            "0",
            "-1",
        ],
    )
}

#[test]
fn module_and_script_waiters_share_one_line_in_arrival_order() {
    testkit::require_lua(LOCK_LUA);
    let (_server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "L", "a:1", "30000"],
        Value::Nil,
    );
    // A Redisson waiter (the script), then a module client, then another script.
    assert!(matches!(
        script_lock(&mut c, "L", "j:1", 30000, 60000),
        Value::Int(_)
    ));
    let ttl: i64 = query(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "L", "m:1", "30000", "WAIT", "60000"],
    );
    assert!(ttl > 60000, "behind j's deadline: {ttl}");
    assert!(matches!(
        script_lock(&mut c, "L", "k:1", 30000, 60000),
        Value::Int(_)
    ));
    assert_eq!(line(&mut c, "L"), ["j:1", "m:1", "k:1"]);
    // Released by the module: only the head may take it, whoever asks first.
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "L", "a:1"], Value::Int(1));
    assert!(matches!(
        query::<Value, _>(
            &mut c,
            &["FAIRLOCK.ACQUIRE", "L", "m:1", "30000", "WAIT", "60000"]
        ),
        Value::Int(_)
    ));
    assert_eq!(script_lock(&mut c, "L", "j:1", 30000, 60000), Value::Nil);
    // j leaves with the script's unlock; m is the head now.
    let keys = [
        "L",
        "redisson_lock_queue:{L}",
        "redisson_lock_timeout:{L}",
        "redisson_lock__channel:{L}",
        "redisson_unlock_latch:{L}:r1",
    ];
    let released = eval_lua_of(
        &mut c,
        LOCK_LUA,
        "fair_unlock",
        &keys,
        &[
            "0",
            "30000",
            "j:1",
            &now_ms().to_string(),
            "PUBLISH",
            "10000",
        ],
    )
    .expect("fair_unlock.lua");
    assert_eq!(released, Value::Int(1));
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "L", "k:1", "30000", "NOQUEUE"],
        Value::Int(1),
    );
    // With its own wait (the default, 300000, would move k's deadline into
    // the past, and the next purge would drop k, as the scripts do).
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "L", "m:1", "30000", "WAIT", "60000"],
        Value::Nil,
    );
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "L", "m:1"], Value::Int(1));
    // The last waiter gives up: nothing of the line is left.
    expect_reply(&mut c, &["FAIRLOCK.CANCEL", "L", "k:1"], Value::Int(1));
    let left: Vec<String> = query(&mut c, &["KEYS", "*{L}*"]);
    assert_eq!(left, ["redisson_unlock_latch:{L}:r1"]);
}

#[test]
fn the_head_is_told_when_the_holders_lease_runs_out() {
    let server = Server::start(&[]);
    let mut c = server.conn();
    let messages = Collector::start(&server, &["redisson_lock__channel*"]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "E", "h:1", "30000"],
        Value::Nil,
    );
    let _: i64 = query(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "E", "w:1", "30000", "WAIT", "60000"],
    );
    let _: i64 = query(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "E", "v:1", "30000", "WAIT", "60000"],
    );
    // The lease shortened once both wait in line (so that it cannot run out
    // before they join on a loaded machine), as a renewal would.
    expect_reply(&mut c, &["PEXPIRE", "E", "150"], Value::Int(1));
    // Nobody unlocks: the lease runs out and the server tells the head only.
    let told = messages.wait_for(Duration::from_secs(10), |ch, _| {
        ch.starts_with(b"redisson_lock__channel:{E}")
    });
    let (channel, payload) = told.expect("the head was told within 10 s");
    assert_eq!(channel, b"redisson_lock__channel:{E}:w:1");
    assert_eq!(payload, b"0");
    let all = messages.sync(&mut c);
    assert_eq!(all.len(), 1, "{all:?}");
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "E", "w:1", "30000"],
        Value::Nil,
    );
}

/// The same when every waiter is a Redisson client's (queued by
/// `fair_lock.lua`) and no command of the module ever queued or parked
/// anyone on this server: the module hears keys expire from load on.
#[test]
fn redisson_waiters_alone_are_told_when_the_lease_runs_out() {
    let server = Server::start(&[]);
    let mut c = server.conn();
    let messages = Collector::start(&server, &["redisson_lock__channel*"]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "R", "h:1", "30000"],
        Value::Nil,
    );
    let queued = script_lock(&mut c, "R", "j:1", 30_000, 60_000);
    assert!(matches!(queued, Value::Int(ttl) if ttl > 0), "{queued:?}");
    let _ = script_lock(&mut c, "R", "k:1", 30_000, 60_000);
    // The lease shortened once both wait in line (so that it cannot run out
    // before they join on a loaded machine), as a renewal would.
    expect_reply(&mut c, &["PEXPIRE", "R", "150"], Value::Int(1));
    let told = messages.wait_for(Duration::from_secs(10), |ch, _| {
        ch.starts_with(b"redisson_lock__channel:{R}")
    });
    let (channel, payload) = told.expect("the head was told within 10 s");
    assert_eq!(channel, b"redisson_lock__channel:{R}:j:1");
    assert_eq!(payload, b"0");
    assert_eq!(messages.sync(&mut c).len(), 1);
    // The head's retry, as Redisson's client makes it on the message.
    assert_eq!(script_lock(&mut c, "R", "j:1", 30_000, 60_000), Value::Nil);
}

#[test]
fn a_replica_holds_the_same_line_and_deadlines() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    ok(&mut m, &["FAIRLOCK.ACQUIRE", "R", "a:1", "30000"]);
    for owner in ["b:1", "c:1", "d:1"] {
        ok(
            &mut m,
            &["FAIRLOCK.ACQUIRE", "R", owner, "30000", "WAIT", "5000"],
        );
    }
    ok(&mut m, &["FAIRLOCK.CANCEL", "R", "c:1", "WAIT", "5000"]);
    ok(&mut m, &["FAIRLOCK.UNLOCK", "R", "a:1"]);
    ok(
        &mut m,
        &["FAIRLOCK.ACQUIRE", "R", "b:1", "30000", "WAIT", "5000"],
    );
    wait_replica(&mut m);
    let key = "redisson_lock_queue:{R}";
    let (a, b): (Vec<String>, Vec<String>) = (
        query(&mut m, &["LRANGE", key, "0", "-1"]),
        query(&mut r, &["LRANGE", key, "0", "-1"]),
    );
    assert_eq!(a, b);
    assert_eq!(a, ["d:1"]);
    let zset = |c: &mut testkit::Conn| -> Vec<String> {
        query(
            c,
            &[
                "ZRANGE",
                "redisson_lock_timeout:{R}",
                "0",
                "-1",
                "WITHSCORES",
            ],
        )
    };
    assert_eq!(zset(&mut m), zset(&mut r));
    let hash = |c: &mut testkit::Conn| -> Vec<String> { query(c, &["HGETALL", "R"]) };
    assert_eq!(hash(&mut m), ["b:1", "1"]);
    assert_eq!(hash(&mut m), hash(&mut r));
    let expiry = |c: &mut testkit::Conn| -> i64 { query(c, &["PEXPIRETIME", "R"]) };
    assert_eq!(expiry(&mut m), expiry(&mut r));
    // A lease running out with a replica attached: the head is told (the
    // message also goes down the replication stream) and both stay alike.
    let messages = Collector::start(&master, &["redisson_lock__channel*"]);
    ok(&mut m, &["FAIRLOCK.ACQUIRE", "X", "h:1", "30000"]);
    ok(
        &mut m,
        &["FAIRLOCK.ACQUIRE", "X", "w:1", "30000", "WAIT", "5000"],
    );
    // Shortened once w:1 waits in line: it cannot run out before it joins.
    expect_reply(&mut m, &["PEXPIRE", "X", "100"], Value::Int(1));
    let told = messages.wait_for(Duration::from_secs(10), |ch, _| {
        ch == b"redisson_lock__channel:{X}:w:1"
    });
    assert!(told.is_some(), "the head was not told");
    expect_reply(
        &mut m,
        &["FAIRLOCK.ACQUIRE", "X", "w:1", "30000"],
        Value::Nil,
    );
    wait_replica(&mut m);
    assert_eq!(hash(&mut r), ["b:1", "1"]);
    let x: Vec<String> = query(&mut r, &["HGETALL", "X"]);
    assert_eq!(x, ["w:1", "1"]);
    let gone: i64 = query(
        &mut r,
        &[
            "EXISTS",
            "redisson_lock_queue:{X}",
            "redisson_lock_timeout:{X}",
        ],
    );
    assert_eq!(gone, 0);
}

#[test]
fn an_aof_replay_restores_the_same_line_and_deadlines() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = server.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "A", "a:1", "60000"]);
    for owner in ["b:1", "c:1", "d:1", "e:1"] {
        ok(
            &mut c,
            &["FAIRLOCK.ACQUIRE", "A", owner, "60000", "WAIT", "5000"],
        );
    }
    ok(&mut c, &["FAIRLOCK.CANCEL", "A", "c:1", "WAIT", "5000"]);
    ok(
        &mut c,
        &["FAIRLOCK.UNLOCK", "A", "a:1", "REQUEST", "r1", "60000"],
    );
    ok(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "A", "b:1", "60000", "WAIT", "5000"],
    );
    ok(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "A", "b:1", "60000", "WAIT", "5000"],
    );
    let snapshot = |c: &mut testkit::Conn| -> (Vec<String>, Vec<String>, Vec<String>, i64) {
        (
            query(c, &["LRANGE", "redisson_lock_queue:{A}", "0", "-1"]),
            query(
                c,
                &[
                    "ZRANGE",
                    "redisson_lock_timeout:{A}",
                    "0",
                    "-1",
                    "WITHSCORES",
                ],
            ),
            query(c, &["HGETALL", "A"]),
            query(c, &["PEXPIRETIME", "A"]),
        )
    };
    let before = snapshot(&mut c);
    assert_eq!(before.0, ["d:1", "e:1"]);
    assert_eq!(before.2, ["b:1", "2"]);
    drop(c);
    server.kill9();
    server.restart();
    let mut c = server.conn();
    assert_eq!(snapshot(&mut c), before);
}

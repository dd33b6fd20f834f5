//! `FAIRLOCK.ACQUIRE … BLOCK ms` (contract §13 "BLOCK") on a live server:
//! parked waiters keep their place in the one line they share with
//! Redisson-style waiters (the scripts, driven as Redisson's client drives
//! them), are served by every path that frees the lock, never go stale
//! however long they wait (#3004), and leave no trace when they give up.

use std::sync::{Arc, Mutex};
use std::thread::{self, sleep};
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    assert_counters, eval_lua_of, expect_reply, in_one_turn, ok, poll_until, query, reply_text,
    wait_for_waiters, wait_replica, waiters, Call, Server, LOCK_LUA,
};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

fn queue(lock: &str) -> String {
    format!("redisson_lock_queue:{{{lock}}}")
}

fn timeout(lock: &str) -> String {
    format!("redisson_lock_timeout:{{{lock}}}")
}

/// `fair_lock.lua` as Redisson's `tryLock(wait)` sends it, at the client's clock.
fn script_lock(c: &mut Conn, lock: &str, owner: &str, lease: i64, wait: i64) -> Value {
    let (q, t) = (queue(lock), timeout(lock));
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

/// `fair_unlock.lua` as Redisson's `unlock()` sends it.
fn script_unlock(c: &mut Conn, lock: &str, owner: &str) -> Value {
    let (q, t) = (queue(lock), timeout(lock));
    let channel = format!("redisson_lock__channel:{{{lock}}}");
    let latch = format!("redisson_unlock_latch:{{{lock}}}:{:032x}", now_ms());
    let now = now_ms().to_string();
    eval_lua_of(
        c,
        LOCK_LUA,
        "fair_unlock",
        &[lock, &q, &t, &channel, &latch],
        &["0", "30000", owner, &now, "PUBLISH", "30000"],
    )
    .expect("fair_unlock.lua")
}

fn line(c: &mut Conn, lock: &str) -> Vec<String> {
    query(c, &["LRANGE", &queue(lock), "0", "-1"])
}

fn deadline(c: &mut Conn, lock: &str, owner: &str) -> Option<i64> {
    let score: Option<String> = query(c, &["ZSCORE", &timeout(lock), owner]);
    score.map(|s| s.parse::<f64>().expect("a score") as i64)
}

/// Neither the line nor its deadlines exist.
fn assert_no_line(c: &mut Conn, lock: &str) {
    let n: i64 = query(c, &["EXISTS", &queue(lock), &timeout(lock)]);
    assert_eq!(n, 0, "{lock}'s line is gone");
}

/// The owners FAIRLOCK.INFO marks parked, in line order.
fn parked_flags(c: &mut Conn, lock: &str) -> Vec<(String, i64)> {
    let info: Vec<Value> = query(c, &["FAIRLOCK.INFO", lock]);
    let Value::Array(line) = &info[5] else {
        panic!("no line in {info:?}");
    };
    line.iter()
        .map(|w| {
            let Value::Array(fields) = w else {
                panic!("{w:?}")
            };
            let owner = match &fields[1] {
                Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
                other => panic!("{other:?}"),
            };
            assert_eq!(fields[4], Value::SimpleString("parked".into()));
            let Value::Int(parked) = fields[5] else {
                panic!("{fields:?}")
            };
            (owner, parked)
        })
        .collect()
}

fn served(call: Call) -> Duration {
    let (reply, took) = call.join().expect("waiter thread");
    assert_eq!(reply.expect("a reply"), Value::Nil, "served");
    took
}

fn block(lock: &str, owner: &str, wait: &str, block: &str) -> Vec<String> {
    [
        "FAIRLOCK.ACQUIRE",
        lock,
        owner,
        "30000",
        "WAIT",
        wait,
        "BLOCK",
        block,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn park(server: &Server, c: &mut Conn, args: &[String]) -> Call {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    server.park(c, &args)
}

#[test]
fn parked_and_script_waiters_are_served_in_arrival_order() {
    testkit::require_lua(LOCK_LUA);
    let (server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "O", "h:1", "30000"],
        Value::Nil,
    );
    let m1 = park(&server, &mut c, &block("O", "m:1", "60000", "10000"));
    assert!(matches!(
        script_lock(&mut c, "O", "j:1", 30000, 60000),
        Value::Int(_)
    ));
    let m2 = park(&server, &mut c, &block("O", "m:2", "60000", "10000"));
    assert!(matches!(
        script_lock(&mut c, "O", "j:2", 30000, 60000),
        Value::Int(_)
    ));
    assert_eq!(line(&mut c, "O"), ["m:1", "j:1", "m:2", "j:2"]);
    assert_eq!(
        parked_flags(&mut c, "O"),
        [
            ("m:1".to_string(), 1),
            ("j:1".to_string(), 0),
            ("m:2".to_string(), 1),
            ("j:2".to_string(), 0)
        ]
    );
    // The holder's unlock hands the lock to the parked head in the same command.
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "O", "h:1"], Value::Int(1));
    served(m1);
    let hash: Vec<String> = query(&mut c, &["HGETALL", "O"]);
    assert_eq!(hash, ["m:1", "1"]);
    assert_eq!(line(&mut c, "O"), ["j:1", "m:2", "j:2"]);
    // m:2 never overtakes j:1, a Redisson waiter that retries on its own.
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "O", "m:1"], Value::Int(1));
    sleep(Duration::from_millis(50));
    assert_eq!(waiters(&mut c), 1, "m:2 still waits behind j:1");
    assert!(matches!(
        script_lock(&mut c, "O", "j:2", 30000, 60000),
        Value::Int(_)
    ));
    assert_eq!(script_lock(&mut c, "O", "j:1", 30000, 60000), Value::Nil);
    // A Redisson client's Lua unlock (keyspace events) serves m:2.
    assert_eq!(script_unlock(&mut c, "O", "j:1"), Value::Int(1));
    served(m2);
    assert_eq!(line(&mut c, "O"), ["j:2"]);
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "O", "m:2"], Value::Int(1));
    assert_eq!(script_lock(&mut c, "O", "j:2", 30000, 60000), Value::Nil);
    assert_no_line(&mut c, "O");
    assert_counters(
        &mut c,
        &[("waits_started", 2), ("waits_served", 2), ("waiters", 0)],
    );
}

/// Frees the lock `lock` one way.
type Free = dyn Fn(&mut Conn, &str);

/// Every path that frees a fair lock serves its parked head.
#[test]
fn every_wake_path_serves_the_parked_head() {
    testkit::require_lua(LOCK_LUA);
    let (server, mut c) = Server::started(&[]);
    let paths: [(&str, &Free); 7] = [
        ("unlock", &|c, l| {
            ok(c, &["FAIRLOCK.UNLOCK", l, "a:1"]);
        }),
        ("force", &|c, l| {
            ok(c, &["FAIRLOCK.FORCEUNLOCK", l]);
        }),
        ("lock_unlock", &|c, l| {
            ok(c, &["LOCK.UNLOCK", l, "a:1"]);
        }),
        ("lua", &|c, l| {
            assert_eq!(script_unlock(c, l, "a:1"), Value::Int(1));
        }),
        ("del", &|c, l| {
            ok(c, &["DEL", l]);
        }),
        ("flushall", &|c, _| {
            ok(c, &["FLUSHALL"]);
        }),
        // The lease shortened once the waiter is parked (so that it cannot
        // run out before), then left to run out.
        ("lease", &|c, l| {
            expect_reply(c, &["LOCK.RENEW", l, "a:1", "300"], Value::Int(1));
        }),
    ];
    for (name, free) in paths {
        let lock = format!("W-{name}");
        expect_reply(
            &mut c,
            &["FAIRLOCK.ACQUIRE", &lock, "a:1", "30000"],
            Value::Nil,
        );
        let waiter = park(&server, &mut c, &block(&lock, "m:1", "60000", "10000"));
        assert_eq!(parked_flags(&mut c, &lock), [("m:1".to_string(), 1)]);
        free(&mut c, &lock);
        let took = served(waiter);
        // Served at once, or at the shortened lease's end: long before the
        // next refresh of its place (15 s) or the wait's end (10 s).
        assert!(took < Duration::from_secs(5), "{name}: {took:?}");
        let hash: Vec<String> = query(&mut c, &["HGETALL", &lock]);
        assert_eq!(hash, ["m:1", "1"], "{name}");
        let pttl: i64 = query(&mut c, &["PTTL", &lock]);
        assert!(pttl > 25000, "{name}: its own lease ({pttl})");
        assert_no_line(&mut c, &lock);
    }
    assert_counters(&mut c, &[("waits_served", 7), ("waiters", 0)]);
}

/// A parked waiter whose WAIT passes many times over is never purged as
/// stale by Redisson clients' scripts (#3004), and is served in its turn;
/// its refreshed deadline reaches the replica as the master has it.
#[test]
fn a_parked_waiter_outlives_its_wait_many_times_and_keeps_its_place() {
    testkit::require_lua(LOCK_LUA);
    let master = Server::start(&[]);
    let replica = master.start_replica(&[]);
    let (mut c, mut r) = (master.conn(), replica.conn());
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "S", "h:1", "30000"],
        Value::Nil,
    );
    // A WAIT of 250 ms: the server keeps m:1's deadline at least that far
    // ahead, refreshed every quarter of it, so that a server late by up to
    // some 300 ms (a loaded machine) still finds it ahead of the clock.
    let waiter = park(&master, &mut c, &block("S", "m:1", "250", "20000"));
    let start = Instant::now();
    // A Redisson waiter behind it keeps retrying, purging stale heads, for
    // six times m:1's WAIT.
    while start.elapsed() < Duration::from_millis(1500) {
        let _ = script_lock(&mut c, "S", "k:1", 30000, 100);
        let l = line(&mut c, "S");
        assert_eq!(l.first().map(String::as_str), Some("m:1"), "{l:?}");
        // The clock read first: this thread running late cannot make the
        // deadline look stale.
        let now = now_ms();
        let at = deadline(&mut c, "S", "m:1").expect("m:1's deadline");
        assert!(at > now, "m:1 kept ahead of the clock: {at} at {now}");
        sleep(Duration::from_millis(20));
    }
    wait_replica(&mut c);
    assert_eq!(
        deadline(&mut r, "S", "m:1"),
        deadline(&mut c, "S", "m:1"),
        "the refresh replicates as an absolute ZADD"
    );
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "S", "h:1"], Value::Int(1));
    served(waiter);
    let hash: Vec<String> = query(&mut c, &["HGETALL", "S"]);
    assert_eq!(hash, ["m:1", "1"]);
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "S", "m:1"], Value::Int(1));
    // k:1, stale by now, retries as Redisson does and gets the lock.
    assert_eq!(script_lock(&mut c, "S", "k:1", 30000, 100), Value::Nil);
    assert_no_line(&mut c, "S");
}

/// A wait that ends leaves the line as fair_acquire_failed.lua does: those
/// behind move up by its WAIT, and no key is left when the line empties.
#[test]
fn a_timed_out_waiter_leaves_the_line_with_the_scripts_arithmetic() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "T", "h:1", "30000"],
        Value::Nil,
    );
    // A wait of 1 s: k:1 joins behind m:1 while it still waits, even on a
    // loaded machine.
    let waiter = park(&server, &mut c, &block("T", "m:1", "60000", "1000"));
    ok(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "T", "k:1", "30000", "WAIT", "60000"],
    );
    let before = deadline(&mut c, "T", "k:1").expect("k:1 queued");
    let (reply, took) = waiter.join().expect("waiter");
    let Value::Int(ttl) = reply.expect("a reply") else {
        panic!("a ttl")
    };
    assert!(ttl > 25000 && ttl <= 30000, "the lock's TTL: {ttl}");
    assert!(took >= Duration::from_millis(1000), "{took:?}");
    assert_eq!(line(&mut c, "T"), ["k:1"]);
    assert_eq!(deadline(&mut c, "T", "k:1"), Some(before - 60000));
    ok(&mut c, &["FAIRLOCK.CANCEL", "T", "k:1"]);
    assert_no_line(&mut c, "T");
    // Alone in the line: nothing at all is left.
    let waiter = park(&server, &mut c, &block("T", "m:2", "60000", "100"));
    assert!(matches!(
        waiter.join().expect("waiter").0,
        Ok(Value::Int(_))
    ));
    assert_no_line(&mut c, "T");
    assert_counters(&mut c, &[("waits_timed_out", 2), ("waiters", 0)]);
}

/// The id of the one client blocked in a module command.
fn client_id_of_waiter(c: &mut Conn) -> String {
    let list = reply_text(c, &["CLIENT", "LIST"]);
    list.lines()
        .find(|l| l.contains("flags=b"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .expect("a blocked client")
        .to_string()
}

#[test]
fn disconnects_and_client_unblock_leave_no_trace() {
    let (server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "D", "h:1", "30000"],
        Value::Nil,
    );
    let args = block("D", "m:1", "60000", "0");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    server.park_and_hang_up(&mut c, &args);
    poll_until(
        Duration::from_secs(5),
        Duration::from_millis(2),
        "the line left",
        || {
            let n: i64 = query(&mut c, &["EXISTS", &queue("D"), &timeout("D")]);
            (n == 0).then_some(())
        },
    );
    let waiter = park(&server, &mut c, &block("D", "m:2", "60000", "0"));
    let id = client_id_of_waiter(&mut c);
    expect_reply(&mut c, &["CLIENT", "UNBLOCK", &id], Value::Int(1));
    let Value::Int(ttl) = waiter.join().expect("waiter").0.expect("a reply") else {
        panic!("a ttl")
    };
    assert!(ttl > 0, "{ttl}");
    poll_until(
        Duration::from_secs(5),
        Duration::from_millis(2),
        "the line left",
        || {
            let n: i64 = query(&mut c, &["EXISTS", &queue("D"), &timeout("D")]);
            (n == 0).then_some(())
        },
    );
    let hash: Vec<String> = query(&mut c, &["HGETALL", "D"]);
    assert_eq!(hash, ["h:1", "1"], "the lock untouched");
    assert_counters(&mut c, &[("waits_aborted", 2), ("waiters", 0)]);
}

#[test]
fn multi_and_scripts_make_one_attempt() {
    let (_server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "M", "h:1", "30000"],
        Value::Nil,
    );
    let start = Instant::now();
    let replies = in_one_turn(
        &mut c,
        &[&["FAIRLOCK.ACQUIRE", "M", "m:1", "30000", "BLOCK", "0"]],
    );
    assert!(matches!(replies[0], Value::Int(p) if p > 0), "{replies:?}");
    let script = "return redis.call('fairlock.acquire', KEYS[1], ARGV[1], '1000', 'BLOCK', '0')";
    let reply = ok(&mut c, &["EVAL", script, "1", "M", "m:2"]);
    assert!(matches!(reply, Value::Int(_)), "{reply:?}");
    // A `BLOCK 0` that waited would never have replied (the connection's
    // read times out after 10 s): well under that, even on a loaded machine.
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(waiters(&mut c), 0);
    // Both queued as fair_lock.lua queues.
    assert_eq!(line(&mut c, "M"), ["m:1", "m:2"]);
}

#[test]
fn parked_fair_waiters_fail_at_once_when_the_node_becomes_a_replica() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "F", "h:1", "30000"],
        Value::Nil,
    );
    let parked: Vec<_> = (0..3)
        .map(|i| park(&node, &mut c, &block("F", &format!("m:{i}"), "60000", "0")))
        .collect();
    wait_for_waiters(&mut c, 3);
    ok(
        &mut c,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    for w in parked {
        let (reply, waited) = w.join().expect("waiter");
        let e = reply.expect_err("an error reply");
        assert!(e.to_string().contains("replica"), "{e}");
        assert!(waited < Duration::from_secs(5));
    }
    assert_eq!(waiters(&mut c), 0);
}

/// Who got the lock, in order.
type Order = Arc<Mutex<Vec<String>>>;

/// A Redisson-style waiter on a thread of its own: subscribes to its
/// channel, joins with `fair_lock.lua`, retries on a message or after the
/// returned ttl (at most 100 ms), and once it holds the lock records
/// itself and unlocks with `fair_unlock.lua`.
fn script_waiter(
    server: &Server,
    lock: &str,
    owner: &str,
    order: &Order,
) -> thread::JoinHandle<()> {
    let (mut c, mut sub_conn) = (server.conn(), server.conn());
    let (lock, owner, order) = (lock.to_string(), owner.to_string(), order.clone());
    let (joined, has_joined) = std::sync::mpsc::channel();
    let waiter = thread::spawn(move || {
        let channel = format!("redisson_lock__channel:{{{lock}}}:{owner}");
        sub_conn.subscribe(&channel).expect("subscribe");
        let mut reply = script_lock(&mut c, &lock, &owner, 30000, 60000);
        joined.send(()).expect("joined");
        let start = Instant::now();
        while let Value::Int(ttl) = reply {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{owner} waited too long"
            );
            let wait = ttl.clamp(1, 100) as u64;
            sub_conn
                .set_read_timeout(Some(Duration::from_millis(wait)))
                .expect("read timeout");
            let _ = sub_conn.next_message();
            reply = script_lock(&mut c, &lock, &owner, 30000, 60000);
        }
        assert_eq!(reply, Value::Nil, "{owner}");
        order.lock().expect("order").push(owner.clone());
        sleep(Duration::from_millis(10));
        assert_eq!(script_unlock(&mut c, &lock, &owner), Value::Int(1));
    });
    // The caller orders the arrivals: back once it is in the line.
    has_joined
        .recv_timeout(Duration::from_secs(10))
        .expect("the script waiter joined");
    waiter
}

/// A module waiter parked with BLOCK; once served it records itself and
/// unlocks with FAIRLOCK.UNLOCK.
fn module_waiter(
    server: &Server,
    c: &mut Conn,
    lock: &str,
    owner: &str,
    order: &Order,
) -> thread::JoinHandle<()> {
    let call = park(server, c, &block(lock, owner, "60000", "20000"));
    let mut own = server.conn();
    let (lock, owner, order) = (lock.to_string(), owner.to_string(), order.clone());
    thread::spawn(move || {
        served(call);
        order.lock().expect("order").push(owner.clone());
        sleep(Duration::from_millis(10));
        expect_reply(&mut own, &["FAIRLOCK.UNLOCK", &lock, &owner], Value::Int(1));
    })
}

/// Module waiters parked on the server and Redisson-style waiters retrying
/// on their own, each unlocking once served: the lock goes round in the
/// order they joined the line.
#[test]
fn parked_and_retrying_script_waiters_take_turns_in_join_order() {
    testkit::require_lua(LOCK_LUA);
    let (server, mut c) = Server::started(&[]);
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "R", "h:1", "30000"],
        Value::Nil,
    );
    let order: Order = Arc::default();
    let mut joined = Vec::new();
    let mut threads = Vec::new();
    for i in 0..8 {
        let owner = format!("{}:{i}", if i % 3 == 1 { "j" } else { "m" });
        threads.push(if owner.starts_with('j') {
            script_waiter(&server, "R", &owner, &order)
        } else {
            module_waiter(&server, &mut c, "R", &owner, &order)
        });
        joined.push(owner);
        assert_eq!(line(&mut c, "R"), joined);
    }
    expect_reply(&mut c, &["FAIRLOCK.UNLOCK", "R", "h:1"], Value::Int(1));
    for t in threads {
        t.join().expect("waiter");
    }
    assert_eq!(*order.lock().expect("order"), joined);
    assert_no_line(&mut c, "R");
    let exists: i64 = query(&mut c, &["EXISTS", "R"]);
    assert_eq!(exists, 0);
}

/// A Redisson waiter that died at the head is purged by nobody's script:
/// the parked waiter behind it is served once the dead head's deadline
/// passes (a look at that deadline), and the dead head leaves the line.
#[test]
fn a_parked_waiter_behind_a_dead_head_is_served_at_its_deadline() {
    testkit::require_lua(LOCK_LUA);
    let (server, mut c) = Server::started(&[]);
    // A lease of 1 s: m:1 parks behind the dead head before its deadline
    // passes, even on a loaded machine.
    expect_reply(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "X", "h:1", "1000"],
        Value::Nil,
    );
    // Joins, then never comes back: its deadline is about 1200 ms away.
    assert!(matches!(
        script_lock(&mut c, "X", "dead:1", 30000, 200),
        Value::Int(_)
    ));
    let dead_at = deadline(&mut c, "X", "dead:1").expect("a deadline");
    let waiter = park(&server, &mut c, &block("X", "m:1", "60000", "10000"));
    let took = served(waiter);
    assert!(now_ms() >= dead_at, "not before the dead head's deadline");
    // At that deadline: long before the wait's end (10 s).
    assert!(took < Duration::from_secs(5), "{took:?}");
    let hash: Vec<String> = query(&mut c, &["HGETALL", "X"]);
    assert_eq!(hash, ["m:1", "1"]);
    assert_no_line(&mut c, "X");
}

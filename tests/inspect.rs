//! Waiters you can see (docs/design.md, contract §14.6) against a real
//! server: `RWLOCK.INFO` and `LOCK.INFO` end with the lock's parked
//! clients, `LOCK.WAITING` lists the locks waited for (fair lines too),
//! the longest-waiting first, with their holders, and `INFO rwlock` gives percentiles of the
//! recent waits' lengths.

use std::thread::sleep;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use testkit::Conn;
use testkit::{call, eval_lua_of, ok, query, rwlock_counter, Call, Server, LOCK_LUA};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not text: {other:?}"),
    }
}

/// A flat `label value …` array read into (label, value) pairs.
fn fields(v: &Value) -> Vec<(String, Value)> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .chunks(2)
        .map(|p| (text(&p[0]), p[1].clone()))
        .collect()
}

fn field(v: &Value, name: &str) -> Value {
    fields(v)
        .into_iter()
        .find(|(l, _)| l == name)
        .unwrap_or_else(|| panic!("no {name} in {v:?}"))
        .1
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items.clone(),
        other => panic!("not an array: {other:?}"),
    }
}

fn served(call: Call) {
    let (reply, _) = call.join().expect("client thread");
    assert_eq!(reply.expect("a reply"), Value::Nil);
}

/// The client id of a new connection's next client: the ids are handed
/// out in order, so a parked client's is above this one's.
fn my_id(c: &mut Conn) -> i64 {
    query(c, &["CLIENT", "ID"])
}

#[test]
fn rwlock_info_ends_with_the_parked_clients_in_serving_order() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "I", "w", "30000"]);
    let before = now_ms();
    let id = my_id(&mut c);
    let r = server.park(&mut c, &["RWLOCK.READ", "I", "r", "30000", "BLOCK", "5000"]);
    let x = server.park(&mut c, &["RWLOCK.WRITE", "I", "x", "30000", "BLOCK", "0"]);
    sleep(Duration::from_millis(30));
    let info: Value = ok(&mut c, &["RWLOCK.INFO", "I"]);
    let labels: Vec<String> = fields(&info).into_iter().map(|(l, _)| l).collect();
    assert_eq!(
        labels,
        ["mode", "ttl", "owners", "waiters"],
        "appended last"
    );
    let waiters = list(&field(&info, "waiters"));
    assert_eq!(waiters.len(), 2);
    let (first, second) = (&waiters[0], &waiters[1]);
    assert_eq!(text(&field(first, "owner")), "r");
    assert_eq!(text(&field(first, "wants")), "read");
    assert!(int(&field(first, "waited")) >= 30, "{first:?}");
    let deadline = int(&field(first, "deadline"));
    assert!(
        deadline >= before + 5000 && deadline <= now_ms() + 5001,
        "{deadline}"
    );
    assert!(int(&field(first, "client")) > id);
    assert_eq!(text(&field(second, "owner")), "x");
    assert_eq!(text(&field(second, "wants")), "write");
    assert_eq!(field(second, "deadline"), Value::Nil, "BLOCK 0 has none");
    ok(&mut c, &["RWLOCK.UNLOCK", "I", "w", "WRITE"]);
    served(r);
    ok(&mut c, &["RWLOCK.UNLOCK", "I", "r", "READ"]);
    served(x);
    let info: Value = ok(&mut c, &["RWLOCK.INFO", "I"]);
    assert!(list(&field(&info, "waiters")).is_empty());
}

#[test]
fn lock_info_shows_a_multi_holds_wait_on_each_of_its_locks() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "P", "h", "30000"]);
    let all = [
        "LOCK.ACQUIREALL",
        "m",
        "30000",
        "BLOCK",
        "0",
        "HOLDS",
        "2",
        "LOCK",
        "P",
        "WRITE",
        "Q",
    ];
    let m = server.park(&mut c, &all);
    let info: Value = ok(&mut c, &["LOCK.INFO", "P"]);
    let labels: Vec<String> = fields(&info).into_iter().map(|(l, _)| l).collect();
    assert_eq!(labels, ["holders", "ttl", "token", "waiters"]);
    let waiters = list(&field(&info, "waiters"));
    assert_eq!(waiters.len(), 1);
    assert_eq!(text(&field(&waiters[0], "owner")), "m");
    assert_eq!(text(&field(&waiters[0], "wants")), "lock");
    let info: Value = ok(&mut c, &["RWLOCK.INFO", "Q"]);
    let waiters = list(&field(&info, "waiters"));
    assert_eq!(text(&field(&waiters[0], "wants")), "write", "on Q");
    ok(&mut c, &["LOCK.UNLOCK", "P", "h"]);
    served(m);
}

#[test]
fn lock_waiting_lists_the_longest_waits_first_with_their_holders() {
    let (server, mut c) = Server::started(&[]);
    let none: Vec<Value> = query(&mut c, &["LOCK.WAITING"]);
    assert!(none.is_empty());
    ok(&mut c, &["RWLOCK.READ", "OLD", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.READ", "OLD", "r2", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "NEW", "p", "30000"]);
    let a = server.park(&mut c, &["RWLOCK.WRITE", "OLD", "a", "30000", "BLOCK", "0"]);
    sleep(Duration::from_millis(20));
    let b = server.park(&mut c, &["LOCK.ACQUIRE", "NEW", "b", "30000", "BLOCK", "0"]);
    let d = server.park(&mut c, &["LOCK.ACQUIRE", "NEW", "d", "30000", "BLOCK", "0"]);
    let locks: Vec<Value> = query(&mut c, &["LOCK.WAITING"]);
    let names: Vec<String> = locks.iter().map(|l| text(&field(l, "lock"))).collect();
    assert_eq!(names, ["OLD", "NEW"], "the longest wait first");
    assert_eq!(int(&field(&locks[0], "db")), 0);
    assert_eq!(int(&field(&locks[0], "waiters")), 1);
    assert_eq!(int(&field(&locks[1], "waiters")), 2);
    assert!(int(&field(&locks[0], "waited")) >= int(&field(&locks[1], "waited")) + 20);
    let holders: Vec<(String, String, i64)> = list(&field(&locks[0], "holders"))
        .iter()
        .map(|h| {
            let kind = text(&field(h, "kind"));
            (text(&field(h, "owner")), kind, int(&field(h, "count")))
        })
        .collect();
    assert_eq!(
        holders,
        [
            ("r1".to_string(), "read".to_string(), 1),
            ("r2".to_string(), "read".to_string(), 1)
        ]
    );
    let plain = list(&field(&locks[1], "holders"));
    assert_eq!(text(&field(&plain[0], "kind")), "lock");
    let one: Vec<Value> = query(&mut c, &["LOCK.WAITING", "COUNT", "1"]);
    assert_eq!(one.len(), 1);
    for bad in [
        &["LOCK.WAITING", "COUNT", "0"][..],
        &["LOCK.WAITING", "COUNT", "x"],
    ] {
        let e = call(&mut c, bad).expect_err("a bad COUNT");
        assert!(e.to_string().contains("COUNT"), "{e}");
    }
    let e = call(&mut c, &["LOCK.WAITING", "LIMIT", "1"]).expect_err("syntax");
    assert!(e.to_string().contains("syntax"), "{e}");
    ok(&mut c, &["RWLOCK.UNLOCK", "OLD", "r1", "READ"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "OLD", "r2", "READ"]);
    served(a);
    ok(&mut c, &["LOCK.UNLOCK", "NEW", "p"]);
    served(b);
    ok(&mut c, &["LOCK.UNLOCK", "NEW", "b"]);
    served(d);
}

#[test]
fn lock_waiting_lists_fair_lines_too_and_fairlock_info_marks_the_parked() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "F", "h", "30000"]);
    let w = server.park(
        &mut c,
        &["FAIRLOCK.ACQUIRE", "F", "w", "30000", "BLOCK", "0"],
    );
    // A waiter in the line as Redisson's client stands there: not parked.
    assert!(matches!(
        ok(&mut c, &["FAIRLOCK.ACQUIRE", "F", "r", "30000"]),
        Value::Int(t) if t > 0
    ));
    sleep(Duration::from_millis(20));
    ok(&mut c, &["LOCK.ACQUIRE", "P", "p", "30000"]);
    let q = server.park(&mut c, &["LOCK.ACQUIRE", "P", "q", "30000", "BLOCK", "0"]);
    // Waits are listed longest first by the millisecond they began: apart
    // by more than one, or the two order by chance.
    sleep(Duration::from_millis(20));
    // A plain waiter on the fair lock's own hash: the same name, listed
    // once for its queue.
    let x = server.park(&mut c, &["LOCK.ACQUIRE", "F", "x", "30000", "BLOCK", "0"]);
    let locks: Vec<Value> = query(&mut c, &["LOCK.WAITING"]);
    let seen: Vec<(String, String, i64)> = locks
        .iter()
        .map(|l| {
            let kind = text(&field(l, "kind"));
            (text(&field(l, "lock")), kind, int(&field(l, "waiters")))
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("F".to_string(), "fair".to_string(), 1),
            ("P".to_string(), "lock".to_string(), 1),
            ("F".to_string(), "lock".to_string(), 1),
        ],
        "the longest wait first, the line's parked waiters only"
    );
    assert!(int(&field(&locks[0], "waited")) >= 20);
    assert_eq!(int(&field(&locks[0], "db")), 0);
    let holders = list(&field(&locks[0], "holders"));
    assert_eq!(text(&field(&holders[0], "owner")), "h");
    assert_eq!(text(&field(&holders[0], "kind")), "lock");
    // The `kind` comes last: replies read by position keep their meaning.
    assert_eq!(
        fields(&locks[0]).last().map(|(l, _)| l.as_str()),
        Some("kind")
    );
    let one: Vec<Value> = query(&mut c, &["LOCK.WAITING", "COUNT", "1"]);
    assert_eq!(text(&field(&one[0], "kind")), "fair");
    // FAIRLOCK.INFO shows the whole line, the parked waiter marked.
    let info: Value = query(&mut c, &["FAIRLOCK.INFO", "F"]);
    let line: Vec<(String, i64)> = list(&field(&info, "line"))
        .iter()
        .map(|e| (text(&field(e, "owner")), int(&field(e, "parked"))))
        .collect();
    assert_eq!(line, [("w".to_string(), 1), ("r".to_string(), 0)]);
    // The plain waiter takes the hash first (its queue is served by the
    // release itself, §13.9), then the line's head.
    ok(&mut c, &["FAIRLOCK.CANCEL", "F", "r"]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "F", "h"]);
    served(x);
    ok(&mut c, &["LOCK.UNLOCK", "F", "x"]);
    served(w);
    ok(&mut c, &["LOCK.UNLOCK", "P", "p"]);
    served(q);
    let none: Vec<Value> = query(&mut c, &["LOCK.WAITING"]);
    assert!(none.is_empty());
}

#[test]
fn info_gives_percentiles_of_the_recent_waits() {
    let (server, mut c) = Server::started(&[]);
    assert_eq!(rwlock_counter(&mut c, "wait_ms_max"), 0);
    ok(&mut c, &["LOCK.ACQUIRE", "T", "h", "30000"]);
    let w = server.park(&mut c, &["LOCK.ACQUIRE", "T", "w", "30000", "BLOCK", "0"]);
    sleep(Duration::from_millis(120));
    ok(&mut c, &["LOCK.UNLOCK", "T", "h"]);
    served(w);
    // A wait that times out counts too.
    let pttl: i64 = query(&mut c, &["LOCK.ACQUIRE", "T", "z", "30000", "BLOCK", "50"]);
    assert!(pttl > 0);
    let max = rwlock_counter(&mut c, "wait_ms_max");
    assert!((120..5_000).contains(&max), "{max}");
    assert!(rwlock_counter(&mut c, "wait_ms_p99") == max);
    let p50 = rwlock_counter(&mut c, "wait_ms_p50");
    assert!((50..=max).contains(&p50), "{p50}");
}

/// `INFO rwlock`'s census of the holds held now, by kind.
fn held(c: &mut Conn) -> [u64; 5] {
    [
        "read_holds",
        "write_holds",
        "lock_holds",
        "locks_held",
        "census_complete",
    ]
    .map(|name| rwlock_counter(c, name))
}

#[test]
fn info_counts_the_holds_held_now_by_kind_whoever_took_them() {
    testkit::require_lua(LOCK_LUA);
    let (_server, mut c) = Server::started(&[]);
    assert_eq!(held(&mut c), [0, 0, 0, 0, 1]);
    // Reads: a twice (re-entered) and b; a writer who reads too.
    ok(&mut c, &["RWLOCK.READ", "R", "a", "30000"]);
    ok(&mut c, &["RWLOCK.READ", "R", "a", "30000"]);
    ok(&mut c, &["RWLOCK.READ", "R", "b", "30000"]);
    ok(&mut c, &["RWLOCK.WRITE", "W", "w", "30000"]);
    ok(&mut c, &["RWLOCK.READ", "W", "w", "30000"]);
    // Plain and fair locks, one through Redisson's own script, one in
    // another database.
    ok(&mut c, &["LOCK.ACQUIRE", "P", "p", "30000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "F", "f", "30000"]);
    let taken = eval_lua_of(&mut c, LOCK_LUA, "lock", &["S"], &["30000", "s"]).expect("EVAL");
    assert_eq!(taken, Value::Nil);
    ok(&mut c, &["SELECT", "2"]);
    ok(&mut c, &["LOCK.ACQUIRE", "P", "q", "30000"]);
    ok(&mut c, &["SELECT", "0"]);
    // No lock: a hash without TTL, one with a value no lock has, a lease
    // run out.
    ok(&mut c, &["HSET", "user", "visits", "3"]);
    ok(&mut c, &["HSET", "page", "title", "x"]);
    ok(&mut c, &["PEXPIRE", "page", "60000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "gone", "g", "20"]);
    sleep(Duration::from_millis(60));
    assert_eq!(held(&mut c), [4, 1, 4, 6, 1]);
    // Releases show at once; the census reads the data, not the module's
    // own bookkeeping.
    ok(&mut c, &["RWLOCK.UNLOCK", "R", "a", "READ"]);
    ok(&mut c, &["DEL", "P"]);
    assert_eq!(held(&mut c), [3, 1, 3, 5, 1]);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(held(&mut c), [0, 0, 0, 0, 1]);
}

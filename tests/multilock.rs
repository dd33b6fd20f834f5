//! The multi-hold commands against a real server (docs/design.md, contract
//! §11): `LOCK.ACQUIREALL` all or none, each hold as its single command
//! makes it; `BLOCK` waiting that never holds a subset, woken by every path
//! that can end any of its locks, in line behind each lock's queue, never
//! deadlocked by the order of names; `LOCK.UNLOCKALL` and `LOCK.RENEWALL`;
//! the keys Redis finds; Redisson's scripts seeing every hold; one
//! transaction on replicas and in the AOF.

use std::fs;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    assert_took, eval_lua_of, expect_reply, ok, query, snapshot, wait_replica, waiters, Call,
    Server, LOCK_LUA, SEED_LUA,
};

/// A lease no test sees run out unless it means to.
const LONG: &str = "30000";

/// The reply of a waiter's thread, which must have had one.
#[track_caller]
fn reply_of(waiter: Call) -> (Value, Duration) {
    let (reply, waited) = waiter.join().expect("the waiter's thread");
    (reply.expect("the waiter's reply"), waited)
}

/// `LOCK.ACQUIREALL owner 30000 BLOCK 10000 HOLDS n kind name …`, parked.
fn park_all(server: &Server, c: &mut Conn, owner: &str, holds: &[&str]) -> Call {
    let n = (holds.len() / 2).to_string();
    let wait = [
        &[
            "LOCK.ACQUIREALL",
            owner,
            LONG,
            "BLOCK",
            "10000",
            "HOLDS",
            &n,
        ],
        holds,
    ]
    .concat();
    server.park(c, &wait)
}

/// `command owner [lease] HOLDS n kind name …`.
fn all(c: &mut Conn, head: &[&str], holds: &[&str]) -> Value {
    let n = (holds.len() / 2).to_string();
    ok(c, &[head, &["HOLDS", &n], holds].concat())
}

/// The hash's field, or None.
fn field(c: &mut Conn, lock: &str, field: &str) -> Option<String> {
    query(c, &["HGET", lock, field])
}

fn exists(c: &mut Conn, key: &str) -> bool {
    query::<i64, _>(c, &["EXISTS", key]) == 1
}

#[test]
fn every_hold_is_taken_as_its_single_command_takes_it_or_none_is() {
    let (server, mut c) = Server::started(&[]);
    let holds = ["LOCK", "a", "READ", "b", "WRITE", "c"];
    assert_eq!(
        all(&mut c, &["LOCK.ACQUIREALL", "m:1", LONG], &holds),
        Value::Nil
    );
    // The same holds by the single commands, on other names.
    for (cmd, lock) in [
        ("LOCK.ACQUIRE", "sa"),
        ("RWLOCK.READ", "sb"),
        ("RWLOCK.WRITE", "sc"),
    ] {
        assert_eq!(ok(&mut c, &[cmd, lock, "m:1", LONG]), Value::Nil);
    }
    for (multi, single) in [("a", "sa"), ("b", "sb"), ("c", "sc")] {
        let fields = |c: &mut Conn, k: &str| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = query(c, &["HGETALL", k]);
            v.sort();
            v
        };
        assert_eq!(fields(&mut c, multi), fields(&mut c, single), "{multi}");
        let pttl: i64 = query(&mut c, &["PTTL", multi]);
        assert!((29_000..=30_000).contains(&pttl), "{multi}: {pttl}");
    }
    assert!(
        exists(&mut c, "{b}:m:1:rwlock_timeout:1"),
        "b's read lease key"
    );

    // One lock in the way: nothing is taken, the largest PTTL replied.
    ok(&mut c, &["LOCK.ACQUIRE", "x", "o:1", "20000"]);
    let before = snapshot(&mut c);
    let reply = all(
        &mut c,
        &["LOCK.ACQUIREALL", "o:1", LONG],
        &["LOCK", "free", "READ", "c", "LOCK", "x"],
    );
    let Value::Int(pttl) = reply else {
        panic!("refused with a PTTL, got {reply:?}")
    };
    assert!(
        (29_000..=30_000).contains(&pttl),
        "c's PTTL, the larger: {pttl}"
    );
    assert_eq!(snapshot(&mut c), before, "free was not taken");
    // Readers share: another owner's read of b and its own x re-entry.
    assert_eq!(
        all(
            &mut c,
            &["LOCK.ACQUIREALL", "o:1", LONG],
            &["READ", "b", "LOCK", "x"]
        ),
        Value::Nil
    );
    assert_eq!(field(&mut c, "x", "o:1").as_deref(), Some("2"));
    drop(server);
}

#[test]
fn unlock_all_and_renew_all_reply_for_each_hold() {
    let (_server, mut c) = Server::started(&[]);
    let holds = ["LOCK", "a", "READ", "b", "WRITE", "c"];
    all(&mut c, &["LOCK.ACQUIREALL", "m:1", "5000"], &holds);
    ok(&mut c, &["LOCK.ACQUIRE", "a", "m:1", "5000"]);
    let renewed = all(
        &mut c,
        &["LOCK.RENEWALL", "m:1", LONG],
        &[&holds[..], &["LOCK", "z"]].concat(),
    );
    assert_eq!(
        renewed,
        Value::Array(vec![
            Value::Int(1),
            Value::Int(1),
            Value::Int(1),
            Value::Int(0)
        ])
    );
    let pttl: i64 = query(&mut c, &["PTTL", "c"]);
    assert!(pttl > 5_000, "renewed to 30 s: {pttl}");
    let released = all(
        &mut c,
        &["LOCK.UNLOCKALL", "m:1"],
        &[&holds[..], &["WRITE", "z"]].concat(),
    );
    assert_eq!(
        released,
        Value::Array(vec![
            Value::Int(0),
            Value::Int(1),
            Value::Int(1),
            Value::Nil
        ]),
        "a still held once; b and c released; z never held"
    );
    assert!(exists(&mut c, "a") && !exists(&mut c, "b") && !exists(&mut c, "c"));
}

#[test]
fn command_getkeys_finds_every_name_and_only_them() {
    let (_server, mut c) = Server::started(&[]);
    let names = |v: Value| -> Vec<String> { redis::from_redis_value(v).expect("a list of names") };
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &[
                "LOCK.ACQUIREALL",
                "HOLDS",
                "100",
                "BLOCK",
                "5",
                "HOLDS",
                "3",
                "LOCK",
                "a",
                "READ",
                "HOLDS",
                "WRITE",
                "c",
            ],
            &["a", "HOLDS", "c"],
        ),
        (
            &[
                "LOCK.UNLOCKALL",
                "o",
                "HOLDS",
                "2",
                "READ",
                "a",
                "LOCK",
                "b",
            ],
            &["a", "b"],
        ),
        (
            &["LOCK.RENEWALL", "o", "100", "HOLDS", "1", "WRITE", "{t}x"],
            &["{t}x"],
        ),
    ];
    for (args, expected) in cases {
        let keys = names(ok(&mut c, &[&["COMMAND", "GETKEYS"], args].concat()));
        assert_eq!(keys, expected, "{args:?}");
    }
}

#[test]
fn a_waiter_holds_nothing_until_it_takes_every_hold_at_once() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.READ", "b", "h:1", LONG]);
    let waiter = park_all(
        &server,
        &mut c,
        "m:1",
        &["LOCK", "a", "WRITE", "b", "READ", "c"],
    );
    assert!(
        !exists(&mut c, "a") && !exists(&mut c, "c"),
        "no subset held"
    );
    ok(&mut c, &["RWLOCK.UNLOCK", "b", "h:1", "READ"]);
    let (reply, waited) = reply_of(waiter);
    assert_eq!(reply, Value::Nil);
    assert!(waited < Duration::from_secs(5));
    assert_eq!(field(&mut c, "a", "m:1").as_deref(), Some("1"));
    assert_eq!(field(&mut c, "b", "m:1:write").as_deref(), Some("1"));
    assert_eq!(field(&mut c, "c", "m:1").as_deref(), Some("1"));
    assert_eq!(waiters(&mut c), 0);
}

/// h:1 holds `K` (a plain lock) and m:1 waits for it with `F`; `release`
/// ends h:1's hold; m:1 must then hold both. (A long lease: only `release`
/// ends the hold, however long m:1 takes to park on a loaded machine.)
fn woken_by(release: &dyn Fn(&mut Conn), extra: &[&str]) {
    let (server, mut c) = Server::started(extra);
    ok(&mut c, &["LOCK.ACQUIRE", "K", "h:1", LONG]);
    let waiter = park_all(&server, &mut c, "m:1", &["LOCK", "F", "LOCK", "K"]);
    release(&mut c);
    let (reply, waited) = reply_of(waiter);
    assert_eq!(reply, Value::Nil);
    assert!(waited < Duration::from_secs(5), "woken late: {waited:?}");
    assert_eq!(field(&mut c, "K", "m:1").as_deref(), Some("1"));
    assert_eq!(field(&mut c, "F", "m:1").as_deref(), Some("1"));
}

/// Redisson's scripts, which `make test` points the tests to.
fn require_scripts() {
    testkit::require_lua(LOCK_LUA);
    testkit::require_lua(SEED_LUA);
}

#[test]
fn every_way_a_lock_ends_wakes_a_multi_hold() {
    woken_by(
        &|c| {
            ok(c, &["LOCK.UNLOCK", "K", "h:1"]);
        },
        &[],
    );
    woken_by(
        &|c| {
            ok(c, &["LOCK.FORCEUNLOCK", "K"]);
        },
        &[],
    );
    woken_by(
        &|c| {
            ok(c, &["LOCK.UNLOCKALL", "h:1", "HOLDS", "1", "LOCK", "K"]);
        },
        &[],
    );
    woken_by(
        &|c| {
            ok(c, &["DEL", "K"]);
        },
        &[],
    );
    woken_by(
        &|c| {
            ok(c, &["FLUSHALL"]);
        },
        &[],
    );
    // The lease runs out: the deadline timer, no command (the lease
    // shortened once m:1 waits).
    woken_by(
        &|c| {
            expect_reply(c, &["LOCK.RENEW", "K", "h:1", "300"], Value::Int(1));
        },
        &[],
    );
    require_scripts();
    {
        woken_by(
            &|c| {
                let reply = eval_lua_of(
                    c,
                    LOCK_LUA,
                    "unlock",
                    &[
                        "K",
                        "redisson_lock__channel:{K}",
                        "redisson_unlock_latch:{K}:1",
                    ],
                    &["0", LONG, "h:1", "PUBLISH", "60000"],
                )
                .expect("EVAL");
                assert_eq!(reply, Value::Int(1), "Redisson's unlock released K");
            },
            &[],
        );
    }
}

#[test]
fn names_in_opposite_orders_never_deadlock() {
    let (server, mut c) = Server::started(&[]);
    all(
        &mut c,
        &["LOCK.ACQUIREALL", "h:1", LONG],
        &["LOCK", "A", "LOCK", "B"],
    );
    let first = park_all(&server, &mut c, "p:1", &["LOCK", "A", "LOCK", "B"]);
    let second = park_all(&server, &mut c, "q:1", &["LOCK", "B", "LOCK", "A"]);
    all(
        &mut c,
        &["LOCK.UNLOCKALL", "h:1"],
        &["LOCK", "A", "LOCK", "B"],
    );
    assert_eq!(
        reply_of(first).0,
        Value::Nil,
        "the first in line goes first"
    );
    assert_eq!(field(&mut c, "A", "p:1").as_deref(), Some("1"));
    assert_eq!(waiters(&mut c), 1, "the second waits, holding nothing");
    assert!(field(&mut c, "B", "q:1").is_none());
    all(
        &mut c,
        &["LOCK.UNLOCKALL", "p:1"],
        &["LOCK", "B", "LOCK", "A"],
    );
    assert_eq!(reply_of(second).0, Value::Nil);
    assert_eq!(field(&mut c, "B", "q:1").as_deref(), Some("1"));
}

#[test]
fn a_timed_out_multi_hold_gets_the_largest_pttl_and_leaves_every_queue() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "A", "h:1", "20000"]);
    let start = Instant::now();
    ok(&mut c, &["RWLOCK.WRITE", "B", "h:1", LONG]);
    let waiter = server.park(
        &mut c,
        &[
            "LOCK.ACQUIREALL",
            "m:1",
            LONG,
            "BLOCK",
            "300",
            "HOLDS",
            "3",
            "LOCK",
            "F",
            "LOCK",
            "A",
            "READ",
            "B",
        ],
    );
    let (reply, waited) = reply_of(waiter);
    // B's lease, read no later than this test saw the reply (less the
    // PTTL's rounding): above A's 20 s whatever the machine's load.
    let since_b = start.elapsed().as_millis() as i64;
    let Value::Int(pttl) = reply else {
        panic!("a PTTL at the timeout, got {reply:?}")
    };
    assert!(
        (30_000 - since_b - 1..=30_000).contains(&pttl),
        "B's, the largest: {pttl}, {since_b} ms after B's lease began"
    );
    assert_took(
        waited,
        Duration::from_millis(300),
        Duration::from_secs(5),
        "the wait",
    );
    assert_eq!(waiters(&mut c), 0);
    assert!(!exists(&mut c, "F"));
    // A hung-up waiter leaves every queue too.
    server.park_and_hang_up(
        &mut c,
        &[
            "LOCK.ACQUIREALL",
            "m:1",
            LONG,
            "BLOCK",
            "0",
            "HOLDS",
            "2",
            "LOCK",
            "F",
            "LOCK",
            "A",
        ],
    );
    ok(&mut c, &["LOCK.UNLOCK", "A", "h:1"]);
    assert!(
        !exists(&mut c, "A") && !exists(&mut c, "F"),
        "nobody took them"
    );
}

#[test]
fn a_multi_hold_keeps_its_place_in_each_queue() {
    // b:1 waits for A first; m:1 behind it on A waits for A and F.
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "A", "h:1", LONG]);
    let single = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "b:1", LONG, "BLOCK", "10000"],
    );
    let multi = park_all(&server, &mut c, "m:1", &["LOCK", "F", "LOCK", "A"]);
    ok(&mut c, &["LOCK.UNLOCK", "A", "h:1"]);
    assert_eq!(reply_of(single).0, Value::Nil, "the earlier waiter first");
    assert!(!exists(&mut c, "F"), "m:1 took nothing meanwhile");
    ok(&mut c, &["LOCK.UNLOCK", "A", "b:1"]);
    assert_eq!(reply_of(multi).0, Value::Nil);
    assert_eq!(field(&mut c, "F", "m:1").as_deref(), Some("1"));
}

#[test]
fn in_fifo_mode_a_newcomer_does_not_overtake_a_waiting_multi_hold() {
    for (fifo, overtaken) in [(true, false), (false, true)] {
        let module_args: &[&str] = if fifo { &["fairness", "fifo"] } else { &[] };
        let server = Server::start_with_module_args(module_args, &[]);
        let mut c = server.conn();
        ok(&mut c, &["LOCK.ACQUIRE", "B", "h:1", LONG]);
        let multi = park_all(&server, &mut c, "m:1", &["LOCK", "A", "LOCK", "B"]);
        let newcomer = ok(&mut c, &["LOCK.ACQUIRE", "A", "n:1", LONG]);
        assert_eq!(
            newcomer == Value::Nil,
            overtaken,
            "fifo {fifo}: {newcomer:?}"
        );
        let newcomer_all = all(
            &mut c,
            &["LOCK.ACQUIREALL", "o:1", LONG],
            &["LOCK", "A", "LOCK", "C"],
        );
        assert_ne!(newcomer_all, Value::Nil, "A is queued for or held");
        if overtaken {
            ok(&mut c, &["LOCK.UNLOCK", "A", "n:1"]);
        }
        ok(&mut c, &["LOCK.UNLOCK", "B", "h:1"]);
        assert_eq!(reply_of(multi).0, Value::Nil, "fifo {fifo}");
        assert!(!exists(&mut c, "C"), "the refused multi-hold took nothing");
    }
}

#[test]
fn redisson_scripts_see_every_hold_of_a_multi_hold() {
    require_scripts();
    let (_server, mut c) = Server::started(&[]);
    let holds = ["LOCK", "P", "READ", "R", "WRITE", "W"];
    all(&mut c, &["LOCK.ACQUIREALL", "m:1", LONG], &holds);
    let other = "u:2";
    let lock = |c: &mut Conn| eval_lua_of(c, LOCK_LUA, "lock", &["P"], &[LONG, other]);
    let write =
        |c: &mut Conn, k: &str| eval_lua_of(c, SEED_LUA, "write_lock", &[k], &[LONG, "u:2:write"]);
    let read = |c: &mut Conn, k: &str| {
        let prefix = format!("{{{k}}}:u:2:rwlock_timeout");
        eval_lua_of(
            c,
            SEED_LUA,
            "read_lock",
            &[k, &prefix],
            &[LONG, other, "u:2:write"],
        )
    };
    assert!(matches!(lock(&mut c), Ok(Value::Int(_))), "P is held");
    assert!(
        matches!(write(&mut c, "R"), Ok(Value::Int(_))),
        "R is read-held"
    );
    assert!(
        matches!(write(&mut c, "W"), Ok(Value::Int(_))),
        "W is write-held"
    );
    assert!(
        matches!(read(&mut c, "W"), Ok(Value::Int(_))),
        "W admits no reader"
    );
    assert_eq!(
        read(&mut c, "R").expect("EVAL"),
        Value::Nil,
        "readers share R"
    );
    all(&mut c, &["LOCK.UNLOCKALL", "m:1"], &holds);
    assert_eq!(lock(&mut c).expect("EVAL"), Value::Nil, "P is free");
    assert_eq!(write(&mut c, "W").expect("EVAL"), Value::Nil, "W is free");
}

#[test]
fn a_multi_hold_reaches_replicas_and_the_aof_as_one_transaction() {
    let master = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    let holds = ["LOCK", "{t}a", "READ", "{t}b", "WRITE", "{t}c"];
    all(&mut m, &["LOCK.ACQUIREALL", "m:1", LONG], &holds);
    wait_replica(&mut m);
    for k in ["{t}a", "{t}b", "{t}c", "{t}b:m:1:rwlock_timeout:1"] {
        let on_master: i64 = query(&mut m, &["PEXPIRETIME", k]);
        assert!(on_master > 0, "{k} held with a deadline");
        expect_reply(&mut r, &["PEXPIRETIME", k], Value::Int(on_master));
    }
    let aof_dir = master.dir().join("appendonlydir");
    let mut text = Vec::new();
    for entry in fs::read_dir(&aof_dir).expect("the AOF directory") {
        let path = entry.expect("an entry").path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            text.extend(fs::read(&path).expect("the AOF"));
        }
    }
    let text = String::from_utf8_lossy(&text).to_ascii_lowercase();
    let multi = text.find("multi").expect("MULTI in the AOF");
    let exec = text.rfind("exec").expect("EXEC in the AOF");
    for needle in ["{t}a", "{t}b", "{t}c", "pexpireat"] {
        let at = text
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} in the AOF"));
        assert!(
            multi < at && at < exec,
            "{needle} inside MULTI/EXEC:\n{text}"
        );
    }
    assert!(
        !text.contains("lock.acquireall"),
        "effects, not the command"
    );
}

#[test]
fn a_waiter_already_holding_a_lock_is_not_held_up_by_those_waiting_for_it() {
    // o:1 holds A; b:1 waits for A; o:1's multi-hold of A (a re-entry) and
    // B (held by p:1) queues behind b:1 on A. b:1 waits for o:1 anyway: when
    // B is released, o:1 must get both rather than wait for b:1.
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "A", "o:1", LONG]);
    ok(&mut c, &["LOCK.ACQUIRE", "B", "p:1", LONG]);
    let single = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "b:1", LONG, "BLOCK", "10000"],
    );
    let multi = park_all(&server, &mut c, "o:1", &["LOCK", "A", "LOCK", "B"]);
    ok(&mut c, &["LOCK.UNLOCK", "B", "p:1"]);
    assert_eq!(reply_of(multi).0, Value::Nil);
    assert_eq!(
        field(&mut c, "A", "o:1").as_deref(),
        Some("2"),
        "a re-entry"
    );
    assert_eq!(field(&mut c, "B", "o:1").as_deref(), Some("1"));
    assert_eq!(waiters(&mut c), 1, "b:1 still waits");
    all(
        &mut c,
        &["LOCK.UNLOCKALL", "o:1"],
        &["LOCK", "A", "LOCK", "B"],
    );
    ok(&mut c, &["LOCK.UNLOCK", "A", "o:1"]);
    assert_eq!(reply_of(single).0, Value::Nil, "then b:1 gets A");
}

#[test]
fn a_waiter_served_by_the_deadline_timer_replicates_as_one_transaction() {
    let master = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    // h:1's lease on {w}b runs out: the module's timer serves the waiter,
    // no command. Shortened once the waiter is parked, so that it cannot
    // run out before on a loaded machine.
    ok(&mut m, &["LOCK.ACQUIRE", "{w}b", "h:1", LONG]);
    let waiter = park_all(&master, &mut m, "m:1", &["READ", "{w}a", "LOCK", "{w}b"]);
    expect_reply(&mut m, &["LOCK.RENEW", "{w}b", "h:1", "300"], Value::Int(1));
    assert_eq!(reply_of(waiter).0, Value::Nil);
    wait_replica(&mut m);
    for k in ["{w}a", "{w}b", "{w}a:m:1:rwlock_timeout:1"] {
        let on_master: i64 = query(&mut m, &["PEXPIRETIME", k]);
        assert!(on_master > 0, "{k} held with a deadline");
        expect_reply(&mut r, &["PEXPIRETIME", k], Value::Int(on_master));
    }
    let aof_dir = master.dir().join("appendonlydir");
    let mut text = Vec::new();
    for entry in fs::read_dir(&aof_dir).expect("the AOF directory") {
        let path = entry.expect("an entry").path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            text.extend(fs::read(&path).expect("the AOF"));
        }
    }
    let text = String::from_utf8_lossy(&text).to_ascii_lowercase();
    // The waiter's holds are the AOF's last transaction.
    let multi = text.rfind("multi").expect("MULTI in the AOF");
    let exec = text.rfind("exec").expect("EXEC in the AOF");
    let last = &text[multi..exec];
    for needle in ["{w}a", "{w}b", "m:1", "pexpireat"] {
        assert!(
            last.contains(needle),
            "{needle} in the last MULTI/EXEC:\n{text}"
        );
    }
}

#[test]
fn multi_hold_waiters_fail_once_when_the_node_becomes_a_replica() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "F", "h:1", LONG]);
    let parked = [
        park_all(&node, &mut c, "m:1", &["LOCK", "A", "LOCK", "F"]),
        park_all(
            &node,
            &mut c,
            "m:2",
            &["LOCK", "F", "READ", "B", "WRITE", "C"],
        ),
        node.park(
            &mut c,
            &["LOCK.ACQUIRE", "F", "s:1", LONG, "BLOCK", "10000"],
        ),
    ];
    node.demote_failing_waiters(&mut c, &master, parked);
    testkit::assert_counters(&mut c, &[("waiters", 0), ("waits_aborted", 3)]);
}

#[test]
fn inside_multi_and_scripts_block_makes_one_attempt() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "B", "h:1", LONG]);
    let acquire = [
        "LOCK.ACQUIREALL",
        "m:1",
        LONG,
        "BLOCK",
        "0",
        "HOLDS",
        "2",
        "LOCK",
        "A",
        "LOCK",
        "B",
    ];
    let replies = testkit::in_one_turn(&mut c, &[&acquire, &["EXISTS", "A"]]);
    assert!(matches!(replies[0], Value::Int(p) if p > 0), "{replies:?}");
    assert_eq!(replies[1], Value::Int(0), "nothing taken");
    let script = "return redis.call('LOCK.ACQUIREALL', ARGV[1], '30000', 'BLOCK', '0', \
                  'HOLDS', '2', 'LOCK', KEYS[1], 'LOCK', KEYS[2])";
    let reply = ok(&mut c, &["EVAL", script, "2", "A", "B", "m:1"]);
    assert!(matches!(reply, Value::Int(p) if p > 0), "{reply:?}");
    ok(&mut c, &["LOCK.UNLOCK", "B", "h:1"]);
    assert_eq!(
        ok(&mut c, &["EVAL", script, "2", "A", "B", "m:1"]),
        Value::Nil
    );
    assert_eq!(field(&mut c, "A", "m:1").as_deref(), Some("1"));
    assert_eq!(waiters(&mut c), 0);
}

//! Deadlock detection (docs/design.md, contract §14) against a real server:
//! cycles of two and three owners across the kinds of hold (read, write,
//! plain, multi-hold) fail the request that would close them at once with
//! nothing changed, and the others are served once the victim's owner lets
//! go; the read-to-write upgrade; a cycle a handoff closes; no false
//! positives (chains, holds taken by Redisson's own script); and replicas,
//! on which detection writes nothing. Fair-lock lines (`FAIRLOCK.ACQUIRE …
//! BLOCK`) in cycles with every other kind: a table of requests that fail
//! without joining the line, and handoffs whose newest waiter, of either
//! kind, fails and leaves its queue or line.

use std::time::Duration;

use redis::Value;
use testkit::Conn;
use testkit::{
    assert_counters, call, config_value, eval_lua_of, expect_reply, ok, query, snapshot,
    wait_replica, waiters, Call, Server, LOCK_LUA,
};

/// The reply of a parked call, which must have come within 10 s.
fn reply_of(call: Call) -> redis::RedisResult<Value> {
    let (reply, waited) = call.join().expect("client thread");
    assert!(
        waited < Duration::from_secs(10),
        "answered after {waited:?}"
    );
    reply
}

/// Runs `args`, which must fail with `DEADLOCK` naming exactly `cycle`,
/// and checks that it changed no key and parked no client.
#[track_caller]
fn expect_deadlock(c: &mut Conn, args: &[&str], cycle: &str) {
    let (keys, parked) = (snapshot(c), waiters(c));
    assert_deadlock(call(c, args), cycle);
    assert_eq!(snapshot(c), keys, "{args:?} changed a key");
    assert_eq!(waiters(c), parked, "{args:?} parked");
}

/// The cycles `RWLOCK.DEADLOCKS` lists, the newest first.
fn recent(c: &mut Conn) -> Vec<String> {
    let entries: Vec<Value> = query(c, &["RWLOCK.DEADLOCKS"]);
    entries
        .into_iter()
        .map(|e| {
            let Value::Array(fields) = e else {
                panic!("an entry is an array: {e:?}")
            };
            assert_eq!(fields.len(), 4, "at, time, cycle, text: {fields:?}");
            assert!(matches!(fields[1], Value::Int(at) if at > 0), "{fields:?}");
            match &fields[3] {
                Value::BulkString(text) => String::from_utf8(text.clone()).expect("utf-8"),
                other => panic!("the cycle is text: {other:?}"),
            }
        })
        .collect()
}

#[test]
fn two_owners_a_write_hold_and_a_plain_lock() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "A", "a", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "B", "b", "30000"]);
    let a = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "B", "a", "30000", "BLOCK", "10000"],
    );
    expect_deadlock(
        &mut c,
        &["RWLOCK.READ", "A", "b", "30000", "BLOCK", "10000"],
        "b waits for A held by a; a waits for B held by b",
    );
    assert_counters(&mut c, &[("deadlocks", 1), ("waiters", 1)]);
    assert_eq!(
        recent(&mut c),
        ["DEADLOCK b waits for A held by a; a waits for B held by b"]
    );
    // The victim's owner lets go: the other is served.
    expect_reply(&mut c, &["LOCK.UNLOCK", "B", "b"], Value::Int(1));
    assert_eq!(reply_of(a).expect("served"), Value::Nil);
    let holder: i64 = query(&mut c, &["HGET", "B", "a"]);
    assert_eq!(holder, 1, "a holds B");
}

#[test]
fn three_owners_across_read_write_and_plain() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.READ", "R", "a", "30000"]);
    ok(&mut c, &["RWLOCK.WRITE", "W", "b", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "P", "c", "30000"]);
    let a = server.park(
        &mut c,
        &["RWLOCK.WRITE", "W", "a", "30000", "BLOCK", "10000"],
    );
    let b = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "P", "b", "30000", "BLOCK", "10000"],
    );
    expect_deadlock(
        &mut c,
        &["RWLOCK.WRITE", "R", "c", "30000", "BLOCK", "10000"],
        "c waits for R held by a; a waits for W held by b; b waits for P held by c",
    );
    assert_counters(&mut c, &[("deadlocks", 1), ("waiters", 2)]);
    expect_reply(&mut c, &["LOCK.UNLOCK", "P", "c"], Value::Int(1));
    assert_eq!(reply_of(b).expect("b served"), Value::Nil);
    expect_reply(&mut c, &["RWLOCK.UNLOCK", "W", "b", "WRITE"], Value::Int(1));
    assert_eq!(reply_of(a).expect("a served"), Value::Nil);
}

#[test]
fn a_wait_behind_a_multi_hold_that_waits_for_the_asker() {
    // The example: X holds Q, C holds K, D parks for K and Q at
    // once; C asking for Q would wait behind D, who waits for C.
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "Q", "x", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "K", "c", "30000"]);
    let all = [
        "LOCK.ACQUIREALL",
        "d",
        "30000",
        "BLOCK",
        "10000",
        "HOLDS",
        "2",
        "LOCK",
        "K",
        "LOCK",
        "Q",
    ];
    let d = server.park(&mut c, &all);
    expect_deadlock(
        &mut c,
        &["LOCK.ACQUIRE", "Q", "c", "30000", "BLOCK", "10000"],
        "c waits for Q behind d; d waits for K held by c",
    );
    // The multi-hold is the one asking, the other way round.
    ok(&mut c, &["LOCK.UNLOCK", "K", "c"]);
    ok(&mut c, &["RWLOCK.READ", "M", "e", "30000"]);
    let f = server.park(
        &mut c,
        &["RWLOCK.WRITE", "M", "f", "30000", "BLOCK", "10000"],
    );
    ok(&mut c, &["LOCK.ACQUIRE", "N", "f", "30000"]);
    expect_deadlock(
        &mut c,
        &[
            "LOCK.ACQUIREALL",
            "e",
            "30000",
            "BLOCK",
            "10000",
            "HOLDS",
            "2",
            "READ",
            "M",
            "LOCK",
            "N",
        ],
        "e waits for N held by f; f waits for M held by e",
    );
    ok(&mut c, &["LOCK.UNLOCK", "Q", "x"]);
    assert_eq!(reply_of(d).expect("d served"), Value::Nil);
    ok(&mut c, &["RWLOCK.UNLOCK", "M", "e", "READ"]);
    assert_eq!(reply_of(f).expect("f served"), Value::Nil);
    assert_counters(&mut c, &[("deadlocks", 2), ("waiters", 0)]);
}

#[test]
fn a_read_hold_asking_to_become_the_write_hold_is_a_deadlock() {
    let (_server, mut c) = Server::started(&[]);
    assert_eq!(config_value(&mut c, "rwlock.deadlock-detection"), "yes");
    ok(&mut c, &["RWLOCK.READ", "U", "a", "30000"]);
    expect_deadlock(
        &mut c,
        &["RWLOCK.WRITE", "U", "a", "30000", "BLOCK", "0", "FENCED"],
        "a waits for U held by a",
    );
    // Other readers change nothing: the upgrade waits for itself too.
    ok(&mut c, &["RWLOCK.READ", "U", "b", "30000"]);
    expect_deadlock(
        &mut c,
        &["RWLOCK.WRITE", "U", "a", "30000", "BLOCK", "0"],
        "a waits for U held by a",
    );
    // Without BLOCK nothing waits: the refusal of old.
    let pttl: i64 = query(&mut c, &["RWLOCK.WRITE", "U", "a", "30000"]);
    assert!(pttl > 0);
    // Detection off: the upgrade parks until its timeout, as before.
    ok(
        &mut c,
        &["CONFIG", "SET", "rwlock.deadlock-detection", "no"],
    );
    let pttl: i64 = query(&mut c, &["RWLOCK.WRITE", "U", "a", "30000", "BLOCK", "100"]);
    assert!(pttl > 0);
    assert_counters(&mut c, &[("deadlocks", 2), ("waits_timed_out", 1)]);
}

#[test]
fn a_chain_of_waits_without_a_cycle_parks_everyone() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "A", "a", "30000"]);
    ok(&mut c, &["RWLOCK.WRITE", "B", "b", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "C", "c", "30000"]);
    // b waits for a, c for b, d for c: a waits for nothing.
    let b = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "b", "30000", "BLOCK", "10000"],
    );
    let cc = server.park(
        &mut c,
        &["RWLOCK.READ", "B", "c", "30000", "BLOCK", "10000"],
    );
    let d = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "C", "d", "30000", "BLOCK", "10000"],
    );
    // A waiter queued behind the others on the same lock is no cycle either.
    let e = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "e", "30000", "BLOCK", "10000"],
    );
    assert_counters(&mut c, &[("deadlocks", 0), ("waiters", 4)]);
    ok(&mut c, &["LOCK.UNLOCK", "A", "a"]);
    assert_eq!(reply_of(b).expect("b"), Value::Nil);
    ok(&mut c, &["RWLOCK.UNLOCK", "B", "b", "WRITE"]);
    ok(&mut c, &["LOCK.UNLOCK", "A", "b"]);
    assert_eq!(reply_of(cc).expect("c"), Value::Nil);
    assert_eq!(reply_of(e).expect("e"), Value::Nil);
    ok(&mut c, &["LOCK.UNLOCK", "C", "c"]);
    assert_eq!(reply_of(d).expect("d"), Value::Nil);
    assert!(recent(&mut c).is_empty());
}

#[test]
fn a_long_line_on_one_lock_parks_without_a_cycle_and_hides_none() {
    // Waiters behind a holder who waits on nothing park at once (their
    // check reads the lock alone, however long its line), and no cycle
    // through the line goes unseen: one waiter holds what the holder asks
    // for; the holder's read hold stops its own write hold.
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "L", "a", "30000"]);
    ok(&mut c, &["RWLOCK.WRITE", "M", "w7", "30000"]);
    ok(&mut c, &["RWLOCK.READ", "U", "a", "30000"]);
    let line: Vec<Call> = (0..12)
        .map(|i| {
            let owner = format!("w{i}");
            server.park(
                &mut c,
                &["LOCK.ACQUIRE", "L", &owner, "30000", "BLOCK", "10000"],
            )
        })
        .collect();
    let writer = server.park(
        &mut c,
        &["RWLOCK.WRITE", "U", "x", "30000", "BLOCK", "10000"],
    );
    assert_counters(&mut c, &[("deadlocks", 0), ("waiters", 13)]);
    expect_deadlock(
        &mut c,
        &["RWLOCK.READ", "M", "a", "30000", "BLOCK", "10000"],
        "a waits for M held by w7; w7 waits for L held by a",
    );
    expect_deadlock(
        &mut c,
        &["RWLOCK.WRITE", "U", "a", "30000", "BLOCK", "10000"],
        "a waits for U held by a",
    );
    ok(&mut c, &["RWLOCK.UNLOCK", "U", "a", "READ"]);
    assert_eq!(reply_of(writer).expect("x served"), Value::Nil);
    ok(&mut c, &["RWLOCK.UNLOCK", "M", "w7", "WRITE"]);
    // a lets go: the line is served in its order, each letting go in turn.
    ok(&mut c, &["LOCK.UNLOCK", "L", "a"]);
    for (i, waiter) in line.into_iter().enumerate() {
        assert_eq!(reply_of(waiter).expect("served"), Value::Nil);
        ok(&mut c, &["LOCK.UNLOCK", "L", &format!("w{i}")]);
    }
    assert_counters(&mut c, &[("deadlocks", 2), ("waiters", 0)]);
}

#[test]
fn holds_taken_by_redissons_script_count_and_make_no_false_cycle() {
    testkit::require_lua(LOCK_LUA);
    let (server, mut c) = Server::started(&[]);
    // s holds S through Redisson's own script, a holds T.
    let taken = eval_lua_of(&mut c, LOCK_LUA, "lock", &["S"], &["30000", "s"]).expect("EVAL");
    assert_eq!(taken, Value::Nil);
    ok(&mut c, &["LOCK.ACQUIRE", "T", "a", "30000"]);
    // a waits for s, b for a: a chain, no cycle.
    let a = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "S", "a", "30000", "BLOCK", "10000"],
    );
    let b = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "T", "b", "30000", "BLOCK", "10000"],
    );
    assert_counters(&mut c, &[("deadlocks", 0)]);
    // s asking for T closes the ring through its script hold.
    expect_deadlock(
        &mut c,
        &["LOCK.ACQUIRE", "T", "s", "30000", "BLOCK", "10000"],
        "s waits for T held by a; a waits for S held by s",
    );
    let released = eval_lua_of(
        &mut c,
        LOCK_LUA,
        "unlock",
        &[
            "S",
            "redisson_lock__channel:{S}",
            "redisson_unlock_latch:{S}:1",
        ],
        &["0", "30000", "s", "PUBLISH", "10000"],
    )
    .expect("EVAL unlock");
    assert_eq!(released, Value::Int(1));
    assert_eq!(reply_of(a).expect("a"), Value::Nil);
    ok(&mut c, &["LOCK.UNLOCK", "T", "a"]);
    assert_eq!(reply_of(b).expect("b"), Value::Nil);
}

#[test]
fn a_handoff_that_closes_a_cycle_fails_the_newest_waiter() {
    // One owner on two connections: its second wait is served a hold that
    // its first wait's holder waits for.
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "A", "h", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "B", "b", "30000"]);
    let a_on_a = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "a", "30000", "BLOCK", "10000"],
    );
    let a_on_b = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "B", "a", "30000", "BLOCK", "10000"],
    );
    // b queues behind a on A: no cycle yet, a may still time out.
    let b_on_a = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "b", "30000", "BLOCK", "10000"],
    );
    assert_counters(&mut c, &[("deadlocks", 0), ("waiters", 3)]);
    // A goes to a: b now waits for a, who waits for b.
    ok(&mut c, &["LOCK.UNLOCK", "A", "h"]);
    assert_eq!(reply_of(a_on_a).expect("a took A"), Value::Nil);
    // b, parked last, is the victim.
    assert_deadlock(
        reply_of(b_on_a),
        "a waits for B held by b; b waits for A held by a",
    );
    assert_counters(&mut c, &[("deadlocks", 1), ("waiters", 1)]);
    ok(&mut c, &["LOCK.UNLOCK", "B", "b"]);
    assert_eq!(reply_of(a_on_b).expect("a took B"), Value::Nil);
}

#[test]
fn detection_writes_nothing_a_replica_would_see() {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    // Streamed to before the first write: a replica still in its first sync
    // may acknowledge before it holds the data (seen on Valkey 9 under load).
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let mut r = replica.conn();
    ok(&mut m, &["RWLOCK.WRITE", "A", "a", "30000"]);
    ok(&mut m, &["LOCK.ACQUIRE", "B", "b", "30000"]);
    let a = master.park(
        &mut m,
        &["LOCK.ACQUIRE", "B", "a", "30000", "BLOCK", "10000"],
    );
    wait_replica(&mut m);
    let before = snapshot(&mut r);
    expect_deadlock(
        &mut m,
        &["RWLOCK.WRITE", "A", "b", "30000", "BLOCK", "10000"],
        "b waits for A held by a; a waits for B held by b",
    );
    wait_replica(&mut m);
    assert_eq!(snapshot(&mut r), before, "the replica saw a write");
    assert_eq!(snapshot(&mut r), snapshot(&mut m));
    // The log of cycles is the node's own.
    assert!(recent(&mut r).is_empty());
    assert_eq!(recent(&mut m).len(), 1);
    ok(&mut m, &["LOCK.UNLOCK", "B", "b"]);
    assert_eq!(reply_of(a).expect("a"), Value::Nil);
}

/// How a torture run went: its deadlocks reported and waits timed out.
#[derive(Debug, Default)]
struct Run {
    deadlocks: u64,
    timeouts: u64,
}

/// `CLIENTS` threads, each its own owner, each taking two of `LOCKS` plain
/// locks `ROUNDS` times with `BLOCK block` one after the other (in name
/// order when `sorted`), then releasing both. A `DEADLOCK` makes the thread
/// release what it holds and try again; so does a wait that times out,
/// which is counted: with holds this short, a timeout is a stall. With
/// `block` under 1 s (the baseline without detection) a thread stops at its
/// first stall: the run only has to show there are some.
fn torture(server: &Server, sorted: bool, seed: u64, block: &'static str) -> Run {
    let quit_at_stall = block.len() < 4;
    const CLIENTS: u64 = 6;
    const LOCKS: u64 = 4;
    const ROUNDS: usize = 40;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let mut c = server.conn();
            std::thread::spawn(move || {
                let mut rng =
                    testkit::Rng((seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
                let owner = format!("t{t}");
                let mut run = Run::default();
                for _ in 0..ROUNDS {
                    let a = rng.below(LOCKS);
                    let b = (a + 1 + rng.below(LOCKS - 1)) % LOCKS;
                    let mut pair = [format!("T{a}"), format!("T{b}")];
                    if sorted {
                        pair.sort();
                    }
                    'attempt: loop {
                        let mut held = Vec::new();
                        for lock in &pair {
                            let args = ["LOCK.ACQUIRE", lock, &owner, "30000", "BLOCK", block];
                            match call(&mut c, &args) {
                                Ok(Value::Nil) => held.push(lock.clone()),
                                Ok(_) if quit_at_stall => {
                                    run.timeouts += 1;
                                    for h in held.iter().rev() {
                                        ok(&mut c, &["LOCK.UNLOCK", h, &owner]);
                                    }
                                    return run;
                                }
                                Ok(_) => run.timeouts += 1,
                                Err(e) if e.code() == Some("DEADLOCK") => run.deadlocks += 1,
                                Err(e) => panic!("{args:?}: {e}"),
                            }
                            if held.last() != Some(lock) {
                                for h in held.iter().rev() {
                                    ok(&mut c, &["LOCK.UNLOCK", h, &owner]);
                                }
                                continue 'attempt;
                            }
                        }
                        for h in held.iter().rev() {
                            ok(&mut c, &["LOCK.UNLOCK", h, &owner]);
                        }
                        break;
                    }
                }
                run
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a torture thread"))
        .fold(Run::default(), |sum, r| Run {
            deadlocks: sum.deadlocks + r.deadlocks,
            timeouts: sum.timeouts + r.timeouts,
        })
}

#[test]
fn a_torture_run_in_sorted_order_never_deadlocks_and_in_random_order_never_stalls() {
    let (server, mut c) = Server::started(&[]);
    let seed = testkit::seed(0xdead_10c5);
    let sorted = torture(&server, true, seed, "5000");
    assert_eq!(
        (sorted.deadlocks, sorted.timeouts),
        (0, 0),
        "sorted: {sorted:?}"
    );
    let random = torture(&server, false, seed, "5000");
    assert_eq!(random.timeouts, 0, "a stall, seed {seed:#x}: {random:?}");
    // Every deadlock reported is one the server counted and kept.
    assert_counters(&mut c, &[("deadlocks", random.deadlocks), ("waiters", 0)]);
    // The baseline, detection off: the same run stalls until timeouts (a
    // short one here, to keep the test fast).
    ok(
        &mut c,
        &["CONFIG", "SET", "rwlock.deadlock-detection", "no"],
    );
    let baseline = torture(&server, false, seed, "200");
    assert_eq!(baseline.deadlocks, 0);
    assert!(
        baseline.timeouts > 0,
        "no stall without detection? {baseline:?}"
    );
    eprintln!("random order, seed {seed:#x}: {random:?}; without detection: {baseline:?}");
}

#[test]
fn a_multi_hold_served_into_a_cycle_fails_the_newest_waiter_once() {
    // One owner on two connections: its multi-hold is served A and B, which
    // b waits for, while its other client waits for b's C.
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "A", "h", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "C", "b", "30000"]);
    let all = [
        "LOCK.ACQUIREALL",
        "a",
        "30000",
        "BLOCK",
        "10000",
        "HOLDS",
        "2",
        "LOCK",
        "A",
        "LOCK",
        "B",
    ];
    let a_all = server.park(&mut c, &all);
    let a_on_c = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "C", "a", "30000", "BLOCK", "10000"],
    );
    let b_on_a = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "A", "b", "30000", "BLOCK", "10000"],
    );
    assert_counters(&mut c, &[("deadlocks", 0), ("waiters", 3)]);
    ok(&mut c, &["LOCK.UNLOCK", "A", "h"]);
    assert_eq!(reply_of(a_all).expect("a took A and B"), Value::Nil);
    // b, parked last, is the victim.
    assert_deadlock(
        reply_of(b_on_a),
        "a waits for C held by b; b waits for A held by a",
    );
    assert_counters(&mut c, &[("deadlocks", 1), ("waiters", 1)]);
    // Nothing of b is left in A's queue: releasing A serves nobody twice.
    ok(&mut c, &["LOCK.UNLOCK", "A", "a"]);
    ok(&mut c, &["LOCK.UNLOCK", "C", "b"]);
    assert_eq!(reply_of(a_on_c).expect("a took C"), Value::Nil);
    assert_counters(&mut c, &[("waiters", 0), ("locks_with_waiters", 0)]);
}

// ---------------------------------------------------------------------------
// The fair lock's line in the graph
// ---------------------------------------------------------------------------

/// `name` of case `i`: each case of a table has locks and owners of its
/// own (a lock or owner is a word of one or two letters and digits).
fn of_case(word: &str, i: usize) -> String {
    let short = word.len() <= 2 && word.starts_with(|c: char| c.is_ascii_alphabetic());
    if short {
        format!("{word}{i}")
    } else {
        word.to_string()
    }
}

/// `args` with every lock and owner renamed for case `i`.
fn args_of_case(args: &[&str], i: usize) -> Vec<String> {
    args.iter().map(|a| of_case(a, i)).collect()
}

/// A cycle's text with every lock and owner renamed for case `i`.
fn cycle_of_case(cycle: &str, i: usize) -> String {
    cycle
        .split("; ")
        .map(|step| {
            // `o waits for L held by x` or `o waits for L behind x`.
            let words: Vec<&str> = step.split(' ').collect();
            let last = words.len() - 1;
            words
                .iter()
                .enumerate()
                .map(|(at, w)| match at {
                    0 | 3 => of_case(w, i),
                    _ if at == last => of_case(w, i),
                    _ => w.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `fair_lock.lua` as Redisson's `RFairLock.lock()` sends it: `owner`
/// takes the free fair lock `lock` through the script.
fn script_fair_lock(c: &mut Conn, lock: &str, owner: &str) {
    let (q, t) = (
        format!("redisson_lock_queue:{{{lock}}}"),
        format!("redisson_lock_timeout:{{{lock}}}"),
    );
    let now: i64 = {
        let (s, us): (i64, i64) = query(c, &["TIME"]);
        s * 1000 + us / 1000
    };
    let taken = eval_lua_of(
        c,
        LOCK_LUA,
        "fair_lock",
        &[lock, &q, &t],
        &["30000", owner, "5000", &now.to_string()],
    )
    .expect("fair_lock.lua");
    assert_eq!(taken, Value::Nil, "{owner} took {lock} by the script");
}

/// Holds taken at once (`SCRIPT lock owner`: by Redisson's fair_lock.lua),
/// clients parked in order, then the request whose wait would close the
/// cycle, which fails naming it and writes nothing: not even the fair
/// lock's line.
type Case = (
    &'static [&'static [&'static str]],
    &'static [&'static [&'static str]],
    &'static [&'static str],
    &'static str,
);

#[test]
fn a_wait_in_a_fair_lock_line_that_would_close_a_cycle_fails_and_joins_nothing() {
    testkit::require_lua(LOCK_LUA);
    const L: &str = "30000";
    const B: &str = "3000";
    let cases: &[Case] = &[
        // A fair request against a plain waiter.
        (
            &[
                &["FAIRLOCK.ACQUIRE", "F", "a", L],
                &["LOCK.ACQUIRE", "P", "b", L],
            ],
            &[&["LOCK.ACQUIRE", "P", "a", L, "BLOCK", B]],
            &["FAIRLOCK.ACQUIRE", "F", "b", L, "BLOCK", B],
            "b waits for F held by a; a waits for P held by b",
        ),
        // A plain request against a fair waiter.
        (
            &[
                &["FAIRLOCK.ACQUIRE", "F", "a", L],
                &["LOCK.ACQUIRE", "P", "b", L],
            ],
            &[&["FAIRLOCK.ACQUIRE", "F", "b", L, "WAIT", "5000", "BLOCK", B]],
            &["LOCK.ACQUIRE", "P", "a", L, "BLOCK", B],
            "a waits for P held by b; b waits for F held by a",
        ),
        // Two fair locks, the request with REQUEST and NOREENTRY.
        (
            &[
                &["FAIRLOCK.ACQUIRE", "F", "a", L],
                &["FAIRLOCK.ACQUIRE", "G", "b", L],
            ],
            &[&["FAIRLOCK.ACQUIRE", "G", "a", L, "BLOCK", B]],
            &[
                "FAIRLOCK.ACQUIRE",
                "F",
                "b",
                L,
                "NOREENTRY",
                "BLOCK",
                B,
                "REQUEST",
                "id",
                "60000",
            ],
            "b waits for F held by a; a waits for G held by b",
        ),
        // Three owners: fair, read-write and a multi-hold.
        (
            &[
                &["FAIRLOCK.ACQUIRE", "F", "a", L],
                &["RWLOCK.WRITE", "W", "b", L],
                &["LOCK.ACQUIRE", "K", "c", L],
            ],
            &[
                &["RWLOCK.READ", "W", "a", L, "BLOCK", B],
                &[
                    "LOCK.ACQUIREALL",
                    "b",
                    L,
                    "BLOCK",
                    B,
                    "HOLDS",
                    "2",
                    "LOCK",
                    "K",
                    "READ",
                    "R",
                ],
            ],
            &["FAIRLOCK.ACQUIRE", "F", "c", L, "BLOCK", B],
            "c waits for F held by a; a waits for W held by b; b waits for K held by c",
        ),
        // A fair waiter in the middle of a ring of plain locks.
        (
            &[
                &["LOCK.ACQUIRE", "P", "a", L],
                &["FAIRLOCK.ACQUIRE", "F", "b", L],
                &["LOCK.ACQUIRE", "Q", "c", L],
            ],
            &[
                &["FAIRLOCK.ACQUIRE", "F", "a", L, "BLOCK", B],
                &["LOCK.ACQUIRE", "Q", "b", L, "BLOCK", B],
            ],
            &["LOCK.ACQUIRE", "P", "c", L, "BLOCK", B],
            "c waits for P held by a; a waits for F held by b; b waits for Q held by c",
        ),
        // The fair lock held through Redisson's own script.
        (
            &[&["SCRIPT", "F", "s"], &["LOCK.ACQUIRE", "P", "b", L]],
            &[&["LOCK.ACQUIRE", "P", "s", L, "BLOCK", B]],
            &["FAIRLOCK.ACQUIRE", "F", "b", L, "BLOCK", B],
            "b waits for F held by s; s waits for P held by b",
        ),
    ];
    let (server, mut c) = Server::started(&[]);
    let mut parked = Vec::new();
    for (i, &(holds, parks, request, cycle)) in cases.iter().enumerate() {
        for hold in holds {
            let hold = args_of_case(hold, i);
            if hold[0] == "SCRIPT" {
                script_fair_lock(&mut c, &hold[1], &hold[2]);
            } else {
                ok(&mut c, &strs(&hold));
            }
        }
        for park in parks {
            parked.push(server.park(&mut c, &strs(&args_of_case(park, i))));
        }
        let request = args_of_case(request, i);
        expect_deadlock(&mut c, &strs(&request), &cycle_of_case(cycle, i));
        // No acquisition latch either: the request never acquired.
        let latch = format!("redisson_lock_request_latch:{{F{i}}}:id");
        let latches: i64 = query(&mut c, &["EXISTS", &latch]);
        assert_eq!(latches, 0);
    }
    assert_counters(&mut c, &[("deadlocks", cases.len() as u64)]);
    // A fair wait that closes nothing parks: b behind a's waiter in F0.
    let behind = server.park(&mut c, &["FAIRLOCK.ACQUIRE", "F0", "z", L, "BLOCK", B]);
    let line: Vec<String> = query(&mut c, &["LRANGE", "redisson_lock_queue:{F0}", "0", "-1"]);
    assert_eq!(line, ["z"]);
    for call in parked.into_iter().chain([behind]) {
        // Nobody let go: each wait ends at its timeout with a ttl.
        assert!(matches!(reply_of(call), Ok(Value::Int(_))));
    }
    assert_counters(&mut c, &[("deadlocks", cases.len() as u64), ("waiters", 0)]);
}

/// The line of fair lock `lock`.
fn line_of(c: &mut Conn, lock: &str) -> Vec<String> {
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

#[track_caller]
fn assert_deadlock(reply: redis::RedisResult<Value>, cycle: &str) {
    let e = reply.expect_err("a DEADLOCK error");
    assert_eq!(e.code(), Some("DEADLOCK"), "{e}");
    assert_eq!(e.detail(), Some(cycle), "{e}");
}

#[test]
fn a_fair_handoff_that_closes_a_cycle_fails_the_newest_waiter_of_either_kind() {
    let (server, mut c) = Server::started(&[]);
    let block = |lock: &'static str, owner: &'static str, fair: bool| -> Vec<&'static str> {
        let command = if fair {
            "FAIRLOCK.ACQUIRE"
        } else {
            "LOCK.ACQUIRE"
        };
        vec![command, lock, owner, "30000", "BLOCK", "10000"]
    };
    // 1. A fair waiter served F while its owner's other client waits for
    // c's P; c, parked on F last, is the victim and leaves F's line.
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "F", "x", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "P", "c", "30000"]);
    let d_on_f = server.park(&mut c, &block("F", "d", true));
    let d_on_p = server.park(&mut c, &block("P", "d", false));
    let c_on_f = server.park(&mut c, &block("F", "c", true));
    // e waits behind c, in no cycle: it keeps its place and moves up.
    let e_on_f = server.park(&mut c, &block("F", "e", true));
    assert_eq!(line_of(&mut c, "F"), ["d", "c", "e"]);
    assert_counters(&mut c, &[("deadlocks", 0), ("waiters", 4)]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "F", "x"]);
    assert_eq!(reply_of(d_on_f).expect("d took F"), Value::Nil);
    assert_deadlock(
        reply_of(c_on_f),
        "d waits for P held by c; c waits for F held by d",
    );
    assert_eq!(line_of(&mut c, "F"), ["e"], "the victim left the line");
    assert_counters(&mut c, &[("deadlocks", 1), ("waiters", 2)]);
    ok(&mut c, &["LOCK.UNLOCK", "P", "c"]);
    assert_eq!(reply_of(d_on_p).expect("d took P"), Value::Nil);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "F", "d"]);
    assert_eq!(reply_of(e_on_f).expect("e took F"), Value::Nil);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "F", "e"]);
    ok(&mut c, &["LOCK.UNLOCK", "P", "d"]);

    // 2. The same handoff with the plain wait parked last: it is the victim,
    // and c keeps its place in the line.
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "G", "x", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "Q", "c", "30000"]);
    let d_on_g = server.park(&mut c, &block("G", "d", true));
    let c_on_g = server.park(&mut c, &block("G", "c", true));
    let d_on_q = server.park(&mut c, &block("Q", "d", false));
    ok(&mut c, &["FAIRLOCK.UNLOCK", "G", "x"]);
    assert_eq!(reply_of(d_on_g).expect("d took G"), Value::Nil);
    assert_deadlock(
        reply_of(d_on_q),
        "d waits for Q held by c; c waits for G held by d",
    );
    assert_eq!(line_of(&mut c, "G"), ["c"]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "G", "d"]);
    assert_eq!(reply_of(c_on_g).expect("c took G"), Value::Nil);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "G", "c"]);
    ok(&mut c, &["LOCK.UNLOCK", "Q", "c"]);

    // 3. A plain waiter served closes the cycle; the fair wait, parked
    // last, is the victim and leaves its line.
    ok(&mut c, &["LOCK.ACQUIRE", "R", "x", "30000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "H", "b", "30000"]);
    let a_on_r = server.park(&mut c, &block("R", "a", false));
    let b_on_r = server.park(&mut c, &block("R", "b", false));
    let a_on_h = server.park(&mut c, &block("H", "a", true));
    assert_eq!(line_of(&mut c, "H"), ["a"]);
    ok(&mut c, &["LOCK.UNLOCK", "R", "x"]);
    assert_eq!(reply_of(a_on_r).expect("a took R"), Value::Nil);
    assert_deadlock(
        reply_of(a_on_h),
        "a waits for H held by b; b waits for R held by a",
    );
    assert!(line_of(&mut c, "H").is_empty(), "the victim left the line");
    ok(&mut c, &["LOCK.UNLOCK", "R", "a"]);
    assert_eq!(reply_of(b_on_r).expect("b took R"), Value::Nil);
    assert_counters(&mut c, &[("deadlocks", 3), ("waiters", 0)]);
    let recent = recent(&mut c);
    assert_eq!(recent.len(), 3);
    assert!(
        recent[0].starts_with("DEADLOCK a waits for H"),
        "{recent:?}"
    );
}

//! Regression tests for bugs the fault tests found.

use std::time::{Duration, Instant};

use redis::Value;
use testkit::{call, in_one_turn, ok, query, reply_text, waiters, Call, Server};

/// A server where w:1 holds L's write lock and r:1 waits for a read hold, its
/// deadline `block_ms` away; DEBUG SLEEP can stretch a turn past it.
fn reader_waiting_behind_a_writer(block_ms: &str) -> (Server, testkit::Conn, Call) {
    Server::with_waiter_on(
        &["--enable-debug-command", "yes"],
        &["RWLOCK.WRITE", "L", "w:1", "30000"],
        &["RWLOCK.READ", "L", "r:1", "30000", "BLOCK", block_ms],
    )
}

/// Found by the torture test on Redis 7.0: a waiter handed the lock and
/// timed out in the same event-loop turn got no reply at all (Redis drops
/// both when its blocking timeout fires for a client the module has just
/// unblocked), so the client hung while holding a lock it never heard of.
/// Here the handoff (an unlock inside MULTI) and the waiter's deadline fall
/// in one turn, stretched by DEBUG SLEEP past the deadline. The wait (500
/// ms) outlasts the time from its start to the MULTI on a loaded machine;
/// the turn (600 ms) outlasts the wait, so the deadline falls within it
/// however late the MULTI comes.
#[test]
fn a_waiter_served_in_the_turn_its_timeout_passes_gets_one_reply() {
    let (_server, mut c, waiter) = reader_waiting_behind_a_writer("500");
    let replies = in_one_turn(
        &mut c,
        &[
            &["RWLOCK.UNLOCK", "L", "w:1", "WRITE"],
            &["DEBUG", "SLEEP", "0.6"],
        ],
    );
    assert_eq!(replies[0], Value::Int(1), "the writer released");
    let (reply, waited) = waiter.join().expect("waiter thread");
    let reply = reply.unwrap_or_else(|e| panic!("the waiter got no reply ({e}) after {waited:?}"));
    // The handoff ran first: the waiter holds the lock and is told so.
    assert_eq!(reply, Value::Nil, "after {waited:?}");
    let held: Option<String> = query(&mut c, &["HGET", "L", "r:1"]);
    assert_eq!(held.as_deref(), Some("1"));
    assert_eq!(waiters(&mut c), 0);
}

/// The other order: the deadline passes while the lock is still held, so
/// the waiter gets the PTTL and holds nothing, even though the lock is
/// released in the same turn.
#[test]
fn a_waiter_whose_timeout_passed_first_holds_nothing() {
    let (_server, mut c, waiter) = reader_waiting_behind_a_writer("50");
    // Past the waiter's deadline, then a release in one turn.
    in_one_turn(
        &mut c,
        &[
            &["DEBUG", "SLEEP", "0.2"],
            &["RWLOCK.UNLOCK", "L", "w:1", "WRITE"],
        ],
    );
    let (reply, _) = waiter.join().expect("waiter thread");
    let reply = reply.expect("a reply");
    let held: Option<String> = query(&mut c, &["HGET", "L", "r:1"]);
    match reply {
        // The timer fired before the release ran: refused, and not holding.
        Value::Int(pttl) => {
            assert!(pttl > 0, "PTTL {pttl}");
            assert_eq!(held, None, "a timed-out waiter holds the lock");
        }
        // The release ran before the timer: served, and holding.
        Value::Nil => assert_eq!(held.as_deref(), Some("1")),
        other => panic!("the waiter got {other:?}"),
    }
    assert_eq!(waiters(&mut c), 0);
}

/// Found by the server fuzzer: during CLIENT PAUSE WRITE, Redis holds back
/// expiry, so a lock past its deadline reads as missing but is still in the
/// keyspace; the module's timer handed it to a waiter by writing the key
/// anew, and Redis 7.0 died on an assertion (db.c: 'de != NULL'). The
/// handoff now waits for the pause to end.
#[test]
fn a_lease_ending_while_clients_are_paused_is_handed_over_after_the_pause() {
    let (_server, mut c, waiter) = Server::with_waiter(
        &["RWLOCK.WRITE", "P", "w:1", "30000"],
        &["RWLOCK.WRITE", "P", "w:2", "30000", "BLOCK", "0"],
    );
    // The lease shortened and the pause begun in one turn: the lease ends
    // 50 ms into the 300 ms pause on the server's clock, however late this
    // client runs. The server must live through it.
    in_one_turn(
        &mut c,
        &[
            &["RWLOCK.RENEW", "P", "w:1", "50"],
            &["CLIENT", "PAUSE", "300", "WRITE"],
        ],
    );
    let (reply, waited) = waiter.join().expect("waiter thread");
    assert_eq!(reply.expect("the waiter gets the lock"), Value::Nil);
    assert!(
        waited >= Duration::from_millis(250),
        "served during the pause, after {waited:?}"
    );
    let held: Option<String> = query(&mut c, &["HGET", "P", "w:2:write"]);
    assert_eq!(held.as_deref(), Some("1"));
    let pong = reply_text(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
}

/// Found by the server fuzzer: a command over a reader holding the largest
/// count allowed (100000) opened one timeout key per hold and searched all
/// the open ones for each, so RENEW took 47 s, with the server stuck.
#[test]
fn commands_over_the_largest_hold_count_reply_at_once() {
    const BOUND: Duration = Duration::from_secs(5);
    let server = Server::start(&[]);
    let cases: [(&str, &[&str]); 5] = [
        ("read", &["RWLOCK.RENEW", "H", "u", "60000"]),
        ("read", &["RWLOCK.INFO", "H"]),
        ("read", &["RWLOCK.UNLOCK", "H", "u", "READ"]),
        ("read", &["RWLOCK.UNLOCK", "H", "v", "READ"]),
        ("write", &["RWLOCK.FORCEUNLOCK", "H"]),
    ];
    for (mode, args) in cases {
        let mut c = server.conn();
        ok(&mut c, &["DEL", "H"]);
        let other = if mode == "read" { "v" } else { "u:write" };
        ok(
            &mut c,
            &["HSET", "H", "mode", mode, "u", "100000", other, "1"],
        );
        ok(&mut c, &["PEXPIRE", "H", "600000"]);
        c.set_read_timeout(Some(BOUND)).expect("set_read_timeout");
        let started = Instant::now();
        let reply = call(&mut c, args);
        let took = started.elapsed();
        assert!(
            reply.is_ok(),
            "{args:?} on {mode} with 100000 holds: {reply:?} after {took:?}"
        );
        assert!(took < BOUND, "{args:?} took {took:?}");
    }
}

//! Server-side waiting of the plain lock (docs/design.md §4 and §10.9)
//! against a real server: `LOCK.ACQUIRE … BLOCK` woken by every path that
//! can end a lock, its timeouts, fenced waiters and their tokens, a waiting
//! `NOREENTRY` re-acquire, arrival order and `fairness fifo`, disconnects,
//! MULTI and scripts, demotion to replica, and one queue shared with
//! `RWLOCK.*` waiters of the same name.

use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    assert_counters, assert_took, call, eval_lua_of, expect_reply, fenced_pair, granted_token,
    in_one_turn, ok, query, snapshot, timer_slack, token_counter, waiters, Call, Server, LOCK_LUA,
};

/// A lease no test sees run out unless it means to.
const LONG: &str = "30000";

/// `owner`'s hold count on `lock` (0: none).
fn count(c: &mut Conn, lock: &str, owner: &str) -> i64 {
    let held: Option<i64> = query(c, &["HGET", lock, owner]);
    held.unwrap_or(0)
}

/// The reply of a waiter's thread, which must have had one.
#[track_caller]
fn reply_of(waiter: Call) -> (Value, Duration) {
    let (reply, waited) = waiter.join().expect("the waiter's thread");
    (reply.expect("the waiter's reply"), waited)
}

/// The error a waiter's thread was answered with.
#[track_caller]
fn error_of(waiter: Call) -> redis::RedisError {
    let (reply, _) = waiter.join().expect("the waiter's thread");
    reply.expect_err("an error reply")
}

/// `LOCK.ACQUIRE lock owner 30000 BLOCK 10000` and `extra` (FENCED,
/// NOREENTRY), in a thread, once it is parked behind the waiters before it.
fn park(server: &Server, c: &mut Conn, lock: &str, owner: &str, extra: &[&str]) -> Call {
    let wait = [
        &["LOCK.ACQUIRE", lock, owner, LONG, "BLOCK", "10000"],
        extra,
    ]
    .concat();
    server.park(c, &wait)
}

// ---------------------------------------------------------------------------
// Every way a lock ends wakes its waiter
// ---------------------------------------------------------------------------

/// How the holder's lock on `K` goes away.
enum Release {
    /// A command, as `redis-cli` would send it.
    Command(&'static [&'static str]),
    /// One of Redisson 4.7's scripts, with its KEYS and ARGV.
    Lua(
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
    ),
}

/// h:1 holds `K` fenced (token 1) and w:1 waits for it, fenced; `release`
/// ends h:1's hold. w:1 must then hold `K`, answered with `[-1, token]`,
/// after `rechecks` looks the module took at the lock on outside changes
/// (keyspace events, flushes) and none of its own.
fn served_after(release: Release, rechecks: u64, token: i64) {
    let (_server, mut c, waiter) = Server::with_waiter(
        &["LOCK.ACQUIRE", "K", "h:1", LONG, "FENCED"],
        &["LOCK.ACQUIRE", "K", "w:1", LONG, "BLOCK", "10000", "FENCED"],
    );
    assert_eq!(token_counter(&mut c, "K"), 1, "the holder took token 1");
    match release {
        Release::Command(args) => {
            ok(&mut c, args);
        }
        Release::Lua(script, keys, args) => {
            testkit::require_lua(LOCK_LUA);
            let reply = eval_lua_of(&mut c, LOCK_LUA, script, keys, args).expect("EVAL");
            assert_eq!(reply, Value::Int(1), "{script} released the lock");
        }
    }
    let (reply, waited) = reply_of(waiter);
    assert_eq!(fenced_pair(&reply), (-1, token), "the waiter's reply");
    assert!(
        waited < Duration::from_secs(5),
        "woken late, after {waited:?}"
    );
    assert_eq!(count(&mut c, "K", "w:1"), 1, "the waiter holds K");
    assert_eq!(count(&mut c, "K", "h:1"), 0);
    assert_eq!(
        token_counter(&mut c, "K"),
        token,
        "the token it was told is the counter's"
    );
    assert_counters(
        &mut c,
        &[
            ("waiters", 0),
            ("waits_served", 1),
            ("wait_rechecks", rechecks),
            ("tokens_issued", 2),
        ],
    );
}

/// One test per way of ending the lock: (test, release, rechecks, token).
macro_rules! wake_paths {
    ($($name:ident: $release:expr => $rechecks:literal, $token:literal;)+) => {
        $(#[test] fn $name() { served_after($release, $rechecks, $token) })+
    };
}

// unlock.lua's KEYS: the lock, its channel, the latch; ARGV: the message,
// the lease re-armed on a partial release, the holder, the publish command,
// the latch's TTL. force_unlock.lua's: the lock, its channel; the message
// and the publish command.
wake_paths! {
    lock_unlock_hands_the_lock_to_its_waiter:
        Release::Command(&["LOCK.UNLOCK", "K", "h:1"]) => 0, 2;
    lock_forceunlock_hands_the_lock_to_its_waiter:
        Release::Command(&["LOCK.FORCEUNLOCK", "K"]) => 0, 2;
    a_redisson_lua_unlock_wakes_the_waiter: Release::Lua(
        "unlock",
        &["K", "redisson_lock__channel:{K}", "redisson_unlock_latch:{K}:7e57"],
        &["0", "30000", "h:1", "PUBLISH", "60000"],
    ) => 1, 2;
    a_redisson_lua_force_unlock_wakes_the_waiter: Release::Lua(
        "force_unlock",
        &["K", "redisson_lock__channel:{K}"],
        &["0", "PUBLISH"],
    ) => 1, 2;
    del_wakes_the_waiter: Release::Command(&["DEL", "K"]) => 1, 2;
    unlink_wakes_the_waiter: Release::Command(&["UNLINK", "K"]) => 1, 2;
    // A flush takes the token counter too: the waiter starts it again at 1.
    flushdb_wakes_the_waiter: Release::Command(&["FLUSHDB"]) => 1, 1;
    flushall_wakes_the_waiter: Release::Command(&["FLUSHALL"]) => 1, 1;
    // SWAPDB raises no keyspace event: the swap itself gives every queue a
    // look, and the lock (and its counter) of the other database is gone.
    swapdb_wakes_the_waiter: Release::Command(&["SWAPDB", "0", "1"]) => 1, 1;
}

/// h:1 holds `E` for `lease` ms (or 30 s, renewed to `lease` once w:1 waits
/// when `renewed`); w:1 must be served when that lease runs out, by the
/// module's timer at the deadline: Redis's active expiry is off, and nobody
/// reads the key, so Redis would never delete it within the wait.
fn served_at_the_deadline(lease: u64, renewed: bool) {
    let (server, mut c) = Server::started(&["--enable-debug-command", "yes"]);
    ok(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let first = if renewed {
        LONG.to_string()
    } else {
        lease.to_string()
    };
    let waiter = server.park_behind(
        &mut c,
        &["LOCK.ACQUIRE", "E", "h:1", &first],
        &["LOCK.ACQUIRE", "E", "w:1", LONG, "BLOCK", "10000"],
    );
    if renewed {
        expect_reply(
            &mut c,
            &["LOCK.RENEW", "E", "h:1", &lease.to_string()],
            Value::Int(1),
        );
    }
    // Taken before the PTTL is read: at least that much of the lease is
    // left then, however late this thread runs.
    let set = Instant::now();
    let pttl: i64 = query(&mut c, &["PTTL", "E"]);
    let (reply, _) = reply_of(waiter);
    let waited = set.elapsed();
    assert_eq!(reply, Value::Nil);
    // Not before the deadline (less the PTTL's rounding), and far sooner
    // than the 10 s the wait allowed: the deadline's own timer.
    let deadline = Duration::from_millis(pttl as u64);
    assert_took(
        waited,
        deadline.saturating_sub(Duration::from_millis(20)),
        deadline + timer_slack(),
        "the handoff",
    );
    assert_eq!(count(&mut c, "E", "w:1"), 1, "the waiter holds E");
    // No keyspace event made the module look: its own timer did.
    assert_counters(&mut c, &[("waits_served", 1), ("wait_rechecks", 0)]);
}

#[test]
fn a_waiter_is_served_when_the_lease_runs_out() {
    // Long enough for the waiter to park first on a loaded machine.
    served_at_the_deadline(1000, false);
}

#[test]
fn a_renewal_that_shortens_the_lease_moves_the_handoff() {
    served_at_the_deadline(300, true);
}

// ---------------------------------------------------------------------------
// Timeouts, tokens, NOREENTRY
// ---------------------------------------------------------------------------

#[test]
fn block_timeouts_reply_the_pttl_and_fenced_ones_take_no_token() {
    let (server, mut c) = Server::started(&[]);
    let start = Instant::now();
    let held = ok(&mut c, &["LOCK.ACQUIRE", "T", "h:1", LONG, "FENCED"]);
    assert_eq!(granted_token(&held), 1);
    let plain = server.spawn_call(&["LOCK.ACQUIRE", "T", "w:1", LONG, "BLOCK", "300"]);
    let fenced = server.spawn_call(&["LOCK.ACQUIRE", "T", "w:2", LONG, "BLOCK", "300", "FENCED"]);
    let (reply, waited) = reply_of(plain);
    // The PTTL is read at the deadline: at least 300 ms into the lease, and
    // no later than this test saw the reply (less the PTTL's rounding).
    let since_acquire = start.elapsed().as_millis() as i64;
    let at_timeout = 30_000 - since_acquire - 1..=29_700;
    let Value::Int(pttl) = reply else {
        panic!("a plain waiter's timeout replies the PTTL, got {reply:?}")
    };
    assert!(
        at_timeout.contains(&pttl),
        "PTTL at the timeout: {pttl}, {since_acquire} ms after the lease began"
    );
    // A wait never ends before its time, and ends at it.
    let window = (
        Duration::from_millis(300),
        Duration::from_millis(300) + timer_slack(),
    );
    assert_took(waited, window.0, window.1, "the plain wait");
    let (reply, waited) = reply_of(fenced);
    let since_acquire = start.elapsed().as_millis() as i64;
    let at_timeout = 30_000 - since_acquire - 1..=29_700;
    let (pttl, token) = fenced_pair(&reply);
    assert!(
        at_timeout.contains(&pttl) && token == -1,
        "[pttl, -1] at the timeout: {reply:?}, {since_acquire} ms after the lease began"
    );
    assert_took(waited, window.0, window.1, "the fenced wait");
    assert_eq!(
        token_counter(&mut c, "T"),
        1,
        "a refused wait takes no token"
    );
    assert_counters(
        &mut c,
        &[("waiters", 0), ("waits_timed_out", 2), ("tokens_issued", 1)],
    );
    assert_eq!(count(&mut c, "T", "h:1"), 1);
}

#[test]
fn served_fenced_waiters_get_the_next_tokens_in_turn() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "N", "h:1", LONG, "FENCED"]);
    // A re-entry takes a token too, as fenced_lock.lua does.
    assert_eq!(
        granted_token(&ok(&mut c, &["LOCK.ACQUIRE", "N", "h:1", LONG, "FENCED"])),
        2
    );
    let queue: Vec<(String, Call)> = (1..=3)
        .map(|i| {
            let owner = format!("w:{i}");
            (
                owner.clone(),
                park(&server, &mut c, "N", &owner, &["FENCED"]),
            )
        })
        .collect();
    expect_reply(&mut c, &["LOCK.UNLOCK", "N", "h:1"], Value::Int(0));
    assert_eq!(waiters(&mut c), 3, "h:1 holds it still");
    let mut previous = "h:1".to_string();
    for (expected, (owner, waiter)) in (3..).zip(queue) {
        expect_reply(&mut c, &["LOCK.UNLOCK", "N", &previous], Value::Int(1));
        let (reply, _) = reply_of(waiter);
        assert_eq!(granted_token(&reply), expected, "{owner} served");
        assert_eq!(count(&mut c, "N", &owner), 1);
        previous = owner;
    }
    assert_counters(&mut c, &[("waiters", 0), ("tokens_issued", 5)]);
}

#[test]
fn a_waiting_noreentry_reacquire_fails_without_holding_up_the_queue() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "R", "h:1", LONG]);
    // a:1 waits twice, the second time for a non-reentrant hold, and c:1
    // waits behind both.
    let first = park(&server, &mut c, "R", "a:1", &[]);
    let again = park(&server, &mut c, "R", "a:1", &["NOREENTRY", "FENCED"]);
    let behind = park(&server, &mut c, "R", "c:1", &[]);
    expect_reply(&mut c, &["LOCK.UNLOCK", "R", "h:1"], Value::Int(1));
    assert_eq!(reply_of(first).0, Value::Nil, "a:1's first wait is served");
    let e = error_of(again);
    assert_eq!(e.code(), Some("NON_REENTRANT_REACQUIRE"), "{e}");
    // The error changed nothing: one hold, no token.
    assert_eq!(count(&mut c, "R", "a:1"), 1);
    assert_eq!(token_counter(&mut c, "R"), 0);
    assert_eq!(
        waiters(&mut c),
        1,
        "c:1 still waits, behind a:1's hold only"
    );
    expect_reply(&mut c, &["LOCK.UNLOCK", "R", "a:1"], Value::Int(1));
    assert_eq!(reply_of(behind).0, Value::Nil, "c:1 is served next");
    assert_eq!(count(&mut c, "R", "c:1"), 1);
    assert_counters(&mut c, &[("waiters", 0), ("waits_served", 3)]);
}

// ---------------------------------------------------------------------------
// Order and fairness
// ---------------------------------------------------------------------------

#[test]
fn fifo_lets_only_the_holder_past_plain_waiters() {
    let server = Server::start_with_module_args(&["fairness", "fifo"], &[]);
    let mut c = server.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "P", "h:1", LONG]);
    let w1 = park(&server, &mut c, "P", "w:1", &[]);
    // The holder re-enters past the waiter (it must never deadlock itself),
    // and its non-reentrant re-acquire is an error, not a place in line.
    expect_reply(&mut c, &["LOCK.ACQUIRE", "P", "h:1", LONG], Value::Nil);
    let e = call(&mut c, &["LOCK.ACQUIRE", "P", "h:1", LONG, "NOREENTRY"]).expect_err("an error");
    assert_eq!(e.code(), Some("NON_REENTRANT_REACQUIRE"), "{e}");
    let w2 = park(&server, &mut c, "P", "w:2", &[]);
    expect_reply(&mut c, &["LOCK.UNLOCK", "P", "h:1"], Value::Int(0));
    expect_reply(&mut c, &["LOCK.UNLOCK", "P", "h:1"], Value::Int(1));
    assert_eq!(reply_of(w1).0, Value::Nil);
    expect_reply(&mut c, &["LOCK.UNLOCK", "P", "w:1"], Value::Int(1));
    assert_eq!(reply_of(w2).0, Value::Nil);

    // Readers of the same name: with fifo a new reader queues behind the
    // plain waiter instead of joining the read phase and starving it.
    ok(&mut c, &["RWLOCK.READ", "S", "r:0", LONG]);
    let plain = park(&server, &mut c, "S", "p:1", &[]);
    let refused = ok(&mut c, &["RWLOCK.READ", "S", "r:1", LONG]);
    assert!(
        matches!(refused, Value::Int(p) if p > 0),
        "fifo refuses r:1: {refused:?}"
    );
    // Redisson's unfair behaviour, for contrast: r:1 joins the read phase.
    ok(&mut c, &["CONFIG", "SET", "rwlock.fairness", "none"]);
    expect_reply(&mut c, &["RWLOCK.READ", "S", "r:1", LONG], Value::Nil);
    expect_reply(
        &mut c,
        &["RWLOCK.UNLOCK", "S", "r:0", "READ"],
        Value::Int(0),
    );
    assert_eq!(waiters(&mut c), 1, "r:1 reads still");
    expect_reply(
        &mut c,
        &["RWLOCK.UNLOCK", "S", "r:1", "READ"],
        Value::Int(1),
    );
    assert_eq!(reply_of(plain).0, Value::Nil);
    assert_eq!(count(&mut c, "S", "p:1"), 1);
}

#[test]
fn plain_and_rwlock_waiters_of_one_name_are_served_in_arrival_order() {
    let (server, mut c) = Server::started(&[]);
    let held = ok(&mut c, &["RWLOCK.WRITE", "X", "h:1", LONG, "FENCED"]);
    assert_eq!(granted_token(&held), 1);
    let reader = server.park(&mut c, &["RWLOCK.READ", "X", "r:1", LONG, "BLOCK", "10000"]);
    let plain = park(&server, &mut c, "X", "p:1", &[]);
    let writer = server.park(
        &mut c,
        &["RWLOCK.WRITE", "X", "w:2", LONG, "BLOCK", "10000", "FENCED"],
    );
    let fenced = park(&server, &mut c, "X", "p:2", &["FENCED"]);

    // The read-write machine lets the reader in; the plain one refuses p:1
    // (a hash without its field), and everyone behind it waits.
    expect_reply(
        &mut c,
        &["RWLOCK.UNLOCK", "X", "h:1", "WRITE"],
        Value::Int(1),
    );
    assert_eq!(reply_of(reader).0, Value::Nil);
    assert_eq!(waiters(&mut c), 3);

    // The last reader leaves: p:1 takes the name as a plain lock, and the
    // writer behind it, whose machine cannot read a plain lock's hash, is
    // answered its error (taking no token) rather than blocking p:2.
    expect_reply(
        &mut c,
        &["RWLOCK.UNLOCK", "X", "r:1", "READ"],
        Value::Int(1),
    );
    assert_eq!(reply_of(plain).0, Value::Nil);
    let e = error_of(writer);
    assert!(e.to_string().contains("corrupt lock"), "{e}");
    assert_eq!(waiters(&mut c), 1, "p:2 waits for p:1");
    assert_eq!(token_counter(&mut c, "X"), 1);

    // Both kinds share the name's token counter.
    expect_reply(&mut c, &["LOCK.UNLOCK", "X", "p:1"], Value::Int(1));
    assert_eq!(granted_token(&reply_of(fenced).0), 2);
    assert_eq!(count(&mut c, "X", "p:2"), 1);
    assert_counters(&mut c, &[("waiters", 0), ("waits_served", 4)]);
}

// ---------------------------------------------------------------------------
// Leaving, MULTI, demotion
// ---------------------------------------------------------------------------

#[test]
fn waiters_that_hang_up_leave_nothing_behind() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "D", "h:1", LONG, "FENCED"]);
    let before = snapshot(&mut c);
    for round in 0..20 {
        let owner = format!("w:{round}");
        let fenced = if round % 2 == 0 {
            "FENCED"
        } else {
            "NOREENTRY"
        };
        server.park_and_hang_up(
            &mut c,
            &["LOCK.ACQUIRE", "D", &owner, LONG, "BLOCK", "0", fenced],
        );
    }
    assert_counters(
        &mut c,
        &[
            ("waiters", 0),
            ("locks_with_waiters", 0),
            ("waits_aborted", 20),
        ],
    );
    assert_eq!(
        snapshot(&mut c),
        before,
        "the lock and its token are untouched"
    );
    // Nobody is left to serve: the release frees the lock for good.
    expect_reply(&mut c, &["LOCK.UNLOCK", "D", "h:1"], Value::Int(1));
    expect_reply(&mut c, &["EXISTS", "D"], Value::Int(0));
    assert_counters(&mut c, &[("waits_served", 0), ("tokens_issued", 1)]);
}

#[test]
fn multi_and_scripts_make_one_attempt_of_a_plain_lock() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "M", "h:1", LONG]);
    let start = Instant::now();
    let replies = in_one_turn(
        &mut c,
        &[
            &["LOCK.ACQUIRE", "M", "w:1", LONG, "BLOCK", "0"],
            &["LOCK.ACQUIRE", "M", "w:2", LONG, "BLOCK", "0", "FENCED"],
        ],
    );
    assert!(matches!(replies[0], Value::Int(p) if p > 0), "{replies:?}");
    let (pttl, token) = fenced_pair(&replies[1]);
    assert!(pttl > 0 && token == -1, "{replies:?}");
    let script =
        "return redis.call('lock.acquire', KEYS[1], ARGV[1], '1000', 'BLOCK', '0', 'FENCED')";
    let (pttl, token) = fenced_pair(&ok(&mut c, &["EVAL", script, "1", "M", "w:3"]));
    assert!(pttl > 0 && token == -1, "[{pttl}, {token}]");
    // A `BLOCK 0` that waited would never have replied (the connection's
    // read times out after 10 s): well under that, even on a loaded machine.
    assert!(start.elapsed() < Duration::from_secs(5), "something waited");
    assert_counters(&mut c, &[("waiters", 0), ("waits_started", 0)]);
    assert_eq!(token_counter(&mut c, "M"), 0);
}

#[test]
fn plain_waiters_fail_at_once_when_the_node_becomes_a_replica() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "F", "h:1", LONG]);
    let options: [&[&str]; 3] = [&[], &["FENCED"], &["NOREENTRY"]];
    let parked: Vec<Call> = (1..)
        .zip(options)
        .map(|(i, extra)| park(&node, &mut c, "F", &format!("w:{i}"), extra))
        .collect();
    let seen = node.demote_failing_waiters(&mut c, &master, parked);
    eprintln!("waiters on the demoted master got: {seen:?}");
    assert_counters(&mut c, &[("waiters", 0), ("waits_aborted", 3)]);
}

/// `LOCK.ACQUIRE` (or `extra`'s multi-hold) parked on a connection of its
/// own; its client id and the connection, to read its reply later.
fn park_raw(server: &Server, c: &mut Conn, wait: &[&str]) -> (i64, Conn) {
    let before = waiters(c);
    let mut waiter = server.conn();
    let id: i64 = query(&mut waiter, &["CLIENT", "ID"]);
    waiter
        .send_packed_command(&testkit::cmd_of(wait).get_packed_command())
        .expect("send the waiting command");
    testkit::wait_for_waiters(c, before + 1);
    (id, waiter)
}

#[test]
fn client_unblock_ends_a_wait_as_its_timeout_would() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "D", "h:1", LONG, "FENCED"]);
    let before = snapshot(&mut c);

    // CLIENT UNBLOCK: the refusal a timeout gets, the lock's PTTL.
    let (id, mut waiter) = park_raw(
        &server,
        &mut c,
        &["LOCK.ACQUIRE", "D", "w:1", LONG, "BLOCK", "0", "FENCED"],
    );
    expect_reply(
        &mut c,
        &["CLIENT", "UNBLOCK", &id.to_string()],
        Value::Int(1),
    );
    match waiter.recv_response().expect("the waiter's reply") {
        Value::Array(pair) => {
            assert!(
                matches!(pair[0], Value::Int(p) if p > 0 && p <= 30_000),
                "{pair:?}"
            );
            assert_eq!(pair[1], Value::Int(-1), "no token taken");
        }
        other => panic!("a fenced refusal, not {other:?}"),
    }
    // The connection goes on as any other.
    expect_reply(&mut waiter, &["PING"], Value::SimpleString("PONG".into()));

    // CLIENT UNBLOCK ERROR, of a multi-hold parked on two locks.
    let (id, mut waiter) = park_raw(
        &server,
        &mut c,
        &[
            "LOCK.ACQUIREALL",
            "w:2",
            LONG,
            "BLOCK",
            "0",
            "HOLDS",
            "2",
            "LOCK",
            "E",
            "LOCK",
            "D",
        ],
    );
    expect_reply(
        &mut c,
        &["CLIENT", "UNBLOCK", &id.to_string(), "ERROR"],
        Value::Int(1),
    );
    let error = waiter.recv_response().expect("the waiter's reply");
    assert!(
        matches!(&error, Value::ServerError(_)) && format!("{error:?}").contains("UNBLOCKED"),
        "{error:?}"
    );

    assert_counters(
        &mut c,
        &[
            ("waiters", 0),
            ("locks_with_waiters", 0),
            ("waits_aborted", 2),
        ],
    );
    let blocked: String = query(&mut c, &["INFO", "clients"]);
    assert!(blocked.contains("blocked_clients:0"), "{blocked}");
    assert_eq!(snapshot(&mut c), before, "nothing was taken");
    // Nobody is left to serve: the release frees the lock for good.
    expect_reply(&mut c, &["LOCK.UNLOCK", "D", "h:1"], Value::Int(1));
    expect_reply(&mut c, &["EXISTS", "D", "E"], Value::Int(0));
}

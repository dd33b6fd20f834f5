//! Idempotent acquisitions (docs/design.md §14.7) against a real server:
//! `REQUEST id ttl` on `RWLOCK.READ`, `RWLOCK.WRITE`, `LOCK.ACQUIRE` and
//! `FAIRLOCK.ACQUIRE` with their other options; a retry replies what the first call did and
//! changes nothing, a refused call records nothing, a `BLOCK` acquisition
//! records its latch when it is served, the latch reaches a replica with
//! the same deadline, and bad input changes nothing.

use std::time::Duration;

use redis::Value;
use testkit::Conn;
use testkit::{
    call, enable_keyspace_events, events_str, fenced_pair, granted_token, ok, query, snapshot,
    token_counter, wait_for_waiters, wait_replica, Call, Collector, Server,
};

/// A lease no test sees run out.
const LONG: &str = "30000";
/// A latch ttl no test sees run out.
const TTL: &str = "60000";

/// The acquisition latch of request `id` on `lock` (a name without braces).
fn latch(lock: &str, id: &str) -> String {
    format!("redisson_lock_request_latch:{{{lock}}}:{id}")
}

/// Server time in ms.
fn now_ms(c: &mut Conn) -> i64 {
    let (s, us): (i64, i64) = query(c, &["TIME"]);
    s * 1000 + us / 1000
}

fn pexpiretime(c: &mut Conn, key: &str) -> i64 {
    query(c, &["PEXPIRETIME", key])
}

/// The reply of a parked waiter's thread, which must have had one.
#[track_caller]
fn reply_of(waiter: Call) -> Value {
    let (reply, _) = waiter.join().expect("the waiter's thread");
    reply.expect("the waiter's reply")
}

/// `command lock owner LONG` with `options` and `REQUEST id TTL` placed
/// first or last among them.
fn with_request<'a>(
    head: [&'a str; 3],
    options: &[&'a str],
    id: &'a str,
    request_first: bool,
) -> Vec<&'a str> {
    let mut args = vec![head[0], head[1], head[2], LONG];
    let request = ["REQUEST", id, TTL];
    if request_first {
        args.extend(request);
        args.extend(options);
    } else {
        args.extend(options);
        args.extend(request);
    }
    args
}

#[test]
fn every_command_and_option_replays_its_grant_and_changes_nothing() {
    let (_server, mut c) = Server::started(&[]);
    let cases: &[(&str, &[&str])] = &[
        ("RWLOCK.READ", &[]),
        ("RWLOCK.READ", &["SESSION"]),
        ("RWLOCK.READ", &["BLOCK", "1000"]),
        ("RWLOCK.WRITE", &[]),
        ("RWLOCK.WRITE", &["FENCED"]),
        ("RWLOCK.WRITE", &["SESSION", "FENCED", "BLOCK", "0"]),
        ("LOCK.ACQUIRE", &[]),
        ("LOCK.ACQUIRE", &["FENCED"]),
        ("LOCK.ACQUIRE", &["NOREENTRY"]),
        ("LOCK.ACQUIRE", &["FENCED", "NOREENTRY", "SESSION"]),
        ("FAIRLOCK.ACQUIRE", &[]),
        ("FAIRLOCK.ACQUIRE", &["WAIT", "5000"]),
        ("FAIRLOCK.ACQUIRE", &["NOQUEUE"]),
        ("FAIRLOCK.ACQUIRE", &["NOREENTRY"]),
        (
            "FAIRLOCK.ACQUIRE",
            &["NOREENTRY", "WAIT", "0", "BLOCK", "1000"],
        ),
    ];
    for (i, &(command, options)) in cases.iter().enumerate() {
        let lock = format!("idem:{i}");
        let fenced = options.contains(&"FENCED");
        let what = format!("{command} {options:?}");
        // A hold taken before, so a fenced grant's token is not 1 and a
        // plain re-entry shows in the count (NOREENTRY: another lock).
        if !options.contains(&"NOREENTRY") {
            let mut before = vec![command, lock.as_str(), "u:1", LONG];
            before.extend(options.iter().filter(|o| **o == "FENCED"));
            ok(&mut c, &before);
        }
        let first_args = with_request([command, &lock, "u:1"], options, "r-1", i % 2 == 0);
        let t0 = now_ms(&mut c);
        let first = ok(&mut c, &first_args);
        let t1 = now_ms(&mut c);
        let key = latch(&lock, "r-1");
        let stored: i64 = query(&mut c, &["GET", key.as_str()]);
        if fenced {
            let token = granted_token(&first);
            assert_eq!(stored, token, "{what}");
            assert_eq!(token_counter(&mut c, &lock), token, "{what}");
        } else {
            assert_eq!(first, Value::Nil, "{what}");
            assert_eq!(stored, 0, "{what}");
        }
        let at = pexpiretime(&mut c, &key);
        assert!(
            (t0 + 60_000..=t1 + 60_000).contains(&at),
            "{what}: latch deadline {at} not within [{t0}, {t1}] + ttl"
        );
        let before = snapshot(&mut c);
        // The retry, its REQUEST elsewhere among the options.
        let retry_args = with_request([command, &lock, "u:1"], options, "r-1", i % 2 == 1);
        assert_eq!(ok(&mut c, &retry_args), first, "{what}: the replay");
        assert_eq!(snapshot(&mut c), before, "{what}: the replay changed data");
        // A new request id is a new acquisition.
        let other = with_request([command, &lock, "u:1"], options, "r-2", false);
        match call(&mut c, &other) {
            Ok(reply) if fenced => assert!(granted_token(&reply) > stored, "{what}"),
            Ok(reply) => assert_eq!(reply, Value::Nil, "{what}"),
            Err(e) => {
                assert!(options.contains(&"NOREENTRY"), "{what}: {e}");
                assert!(e.to_string().contains("NON_REENTRANT_REACQUIRE"), "{e}");
            }
        }
    }
}

#[test]
fn a_replay_keeps_counts_ttl_and_token() {
    let (_server, mut c) = Server::started(&[]);
    let args = [
        "LOCK.ACQUIRE",
        "P",
        "u:1",
        LONG,
        "FENCED",
        "REQUEST",
        "q",
        TTL,
    ];
    let first = ok(&mut c, &args);
    let token = granted_token(&first);
    std::thread::sleep(Duration::from_millis(50));
    let pttl_before: i64 = query(&mut c, &["PTTL", "P"]);
    for _ in 0..3 {
        assert_eq!(ok(&mut c, &args), first);
    }
    let count: i64 = query(&mut c, &["HGET", "P", "u:1"]);
    assert_eq!(count, 1, "the replays took no hold");
    assert_eq!(
        token_counter(&mut c, "P"),
        token,
        "the replays took no token"
    );
    let pttl_after: i64 = query(&mut c, &["PTTL", "P"]);
    assert!(pttl_after <= pttl_before, "the replays re-armed the lease");
    // One release frees the lock: the retries did not count.
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "P", "u:1"]), Value::Int(1));
    let exists: i64 = query(&mut c, &["EXISTS", "P"]);
    assert_eq!(exists, 0);
    // The read-write lock the same way: READ then WRITE by its holder.
    for args in [
        ["RWLOCK.READ", "R", "u:1", LONG, "REQUEST", "a", TTL],
        ["RWLOCK.WRITE", "W", "u:1", LONG, "REQUEST", "b", TTL],
    ] {
        ok(&mut c, &args);
        ok(&mut c, &args);
        let mode = if args[0] == "RWLOCK.READ" {
            "READ"
        } else {
            "WRITE"
        };
        assert_eq!(
            ok(&mut c, &["RWLOCK.UNLOCK", args[1], "u:1", mode]),
            Value::Int(1),
            "{args:?}: one unlock releases it"
        );
    }
}

#[test]
fn a_refused_call_records_nothing_and_a_later_retry_acquires() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "Q", "b:1", LONG]);
    ok(&mut c, &["RWLOCK.READ", "RW", "b:1", LONG]);
    let plain = ["LOCK.ACQUIRE", "Q", "a:1", LONG, "REQUEST", "r", TTL];
    let fenced = [
        "RWLOCK.WRITE",
        "RW",
        "a:1",
        LONG,
        "FENCED",
        "REQUEST",
        "w",
        TTL,
    ];
    let before = snapshot(&mut c);
    assert!(matches!(ok(&mut c, &plain), Value::Int(p) if p > 0));
    let (pttl, token) = fenced_pair(&ok(&mut c, &fenced));
    assert!(pttl > 0 && token == -1, "{pttl} {token}");
    assert_eq!(snapshot(&mut c), before, "a refused call wrote something");
    ok(&mut c, &["LOCK.UNLOCK", "Q", "b:1"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "RW", "b:1", "READ"]);
    assert_eq!(ok(&mut c, &plain), Value::Nil);
    assert_eq!(ok(&mut c, &plain), Value::Nil);
    let count: i64 = query(&mut c, &["HGET", "Q", "a:1"]);
    assert_eq!(count, 1);
    let first = ok(&mut c, &fenced);
    assert_eq!(ok(&mut c, &fenced), first);
    assert_eq!(token_counter(&mut c, "RW"), granted_token(&first));
}

#[test]
fn a_blocked_acquisition_records_its_latch_when_served() {
    let (server, mut c) = Server::started(&[]);
    enable_keyspace_events(&mut c);
    ok(&mut c, &["LOCK.ACQUIRE", "B", "b:1", LONG]);
    let wait = [
        "LOCK.ACQUIRE",
        "B",
        "a:1",
        LONG,
        "BLOCK",
        "10000",
        "FENCED",
        "REQUEST",
        "blk",
        "5000",
    ];
    let waiter = server.spawn_call(&wait);
    wait_for_waiters(&mut c, 1);
    let key = latch("B", "blk");
    let exists: i64 = query(&mut c, &["EXISTS", key.as_str()]);
    assert_eq!(exists, 0, "a parked call recorded its latch");
    std::thread::sleep(Duration::from_millis(300));
    let events = Collector::start(&server, &["__keyevent@0__:*"]);
    events.sync(&mut c);
    let served_at = now_ms(&mut c);
    ok(&mut c, &["LOCK.UNLOCK", "B", "b:1"]);
    let token = granted_token(&reply_of(waiter));
    let stored: i64 = query(&mut c, &["GET", key.as_str()]);
    assert_eq!(stored, token);
    let at = pexpiretime(&mut c, &key);
    assert!(
        at >= served_at + 5_000,
        "the deadline {at} counts from the park, not from the grant at {served_at}"
    );
    let on_latch: Vec<String> = events_str(&events.sync(&mut c))
        .into_iter()
        .filter(|(_, k)| *k == key)
        .map(|(e, _)| e)
        .collect();
    assert_eq!(
        on_latch,
        ["__keyevent@0__:set", "__keyevent@0__:expire"],
        "the latch's keyspace events"
    );
    // The retry of the served call replies at once, the same.
    let replay = ok(&mut c, &wait);
    assert_eq!(granted_token(&replay), token);
    let count: i64 = query(&mut c, &["HGET", "B", "a:1"]);
    assert_eq!(count, 1);
    // A wait that times out records nothing.
    let timed_out = [
        "LOCK.ACQUIRE",
        "B",
        "c:1",
        LONG,
        "BLOCK",
        "100",
        "REQUEST",
        "late",
        TTL,
    ];
    assert!(matches!(ok(&mut c, &timed_out), Value::Int(p) if p > 0));
    let exists: i64 = query(&mut c, &["EXISTS", latch("B", "late").as_str()]);
    assert_eq!(exists, 0, "a timed-out wait recorded its latch");
}

/// The fair lock's line, its deadlines and the latch of request `id`.
fn fair_keys(lock: &str, id: &str) -> [String; 3] {
    [
        format!("redisson_lock_queue:{{{lock}}}"),
        format!("redisson_lock_timeout:{{{lock}}}"),
        latch(lock, id),
    ]
}

fn exists(c: &mut Conn, key: &str) -> bool {
    let n: i64 = query(c, &["EXISTS", key]);
    n == 1
}

#[test]
fn the_fair_lock_records_grants_only_and_a_parked_waiter_when_served() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "F", "h:1", LONG]);
    let [line, _, _] = fair_keys("F", "x");
    // NOQUEUE refused (1) and a queued call (its ttl) record nothing; the
    // queued call's retry is a retry of fair_lock.lua, not a replay.
    let no_queue = [
        "FAIRLOCK.ACQUIRE",
        "F",
        "a:1",
        LONG,
        "NOQUEUE",
        "REQUEST",
        "n",
        TTL,
    ];
    let before = snapshot(&mut c);
    assert_eq!(ok(&mut c, &no_queue), Value::Int(1));
    assert_eq!(snapshot(&mut c), before, "a refused call wrote something");
    let queued = ["FAIRLOCK.ACQUIRE", "F", "a:1", LONG, "REQUEST", "q", TTL];
    for _ in 0..2 {
        assert!(matches!(ok(&mut c, &queued), Value::Int(t) if t > 0));
        assert!(!exists(&mut c, &latch("F", "q")), "a queued call recorded");
    }
    let waiting: Vec<String> = query(&mut c, &["LRANGE", line.as_str(), "0", "-1"]);
    assert_eq!(waiting, ["a:1"]);
    ok(&mut c, &["FAIRLOCK.CANCEL", "F", "a:1"]);
    // A BLOCK waiter records its latch when served, its ttl from then.
    let wait = [
        "FAIRLOCK.ACQUIRE",
        "F",
        "b:1",
        LONG,
        "WAIT",
        "5000",
        "BLOCK",
        "10000",
        "REQUEST",
        "blk",
        "5000",
    ];
    let waiter = server.spawn_call(&wait);
    wait_for_waiters(&mut c, 1);
    let key = latch("F", "blk");
    assert!(!exists(&mut c, &key), "a parked call recorded its latch");
    std::thread::sleep(Duration::from_millis(300));
    let served_at = now_ms(&mut c);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "F", "h:1"]), Value::Int(1));
    assert_eq!(reply_of(waiter), Value::Nil);
    let stored: i64 = query(&mut c, &["GET", key.as_str()]);
    assert_eq!(stored, 0, "the fair lock has no token");
    let at = pexpiretime(&mut c, &key);
    assert!(
        at >= served_at + 5_000,
        "the deadline {at} counts from the grant, after {served_at}"
    );
    // Its retry replies nil at once and changes nothing.
    let before = snapshot(&mut c);
    assert_eq!(ok(&mut c, &wait), Value::Nil);
    assert_eq!(snapshot(&mut c), before, "the replay changed data");
    let count: i64 = query(&mut c, &["HGET", "F", "b:1"]);
    assert_eq!(count, 1);
    // A wait that times out records nothing and leaves the line.
    let timed_out = [
        "FAIRLOCK.ACQUIRE",
        "F",
        "c:1",
        LONG,
        "BLOCK",
        "100",
        "REQUEST",
        "late",
        TTL,
    ];
    assert!(matches!(ok(&mut c, &timed_out), Value::Int(t) if t > 0));
    assert!(!exists(&mut c, &latch("F", "late")));
    assert!(!exists(&mut c, &line), "the timed-out waiter left the line");
    // The same id on another kind of hold replays: the latch names the lock
    // and the request only.
    assert_eq!(
        ok(
            &mut c,
            &["LOCK.ACQUIRE", "F", "z:1", LONG, "REQUEST", "blk", TTL]
        ),
        Value::Nil
    );
    let holders: Vec<String> = query(&mut c, &["HKEYS", "F"]);
    assert_eq!(holders, ["b:1"]);
}

#[test]
fn a_replica_has_the_latch_with_the_same_deadline() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    let args = [
        "RWLOCK.WRITE",
        "{t}:x",
        "u:1",
        LONG,
        "FENCED",
        "REQUEST",
        "rep",
        TTL,
    ];
    let first = ok(&mut m, &args);
    wait_replica(&mut m);
    // A name with braces is used as is, as the unlock latch does.
    let key = "redisson_lock_request_latch:{t}:x:rep";
    let on_master: i64 = query(&mut m, &["GET", key]);
    let on_replica: i64 = query(&mut r, &["GET", key]);
    assert_eq!(on_master, granted_token(&first));
    assert_eq!(on_replica, on_master);
    assert_eq!(pexpiretime(&mut r, key), pexpiretime(&mut m, key));
    // After a failover the promoted replica replays the acknowledged grant.
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(ok(&mut r, &args), first);
    let count: i64 = query(&mut r, &["HGET", "{t}:x", "u:1:write"]);
    assert_eq!(count, 1);
}

#[test]
fn bad_request_options_are_errors_that_change_nothing() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "X", "b:1", LONG]);
    let before = snapshot(&mut c);
    let bad: &[(&[&str], &str)] = &[
        (
            &["LOCK.ACQUIRE", "X", "a:1", LONG, "REQUEST", "id"],
            "syntax",
        ),
        (&["RWLOCK.READ", "R", "a:1", LONG, "REQUEST"], "syntax"),
        (
            &["RWLOCK.WRITE", "R", "a:1", LONG, "REQUEST", "id", "0"],
            "ttl",
        ),
        (
            &["RWLOCK.WRITE", "R", "a:1", LONG, "REQUEST", "id", "-5"],
            "ttl",
        ),
        (
            &[
                "LOCK.ACQUIRE",
                "N",
                "a:1",
                LONG,
                "REQUEST",
                "id",
                "315360000001",
            ],
            "ttl",
        ),
        (
            &["LOCK.ACQUIRE", "N", "a:1", LONG, "REQUEST", "id", "x"],
            "ttl",
        ),
        (
            &["LOCK.ACQUIRE", "N", "a:1", LONG, "REQUEST", "", "100"],
            "request id",
        ),
        (
            &[
                "LOCK.ACQUIRE",
                "N",
                "a:1",
                LONG,
                "REQUEST",
                "i",
                "100",
                "REQUEST",
                "j",
                "100",
            ],
            "syntax",
        ),
        (
            &[
                "RWLOCK.READ",
                "R",
                "a:1",
                LONG,
                "FENCED",
                "REQUEST",
                "i",
                "100",
            ],
            "syntax",
        ),
        (
            &["FAIRLOCK.ACQUIRE", "X", "a:1", LONG, "REQUEST", "id", "0"],
            "ttl",
        ),
        (
            &["FAIRLOCK.ACQUIRE", "X", "a:1", LONG, "REQUEST", "", "5"],
            "request id",
        ),
        (
            &[
                "FAIRLOCK.ACQUIRE",
                "X",
                "a:1",
                LONG,
                "REQUEST",
                "i",
                "100",
                "WAIT",
                "5",
                "REQUEST",
                "j",
                "100",
            ],
            "syntax",
        ),
    ];
    for &(args, what) in bad {
        let err = call(&mut c, args).expect_err("an error reply");
        assert!(
            err.to_string().to_lowercase().contains(what),
            "{args:?}: {err} lacks {what:?}"
        );
        assert_eq!(snapshot(&mut c), before, "{args:?} changed data");
    }
    // A latch of another type, or not an integer, is an error too.
    ok(&mut c, &["HSET", latch("N", "h").as_str(), "f", "1"]);
    ok(&mut c, &["SET", latch("N", "s").as_str(), "x"]);
    let before = snapshot(&mut c);
    for command in ["LOCK.ACQUIRE", "FAIRLOCK.ACQUIRE"] {
        for (id, what) in [("h", "WRONGTYPE"), ("s", "latch")] {
            let err = call(&mut c, &[command, "N", "a:1", LONG, "REQUEST", id, "100"])
                .expect_err("an error reply");
            assert!(err.to_string().contains(what), "{command} {id}: {err}");
            assert_eq!(snapshot(&mut c), before, "{command} {id} changed data");
        }
    }
}

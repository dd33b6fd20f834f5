//! `HELD n` (docs/design.md §14.8) against a real server: an acquisition
//! whose owner already holds n + 1 of its kind replies as granted and
//! changes nothing (no count, TTL, token, event, session binding), a
//! release whose owner holds n - 1 (n >= 2) replies 0 and changes nothing,
//! a last release is never answered from the count, a count that matches
//! neither runs the call as without `HELD`, the replay sends the replicas a
//! write (so a `WAIT` behind it covers the first send), and bad counts are
//! errors that change nothing.

use redis::Value;
use testkit::{
    call, granted_token, info_field, ok, query, snapshot, token_counter, wait_replica, Collector,
    Conn, Server,
};

/// A lease no test sees run out.
const LONG: &str = "30000";

/// The hash field an acquisition command counts the owner's holds in.
fn field(command: &str, owner: &str) -> String {
    if command == "RWLOCK.WRITE" {
        format!("{owner}:write")
    } else {
        owner.to_string()
    }
}

fn count(c: &mut Conn, lock: &str, field: &str) -> i64 {
    let value: Option<i64> = query(c, &["HGET", lock, field]);
    value.unwrap_or(0)
}

/// `command lock owner LONG` with `options` and `HELD n`.
fn held_args<'a>(command: &'a str, lock: &'a str, options: &[&'a str], n: &'a str) -> Vec<&'a str> {
    let mut args = vec![command, lock, "u:1", LONG];
    args.extend(options);
    args.extend(["HELD", n]);
    args
}

#[test]
fn an_acquisition_its_count_shows_granted_replies_so_and_changes_nothing() {
    let (server, mut c) = Server::started(&[]);
    let cases: &[(&str, &[&str])] = &[
        ("RWLOCK.READ", &[]),
        ("RWLOCK.READ", &["BLOCK", "1000"]),
        ("RWLOCK.WRITE", &[]),
        ("RWLOCK.WRITE", &["FENCED"]),
        ("RWLOCK.WRITE", &["FENCED", "BLOCK", "0"]),
        ("LOCK.ACQUIRE", &[]),
        ("LOCK.ACQUIRE", &["FENCED"]),
        ("LOCK.ACQUIRE", &["NOREENTRY"]),
        ("LOCK.ACQUIRE", &["FENCED", "BLOCK", "0"]),
        ("FAIRLOCK.ACQUIRE", &[]),
        ("FAIRLOCK.ACQUIRE", &["NOQUEUE"]),
        (
            "FAIRLOCK.ACQUIRE",
            &["NOREENTRY", "WAIT", "0", "BLOCK", "1000"],
        ),
    ];
    for (i, &(command, options)) in cases.iter().enumerate() {
        let lock = format!("held:{i}");
        let what = format!("{command} {options:?}");
        let f = field(command, "u:1");
        let fenced = options.contains(&"FENCED");
        let first = ok(&mut c, &held_args(command, &lock, options, "0"));
        assert_eq!(count(&mut c, &lock, &f), 1, "{what}: the first send");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let before = snapshot(&mut c);
        let events = Collector::start(&server, &["__keyevent@0__:*", "__keyspace@0__:*"]);
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        events.sync(&mut c);
        // The resend: the owner holds 1 = 0 + 1.
        let replay = ok(&mut c, &held_args(command, &lock, options, "0"));
        assert_eq!(replay, first, "{what}: the replay's reply");
        if fenced {
            assert_eq!(
                granted_token(&replay),
                token_counter(&mut c, &lock),
                "{what}"
            );
        }
        assert_eq!(snapshot(&mut c), before, "{what}: the replay changed data");
        assert!(
            events.sync(&mut c).is_empty(),
            "{what}: the replay raised events"
        );
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", ""]);
        // The next acquisition states 1 and takes a second hold, or for a
        // non-reentrant lock is the error it always was.
        match call(&mut c, &held_args(command, &lock, options, "1")) {
            Ok(reply) => {
                assert!(!options.contains(&"NOREENTRY"), "{what}");
                if fenced {
                    assert_eq!(granted_token(&reply), granted_token(&first) + 1, "{what}");
                } else {
                    assert_eq!(reply, Value::Nil, "{what}");
                }
                assert_eq!(count(&mut c, &lock, &f), 2, "{what}: the re-entry");
            }
            Err(e) => {
                assert!(options.contains(&"NOREENTRY"), "{what}: {e}");
                assert!(e.to_string().contains("NON_REENTRANT_REACQUIRE"), "{e}");
            }
        }
    }
}

#[test]
fn a_release_its_count_shows_done_replies_0_and_a_last_release_never_replays() {
    let (_server, mut c) = Server::started(&[]);
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("LOCK.ACQUIRE", &["LOCK.UNLOCK"], &[]),
        ("RWLOCK.READ", &["RWLOCK.UNLOCK"], &["READ"]),
        ("RWLOCK.WRITE", &["RWLOCK.UNLOCK"], &["WRITE"]),
        ("FAIRLOCK.ACQUIRE", &["FAIRLOCK.UNLOCK"], &[]),
    ];
    for &(acquire, unlock, mode) in cases {
        let lock = format!("rel:{acquire}");
        let f = field(acquire, "u:1");
        for n in ["0", "1"] {
            ok(&mut c, &held_args(acquire, &lock, &[], n));
        }
        assert_eq!(count(&mut c, &lock, &f), 2, "{acquire}");
        let release = |n: &'static str| {
            let mut args = vec![unlock[0], lock.as_str(), "u:1"];
            args.extend(mode);
            args.extend(["HELD", n]);
            args
        };
        assert_eq!(ok(&mut c, &release("2")), Value::Int(0), "{acquire}");
        assert_eq!(count(&mut c, &lock, &f), 1, "{acquire}");
        let pttl: i64 = query(&mut c, &["PTTL", lock.as_str()]);
        let before = snapshot(&mut c);
        // The resend of the release that stated 2: the owner holds 1.
        assert_eq!(
            ok(&mut c, &release("2")),
            Value::Int(0),
            "{acquire}: replay"
        );
        assert_eq!(
            snapshot(&mut c),
            before,
            "{acquire}: the replay changed data"
        );
        assert!(pttl > 0, "{acquire}");
        // The last release; its resend finds nothing and says not held:
        // the lock gone could have been gone before the first send.
        assert_eq!(ok(&mut c, &release("1")), Value::Int(1), "{acquire}");
        let exists: i64 = query(&mut c, &["EXISTS", lock.as_str()]);
        assert_eq!(exists, 0, "{acquire}");
        assert_eq!(
            ok(&mut c, &release("1")),
            Value::Nil,
            "{acquire}: resent last"
        );
    }
}

#[test]
fn a_count_that_matches_neither_runs_the_call_as_without_held() {
    let (_server, mut c) = Server::started(&[]);
    // More stated than held: acquires (a hold lost while its owner counted).
    ok(&mut c, &["LOCK.ACQUIRE", "m", "u:1", LONG, "HELD", "5"]);
    assert_eq!(count(&mut c, "m", "u:1"), 1);
    // Held by another: refused with the PTTL, as always.
    let refused = ok(&mut c, &["LOCK.ACQUIRE", "m", "u:2", LONG, "HELD", "0"]);
    assert!(matches!(refused, Value::Int(p) if p > 0), "{refused:?}");
    // Another owner's count is not this one's: u:2 stating 0 while u:1
    // holds 1 is refused, not replayed.
    assert_eq!(count(&mut c, "m", "u:2"), 0);
    // A release stating 5 where 1 is held releases it.
    assert_eq!(
        ok(&mut c, &["LOCK.UNLOCK", "m", "u:1", "HELD", "5"]),
        Value::Int(1)
    );
    // A release stating 4 where 2 are held (neither 4 nor 3) releases one.
    for n in ["0", "1"] {
        ok(&mut c, &["LOCK.ACQUIRE", "m", "u:1", LONG, "HELD", n]);
    }
    assert_eq!(
        ok(&mut c, &["LOCK.UNLOCK", "m", "u:1", "HELD", "4"]),
        Value::Int(0)
    );
    assert_eq!(count(&mut c, "m", "u:1"), 1);
    // The read and write counts are apart: a writer stating 0 reads.
    ok(&mut c, &["RWLOCK.WRITE", "rw", "u:1", LONG, "HELD", "0"]);
    ok(&mut c, &["RWLOCK.READ", "rw", "u:1", LONG, "HELD", "0"]);
    assert_eq!(count(&mut c, "rw", "u:1"), 1);
    assert_eq!(count(&mut c, "rw", "u:1:write"), 1);
}

#[test]
fn a_replayed_session_acquisition_binds_nothing_to_its_connection() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "s", "u:1", LONG, "HELD", "0"]);
    {
        let mut other = server.conn();
        let replay = ok(
            &mut other,
            &["LOCK.ACQUIRE", "s", "u:1", LONG, "SESSION", "HELD", "0"],
        );
        assert_eq!(replay, Value::Nil);
    }
    // The replaying connection closed; what it did not take stays.
    testkit::wait_until(
        testkit::scaled(std::time::Duration::from_secs(10)),
        "one client left",
        || {
            let clients: String = query(&mut c, &["CLIENT", "LIST"]);
            (clients.lines().count() == 1).then_some(())
        },
    );
    // A session's give-back runs in the event-loop turn after the close:
    // two round trips later it would have run.
    for _ in 0..2 {
        ok(&mut c, &["PING"]);
    }
    assert_eq!(count(&mut c, "s", "u:1"), 1, "the session gave back a hold");
    let pttl: i64 = query(&mut c, &["PTTL", "s"]);
    assert!(pttl > 0);
}

#[test]
fn a_replay_sends_the_replicas_a_write_that_changes_nothing() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    let args = ["LOCK.ACQUIRE", "{r}:x", "u:1", LONG, "FENCED", "HELD", "0"];
    let first = ok(&mut m, &args);
    wait_replica(&mut m);
    let offset = |m: &mut Conn| -> i64 {
        info_field(m, "replication", "master_repl_offset")
            .and_then(|v| v.parse().ok())
            .expect("master_repl_offset")
    };
    let before = offset(&mut m);
    let mut resend = master.conn();
    assert_eq!(ok(&mut resend, &args), first);
    assert!(offset(&mut m) > before, "the replay propagated nothing");
    // The resend's connection wrote, so its WAIT waits for the replica.
    let acked: i64 = query(&mut resend, &["WAIT", "1", "10000"]);
    assert_eq!(acked, 1);
    let on_replica = count(&mut r, "{r}:x", "u:1");
    assert_eq!(on_replica, 1, "the no-op changed the replica's count");
    assert_eq!(token_counter(&mut r, "{r}:x"), granted_token(&first));
}

#[test]
fn bad_counts_are_errors_that_change_nothing() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "b", "u:1", LONG]);
    let before = snapshot(&mut c);
    let bad: &[(&[&str], &str)] = &[
        (&["LOCK.ACQUIRE", "b", "u:1", LONG, "HELD", "-1"], "from 0"),
        (
            &["LOCK.ACQUIRE", "b", "u:1", LONG, "HELD", "100001"],
            "from 0",
        ),
        (&["RWLOCK.READ", "b", "u:1", LONG, "HELD", "x"], "from 0"),
        (
            &["FAIRLOCK.ACQUIRE", "b", "u:1", LONG, "HELD", ""],
            "from 0",
        ),
        (&["LOCK.UNLOCK", "b", "u:1", "HELD", "0"], "from 1"),
        (
            &["RWLOCK.UNLOCK", "b", "u:1", "READ", "HELD", "1e3"],
            "from 1",
        ),
        (&["FAIRLOCK.UNLOCK", "b", "u:1", "HELD", "100001"], "from 1"),
        (&["LOCK.ACQUIRE", "b", "u:1", LONG, "HELD"], "syntax"),
        (
            &["LOCK.ACQUIRE", "b", "u:1", LONG, "HELD", "0", "HELD", "0"],
            "syntax",
        ),
        (
            &["LOCK.UNLOCK", "b", "u:1", "HELD", "2", "HELD", "2"],
            "syntax",
        ),
        (&["SEMAPHORE.ACQUIRE", "b", "1", "HELD", "0"], "syntax"),
        (
            &[
                "LOCK.ACQUIREALL",
                "u:1",
                LONG,
                "HELD",
                "0",
                "HOLDS",
                "1",
                "LOCK",
                "b",
            ],
            "",
        ),
    ];
    for (args, expected) in bad {
        let err = call(&mut c, args).expect_err(&format!("{args:?} must fail"));
        assert!(err.to_string().contains(expected), "{args:?}: {err}");
        assert_eq!(snapshot(&mut c), before, "{args:?} changed data");
    }
    // Every option at once fits the arity.
    let all = [
        "LOCK.ACQUIRE",
        "a",
        "u:1",
        LONG,
        "BLOCK",
        "0",
        "SESSION",
        "FENCED",
        "NOREENTRY",
        "REQUEST",
        "id",
        "1000",
        "HELD",
        "0",
    ];
    assert!(matches!(ok(&mut c, &all), Value::Array(_)));
    let fair = [
        "FAIRLOCK.ACQUIRE",
        "fa",
        "u:1",
        LONG,
        "WAIT",
        "0",
        "NOREENTRY",
        "BLOCK",
        "0",
        "REQUEST",
        "id",
        "1000",
        "HELD",
        "0",
    ];
    assert_eq!(ok(&mut c, &fair), Value::Nil);
}

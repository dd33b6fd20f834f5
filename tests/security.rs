//! Security: ACL key patterns apply to the module's commands (each declares
//! its lock as key 1); a non-owner can neither unlock nor renew another
//! owner's hold; replies, INFO and the server log carry nothing of other
//! owners beyond what RWLOCK.INFO is documented to show.

use std::collections::BTreeSet;

use redis::Value;
use testkit::Conn;
use testkit::{call, diff, expect_reply, ok, ok_all, reply_text, snapshot, Server, Snapshot};

const SECRET_OWNER: &str = "SECRET-OWNER-7f3a:1";
const SECRET_VALUE: &str = "SECRET-VALUE-91c2";
const SECRET_ID: &str = "SECRET-REQUEST-5d0e";

/// A connection authenticated as `user`.
fn conn_as(server: &Server, user: &str, password: &str) -> Conn {
    let mut c = server.conn();
    let _: () = redis::cmd("AUTH")
        .arg(user)
        .arg(password)
        .query(&mut c)
        .unwrap_or_else(|e| panic!("AUTH {user}: {e}"));
    c
}

/// An ACL refusal, as a command or a script reports it.
fn denied(e: &redis::RedisError) -> bool {
    let text = e.to_string();
    e.code() == Some("NOPERM")
        || text.contains("NOPERM")
        || text.contains("can't access")
        || text.contains("No permissions")
}

fn expect_noperm(c: &mut Conn, args: &[&str]) {
    match call(c, args) {
        Ok(v) => panic!("{args:?} was allowed: {v:?}"),
        Err(e) => assert_eq!(e.code(), Some("NOPERM"), "{args:?}: {e}"),
    }
}

/// Every command on `lock`, each well-formed, blocking ones too, the plain
/// lock's included (its ACL rules are the lock name's, as the read-write
/// lock's).
fn every_command(lock: &str, owner: &str) -> Vec<Vec<String>> {
    let mut calls = testkit::every_command(lock, owner);
    for call in [
        &["RWLOCK.READ", lock, owner, "30000", "BLOCK", "0"][..],
        &["LOCK.ACQUIRE", lock, owner, "30000", "BLOCK", "0", "FENCED"],
        &["LOCK.ACQUIRE", lock, owner, "30000", "NOREENTRY"],
        &["LOCK.UNLOCK", lock, owner, "REQUEST", "r1", "60000"],
        &["LOCK.RENEW", lock, owner, "30000"],
        &["LOCK.FORCEUNLOCK", lock],
        &["LOCK.INFO", lock],
        &["RWLOCK.WRITE", lock, owner, "30000", "FENCED"],
        // The fair lock's: its line's keys are derived from the name, and
        // the name's rules decide.
        &["FAIRLOCK.ACQUIRE", lock, owner, "30000", "WAIT", "1000"],
        &[
            "FAIRLOCK.ACQUIRE",
            lock,
            owner,
            "30000",
            "NOQUEUE",
            "NOREENTRY",
        ],
        &["FAIRLOCK.CANCEL", lock, owner],
        &["FAIRLOCK.UNLOCK", lock, owner, "REQUEST", "r1", "60000"],
        &["FAIRLOCK.FORCEUNLOCK", lock],
        &["FAIRLOCK.INFO", lock],
        // The multi-hold forms: the name alone, and after one of the
        // user's own (every listed name is checked, not the first).
        &[
            "LOCK.ACQUIREALL",
            owner,
            "30000",
            "HOLDS",
            "1",
            "LOCK",
            lock,
        ],
        &[
            "LOCK.ACQUIREALL",
            owner,
            "30000",
            "BLOCK",
            "0",
            "HOLDS",
            "2",
            "LOCK",
            "app:mine",
            "WRITE",
            lock,
        ],
        &[
            "LOCK.UNLOCKALL",
            owner,
            "HOLDS",
            "2",
            "READ",
            "app:mine",
            "LOCK",
            lock,
        ],
        &[
            "LOCK.RENEWALL",
            owner,
            "30000",
            "HOLDS",
            "2",
            "LOCK",
            "app:mine",
            "READ",
            lock,
        ],
    ] {
        calls.push(call.iter().map(|a| a.to_string()).collect());
    }
    calls
}

/// Another application's lock, held by its owner, with a reader's timeout
/// key and an unlock latch.
fn others_data(admin: &mut Conn) -> Snapshot {
    ok(
        admin,
        &["RWLOCK.WRITE", "other:orders", SECRET_OWNER, "600000"],
    );
    ok(
        admin,
        &["RWLOCK.READ", "other:orders", SECRET_OWNER, "600000"],
    );
    ok(
        admin,
        &["RWLOCK.READ", "other:stock", SECRET_OWNER, "600000"],
    );
    ok(admin, &["RWLOCK.READ", "other:stock", "o:2", "600000"]);
    ok(
        admin,
        &[
            "RWLOCK.UNLOCK",
            "other:stock",
            "o:2",
            "READ",
            "REQUEST",
            SECRET_ID,
            "600000",
        ],
    );
    ok(admin, &["SET", "other:plain", SECRET_VALUE]);
    snapshot(admin)
}

#[test]
fn acl_key_patterns_confine_a_user_to_its_own_locks() {
    let server = Server::start(&[]);
    let mut admin = server.conn();
    ok(
        &mut admin,
        &[
            "ACL", "SETUSER", "app", "on", ">app-pw", "~app:*", "&*", "+@all",
        ],
    );
    ok(
        &mut admin,
        &[
            "ACL",
            "SETUSER",
            "app-noforce",
            "on",
            ">pw",
            "~app:*",
            "&*",
            "+@all",
            "-rwlock.forceunlock",
        ],
    );
    let before = others_data(&mut admin);
    let mut app = conn_as(&server, "app", "app-pw");

    // Its own locks work.
    expect_reply(
        &mut app,
        &["RWLOCK.WRITE", "app:orders", "a:1", "30000"],
        Value::Nil,
    );
    expect_reply(
        &mut app,
        &["RWLOCK.READ", "app:orders", "a:1", "30000"],
        Value::Nil,
    );
    ok(&mut app, &["RWLOCK.INFO", "app:orders"]);
    expect_reply(
        &mut app,
        &["RWLOCK.UNLOCK", "app:orders", "a:1", "READ"],
        Value::Int(0),
    );
    expect_reply(
        &mut app,
        &["RWLOCK.UNLOCK", "app:orders", "a:1", "WRITE"],
        Value::Int(1),
    );

    // Every command on any other name is refused before it runs: locks of
    // other applications, and names that only look like its own.
    for lock in [
        "other:orders",
        "other:stock",
        "other:plain",
        "{app:orders}",
        "App:orders",
        "xapp:1",
    ] {
        for args in every_command(lock, "a:1") {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            expect_noperm(&mut app, &args);
        }
    }
    // Not through MULTI, nor a script.
    ok(&mut app, &["MULTI"]);
    expect_noperm(&mut app, &["RWLOCK.FORCEUNLOCK", "other:orders"]);
    match call(&mut app, &["EXEC"]) {
        Err(e) => assert_eq!(e.code(), Some("EXECABORT"), "{e}"),
        Ok(v) => panic!("EXEC ran: {v:?}"),
    }
    let script = "return redis.call('RWLOCK.FORCEUNLOCK', KEYS[1])";
    match call(&mut app, &["EVAL", script, "1", "other:orders"]) {
        Err(e) => assert!(denied(&e), "{e}"),
        Ok(v) => panic!("a script unlocked another application's lock: {v:?}"),
    }
    let script = "return redis.call('RWLOCK.FORCEUNLOCK', 'other:orders')";
    match call(&mut app, &["EVAL", script, "0"]) {
        Err(e) => assert!(denied(&e), "{e}"),
        Ok(v) => panic!("a script unlocked another application's lock: {v:?}"),
    }

    // A command can be taken away from a user like any other.
    let mut noforce = conn_as(&server, "app-noforce", "pw");
    expect_reply(
        &mut noforce,
        &["RWLOCK.WRITE", "app:x", "a:1", "30000"],
        Value::Nil,
    );
    expect_noperm(&mut noforce, &["RWLOCK.FORCEUNLOCK", "app:x"]);

    // Whatever owners and request ids it picks, every key the user's calls
    // create is derived from its own lock's name, and nothing of the other
    // application changed.
    let mut admin = server.conn();
    let keys_before: BTreeSet<String> = testkit::all_keys(&mut admin).into_iter().collect();
    let tricky = [
        "}",
        "{other:orders}",
        "x}:{other:orders}",
        ":rwlock_timeout:1",
        "o\0x",
        "../other",
    ];
    for owner in tricky {
        ok(&mut app, &["RWLOCK.READ", "app:orders", owner, "30000"]);
        ok(&mut app, &["RWLOCK.RENEW", "app:orders", owner, "30000"]);
        for id in tricky {
            ok(
                &mut app,
                &[
                    "RWLOCK.UNLOCK",
                    "app:orders",
                    owner,
                    "READ",
                    "REQUEST",
                    id,
                    "60000",
                ],
            );
        }
    }
    let keys_after: BTreeSet<String> = testkit::all_keys(&mut admin).into_iter().collect();
    let created: Vec<&String> = keys_after.difference(&keys_before).collect();
    assert!(!created.is_empty(), "the calls created no key");
    for k in &created {
        assert!(
            k.starts_with("app:orders")
                || k.starts_with("{app:orders}:")
                || k.starts_with("redisson_unlock_latch:{app:orders}:"),
            "a restricted user's call created {k:?}"
        );
    }
    let mut after = snapshot(&mut admin);
    after.retain(|k, _| !created.iter().any(|c| c.as_bytes() == k.0.as_slice()));
    after.retain(|k, _| !k.0.starts_with(b"app:"));
    let mut expected = before.clone();
    expected.retain(|k, _| !k.0.starts_with(b"app:"));
    let d = diff(&expected, &after, "before", "after");
    assert!(d.is_empty(), "the other application's data changed:\n{d}");
}

#[test]
fn a_non_owner_can_neither_unlock_nor_renew_a_hold() {
    let server = Server::start(&[]);
    let mut owner = server.conn();
    let mut other = server.conn();
    ok_all(
        &mut owner,
        "RWLOCK.WRITE W a:1 600000; RWLOCK.READ W a:1 600000; \
         RWLOCK.READ R a:1 600000; RWLOCK.READ R a:2 600000",
    );
    let before = snapshot(&mut owner);
    for lock in ["W", "R"] {
        // Other owners, some of them close to the holder's name.
        for who in ["b:1", "a", "a:", "a:10", "A:1", "a:1 ", "a:1:read"] {
            let replies = [
                call(&mut other, &["RWLOCK.UNLOCK", lock, who, "WRITE"]),
                call(&mut other, &["RWLOCK.UNLOCK", lock, who, "READ"]),
                call(
                    &mut other,
                    &["RWLOCK.UNLOCK", lock, who, "WRITE", "LEASE", "1"],
                ),
                call(
                    &mut other,
                    &["RWLOCK.UNLOCK", lock, who, "READ", "REQUEST", "q", "60000"],
                ),
                call(
                    &mut other,
                    &["RWLOCK.UNLOCK", lock, who, "WRITE", "REQUEST", "q", "60000"],
                ),
            ];
            for r in replies {
                assert_eq!(r.expect("a reply"), Value::Nil, "{who} unlocked {lock}");
            }
            let renewed = call(&mut other, &["RWLOCK.RENEW", lock, who, "1"]).expect("RENEW");
            assert_eq!(renewed, Value::Int(0), "{who} renewed {lock}");
            // Taking the lock (re-entry) is not possible either.
            let write = call(&mut other, &["RWLOCK.WRITE", lock, who, "1"]).expect("WRITE");
            assert!(
                matches!(write, Value::Int(p) if p > 0),
                "{who} got {lock}: {write:?}"
            );
        }
        // Nor by naming the holder's fields.
        for field in ["a:1:write", "mode"] {
            for args in [
                ["RWLOCK.UNLOCK", lock, field, "WRITE"],
                ["RWLOCK.RENEW", lock, field, "1"],
            ] {
                let e = call(&mut other, &args).expect_err("a reserved owner is refused");
                assert_eq!(e.code(), Some("ERR"), "{args:?}: {e}");
            }
        }
    }
    let after = snapshot(&mut owner);
    let d = diff(&before, &after, "before", "after");
    assert!(d.is_empty(), "a non-owner changed a hold:\n{d}");
}

#[test]
fn replies_info_and_log_tell_nothing_of_other_owners() {
    let server = Server::start(&["--loglevel", "debug"]);
    let mut holder = server.conn();
    let mut other = server.conn();
    ok(&mut holder, &["RWLOCK.WRITE", "S", SECRET_OWNER, "600000"]);
    ok(&mut holder, &["RWLOCK.READ", "T", SECRET_OWNER, "600000"]);
    ok(
        &mut holder,
        &[
            "RWLOCK.UNLOCK",
            "T",
            SECRET_OWNER,
            "READ",
            "REQUEST",
            SECRET_ID,
            "60000",
        ],
    );
    ok(&mut holder, &["RWLOCK.READ", "T", SECRET_OWNER, "600000"]);
    // A corrupt lock whose bad value and owner must not be echoed.
    ok(
        &mut holder,
        &["HSET", "K", "mode", "read", SECRET_OWNER, SECRET_VALUE],
    );
    ok(
        &mut holder,
        &["HSET", "M", "mode", SECRET_VALUE, SECRET_OWNER, "1"],
    );

    let mut texts = Vec::new();
    // Refusals are a PTTL, nothing else.
    for args in [
        ["RWLOCK.WRITE", "S", "b:1", "1000"],
        ["RWLOCK.READ", "S", "b:1", "1000"],
        ["RWLOCK.WRITE", "T", "b:1", "1000"],
    ] {
        let r = call(&mut other, &args).expect("a reply");
        assert!(matches!(r, Value::Int(_)), "{args:?}: {r:?}");
    }
    let r = call(
        &mut other,
        &["RWLOCK.READ", "S", "b:1", "1000", "BLOCK", "10"],
    )
    .expect("reply");
    assert!(matches!(r, Value::Int(_)), "{r:?}");
    // Other owners' calls and bad calls: whatever comes back, no secret.
    let calls: [&[&str]; 10] = [
        &["RWLOCK.UNLOCK", "S", "b:1", "WRITE"],
        &[
            "RWLOCK.UNLOCK",
            "T",
            "b:1",
            "READ",
            "REQUEST",
            SECRET_ID,
            "60000",
        ],
        &["RWLOCK.RENEW", "S", "b:1", "1000"],
        &["RWLOCK.READ", "K", "b:1", "1000"],
        &["RWLOCK.UNLOCK", "K", "b:1", "READ"],
        &["RWLOCK.FORCEUNLOCK", "K"],
        &["RWLOCK.INFO", "K"],
        &["RWLOCK.READ", "M", "b:1", "1000"],
        &["RWLOCK.INFO", "M"],
        &["RWLOCK.UNLOCK", "M", SECRET_OWNER, "READ"],
    ];
    for args in calls {
        match call(&mut other, args) {
            Ok(v) => texts.push(format!("{args:?} -> {v:?}")),
            Err(e) => texts.push(format!("{args:?} -> {e}")),
        }
    }
    let info = reply_text(&mut other, &["INFO", "everything"]);
    texts.push(info);
    let log = server.log();
    texts.push(log);
    for text in &texts {
        for secret in ["SECRET-OWNER", "SECRET-VALUE", "SECRET-REQUEST"] {
            // The calls above name the secret id themselves; a reply may
            // only ever be about the caller's own arguments.
            let shown = text.replace(&format!("\"{SECRET_ID}\""), "<own argument>");
            let shown = shown.replace(&format!("\"{SECRET_OWNER}\""), "<own argument>");
            assert!(!shown.contains(secret), "{secret} leaked:\n{text}");
        }
    }
    // RWLOCK.INFO shows the owners, as documented, to whoever may read the key.
    let info = testkit::flatten(&ok(&mut other, &["RWLOCK.INFO", "S"]));
    assert!(
        info.iter().any(|b| b.0 == SECRET_OWNER.as_bytes()),
        "{info:?}"
    );
}

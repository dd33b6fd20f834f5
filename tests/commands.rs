//! Integration tests of every command, reply, message, keyspace event and
//! config against a real redis-server with the module loaded.

use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    all_keys, call, config_value, enable_keyspace_events, events_str, expect_reply, in_one_turn,
    ok, ok_all, pairs, query, reply_text, rwlock_configs, wait_until, Collector, Server,
};

fn int(conn: &mut Conn, args: &[&str]) -> i64 {
    match ok(conn, args) {
        Value::Int(n) => n,
        other => panic!("{args:?}: expected an integer, got {other:?}"),
    }
}

fn err(conn: &mut Conn, args: &[&str]) -> String {
    match call(conn, args) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?}: expected an error, got {v:?}"),
    }
}

fn pttl(conn: &mut Conn, key: &str) -> i64 {
    int(conn, &["PTTL", key])
}

fn hash(conn: &mut Conn, key: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(key)
        .query::<std::collections::HashMap<String, String>>(conn)
        .expect("HGETALL")
        .into_iter()
        .collect();
    pairs.sort();
    pairs
}

fn near(value: i64, expected: i64) -> bool {
    value <= expected && value > expected - 1_000
}

#[test]
fn read_reentry_refused_write_and_release() {
    let (_server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["RWLOCK.READ", "L", "u1:1", "30000"], Value::Nil);
    expect_reply(&mut c, &["RWLOCK.READ", "L", "u1:1", "30000"], Value::Nil);
    expect_reply(&mut c, &["RWLOCK.READ", "L", "u2:1", "10000"], Value::Nil);
    assert_eq!(
        hash(&mut c, "L"),
        pairs(&[("mode", "read"), ("u1:1", "2"), ("u2:1", "1")])
    );
    for key in [
        "{L}:u1:1:rwlock_timeout:1",
        "{L}:u1:1:rwlock_timeout:2",
        "{L}:u2:1:rwlock_timeout:1",
    ] {
        let value = reply_text(&mut c, &["GET", key]);
        assert_eq!(value, "1");
        assert!(pttl(&mut c, key) > 0, "{key} has a lease");
    }
    let refused = int(&mut c, &["RWLOCK.WRITE", "L", "u3:1", "1000"]);
    assert!(
        near(refused, 30_000),
        "refused with the PTTL, got {refused}"
    );
    // No upgrade, even for a reader.
    assert!(near(
        int(&mut c, &["RWLOCK.WRITE", "L", "u1:1", "1000"]),
        30_000
    ));
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "L", "u1:1", "READ"]), 0);
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "L", "u1:1", "READ"]), 0);
    // Only u2's 10 s lease is left: the hash follows it.
    assert!(near(pttl(&mut c, "L"), 10_000));
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "L", "u2:1", "read"]), 1);
    assert!(all_keys(&mut c).is_empty());
    // Unlocking what does not exist replies nil (contract §9.1).
    expect_reply(&mut c, &["RWLOCK.UNLOCK", "L", "u2:1", "READ"], Value::Nil);
    expect_reply(&mut c, &["RWLOCK.UNLOCK", "L", "u2:1", "WRITE"], Value::Nil);
}

#[test]
fn write_reentry_unlock_lease_and_downgrade() {
    let (_server, mut c) = Server::started(&[]);
    expect_reply(&mut c, &["RWLOCK.WRITE", "W", "u1:1", "10000"], Value::Nil);
    expect_reply(&mut c, &["RWLOCK.WRITE", "W", "u1:1", "10000"], Value::Nil);
    // Additive: the remaining TTL plus the new lease.
    assert!(near(pttl(&mut c, "W"), 20_000));
    assert_eq!(
        hash(&mut c, "W"),
        pairs(&[("mode", "write"), ("u1:1:write", "2")])
    );
    assert!(near(
        int(&mut c, &["RWLOCK.READ", "W", "u2:1", "1000"]),
        20_000
    ));
    assert!(near(
        int(&mut c, &["RWLOCK.WRITE", "W", "u2:1", "1000"]),
        20_000
    ));
    assert_eq!(
        int(
            &mut c,
            &["RWLOCK.UNLOCK", "W", "u1:1", "WRITE", "LEASE", "5000"]
        ),
        0
    );
    assert!(near(pttl(&mut c, "W"), 5_000));
    // The writer takes a read, then releases the write: downgrade to read.
    expect_reply(&mut c, &["RWLOCK.READ", "W", "u1:1", "60000"], Value::Nil);
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "W", "u1:1", "WRITE"]), 1);
    assert_eq!(hash(&mut c, "W"), pairs(&[("mode", "read"), ("u1:1", "1")]));
    expect_reply(&mut c, &["RWLOCK.READ", "W", "u2:1", "1000"], Value::Nil);
    // A write unlock by a non-holder, or in read mode, replies nil.
    expect_reply(&mut c, &["RWLOCK.UNLOCK", "W", "u2:1", "WRITE"], Value::Nil);
}

#[test]
fn default_lease_config_rearms_partial_write_unlocks() {
    let (_server, mut c) = Server::started(&[]);
    assert_eq!(config_value(&mut c, "rwlock.default-lease"), "30000");
    ok(&mut c, &["RWLOCK.WRITE", "D", "u:1", "1000"]);
    ok(&mut c, &["RWLOCK.WRITE", "D", "u:1", "1000"]);
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "D", "u:1", "WRITE"]), 0);
    assert!(near(pttl(&mut c, "D"), 30_000));
    ok(&mut c, &["CONFIG", "SET", "rwlock.default-lease", "7000"]);
    ok(&mut c, &["RWLOCK.WRITE", "D", "u:1", "1000"]);
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "D", "u:1", "WRITE"]), 0);
    assert!(near(pttl(&mut c, "D"), 7_000));
}

#[test]
fn renew_extends_only_the_callers_holds() {
    let (_server, mut c) = Server::started(&[]);
    ok_all(
        &mut c,
        "RWLOCK.READ R u1:1 5000; RWLOCK.READ R u1:1 5000; RWLOCK.READ R u2:1 5000",
    );
    assert_eq!(int(&mut c, &["RWLOCK.RENEW", "R", "u1:1", "60000"]), 1);
    assert!(near(pttl(&mut c, "R"), 60_000));
    assert!(near(pttl(&mut c, "{R}:u1:1:rwlock_timeout:1"), 60_000));
    assert!(near(pttl(&mut c, "{R}:u1:1:rwlock_timeout:2"), 60_000));
    assert!(near(pttl(&mut c, "{R}:u2:1:rwlock_timeout:1"), 5_000));
    assert_eq!(int(&mut c, &["RWLOCK.RENEW", "R", "u9:1", "60000"]), 0);
    assert_eq!(
        int(&mut c, &["RWLOCK.RENEW", "nothing", "u1:1", "60000"]),
        0
    );
    ok(&mut c, &["RWLOCK.WRITE", "W", "u1:1", "5000"]);
    assert_eq!(int(&mut c, &["RWLOCK.RENEW", "W", "u1:1", "60000"]), 1);
    assert!(near(pttl(&mut c, "W"), 60_000));
}

#[test]
fn force_unlock_by_mode_removes_hash_and_timeout_keys() {
    let (_server, mut c) = Server::started(&[]);
    ok_all(
        &mut c,
        "RWLOCK.READ F u1:1 60000; RWLOCK.READ F u2:1 60000; RWLOCK.READ F u2:1 60000",
    );
    assert_eq!(int(&mut c, &["RWLOCK.FORCEUNLOCK", "F", "WRITE"]), 0);
    assert_eq!(all_keys(&mut c).len(), 4);
    assert_eq!(int(&mut c, &["RWLOCK.FORCEUNLOCK", "F", "READ"]), 1);
    assert!(all_keys(&mut c).is_empty());
    assert_eq!(int(&mut c, &["RWLOCK.FORCEUNLOCK", "F"]), 0);
    ok(&mut c, &["RWLOCK.WRITE", "F", "u1:1", "60000"]);
    assert_eq!(int(&mut c, &["RWLOCK.FORCEUNLOCK", "F", "READ"]), 0);
    assert_eq!(int(&mut c, &["RWLOCK.FORCEUNLOCK", "F"]), 1);
    assert!(all_keys(&mut c).is_empty());
}

#[test]
fn request_latch_answers_retries() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "Q", "u:1", "60000"]);
    ok(&mut c, &["RWLOCK.WRITE", "Q", "u:1", "60000"]);
    let unlock = [
        "RWLOCK.UNLOCK",
        "Q",
        "u:1",
        "WRITE",
        "REQUEST",
        "req-1",
        "5000",
    ];
    assert_eq!(int(&mut c, &unlock), 0);
    assert_eq!(
        int(&mut c, &unlock),
        0,
        "the retry replies the first answer"
    );
    assert_eq!(
        hash(&mut c, "Q"),
        pairs(&[("mode", "write"), ("u:1:write", "1")])
    );
    let latch = "redisson_unlock_latch:{Q}:req-1";
    assert!(near(pttl(&mut c, latch), 5_000));
    let last = [
        "RWLOCK.UNLOCK",
        "Q",
        "u:1",
        "WRITE",
        "REQUEST",
        "req-2",
        "5000",
    ];
    assert_eq!(int(&mut c, &last), 1);
    assert_eq!(int(&mut c, &last), 1);
    let absent = [
        "RWLOCK.UNLOCK",
        "Q",
        "u:1",
        "READ",
        "REQUEST",
        "req-3",
        "5000",
    ];
    assert_eq!(ok(&mut c, &absent), Value::Nil);
    assert_eq!(ok(&mut c, &absent), Value::Nil, "case 1 stores nothing");
    assert_eq!(
        int(&mut c, &["EXISTS", "redisson_unlock_latch:{Q}:req-3"]),
        0
    );
}

/// A release of a hold whose key is gone (its lease ran out, a failover, a
/// `DEL`) says "not held" on its first send and on its resend alike: nil
/// and no latch, where Redisson's read-write and fair scripts latch 1 (and
/// `fair_unlock.lua` replies 1), so their resend would say "released". A
/// real release's resend still replays its 1 from the latch.
#[test]
fn a_release_of_a_deleted_lock_says_not_held_on_first_send_and_resend() {
    let (_server, mut c) = Server::started(&[]);
    let kinds: [(&str, &[&str], &[&str]); 3] = [
        (
            "GR",
            &["RWLOCK.READ", "GR", "u:1", "60000"],
            &["RWLOCK.UNLOCK", "GR", "u:1", "READ"],
        ),
        (
            "GW",
            &["RWLOCK.WRITE", "GW", "u:1", "60000"],
            &["RWLOCK.UNLOCK", "GW", "u:1", "WRITE"],
        ),
        (
            "GF",
            &["FAIRLOCK.ACQUIRE", "GF", "u:1", "60000"],
            &["FAIRLOCK.UNLOCK", "GF", "u:1"],
        ),
    ];
    for (lock, acquire, unlock) in kinds {
        let gone_latch = format!("redisson_unlock_latch:{{{lock}}}:gone");
        let held_latch = format!("redisson_unlock_latch:{{{lock}}}:held");
        expect_reply(&mut c, acquire, Value::Nil);
        assert_eq!(int(&mut c, &["DEL", lock]), 1, "{lock}");
        let gone = [unlock, &["REQUEST", "gone", "60000"]].concat();
        for send in ["first send", "resend"] {
            assert_eq!(ok(&mut c, &gone), Value::Nil, "{lock}: {send}");
            assert_eq!(int(&mut c, &["EXISTS", &gone_latch]), 0, "{lock}: {send}");
        }
        expect_reply(&mut c, acquire, Value::Nil);
        let held = [unlock, &["REQUEST", "held", "60000"]].concat();
        assert_eq!(int(&mut c, &held), 1, "{lock}: released");
        let latched: String = query(&mut c, &["GET", held_latch.as_str()]);
        assert_eq!(latched, "1", "{lock}");
        // The lock is gone now: only the latch can answer 1.
        assert_eq!(int(&mut c, &held), 1, "{lock}: the resend replays");
    }
}

#[test]
fn info_shows_mode_ttl_owners_and_leases_in_resp2_and_resp3() {
    let (_server, mut c) = Server::started(&[]);
    let none = ok(&mut c, &["RWLOCK.INFO", "I"]);
    let expected_none = Value::Array(vec![
        Value::SimpleString("mode".into()),
        Value::BulkString(b"none".to_vec()),
        Value::SimpleString("ttl".into()),
        Value::Int(-2),
        Value::SimpleString("owners".into()),
        Value::Array(vec![]),
        Value::SimpleString("waiters".into()),
        Value::Array(vec![]),
    ]);
    assert_eq!(none, expected_none);
    ok(&mut c, &["RWLOCK.WRITE", "I", "u2:1", "60000"]);
    ok(&mut c, &["RWLOCK.READ", "I", "u2:1", "30000"]);
    for protocol in ["2", "3"] {
        ok(&mut c, &["HELLO", protocol]);
        let Value::Array(top) = ok(&mut c, &["RWLOCK.INFO", "I"]) else {
            panic!("INFO is an array in RESP{protocol}");
        };
        assert_eq!(top.len(), 8, "mode, ttl, owners, waiters");
        assert_eq!(top[1], Value::BulkString(b"write".to_vec()));
        assert!(matches!(top[3], Value::Int(t) if near(t, 60_000)));
        let Value::Array(owners) = &top[5] else {
            panic!("owners is an array")
        };
        let Value::Array(owner) = &owners[0] else {
            panic!("an owner is an array")
        };
        assert_eq!(owner[1], Value::BulkString(b"u2:1".to_vec()));
        assert_eq!(owner[3], Value::Int(1), "reads");
        assert_eq!(owner[5], Value::Int(1), "writes");
        let Value::Array(leases) = &owner[7] else {
            panic!("leases is an array")
        };
        assert!(matches!(leases[..], [Value::Int(l)] if near(l, 30_000)));
    }
}

#[test]
fn events_and_messages_match_redissons_scripts() {
    let (server, mut c) = Server::started(&[]);
    enable_keyspace_events(&mut c);
    let events = Collector::start(&server, &["__keyevent@0__:*", "redisson_rwlock*"]);
    events.sync(&mut c);
    ok(&mut c, &["RWLOCK.READ", "E", "u:1", "30000"]);
    let tk = "{E}:u:1:rwlock_timeout:1";
    let ke = |e: &str, k: &str| (format!("__keyevent@0__:{e}"), k.to_string());
    assert_eq!(
        events_str(&events.sync(&mut c)),
        vec![
            ke("hset", "E"),
            ke("hset", "E"),
            ke("set", tk),
            ke("expire", tk),
            ke("expire", "E"),
        ]
    );
    ok(&mut c, &["RWLOCK.UNLOCK", "E", "u:1", "READ"]);
    assert_eq!(
        events_str(&events.sync(&mut c)),
        vec![
            ke("hincrby", "E"),
            ke("hdel", "E"),
            ke("del", tk),
            ke("del", "E"),
            ("redisson_rwlock:{E}".to_string(), "0".to_string()),
        ]
    );
    ok(&mut c, &["RWLOCK.WRITE", "E", "u:1", "30000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "E", "u:1", "WRITE"]);
    assert_eq!(
        events_str(&events.sync(&mut c)),
        vec![
            ke("hset", "E"),
            ke("hset", "E"),
            ke("expire", "E"),
            ke("hincrby", "E"),
            ke("hdel", "E"),
            ke("del", "E"),
            ("redisson_rwlock:{E}".to_string(), "1".to_string()),
        ]
    );
    // A refused attempt raises nothing.
    ok(&mut c, &["RWLOCK.WRITE", "E", "u:1", "30000"]);
    events.sync(&mut c);
    ok(&mut c, &["RWLOCK.READ", "E", "u:2", "30000"]);
    assert!(events.sync(&mut c).is_empty());
}

/// Reads one pushed message from a connection that ran SSUBSCRIBE.
fn next_push(conn: &mut Conn) -> Vec<Value> {
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    match conn.recv_response().expect("a pushed message") {
        Value::Array(items) => items,
        Value::Push { data, .. } => data,
        other => panic!("unexpected push {other:?}"),
    }
}

#[test]
fn publish_config_chooses_publish_or_spublish() {
    let (server, mut c) = Server::started(&[]);
    let mut sharded = server.conn();
    ok(&mut sharded, &["SSUBSCRIBE", "redisson_rwlock:{P}"]);
    let plain = Collector::start(&server, &["redisson_rwlock*"]);
    assert_eq!(config_value(&mut c, "rwlock.publish"), "auto");
    // auto without cluster mode: PUBLISH.
    ok(&mut c, &["RWLOCK.WRITE", "P", "u:1", "30000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "P", "u:1", "WRITE"]);
    assert_eq!(
        events_str(&plain.sync(&mut c)),
        vec![("redisson_rwlock:{P}".to_string(), "1".to_string())]
    );
    ok_all(
        &mut c,
        "CONFIG SET rwlock.publish spublish; RWLOCK.READ P u:1 30000; RWLOCK.UNLOCK P u:1 READ",
    );
    let push = next_push(&mut sharded);
    assert_eq!(push[0], Value::BulkString(b"smessage".to_vec()));
    assert_eq!(push[1], Value::BulkString(b"redisson_rwlock:{P}".to_vec()));
    assert_eq!(push[2], Value::BulkString(b"0".to_vec()));
    assert!(
        plain.sync(&mut c).is_empty(),
        "no plain PUBLISH in spublish mode"
    );
    ok_all(
        &mut c,
        "CONFIG SET rwlock.publish publish; RWLOCK.FORCEUNLOCK P; RWLOCK.UNLOCK P u:1 READ",
    );
    assert_eq!(
        events_str(&plain.sync(&mut c)),
        vec![("redisson_rwlock:{P}".to_string(), "0".to_string())]
    );
    let err = err(&mut c, &["CONFIG", "SET", "rwlock.fairness", "lifo"]);
    assert!(err.contains("fairness"), "{err}");
    assert_eq!(config_value(&mut c, "rwlock.fairness"), "none");
}

#[test]
fn module_arguments_set_configs_at_load() {
    let server = Server::start_with_module_args(
        &[
            "publish",
            "spublish",
            "rwlock.default-lease",
            "1234",
            "fairness",
            "none",
            "lease-index-from",
            "16",
            "fair-wait",
            "4321",
            "deadlock-detection",
            "no",
            "token-gap",
            "777",
        ],
        &[],
    );
    let mut c = server.conn();
    assert_eq!(
        rwlock_configs(&mut c),
        pairs(&[
            ("rwlock.deadlock-detection", "no"),
            ("rwlock.default-lease", "1234"),
            ("rwlock.fair-wait", "4321"),
            ("rwlock.fairness", "none"),
            ("rwlock.lease-index-from", "16"),
            ("rwlock.publish", "spublish"),
            ("rwlock.token-gap", "777"),
        ])
    );
}

#[test]
fn leases_run_out_without_unlock() {
    let (_server, mut c) = Server::started(&[]);
    // Before the lease begins: it runs out 500 ms after this at the earliest.
    let start = Instant::now();
    // Long enough for the refusal next to come within it on a loaded machine.
    ok(&mut c, &["RWLOCK.READ", "X", "u1:1", "500"]);
    assert!(int(&mut c, &["RWLOCK.WRITE", "X", "u2:1", "50"]) > 0);
    // Nobody unlocks: the writer gets in once the read lease has run out.
    wait_until(
        Duration::from_secs(10),
        "the write after the lease",
        || match ok(&mut c, &["RWLOCK.WRITE", "X", "u2:1", "50"]) {
            Value::Nil => Some(()),
            // Refused with the lease's PTTL: 0 when under a millisecond is left.
            Value::Int(pttl) if pttl >= 0 => None,
            other => panic!("a write is granted or refused, not {other:?}"),
        },
    );
    let granted = start.elapsed();
    assert!(
        granted >= Duration::from_millis(500),
        "granted after {granted:?}, within the read lease"
    );
}

#[test]
fn commands_work_in_multi_and_scripts_and_declare_their_key() {
    let (_server, mut c) = Server::started(&[]);
    let replies = in_one_turn(
        &mut c,
        &[
            &["RWLOCK.READ", "M", "u:1", "30000"],
            &["RWLOCK.WRITE", "M", "u:2", "30000"],
        ],
    );
    assert_eq!(replies[0], Value::Nil);
    assert!(matches!(replies[1], Value::Int(t) if near(t, 30_000)));
    let script = "return redis.call('rwlock.unlock', KEYS[1], ARGV[1], 'READ')";
    assert_eq!(int(&mut c, &["EVAL", script, "1", "M", "u:1"]), 1);
    let info = ok(&mut c, &["COMMAND", "INFO", "rwlock.read", "rwlock.info"]);
    let Value::Array(commands) = info else {
        panic!("COMMAND INFO is an array")
    };
    for (command, flag) in commands.iter().zip(["write", "readonly"]) {
        let Value::Array(fields) = command else {
            panic!("an entry is an array")
        };
        let Value::Array(flags) = &fields[2] else {
            panic!("flags")
        };
        assert!(
            flags.contains(&Value::SimpleString(flag.into())),
            "{fields:?}"
        );
        assert_eq!(
            &fields[3..6],
            &[Value::Int(1), Value::Int(1), Value::Int(1)]
        );
    }
    let keys: Vec<String> = query(
        &mut c,
        &["COMMAND", "GETKEYS", "RWLOCK.WRITE", "lock-key", "u", "1"],
    );
    assert_eq!(keys, vec!["lock-key"]);
}

#[test]
fn braced_lock_names_keep_their_hash_tag() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.READ", "{t}:a", "u:1", "30000"]);
    let mut keys: Vec<String> = all_keys(&mut c).into_iter().collect();
    keys.sort();
    assert_eq!(keys, vec!["{t}:a", "{t}:a:u:1:rwlock_timeout:1"]);
    assert_eq!(slot("{t}:a"), slot("{t}:a:u:1:rwlock_timeout:1"));
    assert_eq!(slot("{t}:a"), slot("redisson_rwlock:{t}:a"));
    assert_eq!(slot("L"), slot("{L}:u:1:rwlock_timeout:1"));
    assert_eq!(slot("L"), slot("redisson_unlock_latch:{L}:r"));
    assert_ne!(
        slot("{t}:a"),
        slot("{u}:a"),
        "the slot function distinguishes keys"
    );
}

/// Redis Cluster's key slot: CRC16 (XMODEM) of the hash tag, modulo 16384.
fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let len = bytes[open + 1..].iter().position(|&b| b == b'}')?;
        (len > 0).then(|| &bytes[open + 1..open + 1 + len])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(bytes) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// Runs an empty transaction on `watcher` after `write` ran on another
/// client: true when EXEC went through (nothing the watcher watched changed).
fn watch_survives(watcher: &mut Conn, other: &mut Conn, key: &str, write: &[&str]) -> bool {
    ok(watcher, &["WATCH", key]);
    call(other, write).unwrap_or_else(|e| panic!("{write:?} failed: {e}"));
    redis::cmd("MULTI").query::<()>(watcher).expect("MULTI");
    redis::cmd("PING")
        .query::<()>(watcher)
        .expect("PING queued");
    match ok(watcher, &["EXEC"]) {
        Value::Nil => false,
        Value::Array(replies) => {
            assert_eq!(replies.len(), 1, "EXEC of one PING: {replies:?}");
            true
        }
        other => panic!("EXEC: unexpected reply {other:?}"),
    }
}

#[test]
fn watch_sees_the_writes_and_only_the_writes() {
    let server = Server::start(&[]);
    let (mut w, mut c) = (server.conn(), server.conn());
    let lease = "{L}:r1:rwlock_timeout:1";
    // Commands that change nothing leave a WATCH on the lock alone.
    let untouched: &[&[&str]] = &[
        &["RWLOCK.UNLOCK", "L", "r1", "READ"],
        &["RWLOCK.RENEW", "L", "r1", "30000"],
        &["RWLOCK.INFO", "L"],
        &["RWLOCK.FORCEUNLOCK", "L"],
    ];
    for write in untouched {
        assert!(
            watch_survives(&mut w, &mut c, "L", write),
            "{write:?} on a free lock"
        );
    }
    assert!(!watch_survives(
        &mut w,
        &mut c,
        "L",
        &["RWLOCK.READ", "L", "r1", "30000"]
    ));
    let refused_or_idle: &[&[&str]] = &[
        &["RWLOCK.WRITE", "L", "w1", "30000"],
        &["RWLOCK.UNLOCK", "L", "w1", "WRITE"],
        &["RWLOCK.UNLOCK", "L", "r2", "READ"],
        &["RWLOCK.FORCEUNLOCK", "L", "WRITE"],
        &["RWLOCK.INFO", "L"],
    ];
    for write in refused_or_idle {
        assert!(
            watch_survives(&mut w, &mut c, "L", write),
            "{write:?} on a read lock"
        );
        assert!(
            watch_survives(&mut w, &mut c, lease, write),
            "{write:?}, lease key"
        );
    }
    // Each write is seen on the key it changed.
    let seen: &[(&str, &[&str])] = &[
        ("L", &["RWLOCK.RENEW", "L", "r1", "60000"]),
        (lease, &["RWLOCK.RENEW", "L", "r1", "60000"]),
        (lease, &["RWLOCK.UNLOCK", "L", "r1", "READ"]),
        ("L", &["RWLOCK.WRITE", "L", "w1", "30000"]),
        ("L", &["RWLOCK.WRITE", "L", "w1", "30000"]),
        ("L", &["RWLOCK.UNLOCK", "L", "w1", "WRITE"]),
        ("L", &["RWLOCK.UNLOCK", "L", "w1", "WRITE"]),
    ];
    for (key, write) in seen {
        assert!(
            !watch_survives(&mut w, &mut c, key, write),
            "{write:?}, {key}"
        );
    }
    assert_eq!(int(&mut c, &["EXISTS", "L", lease]), 0);
    ok(&mut c, &["RWLOCK.READ", "L", "r1", "30000"]);
    assert!(!watch_survives(
        &mut w,
        &mut c,
        lease,
        &["RWLOCK.FORCEUNLOCK", "L"]
    ));
}

/// Lease keys hold "1" in a value the module shares between them, as the
/// script's SET shares Redis's integer 1 (same memory per lease). Sharing
/// must never let a change to one lease key show in another.
#[test]
fn lease_keys_share_their_value_but_never_its_changes() {
    let (_server, mut c) = Server::started(&[]);
    let info = reply_text(&mut c, &["INFO", "server"]);
    // Valkey and Redis 8 copy a value they store (each keeps its key name
    // inside it); Redis 7 shares it.
    let redis_major = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .and_then(|v| v.split('.').next()?.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let copies = info.contains("valkey_version") || redis_major >= 8;
    let refcount = |c: &mut Conn, key: &str| int(c, &["OBJECT", "REFCOUNT", key]);
    for owner in ["a:1", "b:1", "c:1", "d:1"] {
        ok(&mut c, &["RWLOCK.READ", "L", owner, "30000"]);
    }
    ok(&mut c, &["RWLOCK.READ", "L", "a:1", "30000"]);
    let lease = |owner: &str, n: u32| format!("{{L}}:{owner}:rwlock_timeout:{n}");
    assert_eq!(refcount(&mut c, &lease("a:1", 1)) > 1, !copies);
    ok(&mut c, &["APPEND", &lease("a:1", 1), "z"]);
    assert_eq!(int(&mut c, &["INCR", &lease("b:1", 1)]), 2);
    ok(&mut c, &["SETRANGE", &lease("c:1", 1), "0", "7"]);
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&[
            lease("a:1", 1),
            lease("b:1", 1),
            lease("c:1", 1),
            lease("d:1", 1),
            lease("a:1", 2),
        ])
        .query(&mut c)
        .expect("MGET");
    let want = ["1z", "2", "7", "1", "1"].map(|v| Some(v.to_string()));
    assert_eq!(values, want);
    for owner in ["a:1", "a:1", "b:1", "c:1"] {
        int(&mut c, &["RWLOCK.UNLOCK", "L", owner, "READ"]);
    }
    let left: String = redis::cmd("GET")
        .arg(lease("d:1", 1))
        .query(&mut c)
        .expect("GET");
    assert_eq!(left, "1");
    assert_eq!(int(&mut c, &["RWLOCK.UNLOCK", "L", "d:1", "READ"]), 1);
    assert!(all_keys(&mut c).is_empty());
    // An LRU policy reads each value's own access time: nothing is shared.
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1gb"]);
    ok(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    );
    for owner in ["a:1", "b:1"] {
        ok(&mut c, &["RWLOCK.READ", "L", owner, "30000"]);
        assert_eq!(refcount(&mut c, &lease(owner, 1)), 1, "{owner}");
    }
}

/// The module keeps recent key names, channels and fields as interned
/// strings in a table of 256 slots: with four times as many locks, released
/// in another order than taken, every slot is replaced over and over, and
/// every command must still name exactly its own keys and channel.
#[test]
fn names_past_the_interned_table_stay_exact() {
    const LOCKS: usize = 1024;
    let (server, mut c) = Server::started(&[]);
    enable_keyspace_events(&mut c);
    let events = Collector::start(&server, &["__keyevent@0__:del", "redisson_rwlock*"]);
    events.sync(&mut c);
    let lock = |i: usize| format!("churn:{i}");
    let owner = |i: usize| format!("{i:04x}-0000-4000-8000-000000000000:{}", i % 7);
    // Taken in order, released with a stride coprime to LOCKS.
    let order: Vec<usize> = (0..LOCKS).map(|k| k * 37 % LOCKS).collect();
    for (mode, command) in [("READ", "RWLOCK.READ"), ("WRITE", "RWLOCK.WRITE")] {
        let mut take = redis::pipe();
        for i in 0..LOCKS {
            take.cmd(command).arg(lock(i)).arg(owner(i)).arg(30_000);
        }
        let taken: Vec<Option<i64>> = take.query(&mut c).expect("acquisitions");
        assert!(taken.iter().all(Option::is_none), "{mode}: {taken:?}");
        let field = |i: usize| match mode {
            "READ" => owner(i),
            _ => format!("{}:write", owner(i)),
        };
        for i in 0..LOCKS {
            let mut expected = vec![
                ("mode".to_string(), mode.to_lowercase()),
                (field(i), "1".to_string()),
            ];
            expected.sort();
            assert_eq!(hash(&mut c, &lock(i)), expected, "{mode} lock {i}");
        }
        let lease_keys = all_keys(&mut c)
            .into_iter()
            .filter(|k| k.contains("rwlock_timeout"))
            .collect::<std::collections::HashSet<_>>();
        let expected: std::collections::HashSet<_> = match mode {
            "READ" => (0..LOCKS)
                .map(|i| testkit::timeout_key(&lock(i), &owner(i), 1))
                .collect(),
            _ => Default::default(),
        };
        let missing: Vec<_> = expected.difference(&lease_keys).take(3).collect();
        let unexpected: Vec<_> = lease_keys.difference(&expected).take(3).collect();
        assert!(
            missing.is_empty() && unexpected.is_empty(),
            "{mode}: lease keys missing {missing:?}, unexpected {unexpected:?}"
        );
        let mut release = redis::pipe();
        for &i in &order {
            release
                .cmd("RWLOCK.UNLOCK")
                .arg(lock(i))
                .arg(owner(i))
                .arg(mode);
        }
        let released: Vec<i64> = release.query(&mut c).expect("releases");
        assert!(released.iter().all(|&r| r == 1), "{mode}: {released:?}");
        assert_eq!(int(&mut c, &["DBSIZE"]), 0, "{mode}: keys left");
        // Per release, in release order: the lease key's deletion (reads),
        // the hash's, then the message on the lock's own channel.
        let message = if mode == "READ" { "0" } else { "1" };
        let mut expected = Vec::new();
        for &i in &order {
            if mode == "READ" {
                expected.push((
                    "__keyevent@0__:del".to_string(),
                    testkit::timeout_key(&lock(i), &owner(i), 1),
                ));
            }
            expected.push(("__keyevent@0__:del".to_string(), lock(i)));
            expected.push((testkit::channel(&lock(i)), message.to_string()));
        }
        assert_eq!(events_str(&events.sync(&mut c)), expected, "{mode}");
    }
}

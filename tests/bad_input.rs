//! Bad input (docs/design.md, contract §7): every malformed call gets an error reply and
//! changes nothing (no key, value or deadline changes, no keyspace event, no
//! lock message), and nothing crashes or hangs the server. Also bad configs
//! and bad module arguments.
//!
//! The random part is seeded (`RWLOCK_TEST_SEED` overrides the seed; the seed
//! is printed so that a failure can be replayed).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use testkit::{
    call, enable_keyspace_events, events_str, module_path, query, redis_server_bin, reply_text,
    scaled, seed, snapshot, Bytes, Collector, KeyState, Rng, Server, Snapshot, COMMANDS,
    IO_TIMEOUT,
};

// ---------------------------------------------------------------------------
// Local helpers
// ---------------------------------------------------------------------------

const LONG_LEASE: i64 = 600_000;
const I64_MAX: &str = "9223372036854775807";
const TWO_POW_63: &str = "9223372036854775808";

fn show_args(args: &[Vec<u8>]) -> String {
    format!(
        "{:?}",
        args.iter().map(|a| Bytes(a.clone())).collect::<Vec<_>>()
    )
}

/// Server time in ms.
fn server_ms(conn: &mut testkit::Conn) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(conn).expect("TIME");
    s * 1000 + us / 1000
}

/// Differences between two snapshots, ignoring keys whose deadline had
/// passed by `now` (they may have expired on their own in between).
fn diff_unexpired(before: &Snapshot, after: &Snapshot, now: i64) -> String {
    let expired = |s: &KeyState| s.expire_at >= 0 && s.expire_at <= now;
    let mut out = String::new();
    for (k, b) in before {
        match after.get(k) {
            None if expired(b) => {}
            None => out.push_str(&format!("{k:?} deleted (was {b:?})\n")),
            Some(a) if a != b && !expired(b) => {
                out.push_str(&format!("{k:?} changed:\n  before {b:?}\n  after  {a:?}\n"))
            }
            _ => {}
        }
    }
    for (k, a) in after {
        if !before.contains_key(k) {
            out.push_str(&format!("{k:?} created: {a:?}\n"));
        }
    }
    out
}

fn to_args(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// "CODE detail" of a server error.
fn err_text(e: &redis::RedisError) -> String {
    format!(
        "{} {}",
        e.code().unwrap_or("<no code>"),
        e.detail().unwrap_or("")
    )
}

/// A server with keyspace events on, a collector of every keyspace event and
/// lock message, and a checker for calls that must fail without effect.
struct Fixture {
    server: Server,
    conn: testkit::Conn,
    collector: Collector,
    checked: usize,
}

impl Fixture {
    fn new() -> Fixture {
        let server = Server::start(&[]);
        let mut conn = server.conn();
        enable_keyspace_events(&mut conn);
        let collector = Collector::start(
            &server,
            // Every channel: keyspace events and lock messages alike.
            &["*"],
        );
        Fixture {
            server,
            conn,
            collector,
            checked: 0,
        }
    }

    fn ok(&mut self, args: &[&str]) -> redis::Value {
        testkit::ok(&mut self.conn, args)
    }

    /// Locks, keys of other types and corrupt hashes used by the cases.
    fn populate(&mut self) {
        let lease = LONG_LEASE.to_string();
        let lease = lease.as_str();
        // L: read mode, u1 twice, u2 once.
        for owner in ["u1", "u1", "u2"] {
            assert_eq!(
                self.ok(&["RWLOCK.READ", "L", owner, lease]),
                redis::Value::Nil
            );
        }
        // W: write mode, w holds the write twice and a read once.
        for cmd in ["RWLOCK.WRITE", "RWLOCK.WRITE", "RWLOCK.READ"] {
            assert_eq!(self.ok(&[cmd, "W", "w", lease]), redis::Value::Nil);
        }
        // {t}:a: a braced name in read mode.
        self.ok(&["RWLOCK.READ", "{t}:a", "u1", lease]);
        // Keys of other types, one with a deadline.
        self.ok(&["SET", "S", "v"]);
        self.ok(&["PEXPIRE", "S", "900000"]);
        self.ok(&["RPUSH", "Li", "a", "b"]);
        self.ok(&["SADD", "Se", "a", "b"]);
        self.ok(&["ZADD", "Z", "1", "a"]);
        // Latches.
        self.ok(&["RPUSH", "redisson_unlock_latch:{L}:req", "1"]);
        self.ok(&["HSET", "redisson_unlock_latch:{L}:hreq", "f", "1"]);
        self.ok(&["SET", "redisson_unlock_latch:{L}:bad", "x"]);
        self.drain();
    }

    fn drain(&mut self) {
        let _ = self.collector.sync(&mut self.conn);
    }

    /// `args` must get an error whose code is `code` and whose text contains
    /// one of `needles` (case-insensitive), and must change nothing.
    fn expect_error(&mut self, args: &[&str], code: &str, needles: &[&str]) {
        self.expect_error_bytes(&to_args(args), code, needles);
    }

    fn expect_error_bytes(&mut self, args: &[Vec<u8>], code: &str, needles: &[&str]) {
        if let Err(problem) = self.check_error(args, code, needles) {
            panic!("{problem}");
        }
    }

    /// As [`Fixture::expect_error`], returning what went wrong instead of
    /// panicking (to report every case of a test at once).
    fn check_error(
        &mut self,
        args: &[Vec<u8>],
        code: &str,
        needles: &[&str],
    ) -> Result<(), String> {
        let shown = show_args(args);
        self.drain();
        let before = snapshot(&mut self.conn);
        let reply = call(&mut self.conn, args);
        let after = snapshot(&mut self.conn);
        let now = server_ms(&mut self.conn);
        let events = events_str(&self.collector.sync(&mut self.conn));
        assert!(self.server.is_running(), "{shown}: redis-server exited");
        self.checked += 1;
        let d = diff_unexpired(&before, &after, now);
        let effects = if d.is_empty() && events.is_empty() {
            String::new()
        } else {
            format!("\n  changes:\n{d}  events: {}", show_events(&events))
        };
        match reply {
            Ok(v) => Err(format!("{shown}: expected an error, got {v:?}{effects}")),
            Err(e) => {
                assert!(
                    !e.is_io_error() && !e.is_connection_dropped(),
                    "{shown}: connection error {e}"
                );
                let text = err_text(&e);
                let lower = text.to_lowercase();
                if e.code() != Some(code) {
                    Err(format!("{shown}: expected a {code} error, got {text:?}"))
                } else if !needles.iter().any(|n| lower.contains(&n.to_lowercase())) {
                    Err(format!(
                        "{shown}: error {text:?} does not mention any of {needles:?}"
                    ))
                } else if !effects.is_empty() {
                    Err(format!("{shown} failed ({text}) but had effects:{effects}"))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// Events, abridged for messages.
fn show_events(events: &[(String, String)]) -> String {
    let cut = |s: &String| -> String {
        if s.len() > 80 {
            format!(
                "{}…({} bytes)",
                &s[..s.char_indices().nth(60).map_or(s.len(), |(i, _)| i)],
                s.len()
            )
        } else {
            s.clone()
        }
    };
    format!(
        "{:?}",
        events
            .iter()
            .map(|(c, p)| (cut(c), cut(p)))
            .collect::<Vec<_>>()
    )
}

// ---------------------------------------------------------------------------
// contract §7, case by case
// ---------------------------------------------------------------------------

const ARITY: &[&str] = &["wrong number of arguments"];
const SYNTAX: &[&str] = &["syntax"];

#[test]
fn wrong_arity() {
    let mut f = Fixture::new();
    f.populate();
    for cmd in ["RWLOCK.READ", "RWLOCK.WRITE", "RWLOCK.RENEW"] {
        f.expect_error(&[cmd], "ERR", ARITY);
        f.expect_error(&[cmd, "L"], "ERR", ARITY);
        f.expect_error(&[cmd, "L", "u1"], "ERR", ARITY);
        f.expect_error(&[cmd, "N", "n"], "ERR", ARITY);
        // Too many: an error, whether the module calls it arity or syntax
        // (the section 4 `BLOCK ms` option makes 5 and 6 arguments legal).
        let too_many: &[&[&str]] = &[
            &[cmd, "L", "u1", "60000", "extra"],
            &[cmd, "N", "n", "60000", "extra"],
            &[cmd, "L", "u1", "60000", "60000", "60000", "60000"],
            &[cmd, "N", "n", "60000", "BLOCK"],
            &[cmd, "N", "n", "60000", "BLOCK", "abc"],
            &[cmd, "N", "n", "60000", "BLOCK", "-1"],
            &[cmd, "N", "n", "60000", "BLOCK", "1", "extra"],
        ];
        for args in too_many {
            f.expect_error(
                args,
                "ERR",
                &["wrong number of arguments", "syntax", "block"],
            );
        }
    }
    f.expect_error(&["RWLOCK.UNLOCK"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.UNLOCK", "L"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.UNLOCK", "L", "u1"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.UNLOCK", "N", "n"], "ERR", ARITY);
    f.expect_error(
        &["RWLOCK.UNLOCK", "W", "w", "WRITE", "LEASE", "1000", "extra"],
        "ERR",
        &["wrong number of arguments", "syntax"],
    );
    f.expect_error(&["RWLOCK.FORCEUNLOCK"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.FORCEUNLOCK", "L", "READ", "extra"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.FORCEUNLOCK", "W", "WRITE", "WRITE"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.INFO"], "ERR", ARITY);
    f.expect_error(&["RWLOCK.INFO", "L", "extra"], "ERR", ARITY);
    eprintln!("{} cases", f.checked);
}

#[test]
fn unknown_or_repeated_options() {
    let mut f = Fixture::new();
    f.populate();
    let cases: &[&[&str]] = &[
        &[
            "RWLOCK.UNLOCK",
            "L",
            "u1",
            "READ",
            "LEASE",
            "1",
            "LEASE",
            "2",
        ],
        &[
            "RWLOCK.UNLOCK",
            "W",
            "w",
            "WRITE",
            "LEASE",
            "1000",
            "LEASE",
            "2000",
        ],
        &[
            "RWLOCK.UNLOCK",
            "W",
            "w",
            "WRITE",
            "REQUEST",
            "a",
            "1000",
            "REQUEST",
            "b",
            "1000",
        ],
        &[
            "RWLOCK.UNLOCK",
            "W",
            "w",
            "WRITE",
            "LEASE",
            "1000",
            "REQUEST",
            "a",
            "1000",
            "LEASE",
            "1000",
        ],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "FOO"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "FOO", "1"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "BLOCK", "1"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "LEASE"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "REQUEST", "r"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "REQUEST"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", ""],
        &["RWLOCK.UNLOCK", "L", "u1", "BOTH"],
        &["RWLOCK.UNLOCK", "L", "u1", ""],
        &["RWLOCK.UNLOCK", "L", "u1", "READS"],
        &["RWLOCK.UNLOCK", "N", "n", "BOTH"],
        &["RWLOCK.UNLOCK", "W", "w", "LEASE", "1000"],
        &["RWLOCK.FORCEUNLOCK", "L", "MAYBE"],
        &["RWLOCK.FORCEUNLOCK", "W", ""],
        &["RWLOCK.FORCEUNLOCK", "W", "WRITES"],
    ];
    for args in cases {
        f.expect_error(args, "ERR", SYNTAX);
    }
    eprintln!("{} cases", f.checked);
}

/// `SESSION` (issue 19) is a flag of the three acquisitions only, given at
/// most once, and needs a client connection: a script's client has none.
#[test]
fn session_twice_elsewhere_or_without_a_connection() {
    let mut f = Fixture::new();
    f.populate();
    let cases: &[&[&str]] = &[
        &["RWLOCK.READ", "N", "n", "60000", "SESSION", "SESSION"],
        &[
            "RWLOCK.WRITE",
            "N",
            "n",
            "60000",
            "SESSION",
            "FENCED",
            "SESSION",
        ],
        &[
            "LOCK.ACQUIRE",
            "N",
            "n",
            "60000",
            "SESSION",
            "BLOCK",
            "1",
            "session",
        ],
        &["RWLOCK.READ", "N", "n", "60000", "SESSIONS"],
        &["RWLOCK.UNLOCK", "L", "u1", "READ", "SESSION"],
        &["LOCK.UNLOCK", "N", "n", "SESSION"],
        &[
            "LOCK.ACQUIREALL",
            "n",
            "60000",
            "SESSION",
            "BLOCK",
            "1",
            "SESSION",
            "HOLDS",
            "1",
            "LOCK",
            "N",
        ],
        &["LOCK.UNLOCKALL", "n", "SESSION", "HOLDS", "1", "LOCK", "N"],
        &[
            "LOCK.RENEWALL",
            "n",
            "60000",
            "SESSION",
            "HOLDS",
            "1",
            "LOCK",
            "N",
        ],
    ];
    for args in cases {
        f.expect_error(args, "ERR", &["syntax", "wrong number of arguments"]);
    }
    f.expect_error(
        &["RWLOCK.RENEW", "L", "u1", "60000", "SESSION"],
        "ERR",
        ARITY,
    );
    for command in ["RWLOCK.READ", "RWLOCK.WRITE", "LOCK.ACQUIRE"] {
        let script = format!("return redis.call('{command}', KEYS[1], 'n', '60000', 'SESSION')");
        f.expect_error(
            &["EVAL", &script, "1", "N"],
            "ERR",
            &["SESSION binds holds"],
        );
    }
    // A function is a script too (Valkey 9 would crash on the lookup by id
    // that a connection's check once made here).
    let library = "#!lua name=sessionless\nredis.register_function('take', function(keys) return redis.call('LOCK.ACQUIRE', keys[1], 'n', '60000', 'SESSION') end)";
    f.ok(&["FUNCTION", "LOAD", library]);
    f.expect_error(
        &["FCALL", "take", "1", "N"],
        "ERR",
        &["SESSION binds holds"],
    );
    // After the list, it is one argument too many for the count.
    f.expect_error(
        &[
            "LOCK.ACQUIREALL",
            "n",
            "60000",
            "HOLDS",
            "1",
            "LOCK",
            "N",
            "SESSION",
        ],
        "ERR",
        &["HOLDS must give"],
    );
    let script =
        "return redis.call('LOCK.ACQUIREALL', 'n', '60000', 'SESSION', 'HOLDS', '1', 'LOCK', KEYS[1])";
    f.expect_error(&["EVAL", script, "1", "N"], "ERR", &["SESSION binds holds"]);
    eprintln!("{} cases", f.checked);
}

const BAD_MILLIS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "-60000",
    "315360000001",
    I64_MAX,
    TWO_POW_63,
    "-9223372036854775808",
    "99999999999999999999999",
    "1.5",
    "abc",
    " 1",
    "1 ",
    "01",
    "+1",
    "1e3",
    "0x10",
    "",
    "60000\0",
];

#[test]
fn lease_not_an_integer_in_range() {
    let mut f = Fixture::new();
    f.populate();
    let needles = &["lease"];
    for v in BAD_MILLIS {
        for (cmd, lock, owner) in [
            ("RWLOCK.READ", "L", "u1"),
            ("RWLOCK.READ", "N", "n"),
            ("RWLOCK.READ", "W", "w"),
            ("RWLOCK.WRITE", "W", "w"),
            ("RWLOCK.WRITE", "N", "n"),
            ("RWLOCK.RENEW", "L", "u1"),
            ("RWLOCK.RENEW", "W", "w"),
        ] {
            f.expect_error(&[cmd, lock, owner, v], "ERR", needles);
        }
        for args in [
            &["RWLOCK.UNLOCK", "W", "w", "WRITE", "LEASE", v][..],
            &["RWLOCK.UNLOCK", "L", "u1", "READ", "LEASE", v],
            &["RWLOCK.UNLOCK", "N", "n", "WRITE", "LEASE", v],
            &[
                "RWLOCK.UNLOCK",
                "W",
                "w",
                "WRITE",
                "REQUEST",
                "r1",
                "60000",
                "LEASE",
                v,
            ],
        ] {
            f.expect_error(args, "ERR", needles);
        }
    }
    // The bounds themselves are accepted (1 ms .. 10 years).
    assert_eq!(
        f.ok(&["RWLOCK.READ", "B", "b", "315360000000"]),
        redis::Value::Nil
    );
    assert_eq!(
        f.ok(&["RWLOCK.RENEW", "B", "b", "315360000000"]),
        redis::Value::Int(1)
    );
    assert_eq!(f.ok(&["RWLOCK.WRITE", "B1", "b", "1"]), redis::Value::Nil);
    eprintln!("{} cases", f.checked);
}

#[test]
fn request_with_empty_id_or_bad_ttl() {
    let mut f = Fixture::new();
    f.populate();
    for (lock, owner, mode) in [("L", "u1", "READ"), ("W", "w", "WRITE"), ("N", "n", "READ")] {
        f.expect_error(
            &["RWLOCK.UNLOCK", lock, owner, mode, "REQUEST", "", "60000"],
            "ERR",
            &["request id"],
        );
        for v in BAD_MILLIS {
            f.expect_error(
                &["RWLOCK.UNLOCK", lock, owner, mode, "REQUEST", "r1", v],
                "ERR",
                &["ttl"],
            );
            f.expect_error(
                &[
                    "RWLOCK.UNLOCK",
                    lock,
                    owner,
                    mode,
                    "LEASE",
                    "60000",
                    "REQUEST",
                    "r1",
                    v,
                ],
                "ERR",
                &["ttl"],
            );
        }
    }
    eprintln!("{} cases", f.checked);
}

#[test]
fn empty_or_reserved_owner() {
    let mut f = Fixture::new();
    f.populate();
    let lease = "60000";
    for owner in ["", "mode", "u:write", ":write", "u1:write", "w:write"] {
        let cases: &[&[&str]] = &[
            &["RWLOCK.READ", "L", owner, lease],
            &["RWLOCK.READ", "W", owner, lease],
            &["RWLOCK.READ", "N", owner, lease],
            &["RWLOCK.WRITE", "N", owner, lease],
            &["RWLOCK.WRITE", "W", owner, lease],
            &["RWLOCK.WRITE", "L", owner, lease],
            &["RWLOCK.RENEW", "L", owner, lease],
            &["RWLOCK.RENEW", "W", owner, lease],
            &["RWLOCK.RENEW", "N", owner, lease],
            &["RWLOCK.UNLOCK", "L", owner, "READ"],
            &["RWLOCK.UNLOCK", "W", owner, "WRITE"],
            &["RWLOCK.UNLOCK", "W", owner, "READ"],
            // An absent lock: a valid owner would publish here.
            &["RWLOCK.UNLOCK", "N", owner, "READ"],
            &["RWLOCK.UNLOCK", "N", owner, "WRITE"],
            &["RWLOCK.UNLOCK", "N", owner, "WRITE", "REQUEST", "r9", lease],
            &["RWLOCK.UNLOCK", "L", owner, "READ", "REQUEST", "r9", lease],
        ];
        for args in cases {
            f.expect_error(args, "ERR", &["owner"]);
        }
    }
    eprintln!("{} cases", f.checked);
}

#[test]
fn lock_name_that_would_spread_over_slots() {
    let mut f = Fixture::new();
    f.populate();
    for name in ["a{b", "{}x", "x{}", "a}b", "", "{", "}", "{}"] {
        let cases: &[&[&str]] = &[
            &["RWLOCK.READ", name, "u1", "60000"],
            &["RWLOCK.WRITE", name, "u1", "60000"],
            &["RWLOCK.RENEW", name, "u1", "60000"],
            &["RWLOCK.UNLOCK", name, "u1", "READ"],
            &["RWLOCK.UNLOCK", name, "u1", "WRITE"],
            &[
                "RWLOCK.UNLOCK",
                name,
                "u1",
                "WRITE",
                "REQUEST",
                "r1",
                "60000",
            ],
            &["RWLOCK.FORCEUNLOCK", name],
            &["RWLOCK.FORCEUNLOCK", name, "READ"],
            &["RWLOCK.FORCEUNLOCK", name, "WRITE"],
            &["RWLOCK.INFO", name],
        ];
        for args in cases {
            f.expect_error(args, "ERR", &["slot"]);
        }
    }
    // Same with locks of those names present (written as Redisson would).
    for name in ["a{b", "a}b"] {
        f.ok(&["HSET", name, "mode", "read", "u1", "1"]);
        f.ok(&["PEXPIRE", name, "600000"]);
        for args in [
            &["RWLOCK.READ", name, "u1", "60000"][..],
            &["RWLOCK.UNLOCK", name, "u1", "READ"],
            &["RWLOCK.FORCEUNLOCK", name],
            &["RWLOCK.INFO", name],
        ] {
            f.expect_error(args, "ERR", &["slot"]);
        }
    }
    eprintln!("{} cases", f.checked);
}

/// Every command on `lock`, each to fail with `code` and one of `needles`.
fn every_command(f: &mut Fixture, lock: &str, owner: &str, code: &str, needles: &[&str]) {
    for args in testkit::every_command(lock, owner) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        f.expect_error(&args, code, needles);
    }
}

#[test]
fn lock_key_of_another_type() {
    let mut f = Fixture::new();
    f.populate();
    for key in ["S", "Li", "Se", "Z"] {
        every_command(&mut f, key, "u1", "WRONGTYPE", &["wrong kind"]);
    }
    eprintln!("{} cases", f.checked);
}

#[test]
fn corrupt_mode() {
    let mut f = Fixture::new();
    f.populate();
    f.ok(&["HSET", "Cb", "mode", "banana", "u", "1"]);
    f.ok(&["HSET", "Cn", "u", "1"]);
    f.ok(&["HSET", "Cw", "u:write", "1"]);
    f.ok(&["HSET", "Ce", "mode", "", "u", "1"]);
    f.ok(&["HSET", "Cu", "mode", "READ", "u", "1"]);
    f.ok(&["HSET", "Cm", "mode", "write"]);
    f.ok(&["HSET", "Cr", "mode", "read"]);
    f.ok(&["PEXPIRE", "Cb", "600000"]);
    f.ok(&["SET", "{Cb}:u:rwlock_timeout:1", "1", "PX", "600000"]);
    for lock in ["Cb", "Cn", "Cw", "Ce", "Cu"] {
        every_command(&mut f, lock, "u", "ERR", &["corrupt"]);
        every_command(&mut f, lock, "v", "ERR", &["corrupt"]);
    }
    eprintln!("{} cases", f.checked);
}

const BAD_COUNTS: &[&str] = &["x", "1.5", "01", "0", "-3", "", " 1", "+1", TWO_POW_63];

#[test]
fn corrupt_hold_count_of_the_caller() {
    let mut f = Fixture::new();
    f.populate();
    for (i, bad) in BAD_COUNTS.iter().enumerate() {
        // Read mode: u's read count is corrupt, v holds a valid read.
        let kr = format!("Kr{i}");
        f.ok(&["HSET", &kr, "mode", "read", "u", bad, "v", "1"]);
        f.ok(&["PEXPIRE", &kr, "600000"]);
        f.ok(&[
            "SET",
            &format!("{{{kr}}}:v:rwlock_timeout:1"),
            "1",
            "PX",
            "600000",
        ]);
        // Write mode: u's write count is corrupt.
        let kw = format!("Kw{i}");
        f.ok(&["HSET", &kw, "mode", "write", "u:write", bad]);
        f.ok(&["PEXPIRE", &kw, "600000"]);
        // Write mode: u holds the write, its read count is corrupt.
        let kd = format!("Kd{i}");
        f.ok(&["HSET", &kd, "mode", "write", "u:write", "1", "u", bad]);
        f.ok(&["PEXPIRE", &kd, "600000"]);
        let (kr, kw, kd) = (kr.as_str(), kw.as_str(), kd.as_str());
        let cases: &[&[&str]] = &[
            &["RWLOCK.READ", kr, "u", "60000"],
            &["RWLOCK.UNLOCK", kr, "u", "READ"],
            &["RWLOCK.UNLOCK", kr, "u", "READ", "REQUEST", "r1", "60000"],
            &["RWLOCK.RENEW", kr, "u", "60000"],
            // These read every count.
            &["RWLOCK.UNLOCK", kr, "v", "READ"],
            &["RWLOCK.FORCEUNLOCK", kr],
            &["RWLOCK.FORCEUNLOCK", kr, "READ"],
            &["RWLOCK.INFO", kr],
            &["RWLOCK.WRITE", kw, "u", "60000"],
            &["RWLOCK.READ", kw, "u", "60000"],
            &["RWLOCK.UNLOCK", kw, "u", "WRITE"],
            &["RWLOCK.UNLOCK", kw, "u", "WRITE", "LEASE", "60000"],
            &["RWLOCK.RENEW", kw, "u", "60000"],
            &["RWLOCK.FORCEUNLOCK", kw],
            &["RWLOCK.FORCEUNLOCK", kw, "WRITE"],
            &["RWLOCK.INFO", kw],
            &["RWLOCK.READ", kd, "u", "60000"],
            &["RWLOCK.UNLOCK", kd, "u", "READ"],
            &["RWLOCK.RENEW", kd, "u", "60000"],
            &["RWLOCK.FORCEUNLOCK", kd],
            &["RWLOCK.INFO", kd],
        ];
        for args in cases {
            f.expect_error(args, "ERR", &["corrupt"]);
        }
    }
    eprintln!("{} cases", f.checked);
}

/// A corrupt count in a field the call does not itself need: the hash is
/// still corrupt (contract §7: "a lock hash whose hold counts are not integers …
/// reported as a corrupt lock, never repaired silently").
/// The module checks every count a command reads. An acquisition or a
/// renewal reads only the caller's own fields (so it stays O(1) however many
/// readers hold the lock), as Redisson's scripts do; every command that reads
/// the other holders' counts (a read release, a downgrade, a forced unlock,
/// INFO) reports a corrupt one before writing anything.
#[test]
fn corrupt_hold_count_of_another_field() {
    let mut f = Fixture::new();
    f.populate();
    let mut problems = Vec::new();
    for (i, bad) in BAD_COUNTS.iter().chain(&["100001", I64_MAX]).enumerate() {
        let kr = format!("Kr{i}");
        f.ok(&["HSET", &kr, "mode", "read", "u", bad, "v", "1"]);
        f.ok(&["PEXPIRE", &kr, "600000"]);
        f.ok(&[
            "SET",
            &format!("{{{kr}}}:v:rwlock_timeout:1"),
            "1",
            "PX",
            "600000",
        ]);
        let kd = format!("Kd{i}");
        f.ok(&["HSET", &kd, "mode", "write", "u:write", "1", "u", bad]);
        f.ok(&["PEXPIRE", &kd, "600000"]);
        let (kr, kd) = (kr.as_str(), kd.as_str());
        let scanning: &[&[&str]] = &[
            // A release scans every reader's leases.
            &["RWLOCK.UNLOCK", kr, "v", "READ"],
            &["RWLOCK.FORCEUNLOCK", kr],
            &["RWLOCK.INFO", kr],
            // The writer's release would downgrade to a corrupt read lock.
            &["RWLOCK.UNLOCK", kd, "u", "WRITE"],
        ];
        for args in scanning {
            if let Err(p) = f.check_error(&to_args(args), "ERR", &["corrupt"]) {
                problems.push(p);
            }
        }
        // Reading only its own fields, another owner still gets its answer.
        assert_eq!(f.ok(&["RWLOCK.READ", kr, "n", "60000"]), redis::Value::Nil);
        assert_eq!(
            f.ok(&["RWLOCK.RENEW", kr, "v", "60000"]),
            redis::Value::Int(1)
        );
    }
    assert!(
        problems.is_empty(),
        "{} of {} calls that read a corrupt count went ahead:\n{}",
        problems.len(),
        f.checked,
        problems.join("\n")
    );
}

#[test]
fn hold_count_overflow() {
    let mut f = Fixture::new();
    f.populate();
    // 100000 holds is the most one owner may stack.
    f.ok(&["HSET", "Or", "mode", "read", "u", "100000"]);
    f.ok(&["PEXPIRE", "Or", "600000"]);
    f.ok(&["HSET", "Ow", "mode", "write", "u:write", "100000"]);
    f.ok(&["PEXPIRE", "Ow", "600000"]);
    f.ok(&["HSET", "Od", "mode", "write", "u:write", "1", "u", "100000"]);
    f.ok(&["PEXPIRE", "Od", "600000"]);
    for args in [
        &["RWLOCK.READ", "Or", "u", "60000"][..],
        &["RWLOCK.WRITE", "Ow", "u", "60000"],
        &["RWLOCK.READ", "Od", "u", "60000"],
    ] {
        f.expect_error(args, "ERR", &["overflow"]);
    }
    // A deadline past the clock's range is refused too.
    f.ok(&["HSET", "Ot", "mode", "write", "u:write", "1"]);
    f.ok(&["PEXPIREAT", "Ot", "9223372036854775000"]);
    f.expect_error(&["RWLOCK.WRITE", "Ot", "u", "60000"], "ERR", &["overflow"]);
    eprintln!("{} cases", f.checked);
}

/// A huge (valid) hold count must not make a command loop for ages: the
/// module never takes the server down (contract §7). Each command runs on a fresh
/// server, with a bounded read timeout; any reply (error or not) will do.
#[test]
fn huge_hold_count_does_not_hang_the_server() {
    let cases: &[(&str, &[&str])] = &[
        ("read", &["RWLOCK.RENEW", "Or", "u", "60000"]),
        ("read", &["RWLOCK.UNLOCK", "Or", "u", "READ"]),
        ("read", &["RWLOCK.UNLOCK", "Or", "v", "READ"]),
        ("read", &["RWLOCK.FORCEUNLOCK", "Or"]),
        ("read", &["RWLOCK.INFO", "Or"]),
        ("write", &["RWLOCK.RENEW", "Or", "u", "60000"]),
        ("write", &["RWLOCK.UNLOCK", "Or", "u", "READ"]),
        ("write", &["RWLOCK.FORCEUNLOCK", "Or"]),
    ];
    let handles: Vec<_> = cases
        .iter()
        .map(|&(mode, args)| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            thread::spawn(move || -> Option<String> {
                let mut server = Server::start(&[]);
                let mut conn = server.conn();
                // u holds i64::MAX reads (in write mode: and the write); v one read.
                let mut setup = redis::cmd("HSET");
                setup.arg("Or").arg("mode").arg(mode).arg("u").arg(I64_MAX);
                if mode == "read" {
                    setup.arg("v").arg("1");
                } else {
                    setup.arg("u:write").arg("1");
                }
                let _: i64 = setup.query(&mut conn).expect("HSET");
                let _: i64 = redis::cmd("PEXPIRE")
                    .arg("Or")
                    .arg(600_000)
                    .query(&mut conn)
                    .expect("PEXPIRE");
                // A loop over the count would take ages: any reply within
                // the bound will do, however loaded the machine.
                conn.set_read_timeout(Some(scaled(IO_TIMEOUT)))
                    .expect("set_read_timeout");
                let started = Instant::now();
                let reply = call(&mut conn, &args);
                let took = started.elapsed();
                let problem = match &reply {
                    Err(e) if e.is_timeout() || e.is_io_error() => {
                        // Give a crashing server a moment to write its report.
                        thread::sleep(Duration::from_millis(300));
                        let log = server.log();
                        let what = if log.contains("panicked") || log.contains("BUG REPORT") {
                            let panic_line = log
                                .lines()
                                .skip_while(|l| !l.contains("panicked"))
                                .take(2)
                                .collect::<Vec<_>>()
                                .join(" ");
                            format!("the server crashed: {panic_line}")
                        } else {
                            "the server is stuck".to_string()
                        };
                        Some(format!(
                            "{args:?} on a {mode} lock with a read count of {I64_MAX}: no reply \
                             after {took:?} ({e}); {what}"
                        ))
                    }
                    _ => {
                        let mut c2 = server.conn();
                        let pong: redis::RedisResult<String> = redis::cmd("PING").query(&mut c2);
                        match pong {
                            Ok(p) if p == "PONG" && server.is_running() => None,
                            other => Some(format!("{args:?}: server gone after reply: {other:?}")),
                        }
                    }
                };
                if problem.is_some() {
                    // Do not wait for a stuck server to exit on SIGTERM.
                    server.kill9();
                } else {
                    eprintln!("{args:?} on a {mode} lock: {reply:?} in {took:?}");
                }
                problem
            })
        })
        .collect();
    let problems: Vec<String> = handles
        .into_iter()
        .filter_map(|h| h.join().expect("case thread panicked"))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn unlock_latch_of_the_wrong_type() {
    let mut f = Fixture::new();
    f.populate();
    for (lock, owner, mode) in [
        ("L", "u1", "READ"),
        ("L", "u1", "WRITE"),
        ("L", "nobody", "READ"),
    ] {
        for id in ["req", "hreq"] {
            f.expect_error(
                &["RWLOCK.UNLOCK", lock, owner, mode, "REQUEST", id, "60000"],
                "WRONGTYPE",
                &["wrong kind"],
            );
        }
        f.expect_error(
            &[
                "RWLOCK.UNLOCK",
                lock,
                owner,
                mode,
                "REQUEST",
                "bad",
                "60000",
            ],
            "ERR",
            &["latch", "corrupt"],
        );
    }
    // Also with the lock absent (a valid latch-less unlock would publish).
    f.ok(&["RPUSH", "redisson_unlock_latch:{N}:req", "1"]);
    f.expect_error(
        &[
            "RWLOCK.UNLOCK",
            "N",
            "n",
            "WRITE",
            "REQUEST",
            "req",
            "60000",
        ],
        "WRONGTYPE",
        &["wrong kind"],
    );
    eprintln!("{} cases", f.checked);
}

// ---------------------------------------------------------------------------
// Random malformed calls
// ---------------------------------------------------------------------------

const FUZZ_LOCKS: &[&str] = &["F0", "F1", "F2", "F3", "F4", "{f}:a", "{f}:b", "x{f}"];
const FUZZ_OWNERS: &[&str] = &["o1", "o2", "o3:7"];
const FUZZ_IDS: &[&str] = &["q1", "q2"];

struct Gen {
    rng: Rng,
    big: Vec<u8>,
}

impl Gen {
    /// Up to `max_len` bytes, mostly printable: a name or number the module
    /// might half-parse finds more code paths than uniform noise does.
    fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.rng.below(max_len + 1);
        (0..len)
            .map(|_| match self.rng.below(10) {
                0 => 0u8,
                1 => *self.rng.pick(b"{}:"),
                2 => self.rng.below(256) as u8,
                _ => b' ' + self.rng.below(95) as u8,
            })
            .collect()
    }

    fn big(&mut self) -> Vec<u8> {
        let mut b = self.big.clone();
        let n = b.len();
        b[self.rng.below(n as u64) as usize] = self.rng.below(256) as u8;
        b
    }

    fn name(&mut self) -> Vec<u8> {
        match self.rng.below(100) {
            0..=64 => self.rng.pick(FUZZ_LOCKS).as_bytes().to_vec(),
            65..=79 => self
                .rng
                .pick(&["", "a{b", "{}x", "a}b", "{", "}", "{}", "F0:write", "mode"][..])
                .as_bytes()
                .to_vec(),
            80..=97 => self.bytes(16),
            _ => self.big(),
        }
    }

    fn owner(&mut self) -> Vec<u8> {
        match self.rng.below(100) {
            0..=64 => self.rng.pick(FUZZ_OWNERS).as_bytes().to_vec(),
            65..=84 => self
                .rng
                .pick(
                    &[
                        "",
                        "mode",
                        "o1:write",
                        ":write",
                        "\0",
                        "o1\0",
                        "{o}",
                        "MODE",
                        "write",
                        "o1:write:write",
                        "o1:writ",
                    ][..],
                )
                .as_bytes()
                .to_vec(),
            85..=97 => self.bytes(16),
            _ => self.big(),
        }
    }

    fn number(&mut self) -> Vec<u8> {
        match self.rng.below(100) {
            0..=39 => self
                .rng
                .pick(&["60000", "600000", "315360000000", "100000"][..])
                .as_bytes()
                .to_vec(),
            40..=89 => self.rng.pick(BAD_MILLIS).as_bytes().to_vec(),
            90..=97 => self.bytes(8),
            _ => self.big(),
        }
    }

    fn word(&mut self) -> Vec<u8> {
        let words = [
            "READ", "WRITE", "read", "write", "Read", "LEASE", "REQUEST", "lease", "request",
            "BLOCK", "FOO", "", "BOTH", "READ\0",
        ];
        self.rng.pick(&words[..]).as_bytes().to_vec()
    }

    fn any(&mut self) -> Vec<u8> {
        match self.rng.below(6) {
            0 => self.name(),
            1 => self.owner(),
            2 => self.number(),
            3 => self.word(),
            4 => self.bytes(32),
            _ => self.big(),
        }
    }

    fn call(&mut self) -> Vec<Vec<u8>> {
        let cmd = *self.rng.pick(&COMMANDS);
        let mut args = vec![cmd.as_bytes().to_vec()];
        if self.rng.chance(20) {
            // Random arity, random arguments.
            for _ in 0..self.rng.below(9) {
                let a = self.any();
                args.push(a);
            }
            return args;
        }
        match cmd {
            "RWLOCK.READ" | "RWLOCK.WRITE" | "RWLOCK.RENEW" => {
                args.push(self.name());
                args.push(self.owner());
                args.push(self.number());
            }
            "RWLOCK.UNLOCK" => {
                args.push(self.name());
                args.push(self.owner());
                args.push(self.word());
                for _ in 0..self.rng.below(3) {
                    match self.rng.below(5) {
                        0 | 1 => {
                            args.push(b"LEASE".to_vec());
                            args.push(self.number());
                        }
                        2 | 3 => {
                            args.push(b"REQUEST".to_vec());
                            let id = if self.rng.chance(80) {
                                self.rng.pick(FUZZ_IDS).as_bytes().to_vec()
                            } else {
                                self.bytes(8)
                            };
                            args.push(id);
                            args.push(self.number());
                        }
                        _ => args.push(self.any()),
                    }
                }
            }
            "RWLOCK.FORCEUNLOCK" => {
                args.push(self.name());
                if self.rng.chance(50) {
                    args.push(self.word());
                }
            }
            _ => args.push(self.name()),
        }
        // Sometimes one more, one fewer, or one replaced argument.
        match self.rng.below(10) {
            0 => {
                let a = self.any();
                args.push(a);
            }
            1 if args.len() > 1 => {
                args.pop();
            }
            2 if args.len() > 1 => {
                let i = 1 + self.rng.below(args.len() as u64 - 1) as usize;
                args[i] = self.any();
            }
            _ => {}
        }
        args
    }
}

/// Fills the fuzz locks (and some latches) with keys of random types: valid
/// locks, other types, corrupt hashes. No huge counts (see the test above).
fn populate_random(conn: &mut testkit::Conn, rng: &mut Rng) {
    let _: () = query(conn, &["FLUSHALL"]);
    let q = |conn: &mut testkit::Conn, args: &[&str]| {
        testkit::ok(conn, args);
    };
    for lock in FUZZ_LOCKS {
        match rng.below(10) {
            0 => {}
            1 => q(conn, &["SET", lock, "v"]),
            2 => q(conn, &["RPUSH", lock, "a"]),
            3 => q(conn, &["SADD", lock, "a"]),
            4 => q(conn, &["ZADD", lock, "1", "a"]),
            5 => {
                let mode = *rng.pick(&["banana", "read", "write", "", "READ"][..]);
                let count = *rng.pick(&["x", "1.5", "01", "0", "-3", "", "1", "2"][..]);
                q(
                    conn,
                    &["HSET", lock, "mode", mode, "o1", count, "o2:write", "1"],
                );
            }
            6 => q(conn, &["HSET", lock, "o1", "1"]),
            7 | 8 => {
                for _ in 0..=rng.below(3) {
                    let owner = *rng.pick(FUZZ_OWNERS);
                    q(conn, &["RWLOCK.READ", lock, owner, "600000"]);
                }
            }
            _ => {
                let owner = *rng.pick(FUZZ_OWNERS);
                q(conn, &["RWLOCK.WRITE", lock, owner, "600000"]);
                if rng.chance(50) {
                    q(conn, &["RWLOCK.READ", lock, owner, "600000"]);
                }
            }
        }
        for id in FUZZ_IDS {
            let latch = testkit::latch_key(lock, id);
            match rng.below(6) {
                0 => q(conn, &["SET", &latch, "1", "PX", "600000"]),
                1 => q(conn, &["SET", &latch, "x"]),
                2 => q(conn, &["RPUSH", &latch, "1"]),
                _ => {}
            }
        }
    }
}

#[test]
fn random_malformed_calls() {
    const CALLS: usize = 5000;
    const BUDGET: Duration = Duration::from_secs(25);
    let mut server = Server::start(&[]);
    let mut conn = server.conn();
    enable_keyspace_events(&mut conn);
    let collector = Collector::start(&server, &["*"]);
    let s = seed(0xBAD_1F0);
    let mut gen = Gen {
        rng: Rng(s),
        big: vec![b'k'; 10 * 1024],
    };
    let mut setup_rng = Rng(s ^ 0xFFFF);
    let started = Instant::now();
    let (mut done, mut errors, mut checked, mut ok) = (0usize, 0usize, 0usize, 0usize);
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    while done < CALLS && started.elapsed() < BUDGET {
        if done % 500 == 0 {
            populate_random(&mut conn, &mut setup_rng);
        }
        let args = gen.call();
        let check = done % 2 == 0;
        let before = if check {
            let _ = collector.sync(&mut conn);
            Some(snapshot(&mut conn))
        } else {
            None
        };
        let reply = call(&mut conn, &args);
        done += 1;
        match reply {
            Ok(_) => ok += 1,
            Err(e) => {
                assert!(
                    !e.is_io_error() && !e.is_connection_dropped() && !e.is_timeout(),
                    "{}: connection error {e}\n---- log ----\n{}",
                    show_args(&args),
                    server.log()
                );
                let code = e.code().unwrap_or("<none>").to_string();
                assert!(
                    code == "ERR" || code == "WRONGTYPE",
                    "{}: unexpected error {e}",
                    show_args(&args)
                );
                let text = err_text(&e).to_lowercase();
                assert!(
                    !text.contains("panic") && !text.contains("unwrap"),
                    "{}: {text}",
                    show_args(&args)
                );
                *codes.entry(text.chars().take(40).collect()).or_default() += 1;
                errors += 1;
                if let Some(before) = before {
                    let after = snapshot(&mut conn);
                    let now = server_ms(&mut conn);
                    let d = diff_unexpired(&before, &after, now);
                    assert!(
                        d.is_empty(),
                        "{} failed ({text}) but changed the database:\n{d}",
                        show_args(&args)
                    );
                    // Keys expiring on their own (short leases) are no effect.
                    let events: Vec<(String, String)> = events_str(&collector.sync(&mut conn))
                        .into_iter()
                        .filter(|(c, p)| p != "expired" && !c.ends_with(":expired"))
                        .collect();
                    assert!(
                        events.is_empty(),
                        "{} failed ({text}) but raised events: {}",
                        show_args(&args),
                        show_events(&events)
                    );
                    checked += 1;
                }
            }
        }
    }
    eprintln!(
        "{done} calls in {:?}: {ok} ok, {errors} errors ({checked} checked for no effect)",
        started.elapsed()
    );
    for (text, n) in &codes {
        eprintln!("  {n:5}  {text}");
    }
    assert!(done >= 1000, "only {done} calls within {BUDGET:?}");
    assert!(
        errors >= done / 4,
        "too few errors: the calls were not malformed enough"
    );
    assert!(
        ok >= done / 20,
        "too few successes: the calls never reached a lock"
    );
    assert!(checked >= errors / 4, "too few error replies checked");
    // The server survived.
    let pong = reply_text(&mut conn, &["PING"]);
    assert_eq!(pong, "PONG");
    assert!(server.is_running(), "redis-server exited");
    let info = reply_text(&mut conn, &["INFO"]);
    assert!(info.contains("redis_version"), "INFO: {info}");
    let mut fresh = server.conn();
    let pong = reply_text(&mut fresh, &["PING"]);
    assert_eq!(pong, "PONG");
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

fn config_get(conn: &mut testkit::Conn, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(conn)
        .unwrap_or_else(|e| panic!("CONFIG GET {name}: {e}"));
    assert_eq!(v.len(), 2, "CONFIG GET {name}: {v:?}");
    v[1].clone()
}

fn config_set(conn: &mut testkit::Conn, name: &str, value: &str) -> redis::RedisResult<()> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(conn)
}

#[test]
fn config_set_refuses_bad_values() {
    let server = Server::start(&[]);
    let mut conn = server.conn();
    assert_eq!(config_get(&mut conn, "rwlock.default-lease"), "30000");
    assert_eq!(config_get(&mut conn, "rwlock.publish"), "auto");
    assert_eq!(config_get(&mut conn, "rwlock.fairness"), "none");

    let check = |conn: &mut testkit::Conn, name: &str, bad: &str, keeps: &str| {
        match config_set(conn, name, bad) {
            Ok(()) => panic!("CONFIG SET {name} {bad:?} was accepted"),
            Err(e) => assert_eq!(e.code(), Some("ERR"), "CONFIG SET {name} {bad:?}: {e}"),
        }
        assert_eq!(
            config_get(conn, name),
            keeps,
            "{name} changed after CONFIG SET {bad:?} failed"
        );
    };
    for bad in ["0", "-1", "abc", "315360000001", "1.5", "", TWO_POW_63] {
        check(&mut conn, "rwlock.default-lease", bad, "30000");
    }
    for bad in ["banana", "", "publish spublish"] {
        check(&mut conn, "rwlock.publish", bad, "auto");
    }
    for bad in ["fair", "banana", ""] {
        check(&mut conn, "rwlock.fairness", bad, "none");
    }
    for bad in ["-1", "abc", "1.5", "", TWO_POW_63] {
        check(&mut conn, "rwlock.token-gap", bad, "1000000000");
    }

    // Good values are taken, and a later bad one keeps them.
    config_set(&mut conn, "rwlock.default-lease", "45000").expect("set 45000");
    config_set(&mut conn, "rwlock.publish", "spublish").expect("set spublish");
    check(&mut conn, "rwlock.default-lease", "0", "45000");
    check(&mut conn, "rwlock.publish", "banana", "spublish");
    // The default lease in use is the one kept: a write re-entry released
    // without LEASE gets it as its TTL.
    let _: redis::Value = redis::cmd("RWLOCK.WRITE")
        .arg("D")
        .arg("d")
        .arg(600_000)
        .query(&mut conn)
        .expect("WRITE");
    let _: redis::Value = redis::cmd("RWLOCK.WRITE")
        .arg("D")
        .arg("d")
        .arg(600_000)
        .query(&mut conn)
        .expect("WRITE");
    let r: i64 = query(&mut conn, &["RWLOCK.UNLOCK", "D", "d", "WRITE"]);
    assert_eq!(r, 0);
    let pttl: i64 = query(&mut conn, &["PTTL", "D"]);
    assert!(
        (40_000..=45_000).contains(&pttl),
        "PTTL {pttl} after an unlock with default-lease 45000"
    );
}

/// Runs redis-server with the module and `module_args`, expecting it to
/// exit during startup. Bounded: killed by PID after 10 s, or as soon as it
/// reports it is ready. Returns its exit status (None if it had to be
/// killed) and its log.
fn start_expecting_failure(module_args: &[&str]) -> (Option<ExitStatus>, String) {
    let dir: PathBuf = std::env::temp_dir().join(testkit::unique("rwlock-badargs"));
    fs::create_dir_all(&dir).expect("create dir");
    let log_path = dir.join("redis.log");
    let log = File::create(&log_path).expect("create log");
    let log_err = log.try_clone().expect("dup log");
    let module = module_path();
    let socket = dir.join("redis.sock");
    let mut child = Command::new(redis_server_bin())
        .arg("--port")
        .arg("0")
        .arg("--unixsocket")
        .arg(&socket)
        .arg("--dir")
        .arg(&dir)
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--loadmodule")
        .arg(&module)
        .args(module_args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .spawn()
        .expect("spawn redis-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("Ready to accept connections") || Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let text = fs::read_to_string(&log_path).unwrap_or_default();
    let _ = fs::remove_dir_all(&dir);
    (status, text)
}

/// The fair lock (contract §13): every malformed call, and every call on
/// keys of the wrong type or a corrupt count, is an error that changes
/// nothing, neither the hash nor the line (no purge of its stale head).
#[test]
fn fair_lock_bad_input() {
    let mut f = Fixture::new();
    f.populate();
    // F: held by f with a corrupt count beside, its line with a stale head.
    f.ok(&["FAIRLOCK.ACQUIRE", "F", "f", "900000"]);
    f.ok(&["HSET", "F", "bad", "x"]);
    f.ok(&["RPUSH", "redisson_lock_queue:{F}", "stale", "w"]);
    f.ok(&[
        "ZADD",
        "redisson_lock_timeout:{F}",
        "1",
        "stale",
        "99999999999999",
        "w",
    ]);
    // Q: a line of the wrong type; T: deadlines of the wrong type.
    f.ok(&["SET", "redisson_lock_queue:{Q}", "x"]);
    f.ok(&["SET", "redisson_lock_timeout:{T}", "x"]);
    f.drain();
    for args in [
        &["FAIRLOCK.ACQUIRE"][..],
        &["FAIRLOCK.ACQUIRE", "F", "f"],
        &[
            "FAIRLOCK.ACQUIRE",
            "F",
            "f",
            "1",
            "WAIT",
            "1",
            "NOQUEUE",
            "NOREENTRY",
            "BLOCK",
            "1",
            "REQUEST",
            "i",
            "1",
            "HELD",
            "0",
            "x",
        ],
        &["FAIRLOCK.CANCEL", "F"],
        &["FAIRLOCK.UNLOCK", "F"],
        &["FAIRLOCK.FORCEUNLOCK"],
        &["FAIRLOCK.FORCEUNLOCK", "F", "x"],
        &["FAIRLOCK.INFO"],
    ] {
        f.expect_error(args, "ERR", ARITY);
    }
    for args in [
        &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "WAIT"][..],
        &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "REQUEST", "i"],
        &[
            "FAIRLOCK.ACQUIRE",
            "F",
            "g",
            "1000",
            "WAIT",
            "1",
            "BLOCK",
            "1",
            "x",
        ],
        &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "NOQUEUE", "NOQUEUE"],
        &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "BLOCK"],
        &[
            "FAIRLOCK.ACQUIRE",
            "F",
            "g",
            "1000",
            "BLOCK",
            "1",
            "BLOCK",
            "1",
        ],
        &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "FENCED"],
        &["FAIRLOCK.CANCEL", "F", "g", "NOWAIT", "1"],
        &["FAIRLOCK.UNLOCK", "F", "f", "REQUEST", "r"],
    ] {
        f.expect_error(args, "ERR", SYNTAX);
    }
    for v in ["-1", "x", "315360000001", ""] {
        f.expect_error(
            &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "WAIT", v],
            "ERR",
            &["WAIT"],
        );
        f.expect_error(&["FAIRLOCK.CANCEL", "F", "g", "WAIT", v], "ERR", &["WAIT"]);
        f.expect_error(
            &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "BLOCK", v],
            "ERR",
            &["BLOCK"],
        );
        f.expect_error(&["FAIRLOCK.ACQUIRE", "F", "g", v], "ERR", &["lease"]);
        f.expect_error(
            &["FAIRLOCK.ACQUIRE", "F", "g", "1000", "REQUEST", "i", v],
            "ERR",
            &["ttl"],
        );
    }
    for owner in ["", "mode", "x:write"] {
        f.expect_error(&["FAIRLOCK.ACQUIRE", "F", owner, "1000"], "ERR", &["owner"]);
        f.expect_error(&["FAIRLOCK.CANCEL", "F", owner], "ERR", &["owner"]);
        f.expect_error(&["FAIRLOCK.UNLOCK", "F", owner], "ERR", &["owner"]);
    }
    // BLOCK waits in the line, NOQUEUE never joins it.
    f.expect_error(
        &[
            "FAIRLOCK.ACQUIRE",
            "F",
            "g",
            "1000",
            "NOQUEUE",
            "BLOCK",
            "10",
        ],
        "ERR",
        &["BLOCK and NOQUEUE"],
    );
    f.expect_error(
        &["FAIRLOCK.ACQUIRE", "F", "bad", "1000"],
        "ERR",
        &["corrupt"],
    );
    f.expect_error(&["FAIRLOCK.UNLOCK", "F", "bad"], "ERR", &["corrupt"]);
    for lock in ["S", "Li", "Q", "T"] {
        f.expect_error(
            &["FAIRLOCK.ACQUIRE", lock, "g", "1000"],
            "WRONGTYPE",
            &["wrong"],
        );
        f.expect_error(&["FAIRLOCK.UNLOCK", lock, "g"], "WRONGTYPE", &["wrong"]);
        f.expect_error(&["FAIRLOCK.FORCEUNLOCK", lock], "WRONGTYPE", &["wrong"]);
        f.expect_error(&["FAIRLOCK.INFO", lock], "WRONGTYPE", &["wrong"]);
    }
    for lock in ["Q", "T"] {
        f.expect_error(&["FAIRLOCK.CANCEL", lock, "g"], "WRONGTYPE", &["wrong"]);
    }
    f.expect_error(
        &["FAIRLOCK.ACQUIRE", "a{b", "g", "1000"],
        "ERR",
        &["braces"],
    );
    f.expect_error(
        &["FAIRLOCK.UNLOCK", "L", "u1", "REQUEST", "bad", "1000"],
        "ERR",
        &["latch"],
    );
}

#[test]
fn bad_module_args_fail_the_start() {
    let cases: &[(&[&str], &str)] = &[
        (&["default-lease", "0"], "default-lease"),
        (&["default-lease", "abc"], "default-lease"),
        (&["default-lease", "315360000001"], "default-lease"),
        (&["rwlock.default-lease", "-5"], "default-lease"),
        (&["publish", "banana"], "banana"),
        (&["fairness", "lifo"], "fairness"),
        (&["fair-wait", "-1"], "fair-wait"),
        (&["fair-wait", "315360000001"], "fair-wait"),
        (&["token-gap", "-1"], "token-gap"),
        (&["token-gap", "many"], "token-gap"),
        (&["nosuch", "1"], "nosuch"),
        (&["default-lease"], ""),
        (&["default-lease", "5000", "publish"], ""),
    ];
    let handles: Vec<_> = cases
        .iter()
        .map(|&(args, mention)| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            thread::spawn(move || {
                let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                let (status, log) = start_expecting_failure(&refs);
                let status = status.unwrap_or_else(|| {
                    panic!("module args {args:?}: redis-server started (or hung)\n{log}")
                });
                assert!(
                    !status.success(),
                    "module args {args:?}: exit status {status}\n{log}"
                );
                // The module itself explains (RM_Log lines read "<rwlock> …").
                let explained = log
                    .lines()
                    .filter(|l| l.contains("<rwlock>") && !l.contains("defrag"))
                    .any(|l| l.contains(mention));
                assert!(
                    explained,
                    "module args {args:?}: no rwlock line mentioning {mention:?} in the log\n{log}"
                );
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a bad-module-args case failed");
    }
}

#[test]
fn good_module_args_are_applied() {
    // The control case of the test above: valid pairs start and apply.
    let server = Server::start_with_module_args(
        &[
            "default-lease",
            "5000",
            "rwlock.publish",
            "publish",
            "fairness",
            "none",
        ],
        &[],
    );
    let mut conn = server.conn();
    assert_eq!(config_get(&mut conn, "rwlock.default-lease"), "5000");
    assert_eq!(config_get(&mut conn, "rwlock.publish"), "publish");
    assert_eq!(config_get(&mut conn, "rwlock.fairness"), "none");
}

/// The multi-hold commands (contract §11): a malformed list, a kind that is
/// none of LOCK, READ and WRITE, a name listed twice, and any hold failing
/// as its single command would fail, each an error that takes no hold,
/// however many of the other listed locks were free.
#[test]
fn multi_hold_lists() {
    let mut f = Fixture::new();
    f.populate();
    let lease = "60000";
    let holds = &["wrong number of arguments", "holds must give"];
    let cases: &[(&[&str], &str, &[&str])] = &[
        (&["LOCK.ACQUIREALL", "m", lease, "HOLDS", "1"], "ERR", ARITY),
        (&["LOCK.UNLOCKALL", "m", "HOLDS", "1"], "ERR", ARITY),
        (&["LOCK.RENEWALL", "m", lease, "HOLDS"], "ERR", ARITY),
        (
            &["LOCK.ACQUIREALL", "m", lease, "HOLDS", "0", "LOCK", "F"],
            "ERR",
            holds,
        ),
        (
            &["LOCK.ACQUIREALL", "m", lease, "HOLDS", "2", "LOCK", "F"],
            "ERR",
            holds,
        ),
        (
            &["LOCK.ACQUIREALL", "m", lease, "HOLDS", "101", "LOCK", "F"],
            "ERR",
            holds,
        ),
        (
            &["LOCK.ACQUIREALL", "m", lease, "HOLDS", "x", "LOCK", "F"],
            "ERR",
            holds,
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "1",
                "LOCK",
                "F",
                "READ",
                "G",
            ],
            "ERR",
            holds,
        ),
        (
            &["LOCK.UNLOCKALL", "m", "HOLDS", "2", "LOCK", "F", "LOCK"],
            "ERR",
            holds,
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "2",
                "LOCK",
                "F",
                "FENCED",
                "G",
            ],
            "ERR",
            &["kind must be"],
        ),
        (
            &["LOCK.RENEWALL", "m", lease, "HOLDS", "1", "UNLOCK", "F"],
            "ERR",
            &["kind must be"],
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "2",
                "LOCK",
                "F",
                "LOCK",
                "F",
            ],
            "ERR",
            &["listed twice"],
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "2",
                "READ",
                "F",
                "WRITE",
                "F",
            ],
            "ERR",
            &["listed twice"],
        ),
        (
            &[
                "LOCK.UNLOCKALL",
                "w",
                "HOLDS",
                "2",
                "WRITE",
                "W",
                "READ",
                "W",
            ],
            "ERR",
            &["listed twice"],
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "1",
                "LOCK",
                "F",
                "BLOCK",
                "1",
            ],
            "ERR",
            holds,
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "BLOCK",
                "-1",
                "HOLDS",
                "1",
                "LOCK",
                "F",
            ],
            "ERR",
            &["block timeout"],
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "FENCED",
                "HOLDS",
                "1",
                "LOCK",
                "F",
            ],
            "ERR",
            SYNTAX,
        ),
        (
            &[
                "LOCK.UNLOCKALL",
                "m",
                "BLOCK",
                "1",
                "HOLDS",
                "1",
                "LOCK",
                "F",
            ],
            "ERR",
            SYNTAX,
        ),
        (
            &["LOCK.ACQUIREALL", "m", "0", "HOLDS", "1", "LOCK", "F"],
            "ERR",
            &["lease"],
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "u1:write",
                lease,
                "HOLDS",
                "1",
                "LOCK",
                "F",
            ],
            "ERR",
            &["owner"],
        ),
        (
            &["LOCK.ACQUIREALL", "m", lease, "HOLDS", "1", "LOCK", "a{b"],
            "ERR",
            &["hash slot"],
        ),
        // One hold failing as its single command fails: the free F and G
        // are not taken.
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "3",
                "LOCK",
                "F",
                "WRITE",
                "G",
                "READ",
                "S",
            ],
            "WRONGTYPE",
            &["wrong kind"],
        ),
        (
            &[
                "LOCK.ACQUIREALL",
                "m",
                lease,
                "HOLDS",
                "2",
                "LOCK",
                "F",
                "READ",
                "Li",
            ],
            "WRONGTYPE",
            &["wrong kind"],
        ),
        (
            &[
                "LOCK.UNLOCKALL",
                "u1",
                "HOLDS",
                "2",
                "READ",
                "L",
                "LOCK",
                "S",
            ],
            "WRONGTYPE",
            &["wrong kind"],
        ),
        (
            &[
                "LOCK.RENEWALL",
                "u1",
                lease,
                "HOLDS",
                "2",
                "READ",
                "L",
                "LOCK",
                "Z",
            ],
            "WRONGTYPE",
            &["wrong kind"],
        ),
    ];
    for (args, code, needles) in cases {
        f.expect_error(args, code, needles);
    }
    // A read-write lock's hash read as a plain lock's is corrupt for the
    // plain machine only when its counts are: W's write field counts 2, so
    // the failing read of a corrupt mode stands in for it.
    f.ok(&["HSET", "C", "mode", "bogus", "x", "1"]);
    f.drain();
    f.expect_error(
        &[
            "LOCK.ACQUIREALL",
            "m",
            lease,
            "HOLDS",
            "2",
            "LOCK",
            "F",
            "READ",
            "C",
        ],
        "ERR",
        &["corrupt lock"],
    );
    eprintln!("{} cases", f.checked);
}

/// Random damage to well-formed multi-hold calls (a word dropped, doubled,
/// swapped for another or for garbage, the count moved; never `BLOCK 0`,
/// which could wait for good): every call the
/// module refuses is an error that changes nothing and raises no event, and
/// none crashes or hangs the server.
#[test]
fn random_malformed_multi_holds() {
    const CALLS: usize = 1000;
    let mut f = Fixture::new();
    f.populate();
    let mut rng = Rng(seed(0xBAD_3017));
    let templates: [&[&str]; 3] = [
        &[
            "LOCK.ACQUIREALL",
            "m",
            "60000",
            "BLOCK",
            "1",
            "HOLDS",
            "3",
            "LOCK",
            "F",
            "READ",
            "L",
            "WRITE",
            "G",
        ],
        &[
            "LOCK.UNLOCKALL",
            "u1",
            "HOLDS",
            "2",
            "READ",
            "L",
            "LOCK",
            "F",
        ],
        &[
            "LOCK.RENEWALL",
            "w",
            "60000",
            "HOLDS",
            "2",
            "WRITE",
            "W",
            "READ",
            "{t}:a",
        ],
    ];
    let words = [
        "HOLDS", "LOCK", "READ", "WRITE", "BLOCK", "-1", "2", "101", "x", "S", "Li", "L", "W", "F",
        "a{b", "", "mode", "u1:write", "FENCED",
    ];
    let (mut refused, mut accepted) = (0, 0);
    for _ in 0..CALLS {
        let mut args: Vec<String> = rng.pick(&templates).iter().map(|s| s.to_string()).collect();
        for _ in 0..1 + rng.below(2) {
            let at = 1 + rng.below(args.len() as u64 - 1) as usize;
            match rng.below(4) {
                0 => {
                    args.remove(at);
                }
                1 => {
                    let again = args[at].clone();
                    args.insert(at, again);
                }
                2 => args[at] = rng.pick(&words).to_string(),
                _ => {
                    let n = args.iter().position(|a| a == "HOLDS").map_or(1, |h| h + 1);
                    if n < args.len() {
                        args[n] = rng.below(6).to_string();
                    }
                }
            }
        }
        let bytes: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        f.drain();
        let before = snapshot(&mut f.conn);
        match call(&mut f.conn, &bytes) {
            Ok(_) => {
                accepted += 1;
                // Undo what a well-formed call took, for the next ones.
                let owners = ["m", "u1", "w"];
                for l in ["F", "G", "L", "W", "{t}:a"] {
                    for o in owners {
                        let _ = call(&mut f.conn, &["HDEL", l, o]);
                    }
                }
                let _ = call(&mut f.conn, &["DEL", "F", "G"]);
                f.populate();
            }
            Err(e) => {
                refused += 1;
                let shown = show_args(&bytes);
                assert!(f.server.is_running(), "{shown}: redis-server exited");
                assert!(
                    matches!(e.code(), Some("ERR" | "WRONGTYPE")),
                    "{shown}: unexpected error {e}"
                );
                let after = snapshot(&mut f.conn);
                let now = server_ms(&mut f.conn);
                let d = diff_unexpired(&before, &after, now);
                assert!(d.is_empty(), "{shown} failed ({e}) but changed:\n{d}");
                // Keys expiring on their own (short leases) are no effect.
                let events: Vec<(String, String)> = events_str(&f.collector.sync(&mut f.conn))
                    .into_iter()
                    .filter(|(c, p)| p != "expired" && !c.ends_with(":expired"))
                    .collect();
                assert!(
                    events.is_empty(),
                    "{shown} failed ({e}) but raised {events:?}"
                );
            }
        }
    }
    eprintln!("{CALLS} damaged multi-hold calls: {refused} refused, {accepted} accepted");
    assert!(refused > CALLS / 2, "most damaged calls are refused");
}

//! Operability against a real server: the `INFO rwlock` counters, the
//! command docs (`COMMAND DOCS`, `COMMAND INFO`, `MODULE LIST`) and how
//! `RWLOCK.INFO` reads in redis-cli with RESP2 and RESP3.

use std::collections::BTreeMap;
use std::process::Command;
use std::thread;

use redis::Value;
use testkit::Conn;
use testkit::{call, expect_reply, in_one_turn, ok, ok_all, reply_text, wait_for_waiters, Server};

/// The `rwlock_*` fields of `INFO <section>`, without their prefix.
fn info(conn: &mut Conn, section: &str) -> BTreeMap<String, u64> {
    let text = reply_text(conn, &["INFO", section]);
    text.lines()
        .filter_map(|l| l.strip_prefix("rwlock_"))
        .map(|l| {
            let (name, value) = l.split_once(':').expect("name:value");
            (
                name.to_string(),
                value.trim().parse().expect("a counter is an integer"),
            )
        })
        .collect()
}

#[test]
fn info_rwlock_counts_every_outcome() {
    let (server, mut c) = Server::started(&[]);
    let mut all_zero = info(&mut c, "rwlock");
    assert_eq!(all_zero.len(), 45, "{all_zero:?}");
    // The census of an empty keyspace saw every key there is.
    assert_eq!(all_zero.remove("census_complete"), Some(1));
    assert!(all_zero.values().all(|v| *v == 0), "{all_zero:?}");

    // Reads: a first hold, a re-entry, another owner joining.
    ok_all(
        &mut c,
        "RWLOCK.READ L a:1 30000; RWLOCK.READ L a:1 30000; RWLOCK.READ L b:1 30000",
    );
    // A writer refused at once, and inside MULTI, where BLOCK cannot wait.
    ok(&mut c, &["RWLOCK.WRITE", "L", "w:1", "30000"]);
    in_one_turn(
        &mut c,
        &[&["RWLOCK.WRITE", "L", "w:1", "30000", "BLOCK", "0"]],
    );
    // Releases: one held, one not held.
    ok(&mut c, &["RWLOCK.UNLOCK", "L", "b:1", "READ"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "L", "b:1", "READ"]);
    // Renewals: one held, one lost.
    ok(&mut c, &["RWLOCK.RENEW", "L", "a:1", "30000"]);
    ok(&mut c, &["RWLOCK.RENEW", "L", "gone:1", "30000"]);
    // Write, write re-entry, write→read re-entry; an idempotent unlock and
    // its retry; a forced unlock that deletes and one that finds nothing.
    ok_all(
        &mut c,
        "RWLOCK.WRITE W w:1 30000; RWLOCK.WRITE W w:1 30000; RWLOCK.READ W w:1 30000",
    );
    for _ in 0..2 {
        let reply = ok(
            &mut c,
            &[
                "RWLOCK.UNLOCK",
                "W",
                "w:1",
                "WRITE",
                "REQUEST",
                "r1",
                "10000",
            ],
        );
        assert_eq!(reply, Value::Int(0));
    }
    expect_reply(&mut c, &["RWLOCK.FORCEUNLOCK", "W"], Value::Int(1));
    expect_reply(&mut c, &["RWLOCK.FORCEUNLOCK", "W"], Value::Int(0));
    // A plain lock, fenced, and its owner's re-entry: two tokens.
    for _ in 0..2 {
        ok(&mut c, &["LOCK.ACQUIRE", "P", "p:1", "30000", "FENCED"]);
    }
    // Nothing has waited nor kept a lease index: other clients' writes do
    // not call into the module.
    assert_eq!(info(&mut c, "rwlock")["keyspace_subscribed"], 0);
    // A wait served by a handoff and one that times out.
    ok(&mut c, &["RWLOCK.WRITE", "H", "w:1", "30000"]);
    let mut waiter_conn = server.conn();
    let waiter = thread::spawn(move || {
        ok(
            &mut waiter_conn,
            &["RWLOCK.READ", "H", "r:1", "30000", "BLOCK", "10000"],
        )
    });
    wait_for_waiters(&mut c, 1);
    assert_eq!(info(&mut c, "rwlock")["locks_with_waiters"], 1);
    ok(&mut c, &["RWLOCK.UNLOCK", "H", "w:1", "WRITE"]);
    assert_eq!(waiter.join().expect("waiter"), Value::Nil);
    ok(&mut c, &["RWLOCK.WRITE", "T", "w:1", "30000"]);
    let timed_out = ok(
        &mut c,
        &["RWLOCK.WRITE", "T", "w:2", "30000", "BLOCK", "20"],
    );
    assert!(matches!(timed_out, Value::Int(t) if t > 0), "{timed_out:?}");

    // A fair lock: taken, a waiter queued that then gives up, released
    // (its queued waiter subscribes to expiries, as the first wait did).
    ok_all(
        &mut c,
        "FAIRLOCK.ACQUIRE F f:1 30000; FAIRLOCK.ACQUIRE F g:1 30000; FAIRLOCK.CANCEL F g:1; FAIRLOCK.UNLOCK F f:1",
    );
    let expected: BTreeMap<String, u64> = [
        // a, a again, b, w's read under its write on W, the handoff to r:1.
        ("read_acquired", 5),
        // W twice, H, T.
        ("write_acquired", 4),
        // P twice.
        ("lock_acquired", 2),
        ("tokens_issued", 2),
        // a's second read, w's second write and its read on W, p's second hold.
        ("reentries", 4),
        // The plain refusal and the one inside MULTI; a timed-out wait is not one.
        ("refused", 2),
        // b's read, w's first write release on W, the release of H, F's.
        ("unlocks", 4),
        ("unlocks_not_held", 1),
        ("unlocks_replayed", 1),
        ("renewals", 1),
        ("renewals_not_held", 1),
        ("force_unlocks", 1),
        // No lock here had 64 read leases.
        ("lease_indexes", 0),
        ("indexed_leases", 0),
        ("waiters", 0),
        ("locks_with_waiters", 0),
        ("waits_started", 2),
        ("waits_served", 1),
        ("waits_timed_out", 1),
        ("waits_aborted", 0),
        // The handoff came from the unlock itself, not from an outside change.
        ("wait_rechecks", 0),
        ("deadlocks", 0),
        // Since the first wait.
        ("keyspace_subscribed", 1),
        // Nothing here took a hold with SESSION.
        ("session_clients", 0),
        ("session_holds", 0),
        ("session_permits", 0),
        ("session_binds", 0),
        ("session_renewals", 0),
        ("session_releases", 0),
        ("session_permits_released", 0),
        ("fair_acquired", 1),
        ("fair_queued", 1),
        ("fair_cancels", 1),
        // No semaphore here.
        ("permits_acquired", 0),
        ("permits_released", 0),
        // No latch here.
        ("latch_awaited", 0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let mut got = info(&mut c, "rwlock");
    // The waits' lengths depend on timing: the 20 ms timeout is the longest.
    let waits: Vec<u64> = ["wait_ms_p50", "wait_ms_p99", "wait_ms_max"]
        .iter()
        .map(|k| got.remove(*k).expect("a wait percentile"))
        .collect();
    assert!(waits[0] <= waits[1] && waits[1] == waits[2], "{waits:?}");
    assert!((20..5_000).contains(&waits[2]), "{waits:?}");
    // The census of the holds left (tests/inspect.rs checks its counts).
    let census: Vec<u64> = [
        "read_holds",
        "write_holds",
        "lock_holds",
        "locks_held",
        "census_keys",
        "census_complete",
    ]
    .iter()
    .map(|k| got.remove(*k).expect("a census field"))
    .collect();
    assert!(census[3] <= census[0] + census[1] + census[2], "{census:?}");
    assert!(census[3] <= census[4] && census[5] == 1, "{census:?}");
    assert_eq!(got, expected);
}

#[test]
fn info_sections_are_named_and_selectable() {
    let (_server, mut c) = Server::started(&[]);
    let text = reply_text(&mut c, &["INFO", "rwlock"]);
    let headers: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headers,
        vec!["# rwlock_locks", "# rwlock_waiting", "# rwlock_sessions"]
    );
    let locks = info(&mut c, "rwlock_locks");
    assert!(locks.contains_key("read_acquired") && !locks.contains_key("waiters"));
    let waiting = info(&mut c, "rwlock_waiting");
    assert!(waiting.contains_key("waiters") && !waiting.contains_key("read_acquired"));
    let everything = reply_text(&mut c, &["INFO", "everything"]);
    assert!(everything.contains("# rwlock_locks\r\nrwlock_read_acquired:0"));
}

/// A flat `[name, value, name, value …]` reply (RESP2's form of a map).
fn fields(value: &Value) -> BTreeMap<String, Value> {
    let Value::Array(items) = value else {
        panic!("expected a flat map, got {value:?}")
    };
    items
        .chunks(2)
        .map(|pair| (text(&pair[0]), pair[1].clone()))
        .collect()
}

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf8"),
        Value::SimpleString(s) => s.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn list(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// Renders an argument list as redis-cli 7.2+ renders its hints from
/// `COMMAND DOCS`: `[…]` optional, `a|b` one of, the token before a value.
fn hint(args: &[Value]) -> String {
    args.iter()
        .map(|a| {
            let f = fields(a);
            let subs = || {
                f.get("arguments")
                    .map(|v| list(v).to_vec())
                    .unwrap_or_default()
            };
            let body = match text(&f["type"]).as_str() {
                "pure-token" => text(&f["token"]),
                "oneof" => subs()
                    .iter()
                    .map(|s| hint(std::slice::from_ref(s)))
                    .collect::<Vec<_>>()
                    .join("|"),
                "block" => hint(&subs()),
                _ => text(&f["name"]),
            };
            let body = match (f.get("token"), text(&f["type"]).as_str()) {
                (Some(token), t) if t != "pure-token" => format!("{} {body}", text(token)),
                _ => body,
            };
            let optional = f
                .get("flags")
                .is_some_and(|flags| list(flags).iter().any(|x| text(x) == "optional"));
            if optional {
                format!("[{body}]")
            } else {
                body
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `MODULE LIST`'s encoding of a semantic version: major*10000+minor*100+patch.
fn encoded(version: &str) -> i64 {
    let parts: Vec<i64> = version
        .split('.')
        .map(|p| p.parse().expect("numeric version"))
        .collect();
    parts[0] * 10_000 + parts[1] * 100 + parts[2]
}

#[test]
fn command_docs_give_summary_arguments_and_since() {
    let (_server, mut c) = Server::started(&[]);
    let syntax = [
        (
            "rwlock.read",
            "lock owner lease [BLOCK milliseconds] [SESSION] [REQUEST id ttl] [HELD n]",
        ),
        (
            "rwlock.write",
            "lock owner lease [BLOCK milliseconds] [SESSION] [FENCED] [REQUEST id ttl] [HELD n]",
        ),
        (
            "rwlock.unlock",
            "lock owner READ|WRITE [LEASE milliseconds] [REQUEST id ttl] [HELD n]",
        ),
        ("rwlock.renew", "lock owner lease"),
        ("rwlock.forceunlock", "lock [READ|WRITE]"),
        ("rwlock.info", "lock"),
        (
            "lock.acquire",
            "lock owner lease [BLOCK milliseconds] [SESSION] [FENCED] [NOREENTRY] [REQUEST id ttl] [HELD n]",
        ),
        (
            "lock.unlock",
            "lock owner [LEASE milliseconds] [REQUEST id ttl] [HELD n]",
        ),
        ("lock.renew", "lock owner lease"),
        ("lock.forceunlock", "lock"),
        ("lock.info", "lock"),
        (
            "fairlock.acquire",
            "lock owner lease [WAIT milliseconds] [NOQUEUE] [NOREENTRY] [BLOCK milliseconds] [REQUEST id ttl] [HELD n]",
        ),
        (
            "fairlock.unlock",
            "lock owner [LEASE milliseconds] [REQUEST id ttl] [HELD n]",
        ),
    ];
    let crate_version = encoded(env!("CARGO_PKG_VERSION"));
    for (name, expected) in syntax {
        let reply = ok(&mut c, &["COMMAND", "DOCS", name]);
        let top = fields(&reply);
        let doc = fields(&top[name]);
        let summary = text(&doc["summary"]);
        assert!(summary.len() > 30, "{name}: summary {summary:?}");
        assert!(text(&doc["complexity"]).starts_with("O("), "{name}");
        assert_eq!(text(&doc["group"]), "module");
        assert_eq!(text(&doc["module"]), "rwlock");
        let since = text(&doc["since"]);
        assert!(
            encoded(&since) <= crate_version,
            "{name}: since {since} is after this version"
        );
        let args = list(&doc["arguments"]);
        assert_eq!(hint(args), expected, "{name}");
        // The lock is a key bound to the first key spec; every argument
        // explains itself.
        let lock = fields(&args[0]);
        assert_eq!(text(&lock["type"]), "key");
        assert_eq!(lock["key_spec_index"], Value::Int(0));
        for a in args {
            let f = fields(a);
            assert!(f.contains_key("summary"), "{name}: {f:?}");
        }
    }
    let reply = ok(&mut c, &["COMMAND", "DOCS", "rwlock.read"]);
    let read = fields(&fields(&reply)["rwlock.read"]);
    let kinds: Vec<String> = list(&read["arguments"])
        .iter()
        .map(|a| text(&fields(a)["type"]))
        .collect();
    assert_eq!(
        kinds,
        [
            "key",
            "string",
            "integer",
            "integer",
            "pure-token",
            "block",
            "integer"
        ]
    );
    // SESSION came after the commands: its own since.
    let session = fields(&list(&read["arguments"])[4]);
    assert_eq!(text(&session["token"]), "SESSION");
    assert_eq!(text(&session["since"]), "0.3.0");
    // REQUEST came later still.
    let request = fields(&list(&read["arguments"])[5]);
    assert_eq!(text(&request["token"]), "REQUEST");
    assert_eq!(text(&request["since"]), "0.4.0");
    // HELD (docs/design.md §14.8): a count.
    let held = fields(&list(&read["arguments"])[6]);
    assert_eq!(text(&held["token"]), "HELD");
    assert_eq!(text(&held["type"]), "integer");
}

#[test]
fn command_info_gives_arity_flags_and_key_specs() {
    let (_server, mut c) = Server::started(&[]);
    let expected = [
        (
            "rwlock.read",
            -4,
            &["write", "denyoom", "blocking"][..],
            &["RW", "access", "update"][..],
        ),
        (
            "rwlock.write",
            -4,
            &["write", "denyoom", "blocking"],
            &["RW", "access", "update"],
        ),
        ("rwlock.unlock", -4, &["write"], &["RW", "access", "delete"]),
        ("rwlock.renew", 4, &["write"], &["RW", "access", "update"]),
        ("rwlock.forceunlock", -2, &["write"], &["RW", "delete"]),
        ("rwlock.info", 2, &["readonly"], &["RO", "access"]),
        (
            "lock.acquire",
            -4,
            &["write", "denyoom", "blocking"],
            &["RW", "access", "update"],
        ),
        ("lock.unlock", -3, &["write"], &["RW", "access", "delete"]),
        ("lock.renew", 4, &["write"], &["RW", "access", "update"]),
        ("lock.forceunlock", 2, &["write"], &["RW", "delete"]),
        ("lock.info", 2, &["readonly"], &["RO", "access"]),
    ];
    for (name, arity, flags, key_flags) in expected {
        let reply = ok(&mut c, &["COMMAND", "INFO", name]);
        let entry = list(&list(&reply)[0]);
        assert_eq!(text(&entry[0]), name);
        assert_eq!(entry[1], Value::Int(arity), "{name}: arity");
        let got: Vec<String> = list(&entry[2]).iter().map(text).collect();
        for flag in flags {
            assert!(got.iter().any(|g| g == flag), "{name}: {flag} in {got:?}");
        }
        assert_eq!(
            got.iter().any(|g| g == "blocking"),
            flags.contains(&"blocking"),
            "{name}: only acquisitions can block"
        );
        // Legacy first/last/step, kept in step with the key spec.
        assert_eq!(&entry[3..6], &[Value::Int(1), Value::Int(1), Value::Int(1)]);
        let specs = list(&entry[8]);
        assert_eq!(specs.len(), 1, "{name}: one key spec");
        let spec = fields(&specs[0]);
        let got: Vec<String> = list(&spec["flags"]).iter().map(text).collect();
        assert_eq!(got, key_flags, "{name}: key spec flags");
        let begin = fields(&spec["begin_search"]);
        assert_eq!(text(&begin["type"]), "index");
        assert_eq!(fields(&begin["spec"])["index"], Value::Int(1));
        let find = fields(&spec["find_keys"]);
        assert_eq!(text(&find["type"]), "range");
        let range = fields(&find["spec"]);
        assert_eq!(range["lastkey"], Value::Int(0));
        assert_eq!(range["keystep"], Value::Int(1));
    }
    // Redis checks the arity itself now, with its usual error.
    let e = call(&mut c, &["RWLOCK.RENEW", "L", "u:1"]).expect_err("arity");
    assert!(
        e.to_string()
            .contains("wrong number of arguments for 'rwlock.renew'"),
        "{e}"
    );
}

#[test]
fn module_list_shows_the_crate_version() {
    let (_server, mut c) = Server::started(&[]);
    let reply = ok(&mut c, &["MODULE", "LIST"]);
    // Valkey 9 lists its Lua engine as a module too.
    let module = list(&reply)
        .iter()
        .map(fields)
        .find(|m| text(&m["name"]) == "rwlock")
        .expect("rwlock in MODULE LIST");
    assert_eq!(
        module["ver"],
        Value::Int(encoded(env!("CARGO_PKG_VERSION")))
    );
}

/// redis-cli's human-readable rendering (`--no-raw`), with `-3` for RESP3.
fn redis_cli(server: &Server, resp3: bool, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.arg("-p").arg(server.port.to_string()).arg("--no-raw");
    if resp3 {
        cmd.arg("-3");
    }
    let out = cmd.args(args).output().expect("run redis-cli");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf8")
}

/// Replaces every run of digits after "(integer) " with N: TTLs tick.
fn mask_ttls(rendered: &str) -> String {
    rendered
        .lines()
        .map(|l| match l.find("(integer) ") {
            Some(at) if l[at + 10..].bytes().all(|b| b.is_ascii_digit()) => {
                format!("{}(integer) N", &l[..at])
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn rwlock_info_reads_at_a_glance_in_redis_cli_resp2_and_resp3() {
    let (server, mut c) = Server::started(&[]);
    ok_all(
        &mut c,
        "RWLOCK.WRITE orders u1:1 60000; RWLOCK.READ orders u1:1 30000; \
         RWLOCK.READ orders u1:1 30000",
    );
    let expected = "\
1) mode
2) \"write\"
3) ttl
4) (integer) N
5) owners
6) 1)  1) owner
       2) \"u1:1\"
       3) reads
       4) (integer) N
       5) writes
       6) (integer) N
       7) leases
       8) 1) (integer) N
          2) (integer) N
       9) session_reads
      10) (integer) N
      11) session_writes
      12) (integer) N
7) waiters
8) (empty array)";
    for resp3 in [false, true] {
        let shown = redis_cli(&server, resp3, &["RWLOCK.INFO", "orders"]);
        assert_eq!(mask_ttls(&shown), expected, "RESP3: {resp3}\n{shown}");
        assert!(shown.contains("4) (integer) 2\n"), "two reads: {shown}");
        assert!(shown.contains("6) (integer) 1\n"), "one write: {shown}");
    }
    let expected_none =
        "1) mode\n2) \"none\"\n3) ttl\n4) (integer) -2\n5) owners\n6) (empty array)\n7) waiters\n8) (empty array)";
    for resp3 in [false, true] {
        let shown = redis_cli(&server, resp3, &["RWLOCK.INFO", "free"]);
        assert_eq!(shown.trim_end(), expected_none, "RESP3: {resp3}");
    }
}

//! Server-side waiting (docs/design.md, contract §4) against a real server: batches,
//! every wake-up path, timeouts, disconnects, MULTI and scripts, fairness,
//! and failover to a replica.

use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    all_keys, assert_counters, assert_took, config_value, eval_lua, expect_reply, in_one_turn, ok,
    poll_until, query, reply_text, rwlock_counter, timer_slack, wait_for_waiters, wait_replica,
    Server,
};

/// The number of fields of the hash `key`.
fn hash_len(conn: &mut Conn, key: &str) -> i64 {
    query(conn, &["HLEN", key])
}

/// An owner's hold count in the lock hash (`field` names its holds).
fn hold_count(conn: &mut Conn, key: &str, field: &str) -> i64 {
    query(conn, &["HGET", key, field])
}

#[test]
fn twenty_readers_behind_a_writer_get_the_lock_in_one_batch() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "WR", "w:1", "30000"]);
    let readers: Vec<_> = (0..20)
        .map(|i| {
            let owner = format!("r:{i}");
            server.spawn_call(&["RWLOCK.READ", "WR", &owner, "30000", "BLOCK", "10000"])
        })
        .collect();
    wait_for_waiters(&mut c, 20);
    expect_reply(
        &mut c,
        &["RWLOCK.UNLOCK", "WR", "w:1", "WRITE"],
        Value::Int(1),
    );
    // The unlock itself handed the lock over: no waiter is left once it replied.
    assert_eq!(rwlock_counter(&mut c, "waiters"), 0);
    assert_eq!(hash_len(&mut c, "WR"), 21, "mode and the 20 readers");
    for r in readers {
        let (reply, _) = r.join().expect("reader thread");
        assert_eq!(reply.expect("reply"), Value::Nil);
    }
    // The unlock's own writes needed no second look at the lock.
    assert_counters(&mut c, &[("waits_served", 20), ("wait_rechecks", 0)]);
}

#[test]
fn a_writer_behind_readers_wakes_on_the_last_unlock() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.READ", "RW", "r:1", "30000"]);
    let writer = server.park_behind(
        &mut c,
        &["RWLOCK.READ", "RW", "r:2", "30000"],
        &["RWLOCK.WRITE", "RW", "w:1", "30000", "BLOCK", "10000"],
    );
    ok(&mut c, &["RWLOCK.UNLOCK", "RW", "r:1", "READ"]);
    assert_eq!(
        rwlock_counter(&mut c, "waiters"),
        1,
        "one reader still holds it"
    );
    ok(&mut c, &["RWLOCK.UNLOCK", "RW", "r:2", "READ"]);
    let (reply, _) = writer.join().expect("writer");
    assert_eq!(reply.expect("reply"), Value::Nil);
    let mode = reply_text(&mut c, &["HGET", "RW", "mode"]);
    assert_eq!(mode, "write");
}

#[test]
fn a_writer_behind_readers_wakes_when_their_leases_run_out() {
    let server = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    // Only the module can wake the writer then: Redis drops the key when it
    // is next read (nobody reads it), and raises no event before.
    ok(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    // Taken before the leases start: the last runs out 1000 ms after it at
    // the earliest, whatever the machine's load.
    let start = Instant::now();
    ok(&mut c, &["RWLOCK.READ", "EX", "r:1", "500"]);
    ok(&mut c, &["RWLOCK.READ", "EX", "r:2", "1000"]);
    let writer = server.spawn_call(&["RWLOCK.WRITE", "EX", "w:1", "30000", "BLOCK", "10000"]);
    let (reply, _) = writer.join().expect("writer");
    let woken = start.elapsed();
    assert_eq!(reply.expect("reply"), Value::Nil);
    // Not before the last lease ran out (less the 20 ms a timer may round
    // to), and at that deadline by the module's own timer: with active
    // expiry off, nothing else would serve it within the 10 s wait.
    assert_took(
        woken,
        Duration::from_millis(1000 - 20),
        Duration::from_millis(1000) + timer_slack(),
        "the writer's wait",
    );
    // It waited (parked before the leases ran out), and was served.
    assert_counters(&mut c, &[("waits_served", 1), ("waiters", 0)]);
}

/// A waiter parked behind a write hold, woken by `release`, which made the
/// module look at the lock's waiters again `rechecks` times.
fn woken_by(rechecks: u64, release: impl FnOnce(&Server, &mut Conn)) {
    let (server, mut c, waiter) = Server::with_waiter(
        &["RWLOCK.WRITE", "K", "w:1", "30000"],
        &["RWLOCK.READ", "K", "r:1", "30000", "BLOCK", "10000"],
    );
    release(&server, &mut c);
    let (reply, waited) = waiter.join().expect("waiter");
    assert_eq!(reply.expect("reply"), Value::Nil);
    assert!(
        waited < Duration::from_secs(5),
        "woken promptly, took {waited:?}"
    );
    assert_eq!(rwlock_counter(&mut c, "waiters"), 0);
    assert_eq!(
        hold_count(&mut c, "K", "r:1"),
        1,
        "the waiter holds the lock"
    );
    assert_eq!(rwlock_counter(&mut c, "wait_rechecks"), rechecks);
}

#[test]
fn a_waiter_is_woken_by_a_redisson_lua_unlock() {
    let dir = testkit::require_lua(testkit::SEED_LUA);
    assert!(dir.join("write_unlock.lua").is_file());
    woken_by(1, |_, c| {
        let reply = eval_lua(
            c,
            "write_unlock",
            &["K", "redisson_rwlock:{K}"],
            &["1", "30000", "w:1:write"],
        )
        .expect("EVAL");
        assert_eq!(reply, Value::Int(1));
    });
}

/// One test per command that wakes the waiter of [`woken_by`] by itself,
/// with the rechecks it makes the module do.
macro_rules! woken_by_command {
    ($($test:ident: $rechecks:expr, $args:expr;)+) => {$(
        #[test]
        fn $test() {
            woken_by($rechecks, |_, c| {
                ok(c, $args);
            });
        }
    )+};
}

woken_by_command! {
    a_waiter_is_woken_by_del: 1, &["DEL", "K"];
    a_waiter_is_woken_by_unlink: 1, &["UNLINK", "K"];
    a_waiter_is_woken_by_flushall: 1, &["FLUSHALL"];
    a_waiter_is_woken_by_flushdb: 1, &["FLUSHDB"];
    a_waiter_is_woken_by_force_unlock: 0, &["RWLOCK.FORCEUNLOCK", "K"];
}

#[test]
fn block_timeout_replies_the_pttl_at_the_deadline() {
    let (server, mut c) = Server::started(&[]);
    let start = Instant::now();
    ok(&mut c, &["RWLOCK.WRITE", "T", "w:1", "30000"]);
    let (reply, waited) = server
        .spawn_call(&["RWLOCK.READ", "T", "r:1", "30000", "BLOCK", "300"])
        .join()
        .expect("waiter");
    let since_write = start.elapsed().as_millis() as i64;
    let pttl = match reply.expect("reply") {
        Value::Int(p) => p,
        other => panic!("expected the PTTL, got {other:?}"),
    };
    // Read at the deadline, at least 300 ms after the lease began, and no
    // earlier than this test saw the reply (less the PTTL's rounding).
    assert!(
        pttl >= 30_000 - since_write - 1 && pttl <= 29_700,
        "PTTL at the timeout, got {pttl} {since_write} ms after the WRITE"
    );
    // Never before its time; at its time (nothing else ends this wait).
    assert_took(
        waited,
        Duration::from_millis(295),
        Duration::from_millis(300) + timer_slack(),
        "the wait",
    );
    assert_counters(&mut c, &[("waiters", 0), ("waits_timed_out", 1)]);
}

/// The value after the label `label` in a flat `label value …` array.
fn labelled(items: &Value, label: &str) -> Value {
    let Value::Array(items) = items else {
        panic!("not an array: {items:?}")
    };
    items
        .chunks(2)
        .find(|p| match &p[0] {
            Value::SimpleString(s) => s == label,
            Value::BulkString(b) => b == label.as_bytes(),
            _ => false,
        })
        .unwrap_or_else(|| panic!("no {label} in {items:?}"))[1]
        .clone()
}

/// The deadline (server clock, ms) of each client parked on `lock`, in
/// serving order, from `RWLOCK.INFO`.
fn wait_deadlines(c: &mut Conn, lock: &str) -> Vec<i64> {
    let info = ok(c, &["RWLOCK.INFO", lock]);
    let Value::Array(waiters) = labelled(&info, "waiters") else {
        panic!("waiters in {info:?}")
    };
    waiters
        .iter()
        .map(|w| match labelled(w, "deadline") {
            Value::Int(ms) => ms,
            other => panic!("deadline {other:?}"),
        })
        .collect()
}

#[test]
fn waits_of_different_lengths_end_in_their_own_order() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "TO", "w:1", "30000"]);
    let lease_end: i64 = query(&mut c, &["PEXPIRETIME", "TO"]);
    // The longest first, then one that ends earlier than anything before it.
    let waits = [600u64, 200, 400];
    let waiters: Vec<_> = waits
        .iter()
        .enumerate()
        .map(|(i, ms)| {
            let owner = format!("r:{i}");
            let timeout = ms.to_string();
            let waiter =
                server.spawn_call(&["RWLOCK.READ", "TO", &owner, "30000", "BLOCK", &timeout]);
            wait_for_waiters(&mut c, i as u64 + 1);
            waiter
        })
        .collect();
    // Each wait's deadline, as the server set it when the client parked.
    let deadlines = wait_deadlines(&mut c, "TO");
    assert_eq!(deadlines.len(), 3, "{deadlines:?}");
    for ((waiter, ms), deadline) in waiters.into_iter().zip(waits).zip(deadlines) {
        let (reply, waited) = waiter.join().expect("waiter");
        let pttl = match reply.expect("reply") {
            Value::Int(pttl) if pttl > 29_000 => pttl,
            other => panic!("{ms} ms: the PTTL at the timeout, got {other:?}"),
        };
        // The reply's PTTL dates the timeout on the server's clock, free of
        // this client's threads waking late: each wait ended at its own
        // deadline, not at another's (the nearest is 200 ms away) nor at a
        // later look of the server's (one serverCron period is 100 ms).
        // 250 ms is the server's own lateness, allowed for a loaded machine.
        let ended = lease_end - pttl;
        assert!(
            (deadline - 1..deadline + 250).contains(&ended),
            "{ms} ms: ended at {ended}, its deadline {deadline}"
        );
        // As the client saw it: never early, and at its time.
        assert_took(
            waited,
            Duration::from_millis(ms),
            Duration::from_millis(ms) + timer_slack(),
            &format!("the {ms} ms wait"),
        );
    }
    assert_counters(&mut c, &[("waiters", 0), ("waits_timed_out", 3)]);
    assert_eq!(hash_len(&mut c, "TO"), 2, "the writer holds it still");
}

#[test]
fn a_renewal_that_shortens_the_lease_wakes_waiters_at_the_new_deadline() {
    let server = Server::start(&["--enable-debug-command", "yes"]);
    let mut c = server.conn();
    // Only the module can wake the waiter then: Redis drops the key when it
    // is next read, and raises no event before.
    ok(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let waiter = server.park_behind(
        &mut c,
        &["RWLOCK.WRITE", "RN", "w:1", "30000"],
        &["RWLOCK.WRITE", "RN", "w:2", "30000", "BLOCK", "10000"],
    );
    let renewed = Instant::now();
    expect_reply(&mut c, &["RWLOCK.RENEW", "RN", "w:1", "300"], Value::Int(1));
    let (reply, _) = waiter.join().expect("waiter");
    let waited = renewed.elapsed();
    assert_eq!(reply.expect("reply"), Value::Nil);
    // At the new deadline: not before it (less a timer's rounding), and long
    // before the old one (30 s) or the wait's end (10 s).
    assert_took(
        waited,
        Duration::from_millis(280),
        Duration::from_millis(300) + timer_slack(),
        "the handoff after the renewal",
    );
    assert_eq!(
        hold_count(&mut c, "RN", "w:2:write"),
        1,
        "the waiter holds the lock"
    );
    // Woken at the new deadline, which the renewal itself set, not by a
    // keyspace event.
    assert_eq!(rwlock_counter(&mut c, "wait_rechecks"), 0);
}

#[test]
fn block_zero_waits_without_limit() {
    let (_server, mut c, waiter) = Server::with_waiter(
        &["RWLOCK.WRITE", "Z", "w:1", "60000"],
        &["RWLOCK.WRITE", "Z", "w:2", "30000", "BLOCK", "0"],
    );
    sleep(Duration::from_millis(1_500));
    assert_eq!(rwlock_counter(&mut c, "waiters"), 1, "still waiting");
    ok(&mut c, &["RWLOCK.UNLOCK", "Z", "w:1", "WRITE"]);
    let (reply, waited) = waiter.join().expect("waiter");
    assert_eq!(reply.expect("reply"), Value::Nil);
    assert!(waited >= Duration::from_millis(1_500));
}

fn used_memory(c: &mut Conn) -> i64 {
    let info = reply_text(c, &["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .expect("used_memory")
        .trim()
        .parse()
        .expect("number")
}

/// Parks a client on `D`, kills its connection, and waits until the module
/// has let go of it.
fn park_and_hang_up(server: &Server, c: &mut Conn, round: usize) {
    let mut waiter = server.conn();
    let request = redis::cmd("RWLOCK.READ")
        .arg("D")
        .arg(format!("r:{round}"))
        .arg("30000")
        .arg("BLOCK")
        .arg("0")
        .get_packed_command();
    // Sent without waiting for the reply: the client parks on the server.
    waiter.send_packed_command(&request).expect("send");
    wait_for_waiters(c, 1);
    let id = client_id_of_waiter(c);
    ok(c, &["CLIENT", "KILL", "ID", &id]);
    drop(waiter);
    poll_until(
        Duration::from_secs(5),
        Duration::from_millis(2),
        "the waiter's release after its client left",
        || (rwlock_counter(c, "waiters") == 0).then_some(()),
    );
}

#[test]
fn a_disconnected_waiter_leaves_nothing_behind() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "D", "w:1", "60000"]);
    // Warm-up: the server's own first-use allocations (client list, INFO).
    for round in 0..20 {
        park_and_hang_up(&server, &mut c, round);
    }
    let before = used_memory(&mut c);
    for round in 20..120 {
        park_and_hang_up(&server, &mut c, round);
    }
    let grown = used_memory(&mut c) - before;
    // A leaked handle costs tens of KB each: 100 would be megabytes.
    assert!(
        grown < 32 * 1024,
        "memory grew by {grown} bytes over 100 waiters"
    );
    assert_counters(&mut c, &[("locks_with_waiters", 0), ("waits_aborted", 120)]);
    // The lock itself is untouched.
    assert_eq!(hash_len(&mut c, "D"), 2);
}

/// The id of the one client blocked in a module command.
fn client_id_of_waiter(c: &mut Conn) -> String {
    let list = reply_text(c, &["CLIENT", "LIST"]);
    list.lines()
        .find(|l| l.contains("flags=b"))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
        .expect("a blocked client")
        .to_string()
}

#[test]
fn multi_and_scripts_make_one_attempt() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "M", "w:1", "30000"]);
    let start = Instant::now();
    let replies = in_one_turn(
        &mut c,
        &[&["RWLOCK.READ", "M", "r:1", "30000", "BLOCK", "0"]],
    );
    assert!(matches!(replies[0], Value::Int(p) if p > 0), "{replies:?}");
    let script = "return redis.call('rwlock.write', KEYS[1], ARGV[1], '1000', 'BLOCK', '0')";
    let reply = ok(&mut c, &["EVAL", script, "1", "M", "w:2"]);
    assert!(matches!(reply, Value::Int(p) if p > 0), "{reply:?}");
    // A `BLOCK 0` that waited would never have replied (the connection's
    // read times out after 10 s): well under that, even on a loaded machine.
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(rwlock_counter(&mut c, "waiters"), 0);
}

#[test]
fn fifo_never_lets_readers_starve_a_waiting_writer() {
    let server = Server::start_with_module_args(&["fairness", "fifo"], &[]);
    let mut c = server.conn();
    let writer = server.park_behind(
        &mut c,
        &["RWLOCK.READ", "S", "r:0", "30000"],
        &["RWLOCK.WRITE", "S", "w:1", "30000", "BLOCK", "10000"],
    );
    // A new reader queues behind the writer instead of joining the read phase.
    let reply = ok(&mut c, &["RWLOCK.READ", "S", "r:1", "30000"]);
    assert!(
        matches!(reply, Value::Int(p) if p > 0),
        "refused: {reply:?}"
    );
    // The current reader may still re-enter: a holder never deadlocks itself.
    expect_reply(&mut c, &["RWLOCK.READ", "S", "r:0", "30000"], Value::Nil);
    // A stream of blocking readers arrives while r:0 holds the lock.
    let readers: Vec<_> = (1..=5)
        .map(|i| {
            server.spawn_call(&[
                "RWLOCK.READ",
                "S",
                &format!("r:{i}"),
                "30000",
                "BLOCK",
                "10000",
            ])
        })
        .collect();
    wait_for_waiters(&mut c, 6);
    ok(&mut c, &["RWLOCK.UNLOCK", "S", "r:0", "READ"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "S", "r:0", "READ"]);
    let (reply, _) = writer.join().expect("writer");
    assert_eq!(
        reply.expect("writer reply"),
        Value::Nil,
        "the writer went first"
    );
    assert_eq!(rwlock_counter(&mut c, "waiters"), 5);
    ok(&mut c, &["RWLOCK.UNLOCK", "S", "w:1", "WRITE"]);
    for r in readers {
        assert_eq!(r.join().expect("reader").0.expect("reply"), Value::Nil);
    }
}

#[test]
fn none_keeps_redissons_unfair_read_phase() {
    let (_server, mut c, writer) = Server::with_waiter(
        &["RWLOCK.READ", "N", "r:0", "30000"],
        &["RWLOCK.WRITE", "N", "w:1", "30000", "BLOCK", "10000"],
    );
    // Readers join the active read phase although a writer waits.
    expect_reply(&mut c, &["RWLOCK.READ", "N", "r:1", "30000"], Value::Nil);
    ok(&mut c, &["RWLOCK.UNLOCK", "N", "r:0", "READ"]);
    assert_eq!(rwlock_counter(&mut c, "waiters"), 1);
    ok(&mut c, &["RWLOCK.UNLOCK", "N", "r:1", "READ"]);
    assert_eq!(writer.join().expect("writer").0.expect("reply"), Value::Nil);
}

#[test]
fn fairness_is_settable_at_run_time() {
    let (_server, mut c) = Server::started(&[]);
    ok(&mut c, &["CONFIG", "SET", "rwlock.fairness", "fifo"]);
    assert_eq!(config_value(&mut c, "rwlock.fairness"), "fifo");
    ok(&mut c, &["CONFIG", "SET", "rwlock.fairness", "none"]);
}

#[test]
fn waiters_fail_at_once_when_the_node_becomes_a_replica() {
    let master = Server::start(&[]);
    let node = Server::start(&[]);
    let mut c = node.conn();
    ok(&mut c, &["RWLOCK.WRITE", "F", "w:1", "30000"]);
    let waiters: Vec<_> = (0..3)
        .map(|i| node.spawn_call(&["RWLOCK.READ", "F", &format!("r:{i}"), "30000", "BLOCK", "0"]))
        .collect();
    wait_for_waiters(&mut c, 3);
    ok(
        &mut c,
        &["REPLICAOF", "127.0.0.1", &master.port.to_string()],
    );
    for w in waiters {
        let (reply, waited) = w.join().expect("waiter");
        let e = reply.expect_err("an error reply");
        assert!(e.to_string().contains("replica"), "{e}");
        assert!(waited < Duration::from_secs(5));
    }
    assert_eq!(rwlock_counter(&mut c, "waiters"), 0);
}

/// Every key with its PEXPIRETIME, for comparing a master and its replica.
fn deadlines(c: &mut Conn) -> Vec<(String, i64)> {
    let mut keys: Vec<String> = all_keys(c).into_iter().collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let at: i64 = redis::cmd("PEXPIRETIME")
                .arg(&k)
                .query(c)
                .expect("PEXPIRETIME");
            (k, at)
        })
        .collect()
}

#[test]
fn handoffs_from_timers_and_events_replicate_like_commands() {
    let debug = [
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ];
    let master = Server::start(&debug);
    let replica = master.start_replica(&debug);
    let mut m = master.conn();
    let mut r = replica.conn();
    // Served by the deadline timer: the reader's lease runs out (shortened
    // once the writer waits, so that it cannot run out before).
    ok(&mut m, &["RWLOCK.READ", "H1", "r:1", "60000"]);
    let expiry = master.spawn_call(&["RWLOCK.WRITE", "H1", "w:1", "60000", "BLOCK", "10000"]);
    // Served through a keyspace event: a Redisson Lua unlock.
    ok(&mut m, &["RWLOCK.WRITE", "H2", "w:1", "60000"]);
    let lua = master.spawn_call(&["RWLOCK.READ", "H2", "r:2", "60000", "BLOCK", "10000"]);
    wait_for_waiters(&mut m, 2);
    expect_reply(&mut m, &["RWLOCK.RENEW", "H1", "r:1", "200"], Value::Int(1));
    let unlock = "redis.call('hdel', KEYS[1], ARGV[1]); if redis.call('hlen', KEYS[1]) == 1 then redis.call('del', KEYS[1]) end return 1";
    ok(&mut m, &["EVAL", unlock, "1", "H2", "w:1:write"]);
    assert_eq!(expiry.join().expect("expiry").0.expect("reply"), Value::Nil);
    assert_eq!(lua.join().expect("lua").0.expect("reply"), Value::Nil);
    wait_replica(&mut m);
    let digest =
        |c: &mut Conn| -> String { redis::cmd("DEBUG").arg("DIGEST").query(c).expect("DIGEST") };
    assert_eq!(digest(&mut m), digest(&mut r));
    let on_master = deadlines(&mut m);
    assert_eq!(
        on_master.len(),
        3,
        "H1, H2 and r:2's timeout key: {on_master:?}"
    );
    assert_eq!(on_master, deadlines(&mut r));
}

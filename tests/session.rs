//! Holds bound to the connection (`SESSION`, issue 19, docs/design.md
//! contract §12) against a real server: a session hold outlives its lease
//! while its connection is open and idle, and is released at once, as its
//! owner's unlock would, when the connection closes (CLIENT KILL, the client
//! process killed, QUIT), serving the waiter behind it; nothing else is
//! released (a non-session re-entry, another owner's hold, a hold given back
//! and taken again); BLOCK and SESSION bind when served; after a failover
//! the hold ends at its lease; Redisson's scripts see session holds as held.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    eval_lua_of, ok, query, rwlock_counter, scaled, timeout_key, wait_for_waiters, wait_replica,
    wait_until, Server, LOCK_LUA, SEED_LUA,
};

/// A lease no test sees run out unless it means to.
const LONG: &str = "30000";

/// The arguments of a server whose idle event loop wakes for its own
/// `serverCron` once a second (`hz 1`, 10 by default), for tests that time
/// a release against it.
const SLOW_CRON: [&str; 2] = ["--hz", "1"];

/// How soon a release must follow the close on a [`SLOW_CRON`] server: one
/// turn of the event loop (well under a millisecond on an idle machine),
/// with room for a loaded machine where the server and this test's threads
/// wait for a core, and half the 1000 ms such a server may wait for its next
/// `serverCron`: a release left to the cron would miss it as often as not.
fn prompt() -> Duration {
    scaled(Duration::from_millis(500))
}

/// `owner`'s count in the field `field` of `lock` (0: none).
fn count(c: &mut Conn, lock: &str, field: &str) -> i64 {
    let held: Option<i64> = query(c, &["HGET", lock, field]);
    held.unwrap_or(0)
}

fn client_id(c: &mut Conn) -> String {
    let id: i64 = query(c, &["CLIENT", "ID"]);
    id.to_string()
}

fn kill(c: &mut Conn, id: &str) {
    let killed: i64 = query(c, &["CLIENT", "KILL", "ID", id]);
    assert_eq!(killed, 1, "client {id} killed");
}

/// Polls (every millisecond) until `field` of `lock` reads `n`; how long it
/// took.
fn until_count(c: &mut Conn, lock: &str, field: &str, n: i64) -> Duration {
    let start = Instant::now();
    wait_until(Duration::from_secs(5), "the count", || {
        if count(c, lock, field) == n {
            return Some(());
        }
        thread::sleep(Duration::from_millis(1));
        None
    });
    start.elapsed()
}

/// The value after `label` in a flat `[label, value, …]` array.
fn field<'a>(items: &'a Value, label: &str) -> &'a Value {
    let Value::Array(items) = items else {
        panic!("expected an array, got {items:?}")
    };
    let at = items
        .iter()
        .position(|v| matches!(v, Value::SimpleString(s) if s == label))
        .unwrap_or_else(|| panic!("no {label} in {items:?}"));
    &items[at + 1]
}

/// The first entry of `LOCK.INFO`'s holders, or of `RWLOCK.INFO`'s owners.
fn first<'a>(info: &'a Value, list: &str) -> &'a Value {
    match field(info, list) {
        Value::Array(entries) => &entries[0],
        other => panic!("{list} is {other:?}"),
    }
}

#[test]
fn a_session_hold_outlives_its_lease_while_its_connection_is_open() {
    let (_server, mut c) = Server::started(&[]);
    let mut holder = _server.conn();
    ok(&mut holder, &["LOCK.ACQUIRE", "P", "p:1", "500", "SESSION"]);
    ok(&mut holder, &["RWLOCK.READ", "R", "r:1", "500", "SESSION"]);
    ok(&mut holder, &["RWLOCK.WRITE", "W", "w:1", "500", "SESSION"]);
    // The connection stays open and sends nothing.
    thread::sleep(Duration::from_secs(3));
    assert_eq!(count(&mut c, "P", "p:1"), 1, "the plain lock is held");
    assert_eq!(count(&mut c, "R", "r:1"), 1, "the read hold is held");
    assert_eq!(count(&mut c, "W", "w:1:write"), 1, "the write hold is held");
    let lease: i64 = query(&mut c, &["PTTL", &timeout_key("R", "r:1", 1)]);
    assert!(
        (1..=500).contains(&lease),
        "the read lease key is renewed: {lease}"
    );
    for lock in ["P", "R", "W"] {
        let pttl: i64 = query(&mut c, &["PTTL", lock]);
        assert!((1..=500).contains(&pttl), "{lock} has a lease: {pttl}");
    }
    // A renewal every lease/3 for each of the three: some 18 each in 3 s.
    let renewals = rwlock_counter(&mut c, "session_renewals");
    assert!(renewals >= 3 * 12, "{renewals} renewals");
    let info = ok(&mut c, &["LOCK.INFO", "P"]);
    assert_eq!(field(first(&info, "holders"), "session"), &Value::Int(1));
    let info = ok(&mut c, &["RWLOCK.INFO", "R"]);
    let owner = first(&info, "owners");
    assert_eq!(field(owner, "session_reads"), &Value::Int(1));
    assert_eq!(field(owner, "session_writes"), &Value::Int(0));
    let info = ok(&mut c, &["RWLOCK.INFO", "W"]);
    assert_eq!(
        field(first(&info, "owners"), "session_writes"),
        &Value::Int(1)
    );
    assert_eq!(rwlock_counter(&mut c, "session_holds"), 3);
    assert_eq!(rwlock_counter(&mut c, "session_clients"), 1);
    assert_eq!(rwlock_counter(&mut c, "session_binds"), 3);
    // Closed, the holds go at once; nothing renews them any more.
    drop(holder);
    until_count(&mut c, "P", "p:1", 0);
    until_count(&mut c, "R", "r:1", 0);
    until_count(&mut c, "W", "w:1:write", 0);
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 3);
    assert_eq!(rwlock_counter(&mut c, "session_holds"), 0);
    let leases: i64 = query(&mut c, &["EXISTS", &timeout_key("R", "r:1", 1)]);
    assert_eq!(leases, 0, "the read lease key went with the hold");
}

#[test]
fn client_kill_releases_at_once_and_the_waiter_behind_is_served() {
    let server = Server::start(&SLOW_CRON);
    let mut c = server.conn();
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    ok(&mut holder, &["LOCK.ACQUIRE", "K", "h:1", LONG, "SESSION"]);
    let waiter = server.park(
        &mut c,
        &["LOCK.ACQUIRE", "K", "w:1", LONG, "BLOCK", "10000"],
    );
    let killed = Instant::now();
    kill(&mut c, &id);
    let (reply, _) = waiter.join().expect("the waiter's thread");
    let served = killed.elapsed();
    assert_eq!(reply.expect("the waiter's reply"), Value::Nil, "served");
    eprintln!("CLIENT KILL to the waiter served: {served:?}");
    assert!(served < prompt(), "served after {served:?}");
    assert_eq!(count(&mut c, "K", "w:1"), 1, "the waiter holds K");
    assert_eq!(count(&mut c, "K", "h:1"), 0);
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 1);
    assert_eq!(rwlock_counter(&mut c, "waits_served"), 1);
}

#[test]
fn a_killed_client_process_releases_its_holds() {
    let server = Server::start(&SLOW_CRON);
    let mut c = server.conn();
    // A client of its own process: it takes the lock with SESSION, and
    // sleeps, its socket open, until killed.
    let (mut child, reply) =
        server.client_process(&format!("RWLOCK.WRITE X x:1 {LONG} SESSION"), 5);
    assert_eq!(&reply, b"$-1\r\n", "it took the lock");
    assert_eq!(count(&mut c, "X", "x:1:write"), 1);
    let waiter = server.park(&mut c, &["RWLOCK.READ", "X", "r:1", LONG, "BLOCK", "10000"]);
    let killed = Instant::now();
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let (reply, _) = waiter.join().expect("the waiter's thread");
    let served = killed.elapsed();
    assert_eq!(reply.expect("the waiter's reply"), Value::Nil, "served");
    eprintln!("kill -9 of the client process to the waiter served: {served:?}");
    assert!(served < prompt(), "served after {served:?}");
    assert_eq!(count(&mut c, "X", "x:1:write"), 0);
    assert_eq!(count(&mut c, "X", "r:1"), 1);
}

#[test]
fn quit_releases_at_once() {
    let server = Server::start(&SLOW_CRON);
    let mut holder = server.conn();
    ok(&mut holder, &["RWLOCK.READ", "Q", "q:1", LONG, "SESSION"]);
    let mut c = server.conn();
    let waiter = server.park(
        &mut c,
        &["RWLOCK.WRITE", "Q", "w:1", LONG, "BLOCK", "10000"],
    );
    // Nothing else talks to the server: the release's message is awaited,
    // not polled for.
    let mut listener = server.conn();
    listener
        .subscribe("redisson_rwlock:{Q}")
        .expect("SUBSCRIBE");
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    let quit = Instant::now();
    // Redis 7.2+ and Valkey no longer know QUIT as a command but still close.
    let _ = testkit::call(&mut holder, &["QUIT"]);
    let message = listener.next_message().expect("the release message");
    let took = quit.elapsed();
    assert_eq!(message.payload_str(), "0", "a read release's message");
    eprintln!("QUIT to the release message on an idle server: {took:?}");
    // Freed between two turns of the event loop, the connection's holds go
    // at the next, not at the next serverCron (up to 1 s later when idle).
    assert!(took < prompt(), "released after {took:?}");
    drop(listener);
    let (reply, _) = waiter.join().expect("the waiter's thread");
    assert_eq!(reply.expect("the waiter's reply"), Value::Nil, "served");
    assert_eq!(count(&mut c, "Q", "q:1"), 0);
    assert_eq!(count(&mut c, "Q", "w:1:write"), 1);
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 1);
}

#[test]
fn the_servers_idle_timeout_closes_a_session_client_and_releases_its_holds() {
    let (server, mut c) = Server::started(&["--timeout", "2"]);
    let mut holder = server.conn();
    let took = Instant::now();
    ok(&mut holder, &["LOCK.ACQUIRE", "T", "t:1", "500", "SESSION"]);
    // Renewed past its lease while the connection lives, idle; checked a
    // second before the idle timeout at the earliest, room for a loaded
    // machine.
    thread::sleep(Duration::from_millis(1000));
    assert_eq!(count(&mut c, "T", "t:1"), 1, "renewed while open");
    // Redis closes the idle client after `timeout` seconds.
    wait_until(Duration::from_secs(10), "the timeout's release", || {
        thread::sleep(Duration::from_millis(20));
        (count(&mut c, "T", "t:1") == 0).then_some(())
    });
    let after = took.elapsed();
    assert!(after >= Duration::from_secs(2), "released at {after:?}");
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 1);
}

#[test]
fn only_the_session_holds_of_the_closed_connection_are_released() {
    let (server, mut c) = Server::started(&[]);
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    let mut other = server.conn();
    // N: a non-session hold, then a session re-entry of the same owner.
    ok(&mut holder, &["LOCK.ACQUIRE", "N", "a:1", LONG]);
    ok(
        &mut holder,
        &["LOCK.ACQUIRE", "N", "a:1", "20000", "SESSION"],
    );
    // M: a session hold, then a non-session re-entry.
    ok(&mut holder, &["LOCK.ACQUIRE", "M", "a:1", LONG, "SESSION"]);
    ok(&mut holder, &["LOCK.ACQUIRE", "M", "a:1", LONG]);
    // R: the session reader shares with a reader of another owner, and a
    // session hold of the same owner on another connection.
    ok(&mut holder, &["RWLOCK.READ", "R", "a:1", LONG, "SESSION"]);
    ok(&mut other, &["RWLOCK.READ", "R", "b:1", LONG]);
    ok(&mut other, &["RWLOCK.READ", "R", "a:1", LONG, "SESSION"]);
    assert_eq!(count(&mut c, "R", "a:1"), 2);
    kill(&mut c, &id);
    until_count(&mut c, "R", "a:1", 1);
    assert_eq!(count(&mut c, "N", "a:1"), 1, "the non-session hold stays");
    let pttl: i64 = query(&mut c, &["PTTL", "N"]);
    assert!(
        (19_000..=20_000).contains(&pttl),
        "re-armed with the session hold's lease: {pttl}"
    );
    assert_eq!(count(&mut c, "M", "a:1"), 1, "the re-entry stays");
    assert_eq!(count(&mut c, "R", "b:1"), 1, "another owner's hold stays");
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 3);
    let info = ok(&mut c, &["RWLOCK.INFO", "R"]);
    let Value::Array(owners) = field(&info, "owners") else {
        panic!("owners")
    };
    assert_eq!(field(&owners[0], "session_reads"), &Value::Int(1));
    assert_eq!(field(&owners[1], "session_reads"), &Value::Int(0));
    // The other connection's session hold is the one left, and goes with it.
    drop(other);
    until_count(&mut c, "R", "a:1", 0);
    assert_eq!(count(&mut c, "R", "b:1"), 1, "b:1 was never a session hold");
}

#[test]
fn holds_given_back_elsewhere_are_never_released_again() {
    // With keyspace events on, the module's own writes reach its keyspace
    // subscription too.
    let (server, mut c) = Server::started(&["--notify-keyspace-events", "KEA"]);
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    // U: a non-session hold under a session one; the owner's unlock from
    // another connection gives back the latest, the session hold.
    ok(&mut holder, &["LOCK.ACQUIRE", "U", "a:1", LONG]);
    ok(&mut holder, &["LOCK.ACQUIRE", "U", "a:1", LONG, "SESSION"]);
    ok(&mut c, &["LOCK.UNLOCK", "U", "a:1"]);
    let info = ok(&mut c, &["LOCK.INFO", "U"]);
    assert_eq!(field(first(&info, "holders"), "session"), &Value::Int(0));
    // F: forced open, then taken again by the same owner without SESSION.
    ok(&mut holder, &["LOCK.ACQUIRE", "F", "a:1", LONG, "SESSION"]);
    ok(&mut c, &["LOCK.FORCEUNLOCK", "F"]);
    ok(&mut c, &["LOCK.ACQUIRE", "F", "a:1", LONG]);
    // D: deleted and written over, then taken again.
    ok(&mut holder, &["RWLOCK.WRITE", "D", "a:1", LONG, "SESSION"]);
    ok(&mut c, &["SET", "D", "x"]);
    ok(&mut c, &["DEL", "D"]);
    ok(&mut c, &["RWLOCK.WRITE", "D", "a:1", LONG]);
    // E: its lease run out, then taken again.
    ok(&mut holder, &["LOCK.ACQUIRE", "E", "a:1", LONG, "SESSION"]);
    ok(&mut c, &["PEXPIRE", "E", "1"]);
    thread::sleep(Duration::from_millis(20));
    ok(&mut c, &["LOCK.ACQUIRE", "E", "a:1", LONG]);
    assert_eq!(rwlock_counter(&mut c, "session_holds"), 0);
    kill(&mut c, &id);
    // Nothing is due: a while later nothing changed.
    thread::sleep(Duration::from_millis(50));
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 0);
    for lock in ["U", "F", "E"] {
        assert_eq!(count(&mut c, lock, "a:1"), 1, "{lock}");
    }
    assert_eq!(count(&mut c, "D", "a:1:write"), 1, "D");
    // G: FLUSHALL, then taken again.
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    ok(&mut holder, &["LOCK.ACQUIRE", "G", "a:1", LONG, "SESSION"]);
    assert_eq!(rwlock_counter(&mut c, "session_holds"), 1);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(rwlock_counter(&mut c, "session_holds"), 0);
    ok(&mut c, &["LOCK.ACQUIRE", "G", "a:1", LONG]);
    kill(&mut c, &id);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 0);
    assert_eq!(count(&mut c, "G", "a:1"), 1, "G");
}

#[test]
fn writes_between_the_close_and_its_release_still_count() {
    let (server, mut c) = Server::started(&[]);
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    ok(&mut holder, &["LOCK.ACQUIRE", "K", "a:1", LONG, "SESSION"]);
    // The close and, before the release's turn, the owner's unlock and a
    // new hold without SESSION: one EXEC, so one turn.
    testkit::in_one_turn(
        &mut c,
        &[
            &["CLIENT", "KILL", "ID", &id],
            &["LOCK.UNLOCK", "K", "a:1"],
            &["LOCK.ACQUIRE", "K", "a:1", LONG],
        ],
    );
    thread::sleep(Duration::from_millis(50));
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 0);
    assert_eq!(count(&mut c, "K", "a:1"), 1, "the new hold stays");
}

#[test]
fn session_inside_multi_binds_to_the_client_and_a_release_is_replicated() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let mut holder = master.conn();
    let id = client_id(&mut holder);
    testkit::in_one_turn(
        &mut holder,
        &[
            &["LOCK.ACQUIRE", "M", "a:1", "500", "SESSION"],
            &["RWLOCK.WRITE", "W", "a:1", "500", "SESSION", "FENCED"],
        ],
    );
    // Two leases: renewed (every 167 ms) while open.
    thread::sleep(Duration::from_millis(1000));
    wait_replica(&mut m);
    let mut r = replica.conn();
    assert_eq!(count(&mut r, "M", "a:1"), 1, "renewals replicated");
    assert_eq!(count(&mut r, "W", "a:1:write"), 1);
    kill(&mut m, &id);
    until_count(&mut m, "M", "a:1", 0);
    until_count(&mut m, "W", "a:1:write", 0);
    // The give-back is the module's write, not `m`'s: a WAIT on `m` would
    // cover none of it (it returned before the replica applied it on Redis
    // 8.2 in a lone clone), so the replica is watched itself.
    until_count(&mut r, "M", "a:1", 0);
    until_count(&mut r, "W", "a:1:write", 0);
    let token: i64 = query(&mut r, &["GET", "redisson_lock_token:{W}"]);
    assert_eq!(token, 1, "the fenced hold's token");
}

#[test]
fn block_and_session_bind_the_hold_when_the_waiter_is_served() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["LOCK.ACQUIRE", "B", "h:1", LONG]);
    let mut waiter = server.conn();
    let id = client_id(&mut waiter);
    let wait = [
        "LOCK.ACQUIRE",
        "B",
        "w:1",
        "500",
        "BLOCK",
        "10000",
        "SESSION",
    ];
    waiter
        .send_packed_command(&testkit::cmd_of(&wait).get_packed_command())
        .expect("send the waiting command");
    wait_for_waiters(&mut c, 1);
    ok(&mut c, &["LOCK.UNLOCK", "B", "h:1"]);
    assert_eq!(waiter.recv_response().expect("served"), Value::Nil);
    // Bound when served: renewed past its 500 ms lease while open.
    thread::sleep(Duration::from_millis(1_500));
    assert_eq!(count(&mut c, "B", "w:1"), 1, "renewed while open");
    let info = ok(&mut c, &["LOCK.INFO", "B"]);
    assert_eq!(field(first(&info, "holders"), "session"), &Value::Int(1));
    kill(&mut c, &id);
    until_count(&mut c, "B", "w:1", 0);
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 1);
}

#[test]
fn a_session_multi_hold_is_renewed_while_open_and_released_whole_on_close() {
    let (server, mut c) = Server::started(&[]);
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    let all = [
        "LOCK.ACQUIREALL",
        "m:1",
        "500",
        "SESSION",
        "HOLDS",
        "3",
        "LOCK",
        "{m}P",
        "READ",
        "{m}R",
        "WRITE",
        "{m}W",
    ];
    assert_eq!(ok(&mut holder, &all), Value::Nil, "all taken");
    // A re-entry of one of them without SESSION stays after the close.
    ok(&mut holder, &["LOCK.ACQUIRE", "{m}P", "m:1", LONG]);
    thread::sleep(Duration::from_millis(1_500));
    assert_eq!(count(&mut c, "{m}R", "m:1"), 1, "renewed while open");
    assert_eq!(count(&mut c, "{m}W", "m:1:write"), 1, "renewed while open");
    assert_eq!(count(&mut c, "{m}P", "m:1"), 2);
    assert_eq!(rwlock_counter(&mut c, "session_binds"), 3);
    let waiter = server.park(
        &mut c,
        &[
            "LOCK.ACQUIREALL",
            "w:1",
            LONG,
            "BLOCK",
            "10000",
            "HOLDS",
            "2",
            "WRITE",
            "{m}R",
            "READ",
            "{m}W",
        ],
    );
    kill(&mut c, &id);
    let (reply, _) = waiter.join().expect("the waiter's thread");
    assert_eq!(reply.expect("the waiter's reply"), Value::Nil, "served");
    assert_eq!(count(&mut c, "{m}R", "w:1:write"), 1);
    assert_eq!(count(&mut c, "{m}W", "w:1"), 1);
    assert_eq!(count(&mut c, "{m}P", "m:1"), 1, "the re-entry stays");
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 3);
}

#[test]
fn a_parked_session_multi_hold_binds_every_hold_when_served() {
    let (server, mut c) = Server::started(&[]);
    ok(&mut c, &["RWLOCK.WRITE", "{b}B", "h:1", LONG]);
    let mut waiter = server.conn();
    let id = client_id(&mut waiter);
    let wait = [
        "LOCK.ACQUIREALL",
        "w:1",
        "500",
        "SESSION",
        "BLOCK",
        "10000",
        "HOLDS",
        "2",
        "LOCK",
        "{b}A",
        "READ",
        "{b}B",
    ];
    waiter
        .send_packed_command(&testkit::cmd_of(&wait).get_packed_command())
        .expect("send the waiting command");
    wait_for_waiters(&mut c, 1);
    assert_eq!(count(&mut c, "{b}A", "w:1"), 0, "no subset while waiting");
    ok(&mut c, &["RWLOCK.UNLOCK", "{b}B", "h:1", "WRITE"]);
    assert_eq!(waiter.recv_response().expect("served"), Value::Nil);
    // Bound when served: both renewed past their 500 ms lease while open.
    thread::sleep(Duration::from_millis(1_500));
    assert_eq!(count(&mut c, "{b}A", "w:1"), 1, "renewed while open");
    assert_eq!(count(&mut c, "{b}B", "w:1"), 1, "renewed while open");
    assert_eq!(rwlock_counter(&mut c, "session_holds"), 2);
    kill(&mut c, &id);
    until_count(&mut c, "{b}A", "w:1", 0);
    until_count(&mut c, "{b}B", "w:1", 0);
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 2);
}

#[test]
fn after_a_failover_the_session_hold_ends_at_its_lease() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let mut holder = master.conn();
    ok(&mut holder, &["LOCK.ACQUIRE", "P", "p:1", "600", "SESSION"]);
    // Renewed on the master, the renewals replicated.
    thread::sleep(Duration::from_millis(1_000));
    wait_replica(&mut m);
    let mut r = replica.conn();
    assert_eq!(count(&mut r, "P", "p:1"), 1, "replicated");
    ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
    let pttl: i64 = query(&mut r, &["PTTL", "P"]);
    assert!(
        (1..=600).contains(&pttl),
        "the last renewal's lease: {pttl}"
    );
    let lease_end: i64 = query(&mut r, &["PEXPIRETIME", "P"]);
    // The new master knows no connection of the old one's: nobody renews,
    // and the hold ends at its lease, not before. Each look reads the
    // server's clock with the hold in one turn, so that this thread running
    // late cannot blur the two.
    let mut held_looks = 0;
    wait_until(
        Duration::from_millis(600) + Duration::from_secs(10),
        "the hold's end",
        || {
            let look = testkit::in_one_turn(
                &mut r,
                &[&["TIME"], &["HGET", "P", "p:1"], &["PEXPIRETIME", "P"]],
            );
            let (time, held, at): (Vec<i64>, Option<i64>, i64) = (
                redis::from_redis_value(look[0].clone()).expect("TIME"),
                redis::from_redis_value(look[1].clone()).expect("HGET"),
                redis::from_redis_value(look[2].clone()).expect("PEXPIRETIME"),
            );
            let now = time[0] * 1000 + time[1] / 1000;
            if held.is_none() {
                assert!(
                    now >= lease_end,
                    "ended at {now}, before its lease ({lease_end})"
                );
                return Some(());
            }
            assert_eq!(at, lease_end, "renewed after the failover");
            held_looks += 1;
            thread::sleep(Duration::from_millis(20));
            None
        },
    );
    assert!(held_looks > 0, "never seen held after the failover");
    assert_eq!(rwlock_counter(&mut r, "session_holds"), 0);
    // The old master still holds it for its open connection.
    assert_eq!(count(&mut m, "P", "p:1"), 1);
}

#[test]
fn a_demoted_master_forgets_its_session_holds_and_never_writes() {
    let master = Server::start(&[]);
    let other = Server::start(&[]);
    let mut m = master.conn();
    let mut holder = master.conn();
    let id = client_id(&mut holder);
    ok(&mut holder, &["LOCK.ACQUIRE", "P", "p:1", "600", "SESSION"]);
    assert_eq!(rwlock_counter(&mut m, "session_holds"), 1);
    ok(&mut m, &["REPLICAOF", "127.0.0.1", &other.port.to_string()]);
    assert_eq!(rwlock_counter(&mut m, "session_holds"), 0, "forgotten");
    let renewals = rwlock_counter(&mut m, "session_renewals");
    kill(&mut m, &id);
    // Two renewal periods and a release's turn later, nothing was written.
    thread::sleep(Duration::from_millis(450));
    assert_eq!(rwlock_counter(&mut m, "session_renewals"), renewals);
    assert_eq!(rwlock_counter(&mut m, "session_releases"), 0);
    let pong: String = query(&mut m, &["PING"]);
    assert_eq!(pong, "PONG", "the demoted master is up");
}

#[test]
fn redissons_scripts_see_session_holds_as_held() {
    testkit::require_lua(LOCK_LUA);
    testkit::require_lua(SEED_LUA);
    let (server, mut c) = Server::started(&[]);
    let mut holder = server.conn();
    let id = client_id(&mut holder);
    ok(&mut holder, &["LOCK.ACQUIRE", "P", "a:1", "500", "SESSION"]);
    ok(&mut holder, &["RWLOCK.READ", "R", "a:1", "500", "SESSION"]);
    // Well past the 500 ms leases: held, renewed by the module.
    thread::sleep(Duration::from_millis(1_000));
    let lock = eval_lua_of(&mut c, LOCK_LUA, "lock", &["P"], &["30000", "b:1"]);
    assert!(
        matches!(lock, Ok(Value::Int(pttl)) if pttl > 0),
        "lock.lua is refused: {lock:?}"
    );
    let write = eval_lua_of(
        &mut c,
        SEED_LUA,
        "write_lock",
        &["R"],
        &["30000", "b:1:write"],
    );
    assert!(
        matches!(write, Ok(Value::Int(pttl)) if pttl > 0),
        "write_lock.lua is refused: {write:?}"
    );
    // The owner's Redisson unlock gives the session hold back, and a
    // Redisson lock of the same owner takes P again, without a session.
    let channel = "redisson_lock__channel:{P}";
    let latch = "redisson_unlock_latch:{P}:0123456789abcdef0123456789abcdef";
    let unlock = eval_lua_of(
        &mut c,
        LOCK_LUA,
        "unlock",
        &["P", channel, latch],
        &["0", "30000", "a:1", "PUBLISH", "5000"],
    );
    assert_eq!(unlock, Ok(Value::Int(1)), "unlock.lua released P");
    let again = eval_lua_of(&mut c, LOCK_LUA, "lock", &["P"], &["30000", "a:1"]);
    assert_eq!(again, Ok(Value::Nil), "lock.lua took P again");
    kill(&mut c, &id);
    until_count(&mut c, "R", "a:1", 0);
    assert_eq!(count(&mut c, "P", "a:1"), 1, "Redisson's own hold stays");
    assert_eq!(rwlock_counter(&mut c, "session_releases"), 1);
}

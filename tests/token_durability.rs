//! Durability of fencing tokens (docs/design.md §10.1, §10.9): a storage
//! layer that saw token n must never see a holder come with n or less. So
//! a token once acknowledged must never be handed out again, nor one below
//! it: not after `kill -9` of a server with `appendonly yes` and
//! `appendfsync always` (where every reply counts as acknowledged), and
//! not after a failover to a replica (where an acquisition counts once
//! `WAIT 1` on its connection said the replica has it). The token is
//! replicated as `INCR`, so a replica and an AOF reload end with the
//! master's counters, tokens taken by waiters served from timers and
//! keyspace events included.
//!
//! Workers take fenced plain locks (`LOCK.ACQUIRE … FENCED`) and fenced
//! write locks (`RWLOCK.WRITE … FENCED`), waiting with `BLOCK`, re-entering
//! and releasing them, or walking away from short leases (whose waiters the
//! deadline's timer then serves), while the server is killed at a random
//! moment. Seeded: `RWLOCK_TEST_SEED` replays a run;
//! `RWLOCK_TOKEN_ROUNDS` sets the number of crashes or failovers (default 3).

use std::fs;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use redis::Value;
use testkit::Conn;
use testkit::{
    call, diff, env_usize, fenced_pair, granted_token, info_field, ok, query, seed, snapshot,
    token_counter, wait_replica, wait_until, Rng, Server,
};

/// Plain locks (the first two) and read-write ones, of both kinds of name.
const LOCKS: [&str; 4] = ["f0", "{f}:1", "f2", "{f}:3"];
const WORKERS: usize = 6;

fn plain(k: usize) -> bool {
    k < 2
}

/// A fenced acquisition of lock `k` for `lease` ms, waiting up to 100 ms.
fn acquisition(k: usize, owner: &str, lease: &str) -> Vec<String> {
    let verb = if plain(k) {
        "LOCK.ACQUIRE"
    } else {
        "RWLOCK.WRITE"
    };
    [verb, LOCKS[k], owner, lease, "BLOCK", "100", "FENCED"]
        .map(String::from)
        .to_vec()
}

fn release(k: usize, owner: &str) -> Vec<&str> {
    if plain(k) {
        vec!["LOCK.UNLOCK", LOCKS[k], owner]
    } else {
        vec!["RWLOCK.UNLOCK", LOCKS[k], owner, "WRITE"]
    }
}

/// Frees every lock of the workload, whoever holds it; tokens stay.
fn force_unlock_all(conn: &mut Conn) {
    for (k, lock) in LOCKS.iter().enumerate() {
        let verb = if plain(k) {
            "LOCK.FORCEUNLOCK"
        } else {
            "RWLOCK.FORCEUNLOCK"
        };
        ok(conn, &[verb, lock]);
    }
}

/// The token counter of every lock.
fn counters(conn: &mut Conn) -> [i64; 4] {
    LOCKS.map(|lock| token_counter(conn, lock))
}

/// The server went away under the command.
fn dropped(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// What one worker saw.
#[derive(Debug, Default)]
struct Tally {
    /// Per lock, the highest token acknowledged (0: none).
    acked: [i64; 4],
    /// The lock of a fenced acquisition sent and never answered.
    in_flight: Option<usize>,
    granted: usize,
    /// Granted, but the replica did not confirm it in time.
    unconfirmed: usize,
    refused: usize,
    abandoned: usize,
}

/// Every worker's grants and refusals so far, while they run.
#[derive(Default)]
struct Progress {
    granted: AtomicUsize,
    refused: AtomicUsize,
}

/// Takes, re-enters, releases and abandons locks until the server goes
/// away or `stop` is set. With `replicated`, a grant counts as acknowledged
/// only once `WAIT 1 1000` on this connection says the replica has it.
fn worker(
    mut conn: Conn,
    owner: String,
    mut rng: Rng,
    replicated: bool,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> Tally {
    let mut t = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let k = rng.below(LOCKS.len() as u64) as usize;
        // A short lease left to run out: the deadline's timer serves the
        // lock's waiters, with tokens.
        let walk_away = rng.chance(20);
        let lease = if walk_away { "30" } else { "60000" };
        let wanted = if walk_away { 1 } else { 1 + rng.below(2) };
        let mut held = 0;
        for _ in 0..wanted {
            t.in_flight = Some(k);
            let reply = match call(&mut conn, &acquisition(k, &owner, lease)) {
                Ok(reply) => reply,
                Err(e) if dropped(&e) => return t,
                // Its wait would close a cycle (this worker walked away
                // from a hold whose lease still runs, and that holder waits
                // for it): refused with nothing changed, no token taken
                // (contract §14).
                Err(e) if e.code() == Some("DEADLOCK") => {
                    t.in_flight = None;
                    t.refused += 1;
                    progress.refused.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Err(e) => panic!("{owner} on {}: {e}", LOCKS[k]),
            };
            t.in_flight = None;
            let (pttl, token) = fenced_pair(&reply);
            if pttl != -1 {
                t.refused += 1;
                progress.refused.fetch_add(1, Ordering::Relaxed);
                break;
            }
            held += 1;
            t.granted += 1;
            progress.granted.fetch_add(1, Ordering::Relaxed);
            if replicated {
                match call(&mut conn, &["WAIT", "1", "1000"]) {
                    Ok(Value::Int(1)) => {}
                    Ok(_) => {
                        t.unconfirmed += 1;
                        continue;
                    }
                    Err(e) if dropped(&e) => return t,
                    Err(e) => panic!("WAIT: {e}"),
                }
            }
            t.acked[k] = t.acked[k].max(token);
        }
        if walk_away {
            t.abandoned += held;
            continue;
        }
        for _ in 0..held {
            match call(&mut conn, &release(k, &owner)) {
                Ok(_) => {}
                Err(e) if dropped(&e) => return t,
                Err(e) => panic!("{owner} releasing {}: {e}", LOCKS[k]),
            }
        }
    }
    t
}

/// Runs the workers on `server` for a random while, then has `fail` end
/// the server (a kill); returns their tallies.
fn run_until_failure(
    server: &mut Server,
    rng: &mut Rng,
    round: usize,
    replicated: bool,
    fail: impl FnOnce(&mut Server),
) -> Vec<Tally> {
    force_unlock_all(&mut server.conn());
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (conn, owner) = (server.conn(), format!("w{round}:{w}"));
            let (wrng, stop) = (Rng(rng.next_u64()), Arc::clone(&stop));
            let progress = Arc::clone(&progress);
            thread::spawn(move || worker(conn, owner, wrng, replicated, stop, progress))
        })
        .collect();
    thread::sleep(Duration::from_millis(rng.range(400, 1500) as u64));
    // A loaded machine may have done less by then: the failure waits for
    // what the round must have seen (checked below), so that it hits a
    // workload in full swing.
    wait_until(Duration::from_secs(30), "20 grants and a refusal", || {
        (progress.granted.load(Ordering::Relaxed) >= 20
            && progress.refused.load(Ordering::Relaxed) > 0)
            .then_some(())
    });
    fail(server);
    // Workers parked in a wait learn of the failure from their connection.
    stop.store(true, Ordering::Relaxed);
    let tallies: Vec<Tally> = handles
        .into_iter()
        .map(|h| h.join().expect("a worker panicked"))
        .collect();
    let sum = |f: fn(&Tally) -> usize| tallies.iter().map(f).sum::<usize>();
    eprintln!(
        "round {round}: {} granted ({} unconfirmed), {} refused, {} abandoned, {} in flight",
        sum(|t| t.granted),
        sum(|t| t.unconfirmed),
        sum(|t| t.refused),
        sum(|t| t.abandoned),
        sum(|t| usize::from(t.in_flight.is_some()))
    );
    assert!(sum(|t| t.granted) >= 20, "round {round}: too few grants");
    assert!(sum(|t| t.refused) > 0, "round {round}: no contention");
    tallies
}

/// Per lock, the highest token the workers acknowledged, or `floor`'s.
fn highest_acked(tallies: &[Tally], floor: [i64; 4]) -> [i64; 4] {
    let mut high = floor;
    for t in tallies {
        for (h, a) in high.iter_mut().zip(t.acked) {
            *h = (*h).max(a);
        }
    }
    high
}

/// A new holder of every lock (freed first) must get a token above `acked`.
fn next_tokens_pass(conn: &mut Conn, acked: [i64; 4]) {
    force_unlock_all(conn);
    for (k, floor) in acked.into_iter().enumerate() {
        let reply = ok(conn, &acquisition(k, "after:1", "60000"));
        let token = granted_token(&reply);
        assert!(
            token > floor,
            "{}: token {token} after {floor} was acknowledged",
            LOCKS[k]
        );
    }
}

#[test]
fn acknowledged_tokens_survive_kill_9_with_appendfsync_always() {
    let mut server = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut rng = Rng(seed(0x70CE_0A0F));
    // What the server had loaded after the last restart: durable since.
    let mut durable = [0i64; 4];
    for round in 0..env_usize("RWLOCK_TOKEN_ROUNDS", 3) {
        let tallies = run_until_failure(&mut server, &mut rng, round, false, Server::kill9);
        server.restart();
        let acked = highest_acked(&tallies, durable);
        let now = counters(&mut server.conn());
        eprintln!("round {round}: highest tokens acknowledged {acked:?}, counters after the restart {now:?}");
        for (k, lock) in LOCKS.iter().enumerate() {
            // Tokens above the highest reply are those of acquisitions
            // whose reply never came: one a worker at most.
            let pending = tallies.iter().filter(|t| t.in_flight == Some(k)).count() as i64;
            assert!(
                acked[k] <= now[k] && now[k] <= acked[k] + pending,
                "round {round}: {lock}'s counter is {} after the restart; {} was acknowledged, \
                 {pending} acquisitions were in flight",
                now[k],
                acked[k]
            );
        }
        durable = now;
    }
    next_tokens_pass(&mut server.conn(), durable);
}

#[test]
fn acknowledged_tokens_survive_failovers_to_the_replica() {
    let master_args = ["--repl-diskless-sync-delay", "0"];
    let mut master = Server::start(&master_args);
    let mut replica = master.start_replica(&master_args);
    let mut rng = Rng(seed(0x70CE_FA11));
    let mut acked = [0i64; 4];
    let mut dead = Vec::new();
    for round in 0..env_usize("RWLOCK_TOKEN_ROUNDS", 3) {
        let tallies = run_until_failure(&mut master, &mut rng, round, true, Server::kill9);
        acked = highest_acked(&tallies, acked);
        // The replica takes over; a fresh replica follows it.
        let mut r = replica.conn();
        ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
        let role = info_field(&mut r, "replication", "role");
        assert_eq!(role.as_deref(), Some("master"));
        let now = counters(&mut r);
        for (k, lock) in LOCKS.iter().enumerate() {
            assert!(
                now[k] >= acked[k],
                "round {round}: {lock}'s counter is {} on the promoted replica; {} was \
                 acknowledged with WAIT",
                now[k],
                acked[k]
            );
        }
        let promoted = replica;
        replica = promoted.start_replica(&master_args);
        dead.push(std::mem::replace(&mut master, promoted));
    }
    next_tokens_pass(&mut master.conn(), acked);
}

/// A waiter served from a handoff (`release` on `conn`, or its holder's
/// lease running out) took a token in that handoff; `WAIT` on the waiter's
/// own connection must cover it: 0 while the replica is frozen, 1 after.
fn waiters_wait_covers_its_token(release: Option<&[&str]>) {
    let master = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    let lease = if release.is_some() { "60000" } else { "500" };
    ok(&mut m, &["LOCK.ACQUIRE", "H", "h:1", lease, "FENCED"]);
    let mut waiter = master.conn();
    let parked = thread::spawn(move || {
        let wait = [
            "LOCK.ACQUIRE",
            "H",
            "w:1",
            "60000",
            "BLOCK",
            "10000",
            "FENCED",
        ];
        let reply = ok(&mut waiter, &wait);
        (reply, waiter)
    });
    testkit::wait_for_waiters(&mut m, 1);
    wait_replica(&mut m);
    replica.signal("STOP");
    if let Some(args) = release {
        ok(&mut m, args);
    }
    let (reply, mut waiter) = parked.join().expect("the waiter's thread");
    assert_eq!(granted_token(&reply), 2);
    let unconfirmed: i64 = query(&mut waiter, &["WAIT", "1", "300"]);
    replica.signal("CONT");
    assert_eq!(
        unconfirmed, 0,
        "WAIT confirmed a token the frozen replica never had"
    );
    let confirmed: i64 = query(&mut waiter, &["WAIT", "1", "5000"]);
    assert_eq!(confirmed, 1);
    assert_eq!(token_counter(&mut replica.conn(), "H"), 2);
}

#[test]
fn a_waiters_wait_covers_the_token_an_unlock_handed_it() {
    waiters_wait_covers_its_token(Some(&["LOCK.UNLOCK", "H", "h:1"]));
}

#[test]
fn a_waiters_wait_covers_the_token_a_keyspace_event_handed_it() {
    waiters_wait_covers_its_token(Some(&["DEL", "H"]));
}

#[test]
fn a_waiters_wait_covers_the_token_a_lease_deadline_handed_it() {
    waiters_wait_covers_its_token(None);
}

#[test]
fn a_replica_and_an_aof_reload_end_with_the_masters_tokens() {
    let args = ["--appendonly", "yes", "--repl-diskless-sync-delay", "0"];
    let mut master = Server::start(&args);
    let replica = master.start_replica(&[]);
    let mut m = master.conn();
    // Tokens taken by commands, re-entries and both kinds of lock...
    ok(&mut m, &["LOCK.ACQUIRE", "A", "h:1", "60000", "FENCED"]);
    ok(&mut m, &["LOCK.ACQUIRE", "A", "h:1", "60000", "FENCED"]);
    ok(&mut m, &["RWLOCK.WRITE", "{r}:B", "h:1", "60000", "FENCED"]);
    // ...by waiters served in an unlock, from a keyspace event's timer and
    // from the deadline's timer...
    let served = [
        ("A", &["LOCK.UNLOCK", "A", "h:1"][..]),
        ("{r}:B", &["RWLOCK.UNLOCK", "{r}:B", "h:1", "WRITE"]),
        ("C", &["DEL", "C"]),
        ("D", &[]),
    ];
    ok(&mut m, &["LOCK.ACQUIRE", "C", "h:1", "60000", "FENCED"]);
    ok(&mut m, &["LOCK.ACQUIRE", "D", "h:1", "60000", "FENCED"]);
    let waiters: Vec<_> = served
        .iter()
        .map(|(lock, _)| {
            let verb = if lock.contains("{r}") {
                "RWLOCK.WRITE"
            } else {
                "LOCK.ACQUIRE"
            };
            master.park(
                &mut m,
                &[verb, lock, "w:1", "60000", "BLOCK", "5000", "FENCED"],
            )
        })
        .collect();
    // D's lease shortened once its waiter is parked (so that it cannot run
    // out before on a loaded machine), then left to run out.
    assert_eq!(
        ok(&mut m, &["LOCK.RENEW", "D", "h:1", "200"]),
        Value::Int(1)
    );
    // (A's first release leaves h:1's re-entry: the waiter needs two.)
    ok(&mut m, &["LOCK.UNLOCK", "A", "h:1"]);
    for (_, release) in served.iter().filter(|(_, r)| !r.is_empty()) {
        ok(&mut m, release);
    }
    for waiter in waiters {
        let (reply, _) = waiter.join().expect("a waiter's thread");
        granted_token(&reply.expect("a waiter's reply"));
    }
    // ...and a forced unlock, which leaves the token.
    ok(&mut m, &["LOCK.FORCEUNLOCK", "C"]);
    let locks = ["A", "{r}:B", "C", "D"];
    let tokens = locks.map(|l| token_counter(&mut m, l));
    assert_eq!(tokens, [3, 2, 2, 2], "the tokens taken on the master");
    wait_replica(&mut m);
    let mut r = replica.conn();
    assert_eq!(
        locks.map(|l| token_counter(&mut r, l)),
        tokens,
        "on the replica"
    );
    let on_master = snapshot(&mut m);
    let d = diff(&on_master, &snapshot(&mut r), "master", "replica");
    assert!(d.is_empty(), "the replica differs:\n{d}");

    // The AOF has the tokens as INCR, never the commands, and a server
    // without the module loads the same counters from it.
    master.stop();
    let copy = master.copy_aof();
    let mut aof = Vec::new();
    for entry in fs::read_dir(copy.join("appendonlydir")).expect("the AOF's directory") {
        aof.extend(fs::read(entry.expect("an AOF file").path()).expect("read an AOF file"));
    }
    let aof = String::from_utf8_lossy(&aof).to_ascii_lowercase();
    assert!(aof.contains("$4\r\nincr\r\n"), "no INCR in the AOF");
    assert!(!aof.contains("lock.acquire") && !aof.contains("rwlock.write"));
    let copy = copy.to_string_lossy().into_owned();
    let plain = Server::start_plain(&["--appendonly", "yes", "--dir", copy.as_str()]);
    let mut p = plain.conn();
    assert_eq!(
        locks.map(|l| token_counter(&mut p, l)),
        tokens,
        "loaded from the AOF"
    );
    let d = diff(
        &on_master,
        &snapshot(&mut p),
        "master",
        "AOF loaded without the module",
    );
    assert!(d.is_empty(), "the AOF reloads otherwise:\n{d}");
}

/// Takes and releases the fenced lock G: its token.
fn take(c: &mut Conn, owner: &str) -> i64 {
    let reply = ok(c, &["LOCK.ACQUIRE", "G", owner, "60000", "FENCED"]);
    ok(c, &["LOCK.UNLOCK", "G", owner]);
    granted_token(&reply)
}

/// A promoted replica's counter can be behind tokens the old master issued
/// and never replicated (here: the replica is pointed away from its master,
/// keeping its data, while the master goes on granting). The promoted node's
/// first token of the lock jumps `rwlock.token-gap` past its copy, so it is
/// higher than every token the old master gave (fewer than the gap); later
/// tokens go on by one, a Redisson client's own INCR included, and its
/// replicas hold the same counter. With the gap set to 0 the old master's
/// numbers come again: that is what the gap prevents.
#[test]
fn a_promoted_replicas_tokens_pass_every_token_the_old_master_issued() {
    const LOST: i64 = 40;
    let args = ["--repl-diskless-sync-delay", "0"];
    for gap in [1_000_000_000i64, 0] {
        let master = Server::start(&args);
        let replica = master.start_replica(&args);
        let mut m = master.conn();
        for i in 0..5 {
            take(&mut m, &format!("m:{i}"));
        }
        wait_replica(&mut m);
        // The replica loses its master (it keeps its data, and retries a
        // port nobody listens on); the old master grants on alone.
        let mut r = replica.conn();
        let nowhere = testkit::free_port().to_string();
        ok(&mut r, &["REPLICAOF", "127.0.0.1", &nowhere]);
        let mut highest = 0;
        for i in 0..LOST {
            highest = take(&mut m, &format!("lost:{i}"));
        }
        assert_eq!(highest, 5 + LOST);
        ok(
            &mut r,
            &["CONFIG", "SET", "rwlock.token-gap", &gap.to_string()],
        );
        ok(&mut r, &["REPLICAOF", "NO", "ONE"]);
        assert_eq!(
            token_counter(&mut r, "G"),
            5,
            "the replica's copy is behind"
        );
        let first = take(&mut r, "new:1");
        if gap == 0 {
            assert_eq!(first, 6, "without the gap the old master's tokens repeat");
            continue;
        }
        assert_eq!(first, 5 + gap + 1);
        assert!(
            first > highest,
            "token {first} after the old master's {highest}"
        );
        assert_eq!(take(&mut r, "new:2"), first + 1, "one gap per promotion");
        // Redisson's fenced_lock.lua INCRs the same counter: it goes on
        // from the gap, and so does the module after it.
        let incr: i64 = query(&mut r, &["INCR", "redisson_lock_token:{G}"]);
        assert_eq!(incr, first + 2);
        assert_eq!(take(&mut r, "new:3"), first + 3);
        // A replica of the promoted node holds the same counter (INCRBY).
        let follower = replica.start_replica(&args);
        wait_replica(&mut r);
        assert_eq!(token_counter(&mut follower.conn(), "G"), first + 3);
    }
}

/// The server setting that stops a returning old master from taking locks
/// at all (docs/safety.md): with `min-replicas-to-write 1` and no replica
/// attached, every acquisition is a write Redis refuses with `NOREPLICAS`
/// before the module runs, so nothing is granted or written; a replica
/// attached, the same acquisition is granted.
#[test]
fn acquisitions_obey_min_replicas_to_write() {
    let args = [
        "--min-replicas-to-write",
        "1",
        "--min-replicas-max-lag",
        "10",
        "--repl-diskless-sync-delay",
        "0",
    ];
    let master = Server::start(&args);
    let mut m = master.conn();
    let acquisitions: [&[&str]; 4] = [
        &["LOCK.ACQUIRE", "N", "a:1", "30000", "FENCED"],
        &["RWLOCK.WRITE", "W", "a:1", "30000"],
        &["RWLOCK.READ", "R", "a:1", "30000"],
        &["FAIRLOCK.ACQUIRE", "F", "a:1", "30000"],
    ];
    for args in acquisitions {
        let refused: redis::RedisResult<Value> = call(&mut m, args);
        let e = refused.expect_err("a write without a good replica");
        assert_eq!(e.code(), Some("NOREPLICAS"), "{args:?}: {e}");
    }
    let keys: Vec<String> = query(&mut m, &["KEYS", "*"]);
    assert!(keys.is_empty(), "refused acquisitions wrote {keys:?}");
    let _replica = master.start_replica(&[]);
    wait_replica(&mut m);
    let granted = ok(&mut m, acquisitions[0]);
    assert_eq!(granted_token(&granted), 1);
}

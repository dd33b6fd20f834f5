//! Persistence under crashes (docs/design.md, contract §6): with `appendonly yes` and
//! `appendfsync always`, after `kill -9` at a random moment and a restart, no
//! acknowledged acquisition or release is lost and every deadline is the same
//! absolute time.
//!
//! Workers run random well-formed commands on their own locks. Each command
//! goes in a MULTI with a read-back of the whole lock (its hash, every timeout
//! key an owner can have, the request's latch), so the acknowledgement (the
//! EXEC reply) carries the exact state and deadlines the server then had.
//! The server is killed at a random moment while they run. After the
//! restart every lock must be in its last acknowledged state, exactly; a lock
//! whose command was in flight when the server died may instead be in the
//! state that command produces (replayed on a scratch copy, deadlines shifted
//! by at most the time the command could have run). Every acknowledged
//! `REQUEST` latch must be there with its value and deadline, and a retried
//! unlock must reply what the acknowledged one did. Nothing else may exist.
//!
//! Seeded: `RWLOCK_TEST_SEED` replays a run. `RWLOCK_PERSISTENCE_ROUNDS`
//! sets the number of crash rounds (default 3).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use redis::Value;
use testkit::{
    assert_restored, crash_round, flatten, int_of, latch_key, timeout_key, wall_us, Acked, Conn,
    CrashTest, Pending, Rng, WorkerLog,
};

const WORKERS: usize = 4;
const LOCKS_PER_WORKER: usize = 3;
const OWNERS: [&str; 3] = ["a:1", "a:2", "b:1"];
/// Most read holds one owner keeps on one lock in this workload.
const MAX_READS: i64 = 5;
/// Longest a round's workers run before the kill.
const MAX_RUN_MS: i64 = 2_500;

fn lock_name(worker: usize, k: usize) -> String {
    match k {
        0 => format!("p{worker}"),
        1 => format!("{{p{worker}}}:b"),
        _ => format!("p{worker}:c"),
    }
}

/// Every key a lock of this workload can have (latches aside).
fn lock_keys(lock: &str) -> Vec<String> {
    let mut keys = vec![lock.to_string()];
    for owner in OWNERS {
        for i in 1..=MAX_READS + 1 {
            keys.push(timeout_key(lock, owner, i));
        }
    }
    keys
}

/// A lock as the server has it: hash fields, the hash's PEXPIRETIME and the
/// PEXPIRETIME of each key of [`lock_keys`] after the hash (-2: missing).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LockState {
    fields: BTreeMap<String, String>,
    hash_at: i64,
    timeouts: Vec<i64>,
}

impl LockState {
    fn reads(&self, owner: &str) -> i64 {
        self.fields.get(owner).map_or(0, |v| v.parse().unwrap_or(0))
    }

    fn deadlines(&self) -> Vec<i64> {
        let mut all = vec![self.hash_at];
        all.extend(&self.timeouts);
        all
    }
}

/// Runs `args` on `lock` followed by the read-back of the whole lock, in
/// one MULTI/EXEC; the acknowledgement and the lock's state after it.
fn transact(
    conn: &mut Conn,
    lock: &str,
    args: &[String],
    latch: Option<&str>,
) -> redis::RedisResult<(Acked, LockState)> {
    let mut read = vec![redis::cmd("HGETALL").arg(lock).clone()];
    for key in lock_keys(lock) {
        read.push(redis::cmd("PEXPIRETIME").arg(key).clone());
    }
    let ack = testkit::transact(conn, args, &read, latch)?;
    let fields: Vec<String> = flatten(&ack.read[0])
        .into_iter()
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .collect();
    let deadlines: Vec<i64> = ack.read[1..].iter().map(int_of).collect();
    let state = LockState {
        fields: fields
            .chunks(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect(),
        hash_at: deadlines[0],
        timeouts: deadlines[1..].to_vec(),
    };
    Ok((ack, state))
}

/// The state of `lock` now (the command run is a read-only INFO).
fn read_state(conn: &mut Conn, lock: &str) -> LockState {
    let info = vec!["RWLOCK.INFO".to_string(), lock.to_string()];
    transact(conn, lock, &info, None)
        .unwrap_or_else(|e| panic!("read {lock}: {e}"))
        .1
}

/// A random well-formed command on `lock`, chosen from what it holds now.
fn next_command(
    rng: &mut Rng,
    lock: &str,
    state: &LockState,
    serial: &mut u64,
) -> (Vec<String>, Option<String>) {
    let owner = *rng.pick(&OWNERS);
    let lease = rng.range(60_000, 600_000).to_string();
    let mut args: Vec<String> = match rng.below(100) {
        0..=29 if state.reads(owner) < MAX_READS => {
            vec!["RWLOCK.READ".into(), lock.into(), owner.into(), lease]
        }
        0..=49 => vec!["RWLOCK.WRITE".into(), lock.into(), owner.into(), lease],
        50..=69 => vec![
            "RWLOCK.UNLOCK".into(),
            lock.into(),
            owner.into(),
            "READ".into(),
        ],
        70..=86 => {
            let mut a = vec![
                "RWLOCK.UNLOCK".into(),
                lock.into(),
                owner.into(),
                "WRITE".into(),
            ];
            if rng.chance(50) {
                a.extend(["LEASE".to_string(), lease]);
            }
            a
        }
        87..=96 => vec!["RWLOCK.RENEW".into(), lock.into(), owner.into(), lease],
        _ => {
            let mut a = vec!["RWLOCK.FORCEUNLOCK".into(), lock.into()];
            if rng.chance(50) {
                a.push((*rng.pick(&["READ", "WRITE"])).into());
            }
            a
        }
    };
    let mut latch = None;
    if args[0] == "RWLOCK.UNLOCK" && rng.chance(40) {
        *serial += 1;
        let id = format!("req-{}-{serial}", lock.replace(['{', '}'], ""));
        latch = Some(latch_key(lock, &id));
        args.extend(["REQUEST".to_string(), id, "3600000".to_string()]);
    }
    (args, latch)
}

/// A worker's acknowledgements and its locks' states.
type Log = WorkerLog<usize, Vec<LockState>>;

fn worker(
    w: usize,
    mut conn: Conn,
    mut rng: Rng,
    mut serial: u64,
    acks: Arc<AtomicUsize>,
) -> (Log, u64) {
    let locks: Vec<String> = (0..LOCKS_PER_WORKER).map(|k| lock_name(w, k)).collect();
    let mut log: Log = WorkerLog {
        acked: 0,
        state: locks.iter().map(|l| read_state(&mut conn, l)).collect(),
        latches: Vec::new(),
        pending: None,
    };
    loop {
        let k = rng.below(LOCKS_PER_WORKER as u64) as usize;
        let (args, latch) = next_command(&mut rng, &locks[k], &log.state[k], &mut serial);
        let sent_ms = wall_us() / 1000;
        let result = transact(&mut conn, &locks[k], &args, latch.as_deref());
        let Some((ack, state)) = log.answer(result, &args, latch.as_deref(), sent_ms) else {
            return (log, serial);
        };
        log.acked += 1;
        acks.fetch_add(1, Ordering::Relaxed);
        log.state[k] = state;
        log.latches.extend(ack.latch_of(latch, args));
    }
}

/// Writes `state` as the lock `lock` (a scratch copy).
fn load(conn: &mut Conn, lock: &str, state: &LockState) {
    let mut pipe = redis::pipe();
    for (f, v) in &state.fields {
        pipe.cmd("HSET").arg(lock).arg(f).arg(v).ignore();
    }
    if state.hash_at > 0 {
        pipe.cmd("PEXPIREAT").arg(lock).arg(state.hash_at).ignore();
    }
    for (key, at) in lock_keys(lock)[1..].iter().zip(&state.timeouts) {
        if *at > 0 {
            pipe.cmd("SET")
                .arg(key)
                .arg("1")
                .arg("PXAT")
                .arg(*at)
                .ignore();
        }
    }
    if pipe.cmd_iter().next().is_some() {
        let _: () = pipe.query(conn).expect("load scratch lock");
    }
}

/// True when `actual` is what `pending` produces from `before`: the same
/// contents as a replay on a scratch copy, each deadline equal to the
/// replay's or shifted by the difference of the two runs' clocks.
fn explained_by_pending(
    conn: &mut Conn,
    pending: &Pending,
    lock: &str,
    before: &LockState,
    actual: &LockState,
    killed_ms: i64,
) -> Result<(), String> {
    let scratch = format!("scratch-{}", lock.replace(['{', '}'], ""));
    let scratch = if lock.contains('{') {
        format!("{{{scratch}}}:x")
    } else {
        scratch
    };
    let mut args = pending.args.clone();
    args[1] = scratch.clone();
    let latch = args
        .iter()
        .position(|a| a == "REQUEST")
        .map(|i| latch_key(&scratch, &args[i + 1]));
    load(conn, &scratch, before);
    let r_send = wall_us() / 1000;
    let (_, replay) = transact(conn, &scratch, &args, latch.as_deref())
        .map_err(|e| format!("replay {args:?}: {e}"))?;
    let r_recv = wall_us() / 1000;
    let mut cleanup: Vec<String> = lock_keys(&scratch);
    cleanup.extend(latch);
    let _: i64 = redis::cmd("DEL")
        .arg(&cleanup)
        .query(conn)
        .expect("DEL scratch");
    if replay.fields != actual.fields {
        return Err(format!(
            "fields {:?}, a replay of {:?} gives {:?}",
            actual.fields, pending.args, replay.fields
        ));
    }
    let (lo, hi) = (pending.sent_ms - r_recv - 1, killed_ms - r_send + 1);
    for (a, r) in actual.deadlines().iter().zip(replay.deadlines()) {
        let shifted = *a > 0 && r > 0 && (lo..=hi).contains(&(a - r));
        if *a != r && !shifted {
            return Err(format!(
                "deadline {a}, a replay of {:?} gives {r}: off by {} ms, outside [{lo}, {hi}]",
                pending.args,
                a - r
            ));
        }
    }
    Ok(())
}

#[test]
fn acknowledged_effects_survive_kill_9_at_random_moments() {
    let mut t = CrashTest::start(0x5EED_A0F5);
    let mut serials = [0u64; WORKERS];
    let (mut total_acked, mut total_pending, mut applied_pending) = (0, 0, 0);
    for round in 0..t.rounds {
        let crash = crash_round(&mut t.server, &mut t.rng, &mut serials, MAX_RUN_MS, worker);
        let (logs, killed_ms) = (crash.logs, crash.killed_ms);
        let acked: usize = logs.iter().map(|l| l.acked).sum();
        eprintln!(
            "round {round}: killed after {:?}, {acked} acknowledged commands, {} in flight",
            crash.ran,
            logs.iter().filter(|l| l.pending.is_some()).count()
        );
        assert!(
            acked > 0,
            "round {round}: nothing was acknowledged before the kill"
        );
        total_acked += acked;

        t.server.restart();
        let mut conn = t.server.conn();
        // Read everything first: the checks below write scratch keys.
        let mut expected_keys: BTreeSet<String> = BTreeSet::new();
        let mut actual: Vec<Vec<LockState>> = Vec::new();
        for w in 0..WORKERS {
            let mut row = Vec::new();
            for k in 0..LOCKS_PER_WORKER {
                let lock = lock_name(w, k);
                expected_keys.extend(lock_keys(&lock));
                row.push(read_state(&mut conn, &lock));
            }
            actual.push(row);
        }
        t.latches
            .extend(logs.iter().flat_map(|l| l.latches.iter().cloned()));
        for (w, (log, now)) in logs.iter().zip(&actual).enumerate() {
            for (k, (want, got)) in log.state.iter().zip(now).enumerate() {
                let lock = lock_name(w, k);
                if want == got {
                    continue;
                }
                let pending = log
                    .pending
                    .as_ref()
                    .filter(|p| p.args[1] == lock)
                    .unwrap_or_else(|| {
                        panic!(
                            "round {round}: {lock} lost acknowledged state\n  acknowledged: {want:?}\n  after restart: {got:?}"
                        )
                    });
                if let Err(why) =
                    explained_by_pending(&mut conn, pending, &lock, want, got, killed_ms)
                {
                    panic!(
                        "round {round}: {lock} is neither its acknowledged state nor the in-flight command's\n  acknowledged: {want:?}\n  after restart: {got:?}\n  {why}"
                    );
                }
                applied_pending += 1;
            }
            if let Some(p) = &log.pending {
                total_pending += 1;
                t.maybe.extend(p.latch.clone());
            }
        }
        // Acknowledged latches: same value, same deadline (and, below, the
        // same reply on retry).
        assert_restored(&mut conn, round, &t.latches, expected_keys, &t.maybe);
        if round + 1 == t.rounds {
            // A retry replies the latch: what the acknowledged unlock replied
            // (1 when it found no lock, where it replied nil).
            for l in &t.latches {
                let Some(value) = &l.value else { continue };
                let stored: i64 = value.parse().expect("an integer latch");
                assert!(
                    l.reply == Value::Int(stored) || (l.reply == Value::Nil && stored == 1),
                    "{:?} replied {:?} but stored {stored}",
                    l.args,
                    l.reply
                );
                let again = testkit::call(&mut conn, &l.args).expect("retried unlock");
                assert_eq!(again, Value::Int(stored), "retry of {:?}", l.args);
            }
        }
    }
    eprintln!(
        "{} kill -9 rounds: {total_acked} acknowledged commands verified, {} latches, \
         {total_pending} in flight at the kills ({applied_pending} of them applied)",
        t.rounds,
        t.latches.len()
    );
}

//! Persistence of the semaphores and the latch under crashes (issue 34,
//! "Faults"; docs/design.md §15, §16, §17): with `appendonly yes` and
//! `appendfsync always`, after `kill -9` at a random moment and a restart, no
//! acknowledged permit, count, lease or latch is lost and every deadline is
//! the same absolute time.
//!
//! As `tests/persistence.rs` for the locks: each worker owns a semaphore, a
//! permit-expirable semaphore and a count-down latch, and runs random
//! commands on them, each in a MULTI with a read-back of all three (counts
//! with PEXPIRETIME, the permits' sorted set with its scores, the
//! acquisition's `REQUEST` latch), so the EXEC reply is the acknowledged
//! state. A model of the commands checks every acknowledgement against the
//! state before it, and after the restart explains the one command a worker
//! had in flight: the objects are in their last acknowledged state or in the
//! state that command produces (new expiries between its send time plus
//! the lease and the kill plus the lease). A retried `PERMIT.ACQUIRE …
//! REQUEST` of an acknowledged grant replies the same ids and takes nothing.
//! Nothing else may exist. Leases, TTLs and latches last two hours or more
//! (or a lease is `-1`), so nothing expires during a run: a run of more
//! rounds than that allows would see permits reclaimed the model does not
//! expect.
//!
//! Seeded: `RWLOCK_TEST_SEED` replays a run. `RWLOCK_PERSISTENCE_ROUNDS`
//! sets the number of crash rounds (default 3).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use redis::Value;
use testkit::{
    assert_restored, crash_round, int_of, opt_text, prefix_of, request_latch_key, wall_us, Acked,
    Conn, CrashTest, Rng, WorkerLog,
};

const WORKERS: usize = 4;
/// Longest a round's workers run before the kill.
const MAX_RUN_MS: i64 = 2_500;
/// Redisson's score of a permit without lease (`nonExpirableTimeout`).
const NEVER: i64 = 922_337_203_685_477;
/// TTL of the acquisition latches: they outlive the test.
const REQUEST_TTL: i64 = 6 * HOUR;
const HOUR: i64 = 3_600_000;

/// The three objects of worker `w`; odd workers use braced names.
struct Names {
    sem: String,
    permit: String,
    taken: String,
    latch: String,
}

fn names(w: usize) -> Names {
    let (sem, permit) = if w.is_multiple_of(2) {
        (format!("s{w}"), format!("q{w}"))
    } else {
        (format!("{{s{w}}}:x"), format!("{{q{w}}}:y"))
    };
    Names {
        taken: format!("{}:timeout", prefix_of(&permit)),
        sem,
        permit,
        // Latch names take no braces (§16.1).
        latch: format!("l{w}"),
    }
}

/// A worker's three objects as the server has them (PEXPIRETIMEs: -2
/// missing, -1 no TTL). `taken` maps a permit id (32 hex digits) to its
/// expiry score.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    sem: Option<i64>,
    sem_at: i64,
    free: Option<i64>,
    free_at: i64,
    taken: BTreeMap<String, i64>,
    taken_at: i64,
    latch: Option<i64>,
    latch_at: i64,
}

fn count(v: &Value) -> Option<i64> {
    opt_text(v).map(|t| t.parse().unwrap_or_else(|_| panic!("a count: {t}")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ZRANGE … WITHSCORES` as id (hex of the raw member) -> score.
fn scores(v: &Value) -> BTreeMap<String, i64> {
    let Value::Array(items) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .chunks(2)
        .map(|pair| match pair {
            [Value::BulkString(member), score] => {
                let score = opt_text(score).expect("a score");
                let score: f64 = score.parse().expect("a numeric score");
                (hex(member), score as i64)
            }
            other => panic!("not a member and score: {other:?}"),
        })
        .collect()
}

/// Runs `args` followed by the read-back of `n`'s objects, in one
/// MULTI/EXEC; the acknowledgement and the objects' state after it.
fn transact(
    conn: &mut Conn,
    n: &Names,
    args: &[String],
    latch: Option<&str>,
) -> redis::RedisResult<(Acked, State)> {
    let mut read = Vec::new();
    for key in [&n.sem, &n.permit, &n.taken, &n.latch] {
        let get = if key == &n.taken {
            redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .clone()
        } else {
            redis::cmd("GET").arg(key).clone()
        };
        read.extend([get, redis::cmd("PEXPIRETIME").arg(key).clone()]);
    }
    let ack = testkit::transact(conn, args, &read, latch)?;
    let r = &ack.read;
    let state = State {
        sem: count(&r[0]),
        sem_at: int_of(&r[1]),
        free: count(&r[2]),
        free_at: int_of(&r[3]),
        taken: scores(&r[4]),
        taken_at: int_of(&r[5]),
        latch: count(&r[6]),
        latch_at: int_of(&r[7]),
    };
    Ok((ack, state))
}

fn read_state(conn: &mut Conn, n: &Names) -> State {
    transact(conn, n, &["PING".to_string()], None)
        .unwrap_or_else(|e| panic!("read {}: {e}", n.sem))
        .1
}

fn lease(rng: &mut Rng) -> i64 {
    if rng.chance(25) {
        -1
    } else {
        rng.range(2 * HOUR, 6 * HOUR)
    }
}

/// A random well-formed command on one of `n`'s objects, chosen from what
/// they hold now; the request latch's key when it sends `REQUEST`.
fn next_command(
    rng: &mut Rng,
    w: usize,
    n: &Names,
    state: &State,
    serial: &mut u64,
) -> (Vec<String>, Option<String>) {
    let held: Vec<&String> = state.taken.keys().collect();
    let args: Vec<String> = match rng.below(100) {
        0..=11 => vec![
            "SEMAPHORE.ACQUIRE".into(),
            n.sem.clone(),
            rng.range(1, 3).to_string(),
        ],
        12..=21 => vec![
            "SEMAPHORE.RELEASE".into(),
            n.sem.clone(),
            rng.range(1, 3).to_string(),
        ],
        22..=26 => vec![
            "SEMAPHORE.ADDPERMITS".into(),
            n.sem.clone(),
            rng.range(-2, 4).to_string(),
        ],
        27..=33 => vec![
            "SEMAPHORE.TRYSETPERMITS".into(),
            n.sem.clone(),
            rng.range(0, 5).to_string(),
            "TTL".into(),
            rng.range(2 * HOUR, 6 * HOUR).to_string(),
        ],
        // So that a try-set finds no count again.
        34..=36 => vec!["DEL".into(), n.sem.clone()],
        37..=56 => {
            let mut a = vec![
                "PERMIT.ACQUIRE".into(),
                n.permit.clone(),
                rng.range(1, 2).to_string(),
                lease(rng).to_string(),
            ];
            if rng.chance(40) {
                *serial += 1;
                let id = format!("req-{w}-{serial}");
                let key = request_latch_key(&n.permit, &id);
                a.extend(["REQUEST".into(), id, REQUEST_TTL.to_string()]);
                return (a, Some(key));
            }
            a
        }
        57..=68 if !held.is_empty() => {
            let mut a = vec!["PERMIT.RELEASE".into(), n.permit.clone()];
            let k = rng.range(1, held.len().min(3) as i64) as usize;
            let mut ids: Vec<&String> = held.clone();
            while a.len() < 2 + k {
                let i = rng.below(ids.len() as u64) as usize;
                a.push(ids.swap_remove(i).clone());
            }
            a
        }
        69..=76 if !held.is_empty() => vec![
            "PERMIT.UPDATELEASE".into(),
            n.permit.clone(),
            (*rng.pick(&held)).clone(),
            lease(rng).to_string(),
        ],
        57..=84 => vec![
            "PERMIT.ADDPERMITS".into(),
            n.permit.clone(),
            rng.range(-1, 3).to_string(),
        ],
        85..=91 => vec![
            "LATCH.TRYSETCOUNT".into(),
            n.latch.clone(),
            rng.range(0, 4).to_string(),
        ],
        _ => vec!["LATCH.COUNTDOWN".into(), n.latch.clone()],
    };
    (args, None)
}

fn arg(args: &[String], i: usize) -> i64 {
    args[i].parse().expect("an integer argument")
}

/// Checks that `after` is what `args` makes of `before` when it ran between
/// `sent` and `done` (wall-clock ms): exact, but for a new expiry, which
/// lies between `sent` and `done` plus its lease (or is [`NEVER`]).
fn explained(
    args: &[String],
    before: &State,
    after: &State,
    sent: i64,
    done: i64,
) -> Result<(), String> {
    let mut want = before.clone();
    let deadline = |at: i64, ttl: i64| -> Result<i64, String> {
        if ttl == -1 {
            return Ok(NEVER);
        }
        let (lo, hi) = (sent + ttl, done + ttl);
        if (lo..=hi).contains(&at) {
            Ok(at)
        } else {
            Err(format!("deadline {at} outside [{lo}, {hi}] for {args:?}"))
        }
    };
    match args[0].as_str() {
        "SEMAPHORE.ACQUIRE" => {
            let n = arg(args, 2);
            if let Some(c) = before.sem.filter(|c| *c >= n) {
                want.sem = Some(c - n);
            }
        }
        "SEMAPHORE.RELEASE" | "SEMAPHORE.ADDPERMITS" => {
            want.sem = Some(before.sem.unwrap_or(0) + arg(args, 2));
            if before.sem.is_none() || args[0] == "SEMAPHORE.ADDPERMITS" {
                want.sem_at = -1;
            }
        }
        "SEMAPHORE.TRYSETPERMITS" => {
            if before.sem.is_none() {
                want.sem = Some(arg(args, 2));
                want.sem_at = deadline(after.sem_at, arg(args, 4))?;
            }
        }
        "DEL" => (want.sem, want.sem_at) = (None, -2),
        "PERMIT.ACQUIRE" => {
            let n = arg(args, 2);
            if let Some(c) = before.free.filter(|c| *c >= n) {
                want.free = Some(c - n);
                let new: Vec<(&String, &i64)> = after
                    .taken
                    .iter()
                    .filter(|(id, _)| !before.taken.contains_key(*id))
                    .collect();
                if new.len() != n as usize || new.iter().any(|(id, _)| id.len() != 32) {
                    return Err(format!("{args:?} added the permits {new:?}"));
                }
                for (id, at) in new {
                    want.taken.insert(id.clone(), deadline(*at, arg(args, 3))?);
                }
                want.taken_at = -1;
            }
        }
        "PERMIT.RELEASE" => {
            let ids = &args[2..];
            if ids.iter().all(|id| before.taken.contains_key(id)) {
                for id in ids {
                    want.taken.remove(id);
                }
                want.free = Some(before.free.unwrap_or(0) + ids.len() as i64);
                if want.taken.is_empty() {
                    want.taken_at = -2;
                }
            }
        }
        "PERMIT.UPDATELEASE" => {
            let at = after.taken.get(&args[2]).copied().unwrap_or(0);
            if before.taken.contains_key(&args[2]) {
                want.taken
                    .insert(args[2].clone(), deadline(at, arg(args, 3))?);
            }
        }
        "PERMIT.ADDPERMITS" => {
            want.free = Some(before.free.unwrap_or(0) + arg(args, 2));
            want.free_at = -1;
        }
        "LATCH.TRYSETCOUNT" => {
            if before.latch.is_none() {
                (want.latch, want.latch_at) = (Some(arg(args, 2)), -1);
            }
        }
        "LATCH.COUNTDOWN" => {
            let left = before.latch.unwrap_or(0) - 1;
            (want.latch, want.latch_at) = if left > 0 {
                (Some(left), before.latch_at)
            } else {
                (None, -2)
            };
        }
        other => panic!("no model of {other}"),
    }
    if &want == after {
        Ok(())
    } else {
        Err(format!(
            "{args:?} on {before:?}\n  gives {want:?}\n  found {after:?}"
        ))
    }
}

/// A worker's acknowledgements by command and its objects' state.
type Log = WorkerLog<BTreeMap<String, usize>, State>;

fn worker(
    w: usize,
    mut conn: Conn,
    mut rng: Rng,
    mut serial: u64,
    acks: Arc<AtomicUsize>,
) -> (Log, u64) {
    let n = names(w);
    let mut log = WorkerLog {
        acked: BTreeMap::new(),
        state: read_state(&mut conn, &n),
        latches: Vec::new(),
        pending: None,
    };
    loop {
        let (args, latch) = next_command(&mut rng, w, &n, &log.state, &mut serial);
        let sent_ms = wall_us() / 1000;
        let result = transact(&mut conn, &n, &args, latch.as_deref());
        let Some((ack, state)) = log.answer(result, &args, latch.as_deref(), sent_ms) else {
            return (log, serial);
        };
        let done_ms = wall_us() / 1000 + 1;
        if let Err(why) = explained(&args, &log.state, &state, sent_ms, done_ms) {
            panic!("worker {w}: an acknowledged command: {why}");
        }
        if let Value::Array(ids) = &ack.reply {
            // A grant replies the ids it added, as hex.
            let replied: BTreeSet<String> = ids.iter().filter_map(opt_text).collect();
            let added: BTreeSet<String> = state
                .taken
                .keys()
                .filter(|id| !log.state.taken.contains_key(*id))
                .cloned()
                .collect();
            assert_eq!(replied, added, "worker {w}: {args:?} replied {ids:?}");
        }
        *log.acked.entry(args[0].clone()).or_default() += 1;
        acks.fetch_add(1, Ordering::Relaxed);
        log.state = state;
        log.latches.extend(ack.latch_of(latch, args));
    }
}

#[test]
fn acknowledged_permits_survive_kill_9_at_random_moments() {
    let mut t = CrashTest::start(0x5EED_5E4A);
    let mut serials = [0u64; WORKERS];
    let mut verified: BTreeMap<String, usize> = BTreeMap::new();
    let (mut total_pending, mut applied_pending) = (0, 0);
    for round in 0..t.rounds {
        let crash = crash_round(&mut t.server, &mut t.rng, &mut serials, MAX_RUN_MS, worker);
        let logs = crash.logs;
        let acked: usize = logs.iter().flat_map(|l| l.acked.values()).sum();
        eprintln!(
            "round {round}: killed after {:?}, {acked} acknowledged commands, {} in flight",
            crash.ran,
            logs.iter().filter(|l| l.pending.is_some()).count()
        );

        t.server.restart();
        let mut conn = t.server.conn();
        let mut expected_keys: BTreeSet<String> = BTreeSet::new();
        for (w, log) in logs.iter().enumerate() {
            let n = names(w);
            expected_keys.extend([
                n.sem.clone(),
                n.permit.clone(),
                n.taken.clone(),
                n.latch.clone(),
            ]);
            let got = read_state(&mut conn, &n);
            if let Some(p) = &log.pending {
                total_pending += 1;
                t.maybe.extend(p.latch.clone());
            }
            if got == log.state {
                continue;
            }
            let pending = log.pending.as_ref().unwrap_or_else(|| {
                panic!(
                    "round {round}: worker {w} lost acknowledged state\n  acknowledged: {:?}\n  after restart: {got:?}",
                    log.state
                )
            });
            if let Err(why) = explained(
                &pending.args,
                &log.state,
                &got,
                pending.sent_ms,
                crash.killed_ms,
            ) {
                panic!("round {round}: worker {w} is neither in its acknowledged state nor in the in-flight command's: {why}");
            }
            applied_pending += 1;
        }
        for log in &logs {
            for (kind, k) in &log.acked {
                *verified.entry(kind.clone()).or_default() += k;
            }
        }
        t.latches
            .extend(logs.iter().flat_map(|l| l.latches.iter().cloned()));
        assert_restored(&mut conn, round, &t.latches, expected_keys, &t.maybe);
        if round + 1 == t.rounds {
            // A retry of a granted acquisition replies its ids and takes nothing.
            let mut retried = 0;
            for l in t.latches.iter().filter(|l| l.value.is_some()) {
                assert!(
                    matches!(&l.reply, Value::Array(ids) if ids.len().to_string() == l.args[2]),
                    "{:?} replied {:?} but left a latch",
                    l.args,
                    l.reply
                );
                let n = (0..WORKERS)
                    .map(names)
                    .find(|n| n.permit == l.args[1])
                    .expect("a worker's semaphore");
                let before = read_state(&mut conn, &n);
                let again = testkit::call(&mut conn, &l.args).expect("retried acquisition");
                assert_eq!(again, l.reply, "retry of {:?}", l.args);
                assert_eq!(
                    read_state(&mut conn, &n),
                    before,
                    "retry of {:?} changed the semaphore",
                    l.args
                );
                retried += 1;
            }
            eprintln!("{retried} acknowledged grants retried: the same ids, nothing taken");
        }
    }
    let total: usize = verified.values().sum();
    eprintln!(
        "{} kill -9 rounds: {total} acknowledged commands verified ({verified:?}), {} request latches, \
         {total_pending} in flight at the kills ({applied_pending} of them applied)",
        t.rounds,
        t.latches.len()
    );
}

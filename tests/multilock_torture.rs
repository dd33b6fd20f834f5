//! Torture of the multi-hold (docs/design.md, contract §11): 32 clients,
//! each repeatedly taking a random set of 2 to 4 of 8 locks (plain locks
//! and read or write holds of read-write locks, the names listed in random
//! order) with `LOCK.ACQUIREALL … BLOCK`, working a moment, and giving them
//! back with `LOCK.UNLOCKALL`. Leases outlast every section, so exclusion
//! rests on the module alone. Three independent checks:
//!
//! - exclusion: every client enters a shared in-process checker once its
//!   acquisition is answered and leaves it before it sends the release; a
//!   writer or plain-lock holder meeting anyone else on a lock, or a reader
//!   meeting a writer, is a violation;
//! - no deadlock: every wait is bounded (`BLOCK`), and a wait that times
//!   out, or a client that does not finish its sections, fails the run;
//! - no subset: an observer reads all 8 lock hashes at once (MULTI/EXEC of
//!   HGETALLs) over and over; every owner it sees must hold exactly the set
//!   it asked for, never part of it (each section's owner is its own).
//!
//! `RWLOCK_MULTI_TORTURE_CLIENTS` and `RWLOCK_MULTI_TORTURE_SECTIONS` size a
//! run (defaults 32, and 500 sections per client, 200 in fifo mode); `RWLOCK_TEST_SEED` replays one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::{env_usize, ok, query, seed, Rng, Server};

const LOCKS: usize = 8;
/// Locks 0 to 3 are plain locks; 4 to 7 read-write locks.
const PLAIN: usize = 4;
/// Outlasts any section: no hold ends but by its release.
const LEASE: &str = "60000";
/// Longest wait a client accepts: a deadlock or a starved waiter fails.
const WAIT_BOUND_MS: u64 = 30_000;

fn name(lock: usize) -> String {
    format!("mt:{lock}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    Read,
    Write,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Lock => "LOCK",
            Kind::Read => "READ",
            Kind::Write => "WRITE",
        }
    }
}

/// Who is inside each lock, as the clients say.
#[derive(Default)]
struct Inside {
    exclusive: [u32; LOCKS],
    readers: [u32; LOCKS],
}

#[derive(Default)]
struct Checker {
    inside: Inside,
    violations: Vec<String>,
}

impl Checker {
    fn enter(&mut self, who: &str, holds: &[(usize, Kind)]) {
        for &(lock, kind) in holds {
            let (ex, rd) = (self.inside.exclusive[lock], self.inside.readers[lock]);
            let clash = match kind {
                Kind::Read => ex > 0,
                Kind::Lock | Kind::Write => ex > 0 || rd > 0,
            };
            if clash {
                self.violations.push(format!(
                    "{who} entered lock {lock} as {kind:?} beside {ex} exclusive, {rd} readers"
                ));
            }
            match kind {
                Kind::Read => self.inside.readers[lock] += 1,
                Kind::Lock | Kind::Write => self.inside.exclusive[lock] += 1,
            }
        }
    }

    fn leave(&mut self, holds: &[(usize, Kind)]) {
        for &(lock, kind) in holds {
            match kind {
                Kind::Read => self.inside.readers[lock] -= 1,
                Kind::Lock | Kind::Write => self.inside.exclusive[lock] -= 1,
            }
        }
    }
}

/// A random set of 2 to 4 distinct locks in random order, each with a kind
/// its lock takes (a third of the read-write holds are writes).
fn draw(rng: &mut Rng) -> Vec<(usize, Kind)> {
    let n = 2 + rng.below(3) as usize;
    let mut locks: Vec<usize> = (0..LOCKS).collect();
    for i in (1..LOCKS).rev() {
        locks.swap(i, rng.below(i as u64 + 1) as usize);
    }
    locks[..n]
        .iter()
        .map(|&l| {
            let kind = if l < PLAIN {
                Kind::Lock
            } else if rng.chance(33) {
                Kind::Write
            } else {
                Kind::Read
            };
            (l, kind)
        })
        .collect()
}

fn command(head: &[&str], holds: &[(usize, Kind)]) -> Vec<String> {
    let mut args: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    args.push("HOLDS".into());
    args.push(holds.len().to_string());
    for &(lock, kind) in holds {
        args.push(kind.word().into());
        args.push(name(lock));
    }
    args
}

/// The owner of each hold field: the owner itself, or `<owner>:write`.
fn owner_of(field: &str) -> &str {
    field.strip_suffix(":write").unwrap_or(field)
}

struct Outcome {
    sections: usize,
    violations: Vec<String>,
    partial: Vec<String>,
    observations: usize,
    waits_ms: Vec<f64>,
    elapsed: Duration,
}

fn run(module_args: &[&str], clients: usize, sections: usize, base: u64) -> Outcome {
    let server = Server::start_with_module_args(module_args, &[]);
    let checker = Arc::new(Mutex::new(Checker::default()));
    // What each section's owner asked for, set before it asks.
    let asked: Arc<Mutex<HashMap<String, BTreeSet<usize>>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));

    let observer = {
        let mut c = server.conn();
        let (asked, done) = (asked.clone(), done.clone());
        thread::spawn(move || {
            let mut partial = Vec::new();
            let mut observations = 0;
            while !done.load(Ordering::Relaxed) {
                let mut tx = redis::pipe();
                tx.atomic();
                for l in 0..LOCKS {
                    tx.cmd("HGETALL").arg(name(l));
                }
                let hashes: Vec<BTreeMap<String, String>> = tx.query(&mut c).expect("EXEC");
                observations += 1;
                let mut seen: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
                for (l, hash) in hashes.iter().enumerate() {
                    for field in hash.keys().filter(|f| *f != "mode") {
                        seen.entry(owner_of(field).to_string())
                            .or_default()
                            .insert(l);
                    }
                }
                let asked = asked.lock().expect("asked");
                for (owner, locks) in seen {
                    let wanted = asked.get(&owner);
                    if wanted != Some(&locks) {
                        partial.push(format!("{owner} held {locks:?}, asked {wanted:?}"));
                    }
                }
            }
            (partial, observations)
        })
    };

    let start = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let mut c = server.conn();
            let (checker, asked) = (checker.clone(), asked.clone());
            let mut rng = Rng(base.wrapping_add(i as u64 * 0x9E37_79B9));
            thread::spawn(move || {
                let mut waits = Vec::with_capacity(sections);
                let bound = WAIT_BOUND_MS.to_string();
                for s in 0..sections {
                    let owner = format!("c{i}:{s}");
                    let holds = draw(&mut rng);
                    let set = holds.iter().map(|&(l, _)| l).collect();
                    asked.lock().expect("asked").insert(owner.clone(), set);
                    let acquire =
                        command(&["LOCK.ACQUIREALL", &owner, LEASE, "BLOCK", &bound], &holds);
                    let sent = Instant::now();
                    let reply = ok(&mut c, &acquire);
                    waits.push(sent.elapsed().as_secs_f64() * 1e3);
                    assert_eq!(reply, Value::Nil, "{owner}: a wait ended without the locks");
                    checker.lock().expect("checker").enter(&owner, &holds);
                    if rng.chance(50) {
                        thread::sleep(Duration::from_micros(rng.below(1500)));
                    }
                    checker.lock().expect("checker").leave(&holds);
                    let release = command(&["LOCK.UNLOCKALL", &owner], &holds);
                    let replies: Vec<i64> = query(&mut c, &release);
                    // A read unlock replies 0 while other readers hold on.
                    let expected: Vec<bool> = holds.iter().map(|_| true).collect();
                    let released: Vec<bool> = holds
                        .iter()
                        .zip(&replies)
                        .map(|(&(_, k), &r)| r == 1 || (k == Kind::Read && r == 0))
                        .collect();
                    assert_eq!(released, expected, "{owner}: {replies:?}");
                }
                waits
            })
        })
        .collect();
    let mut waits_ms = Vec::new();
    let mut finished = 0;
    for w in workers {
        waits_ms.extend(w.join().expect("a client finished its sections"));
        finished += 1;
    }
    let elapsed = start.elapsed();
    done.store(true, Ordering::Relaxed);
    let (partial, observations) = observer.join().expect("the observer");
    let violations = std::mem::take(&mut checker.lock().expect("checker").violations);
    // Every lock is free at the end: nobody kept a hold.
    let mut c = server.conn();
    for l in 0..LOCKS {
        let left: i64 = query(&mut c, &["EXISTS", &name(l)]);
        assert_eq!(left, 0, "lock {l} left held");
    }
    let waiting: String = query(&mut c, &["INFO", "rwlock"]);
    assert!(waiting.contains("waiters:0"), "{waiting}");
    Outcome {
        sections: finished * sections,
        violations,
        partial,
        observations,
        waits_ms,
        elapsed,
    }
}

fn p99(waits: &mut [f64]) -> f64 {
    waits.sort_by(f64::total_cmp);
    waits[(waits.len() * 99 / 100).min(waits.len() - 1)]
}

fn torture(module_args: &[&str], default_sections: usize, default_seed: u64) {
    let clients = env_usize("RWLOCK_MULTI_TORTURE_CLIENTS", 32);
    let sections = env_usize("RWLOCK_MULTI_TORTURE_SECTIONS", default_sections);
    let base = seed(default_seed);
    let mut out = run(module_args, clients, sections, base);
    let p99 = p99(&mut out.waits_ms);
    eprintln!(
        "multilock torture {module_args:?}: {} sections by {clients} clients in {:.1?} \
         ({:.0}/s), p99 wait {p99:.1} ms, {} violations, {} partial views in {} observations",
        out.sections,
        out.elapsed,
        out.sections as f64 / out.elapsed.as_secs_f64(),
        out.violations.len(),
        out.partial.len(),
        out.observations,
    );
    assert_eq!(out.sections, clients * sections, "every client finished");
    assert!(
        out.violations.is_empty(),
        "{:#?}",
        &out.violations[..out.violations.len().min(10)]
    );
    assert!(
        out.partial.is_empty(),
        "{:#?}",
        &out.partial[..out.partial.len().min(10)]
    );
    assert!(
        out.observations > 10,
        "the observer looked {} times",
        out.observations
    );
}

#[test]
fn thirty_two_clients_take_random_sets_without_clash_deadlock_or_subset() {
    torture(&[], 500, 0x3017_0001);
}

#[test]
fn the_same_in_fifo_mode() {
    torture(&["fairness", "fifo"], 200, 0x3017_0002);
}

#[test]
fn the_checkers_find_what_they_look_for() {
    let mut c = Checker::default();
    c.enter("a", &[(0, Kind::Read), (5, Kind::Read)]);
    c.enter("b", &[(5, Kind::Read)]);
    assert!(c.violations.is_empty(), "readers share");
    c.enter("c", &[(5, Kind::Write)]);
    c.enter("d", &[(0, Kind::Lock)]);
    assert_eq!(c.violations.len(), 2, "{:?}", c.violations);
    c.leave(&[(0, Kind::Read), (5, Kind::Read)]);
    assert_eq!(owner_of("c1:2:write"), "c1:2");
    assert_eq!(owner_of("c1:2"), "c1:2");
    let mut rng = Rng(7);
    for _ in 0..100 {
        let holds = draw(&mut rng);
        let distinct: BTreeSet<usize> = holds.iter().map(|h| h.0).collect();
        assert!((2..=4).contains(&holds.len()) && distinct.len() == holds.len());
        assert!(holds.iter().all(|&(l, k)| (l < PLAIN) == (k == Kind::Lock)));
    }
}

//! Multi-lock (section multilock): 32 clients, each repeatedly taking a
//! random set of 2 to 4 of 8 locks (plain locks and read or write holds of
//! read-write locks, listed in random order, as the torture test draws
//! them) and giving them back at once. Natively with one
//! `LOCK.ACQUIREALL … BLOCK` and one `LOCK.UNLOCKALL`; against Redisson's
//! `RedissonMultiLock.lock()` run on the client: each lock in list order
//! with a wait of up to what is left of `1500 ms × locks`, all taken ones
//! released and the list started over on a failure, and a new round when
//! the time is up. Its per-lock wait is the module's `BLOCK` (no pub/sub
//! round trips), which flatters it. Sections per second and the p99 time
//! from wanting the locks to holding them all, side by side.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{Rng, Server};

use crate::report::{Report, Settings, Target};

pub const CLIENTS: usize = 32;
const LOCKS: usize = 8;
/// Locks 0 to 3 are plain locks; 4 to 7 read-write locks.
const PLAIN: usize = 4;
const LEASE: &str = "30000";
/// Redisson's `baseWaitTime` per lock of a MultiLock.
const BASE_WAIT_MS: u64 = 1500;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    Read,
    Write,
}

fn name(lock: usize) -> String {
    format!("bench:multi:{lock}")
}

/// 2 to 4 distinct locks in random order, each with a kind its lock takes.
fn draw(rng: &mut Rng) -> Vec<(usize, Kind)> {
    let n = 2 + rng.below(3) as usize;
    let mut locks: Vec<usize> = (0..LOCKS).collect();
    for i in (1..LOCKS).rev() {
        locks.swap(i, rng.below(i as u64 + 1) as usize);
    }
    locks[..n]
        .iter()
        .map(|&l| match l {
            l if l < PLAIN => (l, Kind::Lock),
            l if rng.chance(33) => (l, Kind::Write),
            l => (l, Kind::Read),
        })
        .collect()
}

fn holds_args(holds: &[(usize, Kind)]) -> Vec<String> {
    let mut args = vec!["HOLDS".to_string(), holds.len().to_string()];
    for &(l, k) in holds {
        let word = match k {
            Kind::Lock => "LOCK",
            Kind::Read => "READ",
            Kind::Write => "WRITE",
        };
        args.extend([word.to_string(), name(l)]);
    }
    args
}

fn native_section(c: &mut Conn, owner: &str, holds: &[(usize, Kind)]) {
    let mut acquire = vec!["LOCK.ACQUIREALL", owner, LEASE, "BLOCK", "0"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    acquire.extend(holds_args(holds));
    assert_eq!(testkit::ok(c, &acquire), Value::Nil, "ACQUIREALL BLOCK 0");
}

fn native_release(c: &mut Conn, owner: &str, holds: &[(usize, Kind)]) {
    let mut release = vec!["LOCK.UNLOCKALL".to_string(), owner.to_string()];
    release.extend(holds_args(holds));
    testkit::ok(c, &release);
}

/// One lock's `tryLock(wait, lease)`: the single command with `BLOCK`.
fn try_one(c: &mut Conn, owner: &str, (l, k): (usize, Kind), wait_ms: u64) -> bool {
    let lock = name(l);
    let wait = wait_ms.max(1).to_string();
    let cmd = match k {
        Kind::Lock => "LOCK.ACQUIRE",
        Kind::Read => "RWLOCK.READ",
        Kind::Write => "RWLOCK.WRITE",
    };
    testkit::ok(c, &[cmd, &lock, owner, LEASE, "BLOCK", &wait]) == Value::Nil
}

fn release_one(c: &mut Conn, owner: &str, (l, k): (usize, Kind)) {
    let lock = name(l);
    match k {
        Kind::Lock => testkit::ok(c, &["LOCK.UNLOCK", &lock, owner]),
        Kind::Read => testkit::ok(c, &["RWLOCK.UNLOCK", &lock, owner, "READ"]),
        Kind::Write => testkit::ok(c, &["RWLOCK.UNLOCK", &lock, owner, "WRITE"]),
    };
}

/// `RedissonMultiLock.lock()` (watchdog mode): rounds of
/// `tryLock(1500 ms × n)` until one takes every lock. False when the run
/// ended first (then it holds nothing).
fn redisson_section(c: &mut Conn, owner: &str, holds: &[(usize, Kind)], stop: &AtomicBool) -> bool {
    let wait = Duration::from_millis(BASE_WAIT_MS * holds.len() as u64);
    let mut taken: Vec<(usize, Kind)> = Vec::new();
    let mut start = Instant::now();
    let mut i = 0;
    while i < holds.len() {
        let left = wait.saturating_sub(start.elapsed());
        let got = !left.is_zero() && try_one(c, owner, holds[i], left.as_millis() as u64);
        if got {
            taken.push(holds[i]);
            i += 1;
            continue;
        }
        // A failure or the round's time up: give back what it took and
        // start the list over (a new round when the time was up).
        for &h in &taken {
            release_one(c, owner, h);
        }
        taken.clear();
        i = 0;
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        if left.is_zero() || start.elapsed() >= wait {
            start = Instant::now();
        }
    }
    true
}

fn redisson_release(c: &mut Conn, owner: &str, holds: &[(usize, Kind)]) {
    for &h in holds {
        release_one(c, owner, h);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Native,
    /// Redisson's MultiLock on the names in the drawn order.
    Redisson,
    /// The same with every client listing the names in one global order,
    /// the usual workaround for its deadlocks.
    Sorted,
}

struct Run {
    rate: f64,
    p99_ms: f64,
}

/// Every client's sections for the window, then the rate of those
/// completed in it and the p99 of the waits of every section begun in it,
/// one still waiting at the end counted with its wait so far (a lower
/// bound: the deadlocked are not left out).
fn measure(server: &Server, way: Way, settings: &Settings, seed: u64) -> Run {
    let native = way == Way::Native;
    let stop = AtomicBool::new(false);
    // (wait in ms, completed within the window)
    let waits: Mutex<Vec<(f64, bool)>> = Mutex::new(Vec::new());
    let window = settings.measure * 6;
    let started = Instant::now();
    thread::scope(|s| {
        for id in 0..CLIENTS {
            let (stop, waits) = (&stop, &waits);
            s.spawn(move || {
                let mut c = server.conn();
                let mut rng = Rng(seed ^ (id as u64 * 0x9E37_79B9_7F4A_7C15));
                let mut mine = Vec::new();
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let owner = format!("c{id}-0000-4000-8000-000000000000:{round}");
                    round += 1;
                    let mut holds = draw(&mut rng);
                    if way == Way::Sorted {
                        holds.sort_by_key(|&(l, _)| l);
                    }
                    let begun = started.elapsed();
                    let done = if native {
                        native_section(&mut c, &owner, &holds);
                        true
                    } else {
                        redisson_section(&mut c, &owner, &holds, stop)
                    };
                    let ended = started.elapsed();
                    let within = done && ended <= window;
                    let wait = ended.min(window).saturating_sub(begun);
                    mine.push((wait.as_secs_f64() * 1e3, within));
                    if !done {
                        break;
                    }
                    if native {
                        native_release(&mut c, &owner, &holds);
                    } else {
                        redisson_release(&mut c, &owner, &holds);
                    }
                }
                waits.lock().expect("waits").extend(mine);
            });
        }
        thread::sleep(window);
        stop.store(true, Ordering::Relaxed);
    });
    let waits = waits.into_inner().expect("waits");
    let completed = waits.iter().filter(|(_, within)| *within).count();
    let mut ms: Vec<f64> = waits.iter().map(|(w, _)| *w).collect();
    ms.sort_by(f64::total_cmp);
    let p99_ms = ms[(ms.len() * 99 / 100).min(ms.len() - 1)];
    Run {
        rate: completed as f64 / window.as_secs_f64(),
        p99_ms,
    }
}

pub fn run(server: &Server, settings: &Settings, report: &mut Report) {
    let section = "multilock";
    let case = format!("{CLIENTS} clients, random 2-4 of {LOCKS} locks");
    let seed = 0x4D17_0001;
    let native = measure(server, Way::Native, settings, seed);
    let redisson = measure(server, Way::Redisson, settings, seed);
    let sorted = measure(server, Way::Sorted, settings, seed);
    let runs = [
        ("ACQUIREALL BLOCK", &native),
        ("MultiLock", &redisson),
        ("MultiLock, sorted names", &sorted),
    ];
    for (label, run) in runs {
        report.value(section, &case, label, run.rate, "sections/s");
    }
    for (label, run) in runs {
        report.value(
            section,
            &case,
            &format!("{label} p99 wait"),
            run.p99_ms,
            "ms",
        );
    }
    for (label, run) in &runs[1..] {
        report.ratio(
            section,
            &case,
            &format!("throughput native / {label}"),
            native.rate / run.rate,
            Some(Target::AtLeast(1.0)),
        );
        report.ratio(
            section,
            &case,
            &format!("p99 wait {label} / native"),
            run.p99_ms / native.p99_ms,
            Some(Target::AtLeast(1.0)),
        );
    }
}

//! Contended throughput: 50 clients on one lock, each taking it, releasing
//! it at once and starting over; critical sections completed per second
//! when waiting with BLOCK, with a Redisson-style subscribe-and-retry loop,
//! and with polling. For the write lock (the loop and 1 ms polling retry
//! with `RWLOCK.WRITE`) and for the plain lock (section lock-contended:
//! Redisson's pub/sub loop and its SpinLock's back-off, both retrying with
//! `lock.lua`). Every variant releases with the module's command, so they
//! differ in how they wait.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use redis::Value;

use crate::kinds::{LockKind, SpinBackoff};
use crate::report::{median, Report, Settings, Target};
use crate::scripts::Scripts;
use testkit::Server;

pub const CLIENTS: usize = 50;
/// How long a polling client sleeps after a refusal.
const POLL_EVERY: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Block,
    /// Subscribed to the lock's channel, until the message or the TTL.
    SubscribeRetry,
    Poll,
    /// Redisson's SpinLock.
    Backoff,
}

/// One way of taking the lock: how the client waits, and whether it tries
/// with Redisson's script rather than the module's command.
pub struct Way {
    label: &'static str,
    /// Its name in the ratio `BLOCK / <short>`, and that ratio's target.
    short: &'static str,
    target: Option<Target>,
    wait: Wait,
    by_script: bool,
}

/// One client: takes the lock, counts a critical section, releases, until stopped.
fn client(
    server: &Server,
    (kind, way, scripts): (&LockKind, &Way, &Scripts),
    lock: &str,
    id: usize,
    (done, stop): (&AtomicU64, &AtomicBool),
) {
    let owner = format!("c{id}-0000-4000-8000-000000000000:1");
    let attempt = match (way.wait, way.by_script) {
        (Wait::Block, _) => kind.blocking(lock, &owner),
        (_, true) => kind.script(scripts, lock, &owner),
        (_, false) => kind.acquire(lock, &owner),
    };
    let release = kind.release(lock, &owner);
    let mut conn = server.conn();
    let mut sub = server.conn();
    if way.wait == Wait::SubscribeRetry {
        sub.subscribe(&(kind.channel)(lock)).expect("SUBSCRIBE");
    }
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut backoff = SpinBackoff::new((id * 1_000_003 + round) as u64);
        round += 1;
        loop {
            let ttl = match testkit::ok(&mut conn, &attempt) {
                Value::Nil => break,
                Value::Int(ttl) => ttl,
                other => panic!("unexpected {other:?}"),
            };
            match way.wait {
                Wait::Block => panic!("BLOCK timed out after 10 s (PTTL {ttl})"),
                Wait::Poll => thread::sleep(POLL_EVERY),
                Wait::Backoff => thread::sleep(backoff.sleep()),
                Wait::SubscribeRetry => {
                    let wait = Duration::from_millis(ttl.max(1) as u64);
                    sub.set_read_timeout(Some(wait)).expect("timeout");
                    match sub.next_message() {
                        Ok(_) => {}
                        Err(e) if e.is_timeout() => {}
                        Err(e) => panic!("pubsub: {e}"),
                    }
                }
            }
        }
        done.fetch_add(1, Ordering::Relaxed);
        let released = testkit::ok(&mut conn, &release);
        assert_eq!(released, Value::Int(1), "{owner} released the lock");
    }
}

/// Critical sections per second with `way`.
fn measure(
    server: &Server,
    (kind, way, scripts): (&LockKind, &Way, &Scripts),
    settings: &Settings,
) -> f64 {
    let lock = format!("bench:contended:{}", way.label.replace(' ', "-"));
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for id in 0..CLIENTS {
            let (lock, counters) = (&lock, (&done, &stop));
            s.spawn(move || client(server, (kind, way, scripts), lock, id, counters));
        }
        thread::sleep(settings.warmup);
        let before = done.load(Ordering::Relaxed);
        thread::sleep(settings.measure);
        let after = done.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        (after - before) as f64 / settings.measure.as_secs_f64()
    })
}

/// At least twice the throughput of a loop that waits on the client.
const TWICE: Option<Target> = Some(Target::AtLeast(2.0));

const fn way(
    (label, short): (&'static str, &'static str),
    target: Option<Target>,
    wait: Wait,
    by_script: bool,
) -> Way {
    Way {
        label,
        short,
        target,
        wait,
        by_script,
    }
}

const BLOCK: Way = way(("BLOCK", "BLOCK"), None, Wait::Block, false);

/// The write lock's ways (section contended): the loop and the polling
/// retry with `RWLOCK.WRITE`.
pub const WRITE_WAYS: &[Way] = &[
    BLOCK,
    way(
        ("subscribe-and-retry loop", "loop"),
        TWICE,
        Wait::SubscribeRetry,
        false,
    ),
    way(("polling every 1 ms", "polling"), None, Wait::Poll, false),
];

/// The plain lock's (section lock-contended): both of Redisson's ways try
/// with `lock.lua`. Its SpinLock polls, as the write lock's 1 ms polling
/// does, and is shown without a target as that is.
pub const PLAIN_WAYS: &[Way] = &[
    BLOCK,
    way(
        ("Redisson's pub/sub loop", "Redisson's loop"),
        TWICE,
        Wait::SubscribeRetry,
        true,
    ),
    way(("SpinLock back-off", "SpinLock"), None, Wait::Backoff, true),
];

/// Every way on `kind` in every round, then the rates and `BLOCK` (the
/// first way) over each other.
pub fn run(
    (server, scripts, settings): (&Server, &Scripts, &Settings),
    (section, kind, ways): (&str, &LockKind, &[Way]),
    report: &mut Report,
) {
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    for _ in 0..settings.rounds {
        for (way, rate) in ways.iter().zip(&mut rates) {
            rate.push(measure(server, (kind, way, scripts), settings));
        }
    }
    let case = format!("{CLIENTS} clients, one {}", kind.name);
    let rates: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    for (way, rate) in ways.iter().zip(&rates) {
        report.value(section, &case, way.label, *rate, "sections/s");
    }
    for (way, rate) in ways.iter().zip(&rates).skip(1) {
        let name = format!("BLOCK / {}", way.short);
        report.ratio(section, &case, &name, rates[0] / rate, way.target);
    }
}

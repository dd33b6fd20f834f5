//! Handoff latency: from the release of a lock to the reply that tells its
//! waiter it now holds it. A waiter parked with `BLOCK` against Redisson's
//! ways of waiting: its client loop, subscribed to the lock's channel and
//! retrying on the unlock message (with the module's command or Redisson's
//! script), and its SpinLock's back-off polling. For the write lock
//! (`RWLOCK.WRITE`) and for the plain lock (`LOCK.ACQUIRE`, section
//! lock-handoff).
//!
//! One thread drives every connection and reads each reply when it is due,
//! so the variants differ only in what the server and the wire do between
//! the release and the waiter's reply, not in how client threads are woken.
//! The release is timed twice: by the server's `TIME`, queued in the same
//! MULTI just before the module's release, and by the client when it sends
//! that MULTI; the second adds the server's wake-up to read it, alike for all.

use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::kinds::{LockKind, SpinBackoff, PLAIN, WRITE};
use crate::report::{Report, Settings, Target};
use crate::resp::{command, Conn, Expect, Reply, Value};
use crate::scripts::Scripts;
use testkit::Server;

const ROUNDS: usize = 1000;
const HOLDER: &str = "holder:1";
const WAITER: &str = "waiter:1";
/// The same settling pause after the waiter is parked (or refused) in every
/// variant, so the server is asleep in epoll alike when the release arrives.
const SETTLE: Duration = Duration::from_micros(200);
/// A longer hold, for the plain lock: a polling waiter's delay grows with
/// how long it has waited; the others' does not.
const LONG_HOLD: Duration = Duration::from_millis(10);
const LONG_HOLD_ROUNDS: usize = 100;

/// How the waiter waits.
enum Wait {
    Block,
    /// Subscribed to the lock's channel; retries with this request.
    Retry(Vec<u8>),
    /// Retries with this request after Redisson's SpinLock back-off.
    Backoff(Vec<u8>),
}

struct Variant {
    name: &'static str,
    kind: &'static LockKind,
    lock: String,
    wait: Wait,
    /// The holder's release, with the server's clock read just before it.
    unlock: Vec<u8>,
    /// Microseconds from the server's release, and from the client's send.
    from_release: Vec<f64>,
    from_send: Vec<f64>,
    /// For the loops: microseconds from the release to the unlock message.
    message: Vec<f64>,
}

impl Variant {
    fn new(name: &'static str, kind: &'static LockKind, lock: &str, wait: Wait) -> Variant {
        let mut unlock = command(&["MULTI"]);
        unlock.extend(command(&["TIME"]));
        unlock.extend(command(&kind.release(lock, HOLDER)));
        unlock.extend(command(&["EXEC"]));
        Variant {
            name,
            kind,
            lock: lock.to_string(),
            wait,
            unlock,
            from_release: Vec::new(),
            from_send: Vec::new(),
            message: Vec::new(),
        }
    }
}

fn now_us() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs_f64()
        * 1e6
}

/// The server's clock when the EXEC ran, from `[[seconds, micros], 1]`.
fn released_at(exec: Value) -> f64 {
    let bulk = |v: &Value| match v {
        Value::Bulk(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .expect("TIME fields are numbers"),
        other => panic!("TIME field {other:?}"),
    };
    match exec {
        Value::Array(items) => match &items[..] {
            [Value::Array(time), Value::Int(1)] if time.len() == 2 => {
                bulk(&time[0]) * 1e6 + bulk(&time[1])
            }
            other => panic!("EXEC of TIME and the release gave {other:?}"),
        },
        other => panic!("EXEC gave {other:?}"),
    }
}

struct Conns {
    holder: Conn,
    waiter: Conn,
    sub: Conn,
    control: Conn,
}

/// One handoff: the waiter waits `hold` after it is parked or first
/// refused, then the holder releases. `seed` draws the back-off's jitter.
fn round(c: &mut Conns, v: &mut Variant, hold: Duration, seed: u64) {
    let lock = v.lock.as_str();
    Expect::Nil.require(
        &c.holder.call(&v.kind.acquire(lock, HOLDER)),
        "holder's acquisition",
    );
    let refused = match &v.wait {
        Wait::Block => {
            c.waiter.send(&command(&v.kind.blocking(lock, WAITER)));
            while c.control.info_number::<u64>("rwlock", "rwlock_waiters") != 1 {}
            Instant::now()
        }
        Wait::Retry(retry) | Wait::Backoff(retry) => {
            c.waiter.send(retry);
            match c.waiter.recv() {
                Reply::Int(ttl) if ttl > 0 => Instant::now(),
                other => panic!("the waiter's first try: expected a TTL, got {other:?}"),
            }
        }
    };
    let release_at = refused + hold;
    let mut backoff = SpinBackoff::new(seed);
    let mut next_try = refused + backoff.sleep();
    if let Wait::Backoff(retry) = &v.wait {
        // The spinning waiter's tries while the lock is still held.
        while next_try < release_at {
            sleep_until(next_try);
            c.waiter.send(retry);
            match c.waiter.recv() {
                Reply::Int(ttl) if ttl > 0 => {}
                other => panic!("a try of the held lock: expected a TTL, got {other:?}"),
            }
            next_try = Instant::now() + backoff.sleep();
        }
    }
    sleep_until(release_at);
    let sent = now_us();
    c.holder.send(&v.unlock);
    let mut message = None;
    let reply = match &v.wait {
        Wait::Block => c.waiter.recv(),
        Wait::Retry(retry) => {
            Expect::NoError.require(&c.sub.recv(), "the unlock message");
            message = Some(now_us());
            c.waiter.send(retry);
            c.waiter.recv()
        }
        // As SpinLock's loop: sleep after each refusal, then try again.
        Wait::Backoff(retry) => loop {
            sleep_until(next_try);
            c.waiter.send(retry);
            match c.waiter.recv() {
                Reply::Int(_) => next_try = Instant::now() + backoff.sleep(),
                other => break other,
            }
        },
    };
    let acquired = now_us();
    Expect::Nil.require(&reply, "the waiter's acquisition");
    for what in ["MULTI", "TIME queued", "release queued"] {
        Expect::NoError.require(&c.holder.recv(), what);
    }
    let released = released_at(c.holder.recv_value());
    v.from_release.push(acquired - released);
    v.from_send.push(acquired - sent);
    v.message.extend(message.map(|m| m - released));
    Expect::Int(1).require(
        &c.waiter.call(&v.kind.release(lock, WAITER)),
        "the waiter's release",
    );
    if matches!(v.wait, Wait::Retry(_)) {
        Expect::NoError.require(&c.sub.recv(), "the waiter's unlock message");
    }
}

fn sleep_until(t: Instant) {
    thread::sleep(t.saturating_duration_since(Instant::now()));
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Connections to `server`, subscribed to the channels of the variants
/// that wait for the unlock message.
fn connect(server: &Server, variants: &[Variant]) -> Conns {
    let mut c = Conns {
        holder: Conn::connect(server.port),
        waiter: Conn::connect(server.port),
        sub: Conn::connect(server.port),
        control: Conn::connect(server.port),
    };
    for v in variants {
        if matches!(v.wait, Wait::Retry(_)) {
            let subscribed = c.sub.call(&["SUBSCRIBE", &(v.kind.channel)(&v.lock)]);
            Expect::NoError.require(&subscribed, "SUBSCRIBE");
        }
    }
    c
}

/// `rounds` handoffs of every variant after `hold`, then their figures
/// under `section`, each case named after `hold` (`held`), and `BLOCK`
/// (the first variant) over each other: at most half their p50.
fn measure(
    c: &mut Conns,
    variants: &mut [Variant],
    (hold, rounds): (Duration, usize),
    (report, section, held): (&mut Report, &str, &str),
) {
    for v in variants.iter_mut() {
        v.from_release.clear();
        v.from_send.clear();
        v.message.clear();
    }
    // Round-robin, so drift on the machine hits every variant alike.
    for r in 0..rounds {
        for v in variants.iter_mut() {
            round(c, v, hold, r as u64);
        }
    }
    let p50 = format!("{held}release -> waiter's reply, p50");
    let p99 = format!("{held}release -> waiter's reply, p99");
    let send = format!("{held}unlock sent -> waiter's reply, p50");
    let mut figures = Vec::new();
    for v in variants.iter_mut() {
        v.from_release.sort_by(f64::total_cmp);
        v.from_send.sort_by(f64::total_cmp);
        let release = (
            percentile(&v.from_release, 0.5),
            percentile(&v.from_release, 0.99),
        );
        let sent = percentile(&v.from_send, 0.5);
        report.value(section, &p50, v.name, release.0, "us");
        report.value(section, &p99, v.name, release.1, "us");
        report.value(section, &send, v.name, sent, "us");
        figures.push((release.0, release.1, sent));
        if !v.message.is_empty() {
            // The server's push alone: what any notified waiter pays at least.
            v.message.sort_by(f64::total_cmp);
            report.value(
                section,
                &format!("{held}release -> unlock message at the subscriber, p50"),
                v.name,
                percentile(&v.message, 0.5),
                "us",
            );
        }
    }
    let block = figures[0];
    for (v, other) in variants.iter().zip(&figures).skip(1) {
        let ratio = format!("BLOCK / {}", v.name);
        let half = Some(Target::AtMost(0.5));
        report.ratio(section, &p50, &ratio, block.0 / other.0, half);
        report.ratio(section, &p99, &ratio, block.1 / other.1, None);
        report.ratio(section, &send, &ratio, block.2 / other.2, None);
    }
}

/// The write lock's handoff (section handoff).
pub fn run(server: &Server, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let retry = |lock, script: bool| {
        let args = if script {
            WRITE.script(scripts, lock, WAITER)
        } else {
            WRITE.acquire(lock, WAITER)
        };
        Wait::Retry(command(&args))
    };
    let mut variants = [
        Variant::new("BLOCK", &WRITE, "handoff-block", Wait::Block),
        Variant::new("loop", &WRITE, "handoff-loop", retry("handoff-loop", false)),
        Variant::new(
            "Redisson's script loop",
            &WRITE,
            "handoff-script",
            retry("handoff-script", true),
        ),
    ];
    let mut c = connect(server, &variants);
    let run = (SETTLE, settings.scaled(ROUNDS));
    measure(&mut c, &mut variants, run, (report, "handoff", ""));
}

/// The plain lock's handoff (section lock-handoff): `BLOCK` against
/// Redisson's pub/sub loop and its SpinLock, both retrying with `lock.lua`,
/// once released 0.2 ms after the waiter's first try and once 10 ms after.
pub fn run_plain(server: &Server, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let script = |lock| command(&PLAIN.script(scripts, lock, WAITER));
    let mut variants = [
        Variant::new("BLOCK", &PLAIN, "handoff-plain-block", Wait::Block),
        Variant::new(
            "Redisson's pub/sub loop",
            &PLAIN,
            "handoff-plain-loop",
            Wait::Retry(script("handoff-plain-loop")),
        ),
        Variant::new(
            "SpinLock back-off",
            &PLAIN,
            "handoff-plain-spin",
            Wait::Backoff(script("handoff-plain-spin")),
        ),
    ];
    let mut c = connect(server, &variants);
    let section = "lock-handoff";
    let short = (SETTLE, settings.scaled(ROUNDS));
    measure(&mut c, &mut variants, short, (report, section, ""));
    let long = (LONG_HOLD, settings.scaled(LONG_HOLD_ROUNDS));
    measure(
        &mut c,
        &mut variants,
        long,
        (report, section, "held 10 ms: "),
    );
}

//! Handoff latency: from the release of a write lock to the reply that tells
//! its waiter it now holds it. A waiter parked with `BLOCK` against a
//! Redisson-style client loop, subscribed to the lock's channel and retrying
//! on the unlock message, once with `RWLOCK.WRITE` and once with Redisson's
//! own write-lock script.
//!
//! One thread drives every connection and reads each reply when it is due,
//! so the variants differ only in what the server and the wire do between
//! the release and the waiter's reply, not in how client threads are woken.
//! The release is timed twice: by the server's `TIME`, queued in the same
//! MULTI just before `RWLOCK.UNLOCK`, and by the client when it sends that
//! MULTI; the second adds the server's wake-up to read it, alike for all.

use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::report::{Report, Settings, Target};
use crate::resp::{command, Conn, Expect, Reply, Value};
use crate::scripts::Scripts;
use testkit::Server;

const ROUNDS: usize = 1000;
const LEASE: &str = "30000";
const HOLDER: &str = "holder:1";
const WAITER: &str = "waiter:1";
/// The same settling pause after the waiter is parked in every variant, so
/// the server is asleep in epoll alike when the unlock arrives.
const SETTLE: Duration = Duration::from_micros(200);

/// How the waiter waits.
enum Wait {
    Block,
    /// Subscribed to the lock's channel; retries with this request.
    Retry(Vec<u8>),
}

struct Variant {
    name: &'static str,
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
    fn new(name: &'static str, lock: &str, wait: Wait) -> Variant {
        let mut unlock = command(&["MULTI"]);
        unlock.extend(command(&["TIME"]));
        unlock.extend(command(&["RWLOCK.UNLOCK", lock, HOLDER, "WRITE"]));
        unlock.extend(command(&["EXEC"]));
        Variant {
            name,
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
            other => panic!("EXEC of TIME and RWLOCK.UNLOCK gave {other:?}"),
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

fn round(c: &mut Conns, v: &mut Variant) {
    let lock = v.lock.as_str();
    Expect::Nil.require(
        &c.holder.call(&["RWLOCK.WRITE", lock, HOLDER, LEASE]),
        "holder's RWLOCK.WRITE",
    );
    match &v.wait {
        Wait::Block => {
            c.waiter.send(&command(&[
                "RWLOCK.WRITE",
                lock,
                WAITER,
                LEASE,
                "BLOCK",
                "10000",
            ]));
            while c.control.info_number::<u64>("rwlock", "rwlock_waiters") != 1 {}
        }
        Wait::Retry(retry) => {
            c.waiter.send(retry);
            match c.waiter.recv() {
                Reply::Int(ttl) if ttl > 0 => {}
                other => panic!("the waiter's first try: expected a TTL, got {other:?}"),
            }
        }
    }
    thread::sleep(SETTLE);
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
    };
    let acquired = now_us();
    Expect::Nil.require(&reply, "the waiter's acquisition");
    for what in ["MULTI", "TIME queued", "RWLOCK.UNLOCK queued"] {
        Expect::NoError.require(&c.holder.recv(), what);
    }
    let released = released_at(c.holder.recv_value());
    v.from_release.push(acquired - released);
    v.from_send.push(acquired - sent);
    v.message.extend(message.map(|m| m - released));
    Expect::Int(1).require(
        &c.waiter.call(&["RWLOCK.UNLOCK", lock, WAITER, "WRITE"]),
        "the waiter's RWLOCK.UNLOCK",
    );
    if matches!(v.wait, Wait::Retry(_)) {
        Expect::NoError.require(&c.sub.recv(), "the waiter's unlock message");
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub fn run(server: &Server, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let write_field = format!("{WAITER}:write");
    let mut variants = [
        Variant::new("BLOCK", "handoff-block", Wait::Block),
        Variant::new(
            "loop, RWLOCK.WRITE",
            "handoff-loop",
            Wait::Retry(command(&["RWLOCK.WRITE", "handoff-loop", WAITER, LEASE])),
        ),
        Variant::new(
            "loop, Redisson's script",
            "handoff-script",
            Wait::Retry(command(&[
                "EVALSHA",
                &scripts.write_lock,
                "1",
                "handoff-script",
                LEASE,
                &write_field,
            ])),
        ),
    ];
    let mut c = Conns {
        holder: Conn::connect(server.port),
        waiter: Conn::connect(server.port),
        sub: Conn::connect(server.port),
        control: Conn::connect(server.port),
    };
    for v in &variants {
        if matches!(v.wait, Wait::Retry(_)) {
            let subscribed = c.sub.call(&["SUBSCRIBE", &testkit::channel(&v.lock)]);
            Expect::NoError.require(&subscribed, "SUBSCRIBE");
        }
    }
    // Round-robin, so drift on the machine hits every variant alike.
    for _ in 0..settings.scaled(ROUNDS) {
        for v in variants.iter_mut() {
            round(&mut c, v);
        }
    }
    let section = "handoff";
    let mut figures = Vec::new();
    for v in variants.iter_mut() {
        v.from_release.sort_by(f64::total_cmp);
        v.from_send.sort_by(f64::total_cmp);
        let release = (
            percentile(&v.from_release, 0.5),
            percentile(&v.from_release, 0.99),
        );
        let send = percentile(&v.from_send, 0.5);
        report.value(
            section,
            "release -> waiter's reply, p50",
            v.name,
            release.0,
            "us",
        );
        report.value(
            section,
            "release -> waiter's reply, p99",
            v.name,
            release.1,
            "us",
        );
        report.value(
            section,
            "unlock sent -> waiter's reply, p50",
            v.name,
            send,
            "us",
        );
        figures.push((release.0, release.1, send));
        if !v.message.is_empty() {
            // The server's push alone: what any notified waiter pays at least.
            v.message.sort_by(f64::total_cmp);
            report.value(
                section,
                "release -> unlock message at the subscriber, p50",
                v.name,
                percentile(&v.message, 0.5),
                "us",
            );
        }
    }
    for (i, baseline) in [(1, "loop"), (2, "Redisson's script loop")] {
        report.ratio(
            section,
            "release -> waiter's reply, p50",
            &format!("BLOCK / {baseline}"),
            figures[0].0 / figures[i].0,
            Some(Target::AtMost(0.5)),
        );
        report.ratio(
            section,
            "release -> waiter's reply, p99",
            &format!("BLOCK / {baseline}"),
            figures[0].1 / figures[i].1,
            None,
        );
        report.ratio(
            section,
            "unlock sent -> waiter's reply, p50",
            &format!("BLOCK / {baseline}"),
            figures[0].2 / figures[i].2,
            None,
        );
    }
}

//! Contended throughput: 50 clients on one write lock, each taking it,
//! releasing it at once and starting over; critical sections completed per
//! second when waiting with BLOCK, with a Redisson-style subscribe-and-retry
//! loop, and with plain polling.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use redis::{Connection, Value};

use crate::report::{median, Report, Settings, Target};
use testkit::Server;

pub const CLIENTS: usize = 50;
const LEASE: &str = "30000";
/// How long a polling client sleeps after a refusal.
const POLL_EVERY: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Block,
    SubscribeRetry,
    Poll,
}

impl Wait {
    fn label(self) -> &'static str {
        match self {
            Wait::Block => "BLOCK",
            Wait::SubscribeRetry => "subscribe-and-retry loop",
            Wait::Poll => "polling every 1 ms",
        }
    }
}

fn write_lock(conn: &mut Connection, lock: &str, owner: &str, block: bool) -> Value {
    let mut cmd = redis::cmd("RWLOCK.WRITE");
    cmd.arg(lock).arg(owner).arg(LEASE);
    if block {
        cmd.arg("BLOCK").arg(10_000);
    }
    cmd.query(conn).expect("RWLOCK.WRITE")
}

fn unlock(conn: &mut Connection, lock: &str, owner: &str) {
    let reply: Value = redis::cmd("RWLOCK.UNLOCK")
        .arg(lock)
        .arg(owner)
        .arg("WRITE")
        .query(conn)
        .expect("RWLOCK.UNLOCK");
    assert_eq!(reply, Value::Int(1), "{owner} released the lock");
}

/// One client: takes the lock, counts a critical section, releases, until stopped.
fn client(server: &Server, wait: Wait, lock: &str, id: usize, done: &AtomicU64, stop: &AtomicBool) {
    let owner = format!("c{id}-0000-4000-8000-000000000000:1");
    let mut conn = server.conn();
    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    if wait == Wait::SubscribeRetry {
        pubsub.subscribe(testkit::channel(lock)).expect("SUBSCRIBE");
    }
    while !stop.load(Ordering::Relaxed) {
        loop {
            let ttl = match write_lock(&mut conn, lock, &owner, wait == Wait::Block) {
                Value::Nil => break,
                Value::Int(ttl) => ttl,
                other => panic!("unexpected {other:?}"),
            };
            match wait {
                Wait::Block => panic!("BLOCK timed out after 10 s (PTTL {ttl})"),
                Wait::Poll => thread::sleep(POLL_EVERY),
                Wait::SubscribeRetry => {
                    let wait = Duration::from_millis(ttl.max(1) as u64);
                    pubsub.set_read_timeout(Some(wait)).expect("timeout");
                    match pubsub.get_message() {
                        Ok(_) => {}
                        Err(e) if e.is_timeout() => {}
                        Err(e) => panic!("pubsub: {e}"),
                    }
                }
            }
        }
        done.fetch_add(1, Ordering::Relaxed);
        unlock(&mut conn, lock, &owner);
    }
}

/// Critical sections per second with `wait`.
fn measure(server: &Server, wait: Wait, settings: &Settings) -> f64 {
    let lock = format!("bench:contended:{}", wait.label().replace(' ', "-"));
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for id in 0..CLIENTS {
            let (lock, done, stop) = (&lock, &done, &stop);
            s.spawn(move || client(server, wait, lock, id, done, stop));
        }
        thread::sleep(settings.warmup);
        let before = done.load(Ordering::Relaxed);
        thread::sleep(settings.measure);
        let after = done.load(Ordering::Relaxed);
        stop.store(true, Ordering::Relaxed);
        (after - before) as f64 / settings.measure.as_secs_f64()
    })
}

pub fn run(server: &Server, settings: &Settings, report: &mut Report) {
    let waits = [Wait::Block, Wait::SubscribeRetry, Wait::Poll];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); waits.len()];
    for _ in 0..settings.rounds {
        for (wait, rate) in waits.iter().zip(&mut rates) {
            rate.push(measure(server, *wait, settings));
        }
    }
    let section = "contended";
    let case = format!("{CLIENTS} clients, one write lock");
    let rates: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    for (wait, rate) in waits.iter().zip(&rates) {
        report.value(section, &case, wait.label(), *rate, "sections/s");
    }
    report.ratio(
        section,
        &case,
        "BLOCK / loop",
        rates[0] / rates[1],
        Some(Target::AtLeast(2.0)),
    );
    report.ratio(section, &case, "BLOCK / polling", rates[0] / rates[2], None);
}

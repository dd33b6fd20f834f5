//! Handoff latency: from the unlock to the waiter's reply, for a waiter
//! parked with `BLOCK` against a Redisson-style client loop (subscribe to the
//! lock's channel, retry on each message or when the returned TTL ends).
//! Both run in one process against one server, so their ratio holds on a
//! noisy machine.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, Value};

use crate::common::Server;
use crate::report::{Report, Settings, Target};

const ROUNDS: usize = 400;
const LEASE: &str = "30000";

fn attempt(conn: &mut Connection, lock: &str, owner: &str) -> Value {
    redis::cmd("RWLOCK.WRITE")
        .arg(lock)
        .arg(owner)
        .arg(LEASE)
        .query(conn)
        .expect("RWLOCK.WRITE")
}

fn unlock(conn: &mut Connection, lock: &str, owner: &str) {
    let _: Value = redis::cmd("RWLOCK.UNLOCK")
        .arg(lock)
        .arg(owner)
        .arg("WRITE")
        .query(conn)
        .expect("RWLOCK.UNLOCK");
}

fn waiters(conn: &mut Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("rwlock").query(conn).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("rwlock_waiters:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("rwlock_waiters")
}

/// One round: the holder releases at t0, the waiter reports when it holds
/// the lock; returns the handoff time. The holder reads its own reply only
/// afterwards, so its thread does not compete with the waiter's for a CPU
/// at the moment that is measured.
fn round(
    holder: &mut Connection,
    lock: &str,
    ready: &mpsc::Receiver<()>,
    acquired: &mpsc::Receiver<Instant>,
    wait_parked: impl Fn(&mut Connection),
) -> Duration {
    ready.recv().expect("waiter ready");
    wait_parked(holder);
    let command = redis::cmd("RWLOCK.UNLOCK")
        .arg(lock)
        .arg("holder:1")
        .arg("WRITE")
        .get_packed_command();
    let t0 = Instant::now();
    holder
        .send_packed_command(&command)
        .expect("send RWLOCK.UNLOCK");
    let t1 = acquired.recv().expect("waiter acquired");
    let reply = holder.recv_response().expect("RWLOCK.UNLOCK");
    assert_eq!(reply, Value::Int(1), "the holder released the lock");
    t1.duration_since(t0)
}

fn bench_block(server: &Server, rounds: usize) -> Vec<Duration> {
    let lock = "bench-block";
    let mut holder = server.conn();
    let (ready_tx, ready) = mpsc::channel();
    let (done_tx, acquired) = mpsc::channel();
    let (next_tx, next) = mpsc::channel::<()>();
    let mut waiter = server.conn();
    let worker = thread::spawn(move || {
        for _ in 0..rounds {
            next.recv().expect("next round");
            ready_tx.send(()).expect("ready");
            let reply: Value = redis::cmd("RWLOCK.WRITE")
                .arg(lock)
                .arg("waiter:1")
                .arg(LEASE)
                .arg("BLOCK")
                .arg("10000")
                .query(&mut waiter)
                .expect("BLOCK");
            let now = Instant::now();
            assert_eq!(reply, Value::Nil, "the waiter got the lock");
            unlock(&mut waiter, lock, "waiter:1");
            done_tx.send(now).expect("done");
        }
    });
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        assert_eq!(attempt(&mut holder, lock, "holder:1"), Value::Nil);
        next_tx.send(()).expect("start");
        samples.push(round(&mut holder, lock, &ready, &acquired, |c| {
            while waiters(c) != 1 {
                thread::yield_now();
            }
        }));
    }
    worker.join().expect("waiter thread");
    samples
}

fn bench_loop(server: &Server, rounds: usize) -> Vec<Duration> {
    let lock = "bench-loop";
    let channel = format!("redisson_rwlock:{{{lock}}}");
    let mut holder = server.conn();
    let (ready_tx, ready) = mpsc::channel();
    let (done_tx, acquired) = mpsc::channel();
    let (next_tx, next) = mpsc::channel::<()>();
    let mut conn = server.conn();
    let mut sub = server.conn();
    let worker = thread::spawn(move || {
        let mut pubsub = sub.as_pubsub();
        pubsub.subscribe(&channel).expect("SUBSCRIBE");
        for _ in 0..rounds {
            next.recv().expect("next round");
            let mut told = false;
            loop {
                let ttl = match attempt(&mut conn, lock, "waiter:1") {
                    Value::Nil => break,
                    Value::Int(ttl) => ttl,
                    other => panic!("unexpected {other:?}"),
                };
                if !told {
                    // Subscribed and refused once: now it waits like Redisson.
                    ready_tx.send(()).expect("ready");
                    told = true;
                }
                let wait = Duration::from_millis(ttl.max(1) as u64);
                pubsub.set_read_timeout(Some(wait)).expect("timeout");
                match pubsub.get_message() {
                    Ok(_) => {}
                    Err(e) if e.is_timeout() => {}
                    Err(e) => panic!("pubsub: {e}"),
                }
            }
            let now = Instant::now();
            unlock(&mut conn, lock, "waiter:1");
            done_tx.send(now).expect("done");
        }
    });
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        assert_eq!(attempt(&mut holder, lock, "holder:1"), Value::Nil);
        next_tx.send(()).expect("start");
        // The waiter is blocked reading its subscription once it said ready.
        samples.push(round(&mut holder, lock, &ready, &acquired, |_| {
            thread::sleep(Duration::from_micros(200))
        }));
    }
    worker.join().expect("loop thread");
    samples
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub fn run(server: &Server, settings: &Settings, report: &mut Report) {
    let rounds = settings.scaled(ROUNDS);
    // Interleave the two so drift on the machine hits both alike.
    let mut block = Vec::new();
    let mut looped = Vec::new();
    for _ in 0..2 {
        block.extend(bench_block(server, rounds));
        looped.extend(bench_loop(server, rounds));
    }
    block.sort();
    looped.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let section = "handoff";
    for (name, s) in [("BLOCK", &block), ("subscribe-and-retry loop", &looped)] {
        report.value(
            section,
            "unlock -> waiter's reply, p50",
            name,
            us(percentile(s, 0.5)),
            "us",
        );
        report.value(
            section,
            "unlock -> waiter's reply, p99",
            name,
            us(percentile(s, 0.99)),
            "us",
        );
    }
    report.ratio(
        section,
        "unlock -> waiter's reply, p50",
        "BLOCK / loop",
        us(percentile(&block, 0.5)) / us(percentile(&looped, 0.5)),
        Some(Target::AtMost(0.5)),
    );
    report.ratio(
        section,
        "unlock -> waiter's reply, p99",
        "BLOCK / loop",
        us(percentile(&block, 0.99)) / us(percentile(&looped, 0.99)),
        None,
    );
}

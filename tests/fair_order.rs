//! A small torture run of the fair lock (contract §13): module clients
//! (`FAIRLOCK.*`) and Redisson-style clients (the scripts, retried as
//! Redisson's client retries: after the returned `ttl`, at most a few ms
//! here) contend for one lock. Checked: exclusion (never two holders at
//! once) and order (holders come in the order they joined the line; every
//! waiter stays, its wait far above the run). Joins are serialized on the
//! client side so that their order is known.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use testkit::{eval_lua_of, Server, LOCK_LUA};

const WORKERS: usize = 6;
const ROUNDS: usize = 30;
const LOCK: &str = "T";
const QUEUE: &str = "redisson_lock_queue:{T}";
const TIMEOUT: &str = "redisson_lock_timeout:{T}";
const CHANNEL: &str = "redisson_lock__channel:{T}";
const WAIT: &str = "60000";
const LEASE: &str = "30000";

fn now_ms() -> String {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis()
        .to_string()
}

/// One attempt: nil when held, else the ttl.
fn attempt(c: &mut testkit::Conn, script: bool, owner: &str) -> Option<i64> {
    let reply = if script {
        eval_lua_of(
            c,
            LOCK_LUA,
            "fair_lock",
            &[LOCK, QUEUE, TIMEOUT],
            &[LEASE, owner, WAIT, &now_ms()],
        )
    } else {
        redis::cmd("FAIRLOCK.ACQUIRE")
            .arg(&[LOCK, owner, LEASE, "WAIT", WAIT])
            .query(c)
    };
    match reply.expect("acquire") {
        Value::Nil => None,
        Value::Int(ttl) => Some(ttl),
        other => panic!("{owner}: {other:?}"),
    }
}

fn release(c: &mut testkit::Conn, script: bool, owner: &str, round: usize) {
    let id = format!("{owner}-{round}");
    let reply = if script {
        let latch = format!("redisson_unlock_latch:{{T}}:{id}");
        eval_lua_of(
            c,
            LOCK_LUA,
            "fair_unlock",
            &[LOCK, QUEUE, TIMEOUT, CHANNEL, &latch],
            &["0", LEASE, owner, &now_ms(), "PUBLISH", "10000"],
        )
    } else {
        redis::cmd("FAIRLOCK.UNLOCK")
            .arg(&[LOCK, owner, "REQUEST", &id, "10000"])
            .query(c)
    };
    assert_eq!(reply.expect("unlock"), Value::Int(1), "{owner} released");
}

#[test]
fn holders_are_exclusive_and_come_in_the_order_they_joined() {
    testkit::require_lua(LOCK_LUA);
    let server = Server::start(&[]);
    let joins = Arc::new(Mutex::new(0usize));
    let held = Arc::new(AtomicUsize::new(0));
    // (join number, owner) of each acquisition, in the order they held.
    let log = Arc::new(Mutex::new(Vec::<(Option<usize>, String)>::new()));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (joins, held, log) = (joins.clone(), held.clone(), log.clone());
            let mut c = server.conn();
            thread::spawn(move || {
                let script = w % 2 == 1;
                let owner = format!("w{w}:1");
                for round in 0..ROUNDS {
                    // The first attempt under the join lock: if it queues,
                    // its join number is its place in the line.
                    let (mut ttl, joined) = {
                        let mut n = joins.lock().expect("joins");
                        let ttl = attempt(&mut c, script, &owner);
                        let joined = ttl.map(|_| {
                            *n += 1;
                            *n
                        });
                        (ttl, joined)
                    };
                    while let Some(t) = ttl {
                        thread::sleep(Duration::from_millis(t.clamp(1, 3) as u64));
                        ttl = attempt(&mut c, script, &owner);
                    }
                    assert_eq!(held.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    log.lock().expect("log").push((joined, owner.clone()));
                    thread::sleep(Duration::from_millis(1));
                    held.fetch_sub(1, Ordering::SeqCst);
                    release(&mut c, script, &owner, round);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let log = log.lock().expect("log");
    assert_eq!(log.len(), WORKERS * ROUNDS);
    let order: Vec<usize> = log.iter().filter_map(|(j, _)| *j).collect();
    assert!(order.len() > ROUNDS, "too few waited: {log:?}");
    assert!(
        order.windows(2).all(|p| p[0] < p[1]),
        "holders out of join order: {log:?}"
    );
    let mut c = server.conn();
    let left: Vec<String> = redis::cmd("KEYS").arg("*{T}").query(&mut c).expect("KEYS");
    assert!(left.is_empty(), "keys left: {left:?}");
}

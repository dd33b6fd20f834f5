//! What the kill -9 tests (`tests/persistence*.rs`) share: a round of
//! workers killed at a random moment, and the readers of their
//! transactions' read-backs.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use crate::{env_usize, seed, wait_until, wall_us, Conn, Rng, Server};

/// A kill -9 test's run: a server with `appendonly yes` and `appendfsync
/// always`, the seeded generator (`RWLOCK_TEST_SEED`), the number of rounds
/// (`RWLOCK_PERSISTENCE_ROUNDS`, default 3), and the request latches the
/// rounds leave.
pub struct CrashTest {
    pub server: Server,
    pub rng: Rng,
    pub rounds: usize,
    /// Every acknowledged command's latch so far.
    pub latches: Vec<AckedLatch>,
    /// Latches of the commands in flight at a kill: they may or may not exist.
    pub maybe: BTreeSet<String>,
}

impl CrashTest {
    pub fn start(default_seed: u64) -> CrashTest {
        CrashTest {
            server: Server::start(&["--appendonly", "yes", "--appendfsync", "always"]),
            rng: Rng(seed(default_seed)),
            rounds: env_usize("RWLOCK_PERSISTENCE_ROUNDS", 3),
            latches: Vec::new(),
            maybe: BTreeSet::new(),
        }
    }
}

/// What one crash round left: each worker's result, the wall-clock ms by
/// which the server was dead, and how long the workers ran.
pub struct CrashRound<T> {
    pub logs: Vec<T>,
    pub killed_ms: i64,
    pub ran: Duration,
}

/// Starts a thread per element of `carry`, each `work(w, conn, rng, carry,
/// acks)` on a connection of its own with a generator drawn from `rng` and
/// its element of `carry` (what a worker hands to the next round: a request
/// serial), lets them run between 300 ms and `max_run_ms` ms (and until one
/// acknowledgement was counted in `acks`: a loaded machine may have
/// answered nothing yet), kills the server with SIGKILL and collects what
/// they return when their connection drops: a log, and the new `carry`.
pub fn crash_round<T, C, F>(
    server: &mut Server,
    rng: &mut Rng,
    carry: &mut [C],
    max_run_ms: i64,
    work: F,
) -> CrashRound<T>
where
    T: Send + 'static,
    C: Clone + Send + 'static,
    F: Fn(usize, Conn, Rng, C, Arc<AtomicUsize>) -> (T, C) + Send + Sync + 'static,
{
    let work = Arc::new(work);
    let conns: Vec<Conn> = carry.iter().map(|_| server.conn()).collect();
    let started = Instant::now();
    let acks = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = conns
        .into_iter()
        .zip(carry.iter().cloned())
        .enumerate()
        .map(|(w, (conn, c))| {
            let wrng = Rng(rng.next_u64());
            let acks = Arc::clone(&acks);
            let work = Arc::clone(&work);
            thread::spawn(move || work(w, conn, wrng, c, acks))
        })
        .collect();
    let run_ms = rng.range(300, max_run_ms);
    thread::sleep(Duration::from_millis(run_ms as u64));
    wait_until(Duration::from_secs(30), "an acknowledged command", || {
        (acks.load(Ordering::Relaxed) > 0).then_some(())
    });
    server.kill9();
    let killed_ms = wall_us() / 1000 + 1;
    let logs = handles
        .into_iter()
        .zip(carry.iter_mut())
        .map(|(h, c)| {
            let (log, next) = h.join().expect("worker");
            *c = next;
            log
        })
        .collect();
    CrashRound {
        logs,
        killed_ms,
        ran: started.elapsed(),
    }
}

/// A `REQUEST` latch an acknowledged command left (value and PEXPIRETIME
/// read in its transaction), with the command and its reply, to retry.
#[derive(Debug, Clone)]
pub struct AckedLatch {
    pub key: String,
    pub value: Option<String>,
    pub at: i64,
    pub reply: Value,
    pub args: Vec<String>,
}

/// After a restart: every acknowledged latch has its value and deadline, and
/// no key exists but `expected`, those latches and `maybe` (what the
/// commands in flight at the kill may have written).
pub fn assert_restored(
    conn: &mut Conn,
    round: usize,
    latches: &[AckedLatch],
    mut expected: BTreeSet<String>,
    maybe: &BTreeSet<String>,
) {
    for l in latches {
        let value: Option<String> = redis::cmd("GET").arg(&l.key).query(conn).expect("GET");
        let at: i64 = redis::cmd("PEXPIRETIME")
            .arg(&l.key)
            .query(conn)
            .expect("PEXPIRETIME");
        assert_eq!(
            (&value, at),
            (&l.value, l.at),
            "round {round}: latch {} after restart",
            l.key
        );
        expected.insert(l.key.clone());
    }
    let extra: Vec<String> = crate::all_keys(conn)
        .into_iter()
        .filter(|k| !expected.contains(k) && !maybe.contains(k))
        .collect();
    assert!(
        extra.is_empty(),
        "round {round}: unexpected keys after restart: {extra:?}"
    );
}

/// True when `e` says the connection is gone (the kill), not that the server
/// refused the command.
pub fn is_disconnect(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// A string reply as text; nil as `None`.
pub fn opt_text(v: &Value) -> Option<String> {
    match v {
        Value::Nil => None,
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        other => panic!("not a string: {other:?}"),
    }
}

/// An integer reply.
pub fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// What one transaction told: the command's reply, the read-back's replies,
/// and the request latch (value, PEXPIRETIME) when one was named.
pub struct Acked {
    pub reply: Value,
    pub read: Vec<Value>,
    pub latch: Option<(Option<String>, i64)>,
}

impl Acked {
    /// The latch `key` of the acknowledged `args`, as read in the
    /// transaction (`None` when the command named none).
    pub fn latch_of(&self, key: Option<String>, args: Vec<String>) -> Option<AckedLatch> {
        let (value, at) = self.latch.clone()?;
        Some(AckedLatch {
            key: key?,
            value,
            at,
            reply: self.reply.clone(),
            args,
        })
    }
}

/// Runs `args`, then the commands of `read`, then `GET` and `PEXPIRETIME` of
/// `latch`, in one MULTI/EXEC: the acknowledgement carries the exact state
/// the command left.
pub fn transact(
    conn: &mut Conn,
    args: &[String],
    read: &[redis::Cmd],
    latch: Option<&str>,
) -> redis::RedisResult<Acked> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe.add_command(crate::cmd_of(args));
    for c in read {
        pipe.add_command(c.clone());
    }
    if let Some(l) = latch {
        pipe.cmd("GET").arg(l).cmd("PEXPIRETIME").arg(l);
    }
    let mut replies: Vec<Value> = pipe.query(conn)?;
    let latch = latch.map(|_| {
        let at = int_of(&replies.pop().expect("PEXPIRETIME"));
        (opt_text(&replies.pop().expect("GET")), at)
    });
    let reply = replies.remove(0);
    Ok(Acked {
        reply,
        read: replies,
        latch,
    })
}

/// The command a worker had sent when the server died, unanswered, and its
/// request latch's key.
pub struct Pending {
    pub args: Vec<String>,
    pub latch: Option<String>,
    pub sent_ms: i64,
}

/// What a crash round's worker saw: its count of acknowledgements `acked`,
/// the last acknowledged `state` of its objects, the latches its
/// acknowledged commands left, and the command in flight at the kill.
pub struct WorkerLog<A, S> {
    pub acked: A,
    pub state: S,
    pub latches: Vec<AckedLatch>,
    pub pending: Option<Pending>,
}

impl<A, S> WorkerLog<A, S> {
    /// The answer to `args` sent at `sent_ms`; `None` when the connection
    /// dropped (the kill), which makes `args` the command in flight. Any
    /// other error fails the test: the workload sends well-formed commands.
    pub fn answer<T>(
        &mut self,
        result: redis::RedisResult<T>,
        args: &[String],
        latch: Option<&str>,
        sent_ms: i64,
    ) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) if is_disconnect(&e) => {
                self.pending = Some(Pending {
                    args: args.to_vec(),
                    latch: latch.map(str::to_string),
                    sent_ms,
                });
                None
            }
            Err(e) => panic!("{args:?}: {e}"),
        }
    }
}

//! Differential test of the fair lock: `FAIRLOCK.*` against Redisson 4.7's
//! own fair-lock scripts (`fair_lock.lua`, `fair_trylock.lua`,
//! `nonreentrant_fair_lock.lua`, `nonreentrant_fair_trylock.lua`,
//! `fair_acquire_failed.lua`, `fair_unlock.lua`, `fair_force_unlock.lua`
//! in `$RWLOCK_REDISSON_LOCK_LUA`, read at run time).
//!
//! The oracle (plain redis-server) runs each script by `EVAL` with the KEYS
//! and ARGV Redisson passes, `now` being this client's clock read just
//! before, as Redisson's `System.currentTimeMillis()`; the module server runs
//! the command, whose `now` is the server's clock. Random sequences over
//! three locks (a plain name, `{tag}:a` and `x{tag}`) and four owners, with
//! short leases (20..300 ms) and waits (10..200 ms), so that leases run out
//! and stale heads are purged during the run: acquisitions (plain,
//! `NOQUEUE`, `NOREENTRY`, both), cancels, unlocks with `REQUEST` (a fifth
//! retrying an earlier id, as Redisson does on a lost reply), force unlocks
//! and `DEL` of a lock. After every step: the replies (a `ttl` within a
//! tolerance), every key of the sequence (the hash with its TTL, the list in
//! order, the zset with its scores within the tolerance, the latches), and
//! the ordered keyspace events (but `expired`, which each server raises when
//! it happens to look) and messages of both sides.
//!
//! The two clocks differ by the few ms between the two calls, so a step is
//! only run when no deadline of either side (a key's expiry, a waiter's
//! score) lies within `MARGIN` of now: otherwise one side could purge or
//! expire what the other keeps. The step waits until it is clear.
//!
//! The module publishes `0` to the head when a lease runs out (§13.8),
//! where the scripts publish nothing: on the module's side, one head
//! message beside each `expired` event of its lock is left out (counted).
//!
//! Unlocks always carry `REQUEST` (Redisson 4.7 always passes a latch; the
//! script needs one). `FAIRLOCK.CANCEL` replies whether the owner was in the
//! line, where the script replies nil: compared with the oracle's line
//! before the step.
//!
//! One deliberate difference (docs/design.md §13.5, §13.8): an unlock of a
//! lock that does not exist replies nil and stores no latch, where the
//! script replies 1 and latches 1 (its resend would say "released" for a
//! hold gone before it). Such a step (the oracle without the hash before
//! it, no latch to replay) must reply exactly 1 on the oracle and nil on the
//! module; the oracle's latch is then deleted and its `set`, `expire` and
//! `del` events left out, so the two sides stay equal and every other reply,
//! key, event and message of the step still compares exactly. Counted.
//!
//! Environment: `RWLOCK_REDISSON_LOCK_LUA` (default: the scripts `make oracle`
//! extracts from Redisson 4.7.0's jar into `target/redisson-lua/4.7.0`),
//! `RWLOCK_DIFF_SEQUENCES` (default 30), `RWLOCK_DIFF_SEED`.

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use testkit::differential::start_pair;
use testkit::Conn;
use testkit::{eval_lua_of, Collector, Rng, Server, LOCK_LUA};

const OWNERS: [&str; 4] = ["u1:1", "u1:2", "u2:7", "u3:1"];
const REACQUIRE: &str = "NON_REENTRANT_REACQUIRE";
/// No deadline within this of now when a step runs.
const MARGIN: i64 = 12;
/// How far the two sides' TTLs, scores and ttl replies may differ, beyond
/// the time the step itself took (the two calls' clocks differ by up to
/// that much on a loaded machine).
const TOLERANCE: i64 = 10;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// `<prefix>:{name}`, or `<prefix>:name` when the name has a brace.
fn derived(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

#[derive(Debug, Clone)]
struct Names {
    hash: String,
    queue: String,
    timeout: String,
    channel: String,
}

impl Names {
    fn new(hash: String) -> Names {
        Names {
            queue: derived("redisson_lock_queue", &hash),
            timeout: derived("redisson_lock_timeout", &hash),
            channel: derived("redisson_lock__channel", &hash),
            hash,
        }
    }
    fn latch(&self, id: &str) -> String {
        format!("{}:{id}", derived("redisson_unlock_latch", &self.hash))
    }
}

#[derive(Debug, Clone)]
enum Op {
    Acquire {
        lease: i64,
        wait: i64,
        no_queue: bool,
        no_reentry: bool,
    },
    Cancel {
        wait: i64,
    },
    Unlock {
        lease: i64,
        id: String,
        ttl: i64,
    },
    Force,
    Del,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Nil,
    Int(i64),
    Error(String),
    Other(String),
}

fn reply_of(r: redis::RedisResult<Value>) -> Reply {
    match r {
        Ok(Value::Nil) => Reply::Nil,
        Ok(Value::Int(n)) => Reply::Int(n),
        Ok(other) => Reply::Other(format!("{other:?}")),
        Err(e) => Reply::Error(e.to_string()),
    }
}

fn module(conn: &mut Conn, args: &[String]) -> Reply {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    reply_of(cmd.query(conn))
}

/// One step on both sides: the command line, the script and its KEYS/ARGV.
fn plan(
    n: &Names,
    owner: &str,
    op: &Op,
    now: i64,
) -> (Vec<String>, &'static str, Vec<String>, Vec<String>) {
    let s = |v: &str| v.to_string();
    match op {
        Op::Acquire {
            lease,
            wait,
            no_queue,
            no_reentry,
        } => {
            let mut cmd = vec![
                s("FAIRLOCK.ACQUIRE"),
                n.hash.clone(),
                s(owner),
                lease.to_string(),
                s("WAIT"),
                wait.to_string(),
            ];
            if *no_queue {
                cmd.push(s("NOQUEUE"));
            }
            if *no_reentry {
                cmd.push(s("NOREENTRY"));
            }
            let keys = vec![n.hash.clone(), n.queue.clone(), n.timeout.clone()];
            let (script, mut argv) = match no_queue {
                // fair_trylock: lease, owner, now, wait.
                true => (
                    if *no_reentry {
                        "nonreentrant_fair_trylock"
                    } else {
                        "fair_trylock"
                    },
                    vec![
                        lease.to_string(),
                        s(owner),
                        now.to_string(),
                        wait.to_string(),
                    ],
                ),
                // fair_lock: lease, owner, wait, now.
                false => (
                    if *no_reentry {
                        "nonreentrant_fair_lock"
                    } else {
                        "fair_lock"
                    },
                    vec![
                        lease.to_string(),
                        s(owner),
                        wait.to_string(),
                        now.to_string(),
                    ],
                ),
            };
            if *no_reentry {
                argv.push(s(REACQUIRE));
            }
            (cmd, script, keys, argv)
        }
        Op::Cancel { wait } => (
            vec![
                s("FAIRLOCK.CANCEL"),
                n.hash.clone(),
                s(owner),
                s("WAIT"),
                wait.to_string(),
            ],
            "fair_acquire_failed",
            vec![n.queue.clone(), n.timeout.clone()],
            vec![s(owner), wait.to_string()],
        ),
        Op::Unlock { lease, id, ttl } => (
            vec![
                s("FAIRLOCK.UNLOCK"),
                n.hash.clone(),
                s(owner),
                s("LEASE"),
                lease.to_string(),
                s("REQUEST"),
                id.clone(),
                ttl.to_string(),
            ],
            "fair_unlock",
            vec![
                n.hash.clone(),
                n.queue.clone(),
                n.timeout.clone(),
                n.channel.clone(),
                n.latch(id),
            ],
            vec![
                s("0"),
                lease.to_string(),
                s(owner),
                now.to_string(),
                s("PUBLISH"),
                ttl.to_string(),
            ],
        ),
        Op::Force => (
            vec![s("FAIRLOCK.FORCEUNLOCK"), n.hash.clone()],
            "fair_force_unlock",
            vec![
                n.hash.clone(),
                n.queue.clone(),
                n.timeout.clone(),
                n.channel.clone(),
            ],
            vec![s("0"), now.to_string(), s("PUBLISH")],
        ),
        Op::Del => (vec![s("DEL"), n.hash.clone()], "", vec![], vec![]),
    }
}

/// One key as both sides are compared on it.
#[derive(Debug, Clone, PartialEq)]
enum Content {
    Hash(BTreeMap<String, String>),
    List(Vec<String>),
    Zset(BTreeMap<String, i64>),
    Str(String),
}

/// Reads every key matching `ARGV[1]` in one script, so that the server's
/// clock stands still while it reads (no key expires half way).
const DUMP: &str = "local out = {} \
    for _, k in ipairs(redis.call('KEYS', ARGV[1])) do \
      local t = redis.call('TYPE', k)['ok'] local c = {} \
      if t == 'hash' then c = redis.call('HGETALL', k) \
      elseif t == 'list' then c = redis.call('LRANGE', k, 0, -1) \
      elseif t == 'zset' then c = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES') \
      elseif t == 'string' then c = {redis.call('GET', k)} end \
      table.insert(out, {k, t, redis.call('PEXPIRETIME', k), c}) \
    end return out";

/// Every key of the sequence: its content and absolute expiry (-1: none).
fn state(conn: &mut Conn, pattern: &str) -> BTreeMap<String, (Content, i64)> {
    let keys: Vec<(String, String, i64, Vec<String>)> = redis::cmd("EVAL")
        .arg(DUMP)
        .arg(0)
        .arg(pattern)
        .query(conn)
        .expect("dump");
    let mut out = BTreeMap::new();
    for (key, kind, at, c) in keys {
        let pairs = || {
            c.chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect::<Vec<_>>()
        };
        let content = match kind.as_str() {
            "hash" => Content::Hash(pairs().into_iter().collect()),
            "list" => Content::List(c.clone()),
            "zset" => Content::Zset(
                pairs()
                    .into_iter()
                    .map(|(m, s)| (m, s.parse::<f64>().expect("score") as i64))
                    .collect(),
            ),
            "string" => Content::Str(c.concat()),
            other => panic!("unexpected type {other} of {key}"),
        };
        out.insert(key, (content, at));
    }
    out
}

/// The instants at which a side's outcome may change: expiries and scores.
fn deadlines(st: &BTreeMap<String, (Content, i64)>) -> Vec<i64> {
    let mut out = Vec::new();
    for (content, at) in st.values() {
        if *at > 0 {
            out.push(*at);
        }
        if let Content::Zset(z) = content {
            out.extend(z.values().copied());
        }
    }
    out
}

fn close(a: i64, b: i64, tol: i64) -> bool {
    (a - b).abs() <= tol
}

/// The two sides' keys alike: contents exact but for zset scores, and
/// expiries, within the tolerance.
fn same_state(
    o: &BTreeMap<String, (Content, i64)>,
    m: &BTreeMap<String, (Content, i64)>,
    tol: i64,
) -> bool {
    o.len() == m.len()
        && o.iter().zip(m).all(|((ko, (co, ao)), (km, (cm, am)))| {
            let contents = match (co, cm) {
                (Content::Zset(a), Content::Zset(b)) => {
                    a.len() == b.len()
                        && a.iter()
                            .zip(b)
                            .all(|((x, s), (y, t))| x == y && close(*s, *t, tol))
                }
                (a, b) => a == b,
            };
            ko == km && contents && (ao == am || (*ao > 0 && *am > 0 && close(*ao, *am, tol)))
        })
}

/// `gone`: an unlock of a lock the oracle did not have (not a replay), the
/// one deliberate difference of the unlock's reply.
fn same_reply(op: &Op, o: &Reply, m: &Reply, oracle_had: bool, gone: bool, tol: i64) -> bool {
    if gone {
        return *o == Reply::Int(1) && *m == Reply::Nil;
    }
    match (op, o, m) {
        (Op::Cancel { .. }, Reply::Nil, Reply::Int(n)) => *n == i64::from(oracle_had),
        (Op::Acquire { .. }, Reply::Int(a), Reply::Int(b)) => close(*a, *b, tol),
        (_, Reply::Error(a), Reply::Error(b)) => a.contains(REACQUIRE) && b.contains(REACQUIRE),
        (Op::Force, Reply::Int(a), Reply::Int(b)) => a == b,
        _ => o == m,
    }
}

/// Keyspace events and messages, as (channel, payload), in order.
fn observed(c: &Collector, conn: &mut Conn) -> Vec<(String, String)> {
    c.sync(conn)
        .into_iter()
        .map(|(ch, p)| {
            (
                String::from_utf8_lossy(&ch).into_owned(),
                String::from_utf8_lossy(&p).into_owned(),
            )
        })
        .collect()
}

/// Whether `channel` is a waiter channel of the lock whose keyspace
/// channel is `keyspace`.
fn waiter_of(keyspace: &str, channel: &str) -> bool {
    keyspace
        .strip_prefix("__keyspace@0__:")
        .is_some_and(|lock| {
            channel.starts_with(&format!("{}:", derived("redisson_lock__channel", lock)))
        })
}

/// The module's stream less what the module adds on purpose (contract
/// §13.8): for each `expired` event of a lock, one head message beside it
/// (the module publishes it while Redis raises the event: just before it,
/// else just after), where the scripts publish nothing; and both sides less
/// `expired` events, which each server raises when it happens to look.
/// Returns the count of messages dropped.
fn comparable(events: Vec<(String, String)>, module: bool) -> (Vec<(String, String)>, usize) {
    let mut drop = vec![false; events.len()];
    let mut dropped = 0;
    for (e, (keyspace, p)) in events.iter().enumerate() {
        if p != "expired" {
            continue;
        }
        drop[e] = true;
        if !module {
            continue;
        }
        let told = [e.checked_sub(1), Some(e + 1)]
            .into_iter()
            .flatten()
            .find(|&i| !drop.get(i).copied().unwrap_or(true) && waiter_of(keyspace, &events[i].0));
        if let Some(i) = told {
            drop[i] = true;
            dropped += 1;
        }
    }
    let kept = events
        .into_iter()
        .zip(drop)
        .filter(|(_, d)| !d)
        .map(|(e, _)| e)
        .collect();
    (kept, dropped)
}

/// The oracle and the module's server, a connection to each, and a
/// collector of each one's keyspace events and waiter messages.
fn pair() -> ((Server, Server), Conn, Conn, Collector, Collector) {
    testkit::require_lua(LOCK_LUA);
    let (oracle_srv, module_srv) = start_pair(&[]);
    let patterns = ["__keyspace@0__:*", "redisson_lock__channel*"];
    let (oracle, module_conn) = (oracle_srv.conn(), module_srv.conn());
    let oc = Collector::start(&oracle_srv, &patterns);
    let mc = Collector::start(&module_srv, &patterns);
    ((oracle_srv, module_srv), oracle, module_conn, oc, mc)
}

#[derive(Debug, Default)]
struct Stats {
    steps: usize,
    acquired: usize,
    queued: usize,
    negative_ttls: usize,
    refused: usize,
    reacquire_errors: usize,
    cancels_in_line: usize,
    released: usize,
    /// Unlocks of a lock that did not exist: the script's 1, the module's nil.
    gone_unlocks: usize,
    replays: usize,
    head_messages: usize,
    purges: usize,
    forced: usize,
    /// The module's messages to the head when a lease ran out.
    expiry_messages: usize,
    /// Sequences cut short by a step that crossed a deadline.
    tainted: usize,
}

fn gen_op(
    rng: &mut Rng,
    ids: &mut Vec<(usize, usize, String)>,
    lock: &mut usize,
    owner: &mut usize,
) -> Op {
    let lease = rng.range(20, 300);
    let wait = *rng.pick(&[10, 30, 80, 200]);
    match rng.below(100) {
        0..=49 => Op::Acquire {
            lease,
            wait,
            no_queue: rng.chance(20),
            no_reentry: rng.chance(25),
        },
        50..=59 => Op::Cancel { wait },
        60..=87 => {
            let id = if !ids.is_empty() && rng.chance(20) {
                let (l, o, id) = rng.pick(ids).clone();
                (*lock, *owner) = (l, o);
                id
            } else {
                let id = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
                ids.push((*lock, *owner, id.clone()));
                id
            };
            Op::Unlock {
                lease,
                id,
                ttl: rng.range(50, 2000),
            }
        }
        88..=93 => Op::Force,
        _ => Op::Del,
    }
}

#[test]
fn fair_lock_commands_match_redisson_scripts() {
    let sequences = testkit::env_usize("RWLOCK_DIFF_SEQUENCES", 30);
    let base = testkit::seed(0x5EED_FA1E_0025);
    let (_servers, mut oracle, mut module_conn, oc, mc) = pair();
    let mut stats = Stats::default();
    // Sequences a stall cut short prove nothing either way: more are run in
    // their place, so the count compared whole does not depend on the load
    // (up to a ceiling, which only a machine stalling all the time meets).
    let (mut whole, mut seq) = (0, 0);
    while whole < sequences && seq < sequences * 4 {
        let seed = base.wrapping_add(seq as u64);
        seq += 1;
        let mut rng = Rng(seed);
        let tag = format!("f{seq}_{seed:x}");
        let locks = [
            Names::new(format!("{tag}_0")),
            Names::new(format!("{{{tag}}}:a")),
            Names::new(format!("x{{{tag}}}")),
        ];
        let pattern = format!("*{tag}*");
        let mut ids = Vec::new();
        let mut history = Vec::new();
        let mut widest = 0;
        let mut cut_short = false;
        for step in 0..30 {
            let mut lock = rng.below(3) as usize;
            let mut owner = rng.below(OWNERS.len() as u64) as usize;
            let op = gen_op(&mut rng, &mut ids, &mut lock, &mut owner);
            thread::sleep(Duration::from_millis(rng.below(40)));
            // Clear of every deadline of both sides.
            let (pre_o, pre_m) = loop {
                let (so, sm) = (
                    state(&mut oracle, &pattern),
                    state(&mut module_conn, &pattern),
                );
                let now = now_ms();
                let near = deadlines(&so)
                    .into_iter()
                    .chain(deadlines(&sm))
                    .filter(|t| (t - now).abs() <= MARGIN)
                    .max();
                match near {
                    Some(t) => {
                        thread::sleep(Duration::from_millis((t + MARGIN + 1 - now).max(1) as u64))
                    }
                    None => break (so, sm),
                }
            };
            let n = &locks[lock];
            let who = OWNERS[owner];
            let oracle_had = match pre_o.get(&n.queue) {
                Some((Content::List(l), _)) => l.iter().any(|w| w == who),
                _ => false,
            } || matches!(pre_o.get(&n.timeout), Some((Content::Zset(z), _)) if z.contains_key(who));
            let replayed = matches!(&op, Op::Unlock { id, .. } if pre_o.contains_key(&n.latch(id)));
            // The script's latch of this unlock, when the step is the one
            // deliberate difference.
            let gone_latch = match &op {
                Op::Unlock { id, .. } if !replayed && !pre_o.contains_key(&n.hash) => {
                    Some(n.latch(id))
                }
                _ => None,
            };
            let now = now_ms();
            let (cmd, script, keys, argv) = plan(n, who, &op, now);
            let o = if script.is_empty() {
                module(&mut oracle, &cmd)
            } else {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                reply_of(eval_lua_of(&mut oracle, LOCK_LUA, script, &keys, &argv))
            };
            let m = module(&mut module_conn, &cmd);
            if let Some(latch) = &gone_latch {
                module(&mut oracle, &["DEL".to_string(), latch.clone()]);
            }
            let end = now_ms();
            // A key keeps the gap its step made: the run's largest span.
            widest = widest.max(end - now);
            let tol = TOLERANCE + widest;
            history.push(format!("{} -> oracle {o:?} module {m:?}", cmd.join(" ")));
            let ctx = || format!("seed {seed:#x} step {step}:\n  {}", history.join("\n  "));
            let mut oracle_events = observed(&oc, &mut oracle);
            if let Some(latch) = &gone_latch {
                let channel = format!("__keyspace@0__:{latch}");
                oracle_events.retain(|(c, _)| *c != channel);
            }
            let (eo, _) = comparable(oracle_events, false);
            let (em, told) = comparable(observed(&mc, &mut module_conn), true);
            stats.expiry_messages += told;
            let (so, sm) = (
                state(&mut oracle, &pattern),
                state(&mut module_conn, &pattern),
            );
            // A deadline between the step's start and the end of its
            // observation (the machine stalled past the guard's margin): the
            // sides may part, rightly, as a key expires on one side only.
            // Each side's deadlines can sit up to `tol` from the other's (the
            // oracle runs first), and a key already gone from one side shows
            // only the other's deadline: the window is widened by `tol`.
            let seen = now_ms();
            let crossed = [&pre_o, &pre_m, &so, &sm]
                .into_iter()
                .flat_map(deadlines)
                .any(|t| t >= now - 3 - tol && t <= seen + 3 + tol);
            let replies = same_reply(&op, &o, &m, oracle_had, gone_latch.is_some(), tol);
            let keys = same_state(&so, &sm, tol);
            if !(replies && keys && eo == em) && crossed {
                // Not a verdict either way: this sequence ends here.
                stats.tainted += 1;
                cut_short = true;
                break;
            }
            assert!(replies, "replies differ, {}", ctx());
            assert_eq!(eo, em, "events or messages differ, {}", ctx());
            assert!(
                keys,
                "keys differ (tolerance {tol} ms), {}\n oracle {so:?}\n module {sm:?}",
                ctx()
            );
            stats.steps += 1;
            stats.purges += eo.iter().filter(|(_, e)| e == "lpop").count();
            stats.head_messages += eo
                .iter()
                .filter(|(c, _)| c.starts_with("redisson_lock__channel"))
                .count();
            match (&op, &m) {
                (Op::Acquire { .. }, Reply::Nil) => stats.acquired += 1,
                (Op::Acquire { no_queue: true, .. }, Reply::Int(_)) => stats.refused += 1,
                (Op::Acquire { .. }, Reply::Int(t)) => {
                    stats.queued += 1;
                    stats.negative_ttls += usize::from(*t < 0);
                }
                (Op::Acquire { .. }, Reply::Error(_)) => stats.reacquire_errors += 1,
                (Op::Cancel { .. }, Reply::Int(1)) => stats.cancels_in_line += 1,
                (Op::Unlock { .. }, Reply::Nil) if gone_latch.is_some() => stats.gone_unlocks += 1,
                (Op::Unlock { .. }, Reply::Int(1)) if !replayed => stats.released += 1,
                (Op::Unlock { .. }, _) if replayed => stats.replays += 1,
                (Op::Force, Reply::Int(1)) => stats.forced += 1,
                _ => {}
            }
        }
        whole += usize::from(!cut_short);
    }
    eprintln!("differential_fair: {stats:?}");
    let s = &stats;
    assert!(
        whole >= sequences,
        "only {whole} of {seq} sequences compared whole, {} cut short by stalls: {s:?}",
        s.tainted
    );
    for (case, n) in [
        ("acquired", s.acquired),
        ("queued", s.queued),
        ("refused", s.refused),
        ("reacquire errors", s.reacquire_errors),
        ("cancels in line", s.cancels_in_line),
        ("released", s.released),
        ("unlocks of a missing lock", s.gone_unlocks),
        ("replays", s.replays),
        ("head messages", s.head_messages),
        ("lpops", s.purges),
        ("forced", s.forced),
    ] {
        // Each case ran (the generator still reaches it), at least once per
        // 1,000 steps: the rarest (a holder's NOREENTRY re-acquisition, a
        // cancel of a waiter still in line) come at 0.3-0.9 % of steps, and
        // which sequences a stall replaces moves them by that much.
        assert!(
            n > 0 && n * 1000 >= s.steps,
            "only {n} {case} in {} steps: {s:?}",
            s.steps
        );
    }
}

/// Long lines, which the random sequences (four owners) never build: 150
/// waiters on one lock, so the deadline zset leaves Redis's compact
/// encoding (128 members) and the module's long-line paths run (the range
/// behind a cancelled waiter read by one `LRANGE`, past 16 elements). Waits
/// are long, so nobody goes stale: each step is compared exactly as above
/// (replies, keys with scores within the tolerance, events and messages).
/// Steps: the line fills; waiters cancel at its head, middle, tail and one
/// who is not in it; the holder hands over to the head; the line empties by
/// cancels.
#[test]
fn long_lines_match_redisson_scripts() {
    let (_servers, mut oracle, mut module_conn, oc, mc) = pair();
    let n = Names::new("{long}:line".to_string());
    let owner = |i: usize| format!("w{i:03}:1");
    let acquire = Op::Acquire {
        lease: 600_000,
        wait: 300_000,
        no_queue: false,
        no_reentry: false,
    };
    let cancel = Op::Cancel { wait: 300_000 };
    let unlock = |id: &str| Op::Unlock {
        lease: 600_000,
        id: id.to_string(),
        ttl: 5_000,
    };
    let mut steps: Vec<(String, Op)> = (0..150).map(|i| (owner(i), acquire.clone())).collect();
    for i in [1, 75, 149, 500, 2, 40] {
        steps.push((owner(i), cancel.clone()));
    }
    steps.push((owner(0), unlock("u1")));
    steps.push((owner(3), acquire.clone()));
    steps.push((owner(0), acquire.clone()));
    steps.extend((4..149).map(|i| (owner(i), cancel.clone())));
    steps.push((owner(0), cancel.clone()));
    let pattern = "*long*";
    let mut history = Vec::new();
    let mut widest = 0;
    for (step, (who, op)) in steps.iter().enumerate() {
        let pre = state(&mut oracle, pattern);
        let oracle_had =
            matches!(pre.get(&n.queue), Some((Content::List(l), _)) if l.contains(who));
        let now = now_ms();
        let (cmd, script, keys, argv) = plan(&n, who, op, now);
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let o = reply_of(eval_lua_of(&mut oracle, LOCK_LUA, script, &keys, &argv));
        let m = module(&mut module_conn, &cmd);
        // A deadline keeps the gap between the two calls of the step that
        // set it: the run's largest span, not this step's (a loaded run
        // stalled 14 ms between step 0's calls, and step 1's TTLs differed
        // by that much).
        widest = widest.max(now_ms() - now);
        let tol = TOLERANCE + widest;
        history.push(format!("{} -> oracle {o:?} module {m:?}", cmd.join(" ")));
        let ctx = || format!("step {step}: {}", history.last().map_or("", String::as_str));
        assert!(
            same_reply(op, &o, &m, oracle_had, false, tol),
            "replies differ, {}",
            ctx()
        );
        let (eo, _) = comparable(observed(&oc, &mut oracle), false);
        let (em, _) = comparable(observed(&mc, &mut module_conn), true);
        assert_eq!(eo, em, "events or messages differ, {}", ctx());
        let (so, sm) = (
            state(&mut oracle, pattern),
            state(&mut module_conn, pattern),
        );
        assert!(
            same_state(&so, &sm, tol),
            "keys differ, {}\n oracle {so:?}\n module {sm:?}",
            ctx()
        );
    }
    // The run went where it meant to: every key gone at the end but the hash.
    let end = state(&mut module_conn, pattern);
    assert!(
        !end.contains_key(&n.queue) && !end.contains_key(&n.timeout),
        "{end:?}"
    );
    assert!(end.contains_key(&n.hash), "{end:?}");
}

//! Differential test of the plain lock: `LOCK.*` against Redisson 4.7's own
//! Lua scripts (`lock.lua`, `fenced_lock.lua`, `nonreentrant_lock.lua`,
//! `unlock.lua`, `renew.lua`, `force_unlock.lua` in
//! `$RWLOCK_REDISSON_LOCK_LUA`, read at run time).
//!
//! The oracle (plain redis-server) runs each script by `EVAL` with the KEYS
//! and ARGV Redisson passes (each script's header); the module server runs
//! the command. Random sequences over three locks (a plain name and two
//! braced ones, `{s<i>_L}:a`, `{s<i>_L}:b`) and three owners: acquisitions
//! (plain, `FENCED`, `NOREENTRY`), unlocks with `REQUEST` (Redisson's retries
//! included: the same request id again) and without, renewals (one lock, or
//! `renew.lua`'s batch against one `LOCK.RENEW` per lock), force unlocks,
//! `DEL` of a lock, `LOCK.INFO` against the oracle's data, and real leases
//! (mostly 20..300 ms, some 1..5 ms) running out between them. After every
//! step the testkit's runner (`testkit::differential`, shared with
//! `differential.rs`, whose header explains the timing guard) compares every
//! key of the sequence (type, content, TTL within a tolerance: the hashes,
//! the fencing tokens, the latches), and the ordered keyspace events and
//! lock messages of both sides; this file compares the replies.
//!
//! Mapping, each as Redisson 4.7 calls it:
//!
//! | module | oracle |
//! |---|---|
//! | `LOCK.ACQUIRE L O lease` | `lock.lua` KEYS `L`; ARGV lease, O |
//! | `… FENCED` | `fenced_lock.lua` KEYS `L`, `redisson_lock_token:{L}`; ARGV lease, O |
//! | `… NOREENTRY` | `nonreentrant_lock.lua` KEYS `L`; ARGV lease, O, `NON_REENTRANT_REACQUIRE` |
//! | `LOCK.UNLOCK L O [LEASE ms] REQUEST id ttl` | `unlock.lua` KEYS `L`, `redisson_lock__channel:{L}`, `redisson_unlock_latch:{L}:id`; ARGV `0`, ms (else `rwlock.default-lease`), O, `PUBLISH`, ttl |
//! | `LOCK.RENEW L O lease` | `renew.lua` KEYS `L`; ARGV lease, O |
//! | `LOCK.RENEW` of each lock, pipelined | `renew.lua` KEYS every lock; ARGV lease, each lock's owner |
//! | `LOCK.FORCEUNLOCK L` | `force_unlock.lua` KEYS `L`, `redisson_lock__channel:{L}`; ARGV `0`, `PUBLISH` |
//! | `DEL L` | `DEL L` |
//! | `LOCK.INFO L` | `HGETALL L`, `PTTL L`, `GET redisson_lock_token:{L}`, in its shape |
//!
//! Deliberate differences (design.md §10.10), each handled explicitly,
//! counted and required to occur:
//!
//! - **An unlock without `REQUEST`.** Redisson 4.7 always passes a latch,
//!   so most unlocks carry `REQUEST` and match `unlock.lua` one to one.
//!   `LOCK.UNLOCK` without `REQUEST` stores no latch (§10.3); rather than
//!   leave that path untested, such a call is compared with `unlock.lua`
//!   given a latch id of its own (`oracle-only…`, never a module's):
//!   everything must match but that latch, which the step reads back on the
//!   oracle (it must hold the reply, or not exist after a nil) and deletes
//!   there, and which the comparison leaves out.
//! - **The re-entry error.** `nonreentrant_lock.lua` returns
//!   `redis.error_reply('NON_REENTRANT_REACQUIRE')`, which Redis 7+, Valkey
//!   and Redis 8 send as `ERR NON_REENTRANT_REACQUIRE` (a script's error
//!   without a code gets `ERR`); the module sends `NON_REENTRANT_REACQUIRE
//!   the owner already holds this non-reentrant lock`. They are compared as
//!   Redisson tells a re-entry (`RedissonNonReentrantLock.isReentryError`:
//!   the message contains `NON_REENTRANT_REACQUIRE`), and the module's code
//!   must be that word (§10.7).
//! - **One lock per renewal.** `renew.lua` replies one 0/1 per lock, `[1]`
//!   for one; `LOCK.RENEW` replies the integer.
//!
//! The random run makes no corrupt data and no keys of other types, where
//! the scripts and the commands part ways on purpose (the scripts fail half
//! way, or `force_unlock.lua` deletes whatever is there);
//! `bad_data_differs_as_documented` asserts those differences.
//!
//! Environment: `RWLOCK_REDISSON_LOCK_LUA` (default: the scripts `make oracle`
//! extracts from Redisson 4.7.0's jar into `target/redisson-lua/4.7.0`), and the knobs of
//! every differential test: `RWLOCK_DIFF_SEQUENCES` (default 500),
//! `RWLOCK_DIFF_SEED`, `RWLOCK_DIFF_THREADS`, `RWLOCK_DIFF_REPLAY`.

use std::collections::BTreeMap;
use std::time::Instant;

use redis::Value;
use testkit::differential::{
    self as diff, pttl_close, run_command, to_reply, Before, Differential, LockKeys, Locks, Reply,
    Span, StepRecord,
};
use testkit::Conn;
use testkit::{
    eval_lua_of, events_str, latch_key, lock_channel, ok_all, pairs, snapshot, token_key,
    Collector, Rng, LOCK_LUA,
};

const DEFAULT_SEQUENCES: usize = 500;
const DEFAULT_SEED: u64 = 0x5EED_2025_0010_0C4B;

/// Owners as Redisson forms them: `<client uuid>:<thread id>`.
const OWNERS: [&str; 3] = ["u1:1", "u1:2", "u2:7"];
/// Locks per sequence: one plain name, two braced ones sharing a tag.
const LOCKS: usize = 3;

/// `rwlock.default-lease` of the module server: what an unlock without
/// `LEASE` re-arms a lock with, and so the `ARGV[2]` its script gets
/// (Redisson's `internalLockLeaseTime`). Short, so that such locks expire
/// within a sequence too.
const DEFAULT_LEASE: u64 = 250;

/// The text `nonreentrant_lock.lua` replies as its error (its ARGV[3]),
/// which is the code of the module's error.
const REACQUIRE: &str = "NON_REENTRANT_REACQUIRE";

/// Start of the latch ids `unlock.lua` is given for a module unlock without
/// `REQUEST`: not hex, so never one of the generator's request ids.
const ORACLE_ONLY: &str = "oracle-only";
/// Their TTL: long enough to be read back, since the step deletes them.
const ORACLE_ONLY_TTL: u64 = 60_000;

// ---------------------------------------------------------------------------
// Names (design.md §10.1)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Names {
    hash: String,
    channel: String,
    token: String,
    /// Every latch of the lock starts so: `redisson_unlock_latch:{L}:`.
    latch_prefix: String,
}

impl Names {
    fn new(name: &str) -> Names {
        Names {
            hash: name.to_string(),
            channel: lock_channel(name),
            token: token_key(name),
            latch_prefix: latch_key(name, ""),
        }
    }

    fn latch(&self, id: &str) -> String {
        format!("{}{id}", self.latch_prefix)
    }
}

impl LockKeys for Names {
    /// The hash, the token and the latches, but for the oracle-only ones.
    fn owns_key(&self, key: &str) -> bool {
        key == self.hash
            || key == self.token
            || key
                .strip_prefix(self.latch_prefix.as_str())
                .is_some_and(|id| !id.is_empty() && !id.starts_with(ORACLE_ONLY))
    }

    fn channel(&self) -> &str {
        &self.channel
    }
}

type SeqNames = Locks<Names>;

/// Sequence `index`'s locks: `s<i>_L0`, `{s<i>_L}:a`, `{s<i>_L}:b`.
fn seq_names(index: usize) -> SeqNames {
    let names = [
        format!("s{index}_L0"),
        format!("{{s{index}_L}}:a"),
        format!("{{s{index}_L}}:b"),
    ];
    Locks::new(names.to_vec(), format!("*s{index}_L*"), Names::new)
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Fenced,
    NoReentry,
}

/// The latch an unlock names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Latch {
    /// `REQUEST id ttl` on the module, the same latch for the script.
    Request { id: String, ttl: u64 },
    /// No `REQUEST`: the script still gets this latch (oracle only).
    OracleOnly(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Acquire(Variant),
    Unlock {
        /// `LEASE ms`, else the default lease.
        lease: Option<u64>,
        latch: Latch,
        /// `REQUEST` before `LEASE` on the module's command line.
        request_first: bool,
    },
    Renew,
    /// `renew.lua` over every lock, with this owner for each.
    RenewAll([usize; LOCKS]),
    ForceUnlock,
    Del,
    Info,
}

/// Its lease is that of acquisitions and renewals.
type Op = diff::Op<Kind>;
type Step = diff::Step<Kind>;

/// A request id as Redisson makes them: 32 hex digits.
fn request_id(rng: &mut Rng) -> String {
    format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64())
}

/// The steps of a sequence: a function of its seed only. As in
/// `differential.rs`, most unlocks, renewals and re-entries aim at an
/// acquisition emitted earlier (whether it will succeed or not), the rest
/// are random (unlocking what one does not hold, a lock that does not
/// exist); a fifth of the unlocks retry an earlier request, as Redisson
/// does when a reply is lost.
fn gen_steps(seed: u64) -> Vec<Step> {
    let mut rng = Rng(seed);
    let n = rng.range(12, 24);
    let mut steps = Vec::with_capacity(n as usize);
    // (lock, owner) of acquisitions not yet aimed at by an unlock.
    let mut acquired: Vec<(usize, usize)> = Vec::new();
    // (lock, owner, latch) of unlocks with REQUEST, to retry.
    let mut requests: Vec<(usize, usize, Latch)> = Vec::new();
    for i in 0..n {
        let pause_ms = diff::draw_pause(&mut rng);
        let lease = diff::draw_lease(&mut rng);
        let mut lock = rng.below(LOCKS as u64) as usize;
        let mut owner = rng.below(OWNERS.len() as u64) as usize;
        let aimed = !acquired.is_empty() && rng.chance(70);
        let kind = match rng.below(100) {
            0..=39 => {
                let variant = match rng.below(100) {
                    0..=54 => Variant::Plain,
                    55..=79 => Variant::Fenced,
                    _ => Variant::NoReentry,
                };
                // Re-entries: often the same owner and lock as an earlier one.
                if aimed && rng.chance(40) {
                    (lock, owner) = *rng.pick(&acquired);
                }
                acquired.push((lock, owner));
                Kind::Acquire(variant)
            }
            40..=64 => {
                let lease = rng.chance(70).then_some(lease);
                let latch = match rng.below(100) {
                    0..=19 if !requests.is_empty() => {
                        let (l, o, latch) = rng.pick(&requests).clone();
                        (lock, owner) = (l, o);
                        latch
                    }
                    0..=69 => {
                        let ttl = match rng.below(100) {
                            0..=9 => rng.range(1, 5),
                            10..=59 => rng.range(20, 300),
                            _ => rng.range(300, 3000),
                        } as u64;
                        let latch = Latch::Request {
                            id: request_id(&mut rng),
                            ttl,
                        };
                        if aimed {
                            (lock, owner) =
                                acquired.remove(rng.below(acquired.len() as u64) as usize);
                        }
                        requests.push((lock, owner, latch.clone()));
                        latch
                    }
                    _ => {
                        if aimed {
                            (lock, owner) =
                                acquired.remove(rng.below(acquired.len() as u64) as usize);
                        }
                        Latch::OracleOnly(format!("{ORACLE_ONLY}-{i}"))
                    }
                };
                Kind::Unlock {
                    lease,
                    latch,
                    request_first: rng.chance(50),
                }
            }
            65..=76 => {
                if aimed {
                    (lock, owner) = *rng.pick(&acquired);
                }
                Kind::Renew
            }
            77..=81 => {
                // Each lock's owner: mostly one that acquired it.
                let owners = std::array::from_fn(|l| {
                    let of_lock: Vec<usize> = acquired
                        .iter()
                        .filter(|(al, _)| *al == l)
                        .map(|(_, o)| *o)
                        .collect();
                    if !of_lock.is_empty() && rng.chance(70) {
                        *rng.pick(&of_lock)
                    } else {
                        rng.below(OWNERS.len() as u64) as usize
                    }
                });
                Kind::RenewAll(owners)
            }
            82..=87 => {
                if aimed && rng.chance(50) {
                    lock = rng.pick(&acquired).0;
                }
                Kind::ForceUnlock
            }
            88..=92 => Kind::Del,
            _ => Kind::Info,
        };
        let op = Op {
            kind,
            lock,
            owner,
            lease,
        };
        steps.push(Step { pause_ms, op });
    }
    steps
}

/// What the module runs: one command, or for a batch renewal one
/// `LOCK.RENEW` per lock (pipelined).
fn module_commands(names: &SeqNames, op: &Op) -> Vec<Vec<String>> {
    let lock = names.locks[op.lock].hash.clone();
    let owner = OWNERS[op.owner].to_string();
    let lease = op.lease.to_string();
    let command = match &op.kind {
        Kind::Acquire(variant) => {
            let mut args = vec!["LOCK.ACQUIRE".into(), lock, owner, lease];
            match variant {
                Variant::Plain => {}
                Variant::Fenced => args.push("FENCED".into()),
                Variant::NoReentry => args.push("NOREENTRY".into()),
            }
            args
        }
        Kind::Unlock {
            lease,
            latch,
            request_first,
        } => {
            let mut options = Vec::new();
            if let Some(ms) = lease {
                options.push(vec!["LEASE".to_string(), ms.to_string()]);
            }
            if let Latch::Request { id, ttl } = latch {
                let request = vec!["REQUEST".to_string(), id.clone(), ttl.to_string()];
                if *request_first {
                    options.insert(0, request);
                } else {
                    options.push(request);
                }
            }
            let mut args = vec!["LOCK.UNLOCK".into(), lock, owner];
            args.extend(options.into_iter().flatten());
            args
        }
        Kind::Renew => vec!["LOCK.RENEW".into(), lock, owner, lease],
        Kind::RenewAll(owners) => {
            return names
                .locks
                .iter()
                .zip(owners)
                .map(|(n, o)| {
                    vec![
                        "LOCK.RENEW".into(),
                        n.hash.clone(),
                        OWNERS[*o].to_string(),
                        lease.clone(),
                    ]
                })
                .collect()
        }
        Kind::ForceUnlock => vec!["LOCK.FORCEUNLOCK".into(), lock],
        Kind::Del => vec!["DEL".into(), lock],
        Kind::Info => vec!["LOCK.INFO".into(), lock],
    };
    vec![command]
}

fn describe(commands: &[Vec<String>]) -> String {
    commands
        .iter()
        .map(|c| c.join(" "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What the oracle runs for one operation.
#[derive(Debug, Clone)]
enum Oracle {
    Script {
        name: &'static str,
        keys: Vec<String>,
        args: Vec<String>,
    },
    Command(Vec<String>),
    /// `LOCK.INFO` rebuilt from the oracle's data.
    InfoOf(Names),
}

impl Oracle {
    fn describe(&self) -> String {
        match self {
            Oracle::Script { name, keys, args } => {
                format!("EVAL {name}.lua KEYS={keys:?} ARGV={args:?}")
            }
            Oracle::Command(args) => args.join(" "),
            Oracle::InfoOf(n) => format!("HGETALL {0}; PTTL {0}; GET {1}", n.hash, n.token),
        }
    }
}

fn oracle_of(names: &SeqNames, op: &Op) -> Oracle {
    let n = &names.locks[op.lock];
    let owner = OWNERS[op.owner].to_string();
    let lease = op.lease.to_string();
    let script = |name: &'static str, keys: &[&str], args: Vec<String>| Oracle::Script {
        name,
        keys: keys.iter().map(|k| k.to_string()).collect(),
        args,
    };
    match &op.kind {
        Kind::Acquire(Variant::Plain) => script("lock", &[&n.hash], vec![lease, owner]),
        Kind::Acquire(Variant::Fenced) => {
            script("fenced_lock", &[&n.hash, &n.token], vec![lease, owner])
        }
        Kind::Acquire(Variant::NoReentry) => script(
            "nonreentrant_lock",
            &[&n.hash],
            vec![lease, owner, REACQUIRE.into()],
        ),
        Kind::Unlock { lease, latch, .. } => {
            let (id, ttl) = match latch {
                Latch::Request { id, ttl } => (id.as_str(), *ttl),
                Latch::OracleOnly(id) => (id.as_str(), ORACLE_ONLY_TTL),
            };
            script(
                "unlock",
                &[&n.hash, &n.channel, &n.latch(id)],
                vec![
                    "0".into(),
                    lease.unwrap_or(DEFAULT_LEASE).to_string(),
                    owner,
                    "PUBLISH".into(),
                    ttl.to_string(),
                ],
            )
        }
        Kind::Renew => script("renew", &[&n.hash], vec![lease, owner]),
        Kind::RenewAll(owners) => {
            let keys: Vec<&str> = names.locks.iter().map(|l| l.hash.as_str()).collect();
            let mut args = vec![lease];
            args.extend(owners.iter().map(|o| OWNERS[*o].to_string()));
            script("renew", &keys, args)
        }
        Kind::ForceUnlock => script(
            "force_unlock",
            &[&n.hash, &n.channel],
            vec!["0".into(), "PUBLISH".into()],
        ),
        Kind::Del => Oracle::Command(vec!["DEL".into(), n.hash.clone()]),
        Kind::Info => Oracle::InfoOf(n.clone()),
    }
}

/// What `LOCK.INFO` would reply from a lock's data as the oracle holds it.
fn info_of(conn: &mut Conn, n: &Names) -> Reply {
    let fetched: redis::RedisResult<(BTreeMap<String, String>, i64, Option<String>)> =
        redis::pipe()
            .cmd("HGETALL")
            .arg(&n.hash)
            .cmd("PTTL")
            .arg(&n.hash)
            .cmd("GET")
            .arg(&n.token)
            .query(conn);
    let (hash, pttl, token) = match fetched {
        Ok(v) => v,
        Err(e) => return to_reply(Err(e)),
    };
    let text = |s: &str| Reply::Text(s.to_string());
    let int_or_text = |v: &str| v.parse().map_or_else(|_| text(v), Reply::Int);
    let holders = hash
        .iter()
        .map(|(owner, count)| {
            Reply::Array(vec![
                text("owner"),
                text(owner),
                text("count"),
                int_or_text(count),
                // No hold here is bound to a connection.
                text("session"),
                Reply::Int(0),
            ])
        })
        .collect();
    Reply::Array(vec![
        text("holders"),
        Reply::Array(holders),
        text("ttl"),
        Reply::Int(pttl),
        text("token"),
        token.as_deref().map_or(Reply::Nil, int_or_text),
        // No client waits in a differential run.
        text("waiters"),
        Reply::Array(vec![]),
    ])
}

/// Reads back and deletes an oracle-only latch: its value, or nil.
fn take_latch(conn: &mut Conn, key: &str) -> Reply {
    let taken: redis::RedisResult<(Value, i64)> = redis::pipe()
        .cmd("GET")
        .arg(key)
        .cmd("DEL")
        .arg(key)
        .query(conn);
    match taken {
        Ok((value, _)) => to_reply(Ok(value)),
        Err(e) => to_reply(Err(e)),
    }
}

// ---------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------

/// How a step's replies compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Same,
    /// A re-entry error on both sides, as Redisson tells one; the texts
    /// differ (`ERR NON_REENTRANT_REACQUIRE` from the script).
    ReacquireText,
    /// `renew.lua`'s `[x]` against `LOCK.RENEW`'s `x`.
    RenewOfOne,
    /// The replies match; the oracle wrote a latch the module, called
    /// without `REQUEST`, did not.
    OracleOnlyLatch,
    Differs,
}

/// Whether an acquisition's reply (either side's) took the lock: nil, or
/// `[-1, token]` for a fenced one; a refusal is the PTTL, or `[pttl, -1]`.
fn took(reply: &Reply) -> Option<bool> {
    match reply {
        Reply::Nil => Some(true),
        Reply::Int(_) => Some(false),
        Reply::Array(pair) => match pair.as_slice() {
            [Reply::Int(-1), Reply::Int(t)] if *t != -1 => Some(true),
            [Reply::Int(_), Reply::Int(-1)] => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// An error reply Redisson takes for a re-entry of its non-reentrant lock.
fn reentry_error(reply: &Reply) -> bool {
    matches!(reply, Reply::Error { text, .. } if text.contains(REACQUIRE))
}

/// Two refusals of an acquisition, the PTTLs within `tol`.
fn same_refusal(o: &Reply, m: &Reply, tol: f64) -> bool {
    match (o, m) {
        (Reply::Int(a), Reply::Int(b)) => pttl_close(*a, *b, tol),
        (Reply::Array(a), Reply::Array(b)) => match (a.as_slice(), b.as_slice()) {
            ([Reply::Int(a), Reply::Int(-1)], [Reply::Int(b), Reply::Int(-1)]) => {
                pttl_close(*a, *b, tol)
            }
            _ => false,
        },
        _ => false,
    }
}

/// Two `LOCK.INFO` replies alike but for the TTL (element 3), which may
/// differ by `tol`.
fn same_info(o: &Reply, m: &Reply, tol: f64) -> bool {
    match (o, m) {
        (Reply::Array(a), Reply::Array(b)) if a.len() == 8 && b.len() == 8 => {
            let ttls_close = match (&a[3], &b[3]) {
                (Reply::Int(x), Reply::Int(y)) => pttl_close(*x, *y, tol),
                _ => false,
            };
            ttls_close
                && a.iter()
                    .zip(b)
                    .enumerate()
                    .all(|(i, (x, y))| i == 3 || x == y)
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// The test as the runner sees it
// ---------------------------------------------------------------------------

testkit::counters! {
    #[derive(Debug, Default, Clone)]
    struct Stats {
        acquisitions, reentries, refusals, fenced, fenced_refusals, reacquire_errors,
        releases, still_held, not_held, replays, oracle_only_latches, renewals,
        renew_refusals, batch_renewals, force_unlocks, force_free, dels, infos, infos_held,
    }
}

/// What both sides run for one step, and what the oracle held before it.
struct Plan {
    op: Op,
    lock: Names,
    module: Vec<Vec<String>>,
    oracle: Oracle,
    /// The lock's hash before the step.
    pre: Option<BTreeMap<String, String>>,
    /// Whether the `REQUEST` latch existed before the step (a retry that
    /// the latch answers).
    latch_before: bool,
    /// The oracle-only latch as read back after the script.
    oracle_latch: Option<Reply>,
}

struct PlainLock;

impl Differential for PlainLock {
    type Names = SeqNames;
    type Kind = Kind;

    const CHANNELS: &'static [&'static str] = &["redisson_lock__channel*"];

    type Plan = Plan;
    type Verdict = Verdict;
    type Stats = Stats;

    fn label(&self) -> &str {
        "lock"
    }

    fn replay(&self) -> String {
        "cargo test --release --test differential_lock \
         lock_commands_match_redisson_scripts"
            .to_string()
    }

    fn names(&self, index: usize) -> SeqNames {
        seq_names(index)
    }

    fn context(&self, names: &SeqNames) -> String {
        let locks = names.context(&OWNERS);
        format!("{locks}, module default-lease {DEFAULT_LEASE}")
    }

    fn steps(&self, seed: u64) -> Vec<Step> {
        gen_steps(seed)
    }

    fn module_cmd(&self, names: &SeqNames, op: &Op) -> String {
        describe(&module_commands(names, op))
    }

    fn plan(&self, names: &SeqNames, op: &Op, before: &Before<'_>) -> Plan {
        let lock = names.locks[op.lock].clone();
        let latch_before = match &op.kind {
            Kind::Unlock {
                latch: Latch::Request { id, .. },
                ..
            } => before.oracle.at(&lock.latch(id), before.now).is_some(),
            _ => false,
        };
        Plan {
            op: op.clone(),
            pre: before.oracle.hash_at(&lock.hash, before.now).cloned(),
            module: module_commands(names, op),
            oracle: oracle_of(names, op),
            latch_before,
            oracle_latch: None,
            lock,
        }
    }

    fn oracle_cmd(&self, plan: &Plan) -> String {
        let ran = plan.oracle.describe();
        match &plan.op.kind {
            Kind::Unlock {
                latch: Latch::OracleOnly(id),
                ..
            } => format!("{ran}; GET+DEL {} (oracle only)", plan.lock.latch(id)),
            _ => ran,
        }
    }

    fn execute(&self, plan: &mut Plan, (oracle, module): (&mut Conn, &mut Conn)) -> (Reply, Reply) {
        let reply_o = match &plan.oracle {
            Oracle::Script { name, keys, args } => {
                let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                to_reply(eval_lua_of(oracle, LOCK_LUA, name, &keys, &args))
            }
            Oracle::Command(args) => run_command(oracle, args),
            Oracle::InfoOf(n) => info_of(oracle, n),
        };
        if let Kind::Unlock {
            latch: Latch::OracleOnly(id),
            ..
        } = &plan.op.kind
        {
            plan.oracle_latch = Some(take_latch(oracle, &plan.lock.latch(id)));
        }
        let reply_m = match plan.module.as_slice() {
            [command] => run_command(module, command),
            batch => {
                let mut pipe = redis::pipe();
                for command in batch {
                    pipe.add_command(testkit::cmd_of(command));
                }
                to_reply(pipe.query::<Vec<Value>>(module).map(Value::Array))
            }
        };
        (reply_o, reply_m)
    }

    fn predicted(&self, plan: &Plan, (start, end): (Instant, Instant)) -> Vec<Span> {
        // A re-entry sets the TTL to the lease (never adds to what is
        // left), so no deadline depends on an earlier one.
        own_leases(&plan.op)
            .into_iter()
            .map(|ms| Span::after(start, end, ms))
            .collect()
    }

    fn own_lease(&self, plan: &Plan) -> (u64, String) {
        let shortest = own_leases(&plan.op).into_iter().min();
        (shortest.unwrap_or(plan.op.lease), plan.lock.hash.clone())
    }

    fn compare_replies(&self, plan: &Plan, rec: &StepRecord, diffs: &mut Vec<String>) -> Verdict {
        let (o, m, tol) = (&rec.reply_o, &rec.reply_m, rec.tol_ms);
        let verdict = match &plan.op.kind {
            _ if o == m => Verdict::Same,
            Kind::Acquire(_) if same_refusal(o, m, tol) => Verdict::Same,
            // As Redisson tells it (RedissonNonReentrantLock.isReentryError:
            // the message contains the word), with the module's code the one
            // §10.7 documents.
            Kind::Acquire(Variant::NoReentry)
                if reentry_error(o) && reentry_error(m) && m.error_code() == Some(REACQUIRE) =>
            {
                Verdict::ReacquireText
            }
            Kind::Renew if *o == Reply::Array(vec![m.clone()]) => Verdict::RenewOfOne,
            Kind::Info if same_info(o, m, tol) => Verdict::Same,
            _ => Verdict::Differs,
        };
        if verdict == Verdict::Differs {
            diffs.push(format!("reply: oracle {o}, module {m}"));
            return verdict;
        }
        let Some(latch) = &plan.oracle_latch else {
            return verdict;
        };
        // unlock.lua stores its reply (0 or 1) in the latch, and nothing
        // after a nil; the module, without REQUEST, stores nothing.
        match (o, latch) {
            (Reply::Int(v), Reply::Text(stored)) if *stored == v.to_string() => {
                Verdict::OracleOnlyLatch
            }
            (Reply::Nil, Reply::Nil) => verdict,
            _ => {
                diffs.push(format!(
                    "unlock.lua replied {o} but left {latch} in its latch (oracle only)"
                ));
                Verdict::Differs
            }
        }
    }

    fn account(&self, stats: &mut Stats, plan: &Plan, verdict: &Verdict, rec: &StepRecord) {
        let op = &plan.op;
        let reply = &rec.reply_o;
        match &op.kind {
            Kind::Acquire(variant) => {
                let fenced = *variant == Variant::Fenced;
                match took(reply) {
                    Some(true) => {
                        stats.acquisitions += 1;
                        stats.fenced += usize::from(fenced);
                        let held = plan
                            .pre
                            .as_ref()
                            .is_some_and(|h| h.contains_key(OWNERS[op.owner]));
                        stats.reentries += usize::from(held);
                    }
                    Some(false) => {
                        stats.refusals += 1;
                        stats.fenced_refusals += usize::from(fenced);
                    }
                    None => {}
                }
                stats.reacquire_errors += usize::from(*verdict == Verdict::ReacquireText);
            }
            Kind::Unlock { .. } => {
                stats.replays += usize::from(plan.latch_before);
                stats.oracle_only_latches += usize::from(*verdict == Verdict::OracleOnlyLatch);
                match reply {
                    Reply::Int(1) => stats.releases += 1,
                    Reply::Int(0) => stats.still_held += 1,
                    Reply::Nil => stats.not_held += 1,
                    _ => {}
                }
            }
            Kind::Renew => match reply {
                Reply::Array(r) if r.as_slice() == [Reply::Int(1)] => stats.renewals += 1,
                _ => stats.renew_refusals += 1,
            },
            Kind::RenewAll(_) => stats.batch_renewals += 1,
            Kind::ForceUnlock => match reply {
                Reply::Int(1) => stats.force_unlocks += 1,
                _ => stats.force_free += 1,
            },
            Kind::Del => stats.dels += usize::from(*reply == Reply::Int(1)),
            Kind::Info => {
                stats.infos += 1;
                stats.infos_held += usize::from(plan.pre.is_some());
            }
        }
    }
}

/// The leases and TTLs (ms) an operation may set on a key both sides
/// observe: the lock's lease, and an unlock's `REQUEST` latch. An
/// oracle-only latch is never observed.
fn own_leases(op: &Op) -> Vec<u64> {
    match &op.kind {
        Kind::Acquire(_) | Kind::Renew | Kind::RenewAll(_) => vec![op.lease],
        Kind::Unlock { lease, latch, .. } => {
            let mut out = vec![lease.unwrap_or(DEFAULT_LEASE)];
            if let Latch::Request { ttl, .. } = latch {
                out.push(*ttl);
            }
            out
        }
        Kind::ForceUnlock | Kind::Del | Kind::Info => Vec::new(),
    }
}

// ---------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------

fn summary(s: &Stats) -> String {
    format!(
        "acquisitions {} (re-entries {}, fenced {}), refused {} (fenced {}), \
         NON_REENTRANT_REACQUIRE {}, unlocks: released {} / still held {} / not held {} \
         (answered by a latch {}, oracle-only latches {}), renewals {} / refused {} \
         (batches {}), force unlocks {} / of nothing {}, DELs {}, LOCK.INFO {} (of held \
         locks {})",
        s.acquisitions,
        s.reentries,
        s.fenced,
        s.refusals,
        s.fenced_refusals,
        s.reacquire_errors,
        s.releases,
        s.still_held,
        s.not_held,
        s.replays,
        s.oracle_only_latches,
        s.renewals,
        s.renew_refusals,
        s.batch_renewals,
        s.force_unlocks,
        s.force_free,
        s.dels,
        s.infos,
        s.infos_held,
    )
}

#[test]
fn lock_commands_match_redisson_scripts() {
    testkit::require_lua(LOCK_LUA);
    let default_lease = DEFAULT_LEASE.to_string();
    let run = diff::run(
        &PlainLock,
        &["default-lease", &default_lease],
        diff::base_seed(DEFAULT_SEED),
        diff::sequences(DEFAULT_SEQUENCES),
        summary,
        "",
    );
    let Some(s) = run.to_check() else { return };
    let line = &run.line;
    for (count, what) in [
        (s.acquisitions, "acquisition"),
        (s.reentries, "re-entry"),
        (s.fenced, "fenced acquisition"),
        (s.refusals, "refused acquisition"),
        (s.fenced_refusals, "refused fenced acquisition"),
        (
            s.reacquire_errors,
            "NON_REENTRANT_REACQUIRE (deliberate: error text)",
        ),
        (s.releases, "release"),
        (s.still_held, "partial release"),
        (s.not_held, "unlock of what the owner does not hold"),
        (s.replays, "unlock answered by its latch (retry)"),
        (
            s.oracle_only_latches,
            "unlock without REQUEST (deliberate: no latch)",
        ),
        (s.renewals, "renewal"),
        (s.renew_refusals, "refused renewal"),
        (s.batch_renewals, "renew.lua batch"),
        (s.force_unlocks, "force unlock"),
        (s.force_free, "force unlock of a free lock"),
        (s.dels, "DEL of a lock"),
        (s.infos_held, "LOCK.INFO of a held lock"),
    ] {
        assert!(count > 0, "no {what}: {line}");
    }
}

// ---------------------------------------------------------------------------
// Data the random run never makes
// ---------------------------------------------------------------------------

/// A lock's data on which the scripts and the commands part ways on
/// purpose (design.md §10.10).
struct BadCase {
    what: &'static str,
    /// Run on both servers first, as in redis-cli.
    setup: &'static str,
    script: &'static str,
    keys: &'static [&'static str],
    args: &'static [&'static str],
    command: &'static [&'static str],
    /// What the script replies, and the events and messages it raises.
    script_reply: fn(&Reply) -> bool,
    script_events: &'static [(&'static str, &'static str)],
    /// The module's error: its code and a word of its text.
    module_error: (&'static str, &'static str),
}

const BAD_CASES: [BadCase; 5] = [
    BadCase {
        what: "force unlock of a key that is not a hash: the script deletes it",
        setup: "SET bad1 x",
        script: "force_unlock",
        keys: &["bad1", "redisson_lock__channel:{bad1}"],
        args: &["0", "PUBLISH"],
        command: &["LOCK.FORCEUNLOCK", "bad1"],
        script_reply: |r| *r == Reply::Int(1),
        script_events: &[
            ("__keyevent@0__:del", "bad1"),
            ("redisson_lock__channel:{bad1}", "0"),
        ],
        module_error: ("WRONGTYPE", "WRONGTYPE"),
    },
    BadCase {
        what: "fenced acquisition on a count that is not an integer: the script takes a token, \
               then fails",
        setup: "HSET bad2 u1:1 x; PEXPIRE bad2 60000",
        script: "fenced_lock",
        keys: &["bad2", "redisson_lock_token:{bad2}"],
        args: &["100", "u1:1"],
        command: &["LOCK.ACQUIRE", "bad2", "u1:1", "100", "FENCED"],
        script_reply: |r| matches!(r, Reply::Error { text, .. } if text.contains("not an integer")),
        script_events: &[("__keyevent@0__:incrby", "redisson_lock_token:{bad2}")],
        module_error: ("ERR", "corrupt lock"),
    },
    BadCase {
        what: "unlock of a count of 0: the script decrements it to -1 and releases",
        setup: "HSET bad3 u1:1 0; PEXPIRE bad3 60000",
        script: "unlock",
        keys: &[
            "bad3",
            "redisson_lock__channel:{bad3}",
            "redisson_unlock_latch:{bad3}:r1",
        ],
        args: &["0", "30000", "u1:1", "PUBLISH", "5000"],
        command: &["LOCK.UNLOCK", "bad3", "u1:1", "REQUEST", "r1", "5000"],
        script_reply: |r| *r == Reply::Int(1),
        script_events: &[
            ("__keyevent@0__:hincrby", "bad3"),
            ("__keyevent@0__:del", "bad3"),
            ("redisson_lock__channel:{bad3}", "0"),
            ("__keyevent@0__:set", "redisson_unlock_latch:{bad3}:r1"),
            ("__keyevent@0__:expire", "redisson_unlock_latch:{bad3}:r1"),
        ],
        module_error: ("ERR", "corrupt lock"),
    },
    BadCase {
        what: "renewal of a count that is not an integer: the script renews it",
        setup: "HSET bad4 u1:1 x; PEXPIRE bad4 60000",
        script: "renew",
        keys: &["bad4"],
        args: &["100", "u1:1"],
        command: &["LOCK.RENEW", "bad4", "u1:1", "100"],
        script_reply: |r| *r == Reply::Array(vec![Reply::Int(1)]),
        script_events: &[("__keyevent@0__:expire", "bad4")],
        module_error: ("ERR", "corrupt lock"),
    },
    BadCase {
        what: "acquisition on a count of 0: the script adds to it and holds the lock",
        setup: "HSET bad5 u1:1 0; PEXPIRE bad5 60000",
        script: "lock",
        keys: &["bad5"],
        args: &["100", "u1:1"],
        command: &["LOCK.ACQUIRE", "bad5", "u1:1", "100"],
        script_reply: |r| *r == Reply::Nil,
        script_events: &[
            ("__keyevent@0__:hincrby", "bad5"),
            ("__keyevent@0__:expire", "bad5"),
        ],
        module_error: ("ERR", "corrupt lock"),
    },
];

/// Each of [`BAD_CASES`] on the same data on both servers: the script acts
/// (as its events show), the command replies its error and changes nothing:
/// no key, value or TTL, no event, no message.
#[test]
fn bad_data_differs_as_documented() {
    testkit::require_lua(LOCK_LUA);
    let (oracle, module) = diff::start_pair(&[]);
    let (mut co, mut cm) = (oracle.conn(), module.conn());
    let patterns = ["__keyevent@0__:*", "redisson_lock__channel*"];
    let col_o = Collector::start(&oracle, &patterns);
    let col_m = Collector::start(&module, &patterns);
    for case in &BAD_CASES {
        ok_all(&mut co, case.setup);
        ok_all(&mut cm, case.setup);
        col_o.sync(&mut co);
        col_m.sync(&mut cm);
        let before = snapshot(&mut cm);

        let by_script = to_reply(eval_lua_of(
            &mut co,
            LOCK_LUA,
            case.script,
            case.keys,
            case.args,
        ));
        assert!(
            (case.script_reply)(&by_script),
            "{}: {}.lua replied {by_script}",
            case.what,
            case.script
        );
        let script_events = events_str(&col_o.sync(&mut co));
        assert_eq!(
            script_events,
            pairs(case.script_events),
            "{}: what {}.lua did",
            case.what,
            case.script
        );

        let command: Vec<String> = case.command.iter().map(|a| a.to_string()).collect();
        let by_command = run_command(&mut cm, &command);
        let (code, word) = case.module_error;
        assert!(
            matches!(&by_command, Reply::Error { code: c, text } if c == code && text.contains(word)),
            "{}: {command:?} replied {by_command}, not {code} … {word}",
            case.what
        );
        assert_eq!(
            testkit::diff(&before, &snapshot(&mut cm), "before", "after"),
            "",
            "{}: {command:?} changed data",
            case.what
        );
        assert_eq!(
            events_str(&col_m.sync(&mut cm)),
            Vec::new(),
            "{}: {command:?} raised events",
            case.what
        );
    }
    eprintln!(
        "bad data: {} deliberate differences from Redisson 4.7's scripts seen",
        BAD_CASES.len()
    );
}

// ---------------------------------------------------------------------------
// The test's own helpers
// ---------------------------------------------------------------------------

/// The names this test derives (its oracle's KEYS) follow design.md §10.1,
/// oracle-only latches stay out of the comparison, and a sequence is a
/// function of its seed alone.
#[test]
fn helpers_follow_design_names() {
    for (lock, channel, token, latch) in [
        (
            "L",
            "redisson_lock__channel:{L}",
            "redisson_lock_token:{L}",
            "redisson_unlock_latch:{L}:9f3c",
        ),
        (
            "{t}:a",
            "redisson_lock__channel:{t}:a",
            "redisson_lock_token:{t}:a",
            "redisson_unlock_latch:{t}:a:9f3c",
        ),
    ] {
        let n = Names::new(lock);
        assert_eq!(
            (n.hash.as_str(), n.channel.as_str(), n.token.as_str()),
            (lock, channel, token)
        );
        assert_eq!(n.latch("9f3c"), latch);
        for key in [lock, token, latch] {
            assert!(n.owns_key(key), "{lock} owns {key}");
        }
        assert!(!n.owns_key(&n.latch(&format!("{ORACLE_ONLY}-3"))));
    }
    let braced = Names::new("{t}:a");
    for other in [
        "{t}:ab",
        "redisson_lock_token:{t}:b",
        "redisson_unlock_latch:{t}:ab:9f3c",
    ] {
        assert!(!braced.owns_key(other), "{other}");
    }

    let a: Vec<String> = gen_steps(42).iter().map(|s| format!("{s:?}")).collect();
    let b: Vec<String> = gen_steps(42).iter().map(|s| format!("{s:?}")).collect();
    assert_eq!(a, b);
    assert!((12..=24).contains(&a.len()));
    let mut rng = Rng(7);
    assert!(request_id(&mut rng).chars().all(|c| c.is_ascii_hexdigit()));
}

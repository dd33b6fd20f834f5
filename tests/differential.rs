//! Differential test: the module's commands against Redisson's own Lua scripts.
//!
//! Two servers run side by side: the *oracle* (plain redis-server) runs `EVAL`
//! of the seed scripts in `$RWLOCK_REDISSON_LUA`, the *module* server runs the
//! `RWLOCK.*` commands. Random operation sequences (a seeded SplitMix64, so a
//! sequence is a pure function of its seed) are applied to both, and after
//! every operation the test compares the replies, the keys, their types and
//! contents, their TTLs (within a tolerance), and the ordered keyspace events
//! and lock messages each side produced. `expired` events are left out: Redis
//! raises those itself, asynchronously, whatever runs the lock.
//!
//! Leases are short and real (mostly 20..300 ms, some 1..5 ms), so keys
//! expire during a sequence. The two sides run each operation a fraction of a
//! millisecond apart, so a key whose deadline fell between them would differ
//! for no fault of either. The test tracks every key's deadline on both sides
//! (the hull of the two) and, before an operation and before observing its
//! result, sleeps until no deadline is within 5 ms of "now" (the timing
//! guard). After the fact it checks whether timing defeated the guard anyway:
//! a stall of the machine that put a deadline inside the step, or a lease so
//! short that it may have run out while the command itself ran (then Redis's
//! PEXPIRE deletes the key instead of setting its TTL, an event `del` instead
//! of `expire`: always possible with a 1 ms lease, on both sides). Such a
//! step is still compared; only if it also differs is the sequence abandoned
//! and counted, and more than 5% abandoned sequences fail the test.
//!
//! Deliberate differences (SPEC section 9) are handled explicitly and counted:
//! 9.1 (unlocking a lock that does not exist: script 1, module nil) and 9.2
//! (renewal with several readers: the oracle side applies the module's
//! documented behaviour with plain PEXPIREs; `renew_with_several_readers_differs_as_spec_9_2`
//! asserts the difference itself).
//!
//! Environment: `RWLOCK_REDISSON_LUA` (required), `RWLOCK_DIFF_SEQUENCES`
//! (default 2000), `RWLOCK_DIFF_SEED` (base seed), `RWLOCK_DIFF_THREADS`
//! (default 6), `RWLOCK_DIFF_REPLAY` (run only the sequence with that index).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redis::{Connection, PubSub, Value};
use testkit::{enable_keyspace_events, eval_lua, events_str, lua_dir, Collector, Rng, Server};

const DEFAULT_SEQUENCES: usize = 2000;
const DEFAULT_THREADS: usize = 6;
const DEFAULT_SEED: u64 = 0x5EED_2024_0000_0001;
const BRACED_SEQUENCES: usize = 100;
const BRACED_SEED_XOR: u64 = 0xB2AC_ED00_0000_0000;
/// Sequences run with lease indexes kept from a lock's first lease on
/// (`rwlock.lease-index-from 1`), so every read unlock after the first
/// takes the lock's TTL from the index instead of its lease keys.
const INDEXED_SEQUENCES: usize = 300;
const INDEXED_SEED_XOR: u64 = 0x1DE7_0000_0000_0000;

/// Owners as Redisson forms them: `<client uuid>:<thread id>`.
const OWNERS: [&str; 3] = ["u1:1", "u1:2", "u2:7"];

/// No deadline may be within this much of "now" when an operation starts or
/// its result is observed.
const GUARD_MARGIN: Duration = Duration::from_millis(5);
/// How long an operation pair (or an observation pair) is expected to take;
/// the guard keeps that much more clear ahead of "now".
const GUARD_AHEAD: Duration = Duration::from_millis(4);
/// After the fact: a deadline this close to the actual window of an operation
/// or observation means the step may have raced an expiry.
const TAINT_MARGIN: Duration = Duration::from_millis(3);
/// A deadline `now + lease` set by an operation may already have passed when
/// the command checks it if the server's millisecond clock ticked `lease`
/// times during the command; with `lease` = 1 a single tick (any instant)
/// suffices. Covers the tick granularity plus scheduling jitter.
const OWN_LEASE_SLACK: Duration = Duration::from_micros(1500);
/// Base tolerance of TTL comparisons (plus the measured skew of the sequence).
const PTTL_TOLERANCE_MS: f64 = 15.0;

const MISSING_LUA: &str = "RWLOCK_REDISSON_LUA is not set to a directory: the differential test \
     needs Redisson's seed scripts as its oracle. Run it as \
     `RWLOCK_REDISSON_LUA=/path/to/shared/reference/redisson-seed-lua cargo test --release \
     --test differential`, or through `make test` / `.ci/run`, which set it.";

// ---------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------

fn sequence_seed(base: u64, index: usize) -> u64 {
    Rng(base.wrapping_add(index as u64)).next_u64()
}

// ---------------------------------------------------------------------------
// Names (SPEC section 1)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Names {
    /// The lock hash.
    hash: String,
    /// `{name}`, or the name itself when it contains `{`.
    prefix: String,
    channel: String,
}

impl Names {
    fn new(name: &str) -> Names {
        Names {
            hash: name.to_string(),
            prefix: testkit::prefix_of(name),
            channel: testkit::channel(name),
        }
    }

    /// `suffix(name, owner) + ":rwlock_timeout"`, the scripts' KEYS[2]/KEYS[3].
    fn timeout_base(&self, owner: &str) -> String {
        format!("{}:{owner}:rwlock_timeout", self.prefix)
    }

    /// True for the hash and every key derived from it.
    fn owns_key(&self, key: &str) -> bool {
        key == self.hash
            || key
                .strip_prefix(self.prefix.as_str())
                .is_some_and(|rest| rest.starts_with(':'))
    }
}

/// The lock names of one sequence, and a KEYS pattern matching all their keys.
#[derive(Debug, Clone)]
struct SeqNames {
    locks: Vec<Names>,
    pattern: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// `s<i>_L0`, `s<i>_L1`: keys `{s<i>_L0}:…`.
    Plain,
    /// `{t<i>}:a`, `{t<i>}:b`: keys `{t<i>}:a:…`.
    Braced,
}

impl Flavor {
    fn label(self) -> &'static str {
        match self {
            Flavor::Plain => "plain",
            Flavor::Braced => "braced",
        }
    }

    fn test_name(self) -> &'static str {
        match self {
            Flavor::Plain => "module_matches_redisson_scripts",
            Flavor::Braced => "module_matches_redisson_scripts_braced_names",
        }
    }

    fn names(self, index: usize) -> SeqNames {
        match self {
            Flavor::Plain => SeqNames {
                locks: vec![
                    Names::new(&format!("s{index}_L0")),
                    Names::new(&format!("s{index}_L1")),
                ],
                pattern: format!("*s{index}_L*"),
            },
            Flavor::Braced => SeqNames {
                locks: vec![
                    Names::new(&format!("{{t{index}}}:a")),
                    Names::new(&format!("{{t{index}}}:b")),
                ],
                pattern: format!("*{{t{index}}}:*"),
            },
        }
    }
}

impl SeqNames {
    fn owns_key(&self, key: &str) -> bool {
        self.locks.iter().any(|n| n.owns_key(key))
    }

    fn owns_channel(&self, channel: &str) -> bool {
        self.locks.iter().any(|n| n.channel == channel)
    }
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    UnlockRead,
    UnlockWrite,
    Renew,
}

#[derive(Debug, Clone, Copy)]
struct Op {
    kind: Kind,
    lock: usize,
    owner: usize,
    /// Lease of READ/WRITE/RENEW, `LEASE ms` of a write unlock; unused by a read unlock.
    lease: u64,
}

#[derive(Debug, Clone, Copy)]
struct Step {
    pause_ms: u64,
    op: Op,
}

/// The steps of a sequence: a function of its seed only (never of what the
/// servers answered), so a seed replays exactly.
///
/// To make releases, re-entries and renewals likely, the generator remembers
/// the acquisitions it emitted (whether they will succeed or not) and aims
/// most unlocks and renewals at one of them; the rest are random, which also
/// covers unlocking what one does not hold, or a lock that does not exist.
fn gen_steps(seed: u64) -> Vec<Step> {
    let mut rng = Rng(seed);
    let n = rng.range(10, 20);
    let mut steps = Vec::with_capacity(n as usize);
    // (kind, lock, owner) of acquisitions not yet aimed at by an unlock.
    let mut acquired: Vec<(Kind, usize, usize)> = Vec::new();
    for _ in 0..n {
        let pause_ms = match rng.below(100) {
            0..=44 => 0,
            45..=84 => rng.range(1, 12),
            _ => rng.range(15, 120),
        };
        let lease = match rng.below(100) {
            0..=14 => rng.range(1, 5),
            15..=59 => rng.range(20, 100),
            _ => rng.range(100, 300),
        };
        let mut kind = match rng.below(100) {
            0..=27 => Kind::Read,
            28..=47 => Kind::Write,
            48..=65 => Kind::UnlockRead,
            66..=80 => Kind::UnlockWrite,
            _ => Kind::Renew,
        };
        let mut lock = rng.below(2) as usize;
        let mut owner = rng.below(OWNERS.len() as u64) as usize;
        let aimed = !acquired.is_empty() && rng.below(100) < 70;
        match kind {
            Kind::Read | Kind::Write => {
                // Re-entries: often the same owner and lock as an earlier one.
                if aimed && rng.below(100) < 40 {
                    let (_, l, o) = acquired[rng.below(acquired.len() as u64) as usize];
                    lock = l;
                    owner = o;
                }
                acquired.push((kind, lock, owner));
            }
            Kind::UnlockRead | Kind::UnlockWrite if aimed => {
                let i = rng.below(acquired.len() as u64) as usize;
                let (k, l, o) = acquired.remove(i);
                kind = if k == Kind::Read {
                    Kind::UnlockRead
                } else {
                    Kind::UnlockWrite
                };
                lock = l;
                owner = o;
            }
            Kind::Renew if aimed => {
                let (_, l, o) = acquired[rng.below(acquired.len() as u64) as usize];
                lock = l;
                owner = o;
            }
            _ => {}
        }
        // Both drawn from positive ranges.
        steps.push(Step {
            pause_ms: pause_ms as u64,
            op: Op {
                kind,
                lock,
                owner,
                lease: lease as u64,
            },
        });
    }
    steps
}

fn module_args(names: &SeqNames, op: &Op) -> Vec<String> {
    let lock = names.locks[op.lock].hash.clone();
    let owner = OWNERS[op.owner].to_string();
    let lease = op.lease.to_string();
    match op.kind {
        Kind::Read => vec!["RWLOCK.READ".into(), lock, owner, lease],
        Kind::Write => vec!["RWLOCK.WRITE".into(), lock, owner, lease],
        Kind::UnlockRead => vec!["RWLOCK.UNLOCK".into(), lock, owner, "READ".into()],
        Kind::UnlockWrite => vec![
            "RWLOCK.UNLOCK".into(),
            lock,
            owner,
            "WRITE".into(),
            "LEASE".into(),
            lease,
        ],
        Kind::Renew => vec!["RWLOCK.RENEW".into(), lock, owner, lease],
    }
}

/// How a renewal was mirrored on the oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RenewPath {
    /// The owner holds no read field: `lock_renew.lua` with the write field.
    LockScript,
    /// The owner is the only reader: `read_renew.lua` (same as the module then).
    ReadScript,
    /// Other owners hold reads too: SPEC 9.2, the module's behaviour as plain commands.
    Spec92,
}

/// What the oracle runs for one operation.
#[derive(Debug, Clone)]
enum OraclePlan {
    Script {
        name: &'static str,
        keys: Vec<String>,
        args: Vec<String>,
    },
    /// SPEC 9.2: plain commands, reply 1 (the module's documented reply).
    Plain(Vec<Vec<String>>),
}

impl OraclePlan {
    fn describe(&self) -> String {
        match self {
            OraclePlan::Script { name, keys, args } => {
                format!("EVAL {name}.lua KEYS={keys:?} ARGV={args:?}")
            }
            OraclePlan::Plain(cmds) => cmds
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>()
                .join("; "),
        }
    }
}

fn is_read_field(field: &str) -> bool {
    field != "mode" && !field.ends_with(":write")
}

fn oracle_plan(
    names: &SeqNames,
    op: &Op,
    pre: Option<&BTreeMap<String, String>>,
) -> (OraclePlan, Option<RenewPath>) {
    let n = &names.locks[op.lock];
    let owner = OWNERS[op.owner];
    let write_field = format!("{owner}:write");
    let lease = op.lease.to_string();
    let script = |name: &'static str, keys: Vec<String>, args: Vec<String>| OraclePlan::Script {
        name,
        keys,
        args,
    };
    match op.kind {
        Kind::Read => (
            script(
                "read_lock",
                vec![n.hash.clone(), n.timeout_base(owner)],
                vec![lease, owner.to_string(), write_field],
            ),
            None,
        ),
        Kind::Write => (
            script("write_lock", vec![n.hash.clone()], vec![lease, write_field]),
            None,
        ),
        Kind::UnlockRead => (
            script(
                "read_unlock",
                vec![
                    n.hash.clone(),
                    n.channel.clone(),
                    n.timeout_base(owner),
                    n.prefix.clone(),
                ],
                vec!["0".into(), owner.to_string()],
            ),
            None,
        ),
        Kind::UnlockWrite => (
            script(
                "write_unlock",
                vec![n.hash.clone(), n.channel.clone()],
                vec!["1".into(), lease, write_field],
            ),
            None,
        ),
        Kind::Renew => {
            let own_reads = pre
                .and_then(|h| h.get(owner))
                .map(|v| v.parse::<u64>().unwrap_or(0));
            let others_read =
                pre.is_some_and(|h| h.keys().any(|f| is_read_field(f) && f.as_str() != owner));
            match own_reads {
                None => (
                    script("lock_renew", vec![n.hash.clone()], vec![lease, write_field]),
                    Some(RenewPath::LockScript),
                ),
                Some(_) if !others_read => (
                    script(
                        "read_renew",
                        vec![n.hash.clone(), n.prefix.clone()],
                        vec![lease, owner.to_string()],
                    ),
                    Some(RenewPath::ReadScript),
                ),
                Some(k) => {
                    let mut cmds = vec![vec!["PEXPIRE".to_string(), n.hash.clone(), lease.clone()]];
                    for i in (1..=k).rev() {
                        cmds.push(vec![
                            "PEXPIRE".to_string(),
                            format!("{}:{i}", n.timeout_base(owner)),
                            lease.clone(),
                        ]);
                    }
                    (OraclePlan::Plain(cmds), Some(RenewPath::Spec92))
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Nil,
    Int(i64),
    Error(String),
    Other(String),
}

fn to_reply(result: redis::RedisResult<Value>) -> Reply {
    match result {
        Ok(Value::Nil) => Reply::Nil,
        Ok(Value::Int(n)) => Reply::Int(n),
        Ok(other) => Reply::Other(format!("{other:?}")),
        Err(e) => Reply::Error(e.to_string()),
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Nil => write!(f, "nil"),
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Error(e) => write!(f, "ERROR({e})"),
            Reply::Other(v) => write!(f, "{v}"),
        }
    }
}

fn run_oracle(conn: &mut Connection, plan: &OraclePlan) -> Reply {
    match plan {
        OraclePlan::Script { name, keys, args } => {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            to_reply(eval_lua(conn, name, &keys, &args))
        }
        OraclePlan::Plain(cmds) => {
            let mut pipe = redis::pipe();
            for c in cmds {
                let mut cmd = redis::cmd(&c[0]);
                cmd.arg(&c[1..]);
                pipe.add_command(cmd);
            }
            match pipe.query::<Vec<Value>>(conn) {
                Ok(_) => Reply::Int(1),
                Err(e) => Reply::Error(e.to_string()),
            }
        }
    }
}

fn run_module(conn: &mut Connection, args: &[String]) -> Reply {
    let mut cmd = redis::cmd(&args[0]);
    cmd.arg(&args[1..]);
    to_reply(cmd.query::<Value>(conn))
}

// ---------------------------------------------------------------------------
// Deadlines and the timing guard
// ---------------------------------------------------------------------------

/// Where a key's deadline lies, in this process's clock: the server's
/// instant is only known to be between the request and the reply.
#[derive(Debug, Clone, Copy)]
struct Span {
    lo: Instant,
    hi: Instant,
}

impl Span {
    fn intersects(&self, from: Instant, to: Instant) -> bool {
        self.lo <= to && self.hi >= from
    }

    fn mid(&self) -> Instant {
        self.lo + (self.hi - self.lo) / 2
    }

    fn shifted(&self, by: Duration) -> Span {
        Span {
            lo: self.lo + by,
            hi: self.hi + by,
        }
    }
}

fn before(t: Instant, d: Duration) -> Instant {
    t.checked_sub(d).unwrap_or(t)
}

/// Sleeps until no deadline lies within `[now - GUARD_MARGIN, now +
/// GUARD_MARGIN + ahead]` (each blocking one is waited out to 6 ms past).
/// Returns the time spent waiting.
fn guard(spans: &[Span], ahead: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let now = Instant::now();
        let from = before(now, GUARD_MARGIN);
        let to = now + GUARD_MARGIN + ahead;
        let blocking = spans
            .iter()
            .filter(|s| s.intersects(from, to))
            .map(|s| s.hi)
            .max();
        match blocking {
            None => return now - start,
            Some(hi) => {
                let until = hi + GUARD_MARGIN + Duration::from_millis(1);
                thread::sleep(until.saturating_duration_since(now));
            }
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn signed_ms(a: Instant, b: Instant) -> f64 {
    if a >= b {
        ms(a - b)
    } else {
        -ms(b - a)
    }
}

// ---------------------------------------------------------------------------
// Observation
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Content {
    Hash(BTreeMap<String, String>),
    Str(String),
    Other,
}

#[derive(Debug, Clone)]
struct KeyState {
    kind: String,
    pttl: i64,
    content: Content,
    deadline: Option<Span>,
}

#[derive(Debug, Clone)]
struct Obs {
    keys: BTreeMap<String, KeyState>,
    start: Instant,
    end: Instant,
}

/// Per key, the hull of its deadlines on both sides. The two sides set a
/// key's deadline a little apart (by how far apart they ran the operation
/// that set it), and until both have passed, the key may exist on one side
/// only: nothing may run or observe within the hull.
fn deadline_hulls(o: &Obs, m: &Obs) -> BTreeMap<String, Span> {
    let mut out: BTreeMap<String, Span> = BTreeMap::new();
    for (key, state) in o.keys.iter().chain(m.keys.iter()) {
        if let Some(d) = state.deadline {
            out.entry(key.clone())
                .and_modify(|h| {
                    h.lo = h.lo.min(d.lo);
                    h.hi = h.hi.max(d.hi);
                })
                .or_insert(d);
        }
    }
    out
}

impl Obs {
    /// The hash of `lock` as it is at `now` (absent once its deadline passed).
    fn hash_at(&self, lock: &Names, now: Instant) -> Option<&BTreeMap<String, String>> {
        let key = self.keys.get(&lock.hash)?;
        if key.deadline.is_some_and(|d| d.hi < now) {
            return None;
        }
        match &key.content {
            Content::Hash(h) => Some(h),
            _ => None,
        }
    }

    fn render(&self) -> String {
        if self.keys.is_empty() {
            return "    (no keys)\n".to_string();
        }
        let mut out = String::new();
        for (k, s) in &self.keys {
            let content = match &s.content {
                Content::Hash(h) => format!("{h:?}"),
                Content::Str(v) => format!("{v:?}"),
                Content::Other => "?".to_string(),
            };
            let _ = writeln!(out, "    {k} [{}] pttl={} {content}", s.kind, s.pttl);
        }
        out
    }
}

fn value_str(v: &Value) -> String {
    match v {
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Okay => "OK".to_string(),
        other => format!("{other:?}"),
    }
}

/// Keys of the sequence with type, PTTL and content (3 round trips).
fn observe(conn: &mut Connection, names: &SeqNames) -> Result<Obs, String> {
    let start = Instant::now();
    let all: Vec<String> = redis::cmd("KEYS")
        .arg(&names.pattern)
        .query(conn)
        .map_err(|e| format!("KEYS {}: {e}", names.pattern))?;
    let mut keys: Vec<String> = all.into_iter().filter(|k| names.owns_key(k)).collect();
    keys.sort();
    let mut out = BTreeMap::new();
    if keys.is_empty() {
        return Ok(Obs {
            keys: out,
            start,
            end: Instant::now(),
        });
    }
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("TYPE").arg(k).cmd("PTTL").arg(k);
    }
    let sent = Instant::now();
    let meta: Vec<Value> = pipe.query(conn).map_err(|e| format!("TYPE/PTTL: {e}"))?;
    let received = Instant::now();
    let mut pipe = redis::pipe();
    let mut kinds = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let kind = value_str(&meta[2 * i]);
        let pttl = match &meta[2 * i + 1] {
            Value::Int(n) => *n,
            other => return Err(format!("PTTL {k}: {other:?}")),
        };
        match kind.as_str() {
            "hash" => {
                pipe.cmd("HGETALL").arg(k);
            }
            "string" => {
                pipe.cmd("GET").arg(k);
            }
            _ => {}
        }
        kinds.push((kind, pttl));
    }
    let contents: Vec<Value> = if kinds
        .iter()
        .any(|(kind, _)| kind == "hash" || kind == "string")
    {
        pipe.query(conn).map_err(|e| format!("HGETALL/GET: {e}"))?
    } else {
        Vec::new()
    };
    let mut contents = contents.into_iter();
    for (k, (kind, pttl)) in keys.into_iter().zip(kinds) {
        // A key that expired between KEYS and TYPE, or between TYPE and
        // HGETALL/GET (a hash is never empty), is treated as never listed;
        // the timing guard makes this rare, the taint check covers it.
        let content = match kind.as_str() {
            "hash" => {
                let v = contents.next().unwrap_or(Value::Nil);
                let map: BTreeMap<String, String> =
                    redis::from_redis_value(v).map_err(|e| format!("HGETALL {k}: {e}"))?;
                if map.is_empty() {
                    continue;
                }
                Content::Hash(map)
            }
            "string" => match contents.next().unwrap_or(Value::Nil) {
                Value::Nil => continue,
                v => Content::Str(value_str(&v)),
            },
            "none" => continue,
            _ => Content::Other,
        };
        let deadline = (pttl >= 0).then(|| Span {
            lo: sent + Duration::from_millis(pttl as u64),
            hi: received + Duration::from_millis(pttl as u64 + 1),
        });
        out.insert(
            k,
            KeyState {
                kind,
                pttl,
                content,
                deadline,
            },
        );
    }
    Ok(Obs {
        keys: out,
        start,
        end: Instant::now(),
    })
}

// ---------------------------------------------------------------------------
// Events: a synchronous subscriber per side and thread
// ---------------------------------------------------------------------------

/// One server's connections for one worker thread.
struct Side<'a> {
    data: Connection,
    sub: PubSub<'a>,
    marker: String,
    token: u64,
}

impl<'a> Side<'a> {
    fn new(server: &Server, sub_conn: &'a mut Connection, tag: &str) -> Side<'a> {
        let marker = format!(
            "__rwlock_diff_marker:{tag}:{}",
            uuid::Uuid::new_v4().simple()
        );
        let mut sub = sub_conn.as_pubsub();
        sub.subscribe(&marker).expect("SUBSCRIBE marker");
        sub.psubscribe("__keyevent@0__:*")
            .expect("PSUBSCRIBE keyevent");
        sub.psubscribe("redisson_rwlock*")
            .expect("PSUBSCRIBE redisson_rwlock*");
        sub.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("pubsub read timeout");
        Side {
            data: server.conn(),
            sub,
            marker,
            token: 0,
        }
    }

    /// Everything published before now that concerns `names`, in order:
    /// `"<event> <key>"` for keyspace events (`expired` left out) and
    /// `"PUBLISH <channel> <payload>"` for lock messages.
    fn drain(&mut self, names: &SeqNames) -> Result<Vec<String>, String> {
        self.token += 1;
        let token = self.token.to_string();
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&self.marker)
            .arg(&token)
            .query(&mut self.data)
            .map_err(|e| format!("PUBLISH marker: {e}"))?;
        if receivers < 1 {
            return Err("marker has no subscriber".to_string());
        }
        let mut out = Vec::new();
        loop {
            let msg = self.sub.get_message().map_err(|e| format!("pubsub: {e}"))?;
            let channel = msg.get_channel_name().to_string();
            let payload = String::from_utf8_lossy(msg.get_payload_bytes()).into_owned();
            if channel == self.marker {
                if payload == token {
                    return Ok(out);
                }
                continue;
            }
            if let Some(event) = channel.strip_prefix("__keyevent@0__:") {
                if event != "expired" && names.owns_key(&payload) {
                    out.push(format!("{event} {payload}"));
                }
            } else if names.owns_channel(&channel) {
                out.push(format!("PUBLISH {channel} {payload}"));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

testkit::counters! {
    #[derive(Debug, Default, Clone)]
    struct Stats {
        sequences, completed, abandoned, ops, acquisitions, reentries, refusals, releases,
        expiry_ops, expired_keys, spec91, spec92, renew_lock_script, renew_read_script,
        own_lease_races, own_lease_del_module, own_lease_del_oracle, stalls_but_equal,
    }
    also { abandon_reports: Vec<String>, guard_wait: Duration, max_skew_ms: f64 }
}

impl Stats {
    fn merge(&mut self, o: &Stats) {
        self.add(o);
        self.abandon_reports
            .extend(o.abandon_reports.iter().take(3).cloned());
        self.guard_wait += o.guard_wait;
        self.max_skew_ms = self.max_skew_ms.max(o.max_skew_ms);
    }
}

// ---------------------------------------------------------------------------
// One sequence
// ---------------------------------------------------------------------------

struct Run {
    flavor: Flavor,
    base_seed: u64,
}

enum SeqEnd {
    Completed,
    /// A step raced an expiry because the machine stalled, and differed.
    Abandoned(String),
}

/// Everything about one executed step, for comparison and reports.
struct StepRecord {
    index: usize,
    step: Step,
    module_cmd: String,
    oracle_cmd: String,
    reply_o: Reply,
    reply_m: Reply,
    pre_absent: bool,
}

impl StepRecord {
    fn line(&self) -> String {
        format!(
            "#{:<2} pause {:>3}ms  {}  ->  module {} | oracle {}  [{}]",
            self.index,
            self.step.pause_ms,
            self.module_cmd,
            self.reply_m,
            self.reply_o,
            self.oracle_cmd
        )
    }
}

struct Compared<'a> {
    rec: &'a StepRecord,
    obs_o: &'a Obs,
    obs_m: &'a Obs,
    ev_o: &'a [String],
    ev_m: &'a [String],
    /// Extra TTL tolerance: the largest oracle-to-module skew of the sequence.
    skew_ms: f64,
}

/// Differences between the sides; `spec91` is set when the replies differ
/// exactly as SPEC 9.1 allows.
fn compare(c: &Compared<'_>, spec91: &mut bool) -> Vec<String> {
    let mut diffs = Vec::new();
    let op = &c.rec.step.op;
    let tol = PTTL_TOLERANCE_MS + c.skew_ms;
    match (&c.rec.reply_o, &c.rec.reply_m) {
        (a, b) if a == b => {}
        (Reply::Int(1), Reply::Nil)
            if c.rec.pre_absent && matches!(op.kind, Kind::UnlockRead | Kind::UnlockWrite) =>
        {
            *spec91 = true;
        }
        // A refused acquisition replies the hash's PTTL.
        (Reply::Int(a), Reply::Int(b))
            if matches!(op.kind, Kind::Read | Kind::Write)
                && *a >= 0
                && *b >= 0
                && ((a - b).abs() as f64) <= tol => {}
        (a, b) => diffs.push(format!("reply: oracle {a}, module {b}")),
    }
    let keys_o: BTreeSet<&String> = c.obs_o.keys.keys().collect();
    let keys_m: BTreeSet<&String> = c.obs_m.keys.keys().collect();
    for k in keys_o.difference(&keys_m) {
        diffs.push(format!("key {k}: only on the oracle"));
    }
    for k in keys_m.difference(&keys_o) {
        diffs.push(format!("key {k}: only on the module server"));
    }
    for k in keys_o.intersection(&keys_m) {
        let (o, m) = (&c.obs_o.keys[*k], &c.obs_m.keys[*k]);
        if o.kind != m.kind {
            diffs.push(format!("key {k}: type {} vs {}", o.kind, m.kind));
            continue;
        }
        if o.content != m.content {
            diffs.push(format!(
                "key {k}: content {:?} (oracle) vs {:?} (module)",
                o.content, m.content
            ));
        }
        match (o.deadline, m.deadline) {
            (Some(a), Some(b)) => {
                let width = (ms(a.hi - a.lo) + ms(b.hi - b.lo)) / 2.0;
                let diff = signed_ms(b.mid(), a.mid());
                if diff.abs() > tol + width {
                    diffs.push(format!(
                        "key {k}: deadline differs by {diff:.1} ms (pttl oracle {}, module {}; \
                         tolerance {:.1} ms)",
                        o.pttl,
                        m.pttl,
                        tol + width
                    ));
                }
            }
            (None, None) if o.pttl == m.pttl => {}
            _ => diffs.push(format!(
                "key {k}: pttl oracle {}, module {}",
                o.pttl, m.pttl
            )),
        }
    }
    if c.ev_o != c.ev_m {
        diffs.push(format!(
            "events differ:\n      oracle {:?}\n      module {:?}",
            c.ev_o, c.ev_m
        ));
    }
    diffs
}

/// Predicted deadlines an operation may set: `now + lease` on either side,
/// and for a write re-entry the old hash deadline (`hash`, both sides' hull)
/// plus the lease.
fn predicted_spans(op: &Op, start: Instant, end: Instant, hash: Option<&Span>) -> Vec<Span> {
    let mut out = Vec::new();
    if op.kind == Kind::UnlockRead {
        return out;
    }
    let lease = Duration::from_millis(op.lease);
    out.push(Span {
        lo: start + lease,
        hi: end + lease + Duration::from_millis(1),
    });
    if op.kind == Kind::Write {
        if let Some(d) = hash {
            out.push(d.shifted(lease));
        }
    }
    out
}

fn run_sequence(
    run: &Run,
    index: usize,
    o: &mut Side<'_>,
    m: &mut Side<'_>,
    stats: &mut Stats,
) -> Result<SeqEnd, String> {
    let seed = sequence_seed(run.base_seed, index);
    let names = run.flavor.names(index);
    let steps = gen_steps(seed);
    let mut history: Vec<StepRecord> = Vec::with_capacity(steps.len());
    let mut prev_o = observe(&mut o.data, &names)?;
    let mut prev_m = observe(&mut m.data, &names)?;
    if !prev_o.keys.is_empty() || !prev_m.keys.is_empty() {
        return Err(format!(
            "sequence {index}: keys exist before the first step:\n{}{}",
            prev_o.render(),
            prev_m.render()
        ));
    }
    o.drain(&names)?;
    m.drain(&names)?;
    let mut skew_ms: f64 = 0.0;

    for (i, step) in steps.iter().enumerate() {
        let op = step.op;
        let lock = &names.locks[op.lock];
        if step.pause_ms > 0 {
            thread::sleep(Duration::from_millis(step.pause_ms));
        }
        let hulls = deadline_hulls(&prev_o, &prev_m);
        let tracked: Vec<Span> = hulls.values().copied().collect();
        stats.guard_wait += guard(&tracked, GUARD_AHEAD);

        let now = Instant::now();
        let pre = prev_o.hash_at(lock, now).cloned();
        let (plan, renew_path) = oracle_plan(&names, &op, pre.as_ref());
        let margs = module_args(&names, &op);

        let start = Instant::now();
        let reply_o = run_oracle(&mut o.data, &plan);
        let reply_m = run_module(&mut m.data, &margs);
        let end = Instant::now();
        skew_ms = skew_ms.max(ms(end - start));

        let predicted = predicted_spans(&op, start, end, hulls.get(&lock.hash));
        let mut candidates = tracked.clone();
        candidates.extend(predicted.iter().copied());
        stats.guard_wait += guard(&candidates, GUARD_AHEAD);

        let obs_o = observe(&mut o.data, &names)?;
        let obs_m = observe(&mut m.data, &names)?;
        let ev_o = o.drain(&names)?;
        let ev_m = m.drain(&names)?;

        // Did timing defeat the guard? Either a deadline lay near the
        // operation's or the observation's actual window (a stall), or the
        // operation's own lease was so short that its deadline may already
        // have passed while the command ran: Redis's PEXPIRE then deletes
        // the key (event `del`) instead of setting it (`expire`), and so may
        // the module. That happens when the server's millisecond clock
        // advances by the lease during the command: always possible with a
        // 1 ms lease, otherwise only when the command stalled.
        let op_window = (before(start, TAINT_MARGIN), end + TAINT_MARGIN);
        let obs_window = (before(obs_o.start, TAINT_MARGIN), obs_m.end + TAINT_MARGIN);
        let own_lease_window = (start, end + OWN_LEASE_SLACK);
        let own_lease_race = predicted
            .iter()
            .any(|s| s.intersects(own_lease_window.0, own_lease_window.1));
        let tainted = own_lease_race
            || tracked
                .iter()
                .any(|s| s.intersects(op_window.0, op_window.1))
            || candidates
                .iter()
                .copied()
                .chain(deadline_hulls(&obs_o, &obs_m).into_values())
                .any(|s| s.intersects(obs_window.0, obs_window.1));

        let rec = StepRecord {
            index: i,
            step: *step,
            module_cmd: margs.join(" "),
            oracle_cmd: plan.describe(),
            reply_o,
            reply_m,
            pre_absent: pre.is_none(),
        };
        let mut spec91 = false;
        let diffs = compare(
            &Compared {
                rec: &rec,
                obs_o: &obs_o,
                obs_m: &obs_m,
                ev_o: &ev_o,
                ev_m: &ev_m,
                skew_ms,
            },
            &mut spec91,
        );
        stats.max_skew_ms = stats.max_skew_ms.max(skew_ms);
        if !diffs.is_empty() {
            let mut report = String::new();
            let _ = writeln!(
                report,
                "differential mismatch [{}] sequence #{index} (seed {seed:#018x}), step #{i}{}",
                run.flavor.label(),
                match (own_lease_race, tainted) {
                    (true, _) => format!(
                        " -- TIMING-TAINTED: the step's own {} ms lease may have run out \
                         while the command ran",
                        op.lease
                    ),
                    (false, true) =>
                        " -- TIMING-TAINTED: a stall put a deadline within the step".to_string(),
                    _ => String::new(),
                }
            );
            let _ = writeln!(
                report,
                "replay: RWLOCK_DIFF_SEED={:#x} RWLOCK_DIFF_REPLAY={index} \
                 RWLOCK_REDISSON_LUA=... cargo test --release --test differential {} -- --nocapture",
                run.base_seed,
                run.flavor.test_name()
            );
            let lock_names: Vec<&str> = names.locks.iter().map(|n| n.hash.as_str()).collect();
            let _ = writeln!(report, "locks {lock_names:?}, owners {OWNERS:?}");
            let _ = writeln!(report, "differences:");
            for d in &diffs {
                let _ = writeln!(report, "  - {d}");
            }
            let _ = writeln!(
                report,
                "history (module reply | oracle reply [oracle side]):"
            );
            for h in &history {
                let _ = writeln!(report, "  {}", h.line());
            }
            let _ = writeln!(report, "  {}   <== this step", rec.line());
            for (j, s) in steps.iter().enumerate().skip(i + 1) {
                let _ = writeln!(
                    report,
                    "  #{j:<2} pause {:>3}ms  {}  (not run)",
                    s.pause_ms,
                    module_args(&names, &s.op).join(" ")
                );
            }
            let _ = writeln!(
                report,
                "state before the step (oracle):\n{}",
                prev_o.render()
            );
            let _ = writeln!(
                report,
                "state before the step (module):\n{}",
                prev_m.render()
            );
            let _ = writeln!(report, "state after (oracle):\n{}", obs_o.render());
            let _ = writeln!(report, "state after (module):\n{}", obs_m.render());
            let _ = writeln!(report, "events (oracle): {ev_o:?}");
            let _ = writeln!(report, "events (module): {ev_m:?}");
            let _ = writeln!(
                report,
                "timing: op pair {:.2} ms, skew bound {skew_ms:.2} ms, guard margin {GUARD_MARGIN:?}",
                ms(end - start)
            );
            if tainted {
                if own_lease_race {
                    // Which side turned the PEXPIRE of the new hash into a DEL?
                    let del = format!("del {}", lock.hash);
                    match (ev_o.contains(&del), ev_m.contains(&del)) {
                        (false, true) => stats.own_lease_del_module += 1,
                        (true, false) => stats.own_lease_del_oracle += 1,
                        _ => {}
                    }
                }
                return Ok(SeqEnd::Abandoned(report));
            }
            return Err(report);
        }
        if own_lease_race {
            stats.own_lease_races += 1;
        } else if tainted {
            stats.stalls_but_equal += 1;
        }

        // Bookkeeping (from the oracle's side, now known to be the module's too).
        stats.ops += 1;
        if spec91 {
            stats.spec91 += 1;
        }
        match renew_path {
            Some(RenewPath::LockScript) => stats.renew_lock_script += 1,
            Some(RenewPath::ReadScript) => stats.renew_read_script += 1,
            Some(RenewPath::Spec92) => stats.spec92 += 1,
            None => {}
        }
        match (op.kind, &rec.reply_o) {
            (Kind::Read | Kind::Write, Reply::Nil) => {
                stats.acquisitions += 1;
                let owner = OWNERS[op.owner];
                let held = pre.as_ref().is_some_and(|h| {
                    h.contains_key(owner) || h.contains_key(&format!("{owner}:write"))
                });
                if held {
                    stats.reentries += 1;
                }
            }
            (Kind::Read | Kind::Write, Reply::Int(_)) => stats.refusals += 1,
            (Kind::UnlockRead | Kind::UnlockWrite, Reply::Int(1)) if !spec91 => stats.releases += 1,
            _ => {}
        }
        let deleted: BTreeSet<&str> = ev_o.iter().filter_map(|e| e.strip_prefix("del ")).collect();
        let vanished = prev_o
            .keys
            .keys()
            .filter(|k| !obs_o.keys.contains_key(*k) && !deleted.contains(k.as_str()))
            .count();
        if vanished > 0 {
            stats.expiry_ops += 1;
            stats.expired_keys += vanished;
        }
        history.push(rec);
        prev_o = obs_o;
        prev_m = obs_m;
    }

    // Tidy up both sides (later sequences use other names; their filters
    // ignore these deletions).
    for data in [&mut o.data, &mut m.data] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&names.pattern)
            .query(&mut *data)
            .map_err(|e| format!("KEYS: {e}"))?;
        let keys: Vec<String> = keys.into_iter().filter(|k| names.owns_key(k)).collect();
        if !keys.is_empty() {
            let _: i64 = redis::cmd("DEL")
                .arg(&keys)
                .query(&mut *data)
                .map_err(|e| format!("DEL: {e}"))?;
        }
    }
    Ok(SeqEnd::Completed)
}

// ---------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16)
    } else {
        v.parse()
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")))
}

fn require_lua() {
    assert!(lua_dir().is_some(), "{MISSING_LUA}");
}

fn start_pair(module_args: &[&str]) -> (Server, Server) {
    let args = ["--notify-keyspace-events", "KEA"];
    (
        Server::start_plain(&args),
        Server::start_with_module_args(module_args, &args),
    )
}

/// Runs `count` sequences (or only `RWLOCK_DIFF_REPLAY`) over worker threads
/// and returns the merged statistics; panics with the report of the first
/// mismatch.
fn run_differential(flavor: Flavor, count: usize, indexed: bool) -> Stats {
    require_lua();
    let base_seed = {
        let base = env_number("RWLOCK_DIFF_SEED").unwrap_or(DEFAULT_SEED);
        let base = if indexed {
            base ^ INDEXED_SEED_XOR
        } else {
            base
        };
        match flavor {
            Flavor::Plain => base,
            Flavor::Braced => base ^ BRACED_SEED_XOR,
        }
    };
    let replay = env_number("RWLOCK_DIFF_REPLAY").map(|i| i as usize);
    let indices: Vec<usize> = match replay {
        Some(i) => vec![i],
        None => (0..count).collect(),
    };
    let module_args: &[&str] = if indexed {
        &["lease-index-from", "1"]
    } else {
        &[]
    };
    let threads = env_number("RWLOCK_DIFF_THREADS")
        .map(|n| n.max(1) as usize)
        .unwrap_or(DEFAULT_THREADS)
        .min(indices.len().max(1));
    let (oracle, module) = start_pair(module_args);
    let run = Run { flavor, base_seed };
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let total = Mutex::new(Stats::default());

    thread::scope(|scope| {
        for t in 0..threads {
            let (run, next, stop, failure, total, indices) =
                (&run, &next, &stop, &failure, &total, &indices);
            let (oracle, module) = (&oracle, &module);
            thread::Builder::new()
                .name(format!("diff-{}-{t}", flavor.label()))
                .spawn_scoped(scope, move || {
                    let mut sub_o = oracle.conn();
                    let mut sub_m = module.conn();
                    let mut o = Side::new(oracle, &mut sub_o, &format!("o{t}"));
                    let mut m = Side::new(module, &mut sub_m, &format!("m{t}"));
                    let mut stats = Stats::default();
                    while !stop.load(Ordering::SeqCst) {
                        let k = next.fetch_add(1, Ordering::SeqCst);
                        let Some(&index) = indices.get(k) else { break };
                        stats.sequences += 1;
                        match run_sequence(run, index, &mut o, &mut m, &mut stats) {
                            Ok(SeqEnd::Completed) => stats.completed += 1,
                            Ok(SeqEnd::Abandoned(report)) => {
                                eprintln!("differential: abandoned (timing):\n{report}");
                                stats.abandoned += 1;
                                stats.abandon_reports.push(report);
                            }
                            Err(report) => {
                                stop.store(true, Ordering::SeqCst);
                                let mut f = failure.lock().expect("failure mutex");
                                if f.is_none() {
                                    *f = Some(report);
                                }
                                break;
                            }
                        }
                    }
                    total.lock().expect("stats mutex").merge(&stats);
                })
                .expect("spawn worker");
        }
    });

    if let Some(report) = failure.into_inner().expect("failure mutex") {
        panic!("{report}");
    }
    let stats = total.into_inner().expect("stats mutex");
    if replay.is_none() {
        assert_eq!(stats.sequences, count, "not every sequence ran: {stats:?}");
    }
    stats
}

fn summary(flavor: Flavor, stats: &Stats, elapsed: Duration) -> String {
    format!(
        "differential [{}]: sequences {} (completed {}, abandoned on timing {}: lease ran out \
         during the command and the new hash got DEL instead of PEXPIRE on the module {} / on \
         the oracle {} times), ops {}, \
         acquisitions {} (re-entries {}), refused {}, releases {}, expiries observed {} ops \
         ({} keys), SPEC 9.1 cases {}, SPEC 9.2 cases {}, renewals via lock_renew.lua {} / \
         read_renew.lua {}, steps racing their own lease that still matched {}, stalls near an \
         expiry that still matched {}, max op-pair skew \
         {:.1} ms, guard waits {:.1} s, elapsed {:.1} s",
        flavor.label(),
        stats.sequences,
        stats.completed,
        stats.abandoned,
        stats.own_lease_del_module,
        stats.own_lease_del_oracle,
        stats.ops,
        stats.acquisitions,
        stats.reentries,
        stats.refusals,
        stats.releases,
        stats.expiry_ops,
        stats.expired_keys,
        stats.spec91,
        stats.spec92,
        stats.renew_lock_script,
        stats.renew_read_script,
        stats.own_lease_races,
        stats.stalls_but_equal,
        stats.max_skew_ms,
        stats.guard_wait.as_secs_f64(),
        elapsed.as_secs_f64()
    )
}

/// The mix must have exercised what the test is about, and timing trouble
/// must stay rare (an abandoned sequence compared less than it should).
fn assert_meaningful(flavor: Flavor, stats: &Stats, line: &str) {
    if env_number("RWLOCK_DIFF_REPLAY").is_some() {
        return;
    }
    assert!(
        stats.abandoned <= stats.sequences / 20 + 1,
        "too many sequences abandoned on timing ({} of {}); the machine is too loaded \
         for the timing guard. {line}\nfirst reports:\n{}",
        stats.abandoned,
        stats.sequences,
        stats.abandon_reports.join("\n")
    );
    if stats.completed < 50 {
        return;
    }
    assert!(stats.acquisitions > 0, "no acquisition: {line}");
    assert!(stats.reentries > 0, "no re-entry: {line}");
    assert!(stats.refusals > 0, "no refused acquisition: {line}");
    assert!(stats.releases > 0, "no release: {line}");
    assert!(stats.expiry_ops > 0, "no expiry observed: {line}");
    assert!(stats.spec91 > 0, "no SPEC 9.1 case: {line}");
    assert!(
        stats.renew_read_script > 0,
        "no read_renew.lua renewal: {line}"
    );
    assert!(
        stats.renew_lock_script > 0,
        "no lock_renew.lua renewal: {line}"
    );
    if flavor == Flavor::Plain {
        assert!(stats.spec92 > 0, "no SPEC 9.2 case: {line}");
    }
}

/// `count` random sequences of `flavor` on the module and on the scripts,
/// with lease indexes from the first lease when `indexed`; prints the
/// summary (with `note`) and checks that the run exercised every path.
fn differential(flavor: Flavor, count: usize, indexed: bool, note: &str) {
    let started = Instant::now();
    let stats = run_differential(flavor, count, indexed);
    let line = summary(flavor, &stats, started.elapsed());
    eprintln!("{line}{note}");
    assert_meaningful(flavor, &stats, &line);
}

#[test]
fn module_matches_redisson_scripts() {
    let count = env_number("RWLOCK_DIFF_SEQUENCES")
        .map(|n| n as usize)
        .unwrap_or(DEFAULT_SEQUENCES);
    differential(Flavor::Plain, count, false, "");
}

#[test]
fn module_matches_redisson_scripts_braced_names() {
    differential(Flavor::Braced, BRACED_SEQUENCES, false, "");
}

#[test]
fn module_matches_redisson_scripts_with_lease_indexes() {
    differential(
        Flavor::Plain,
        INDEXED_SEQUENCES,
        true,
        " [lease indexes from the first lease]",
    );
}

// ---------------------------------------------------------------------------
// SPEC 9.2 itself
// ---------------------------------------------------------------------------

fn pttl(conn: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

/// Runs `script` (name, keys, arguments) on the oracle and `command` on
/// the module; each must reply `expected`.
fn on_both(
    (oracle, module): (&mut Connection, &mut Connection),
    (script, keys, args): (&str, &[&str], &[&str]),
    command: &[&str],
    expected: Reply,
) {
    let by_script = to_reply(eval_lua(oracle, script, keys, args));
    assert_eq!(by_script, expected, "oracle {script} {args:?}");
    let command: Vec<String> = command.iter().map(|a| a.to_string()).collect();
    assert_eq!(run_module(module, &command), expected, "module {command:?}");
}

fn lock_events(collector: &Collector, conn: &mut Connection) -> Vec<(String, String)> {
    events_str(&collector.sync(conn))
        .into_iter()
        .filter(|(c, _)| c != "__keyevent@0__:expired")
        .collect()
}

/// Seed `read_renew.lua` renews every reader's timeout keys; the module
/// renews only the caller's (SPEC 9.2), so a crashed reader's hold expires
/// with the module and lives on with the seed script.
#[test]
fn renew_with_several_readers_differs_as_spec_9_2() {
    require_lua();
    let (oracle, module) = start_pair(&[]);
    let mut co = oracle.conn();
    let mut cm = module.conn();
    enable_keyspace_events(&mut co);
    enable_keyspace_events(&mut cm);
    let patterns = ["__keyevent@0__:*", "redisson_rwlock*"];
    let col_o = Collector::start(&oracle, &patterns);
    let col_m = Collector::start(&module, &patterns);

    let n = Names::new("R92");
    let (alive, crashed) = ("u1:1", "u2:7");
    let short = 300u64;
    // `alive` reads twice, `crashed` once, all with a short lease.
    let short_ms = short.to_string();
    for owner in [alive, alive, crashed] {
        let write_field = format!("{owner}:write");
        let keys = [&n.hash[..], &n.timeout_base(owner)];
        on_both(
            (&mut co, &mut cm),
            ("read_lock", &keys, &[&short_ms, owner, &write_field]),
            &["RWLOCK.READ", &n.hash, owner, &short_ms],
            Reply::Nil,
        );
    }
    lock_events(&col_o, &mut co);
    lock_events(&col_m, &mut cm);

    // The watchdog of `alive` renews for 60 s.
    let lease = "60000";
    on_both(
        (&mut co, &mut cm),
        ("read_renew", &[&n.hash, &n.prefix], &[lease, alive]),
        &["RWLOCK.RENEW", &n.hash, alive, lease],
        Reply::Int(1),
    );

    let alive_keys = [
        format!("{}:2", n.timeout_base(alive)),
        format!("{}:1", n.timeout_base(alive)),
    ];
    let crashed_key = format!("{}:1", n.timeout_base(crashed));
    for conn in [&mut co, &mut cm] {
        assert!(pttl(conn, &n.hash) > 59_000);
        for k in &alive_keys {
            assert!(pttl(conn, k) > 59_000, "{k}");
        }
    }
    let on_oracle = pttl(&mut co, &crashed_key);
    let on_module = pttl(&mut cm, &crashed_key);
    assert!(
        on_oracle > 59_000,
        "seed read_renew.lua renews the other reader's key too (pttl {on_oracle})"
    );
    assert!(
        (0..=short as i64).contains(&on_module),
        "the module must not renew another reader's key (pttl {on_module})"
    );

    let expire = |key: &str| ("__keyevent@0__:expire".to_string(), key.to_string());
    let ev_o = lock_events(&col_o, &mut co);
    let ev_m = lock_events(&col_m, &mut cm);
    assert_eq!(
        ev_o,
        vec![
            expire(&n.hash),
            expire(&alive_keys[0]),
            expire(&alive_keys[1]),
            expire(&crashed_key),
        ],
        "oracle renewal events"
    );
    assert_eq!(
        ev_m,
        vec![
            expire(&n.hash),
            expire(&alive_keys[0]),
            expire(&alive_keys[1])
        ],
        "module renewal events"
    );

    // The crashed reader's lease runs out: only on the module server.
    thread::sleep(Duration::from_millis(short + 50));
    let exists = |conn: &mut Connection, key: &str| -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query::<i64>(conn)
            .expect("EXISTS")
            == 1
    };
    assert!(
        exists(&mut co, &crashed_key),
        "oracle: crashed reader kept alive"
    );
    assert!(
        !exists(&mut cm, &crashed_key),
        "module: crashed reader expired"
    );

    // `alive` releases both holds: the seed script keeps the lock for the
    // crashed reader (reply 0), the module frees it (reply 1, message 0).
    for (i, expected_o, expected_m) in [(1, 0, 0), (2, 0, 1)] {
        let r_o = to_reply(eval_lua(
            &mut co,
            "read_unlock",
            &[&n.hash, &n.channel, &n.timeout_base(alive), &n.prefix],
            &["0", alive],
        ));
        let r_m = run_module(
            &mut cm,
            &[
                "RWLOCK.UNLOCK".into(),
                n.hash.clone(),
                alive.into(),
                "READ".into(),
            ],
        );
        assert_eq!(r_o, Reply::Int(expected_o), "oracle unlock #{i}");
        assert_eq!(r_m, Reply::Int(expected_m), "module unlock #{i}");
    }
    assert!(
        exists(&mut co, &n.hash),
        "oracle: lock held by the crashed reader"
    );
    assert!(!exists(&mut cm, &n.hash), "module: lock freed");
    let published = |ev: &[(String, String)]| -> Vec<(String, String)> {
        ev.iter()
            .filter(|(c, _)| c.starts_with("redisson_rwlock"))
            .cloned()
            .collect()
    };
    assert!(published(&lock_events(&col_o, &mut co)).is_empty());
    assert_eq!(
        published(&lock_events(&col_m, &mut cm)),
        vec![(n.channel.clone(), "0".to_string())]
    );
}

// ---------------------------------------------------------------------------
// The test's own helpers
// ---------------------------------------------------------------------------

/// The names this test derives (its oracle's KEYS) follow SPEC section 1, and
/// the generator is SplitMix64 as published (so seeds replay anywhere).
#[test]
fn helpers_follow_spec_names_and_splitmix64() {
    // Lock, prefix, channel, and U:57's first lease key.
    for (lock, prefix, channel, lease_key) in [
        (
            "L",
            "{L}",
            "redisson_rwlock:{L}",
            "{L}:U:57:rwlock_timeout:1",
        ),
        (
            "{t}:a",
            "{t}:a",
            "redisson_rwlock:{t}:a",
            "{t}:a:U:57:rwlock_timeout:1",
        ),
    ] {
        let n = Names::new(lock);
        assert_eq!(n.hash, lock);
        assert_eq!(n.prefix, prefix);
        assert_eq!(n.channel, channel);
        assert_eq!(format!("{}:1", n.timeout_base("U:57")), lease_key);
        assert!(n.owns_key(lease_key));
    }
    let plain = Names::new("L");
    assert!(plain.owns_key("L"));
    assert!(!plain.owns_key("L1") && !plain.owns_key("{L1}:U:57:rwlock_timeout:1"));
    let braced = Names::new("{t}:a");
    assert!(!braced.owns_key("{t}:ab") && !braced.owns_key("{t}:b:U:57:rwlock_timeout:1"));

    // Reference values of SplitMix64 seeded with 0.
    let mut rng = Rng(0);
    assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    // A sequence is a function of its seed alone.
    let a: Vec<String> = gen_steps(42).iter().map(|s| format!("{s:?}")).collect();
    let b: Vec<String> = gen_steps(42).iter().map(|s| format!("{s:?}")).collect();
    assert_eq!(a, b);
    assert!((10..=20).contains(&a.len()));
}

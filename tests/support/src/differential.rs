//! What the differential tests share: the module's commands against
//! Redisson's own Lua scripts (`tests/differential.rs`, the read-write lock
//! against the seed scripts; `tests/differential_lock.rs`, the plain lock
//! against Redisson 4.7's).
//!
//! Two servers run side by side: the *oracle* (plain redis-server) runs
//! `EVAL` of the scripts, the *module* server runs the commands. A test
//! describes its operations by implementing [`Differential`]; [`run`] applies
//! random sequences of them (a seeded SplitMix64, so a sequence is a pure
//! function of its seed) to both servers over worker threads, and after
//! every operation compares the replies (the test's part), the keys, their
//! types and contents, their TTLs (within a tolerance), and the ordered
//! keyspace events and lock messages each side produced. `expired` events
//! are left out: Redis raises those itself, asynchronously, whatever runs
//! the lock.
//!
//! Leases are short and real, so keys expire during a sequence. The two
//! sides run each operation a fraction of a millisecond apart, so a key
//! whose deadline fell between them would differ for no fault of either.
//! The runner tracks every key's deadline on both sides (the hull of the
//! two) and, before an operation and before observing its result, sleeps
//! until no deadline is within [`GUARD_MARGIN`] of "now" (the timing guard).
//! After the fact it checks whether timing defeated the guard anyway: a
//! stall of the machine that put a deadline inside the step, or a lease so
//! short that it may have run out while the command itself ran (then Redis's
//! PEXPIRE deletes the key instead of setting its TTL, an event `del`
//! instead of `expire`: always possible with a 1 ms lease, on both sides).
//! Such a step is still compared; only if it also differs is the sequence
//! abandoned and counted, and more than 5% abandoned sequences fail the test.
//!
//! Environment, shared by every differential test: `RWLOCK_DIFF_SEQUENCES`
//! (how many sequences a test's main run has), `RWLOCK_DIFF_SEED` (base
//! seed), `RWLOCK_DIFF_THREADS` (default 6), `RWLOCK_DIFF_REPLAY` (run only
//! the sequence with that index).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::Conn;
use redis::Value;

use crate::{Counters, Rng, Server};

/// Worker threads of a run (`RWLOCK_DIFF_THREADS`): the work is mostly
/// waiting (pauses, the guard), so more threads than cores.
pub const DEFAULT_THREADS: usize = 6;

/// No deadline may be within this much of "now" when an operation starts or
/// its result is observed.
pub const GUARD_MARGIN: Duration = Duration::from_millis(5);
/// How long an operation pair (or an observation pair) is expected to take;
/// the guard keeps that much more clear ahead of "now".
pub const GUARD_AHEAD: Duration = Duration::from_millis(4);
/// After the fact: a deadline this close to the actual window of an operation
/// or observation means the step may have raced an expiry.
pub const TAINT_MARGIN: Duration = Duration::from_millis(3);
/// A deadline `now + lease` set by an operation may already have passed when
/// the command checks it if the server's millisecond clock ticked `lease`
/// times during the command; with `lease` = 1 a single tick (any instant)
/// suffices. Covers the tick granularity plus scheduling jitter.
pub const OWN_LEASE_SLACK: Duration = Duration::from_micros(1500);
/// Base tolerance of TTL comparisons (plus the measured skew of the sequence).
pub const PTTL_TOLERANCE_MS: f64 = 15.0;

// ---------------------------------------------------------------------------
// Environment, seeds, servers
// ---------------------------------------------------------------------------

/// A number from the environment, decimal or 0x-hex; panics on anything else.
pub fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16)
    } else {
        v.parse()
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}")))
}

/// `RWLOCK_DIFF_SEQUENCES`, else `default`.
pub fn sequences(default: usize) -> usize {
    env_number("RWLOCK_DIFF_SEQUENCES")
        .map(|n| n as usize)
        .unwrap_or(default)
}

/// `RWLOCK_DIFF_SEED`, else `default`.
pub fn base_seed(default: u64) -> u64 {
    env_number("RWLOCK_DIFF_SEED").unwrap_or(default)
}

/// True when only one sequence runs (`RWLOCK_DIFF_REPLAY`): the run's
/// figures then say nothing about coverage.
pub fn replaying() -> bool {
    env_number("RWLOCK_DIFF_REPLAY").is_some()
}

/// The seed of sequence `index` of a run with base seed `base`.
pub fn sequence_seed(base: u64, index: usize) -> u64 {
    Rng(base.wrapping_add(index as u64)).next_u64()
}

/// The oracle (no module) and the module server, both raising every
/// keyspace event; the module loaded with `module_args`.
pub fn start_pair(module_args: &[&str]) -> (Server, Server) {
    let args = ["--notify-keyspace-events", "KEA"];
    (
        Server::start_plain(&args),
        Server::start_with_module_args(module_args, &args),
    )
}

// ---------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------

/// A reply, in the shape both sides' replies are compared in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Nil,
    Int(i64),
    /// A simple or bulk string.
    Text(String),
    Array(Vec<Reply>),
    /// An error reply: its code (the first word) and the whole text.
    /// Equal errors have the same code and text.
    Error {
        code: String,
        text: String,
    },
    Other(String),
}

impl Reply {
    /// The error code of an error reply.
    pub fn error_code(&self) -> Option<&str> {
        match self {
            Reply::Error { code, .. } => Some(code),
            _ => None,
        }
    }
}

pub fn to_reply(result: redis::RedisResult<Value>) -> Reply {
    match result {
        Ok(v) => value_reply(v),
        Err(e) => Reply::Error {
            code: e.code().unwrap_or_default().to_string(),
            // A server's error as it sent it: code, space, detail.
            text: match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                _ => e.to_string(),
            },
        },
    }
}

fn value_reply(v: Value) -> Reply {
    match v {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::Array(items) => Reply::Array(items.into_iter().map(value_reply).collect()),
        Value::SimpleString(_) | Value::BulkString(_) | Value::Okay => Reply::Text(value_str(&v)),
        other => Reply::Other(format!("{other:?}")),
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Nil => write!(f, "nil"),
            Reply::Int(n) => write!(f, "{n}"),
            Reply::Text(s) => write!(f, "{s:?}"),
            Reply::Array(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
            Reply::Error { text, .. } => write!(f, "ERROR({text})"),
            Reply::Other(v) => write!(f, "{v}"),
        }
    }
}

/// Runs one command (name and arguments) and reads its reply.
pub fn run_command(conn: &mut Conn, args: &[String]) -> Reply {
    let mut cmd = redis::cmd(&args[0]);
    cmd.arg(&args[1..]);
    to_reply(cmd.query::<Value>(conn))
}

/// Two PTTLs (of a refusal, say) that agree: both the same negative code,
/// or both times left within `tol` ms of each other.
pub fn pttl_close(a: i64, b: i64, tol: f64) -> bool {
    if a < 0 || b < 0 {
        a == b
    } else {
        ((a - b).abs() as f64) <= tol
    }
}

// ---------------------------------------------------------------------------
// Deadlines and the timing guard
// ---------------------------------------------------------------------------

/// Where a key's deadline lies, in this process's clock: the server's
/// instant is only known to be between the request and the reply.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub lo: Instant,
    pub hi: Instant,
}

impl Span {
    /// The deadline `now + lease` set by a command that ran between `start`
    /// and `end`.
    pub fn after(start: Instant, end: Instant, lease_ms: u64) -> Span {
        let lease = Duration::from_millis(lease_ms);
        Span {
            lo: start + lease,
            hi: end + lease + Duration::from_millis(1),
        }
    }

    pub fn intersects(&self, from: Instant, to: Instant) -> bool {
        self.lo <= to && self.hi >= from
    }

    pub fn mid(&self) -> Instant {
        self.lo + (self.hi - self.lo) / 2
    }

    pub fn shifted(&self, by: Duration) -> Span {
        Span {
            lo: self.lo + by,
            hi: self.hi + by,
        }
    }
}

pub fn before(t: Instant, d: Duration) -> Instant {
    t.checked_sub(d).unwrap_or(t)
}

/// Sleeps until no deadline lies within `[now - GUARD_MARGIN, now +
/// GUARD_MARGIN + ahead]` (each blocking one is waited out to 6 ms past).
/// Returns the time spent waiting.
pub fn guard(spans: &[Span], ahead: Duration) -> Duration {
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

pub fn ms(d: Duration) -> f64 {
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

/// Which keys and channels belong to one sequence.
pub trait Scope {
    /// A `KEYS` pattern matching at least every key of the sequence.
    fn pattern(&self) -> &str;
    fn owns_key(&self, key: &str) -> bool;
    fn owns_channel(&self, channel: &str) -> bool;
}

/// One lock's names, as a sequence's [`Locks`] asks them.
pub trait LockKeys {
    /// True for the lock's hash and every key derived from it that the
    /// comparison covers.
    fn owns_key(&self, key: &str) -> bool;
    /// The channel its messages go to.
    fn channel(&self) -> &str;
}

/// The locks of one sequence, and a `KEYS` pattern matching all their keys.
#[derive(Debug, Clone)]
pub struct Locks<N> {
    pub locks: Vec<N>,
    names: Vec<String>,
    pattern: String,
}

impl<N: LockKeys> Scope for Locks<N> {
    fn pattern(&self) -> &str {
        &self.pattern
    }

    fn owns_key(&self, key: &str) -> bool {
        self.locks.iter().any(|n| n.owns_key(key))
    }

    fn owns_channel(&self, channel: &str) -> bool {
        self.locks.iter().any(|n| n.channel() == channel)
    }
}

impl<N> Locks<N> {
    /// The locks named `names` (each one's names by `lock`), whose keys all
    /// match `pattern`.
    pub fn new(names: Vec<String>, pattern: String, lock: impl Fn(&str) -> N) -> Locks<N> {
        Locks {
            locks: names.iter().map(|n| lock(n)).collect(),
            names,
            pattern,
        }
    }

    /// The locks and `owners`, for reports.
    pub fn context(&self, owners: &[&str]) -> String {
        format!("locks {:?}, owners {owners:?}", self.names)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    Hash(BTreeMap<String, String>),
    Str(String),
    Other,
}

/// One key as observed: type, PTTL, content, and where its deadline lies.
#[derive(Debug, Clone)]
pub struct Observed {
    pub kind: String,
    pub pttl: i64,
    pub content: Content,
    pub deadline: Option<Span>,
}

/// Every key of a sequence on one side, and when it was observed.
#[derive(Debug, Clone)]
pub struct Obs {
    pub keys: BTreeMap<String, Observed>,
    pub start: Instant,
    pub end: Instant,
}

/// Per key, the hull of its deadlines on both sides. The two sides set a
/// key's deadline a little apart (by how far apart they ran the operation
/// that set it), and until both have passed, the key may exist on one side
/// only: nothing may run or observe within the hull.
pub fn deadline_hulls(o: &Obs, m: &Obs) -> BTreeMap<String, Span> {
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
    /// `key` as it is at `now` (absent once its deadline passed).
    pub fn at(&self, key: &str, now: Instant) -> Option<&Observed> {
        let state = self.keys.get(key)?;
        if state.deadline.is_some_and(|d| d.hi < now) {
            return None;
        }
        Some(state)
    }

    /// The hash at `key` as it is at `now`.
    pub fn hash_at(&self, key: &str, now: Instant) -> Option<&BTreeMap<String, String>> {
        match &self.at(key, now)?.content {
            Content::Hash(h) => Some(h),
            _ => None,
        }
    }

    pub fn render(&self) -> String {
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

pub fn value_str(v: &Value) -> String {
    match v {
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Okay => "OK".to_string(),
        other => format!("{other:?}"),
    }
}

/// Keys of the sequence with type, PTTL and content (3 round trips).
pub fn observe(conn: &mut Conn, scope: &impl Scope) -> Result<Obs, String> {
    let start = Instant::now();
    let all: Vec<String> = redis::cmd("KEYS")
        .arg(scope.pattern())
        .query(conn)
        .map_err(|e| format!("KEYS {}: {e}", scope.pattern()))?;
    let mut keys: Vec<String> = all.into_iter().filter(|k| scope.owns_key(k)).collect();
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
            Observed {
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
pub struct Side<'a> {
    pub data: Conn,
    sub: &'a mut Conn,
    marker: String,
    token: u64,
}

impl<'a> Side<'a> {
    /// Subscribes `sub_conn` to keyspace events and to the lock channels
    /// matching `channels` (PSUBSCRIBE patterns).
    pub fn new(server: &Server, sub_conn: &'a mut Conn, tag: &str, channels: &[&str]) -> Side<'a> {
        let marker = format!(
            "__rwlock_diff_marker:{tag}:{}",
            uuid::Uuid::new_v4().simple()
        );
        let sub = sub_conn;
        sub.subscribe(&marker).expect("SUBSCRIBE marker");
        sub.psubscribe("__keyevent@0__:*")
            .expect("PSUBSCRIBE keyevent");
        for pattern in channels {
            sub.psubscribe(pattern).expect("PSUBSCRIBE lock channels");
        }
        sub.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("pubsub read timeout");
        Side {
            data: server.conn(),
            sub,
            marker,
            token: 0,
        }
    }

    /// Everything published before now that concerns `scope`, in order:
    /// `"<event> <key>"` for keyspace events (`expired` left out) and
    /// `"PUBLISH <channel> <payload>"` for lock messages.
    pub fn drain(&mut self, scope: &impl Scope) -> Result<Vec<String>, String> {
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
            let msg = self
                .sub
                .next_message()
                .map_err(|e| format!("pubsub: {e}"))?;
            let (channel, payload) = (msg.channel_str(), msg.payload_str());
            if channel == self.marker {
                if payload == token {
                    return Ok(out);
                }
                continue;
            }
            if let Some(event) = channel.strip_prefix("__keyevent@0__:") {
                if event != "expired" && scope.owns_key(&payload) {
                    out.push(format!("{event} {payload}"));
                }
            } else if scope.owns_channel(&channel) {
                out.push(format!("PUBLISH {channel} {payload}"));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Comparison of keys and events
// ---------------------------------------------------------------------------

/// The differences between the sides' keys (set, types, contents,
/// deadlines within `tol` ms plus the uncertainty of each observation) and
/// events, appended to `diffs`.
pub fn compare_state(
    (obs_o, obs_m): (&Obs, &Obs),
    (ev_o, ev_m): (&[String], &[String]),
    tol: f64,
    diffs: &mut Vec<String>,
) {
    let keys_o: BTreeSet<&String> = obs_o.keys.keys().collect();
    let keys_m: BTreeSet<&String> = obs_m.keys.keys().collect();
    for k in keys_o.difference(&keys_m) {
        diffs.push(format!("key {k}: only on the oracle"));
    }
    for k in keys_m.difference(&keys_o) {
        diffs.push(format!("key {k}: only on the module server"));
    }
    for k in keys_o.intersection(&keys_m) {
        let (o, m) = (&obs_o.keys[*k], &obs_m.keys[*k]);
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
    if ev_o != ev_m {
        diffs.push(format!(
            "events differ:\n      oracle {ev_o:?}\n      module {ev_m:?}"
        ));
    }
}

// ---------------------------------------------------------------------------
// What a test describes
// ---------------------------------------------------------------------------

/// An operation of a sequence: what (`kind`), on which of its locks, by
/// which of its owners, with which lease (for the kinds that take one).
#[derive(Debug, Clone, Copy)]
pub struct Op<K> {
    pub kind: K,
    pub lock: usize,
    pub owner: usize,
    pub lease: u64,
}

/// One step of a sequence: a pause, then an operation.
#[derive(Debug, Clone, Copy)]
pub struct Step<K> {
    pub pause_ms: u64,
    pub op: Op<K>,
}

/// The state before a step, as a plan sees it.
pub struct Before<'a> {
    /// The oracle's keys as last observed.
    pub oracle: &'a Obs,
    /// Per key, the hull of its deadlines on both sides.
    pub hulls: &'a BTreeMap<String, Span>,
    /// When the step is about to run.
    pub now: Instant,
}

/// The pause before a step: none (45%), 1..12 ms (40%) or 15..120 ms, so
/// that leases run out between steps as well as during them.
pub fn draw_pause(rng: &mut Rng) -> u64 {
    (match rng.below(100) {
        0..=44 => 0,
        45..=84 => rng.range(1, 12),
        _ => rng.range(15, 120),
    }) as u64
}

/// A lease: mostly 20..300 ms, some (15%) 1..5 ms, which may run out while
/// the command runs.
pub fn draw_lease(rng: &mut Rng) -> u64 {
    (match rng.below(100) {
        0..=14 => rng.range(1, 5),
        15..=59 => rng.range(20, 100),
        _ => rng.range(100, 300),
    }) as u64
}

/// Everything about one executed step, for comparison and reports.
pub struct StepRecord {
    pub index: usize,
    pub pause_ms: u64,
    pub module_cmd: String,
    pub oracle_cmd: String,
    pub reply_o: Reply,
    pub reply_m: Reply,
    /// How far the sides' TTLs may differ: [`PTTL_TOLERANCE_MS`] plus the
    /// largest skew of the sequence's operation pairs so far.
    pub tol_ms: f64,
}

impl StepRecord {
    fn line(&self) -> String {
        format!(
            "#{:<2} pause {:>3}ms  {}  ->  module {} | oracle {}  [{}]",
            self.index, self.pause_ms, self.module_cmd, self.reply_m, self.reply_o, self.oracle_cmd
        )
    }
}

/// One differential test: its operations, how each maps to the module and
/// to the oracle, how their replies compare and what the test counts. The
/// runner does the rest (sequences, threads, the guard, observation,
/// comparison of keys and events, reports).
pub trait Differential: Sync {
    /// The names of one sequence.
    type Names: Scope;
    /// What an operation does ([`Op`]'s `kind`).
    type Kind: Clone;
    /// What both sides run for one step, decided from the state before it;
    /// `execute` may note in it what it saw.
    type Plan;
    /// What the comparison of the replies found, for `account` (say, that
    /// they differ exactly as a documented difference allows).
    type Verdict;
    /// The test's own counters.
    type Stats: Counters + Default + Send;

    /// PSUBSCRIBE patterns of the lock messages.
    const CHANNELS: &'static [&'static str];

    /// The run's name in reports and thread names.
    fn label(&self) -> &str;
    /// The command that replays a sequence, after the `RWLOCK_DIFF_SEED` and
    /// `RWLOCK_DIFF_REPLAY` it is given.
    fn replay(&self) -> String;
    fn names(&self, index: usize) -> Self::Names;
    /// A line naming the sequence's locks and owners, for reports.
    fn context(&self, names: &Self::Names) -> String;
    /// The steps of a sequence: a function of its seed only (never of what
    /// the servers answered), so a seed replays exactly.
    fn steps(&self, seed: u64) -> Vec<Step<Self::Kind>>;
    /// What the module runs, as text (also for steps not run, in reports).
    fn module_cmd(&self, names: &Self::Names, op: &Op<Self::Kind>) -> String;
    /// What both sides will run, from the state before the step. The plan
    /// holds what the later calls need of the operation and that state.
    fn plan(&self, names: &Self::Names, op: &Op<Self::Kind>, before: &Before<'_>) -> Self::Plan;
    /// What the oracle runs, as text.
    fn oracle_cmd(&self, plan: &Self::Plan) -> String;
    /// Runs the step on the oracle, then on the module; their replies.
    fn execute(&self, plan: &mut Self::Plan, sides: (&mut Conn, &mut Conn)) -> (Reply, Reply);
    /// The deadlines the step may set, having run in `window`.
    fn predicted(&self, plan: &Self::Plan, window: (Instant, Instant)) -> Vec<Span>;
    /// The step's shortest lease or TTL in ms, and the lock whose `del`
    /// event shows that a lease ran out during the command (for reports).
    fn own_lease(&self, plan: &Self::Plan) -> (u64, String);
    /// Compares the replies (PTTLs within `rec.tol_ms`), appending
    /// differences to `diffs`.
    fn compare_replies(
        &self,
        plan: &Self::Plan,
        rec: &StepRecord,
        diffs: &mut Vec<String>,
    ) -> Self::Verdict;
    /// Counts what a step that matched exercised.
    fn account(
        &self,
        stats: &mut Self::Stats,
        plan: &Self::Plan,
        verdict: &Self::Verdict,
        rec: &StepRecord,
    );
}

// ---------------------------------------------------------------------------
// Statistics of the runner
// ---------------------------------------------------------------------------

crate::counters! {
    /// What the runner counts, whatever the test.
    #[derive(Debug, Default, Clone)]
    pub struct Tally {
        sequences, completed, abandoned, ops, expiry_ops, expired_keys,
        own_lease_races, own_lease_del_module, own_lease_del_oracle, stalls_but_equal,
    }
    also { abandon_reports: Vec<String>, guard_wait: Duration, max_skew_ms: f64 }
}

impl Tally {
    fn merge(&mut self, o: &Tally) {
        self.add(o);
        self.abandon_reports
            .extend(o.abandon_reports.iter().take(3).cloned());
        self.guard_wait += o.guard_wait;
        self.max_skew_ms = self.max_skew_ms.max(o.max_skew_ms);
    }
}

/// A finished run: the runner's and the test's counters, and its summary.
pub struct Finished<S> {
    pub tally: Tally,
    pub stats: S,
    pub line: String,
}

impl<S> Finished<S> {
    /// The test's counters, for its checks of what the mix exercised, once
    /// the runner's own check passed (as many sequences compared whole as
    /// asked for, abandoned ones replaced): some key must have expired. None
    /// when a single sequence was replayed, or when the run was too short to
    /// have exercised everything.
    pub fn to_check(&self) -> Option<&S> {
        if replaying() {
            return None;
        }
        let t = &self.tally;
        if t.completed < 50 {
            return None;
        }
        // Every differential test runs real leases short enough to end.
        assert!(t.expiry_ops > 0, "no expiry observed: {}", self.line);
        Some(&self.stats)
    }
}

// ---------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------

enum SeqEnd {
    Completed,
    /// A step raced an expiry because the machine stalled, and differed.
    Abandoned(String),
}

/// Runs sequences of `test` until `count` of them were compared whole (or
/// only `RWLOCK_DIFF_REPLAY`) over
/// worker threads on a fresh pair of servers (the module loaded with
/// `module_args`), seeds from `base_seed`; prints the summary (the runner's
/// figures around `summary` of the test's counters, then `note`). Panics
/// with the report of the first mismatch.
pub fn run<D: Differential>(
    test: &D,
    module_args: &[&str],
    base_seed: u64,
    count: usize,
    summary: impl Fn(&D::Stats) -> String,
    note: &str,
) -> Finished<D::Stats> {
    let started = Instant::now();
    let replay = env_number("RWLOCK_DIFF_REPLAY").map(|i| i as usize);
    // A sequence abandoned on timing (a stall put a deadline inside a step)
    // compared less than it should: another takes its place, so how much is
    // compared does not depend on the machine's load. The ceiling only stops
    // a machine that stalls all the time.
    let indices: Vec<usize> = match replay {
        Some(i) => vec![i],
        None => (0..count * 4).collect(),
    };
    let wanted = if replay.is_some() { 1 } else { count };
    let whole = AtomicUsize::new(0);
    let threads = env_number("RWLOCK_DIFF_THREADS")
        .map(|n| n.max(1) as usize)
        .unwrap_or(DEFAULT_THREADS)
        .min(indices.len().max(1));
    let (oracle, module) = start_pair(module_args);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let total = Mutex::new((Tally::default(), D::Stats::default()));

    thread::scope(|scope| {
        for t in 0..threads {
            let (next, stop, failure, total, indices) = (&next, &stop, &failure, &total, &indices);
            let whole = &whole;
            let (oracle, module) = (&oracle, &module);
            thread::Builder::new()
                .name(format!("diff-{}-{t}", test.label()))
                .spawn_scoped(scope, move || {
                    let mut sub_o = oracle.conn();
                    let mut sub_m = module.conn();
                    let mut o = Side::new(oracle, &mut sub_o, &format!("o{t}"), D::CHANNELS);
                    let mut m = Side::new(module, &mut sub_m, &format!("m{t}"), D::CHANNELS);
                    let mut tally = Tally::default();
                    let mut stats = D::Stats::default();
                    while !stop.load(Ordering::SeqCst) && whole.load(Ordering::SeqCst) < wanted {
                        let k = next.fetch_add(1, Ordering::SeqCst);
                        let Some(&index) = indices.get(k) else { break };
                        tally.sequences += 1;
                        let mut seq = Sequence {
                            test,
                            base_seed,
                            index,
                            tally: &mut tally,
                            stats: &mut stats,
                        };
                        match seq.run(&mut o, &mut m) {
                            Ok(SeqEnd::Completed) => {
                                tally.completed += 1;
                                whole.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(SeqEnd::Abandoned(report)) => {
                                eprintln!("differential: abandoned (timing):\n{report}");
                                tally.abandoned += 1;
                                tally.abandon_reports.push(report);
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
                    let mut total = total.lock().expect("stats mutex");
                    total.0.merge(&tally);
                    total.1.add(&stats);
                })
                .expect("spawn worker");
        }
    });

    if let Some(report) = failure.into_inner().expect("failure mutex") {
        panic!("{report}");
    }
    let (tally, stats) = total.into_inner().expect("stats mutex");
    if replay.is_none() {
        assert!(
            tally.completed >= count,
            "only {} of {} sequences compared whole ({} abandoned on timing): the machine \
             stalls too often for the timing guard. First reports:\n{}",
            tally.completed,
            tally.sequences,
            tally.abandoned,
            tally.abandon_reports.join("\n")
        );
    }
    let t = &tally;
    let line = format!(
        "differential [{}]: sequences {} (completed {}, abandoned on timing {}: lease ran out \
         during the command and the new hash got DEL instead of PEXPIRE on the module {} / on \
         the oracle {} times), ops {}, {}, expiries observed {} ops ({} keys), steps racing \
         their own lease that still matched {}, stalls near an expiry that still matched {}, \
         max op-pair skew {:.1} ms, guard waits {:.1} s, elapsed {:.1} s",
        test.label(),
        t.sequences,
        t.completed,
        t.abandoned,
        t.own_lease_del_module,
        t.own_lease_del_oracle,
        t.ops,
        summary(&stats),
        t.expiry_ops,
        t.expired_keys,
        t.own_lease_races,
        t.stalls_but_equal,
        t.max_skew_ms,
        t.guard_wait.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    eprintln!("{line}{note}");
    Finished { tally, stats, line }
}

/// One sequence being run, with the thread's counters.
struct Sequence<'r, D: Differential> {
    test: &'r D,
    base_seed: u64,
    index: usize,
    tally: &'r mut Tally,
    stats: &'r mut D::Stats,
}

/// What one step saw, for its report.
struct Seen<'a> {
    prev: (&'a Obs, &'a Obs),
    after: (&'a Obs, &'a Obs),
    events: (&'a [String], &'a [String]),
    op_ms: f64,
    skew_ms: f64,
}

impl<D: Differential> Sequence<'_, D> {
    fn run(&mut self, o: &mut Side<'_>, m: &mut Side<'_>) -> Result<SeqEnd, String> {
        let (test, index) = (self.test, self.index);
        let seed = sequence_seed(self.base_seed, index);
        let names = test.names(index);
        let steps = test.steps(seed);
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
            let pause_ms = step.pause_ms;
            if pause_ms > 0 {
                thread::sleep(Duration::from_millis(pause_ms));
            }
            let hulls = deadline_hulls(&prev_o, &prev_m);
            let tracked: Vec<Span> = hulls.values().copied().collect();
            self.tally.guard_wait += guard(&tracked, GUARD_AHEAD);

            let state = Before {
                oracle: &prev_o,
                hulls: &hulls,
                now: Instant::now(),
            };
            let mut plan = test.plan(&names, &step.op, &state);
            let start = Instant::now();
            let (reply_o, reply_m) = test.execute(&mut plan, (&mut o.data, &mut m.data));
            let end = Instant::now();
            skew_ms = skew_ms.max(ms(end - start));

            let predicted = test.predicted(&plan, (start, end));
            let mut candidates = tracked.clone();
            candidates.extend(predicted.iter().copied());
            self.tally.guard_wait += guard(&candidates, GUARD_AHEAD);

            let obs_o = observe(&mut o.data, &names)?;
            let obs_m = observe(&mut m.data, &names)?;
            let ev_o = o.drain(&names)?;
            let ev_m = m.drain(&names)?;

            // Did timing defeat the guard? Either a deadline lay near the
            // operation's or the observation's actual window (a stall), or
            // the operation's own lease was so short that its deadline may
            // already have passed while the command ran: Redis's PEXPIRE
            // then deletes the key (event `del`) instead of setting it
            // (`expire`), and so may the module. That happens when the
            // server's millisecond clock advances by the lease during the
            // command: always possible with a 1 ms lease, otherwise only
            // when the command stalled.
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
                pause_ms,
                module_cmd: test.module_cmd(&names, &step.op),
                oracle_cmd: test.oracle_cmd(&plan),
                reply_o,
                reply_m,
                tol_ms: PTTL_TOLERANCE_MS + skew_ms,
            };
            let mut diffs = Vec::new();
            let verdict = test.compare_replies(&plan, &rec, &mut diffs);
            compare_state((&obs_o, &obs_m), (&ev_o, &ev_m), rec.tol_ms, &mut diffs);
            self.tally.max_skew_ms = self.tally.max_skew_ms.max(skew_ms);
            if !diffs.is_empty() {
                let seen = Seen {
                    prev: (&prev_o, &prev_m),
                    after: (&obs_o, &obs_m),
                    events: (&ev_o, &ev_m),
                    op_ms: ms(end - start),
                    skew_ms,
                };
                let (lease, lock) = test.own_lease(&plan);
                let taint = match (own_lease_race, tainted) {
                    (true, _) => format!(
                        " -- TIMING-TAINTED: the step's own {lease} ms lease may have run out \
                         while the command ran"
                    ),
                    (false, true) => {
                        " -- TIMING-TAINTED: a stall put a deadline within the step".to_string()
                    }
                    _ => String::new(),
                };
                let report = self.report(&names, (&steps, &history, &rec), &diffs, &taint, &seen);
                if tainted {
                    if own_lease_race {
                        // Which side turned the PEXPIRE of the new hash into a DEL?
                        let del = format!("del {lock}");
                        match (ev_o.contains(&del), ev_m.contains(&del)) {
                            (false, true) => self.tally.own_lease_del_module += 1,
                            (true, false) => self.tally.own_lease_del_oracle += 1,
                            _ => {}
                        }
                    }
                    return Ok(SeqEnd::Abandoned(report));
                }
                return Err(report);
            }
            if own_lease_race {
                self.tally.own_lease_races += 1;
            } else if tainted {
                self.tally.stalls_but_equal += 1;
            }

            // Bookkeeping (from the oracle's side, now known to be the module's too).
            self.tally.ops += 1;
            test.account(self.stats, &plan, &verdict, &rec);
            let deleted: BTreeSet<&str> =
                ev_o.iter().filter_map(|e| e.strip_prefix("del ")).collect();
            let vanished = prev_o
                .keys
                .keys()
                .filter(|k| !obs_o.keys.contains_key(*k) && !deleted.contains(k.as_str()))
                .count();
            if vanished > 0 {
                self.tally.expiry_ops += 1;
                self.tally.expired_keys += vanished;
            }
            history.push(rec);
            prev_o = obs_o;
            prev_m = obs_m;
        }

        // Tidy up both sides (later sequences use other names; their filters
        // ignore these deletions).
        for data in [&mut o.data, &mut m.data] {
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(names.pattern())
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

    /// The report of a step whose sides differ: how to replay it, the
    /// differences, the history, the states and events around it.
    fn report(
        &self,
        names: &D::Names,
        (steps, history, rec): (&[Step<D::Kind>], &[StepRecord], &StepRecord),
        diffs: &[String],
        taint: &str,
        seen: &Seen<'_>,
    ) -> String {
        let (test, index) = (self.test, self.index);
        let seed = sequence_seed(self.base_seed, index);
        let mut report = String::new();
        let _ = writeln!(
            report,
            "differential mismatch [{}] sequence #{index} (seed {seed:#018x}), step #{}{taint}",
            test.label(),
            rec.index,
        );
        let _ = writeln!(
            report,
            "replay: RWLOCK_DIFF_SEED={:#x} RWLOCK_DIFF_REPLAY={index} {} -- --nocapture",
            self.base_seed,
            test.replay()
        );
        let _ = writeln!(report, "{}", test.context(names));
        let _ = writeln!(report, "differences:");
        for d in diffs {
            let _ = writeln!(report, "  - {d}");
        }
        let _ = writeln!(
            report,
            "history (module reply | oracle reply [oracle side]):"
        );
        for h in history {
            let _ = writeln!(report, "  {}", h.line());
        }
        let _ = writeln!(report, "  {}   <== this step", rec.line());
        for (j, s) in steps.iter().enumerate().skip(rec.index + 1) {
            let _ = writeln!(
                report,
                "  #{j:<2} pause {:>3}ms  {}  (not run)",
                s.pause_ms,
                test.module_cmd(names, &s.op)
            );
        }
        let _ = writeln!(
            report,
            "state before the step (oracle):\n{}",
            seen.prev.0.render()
        );
        let _ = writeln!(
            report,
            "state before the step (module):\n{}",
            seen.prev.1.render()
        );
        let _ = writeln!(report, "state after (oracle):\n{}", seen.after.0.render());
        let _ = writeln!(report, "state after (module):\n{}", seen.after.1.render());
        let _ = writeln!(report, "events (oracle): {:?}", seen.events.0);
        let _ = writeln!(report, "events (module): {:?}", seen.events.1);
        let _ = writeln!(
            report,
            "timing: op pair {:.2} ms, skew bound {:.2} ms, guard margin {GUARD_MARGIN:?}",
            seen.op_ms, seen.skew_ms
        );
        report
    }
}

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
//! step is still compared; only if it also differs is the sequence abandoned,
//! counted, and replaced by another, until as many were compared whole as
//! asked (at most four times as many run: past that the test fails).
//!
//! That machinery (the two servers, the guard, observation, comparison of
//! keys and events, sequences over threads, reports) is the testkit's
//! `differential` module, shared with `differential_lock.rs`; this file says
//! what the operations are, how each maps to a seed script, how replies
//! compare and what the run must have exercised.
//!
//! Deliberate differences (docs/design.md, contract §9) are handled explicitly and counted:
//! 9.1 (unlocking a lock that does not exist: script 1, module nil) and 9.2
//! (renewal with several readers: the oracle side applies the module's
//! documented behaviour with plain PEXPIREs; `renew_with_several_readers_differs_as_spec_9_2`
//! asserts the difference itself).
//!
//! Environment: `RWLOCK_REDISSON_LUA` (default: the scripts `make oracle` extracts
//! from Redisson 3.17.0's jar into `target/redisson-lua/3.17.0`), `RWLOCK_DIFF_SEQUENCES`
//! (default 2000), `RWLOCK_DIFF_SEED` (base seed), `RWLOCK_DIFF_THREADS`
//! (default 6), `RWLOCK_DIFF_REPLAY` (run only the sequence with that index).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::differential::{
    self as diff, run_command as run_module, to_reply, Before, Differential, LockKeys, Locks,
    Reply, Span, StepRecord,
};
use testkit::Conn;
use testkit::{enable_keyspace_events, eval_lua, events_str, Collector, Rng, SEED_LUA};

const DEFAULT_SEQUENCES: usize = 2000;
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

// ---------------------------------------------------------------------------
// Names (docs/design.md, contract §1)
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
}

impl LockKeys for Names {
    /// True for the hash and every key derived from it.
    fn owns_key(&self, key: &str) -> bool {
        key == self.hash
            || key
                .strip_prefix(self.prefix.as_str())
                .is_some_and(|rest| rest.starts_with(':'))
    }

    fn channel(&self) -> &str {
        &self.channel
    }
}

/// The lock names of one sequence, and a KEYS pattern matching all their keys.
type SeqNames = Locks<Names>;

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
            Flavor::Plain => Locks::new(
                vec![format!("s{index}_L0"), format!("s{index}_L1")],
                format!("*s{index}_L*"),
                Names::new,
            ),
            Flavor::Braced => Locks::new(
                vec![format!("{{t{index}}}:a"), format!("{{t{index}}}:b")],
                format!("*{{t{index}}}:*"),
                Names::new,
            ),
        }
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

/// Its lease is that of READ/WRITE/RENEW, `LEASE ms` of a write unlock;
/// unused by a read unlock.
type Op = diff::Op<Kind>;
type Step = diff::Step<Kind>;

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
        let pause_ms = diff::draw_pause(&mut rng);
        let lease = diff::draw_lease(&mut rng);
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
        steps.push(Step {
            pause_ms,
            op: Op {
                kind,
                lock,
                owner,
                lease,
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
    /// Other owners hold reads too: contract §9.2, the module's behaviour as plain commands.
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
    /// contract §9.2: plain commands, reply 1 (the module's documented reply).
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

fn run_oracle(conn: &mut Conn, plan: &OraclePlan) -> Reply {
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
                Err(e) => to_reply(Err(e)),
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The test as the runner sees it
// ---------------------------------------------------------------------------

testkit::counters! {
    #[derive(Debug, Default, Clone)]
    struct Stats {
        acquisitions, reentries, refusals, releases, spec91, spec92, renew_lock_script,
        renew_read_script,
    }
}

/// What both sides run for one step, and the lock's hash before it.
struct Plan {
    op: Op,
    /// The lock's hash (its name).
    lock: String,
    /// Both sides' deadlines of the hash before the step.
    hash_hull: Option<Span>,
    module: Vec<String>,
    oracle: OraclePlan,
    renew_path: Option<RenewPath>,
    pre: Option<BTreeMap<String, String>>,
}

/// The read-write lock's sequences of one flavor of names.
struct Rw {
    flavor: Flavor,
}

/// Predicted deadlines an operation may set: `now + lease` on either side,
/// and for a write re-entry the old hash deadline (`hash`, both sides' hull)
/// plus the lease.
fn predicted_spans(op: &Op, start: Instant, end: Instant, hash: Option<&Span>) -> Vec<Span> {
    let mut out = Vec::new();
    if op.kind == Kind::UnlockRead {
        return out;
    }
    out.push(Span::after(start, end, op.lease));
    if op.kind == Kind::Write {
        if let Some(d) = hash {
            out.push(d.shifted(Duration::from_millis(op.lease)));
        }
    }
    out
}

impl Differential for Rw {
    type Names = SeqNames;
    type Kind = Kind;
    type Plan = Plan;
    /// Set when the replies differ exactly as contract §9.1 allows.
    type Verdict = bool;
    type Stats = Stats;

    const CHANNELS: &'static [&'static str] = &["redisson_rwlock*"];

    fn label(&self) -> &str {
        self.flavor.label()
    }

    fn replay(&self) -> String {
        format!(
            "cargo test --release --test differential {}",
            self.flavor.test_name()
        )
    }

    fn names(&self, index: usize) -> SeqNames {
        self.flavor.names(index)
    }

    fn context(&self, names: &SeqNames) -> String {
        names.context(&OWNERS)
    }

    fn steps(&self, seed: u64) -> Vec<Step> {
        gen_steps(seed)
    }

    fn module_cmd(&self, names: &SeqNames, op: &Op) -> String {
        module_args(names, op).join(" ")
    }

    fn plan(&self, names: &SeqNames, op: &Op, before: &Before<'_>) -> Plan {
        let lock = names.locks[op.lock].hash.clone();
        let pre = before.oracle.hash_at(&lock, before.now).cloned();
        let (oracle, renew_path) = oracle_plan(names, op, pre.as_ref());
        Plan {
            op: *op,
            hash_hull: before.hulls.get(&lock).copied(),
            lock,
            module: module_args(names, op),
            oracle,
            renew_path,
            pre,
        }
    }

    fn oracle_cmd(&self, plan: &Plan) -> String {
        plan.oracle.describe()
    }

    fn execute(&self, plan: &mut Plan, (oracle, module): (&mut Conn, &mut Conn)) -> (Reply, Reply) {
        let reply_o = run_oracle(oracle, &plan.oracle);
        let reply_m = run_module(module, &plan.module);
        (reply_o, reply_m)
    }

    fn predicted(&self, plan: &Plan, (start, end): (Instant, Instant)) -> Vec<Span> {
        predicted_spans(&plan.op, start, end, plan.hash_hull.as_ref())
    }

    fn own_lease(&self, plan: &Plan) -> (u64, String) {
        (plan.op.lease, plan.lock.clone())
    }

    fn compare_replies(&self, plan: &Plan, rec: &StepRecord, diffs: &mut Vec<String>) -> bool {
        let op = &plan.op;
        let tol = rec.tol_ms;
        match (&rec.reply_o, &rec.reply_m) {
            (a, b) if a == b => false,
            (Reply::Int(1), Reply::Nil)
                if plan.pre.is_none()
                    && matches!(op.kind, Kind::UnlockRead | Kind::UnlockWrite) =>
            {
                true
            }
            // A refused acquisition replies the hash's PTTL.
            (Reply::Int(a), Reply::Int(b))
                if matches!(op.kind, Kind::Read | Kind::Write)
                    && *a >= 0
                    && *b >= 0
                    && ((a - b).abs() as f64) <= tol =>
            {
                false
            }
            (a, b) => {
                diffs.push(format!("reply: oracle {a}, module {b}"));
                false
            }
        }
    }

    fn account(&self, stats: &mut Stats, plan: &Plan, spec91: &bool, rec: &StepRecord) {
        let op = &plan.op;
        if *spec91 {
            stats.spec91 += 1;
        }
        match plan.renew_path {
            Some(RenewPath::LockScript) => stats.renew_lock_script += 1,
            Some(RenewPath::ReadScript) => stats.renew_read_script += 1,
            Some(RenewPath::Spec92) => stats.spec92 += 1,
            None => {}
        }
        match (op.kind, &rec.reply_o) {
            (Kind::Read | Kind::Write, Reply::Nil) => {
                stats.acquisitions += 1;
                let owner = OWNERS[op.owner];
                let held = plan.pre.as_ref().is_some_and(|h| {
                    h.contains_key(owner) || h.contains_key(&format!("{owner}:write"))
                });
                if held {
                    stats.reentries += 1;
                }
            }
            (Kind::Read | Kind::Write, Reply::Int(_)) => stats.refusals += 1,
            (Kind::UnlockRead | Kind::UnlockWrite, Reply::Int(1)) if !*spec91 => {
                stats.releases += 1
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------

fn require_lua() {
    testkit::require_lua(SEED_LUA);
}

fn summary(s: &Stats) -> String {
    format!(
        "acquisitions {} (re-entries {}), refused {}, releases {}, contract §9.1 cases {}, \
         contract §9.2 cases {}, renewals via lock_renew.lua {} / read_renew.lua {}",
        s.acquisitions,
        s.reentries,
        s.refusals,
        s.releases,
        s.spec91,
        s.spec92,
        s.renew_lock_script,
        s.renew_read_script,
    )
}

/// `count` random sequences of `flavor` on the module and on the scripts,
/// with lease indexes from the first lease when `indexed`; prints the
/// summary (with `note`) and checks that the run exercised every path.
fn differential(flavor: Flavor, count: usize, indexed: bool, note: &str) {
    require_lua();
    let base_seed = {
        let base = diff::base_seed(DEFAULT_SEED);
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
    let module_args: &[&str] = if indexed {
        &["lease-index-from", "1"]
    } else {
        &[]
    };
    let run = diff::run(&Rw { flavor }, module_args, base_seed, count, summary, note);
    assert_meaningful(flavor, run.to_check(), &run.line);
}

/// The mix must have exercised what the test is about (`stats` is None for
/// a replay or a short run).
fn assert_meaningful(flavor: Flavor, stats: Option<&Stats>, line: &str) {
    let Some(stats) = stats else { return };
    assert!(stats.acquisitions > 0, "no acquisition: {line}");
    assert!(stats.reentries > 0, "no re-entry: {line}");
    assert!(stats.refusals > 0, "no refused acquisition: {line}");
    assert!(stats.releases > 0, "no release: {line}");
    assert!(stats.spec91 > 0, "no contract §9.1 case: {line}");
    assert!(
        stats.renew_read_script > 0,
        "no read_renew.lua renewal: {line}"
    );
    assert!(
        stats.renew_lock_script > 0,
        "no lock_renew.lua renewal: {line}"
    );
    if flavor == Flavor::Plain {
        assert!(stats.spec92 > 0, "no contract §9.2 case: {line}");
    }
}

#[test]
fn module_matches_redisson_scripts() {
    differential(Flavor::Plain, diff::sequences(DEFAULT_SEQUENCES), false, "");
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
// contract §9.2 itself
// ---------------------------------------------------------------------------

fn pttl(conn: &mut Conn, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

/// Runs `script` (name, keys, arguments) on the oracle and `command` on
/// the module; each must reply `expected`.
fn on_both(
    (oracle, module): (&mut Conn, &mut Conn),
    (script, keys, args): (&str, &[&str], &[&str]),
    command: &[&str],
    expected: Reply,
) {
    let by_script = to_reply(eval_lua(oracle, script, keys, args));
    assert_eq!(by_script, expected, "oracle {script} {args:?}");
    let command: Vec<String> = command.iter().map(|a| a.to_string()).collect();
    assert_eq!(run_module(module, &command), expected, "module {command:?}");
}

fn lock_events(collector: &Collector, conn: &mut Conn) -> Vec<(String, String)> {
    events_str(&collector.sync(conn))
        .into_iter()
        .filter(|(c, _)| c != "__keyevent@0__:expired")
        .collect()
}

/// Seed `read_renew.lua` renews every reader's timeout keys; the module
/// renews only the caller's (contract §9.2), so a crashed reader's hold expires
/// with the module and lives on with the seed script.
#[test]
fn renew_with_several_readers_differs_as_spec_9_2() {
    require_lua();
    let (oracle, module) = diff::start_pair(&[]);
    let mut co = oracle.conn();
    let mut cm = module.conn();
    enable_keyspace_events(&mut co);
    enable_keyspace_events(&mut cm);
    let patterns = ["__keyevent@0__:*", "redisson_rwlock*"];
    let col_o = Collector::start(&oracle, &patterns);
    let col_m = Collector::start(&module, &patterns);

    let n = Names::new("R92");
    let (alive, crashed) = ("u1:1", "u2:7");
    // Short, yet long enough for the reads and the renewal below to come
    // within it on a loaded machine.
    let short = 1000u64;
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
    let exists = |conn: &mut Conn, key: &str| -> bool {
        redis::cmd("EXISTS")
            .arg(key)
            .query::<i64>(conn)
            .expect("EXISTS")
            == 1
    };
    testkit::wait_until(
        Duration::from_millis(short) + Duration::from_secs(10),
        "module: crashed reader expired",
        || (!exists(&mut cm, &crashed_key)).then_some(()),
    );
    assert!(
        exists(&mut co, &crashed_key),
        "oracle: crashed reader kept alive"
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

/// The names this test derives (its oracle's KEYS) follow docs/design.md, contract §1, and
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

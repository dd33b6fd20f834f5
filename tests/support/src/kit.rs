//! The fault tests' kit: a seeded generator, key snapshots with absolute
//! deadlines, raw calls, key listings, INFO and config readers, and bounded
//! waits.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Conn;

/// SplitMix64: small, seeded, so a failing run replays from its seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// Up to `max_len` random bytes.
    pub fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let n = self.below(max_len + 1);
        (0..n).map(|_| self.below(256) as u8).collect()
    }
}

/// `RWLOCK_TEST_SEED` when set (decimal or 0x-hex), else `default`; printed
/// so that a failure can be replayed.
pub fn seed(default: u64) -> u64 {
    let s = std::env::var("RWLOCK_TEST_SEED")
        .ok()
        .and_then(|v| parse_seed(&v))
        .unwrap_or(default);
    eprintln!("seed: {s:#x} (replay with RWLOCK_TEST_SEED={s:#x})");
    s
}

/// A seed written in decimal or as 0x-hex.
pub fn parse_seed(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// A `usize` from the environment, else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Wall-clock microseconds since the epoch: the clock Redis computes its
/// deadlines from (`mstime()`), at a finer grain.
pub fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Bytes shown as escaped ASCII in assertion messages; long ones (a fuzzer's
/// 10 KiB names) abridged so that a failure stays readable.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() > 80 {
            write!(
                f,
                "\"{}…\"({} bytes)",
                self.0[..60].escape_ascii(),
                self.0.len()
            )
        } else {
            write!(f, "\"{}\"", self.0.escape_ascii())
        }
    }
}

/// One key: type, contents (canonical order), PEXPIRETIME (-1 persistent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub kind: String,
    pub content: Vec<Bytes>,
    pub expire_at: i64,
}

pub type Snapshot = BTreeMap<Bytes, KeyState>;

/// Every key of the server's database 0 (SCAN; on a cluster node, its own keys).
pub fn scan_keys(conn: &mut Conn) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(conn)
            .expect("SCAN");
        out.extend(keys);
        if next == 0 {
            out.sort();
            out.dedup();
            return out;
        }
        cursor = next;
    }
}

/// Type, contents and PEXPIRETIME of every key in the database.
pub fn snapshot(conn: &mut Conn) -> Snapshot {
    let keys = scan_keys(conn);
    snapshot_of(conn, &keys)
}

/// Type, contents and PEXPIRETIME of `keys`; missing keys are left out.
pub fn snapshot_of(conn: &mut Conn, keys: &[Vec<u8>]) -> Snapshot {
    let mut out = Snapshot::new();
    if keys.is_empty() {
        return out;
    }
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("TYPE").arg(k).cmd("PEXPIRETIME").arg(k);
    }
    let meta: Vec<redis::Value> = pipe.query(conn).expect("TYPE/PEXPIRETIME pipeline");
    let mut present = Vec::with_capacity(keys.len());
    for (k, m) in keys.iter().zip(meta.chunks(2)) {
        let kind = match &m[0] {
            redis::Value::SimpleString(s) => s.clone(),
            redis::Value::Okay => "OK".to_string(),
            other => panic!("TYPE reply {other:?}"),
        };
        // A short lease can run out between the SCAN and the TYPE: such a
        // key is already gone, and is left out rather than recorded as present.
        if kind == "none" {
            continue;
        }
        let expire_at = match &m[1] {
            redis::Value::Int(n) => *n,
            other => panic!("PEXPIRETIME reply {other:?}"),
        };
        // Or between the TYPE and the PEXPIRETIME (-2: no such key), which
        // a loaded server can let the active expiry cycle run between.
        if expire_at == -2 {
            continue;
        }
        present.push((k, kind, expire_at));
    }
    if present.is_empty() {
        return out;
    }
    let mut pipe = redis::pipe();
    for (k, kind, _) in &present {
        match kind.as_str() {
            "string" => pipe.cmd("GET").arg(k),
            "hash" => pipe.cmd("HGETALL").arg(k),
            "list" => pipe.cmd("LRANGE").arg(k).arg(0).arg(-1),
            "set" => pipe.cmd("SMEMBERS").arg(k),
            "zset" => pipe.cmd("ZRANGE").arg(k).arg(0).arg(-1).arg("WITHSCORES"),
            // A type no test creates: its serialized value still shows any
            // change (and is nil if the key went away since the TYPE).
            _ => pipe.cmd("DUMP").arg(k),
        };
    }
    let contents: Vec<redis::Value> = pipe.query(conn).expect("contents pipeline");
    for ((k, kind, expire_at), value) in present.into_iter().zip(&contents) {
        let mut content: Vec<Bytes> = flatten(value);
        match kind.as_str() {
            "hash" => {
                let mut pairs: Vec<(Bytes, Bytes)> = content
                    .chunks(2)
                    .map(|c| (c[0].clone(), c[1].clone()))
                    .collect();
                pairs.sort();
                content = pairs.into_iter().flat_map(|(f, v)| [f, v]).collect();
            }
            "set" => content.sort(),
            _ => {}
        }
        out.insert(
            Bytes(k.clone()),
            KeyState {
                kind,
                content,
                expire_at,
            },
        );
    }
    out
}

pub fn flatten(v: &redis::Value) -> Vec<Bytes> {
    match v {
        redis::Value::Nil => Vec::new(),
        redis::Value::BulkString(b) => vec![Bytes(b.clone())],
        redis::Value::SimpleString(s) => vec![Bytes(s.as_bytes().to_vec())],
        redis::Value::Okay => vec![Bytes(b"OK".to_vec())],
        redis::Value::Int(n) => vec![Bytes(n.to_string().into_bytes())],
        redis::Value::Double(d) => vec![Bytes(d.to_string().into_bytes())],
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.iter().flat_map(flatten).collect()
        }
        redis::Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(a, b)| {
                let mut x = flatten(a);
                x.extend(flatten(b));
                x
            })
            .collect(),
        other => panic!("unexpected value {other:?}"),
    }
}

/// Readable difference of two snapshots (empty when equal).
pub fn diff(left: &Snapshot, right: &Snapshot, lname: &str, rname: &str) -> String {
    let mut out = String::new();
    for (k, l) in left {
        match right.get(k) {
            None => out.push_str(&format!("  {k:?}: only in {lname}: {l:?}\n")),
            Some(r) if r != l => out.push_str(&format!(
                "  {k:?}:\n    {lname}: {l:?}\n    {rname}: {r:?}\n"
            )),
            Some(_) => {}
        }
    }
    for (k, r) in right {
        if !left.contains_key(k) {
            out.push_str(&format!("  {k:?}: only in {rname}: {r:?}\n"));
        }
    }
    out
}

/// A command from raw arguments. The name goes out as raw bytes like the
/// rest, so that a fuzzer may send one that is not UTF-8.
pub fn cmd_of<A: AsRef<[u8]>>(args: &[A]) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a.as_ref());
    }
    cmd
}

/// Runs a command given as raw arguments, on a connection or a cluster.
pub fn call<A: AsRef<[u8]>>(
    conn: &mut impl redis::ConnectionLike,
    args: &[A],
) -> redis::RedisResult<redis::Value> {
    cmd_of(args).query(conn)
}

fn shown<A: AsRef<[u8]>>(args: &[A]) -> Vec<String> {
    args.iter()
        .map(|a| a.as_ref().escape_ascii().to_string())
        .collect()
}

/// Runs a command that must succeed.
#[track_caller]
pub fn ok<A: AsRef<[u8]>>(conn: &mut impl redis::ConnectionLike, args: &[A]) -> redis::Value {
    match call(conn, args) {
        Ok(reply) => reply,
        Err(e) => panic!("{:?}: {e}", shown(args)),
    }
}

/// ACL key patterns through a command's key specs: each of `calls` (whose
/// key is the placeholder `NAME`) is refused `NOPERM` on `theirs` and runs
/// on `mine` for the user of `conn`.
#[track_caller]
pub fn denied_theirs_allowed_mine(
    conn: &mut impl redis::ConnectionLike,
    calls: &[&[&str]],
    theirs: &str,
    mine: &str,
) {
    for args in calls {
        let theirs_args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "NAME" { theirs } else { a })
            .collect();
        match call(conn, &theirs_args) {
            Ok(v) => panic!("{theirs_args:?} was allowed: {v:?}"),
            Err(e) => assert_eq!(e.code(), Some("NOPERM"), "{theirs_args:?}: {e}"),
        }
        let mine_args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "NAME" { mine } else { a })
            .collect();
        ok(conn, &mine_args);
    }
}

/// Runs the commands as one MULTI/EXEC, in one turn of the event loop;
/// returns EXEC's replies.
#[track_caller]
pub fn in_one_turn(
    conn: &mut impl redis::ConnectionLike,
    commands: &[&[&str]],
) -> Vec<redis::Value> {
    let mut tx = redis::pipe();
    tx.atomic();
    for args in commands {
        tx.add_command(cmd_of(args));
    }
    tx.query(conn).unwrap_or_else(|e| panic!("MULTI/EXEC: {e}"))
}

/// Runs commands that must each succeed, in order: a test's setup, written
/// as in redis-cli (`;` between commands, spaces between arguments, so no
/// argument may be empty or hold either).
#[track_caller]
pub fn ok_all(conn: &mut impl redis::ConnectionLike, commands: &str) {
    for command in commands.split(';') {
        let args: Vec<&str> = command.split_whitespace().collect();
        ok(conn, &args);
    }
}

/// Runs a command that must succeed with `expected` for its reply.
#[track_caller]
pub fn expect_reply<A: AsRef<[u8]>>(
    conn: &mut impl redis::ConnectionLike,
    args: &[A],
    expected: redis::Value,
) {
    assert_eq!(ok(conn, args), expected, "{:?}", shown(args));
}

/// Counters that sum: per thread or per run, summed into one. Generic code
/// (the differential runner) sums a test's own counters through it.
pub trait Counters {
    fn add(&mut self, other: &Self);
}

/// A struct of `usize` counters (and, after `also`, fields of other types),
/// with `add`, which sums another's counters into its own: counters kept per
/// thread or per run, summed into one. The struct's visibility is its
/// fields' too.
#[macro_export]
macro_rules! counters {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident { $($count:ident),+ $(,)? }
        $(also { $($field:ident: $kind:ty),+ $(,)? })?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($vis $count: usize,)+
            $($($vis $field: $kind,)+)?
        }

        impl $name {
            $vis fn add(&mut self, other: &Self) {
                $(self.$count += other.$count;)+
            }
        }

        impl $crate::Counters for $name {
            fn add(&mut self, other: &Self) {
                $name::add(self, other)
            }
        }
    };
}

/// The module's commands.
pub const COMMANDS: [&str; 6] = [
    "RWLOCK.READ",
    "RWLOCK.WRITE",
    "RWLOCK.UNLOCK",
    "RWLOCK.RENEW",
    "RWLOCK.FORCEUNLOCK",
    "RWLOCK.INFO",
];

/// Each form of each command, with `L` for the lock and `O` for the owner.
const FORMS: [&str; 12] = [
    "RWLOCK.READ L O 60000",
    "RWLOCK.WRITE L O 60000",
    "RWLOCK.RENEW L O 60000",
    "RWLOCK.UNLOCK L O READ",
    "RWLOCK.UNLOCK L O WRITE",
    "RWLOCK.UNLOCK L O WRITE LEASE 60000",
    "RWLOCK.UNLOCK L O READ REQUEST r1 60000",
    "RWLOCK.UNLOCK L O WRITE REQUEST r1 60000",
    "RWLOCK.FORCEUNLOCK L",
    "RWLOCK.FORCEUNLOCK L READ",
    "RWLOCK.FORCEUNLOCK L WRITE",
    "RWLOCK.INFO L",
];

/// Every command on `lock`, in each of its forms, well-formed and none
/// blocking: for checks that each of them is refused alike.
pub fn every_command(lock: &str, owner: &str) -> Vec<Vec<String>> {
    FORMS
        .iter()
        .map(|form| {
            form.split(' ')
                .map(|word| match word {
                    "L" => lock,
                    "O" => owner,
                    other => other,
                })
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// A fenced acquisition's reply, `[-1, token]` when it took the lock and
/// `[pttl, -1]` when refused, as its two integers.
#[track_caller]
pub fn fenced_pair(reply: &redis::Value) -> (i64, i64) {
    match reply {
        redis::Value::Array(items) => match items.as_slice() {
            [redis::Value::Int(a), redis::Value::Int(b)] => (*a, *b),
            _ => panic!("not a fenced reply: {reply:?}"),
        },
        _ => panic!("not a fenced reply: {reply:?}"),
    }
}

/// The token of a fenced acquisition that took the lock; panics on a
/// refusal (whose second element is -1).
#[track_caller]
pub fn granted_token(reply: &redis::Value) -> i64 {
    match fenced_pair(reply) {
        (-1, token) if token > 0 => token,
        other => panic!("not a granted fenced acquisition: {other:?}"),
    }
}

/// The fencing token counter of the plain lock `lock`
/// (`redisson_lock_token:{lock}`), which `FENCED` acquisitions of both kinds
/// share; 0 while it does not exist.
pub fn token_counter(conn: &mut impl redis::ConnectionLike, lock: &str) -> i64 {
    let key = format!("redisson_lock_token:{}", crate::prefix_of(lock));
    let value: Option<i64> = query(conn, &["GET", key.as_str()]);
    value.unwrap_or(0)
}

/// Runs a command that must succeed, its reply read as a `T`.
#[track_caller]
pub fn query<T: redis::FromRedisValue, A: AsRef<[u8]>>(
    conn: &mut impl redis::ConnectionLike,
    args: &[A],
) -> T {
    match redis::from_redis_value(ok(conn, args)) {
        Ok(reply) => reply,
        Err(e) => panic!("{:?}: {e}", shown(args)),
    }
}

/// Runs a command whose reply is text (INFO, CLIENT LIST, PING...).
#[track_caller]
pub fn reply_text<A: AsRef<[u8]>>(conn: &mut impl redis::ConnectionLike, args: &[A]) -> String {
    query(conn, args)
}

/// Owned pairs, to compare with the field/value pairs a reply is read into.
pub fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The value of one config (`CONFIG GET name`, which must name exactly it).
#[track_caller]
pub fn config_value(conn: &mut Conn, name: &str) -> String {
    let reply: Vec<String> = query(conn, &["CONFIG", "GET", name]);
    match <[String; 2]>::try_from(reply) {
        Ok([got, value]) if got == name => value,
        other => panic!("CONFIG GET {name}: {other:?}"),
    }
}

/// The module's configs (`CONFIG GET rwlock.*`), sorted by name.
pub fn rwlock_configs(conn: &mut Conn) -> Vec<(String, String)> {
    let flat: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("rwlock.*")
        .query(conn)
        .expect("CONFIG GET");
    let mut pairs: Vec<(String, String)> = flat
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    pairs.sort();
    pairs
}

/// Names of every key in the database, for tests whose keys are text.
pub fn all_keys(conn: &mut Conn) -> HashSet<String> {
    scan_keys(conn)
        .into_iter()
        .map(|k| String::from_utf8(k).expect("a UTF-8 key name"))
        .collect()
}

/// Names of every key but the releases' unlock latches
/// (`redisson_unlock_latch:…`), which a client's release leaves to its
/// owner's next release or to their TTL (13.5 s).
pub fn keys_but_unlock_latches(conn: &mut Conn) -> HashSet<String> {
    all_keys(conn)
        .into_iter()
        .filter(|k| !k.starts_with("redisson_unlock_latch:"))
        .collect()
}

/// One field of `INFO <section>`.
pub fn info_field(conn: &mut Conn, section: &str, field: &str) -> Option<String> {
    let info = reply_text(conn, &["INFO", section]);
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_string())
}

/// `WAIT 1 10000` on the master: the replica has processed everything so
/// far. It answers at once when the replica has; the ceiling only matters
/// on a loaded machine, or for a replica still reconnecting (once a second).
pub fn wait_replica(master: &mut Conn) {
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(10_000)
        .query(master)
        .expect("WAIT");
    assert_eq!(acked, 1, "the replica did not acknowledge within 10 s");
}

/// A counter of `INFO rwlock`, named without its `rwlock_` prefix.
pub fn rwlock_counter(conn: &mut Conn, name: &str) -> u64 {
    info_field(conn, "rwlock", &format!("rwlock_{name}"))
        .unwrap_or_else(|| panic!("no rwlock_{name} in INFO rwlock"))
        .parse()
        .expect("a number")
}

/// Asserts counters of `INFO rwlock` (named as for [`rwlock_counter`]).
#[track_caller]
pub fn assert_counters(conn: &mut Conn, expected: &[(&str, u64)]) {
    for &(name, value) in expected {
        assert_eq!(rwlock_counter(conn, name), value, "rwlock_{name}");
    }
}

/// How many times `command` (lower case, as `INFO commandstats` names it)
/// ran since the statistics were last reset; 0 when it never did.
pub fn command_calls(conn: &mut Conn, command: &str) -> u64 {
    let info: String = query(conn, &["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Clients parked in the module (`INFO rwlock`'s `waiters`).
pub fn waiters(conn: &mut Conn) -> u64 {
    rwlock_counter(conn, "waiters")
}

/// Waits (at most 10 s) until `n` clients are parked in the module. Polls
/// every 2 ms, finer than [`wait_until`], so that a test goes on soon after
/// its waiters park.
pub fn wait_for_waiters(conn: &mut Conn, n: u64) {
    poll_until(
        Duration::from_secs(10),
        Duration::from_millis(2),
        &format!("{n} waiters"),
        || (waiters(conn) == n).then_some(()),
    );
}

/// How late, as a test client sees it, a server may be with something it
/// does at a time of its own (a wait's timeout, a handoff at a lease's
/// deadline) on a loaded machine: the server's timer, its event loop and the
/// client's thread may each wait for a core. Far above the few milliseconds
/// of an idle machine, and far below any other way the event could come
/// about in the tests that use it (a `BLOCK` of 10 s, a lease of 30 s,
/// nobody reading the key), so that a bound of `due + timer_slack()` still
/// says "at its time".
pub fn timer_slack() -> Duration {
    crate::scaled(Duration::from_millis(1500))
}

/// Asserts that `took` (how long a wait lasted) lies in `lo..hi`.
#[track_caller]
pub fn assert_took(took: Duration, lo: Duration, hi: Duration, what: &str) {
    assert!(
        lo <= took && took < hi,
        "{what}: took {took:?}, expected from {lo:?} to {hi:?}"
    );
}

/// Polls `probe` every 10 ms until it returns `Some`, at most `timeout`.
pub fn wait_until<T>(timeout: Duration, what: &str, probe: impl FnMut() -> Option<T>) -> T {
    poll_until(timeout, Duration::from_millis(10), what, probe)
}

/// Polls `probe` every `every` until it returns `Some`, at most `timeout`.
pub fn poll_until<T>(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        thread::sleep(every);
    }
}

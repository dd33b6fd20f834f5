//! Helpers shared by the fault tests (cluster, persistence, torture, server
//! fuzzing, security): a seeded generator, key snapshots with absolute
//! deadlines, raw calls and a few INFO readers. Each test file takes what it
//! needs, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// SplitMix64: small, seeded, so a failing run replays from its seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
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

/// Bytes shown as escaped ASCII in assertion messages.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0.escape_ascii())
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
pub fn scan_keys(conn: &mut redis::Connection) -> Vec<Vec<u8>> {
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
pub fn snapshot(conn: &mut redis::Connection) -> Snapshot {
    let keys = scan_keys(conn);
    snapshot_of(conn, &keys)
}

/// Type, contents and PEXPIRETIME of `keys`; missing keys are left out.
pub fn snapshot_of(conn: &mut redis::Connection, keys: &[Vec<u8>]) -> Snapshot {
    let mut out = Snapshot::new();
    if keys.is_empty() {
        return out;
    }
    let mut pipe = redis::pipe();
    for k in keys {
        pipe.cmd("TYPE").arg(k).cmd("PEXPIRETIME").arg(k);
    }
    let meta: Vec<redis::Value> = pipe.query(conn).expect("TYPE/PEXPIRETIME pipeline");
    let mut kinds = Vec::with_capacity(keys.len());
    let mut pipe = redis::pipe();
    for (i, k) in keys.iter().enumerate() {
        let kind = match &meta[2 * i] {
            redis::Value::SimpleString(s) => s.clone(),
            redis::Value::Okay => "OK".to_string(),
            other => panic!("TYPE reply {other:?}"),
        };
        match kind.as_str() {
            "string" => pipe.cmd("GET").arg(k),
            "hash" => pipe.cmd("HGETALL").arg(k),
            "list" => pipe.cmd("LRANGE").arg(k).arg(0).arg(-1),
            "set" => pipe.cmd("SMEMBERS").arg(k),
            "zset" => pipe.cmd("ZRANGE").arg(k).arg(0).arg(-1).arg("WITHSCORES"),
            // "none" (missing) or a type no test creates.
            _ => pipe.cmd("EXISTS").arg(k),
        };
        kinds.push(kind);
    }
    let contents: Vec<redis::Value> = pipe.query(conn).expect("contents pipeline");
    for (i, k) in keys.iter().enumerate() {
        if kinds[i] == "none" {
            continue;
        }
        let expire_at = match &meta[2 * i + 1] {
            redis::Value::Int(n) => *n,
            other => panic!("PEXPIRETIME reply {other:?}"),
        };
        let mut content: Vec<Bytes> = flatten(&contents[i]);
        match kinds[i].as_str() {
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
                kind: kinds[i].clone(),
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

/// A command from raw arguments.
pub fn cmd_of<A: AsRef<[u8]>>(args: &[A]) -> redis::Cmd {
    let mut cmd =
        redis::cmd(std::str::from_utf8(args[0].as_ref()).expect("a command name is ASCII"));
    for a in &args[1..] {
        cmd.arg(a.as_ref());
    }
    cmd
}

/// Runs a command given as raw arguments.
pub fn call<A: AsRef<[u8]>>(
    conn: &mut redis::Connection,
    args: &[A],
) -> redis::RedisResult<redis::Value> {
    cmd_of(args).query(conn)
}

/// Runs a command that must succeed.
pub fn ok<A: AsRef<[u8]>>(conn: &mut redis::Connection, args: &[A]) -> redis::Value {
    call(conn, args).unwrap_or_else(|e| {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().escape_ascii().to_string())
            .collect();
        panic!("{shown:?}: {e}")
    })
}

/// One field of `INFO <section>`.
pub fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg(section).query(conn).expect("INFO");
    let prefix = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_string())
}

/// Clients parked in the module (`INFO rwlock`'s `waiters`).
pub fn waiters(conn: &mut redis::Connection) -> u64 {
    info_field(conn, "rwlock", "rwlock_waiters")
        .and_then(|v| v.parse().ok())
        .expect("INFO rwlock has waiters")
}

/// Polls `probe` every 10 ms until it returns `Some`, at most `timeout`.
pub fn wait_until<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

//! Server-level fuzzer: random traffic against a live server with the
//! module. Valid and malformed module calls (read-write and plain locks on
//! the same names), BLOCK waits on side
//! connections, MULTI/EXEC, scripts calling the module, Redisson's own Lua
//! scripts on the same locks, CLIENT KILL of waiters, FLUSHALL/FLUSHDB,
//! SWAPDB, keys retyped, corrupted, renamed, copied and expired under the
//! locks, configuration changed at run time, all interleaved.
//!
//! The server must never crash, hang or drop a connection it was not told
//! to; every reply is a value or an error of an expected kind (never a
//! panic text or a wait that ended without an outcome); every BLOCK wait
//! ends by its timeout; locks no raw command touches stay well-formed (one
//! writer with only its own reads, readers only, or a plain lock's one holder); and at the end no
//! waiter is left in the module.
//!
//! Seeds come from `tests/fuzz-seeds.txt`; `RWLOCK_FUZZ_SEED` runs one seed,
//! `RWLOCK_FUZZ_RANDOM_SEEDS=n` adds n fresh ones, `RWLOCK_FUZZ_OPS` sets the
//! operations per seed (default 1500).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{
    channel, env_usize, lua_script, parse_seed, query, reply_text, timeout_key, wait_until, Rng,
    Server, COMMANDS,
};

/// Locks that only module commands and Redisson's scripts touch.
const CLEAN: [&str; 4] = ["C0", "C1", "{c}:2", "x{c}3"];
/// Plain locks that only `LOCK.*` commands touch.
const PLAIN: [&str; 3] = ["P0", "{p}:1", "x{p}2"];
/// Locks whose keys the fuzzer also retypes and corrupts, and where both
/// kinds of lock meet: Redisson's read-write scripts treat a plain lock's
/// hash as free, so no shape can be asserted there.
const DIRTY: [&str; 3] = ["D0", "{d}:1", "D2"];
const OWNERS: [&str; 4] = ["o:1", "o:2", "o:3", "o:4"];
const LEASES: [&str; 6] = ["1", "5", "50", "500", "5000", "60000"];
const WAITS: [&str; 6] = ["0", "1", "10", "100", "300", "1000"];
/// How late a BLOCK reply may come past its timeout on a loaded machine.
const LATE: Duration = Duration::from_secs(5);

fn strings(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// A waiter on its own connection.
struct Waiter {
    id: i64,
    args: Vec<Vec<u8>>,
    timeout_ms: u64,
    killed: bool,
    handle: JoinHandle<(redis::RedisResult<Value>, Duration)>,
}

#[derive(Default, Debug)]
struct Tally {
    ops: usize,
    ok: usize,
    errors: BTreeMap<String, usize>,
    waits: usize,
    waits_served: usize,
    waits_timed_out: usize,
    waits_failed: usize,
    waits_killed: usize,
}

struct Fuzzer<'a> {
    server: &'a Server,
    conn: Conn,
    rng: Rng,
    db: u32,
    waiters: Vec<Waiter>,
    tally: Tally,
    /// The last calls, for failure messages.
    recent: VecDeque<String>,
    last: String,
}

/// An error kind the fuzzer may see, or a failure.
fn expected_error(e: &redis::RedisError) -> Result<String, String> {
    let text = e.to_string();
    if e.is_io_error() || e.is_connection_dropped() || e.is_timeout() {
        return Err(format!("connection error: {text}"));
    }
    let lower = text.to_lowercase();
    if lower.contains("panic") || lower.contains("unwrap") || lower.contains("without an outcome") {
        return Err(format!("a bug's message: {text}"));
    }
    let code = e.code().unwrap_or("?").to_string();
    match code.as_str() {
        // DEADLOCK: a BLOCK acquisition whose wait would close a cycle (a
        // reader asking to write, or owners waiting for each other),
        // refused with nothing changed (contract §14).
        "ERR" | "WRONGTYPE" | "EXECABORT" | "BUSYKEY" | "NON_REENTRANT_REACQUIRE" | "DEADLOCK" => {
            Ok(format!(
                "{code} {}",
                e.detail()
                    .unwrap_or("")
                    .chars()
                    .take(32)
                    .collect::<String>()
            ))
        }
        _ => Err(format!("unexpected error {text}")),
    }
}

impl Fuzzer<'_> {
    fn lock(&mut self) -> &'static str {
        if self.rng.chance(65) {
            CLEAN[self.rng.below(CLEAN.len() as u64) as usize]
        } else {
            DIRTY[self.rng.below(DIRTY.len() as u64) as usize]
        }
    }

    fn owner(&mut self) -> &'static str {
        OWNERS[self.rng.below(OWNERS.len() as u64) as usize]
    }

    /// A random argument: often right, sometimes wrong.
    fn token(&mut self) -> Vec<u8> {
        match self.rng.below(8) {
            0 => self.rng.bytes(10),
            1 => (*self.rng.pick(&[
                "",
                "mode",
                "x:write",
                "{",
                "}",
                "a{b",
                "-1",
                "0",
                "01",
                "READ",
                "BLOCK",
                "LEASE",
                "REQUEST",
                "315360000001",
            ]))
            .as_bytes()
            .to_vec(),
            2 => self.lock().as_bytes().to_vec(),
            3 => self.owner().as_bytes().to_vec(),
            4 => (*self.rng.pick(&LEASES)).as_bytes().to_vec(),
            5 => (*self
                .rng
                .pick(&["READ", "WRITE", "read", "LEASE", "REQUEST", "BLOCK"]))
            .as_bytes()
            .to_vec(),
            6 => vec![b'z'; 1 + self.rng.below(4096) as usize],
            _ => (*self.rng.pick(&WAITS)).as_bytes().to_vec(),
        }
    }

    /// A well-formed module call (BLOCK left out): a read-write lock's
    /// command, or a plain lock's (on a dirty name, where the two kinds
    /// meet, else on a plain lock's name).
    fn valid_call(&mut self, lock: &str) -> Vec<Vec<u8>> {
        if self.rng.chance(35) {
            let lock = self.plain_or(lock);
            return self.valid_lock_call(lock);
        }
        let owner = self.owner();
        let lease = *self.rng.pick(&LEASES);
        match self.rng.below(12) {
            0..=2 => strings(&["RWLOCK.READ", lock, owner, lease]),
            3..=4 => strings(&["RWLOCK.WRITE", lock, owner, lease]),
            5..=7 => {
                let mode = *self.rng.pick(&["READ", "WRITE"]);
                let mut v = strings(&["RWLOCK.UNLOCK", lock, owner, mode]);
                if self.rng.chance(30) {
                    v.extend(strings(&["LEASE", lease]));
                }
                if self.rng.chance(30) {
                    let id = format!("q{}", self.rng.below(4));
                    v.extend(strings(&["REQUEST", &id, lease]));
                }
                v
            }
            8..=9 => strings(&["RWLOCK.RENEW", lock, owner, lease]),
            10 => {
                let mut v = strings(&["RWLOCK.FORCEUNLOCK", lock]);
                if self.rng.chance(50) {
                    v.push((*self.rng.pick(&["READ", "WRITE"])).as_bytes().to_vec());
                }
                v
            }
            _ => strings(&["RWLOCK.INFO", lock]),
        }
    }

    /// `lock` when it is dirty, else a plain lock's name.
    fn plain_or<'a>(&mut self, lock: &'a str) -> &'a str {
        if DIRTY.contains(&lock) {
            lock
        } else {
            PLAIN[self.rng.below(PLAIN.len() as u64) as usize]
        }
    }

    /// A well-formed `LOCK.*` call (BLOCK left out).
    fn valid_lock_call(&mut self, lock: &str) -> Vec<Vec<u8>> {
        let owner = self.owner();
        let lease = *self.rng.pick(&LEASES);
        match self.rng.below(8) {
            0..=2 => {
                let mut v = strings(&["LOCK.ACQUIRE", lock, owner, lease]);
                for flag in ["FENCED", "NOREENTRY"] {
                    if self.rng.chance(30) {
                        v.push(flag.as_bytes().to_vec());
                    }
                }
                v
            }
            3..=4 => {
                let mut v = strings(&["LOCK.UNLOCK", lock, owner]);
                if self.rng.chance(30) {
                    let id = format!("q{}", self.rng.below(4));
                    v.extend(strings(&["REQUEST", &id, lease]));
                }
                v
            }
            5 => strings(&["LOCK.RENEW", lock, owner, lease]),
            6 => strings(&["LOCK.FORCEUNLOCK", lock]),
            _ => strings(&["LOCK.INFO", lock]),
        }
    }

    fn malformed_call(&mut self) -> Vec<Vec<u8>> {
        let cmd = *self.rng.pick(&COMMANDS);
        let mut v = vec![cmd.as_bytes().to_vec()];
        for _ in 0..self.rng.below(8) {
            let t = self.token();
            v.push(t);
        }
        v
    }

    /// Runs a call on the main connection and checks its reply.
    fn call(&mut self, args: &[Vec<u8>]) -> Option<Value> {
        self.last = args
            .iter()
            .map(|a| {
                a.escape_ascii()
                    .to_string()
                    .chars()
                    .take(40)
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join(" ");
        self.recent.push_back(self.last.clone());
        if self.recent.len() > 16 {
            self.recent.pop_front();
        }
        self.tally.ops += 1;
        match testkit::call(&mut self.conn, args) {
            Ok(v) => {
                self.tally.ok += 1;
                Some(v)
            }
            Err(e) => {
                match expected_error(&e) {
                    Ok(kind) => *self.tally.errors.entry(kind).or_default() += 1,
                    Err(why) => panic!(
                        "{}: {why}\n---- the last calls ----\n{}\n---- server log ----\n{}",
                        self.last,
                        self.recent.iter().cloned().collect::<Vec<_>>().join("\n"),
                        self.server.log()
                    ),
                }
                None
            }
        }
    }

    fn spawn_waiter(&mut self) {
        let lock = self.lock();
        let owner = self.owner();
        let verb = *self
            .rng
            .pick(&["RWLOCK.READ", "RWLOCK.WRITE", "LOCK.ACQUIRE"]);
        let lock = if verb == "LOCK.ACQUIRE" {
            self.plain_or(lock)
        } else {
            lock
        };
        // A plain lock's name is often free: half the time another owner
        // takes it first, so its waiter waits, and is served or times out.
        if verb == "LOCK.ACQUIRE" && PLAIN.contains(&lock) && self.rng.chance(50) {
            let holder = self.owner();
            let hold = *self.rng.pick(&LEASES);
            self.call(&strings(&["LOCK.ACQUIRE", lock, holder, hold]));
        }
        let lease = *self.rng.pick(&LEASES);
        let wait = *self.rng.pick(&WAITS);
        let args = strings(&[verb, lock, owner, lease, "BLOCK", wait]);
        let mut conn = self.server.conn();
        if self.db != 0 {
            let _: () = redis::cmd("SELECT")
                .arg(self.db)
                .query(&mut conn)
                .expect("SELECT");
        }
        let id: i64 = query(&mut conn, &["CLIENT", "ID"]);
        let sent = args.clone();
        let handle = thread::spawn(move || {
            let started = Instant::now();
            let reply = testkit::call(&mut conn, &sent);
            (reply, started.elapsed())
        });
        self.tally.waits += 1;
        self.waiters.push(Waiter {
            id,
            args,
            timeout_ms: wait.parse().expect("a number"),
            killed: false,
            handle,
        });
    }

    /// Checks the waiters that have finished.
    fn reap(&mut self, all: bool) {
        let mut i = 0;
        while i < self.waiters.len() {
            if !all && !self.waiters[i].handle.is_finished() {
                i += 1;
                continue;
            }
            let w = self.waiters.swap_remove(i);
            let shown: Vec<String> = w
                .args
                .iter()
                .map(|a| a.escape_ascii().to_string())
                .collect();
            let (reply, waited) = w.handle.join().expect("a waiter thread panicked");
            if w.timeout_ms > 0 && !w.killed {
                assert!(
                    waited <= Duration::from_millis(w.timeout_ms) + LATE,
                    "{shown:?} waited {waited:?}"
                );
            }
            match reply {
                Ok(Value::Nil) => self.tally.waits_served += 1,
                Ok(Value::Int(_)) => self.tally.waits_timed_out += 1,
                Ok(other) => panic!("{shown:?} replied {other:?}"),
                Err(e) if w.killed && (e.is_io_error() || e.is_connection_dropped()) => {
                    self.tally.waits_killed += 1
                }
                Err(e) => match expected_error(&e) {
                    Ok(_) => self.tally.waits_failed += 1,
                    Err(why) => panic!(
                        "{shown:?}: {why}\n---- server log ----\n{}",
                        self.server.log()
                    ),
                },
            }
        }
    }

    fn kill_waiter(&mut self) {
        let live: Vec<usize> = (0..self.waiters.len())
            .filter(|&i| !self.waiters[i].killed && !self.waiters[i].handle.is_finished())
            .collect();
        if live.is_empty() {
            return;
        }
        let i = *self.rng.pick(&live);
        self.waiters[i].killed = true;
        let id = self.waiters[i].id.to_string();
        self.call(&strings(&["CLIENT", "KILL", "ID", &id]));
    }

    fn multi(&mut self) {
        self.call(&strings(&["MULTI"]));
        for _ in 0..=self.rng.below(4) {
            let lock = self.lock();
            let mut call = if self.rng.chance(70) {
                self.valid_call(lock)
            } else {
                self.malformed_call()
            };
            // Inside MULTI a BLOCK makes one attempt.
            if self.rng.chance(30) && (call[0] == b"RWLOCK.READ" || call[0] == b"RWLOCK.WRITE") {
                call.extend(strings(&["BLOCK", "0"]));
            }
            self.call(&call);
        }
        // Errors inside EXEC's reply are values; a bad arity aborts it.
        if let Some(Value::Array(replies)) = self.call(&strings(&["EXEC"])) {
            for r in replies {
                if let Value::ServerError(e) = r {
                    let e: redis::RedisError = e.into();
                    if let Err(why) = expected_error(&e) {
                        panic!("in EXEC: {why}");
                    }
                }
            }
        }
    }

    fn script(&mut self) {
        let lock = self.lock();
        let owner = self.owner();
        let lease = *self.rng.pick(&LEASES);
        let body = *self.rng.pick(&[
            // A BLOCK inside a script makes one attempt.
            "return redis.pcall('RWLOCK.WRITE', KEYS[1], ARGV[1], ARGV[2], 'BLOCK', '0')",
            "return redis.pcall('RWLOCK.READ', KEYS[1], ARGV[1], ARGV[2], 'BLOCK', '100')",
            "local a = redis.call('RWLOCK.READ', KEYS[1], ARGV[1], ARGV[2]) \
             local b = redis.call('RWLOCK.UNLOCK', KEYS[1], ARGV[1], 'READ') \
             return {a or 'nil', b or 'nil'}",
            "return redis.pcall('RWLOCK.UNLOCK', KEYS[1], ARGV[1], 'WRITE', 'LEASE', ARGV[2])",
            "return redis.pcall('RWLOCK.INFO', KEYS[1])",
            "return redis.pcall('RWLOCK.READ', KEYS[1], ARGV[1])",
            "return redis.call('RWLOCK.FORCEUNLOCK', KEYS[1])",
        ]);
        self.call(&strings(&["EVAL", body, "1", lock, owner, lease]));
    }

    /// One of Redisson's own scripts on a lock.
    fn redisson(&mut self) {
        let lock = *self.rng.pick(&CLEAN);
        let owner = self.owner();
        let lease = *self.rng.pick(&["50", "500", "5000", "60000"]);
        let prefix = timeout_key(lock, owner, 0);
        let prefix = prefix.trim_end_matches(":0");
        let write_field = format!("{owner}:write");
        let key_prefix = if lock.contains('{') {
            lock.to_string()
        } else {
            format!("{{{lock}}}")
        };
        let (name, keys, argv): (&str, Vec<String>, Vec<String>) = match self.rng.below(4) {
            0 => (
                "read_lock",
                vec![lock.into(), prefix.into()],
                vec![lease.into(), owner.into(), write_field],
            ),
            1 => (
                "write_lock",
                vec![lock.into()],
                vec![lease.into(), write_field],
            ),
            2 => (
                "read_unlock",
                vec![lock.into(), channel(lock), prefix.into(), key_prefix],
                vec!["0".into(), owner.into()],
            ),
            _ => (
                "write_unlock",
                vec![lock.into(), channel(lock)],
                vec!["1".into(), lease.into(), write_field],
            ),
        };
        let mut args = vec![b"EVAL".to_vec(), lua_script(name).into_bytes()];
        args.push(keys.len().to_string().into_bytes());
        args.extend(keys.into_iter().map(String::into_bytes));
        args.extend(argv.into_iter().map(String::into_bytes));
        self.call(&args);
    }

    /// Raw commands on a dirty lock's keys: retype, corrupt, rename, expire.
    fn vandalize(&mut self) {
        let lock = *self.rng.pick(&DIRTY);
        let owner = self.owner();
        let tk = timeout_key(lock, owner, 1 + self.rng.below(2) as u32);
        let clean = *self.rng.pick(&CLEAN);
        let other = *self.rng.pick(&DIRTY);
        let calls: [&[&str]; 14] = [
            &["SET", lock, "x"],
            &["RPUSH", lock, "a"],
            &["SADD", lock, "a"],
            &["HSET", lock, "mode", "banana"],
            &["HSET", lock, owner, "x"],
            &["HSET", lock, owner, "100000"],
            &["HSET", lock, "mode", "write", owner, "1"],
            &["DEL", lock],
            &["PEXPIRE", lock, "5"],
            &["SET", &tk, "1", "PX", "20"],
            &["RPUSH", &tk, "a"],
            &["RENAME", lock, other],
            &["COPY", clean, lock, "REPLACE"],
            &["PERSIST", lock],
        ];
        let call = *self.rng.pick(&calls);
        self.call(&strings(call));
    }

    fn admin(&mut self) {
        match self.rng.below(12) {
            0 => {
                self.call(&strings(&["FLUSHALL"]));
            }
            1 => {
                self.call(&strings(&["FLUSHDB", "ASYNC"]));
            }
            2 => {
                self.call(&strings(&["SWAPDB", "0", "1"]));
            }
            3 | 4 => {
                self.db = 1 - self.db;
                let db = self.db.to_string();
                self.call(&strings(&["SELECT", &db]));
            }
            5 => {
                let v = *self.rng.pick(&["none", "fifo"]);
                self.call(&strings(&["CONFIG", "SET", "rwlock.fairness", v]));
            }
            6 => {
                let v = *self.rng.pick(&["auto", "publish", "spublish"]);
                self.call(&strings(&["CONFIG", "SET", "rwlock.publish", v]));
            }
            7 => {
                let v = *self.rng.pick(&["1", "50", "30000"]);
                self.call(&strings(&["CONFIG", "SET", "rwlock.default-lease", v]));
            }
            8 => {
                let lock = *self.rng.pick(&CLEAN);
                self.call(&strings(&["PEXPIRE", lock, "10"]));
            }
            9 => {
                self.call(&strings(&["CLIENT", "PAUSE", "20", "WRITE"]));
            }
            10 => {
                let lock = *self.rng.pick(&CLEAN);
                let dump = self.call(&strings(&["DUMP", lock]));
                if let Some(Value::BulkString(bytes)) = dump {
                    let target = *self.rng.pick(&DIRTY);
                    self.call(&[
                        b"RESTORE".to_vec(),
                        target.as_bytes().to_vec(),
                        b"0".to_vec(),
                        bytes,
                        b"REPLACE".to_vec(),
                    ]);
                }
            }
            _ => {
                let ch = channel(CLEAN[self.rng.below(CLEAN.len() as u64) as usize]);
                self.call(&strings(&["PUBLISH", &ch, "1"]));
            }
        }
    }

    /// Locks only the module and Redisson's scripts write are well-formed.
    fn check_clean_locks(&mut self) {
        for db in ["0", "1"] {
            let mut c = self.server.conn();
            let _: () = redis::cmd("SELECT").arg(db).query(&mut c).expect("SELECT");
            for lock in PLAIN {
                let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(lock)
                    .query(&mut c)
                    .expect("a plain lock is a hash or nothing");
                let counts: Vec<i64> = fields.values().map(|v| v.parse().unwrap_or(0)).collect();
                assert!(
                    fields.len() <= 1 && counts.iter().all(|n| (1..=100_000).contains(n)),
                    "db {db} {lock}: a plain lock has one holder: {fields:?} (after {})",
                    self.last
                );
            }
            for lock in CLEAN {
                let kind = reply_text(&mut c, &["TYPE", lock]);
                if kind == "none" {
                    continue;
                }
                assert_eq!(kind, "hash", "db {db} {lock} (after {})", self.last);
                let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(lock)
                    .query(&mut c)
                    .expect("HGETALL");
                if fields.is_empty() {
                    // Expired between TYPE and HGETALL (leases of 1 ms).
                    continue;
                }
                let mode = fields.get("mode").map(String::as_str);
                let holds: Vec<(&String, &String)> =
                    fields.iter().filter(|(f, _)| *f != "mode").collect();
                for (f, v) in &holds {
                    let n: i64 = v.parse().unwrap_or(0);
                    assert!(
                        (1..=100_000).contains(&n),
                        "db {db} {lock}: {f}={v} in {fields:?}"
                    );
                }
                let writers: Vec<&str> = holds
                    .iter()
                    .filter_map(|(f, _)| f.strip_suffix(":write"))
                    .collect();
                match mode {
                    Some("write") => {
                        assert_eq!(writers.len(), 1, "db {db} {lock}: {fields:?}");
                        for (f, _) in &holds {
                            let o = f.strip_suffix(":write").unwrap_or(f);
                            assert_eq!(
                                o, writers[0],
                                "db {db} {lock}: two owners in write mode: {fields:?}"
                            );
                        }
                    }
                    Some("read") => assert!(
                        writers.is_empty() && !holds.is_empty(),
                        "db {db} {lock}: {fields:?}"
                    ),
                    other => panic!("db {db} {lock}: mode {other:?} in {fields:?}"),
                }
            }
        }
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=29 => {
                let lock = self.lock();
                let call = self.valid_call(lock);
                self.call(&call);
            }
            30..=41 => {
                let call = self.malformed_call();
                self.call(&call);
            }
            42..=53 => self.spawn_waiter(),
            54..=59 => self.multi(),
            60..=65 => self.script(),
            66..=71 => self.redisson(),
            72..=75 => self.kill_waiter(),
            76..=89 => self.vandalize(),
            _ => self.admin(),
        }
    }
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("RWLOCK_FUZZ_SEED")
        .ok()
        .and_then(|s| parse_seed(&s))
    {
        return vec![seed];
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-seeds.txt");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut seeds: Vec<u64> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            parse_seed(l).unwrap_or_else(|| panic!("bad seed line {l:?} in {}", path.display()))
        })
        .collect();
    let mut fresh = Rng(testkit::wall_us() as u64);
    for _ in 0..env_usize("RWLOCK_FUZZ_RANDOM_SEEDS", 0) {
        seeds.push(fresh.next_u64());
    }
    assert!(!seeds.is_empty(), "no seed in {}", path.display());
    seeds
}

fn fuzz_one(seed: u64, ops: usize) -> Tally {
    // Redisson's own scripts are among the calls: never fuzz without them.
    testkit::require_lua(testkit::SEED_LUA);
    let server = Server::start(&["--enable-debug-command", "yes"]);
    let mut f = Fuzzer {
        server: &server,
        conn: server.conn(),
        rng: Rng(seed),
        db: 0,
        waiters: Vec::new(),
        tally: Tally::default(),
        recent: VecDeque::new(),
        last: String::new(),
    };
    for i in 0..ops {
        f.step();
        f.reap(false);
        if i % 100 == 99 {
            f.check_clean_locks();
        }
    }
    f.check_clean_locks();
    // End every wait still going: kill them, then every waiter must answer.
    for i in 0..f.waiters.len() {
        if !f.waiters[i].handle.is_finished() {
            f.waiters[i].killed = true;
            let id = f.waiters[i].id.to_string();
            let _ = testkit::call(&mut f.conn, &["CLIENT", "KILL", "ID", id.as_str()]);
        }
    }
    f.reap(true);
    let mut c = server.conn();
    wait_until(
        Duration::from_secs(10),
        "no waiter left in the module",
        || {
            let waiting = testkit::info_field(&mut c, "rwlock", "rwlock_waiters");
            let locks = testkit::info_field(&mut c, "rwlock", "rwlock_locks_with_waiters");
            (waiting.as_deref() == Some("0") && locks.as_deref() == Some("0")).then_some(())
        },
    );
    let pong = reply_text(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
    let log = server.log();
    for bad in [
        "crashed by signal",
        "ASSERTION FAILED",
        "Guru Meditation",
        "panicked",
    ] {
        assert!(
            !log.contains(bad),
            "seed {seed:#x}: the log says {bad:?}:\n{log}"
        );
    }
    f.tally
}

#[test]
fn random_traffic_never_crashes_hangs_or_breaks_a_lock() {
    let ops = env_usize("RWLOCK_FUZZ_OPS", 1500);
    let started = Instant::now();
    for seed in seeds() {
        eprintln!("fuzz seed {seed:#x} (replay with RWLOCK_FUZZ_SEED={seed:#x}), {ops} operations");
        let t = fuzz_one(seed, ops);
        eprintln!(
            "  {} operations: {} ok, {} errors; {} waits: {} served, {} timed out, {} failed, {} killed",
            t.ops,
            t.ok,
            t.errors.values().sum::<usize>(),
            t.waits,
            t.waits_served,
            t.waits_timed_out,
            t.waits_failed,
            t.waits_killed
        );
        for (kind, n) in &t.errors {
            eprintln!("    {n:6}  {kind}");
        }
        assert!(
            t.waits_served > 0 && t.waits_timed_out > 0 && t.waits_killed > 0,
            "{t:?}"
        );
    }
    eprintln!("fuzzing took {:?}", started.elapsed());
}

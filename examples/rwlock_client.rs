//! Redisson-compatible locks for Rust, on the rwlock module, with the
//! `redis` crate: the read-write lock (`RReadWriteLock`) and the plain lock
//! (`RLock`, `RFencedLock`).
//!
//! ```text
//! let client = redis::Client::open("redis://127.0.0.1:6399/")?;
//! let lock = ReadWriteLock::new(client.clone(), "orders");
//! {
//!     let _held = lock.write(Some(Duration::from_secs(5)))?;
//!     // no other reader or writer, in this process or any other
//! } // released here
//! let plain = Lock::fenced(client, "invoice:42");
//! let held = plain.hold(Some(Duration::from_secs(5)))?;
//! storage.write(data, held.token); // the storage refuses older tokens
//! ```
//!
//! A hold belongs to Redisson's kind of owner, `<client UUID>:<thread id>`,
//! so a thread re-enters its own holds and a Java service on Redisson sharing
//! the lock sees an ordinary holder. While a guard lives, a watchdog thread
//! renews the hold every lease/3 (`RWLOCK.RENEW`, `LOCK.RENEW`), as
//! Redisson's watchdog does; waiting is done by the server (`BLOCK`), not by
//! polling.
//!
//! Run it against a server with the module to watch it work; it checks what
//! it shows and exits non-zero if anything is off:
//!
//! ```text
//! cargo run --release --example rwlock_client -- redis://127.0.0.1:6399/
//! ```

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis::{Commands, Connection, Value};

#[derive(Debug)]
enum Error {
    /// The lock was not free (or the wait ran out): the holders' remaining lease.
    NotAcquired {
        pttl: i64,
    },
    Redis(redis::RedisError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotAcquired { pttl } => write!(f, "held by others for {pttl} ms more"),
            Error::Redis(e) => write!(f, "{e}"),
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // Redisson uses the JVM's thread id; any number unique in the process will do.
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

fn thread_number() -> u64 {
    THREAD_ID.with(|id| {
        if id.get() == 0 {
            id.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        }
        id.get()
    })
}

/// What both kinds of lock share: the name, the lease, this client's id.
struct Named {
    client: redis::Client,
    name: String,
    lease_ms: u64,
    client_id: String,
}

impl Named {
    fn new(client: redis::Client, name: &str, lease_ms: u64) -> Self {
        Named {
            client,
            name: name.to_string(),
            lease_ms,
            client_id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// This thread's owner string, as Redisson builds it.
    fn owner(&self) -> String {
        format!("{}:{}", self.client_id, thread_number())
    }

    /// `command name owner lease`, and `BLOCK ms` when `wait` is given: how
    /// long the server may park the call (zero: without limit); None fails
    /// at once if the lock is held.
    fn acquisition(&self, command: &str, owner: &str, wait: Option<Duration>) -> redis::Cmd {
        let mut cmd = redis::cmd(command);
        cmd.arg(&self.name).arg(owner).arg(self.lease_ms);
        if let Some(wait) = wait {
            cmd.arg("BLOCK").arg(wait.as_millis() as u64);
        }
        cmd
    }

    /// The guard of a hold just taken, with a watchdog renewing it by the
    /// command of its kind of lock.
    fn guard(&self, owner: String, conn: Connection, held: Held) -> Result<Guard<'_>, Error> {
        let renew = match held {
            Held::ReadWrite(_) => "RWLOCK.RENEW",
            Held::Plain { .. } => "LOCK.RENEW",
        };
        let watchdog = Watchdog::start(self, &owner, renew)?;
        Ok(Guard {
            lock: self,
            owner,
            held,
            conn,
            watchdog: Some(watchdog),
        })
    }
}

/// Nothing when acquired; the holders' remaining lease when refused.
fn refused(pttl: Option<i64>) -> Result<(), Error> {
    pttl.map_or(Ok(()), |pttl| Err(Error::NotAcquired { pttl }))
}

struct ReadWriteLock(Named);

impl ReadWriteLock {
    fn new(client: redis::Client, name: &str) -> Self {
        Self::with_lease(client, name, 30_000)
    }

    fn with_lease(client: redis::Client, name: &str, lease_ms: u64) -> Self {
        ReadWriteLock(Named::new(client, name, lease_ms))
    }

    fn name(&self) -> &str {
        &self.0.name
    }

    /// A read hold until the guard drops (`wait` as `Named::acquisition`).
    fn read(&self, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        self.acquire("READ", wait)
    }

    /// The write hold until the guard drops (see `read`).
    fn write(&self, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        self.acquire("WRITE", wait)
    }

    fn acquire(&self, mode: &'static str, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        let owner = self.0.owner();
        let mut conn = self.0.client.get_connection()?;
        let cmd = self.0.acquisition(&format!("RWLOCK.{mode}"), &owner, wait);
        refused(cmd.query(&mut conn)?)?;
        self.0.guard(owner, conn, Held::ReadWrite(mode))
    }
}

/// Redisson's `RLock`: one holder at a time, re-entrant; fenced, its
/// `RFencedLock`: every acquisition takes the next fencing token.
struct Lock {
    named: Named,
    fenced: bool,
}

/// How long the server keeps a release's reply for a retry: Redisson's default.
const LATCH_TTL_MS: u64 = 13_500;

impl Lock {
    fn new(client: redis::Client, name: &str) -> Self {
        Self::with_lease(client, name, 30_000)
    }

    fn with_lease(client: redis::Client, name: &str, lease_ms: u64) -> Self {
        Lock {
            named: Named::new(client, name, lease_ms),
            fenced: false,
        }
    }

    fn fenced(client: redis::Client, name: &str) -> Self {
        Lock {
            fenced: true,
            ..Self::new(client, name)
        }
    }

    fn name(&self) -> &str {
        &self.named.name
    }

    /// The lock until the guard drops (`wait` as `Named::acquisition`); the
    /// guard's `token` is a fenced lock's fencing token.
    fn hold(&self, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        let owner = self.named.owner();
        let mut conn = self.named.client.get_connection()?;
        let mut cmd = self.named.acquisition("LOCK.ACQUIRE", &owner, wait);
        let token = if self.fenced {
            // [-1, token], or [pttl, -1] when refused.
            let (pttl, token): (i64, i64) = cmd.arg("FENCED").query(&mut conn)?;
            refused((token == -1).then_some(pttl))?;
            Some(token)
        } else {
            refused(cmd.query(&mut conn)?)?;
            None
        };
        self.named.guard(owner, conn, Held::Plain { token })
    }
}

/// Renews one hold every lease/3 until stopped or the lock is gone.
struct Watchdog {
    stop: Sender<()>,
    thread: JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(lock: &Named, owner: &str, renew: &'static str) -> Result<Self, Error> {
        let mut conn = lock.client.get_connection()?;
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let (name, owner, lease) = (lock.name.clone(), owner.to_string(), lock.lease_ms);
        let flag = Arc::clone(&lost);
        let thread = thread::spawn(move || {
            let period = Duration::from_millis(lease / 3);
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                let held: redis::RedisResult<i64> = redis::cmd(renew)
                    .arg(&name)
                    .arg(&owner)
                    .arg(lease)
                    .query(&mut conn);
                if held != Ok(1) {
                    // Lease ran out, the lock was forced open, or the server is gone.
                    flag.store(true, Ordering::SeqCst);
                    return;
                }
            }
        });
        Ok(Watchdog { stop, thread, lost })
    }
}

/// What a guard holds.
enum Held {
    /// A read-write lock's hold, in this mode.
    ReadWrite(&'static str),
    /// The plain lock, with a fenced lock's token.
    Plain { token: Option<i64> },
}

struct Guard<'a> {
    lock: &'a Named,
    owner: String,
    held: Held,
    conn: Connection,
    watchdog: Option<Watchdog>,
}

impl Guard<'_> {
    /// True once the watchdog found the hold gone.
    fn lost(&self) -> bool {
        self.watchdog
            .as_ref()
            .is_some_and(|w| w.lost.load(Ordering::SeqCst))
    }

    /// A fenced lock's fencing token.
    fn token(&self) -> Option<i64> {
        match self.held {
            Held::Plain { token } => token,
            Held::ReadWrite(_) => None,
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.watchdog.take() {
            let _ = w.stop.send(());
            let _ = w.thread.join();
        }
        let (name, owner) = (&self.lock.name, &self.owner);
        // Nothing to do if a release fails: the lease ends the hold anyway.
        let _: redis::RedisResult<Value> = match self.held {
            Held::ReadWrite(mode) => redis::cmd("RWLOCK.UNLOCK")
                .arg(name)
                .arg(owner)
                .arg(mode)
                .query(&mut self.conn),
            Held::Plain { .. } => {
                // With a request id, an UNLOCK sent again after a lost reply
                // replies what the first one did instead of releasing a
                // second hold. Redisson deletes the latch once it has the
                // reply.
                let request = uuid::Uuid::new_v4().simple().to_string();
                let released: redis::RedisResult<Value> = redis::cmd("LOCK.UNLOCK")
                    .arg(name)
                    .arg(owner)
                    .arg("REQUEST")
                    .arg(&request)
                    .arg(LATCH_TTL_MS)
                    .query(&mut self.conn);
                let prefix = if name.contains('{') {
                    name.clone()
                } else {
                    format!("{{{name}}}")
                };
                let latch = format!("redisson_unlock_latch:{prefix}:{request}");
                let _: redis::RedisResult<Value> = self.conn.del(latch);
                released
            }
        };
    }
}

// --- The demonstration ------------------------------------------------------

fn fail(what: &str) -> ! {
    println!("FAILED: {what}");
    std::process::exit(1);
}

fn check(ok: bool, what: &str) {
    if !ok {
        fail(what);
    }
    println!("ok: {what}");
}

/// The refusal's PTTL; fails the check `what` if the lock was acquired.
fn refusal<T>(attempt: Result<T, Error>, what: &str) -> Result<i64, Error> {
    match attempt {
        Err(Error::NotAcquired { pttl }) => Ok(pttl),
        Ok(_) => fail(what),
        Err(e) => Err(e),
    }
}

/// The element at `path` in the nested arrays `command lock` replies (an
/// INFO command's); nil if there is none.
fn info_at(
    conn: &mut Connection,
    command: &str,
    lock: &str,
    path: &[usize],
) -> Result<Value, Error> {
    let mut v: Value = redis::cmd(command).arg(lock).query(conn)?;
    for &i in path {
        v = match v {
            Value::Array(mut items) if i < items.len() => items.swap_remove(i),
            _ => Value::Nil,
        };
    }
    Ok(v)
}

/// A counter `<prefix>:<name>` set to nothing, and a connection to read it.
fn fresh_counter(
    client: &redis::Client,
    prefix: &str,
    name: &str,
) -> Result<(String, Connection), Error> {
    let counter = format!("{prefix}:{name}");
    let mut conn = client.get_connection()?;
    let _: () = conn.del(&counter)?;
    Ok((counter, conn))
}

/// Read, sleep, write: without a lock, increments get lost.
fn racy_increment(conn: &mut Connection, counter: &str) -> Result<(), Error> {
    let value: Option<i64> = conn.get(counter)?;
    thread::sleep(Duration::from_millis(1));
    let _: () = conn.set(counter, value.unwrap_or(0) + 1)?;
    Ok(())
}

const LONG_WAIT: Option<Duration> = Some(Duration::from_secs(30));

/// Writers increment a counter with a read-sleep-write race window, readers
/// look in: no increment is lost and no reader ever overlaps a writer.
fn contention(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lock = ReadWriteLock::new(client.clone(), &format!("{prefix}:counter-lock"));
    let lock = Arc::new(lock);
    let (counter, mut conn) = fresh_counter(client, prefix, "counter")?;
    let (writers, rounds) = (4, 25);
    // (readers inside, writers inside, overlaps seen)
    let inside = Arc::new(Mutex::new((0, 0, 0)));
    let enter = |inside: &Mutex<(i32, i32, i32)>, writer: bool| {
        let mut s = inside.lock().expect("state");
        if writer {
            s.1 += 1;
        } else {
            s.0 += 1;
        }
        if s.1 > 1 || (s.1 > 0 && s.0 > 0) {
            s.2 += 1;
        }
    };
    let leave = |inside: &Mutex<(i32, i32, i32)>, writer: bool| {
        let mut s = inside.lock().expect("state");
        if writer {
            s.1 -= 1;
        } else {
            s.0 -= 1;
        }
    };
    let threads: Vec<JoinHandle<Result<(), Error>>> = (0..writers + 2)
        .map(|i| {
            let (lock, inside, counter) = (Arc::clone(&lock), Arc::clone(&inside), counter.clone());
            let client = client.clone();
            thread::spawn(move || {
                let writer = i < writers;
                let mut conn = client.get_connection()?;
                for _ in 0..rounds {
                    let _held = if writer {
                        lock.write(LONG_WAIT)?
                    } else {
                        lock.read(LONG_WAIT)?
                    };
                    enter(&inside, writer);
                    if writer {
                        racy_increment(&mut conn, &counter)?;
                    } else {
                        thread::sleep(Duration::from_millis(1));
                    }
                    leave(&inside, writer);
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a contending thread panicked")?;
    }
    let total: i64 = conn.get(&counter)?;
    check(
        total == i64::from(writers * rounds),
        &format!("{writers} writers x {rounds} increments = {total}, none lost"),
    );
    let overlaps = inside.lock().expect("state").2;
    check(overlaps == 0, "no writer ever shared the lock");
    Ok(())
}

fn reentry_and_no_upgrade(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lock = ReadWriteLock::new(client.clone(), &format!("{prefix}:reentry"));
    let mut conn = client.get_connection()?;
    {
        let _w = lock.write(None)?;
        let _r = lock.read(None)?;
        let _w2 = lock.write(None)?;
        // RWLOCK.INFO: mode, ttl, owners: [owner, o, reads, r, writes, w, leases, [...]].
        let mut count = |at| info_at(&mut conn, "RWLOCK.INFO", lock.name(), &[5, 0, at]);
        check(
            (count(3)?, count(5)?) == (Value::Int(1), Value::Int(2)),
            "write, read, write again: re-entered",
        );
    }
    let exists: bool = conn.exists(lock.name())?;
    check(!exists, "released on dropping the last guard");
    let _r = lock.read(None)?;
    let pttl = refusal(lock.write(None), "a reader cannot upgrade to write")?;
    check(pttl > 0, "a reader cannot upgrade to write (refused)");
    let other = ReadWriteLock::new(client.clone(), lock.name());
    let _shared = other.read(None)?;
    check(true, "another client's reader shares the read lock");
    Ok(())
}

/// A 1 s lease held for 3.5 s: the watchdog keeps it; without one the lease
/// runs out.
fn watchdog(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lease = 1_000;
    let mut conn = client.get_connection()?;
    let bare = format!("{prefix}:no-watchdog");
    let _: Value = redis::cmd("RWLOCK.WRITE")
        .arg(&bare)
        .arg("bare:1")
        .arg(lease)
        .query(&mut conn)?;
    thread::sleep(Duration::from_millis(1_200));
    let exists: bool = conn.exists(&bare)?;
    check(!exists, "without renewal a 1 s lease ends");

    let lock = ReadWriteLock::with_lease(client.clone(), &format!("{prefix}:long-task"), lease);
    let rival = ReadWriteLock::new(client.clone(), lock.name());
    {
        let held = lock.write(None)?;
        thread::sleep(Duration::from_millis(3_500));
        check(!held.lost(), "the watchdog kept the hold for 3.5 leases");
        let still_held = "the lock is still held after 3.5 leases";
        let pttl = refusal(rival.write(None), still_held)?;
        check(
            pttl > 0 && pttl <= lease as i64,
            &format!("{still_held} (PTTL {pttl})"),
        );
    }
    let exists: bool = conn.exists(lock.name())?;
    check(!exists, "released on dropping the guard");
    Ok(())
}

fn parked_waiters(conn: &mut Connection) -> Result<u64, Error> {
    let info: String = redis::cmd("INFO").arg("rwlock").query(conn)?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("rwlock_waiters:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// BLOCK: a waiter is parked on the server and gets the lock when the writer
/// releases it, or gives up when its wait runs out.
fn waiting(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lock = Arc::new(ReadWriteLock::new(
        client.clone(),
        &format!("{prefix}:handoff"),
    ));
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = {
        let lock = Arc::clone(&lock);
        let mut conn = client.get_connection()?;
        thread::spawn(move || -> Result<u64, Error> {
            let _held = lock.write(None)?;
            let _ = held_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(10));
            let deadline = Instant::now() + Duration::from_secs(10);
            while parked_waiters(&mut conn)? == 0 && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            parked_waiters(&mut conn)
        })
    };
    let _ = held_rx.recv_timeout(Duration::from_secs(10));
    let gave_up = matches!(
        lock.read(Some(Duration::from_millis(50))),
        Err(Error::NotAcquired { .. })
    );
    check(gave_up, "a 50 ms wait gives up while the writer holds on");
    let _ = release_tx.send(());
    let _held = lock.read(Some(Duration::from_secs(10)))?;
    let seen = holder.join().expect("holder thread")?;
    check(
        seen == 1,
        "the reader waited on the server until the writer released",
    );
    Ok(())
}

/// The fenced plain lock, taken in turn with `BLOCK`: no increment is lost,
/// and each holder's fencing token is larger than the last holder's.
fn plain_contention(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lock = Arc::new(Lock::fenced(
        client.clone(),
        &format!("{prefix}:plain-lock"),
    ));
    let (counter, mut conn) = fresh_counter(client, prefix, "plain-counter")?;
    let (workers, rounds) = (4, 25);
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<JoinHandle<Result<(), Error>>> = (0..workers)
        .map(|_| {
            let (lock, tokens, counter) = (Arc::clone(&lock), Arc::clone(&tokens), counter.clone());
            let mut conn = client.get_connection()?;
            Ok(thread::spawn(move || {
                for _ in 0..rounds {
                    let held = lock.hold(LONG_WAIT)?;
                    tokens.lock().expect("tokens").push(held.token());
                    racy_increment(&mut conn, &counter)?;
                }
                Ok(())
            }))
        })
        .collect::<Result<_, Error>>()?;
    for t in threads {
        t.join().expect("a worker panicked")?;
    }
    let total: i64 = conn.get(&counter)?;
    check(
        total == workers * rounds,
        &format!(
            "{workers} workers x {rounds} increments under the plain lock = {total}, none lost"
        ),
    );
    let tokens = tokens.lock().expect("tokens");
    check(
        tokens.windows(2).all(|w| w[0] < w[1]) && tokens.len() as i64 == total,
        "each holder's fencing token is larger than the last holder's",
    );
    Ok(())
}

/// Re-entry, another owner refused, the watchdog keeping a 1 s lease for
/// 3.5 s and stopping once the lock is forced open.
fn plain_holds(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let mut conn = client.get_connection()?;
    let lock = Lock::new(client.clone(), &format!("{prefix}:plain-reentry"));
    let held = lock.hold(None)?;
    let again = lock.hold(None)?;
    // LOCK.INFO: holders, [[owner, o, count, c]], ttl, t, token, n.
    let count = info_at(&mut conn, "LOCK.INFO", lock.name(), &[1, 0, 3])?;
    check(
        count == Value::Int(2),
        "the plain lock re-entered (count 2)",
    );
    drop(again);
    let refused = "another owner is refused the plain lock";
    let pttl = refusal(Lock::new(client.clone(), lock.name()).hold(None), refused)?;
    check(pttl > 0, refused);
    drop(held);
    let latches: Vec<String> = conn.keys("redisson_unlock_latch:*")?;
    let exists: bool = conn.exists(lock.name())?;
    check(
        !exists && latches.is_empty(),
        "the plain lock released, no unlock latch left",
    );

    let lease = 1_000;
    let lock = Lock::with_lease(client.clone(), &format!("{prefix}:plain-long-task"), lease);
    let held = lock.hold(None)?;
    thread::sleep(Duration::from_millis(3_500));
    let pttl: i64 = conn.pttl(lock.name())?;
    check(
        !held.lost() && pttl > 0 && pttl <= lease as i64,
        &format!("the watchdog kept the plain lock for 3.5 leases (PTTL {pttl})"),
    );
    let _: i64 = redis::cmd("LOCK.FORCEUNLOCK")
        .arg(lock.name())
        .query(&mut conn)?;
    thread::sleep(Duration::from_millis(2 * lease / 3));
    check(
        held.lost(),
        "the watchdog stopped when the lock was forced open",
    );
    Ok(())
}

fn main() {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6399/".to_string());
    let prefix = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "example".to_string());
    let client = match redis::Client::open(url.as_str()) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("bad url {url}: {e}");
            std::process::exit(2);
        }
    };
    let run = || -> Result<(), Error> {
        contention(&client, &prefix)?;
        reentry_and_no_upgrade(&client, &prefix)?;
        watchdog(&client, &prefix)?;
        waiting(&client, &prefix)?;
        plain_contention(&client, &prefix)?;
        plain_holds(&client, &prefix)
    };
    match run() {
        Ok(()) => println!("all checks passed"),
        Err(e) => {
            println!("FAILED: {e}");
            std::process::exit(1);
        }
    }
}

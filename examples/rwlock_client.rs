//! A Redisson-compatible read-write lock for Rust, on the rwlock module,
//! with the `redis` crate.
//!
//! ```text
//! let lock = ReadWriteLock::new(redis::Client::open("redis://127.0.0.1:6399/")?, "orders");
//! {
//!     let _held = lock.write(Some(Duration::from_secs(5)))?;
//!     // no other reader or writer, in this process or any other
//! } // released here
//! ```
//!
//! A hold belongs to Redisson's kind of owner, `<client UUID>:<thread id>`,
//! so a thread re-enters its own holds and a Java service on Redisson sharing
//! the lock sees an ordinary holder. While a guard lives, a watchdog thread
//! renews the hold every lease/3 with `RWLOCK.RENEW`, as Redisson's watchdog
//! does; waiting is done by the server (`BLOCK`), not by polling.
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

struct ReadWriteLock {
    client: redis::Client,
    name: String,
    lease_ms: u64,
    client_id: String,
}

impl ReadWriteLock {
    fn new(client: redis::Client, name: &str) -> Self {
        Self::with_lease(client, name, 30_000)
    }

    fn with_lease(client: redis::Client, name: &str, lease_ms: u64) -> Self {
        ReadWriteLock {
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

    /// A read hold until the guard drops. `wait`: how long the server may
    /// park the call (zero: without limit); None fails at once if a writer
    /// holds the lock.
    fn read(&self, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        self.acquire("READ", wait)
    }

    /// The write hold until the guard drops (see `read`).
    fn write(&self, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        self.acquire("WRITE", wait)
    }

    fn acquire(&self, mode: &'static str, wait: Option<Duration>) -> Result<Guard<'_>, Error> {
        let owner = self.owner();
        let mut conn = self.client.get_connection()?;
        let mut cmd = redis::cmd(&format!("RWLOCK.{mode}"));
        cmd.arg(&self.name).arg(&owner).arg(self.lease_ms);
        if let Some(wait) = wait {
            cmd.arg("BLOCK").arg(wait.as_millis() as u64);
        }
        match cmd.query::<Option<i64>>(&mut conn)? {
            None => {}
            Some(pttl) => return Err(Error::NotAcquired { pttl }),
        }
        let watchdog = Watchdog::start(self, &owner)?;
        Ok(Guard {
            lock: self,
            owner,
            mode,
            conn,
            watchdog: Some(watchdog),
        })
    }
}

/// Renews one hold every lease/3 until stopped or the lock is gone.
struct Watchdog {
    stop: Sender<()>,
    thread: JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(lock: &ReadWriteLock, owner: &str) -> Result<Self, Error> {
        let mut conn = lock.client.get_connection()?;
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let (name, owner, lease) = (lock.name.clone(), owner.to_string(), lock.lease_ms);
        let flag = Arc::clone(&lost);
        let thread = thread::spawn(move || {
            let period = Duration::from_millis(lease / 3);
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                let held: redis::RedisResult<i64> = redis::cmd("RWLOCK.RENEW")
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

struct Guard<'a> {
    lock: &'a ReadWriteLock,
    owner: String,
    mode: &'static str,
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
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.watchdog.take() {
            let _ = w.stop.send(());
            let _ = w.thread.join();
        }
        // Nothing to do if this fails: the lease ends the hold anyway.
        let _: redis::RedisResult<Value> = redis::cmd("RWLOCK.UNLOCK")
            .arg(&self.lock.name)
            .arg(&self.owner)
            .arg(self.mode)
            .query(&mut self.conn);
    }
}

// --- The demonstration ------------------------------------------------------

fn check(ok: bool, what: &str) {
    if !ok {
        println!("FAILED: {what}");
        std::process::exit(1);
    }
    println!("ok: {what}");
}

const LONG_WAIT: Option<Duration> = Some(Duration::from_secs(30));

/// Writers increment a counter with a read-sleep-write race window, readers
/// look in: no increment is lost and no reader ever overlaps a writer.
fn contention(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lock = Arc::new(ReadWriteLock::new(
        client.clone(),
        &format!("{prefix}:counter-lock"),
    ));
    let counter = format!("{prefix}:counter");
    let mut conn = client.get_connection()?;
    let _: () = conn.del(&counter)?;
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
                        let value: Option<i64> = conn.get(&counter)?;
                        thread::sleep(Duration::from_millis(1));
                        let _: () = conn.set(&counter, value.unwrap_or(0) + 1)?;
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
        let info: Value = redis::cmd("RWLOCK.INFO").arg(&lock.name).query(&mut conn)?;
        let counts = match &info {
            Value::Array(top) => match top.get(5) {
                Some(Value::Array(owners)) => match owners.first() {
                    Some(Value::Array(o)) => Some((o[3].clone(), o[5].clone())),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        check(
            counts == Some((Value::Int(1), Value::Int(2))),
            "write, read, write again: re-entered",
        );
    }
    let exists: bool = conn.exists(&lock.name)?;
    check(!exists, "released on dropping the last guard");
    let _r = lock.read(None)?;
    match lock.write(None) {
        Err(Error::NotAcquired { pttl }) => {
            check(pttl > 0, "a reader cannot upgrade to write (refused)")
        }
        Ok(_) => check(false, "a reader cannot upgrade to write"),
        Err(e) => return Err(e),
    }
    let other = ReadWriteLock::new(client.clone(), &lock.name);
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
    let rival = ReadWriteLock::new(client.clone(), &lock.name);
    {
        let held = lock.write(None)?;
        thread::sleep(Duration::from_millis(3_500));
        check(!held.lost(), "the watchdog kept the hold for 3.5 leases");
        match rival.write(None) {
            Err(Error::NotAcquired { pttl }) => check(
                pttl > 0 && pttl <= lease as i64,
                &format!("the lock is still held after 3.5 leases (PTTL {pttl})"),
            ),
            Ok(_) => check(false, "the lock is still held after 3.5 leases"),
            Err(e) => return Err(e),
        }
    }
    let exists: bool = conn.exists(&lock.name)?;
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
        waiting(&client, &prefix)
    };
    match run() {
        Ok(()) => println!("all checks passed"),
        Err(e) => {
            println!("FAILED: {e}");
            std::process::exit(1);
        }
    }
}

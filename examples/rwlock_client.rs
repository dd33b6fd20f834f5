//! Redisson-compatible locks for Rust with the `rwlock-client` crate
//! (clients/rust): the read-write lock (`RReadWriteLock`) and the plain
//! lock (`RLock`, `RFencedLock`), taken as guards that release on drop.
//!
//! ```text
//! let locks = Client::new(redis::Client::open("redis://127.0.0.1:6399/")?);
//! {
//!     let _held = locks.read_write_lock("orders").try_write(Duration::from_secs(5))?;
//!     // no other reader or writer, in this process or any other
//! } // released here
//! let held = locks.fenced_lock("invoice:42").try_acquire(Duration::from_secs(5))?;
//! storage.write(data, held.token()); // the storage refuses older tokens
//! ```
//!
//! Owners are Redisson's `<client UUID>:<thread id>`, a watchdog renews
//! each hold every lease/3, and waiting is done by the server (`BLOCK`):
//! see the crate's README. Run this against a server with the module to
//! watch it work; it checks what it shows and exits non-zero if anything is
//! off:
//!
//! ```text
//! cargo run --release --example rwlock_client -- redis://127.0.0.1:6399/
//! ```

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use redis::{Commands, Connection, Value};
use rwlock_client::{Client, Error, Options};

/// Redisson's default lease, renewed by the watchdog.
const LEASE_MS: u64 = 30_000;

/// The locks of a new client (a UUID of its own) whose watchdog renews
/// `lease_ms` leases.
fn client_locks(client: &redis::Client, lease_ms: u64) -> Client {
    Client::new(client.clone()).with_options(Options {
        watchdog_timeout: Duration::from_millis(lease_ms),
        ..Options::default()
    })
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

const LONG_WAIT: Duration = Duration::from_secs(30);

/// Writers increment a counter with a read-sleep-write race window, readers
/// look in: no increment is lost and no reader ever overlaps a writer.
fn contention(client: &redis::Client, prefix: &str) -> Result<(), Error> {
    let lock = client_locks(client, LEASE_MS).read_write_lock(&format!("{prefix}:counter-lock"));
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
                        lock.try_write(LONG_WAIT)?
                    } else {
                        lock.try_read(LONG_WAIT)?
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
    let lock = client_locks(client, LEASE_MS).read_write_lock(&format!("{prefix}:reentry"));
    let mut conn = client.get_connection()?;
    {
        let _w = lock.try_write(Duration::ZERO)?;
        let _r = lock.try_read(Duration::ZERO)?;
        let _w2 = lock.try_write(Duration::ZERO)?;
        // RWLOCK.INFO: mode, ttl, owners: [owner, o, reads, r, writes, w, leases, [...]].
        let mut count = |at| info_at(&mut conn, "RWLOCK.INFO", lock.name(), &[5, 0, at]);
        check(
            (count(3)?, count(5)?) == (Value::Int(1), Value::Int(2)),
            "write, read, write again: re-entered",
        );
    }
    let exists: bool = conn.exists(lock.name())?;
    check(!exists, "released on dropping the last guard");
    let _r = lock.try_read(Duration::ZERO)?;
    let pttl = refusal(
        lock.try_write(Duration::ZERO),
        "a reader cannot upgrade to write",
    )?;
    check(pttl > 0, "a reader cannot upgrade to write (refused)");
    let other = client_locks(client, LEASE_MS).read_write_lock(lock.name());
    let _shared = other.try_read(Duration::ZERO)?;
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

    let lock = client_locks(client, lease).read_write_lock(&format!("{prefix}:long-task"));
    let rival = client_locks(client, LEASE_MS).read_write_lock(lock.name());
    {
        let held = lock.try_write(Duration::ZERO)?;
        thread::sleep(Duration::from_millis(3_500));
        check(!held.is_lost(), "the watchdog kept the hold for 3.5 leases");
        let still_held = "the lock is still held after 3.5 leases";
        let pttl = refusal(rival.try_write(Duration::ZERO), still_held)?;
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
    let lock =
        Arc::new(client_locks(client, LEASE_MS).read_write_lock(&format!("{prefix}:handoff")));
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = {
        let lock = Arc::clone(&lock);
        let mut conn = client.get_connection()?;
        thread::spawn(move || -> Result<u64, Error> {
            let _held = lock.try_write(Duration::ZERO)?;
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
        lock.try_read(Duration::from_millis(50)),
        Err(Error::NotAcquired { .. })
    );
    check(gave_up, "a 50 ms wait gives up while the writer holds on");
    let _ = release_tx.send(());
    let _held = lock.try_read(Duration::from_secs(10))?;
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
    let lock =
        Arc::new(client_locks(client, LEASE_MS).fenced_lock(&format!("{prefix}:plain-lock")));
    let (counter, mut conn) = fresh_counter(client, prefix, "plain-counter")?;
    let (workers, rounds) = (4, 25);
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<JoinHandle<Result<(), Error>>> = (0..workers)
        .map(|_| {
            let (lock, tokens, counter) = (Arc::clone(&lock), Arc::clone(&tokens), counter.clone());
            let mut conn = client.get_connection()?;
            Ok(thread::spawn(move || {
                for _ in 0..rounds {
                    let held = lock.try_acquire(LONG_WAIT)?;
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
    let lock = client_locks(client, LEASE_MS).lock(&format!("{prefix}:plain-reentry"));
    let held = lock.try_acquire(Duration::ZERO)?;
    let again = lock.try_acquire(Duration::ZERO)?;
    // LOCK.INFO: holders, [[owner, o, count, c]], ttl, t, token, n.
    let count = info_at(&mut conn, "LOCK.INFO", lock.name(), &[1, 0, 3])?;
    check(
        count == Value::Int(2),
        "the plain lock re-entered (count 2)",
    );
    drop(again);
    let refused = "another owner is refused the plain lock";
    let pttl = refusal(
        client_locks(client, LEASE_MS)
            .lock(lock.name())
            .try_acquire(Duration::ZERO),
        refused,
    )?;
    check(pttl > 0, refused);
    drop(held);
    // This lock's unlock latches (Redisson's prefix: the name in braces).
    let latches: Vec<String> = conn.keys(format!("redisson_unlock_latch:{{{}}}:*", lock.name()))?;
    let exists: bool = conn.exists(lock.name())?;
    // A release sends `HELD` and writes no latch (docs/design.md §14.8).
    check(
        !exists && latches.is_empty(),
        "the plain lock released, no latch left",
    );

    let lease = 1_000;
    let lock = client_locks(client, lease).lock(&format!("{prefix}:plain-long-task"));
    let held = lock.try_acquire(Duration::ZERO)?;
    thread::sleep(Duration::from_millis(3_500));
    let pttl: i64 = conn.pttl(lock.name())?;
    check(
        !held.is_lost() && pttl > 0 && pttl <= lease as i64,
        &format!("the watchdog kept the plain lock for 3.5 leases (PTTL {pttl})"),
    );
    let _: i64 = redis::cmd("LOCK.FORCEUNLOCK")
        .arg(lock.name())
        .query(&mut conn)?;
    thread::sleep(Duration::from_millis(2 * lease / 3));
    check(
        held.is_lost(),
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

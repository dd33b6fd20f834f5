//! The blocking client against a real server with the module: every lock
//! kind, re-entry and exclusion, fencing tokens, waits on the server longer
//! than the response timeout, the watchdog keeping a 1 s lease and finding
//! the hold gone, and a fixed lease ending without it.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{Client, Error, Options};
use testkit::{all_keys, query, rwlock_counter, wait_until, Server};

fn locks(server: &Server, options: Options) -> Client {
    let client = redis::Client::open(server.url()).expect("url");
    Client::new(client).with_options(options)
}

fn refused<T: std::fmt::Debug>(attempt: Result<T, Error>) -> i64 {
    match attempt {
        Err(Error::NotAcquired { pttl }) => pttl,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn read_write_lock_readers_share_writers_exclude_and_reenter() {
    let (server, mut conn) = Server::started(&[]);
    let a = locks(&server, Options::default());
    let b = locks(&server, Options::default());
    let lock = a.read_write_lock("orders");
    let other = b.read_write_lock("orders");

    let read = lock.read().expect("read");
    let shared = other.try_read(Duration::ZERO).expect("a second reader");
    assert!(
        refused(other.try_write(Duration::ZERO)) > 0,
        "readers exclude a writer"
    );
    drop(shared);
    assert!(
        refused(lock.try_write(Duration::ZERO)) > 0,
        "a reader cannot upgrade"
    );
    drop(read);
    assert!(all_keys(&mut conn).is_empty(), "released on drop");

    let write = lock.write().expect("write");
    let reentered = lock.try_read(Duration::ZERO).expect("the writer may read");
    let again = lock
        .try_write(Duration::ZERO)
        .expect("the writer re-enters");
    assert!(
        refused(other.try_read(Duration::ZERO)) > 0,
        "a writer excludes readers"
    );
    drop(again);
    drop(reentered);
    write.release().expect("the last hold released");
    assert!(all_keys(&mut conn).is_empty());
}

#[test]
fn fenced_write_and_fenced_lock_tokens_grow() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, Options::default());
    let rw = locks.read_write_lock("doc").fenced();
    let first = rw.write().expect("fenced write").token().expect("token");
    let second = rw.write().expect("fenced write").token().expect("token");
    assert!(second > first, "{second} > {first}");
    assert_eq!(
        rw.read().expect("read").token(),
        None,
        "reads take no token"
    );

    let fenced = locks.fenced_lock("invoice");
    let mut last = 0;
    for _ in 0..3 {
        let held = fenced.acquire().expect("fenced lock");
        let token = held.token().expect("token");
        assert!(token > last, "{token} > {last}");
        last = token;
    }
    assert_eq!(locks.lock("plain").acquire().expect("lock").token(), None);
    let token: i64 = query(&mut conn, &["GET", "redisson_lock_token:{invoice}"]);
    assert_eq!(token, last, "the server's counter is the last token");
}

#[test]
fn plain_lock_reenters_excludes_and_can_refuse_reentry() {
    let (server, mut conn) = Server::started(&[]);
    let a = locks(&server, Options::default());
    let b = locks(&server, Options::default());
    let lock = a.lock("job");
    let held = lock.acquire().expect("lock");
    let again = lock.try_acquire(Duration::ZERO).expect("re-entry");
    // Redisson's owner: <client UUID>:<thread id>.
    let (id, thread) = held.owner().rsplit_once(':').expect("owner");
    assert_eq!(id, a.client_id());
    assert_eq!((id.len(), id.matches('-').count()), (36, 4), "a UUID: {id}");
    assert!(thread.parse::<u64>().is_ok(), "a thread number: {thread}");
    let pttl = refused(b.lock("job").try_acquire(Duration::ZERO));
    assert!(
        pttl > 25_000 && pttl <= 30_000,
        "the watchdog's lease: {pttl}"
    );
    drop(again);
    assert!(
        refused(b.lock("job").try_acquire(Duration::ZERO)) > 0,
        "still held once"
    );
    drop(held);
    // Acquisitions and releases say the owner's count (HELD): no latch.
    assert!(all_keys(&mut conn).is_empty(), "released, nothing left");

    let strict = a.lock("strict").non_reentrant();
    let _held = strict.acquire().expect("lock");
    match strict.try_acquire(Duration::ZERO) {
        Err(Error::NotReentrant) => {}
        other => panic!("a non-reentrant lock taken again: {other:?}"),
    }
    let other_thread = {
        let strict = strict.clone();
        thread::spawn(move || strict.try_acquire(Duration::ZERO).map(|_| ()))
    };
    let other = other_thread.join().expect("thread");
    assert!(matches!(other, Err(Error::NotAcquired { .. })), "{other:?}");
    assert!(matches!(
        a.lock("").acquire(),
        Err(Error::InvalidArgument(_))
    ));

    // An owner of the caller's choosing, as a Java service's would be.
    let java = a
        .lock("shared")
        .with_owner("6f1c2b4e-0000-4000-8000-000000000001:42");
    let _held = java.acquire().expect("lock");
    let info: redis::Value = query(&mut conn, &["LOCK.INFO", "shared"]);
    assert!(
        format!("{info:?}").contains("6f1c2b4e-0000-4000-8000-000000000001:42"),
        "{info:?}"
    );
}

#[test]
fn threads_are_owners_and_exclude_each_other() {
    let server = Server::start(&[]);
    let locks = locks(&server, Options::default());
    let lock = locks.lock("counter-lock");
    let mut conn = server.conn();
    let _: () = redis::cmd("SET")
        .arg("counter")
        .arg(0)
        .query(&mut conn)
        .expect("SET");
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (lock, client) = (lock.clone(), server.client());
            thread::spawn(move || {
                let mut conn = client.get_connection().expect("conn");
                for _ in 0..10 {
                    let _held = lock.acquire().expect("lock");
                    let v: i64 = redis::cmd("GET")
                        .arg("counter")
                        .query(&mut conn)
                        .expect("GET");
                    thread::sleep(Duration::from_millis(1));
                    let _: () = redis::cmd("SET")
                        .arg("counter")
                        .arg(v + 1)
                        .query(&mut conn)
                        .expect("SET");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let total: i64 = query(&mut conn, &["GET", "counter"]);
    assert_eq!(total, 40, "no increment lost");
    assert!(
        rwlock_counter(&mut conn, "waits_served") >= 1,
        "waited with BLOCK"
    );
}

#[test]
fn a_wait_on_the_server_longer_than_the_response_timeout_works() {
    let server = Server::start(&[]);
    let options = Options {
        response_timeout: Some(Duration::from_millis(500)),
        ..Options::default()
    };
    let holder = locks(&server, options.clone());
    let waiter = locks(&server, options);
    for (kind, held) in [
        ("lock", holder.lock("slow").acquire().expect("lock")),
        (
            "write",
            holder.read_write_lock("slow-rw").write().expect("write"),
        ),
    ] {
        let (tx, rx) = mpsc::channel();
        let release = thread::spawn(move || {
            let _ = rx.recv();
            thread::sleep(Duration::from_millis(1_500));
            drop(held);
        });
        let _ = tx.send(());
        let start = Instant::now();
        // Served at the release, 1.5 s on; a wait of 5 s leaves a loaded
        // machine room to be late with it.
        let taken = if kind == "lock" {
            waiter.lock("slow").try_acquire(Duration::from_secs(5))
        } else {
            waiter
                .read_write_lock("slow-rw")
                .try_read(Duration::from_secs(5))
        };
        let waited = start.elapsed();
        release.join().expect("releaser");
        assert!(taken.is_ok(), "{kind}: {taken:?}");
        assert!(
            waited >= Duration::from_millis(1_300),
            "{kind}: waited {waited:?}"
        );
    }
    // A wait without limit (BLOCK 0) has no timeout either.
    let held = holder.lock("forever").acquire().expect("lock");
    let release = thread::spawn(move || {
        thread::sleep(Duration::from_millis(1_200));
        drop(held);
    });
    let start = Instant::now();
    waiter
        .lock("forever")
        .acquire()
        .expect("waited without limit");
    assert!(start.elapsed() >= Duration::from_millis(1_000));
    release.join().expect("releaser");
    // And a wait that runs out is a refusal, not a timeout.
    let _held = holder.lock("busy").acquire().expect("lock");
    let start = Instant::now();
    let pttl = refused(waiter.lock("busy").try_acquire(Duration::from_millis(800)));
    assert!(pttl > 0 && start.elapsed() >= Duration::from_millis(750));
}

/// A watchdog lease of 1 s, renewed every third of a second.
fn one_second_watchdog() -> Options {
    Options {
        watchdog_timeout: Duration::from_secs(1),
        ..Options::default()
    }
}

#[test]
fn the_watchdog_keeps_a_one_second_lease_for_three_and_a_half() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, one_second_watchdog());
    let plain = locks.lock("long-task").acquire().expect("lock");
    let write = locks.read_write_lock("long-rw").write().expect("write");
    let multi_free = locks.read_write_lock("long-read").read().expect("read");
    thread::sleep(Duration::from_millis(3_500));
    for name in ["long-task", "long-rw", "long-read"] {
        let pttl: i64 = query(&mut conn, &["PTTL", name]);
        assert!(pttl > 0 && pttl <= 1_000, "{name} still held: PTTL {pttl}");
    }
    assert!(!plain.is_lost() && !write.is_lost() && !multi_free.is_lost());
    assert!(
        rwlock_counter(&mut conn, "renewals") >= 15,
        "about 10 renewals each"
    );
    drop((plain, write, multi_free));
    assert!(all_keys(&mut conn).is_empty());
}

#[test]
fn the_watchdog_finds_the_hold_gone() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, one_second_watchdog());
    let (told, lost) = mpsc::channel();
    let forced = locks
        .lock("forced")
        .on_lost(move |hold| told.send(hold.clone()).expect("the test listens"))
        .acquire()
        .expect("lock");
    let deleted = locks.read_write_lock("deleted").write().expect("write");
    assert!(!forced.is_lost() && !deleted.is_lost());
    let _: i64 = query(&mut conn, &["LOCK.FORCEUNLOCK", "forced"]);
    let _: i64 = query(&mut conn, &["DEL", "deleted"]);
    // Replaced by a value of another type: the renewal's error reply.
    let replaced = locks.lock("replaced").acquire().expect("lock");
    let _: () = query(&mut conn, &["SET", "replaced", "x"]);
    // A renewal every 333 ms: the next one finds each hold gone (later on a
    // loaded machine).
    wait_until(Duration::from_secs(10), "every hold found gone", || {
        (forced.is_lost() && deleted.is_lost() && replaced.is_lost()).then_some(())
    });
    assert!(forced.is_lost(), "forced open");
    let hold = lost.try_recv().expect("on_lost called");
    assert_eq!(
        (hold.names, hold.owner.as_str()),
        (vec!["forced".to_string()], forced.owner())
    );
    assert!(lost.try_recv().is_err(), "called once");
    // The client forgot its count of the lost hold: the owner's next
    // acquisition says 0 held (HELD 0), so its release frees the lock. Had
    // it said 1, the release (HELD 2, the server finding 1) would have been
    // answered as a resend of one that ran, leaving the lock held.
    let again = locks.lock("forced").acquire().expect("again");
    again.release().expect("released");
    let exists: i64 = query(&mut conn, &["EXISTS", "forced"]);
    assert_eq!(exists, 0, "free");
    assert!(deleted.is_lost(), "deleted");
    assert!(replaced.is_lost(), "replaced");
    drop(replaced);
    let renewals = rwlock_counter(&mut conn, "renewals");
    thread::sleep(Duration::from_millis(800));
    assert_eq!(
        rwlock_counter(&mut conn, "renewals"),
        renewals,
        "the watchdogs stopped"
    );
    assert!(
        matches!(forced.release(), Err(Error::NotHeld)),
        "nothing left to release"
    );
}

#[test]
fn a_fixed_lease_has_no_watchdog() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, Options::default());
    let held = locks
        .lock("leased")
        .with_lease(Duration::from_millis(600))
        .acquire()
        .expect("lock");
    let pttl: i64 = query(&mut conn, &["PTTL", "leased"]);
    assert!(pttl > 0 && pttl <= 600, "{pttl}");
    thread::sleep(Duration::from_millis(900));
    let left = all_keys(&mut conn);
    assert!(left.is_empty(), "the lease ended the hold: {left:?}");
    assert!(!held.is_lost(), "nothing watched it");
    assert_eq!(rwlock_counter(&mut conn, "renewals"), 0);
    assert!(
        matches!(held.release(), Err(Error::NotHeld)),
        "the lease ended it"
    );
}

#[test]
fn a_release_of_a_reentered_hold_rearms_the_lease_it_was_taken_with() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(
        &server,
        Options {
            watchdog_timeout: Duration::from_secs(5),
            ..Options::default()
        },
    );
    let plain = locks.lock("rearmed");
    let rw = locks.read_write_lock("rearmed-rw");
    let outer = (plain.acquire().expect("lock"), rw.write().expect("write"));
    drop((
        plain.acquire().expect("re-entry"),
        rw.write().expect("re-entry"),
    ));
    for key in ["rearmed", "rearmed-rw"] {
        let pttl: i64 = query(&mut conn, &["PTTL", key]);
        // Not the module's default lease (30 s): Redisson re-arms its own.
        assert!(pttl > 4_000 && pttl <= 5_000, "{key}: PTTL {pttl}");
    }
    drop(outer);
    assert!(all_keys(&mut conn).is_empty());
}

#[test]
fn a_client_id_can_be_set_and_an_empty_one_is_refused() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, Options::default())
        .with_client_id("3f8b6a2e-1111-4222-8333-944445555666")
        .expect("a client id");
    assert_eq!(locks.client_id(), "3f8b6a2e-1111-4222-8333-944445555666");
    let lock = locks.lock("named");
    assert!(lock
        .owner()
        .starts_with("3f8b6a2e-1111-4222-8333-944445555666:"));
    let _held = lock.acquire().expect("lock");
    let count: String = query(&mut conn, &["HGET", "named", lock.owner().as_str()]);
    assert_eq!(count, "1");
    let empty = locks.with_client_id("");
    assert!(matches!(empty, Err(Error::InvalidArgument(_))));
}

#[test]
fn a_lock_asks_the_server_whether_it_holds_and_unlocks_without_a_guard() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, Options::default());
    let lease = Duration::from_secs(10);
    let rw = locks.read_write_lock("asked-rw").with_lease(lease);
    // Guards out of reach (forgotten): the lock's own releases free them.
    std::mem::forget(rw.write().expect("write"));
    std::mem::forget(rw.try_read(Duration::ZERO).expect("the writer reads"));
    assert!(rw.is_write_held().expect("is_write_held"));
    assert!(rw.is_read_held().expect("is_read_held"));
    rw.unlock_write().expect("unlock_write");
    assert!(!rw.is_write_held().expect("is_write_held"));
    rw.unlock_read().expect("unlock_read");
    assert!(matches!(rw.unlock_read(), Err(Error::NotHeld)));

    let multi = locks.multi_lock().lock("m-a").read("m-b").with_lease(lease);
    std::mem::forget(multi.acquire().expect("both"));
    assert!(multi.is_held().expect("is_held"));
    multi.unlock().expect("unlock");
    assert!(!multi.is_held().expect("is_held"));
    assert!(matches!(multi.unlock(), Err(Error::NotHeld)));
    // Acquisitions and releases say the owner's count (HELD): no latch.
    let left = all_keys(&mut conn);
    assert!(left.is_empty(), "nothing left: {left:?}");
}

/// Two lock objects on one name used by one thread share its owner: their
/// holds are counted together (the count each acquisition and release
/// says is the server's), so the inner release leaves the lock held and
/// the outer one frees it.
#[test]
fn two_lock_objects_of_one_thread_count_together() {
    let (server, mut conn) = Server::started(&[]);
    let locks = locks(&server, Options::default());
    let (a, b) = (locks.lock("shared"), locks.lock("shared"));
    let (rw_a, rw_b) = (
        locks.read_write_lock("shared-rw"),
        locks.read_write_lock("shared-rw"),
    );
    let outer = a.acquire().expect("a");
    let inner = b.acquire().expect("b re-enters");
    let (read_outer, read_inner) = (rw_a.read().expect("read a"), rw_b.read().expect("read b"));
    let owner = a.owner();
    let field = |conn: &mut testkit::Conn, key: &str| -> Option<String> {
        query(conn, &["HGET", key, owner.as_str()])
    };
    assert_eq!(field(&mut conn, "shared").as_deref(), Some("2"));
    assert_eq!(field(&mut conn, "shared-rw").as_deref(), Some("2"));
    inner.release().expect("b");
    read_inner.release().expect("read b");
    assert_eq!(
        field(&mut conn, "shared").as_deref(),
        Some("1"),
        "still held"
    );
    assert_eq!(field(&mut conn, "shared-rw").as_deref(), Some("1"));
    assert!(b.is_held().expect("is_held"), "by the thread's owner");
    outer.release().expect("a");
    read_outer.release().expect("read a");
    assert!(all_keys(&mut conn).is_empty(), "free");
}

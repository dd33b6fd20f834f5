//! Lost replies (issues 26, 35): a single lock's acquisition and release
//! say the owner's count (`HELD n`), and a reply lost in flight (a real
//! fault: `DropReplyProxy` forwards the command, reads its reply and closes
//! the connection instead of delivering it) is sent again once, the same,
//! on a new connection: the server tells from the lock's hash that the
//! first send ran, so a grant is counted once (with the first grant's
//! fencing token) and a re-entered hold's release frees one level. No
//! latch is written. A last release's resend finding nothing held is
//! `ReleaseUnknown` (it freed the lock, or the hold was gone before it). A
//! session's acquisition is resent plain. The semaphores keep their
//! request ids and latches; a count-down and a permit release are never
//! resent.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rwlock_client::{aio, Client, Error, Guard, Options};
use testkit::{all_keys, command_calls, query, wait_for_waiters, Server};

/// A TCP proxy that loses one reply: every byte is forwarded both ways,
/// except that once the client sent a chunk containing `trigger` (a
/// command's name), the server's next reply is read and both connections
/// closed instead of delivering it. The command ran; the client never hears
/// of it.
struct DropReplyProxy {
    port: u16,
    swallowed: Arc<Mutex<Vec<Vec<u8>>>>,
    armed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl DropReplyProxy {
    fn start(server_port: u16, trigger: &'static [u8]) -> DropReplyProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        // accept() polls, to see the proxy stopped.
        listener.set_nonblocking(true).expect("nonblocking");
        let swallowed = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let armed = Arc::new(AtomicBool::new(true));
        let (lost, stopped, arming) = (
            Arc::clone(&swallowed),
            Arc::clone(&stop),
            Arc::clone(&armed),
        );
        let accept = thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).expect("blocking");
                        let upstream =
                            TcpStream::connect(("127.0.0.1", server_port)).expect("upstream");
                        relay(client, upstream, trigger, &arming, &lost);
                    }
                    Err(_) => thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        DropReplyProxy {
            port,
            swallowed,
            armed,
            stop,
            accept: Some(accept),
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn swallowed(&self) -> Vec<Vec<u8>> {
        self.swallowed.lock().expect("swallowed").clone()
    }

    /// Loses the reply after the next chunk holding the trigger too (the
    /// proxy starts armed, and each loss disarms it).
    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }
}

impl Drop for DropReplyProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Two threads: client → server, which arms the swallowing before it
/// forwards the trigger, and server → client, which swallows the reply that
/// follows and closes both sides (the server's first, so the server has
/// seen the close before the client can reconnect).
fn relay(
    client: TcpStream,
    upstream: TcpStream,
    trigger: &'static [u8],
    armed: &Arc<AtomicBool>,
    swallowed: &Arc<Mutex<Vec<Vec<u8>>>>,
) {
    let swallow = Arc::new(AtomicBool::new(false));
    let (mut from_client, mut to_server) = (
        client.try_clone().expect("clone"),
        upstream.try_clone().expect("clone"),
    );
    let (armed, arm) = (Arc::clone(armed), Arc::clone(&swallow));
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let data = &buf[..n];
            if data.windows(trigger.len()).any(|w| w == trigger)
                && armed.swap(false, Ordering::SeqCst)
            {
                arm.store(true, Ordering::SeqCst);
            }
            if to_server.write_all(data).is_err() {
                break;
            }
        }
        let _ = to_server.shutdown(Shutdown::Both);
    });
    let (mut from_server, mut to_client) = (upstream, client);
    let swallowed = Arc::clone(swallowed);
    thread::spawn(move || {
        let mut buf = [0u8; 65536];
        loop {
            let n = match from_server.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if swallow.load(Ordering::SeqCst) {
                swallowed.lock().expect("swallowed").push(buf[..n].to_vec());
                break;
            }
            if to_client.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = from_server.shutdown(Shutdown::Both);
        let _ = to_client.shutdown(Shutdown::Both);
    });
}

fn keys(conn: &mut testkit::Conn, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = query(conn, &["KEYS", pattern]);
    keys.sort();
    keys
}

/// No latch of any kind (a request's or a release's) on the server.
fn assert_no_latch(conn: &mut testkit::Conn, what: &str) {
    let latches = keys(conn, "redisson_*latch:*");
    assert!(latches.is_empty(), "{what}: {latches:?}");
}

/// Nothing left of the lock `name` (nor of the locks before it) but
/// fenced locks' counters (which stay, as Redisson's do).
fn assert_free(conn: &mut testkit::Conn, name: &str, what: &str) {
    let left: Vec<String> = all_keys(conn)
        .into_iter()
        .filter(|k| !k.starts_with("redisson_lock_token:"))
        .collect();
    assert!(left.is_empty(), "{what} ({name}): nothing left: {left:?}");
}

/// The token of a swallowed `[-1, token]` reply.
fn swallowed_token(reply: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(reply);
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(&lines[..2], &["*2", ":-1"], "{text}");
    lines[2][1..].parse().expect("token")
}

/// A lock kind, taken through `locks`, and the hash field its owner's count
/// is in.
#[derive(Clone, Copy, Debug)]
enum KindOf {
    Plain,
    Fenced,
    NonReentrant,
    Read,
    Write,
    Fair,
}

const KINDS: [KindOf; 6] = [
    KindOf::Plain,
    KindOf::Fenced,
    KindOf::NonReentrant,
    KindOf::Read,
    KindOf::Write,
    KindOf::Fair,
];

impl KindOf {
    fn command(self) -> &'static [u8] {
        match self {
            KindOf::Plain | KindOf::Fenced | KindOf::NonReentrant => b"LOCK.ACQUIRE",
            KindOf::Read => b"RWLOCK.READ",
            KindOf::Write => b"RWLOCK.WRITE",
            KindOf::Fair => b"FAIRLOCK.ACQUIRE",
        }
    }

    fn fenced(self) -> bool {
        matches!(self, KindOf::Fenced | KindOf::Write)
    }

    /// The release's command.
    fn unlock(self) -> &'static [u8] {
        match self {
            KindOf::Read | KindOf::Write => b"RWLOCK.UNLOCK",
            KindOf::Fair => b"FAIRLOCK.UNLOCK",
            _ => b"LOCK.UNLOCK",
        }
    }

    /// Acquires `name` (waiting at most `wait`): the guard and the hash
    /// field of its owner's count.
    fn acquire(self, locks: &Client, name: &str, wait: Duration) -> (Guard, String) {
        let lease = Duration::from_secs(10);
        match self {
            KindOf::Plain | KindOf::Fenced | KindOf::NonReentrant | KindOf::Fair => {
                let lock = match self {
                    KindOf::Fenced => locks.fenced_lock(name),
                    KindOf::Fair => locks.fair_lock(name),
                    KindOf::NonReentrant => locks.lock(name).non_reentrant(),
                    _ => locks.lock(name),
                }
                .with_lease(lease);
                (lock.try_acquire(wait).expect("acquired"), lock.owner())
            }
            KindOf::Read => {
                let rw = locks.read_write_lock(name).with_lease(lease);
                (rw.try_read(wait).expect("read"), rw.owner())
            }
            KindOf::Write => {
                let rw = locks.read_write_lock(name).fenced().with_lease(lease);
                (
                    rw.try_write(wait).expect("write"),
                    format!("{}:write", rw.owner()),
                )
            }
        }
    }
}

fn locks_on(url: &str) -> Client {
    Client::new(redis::Client::open(url).expect("url")).with_options(Options::default())
}

#[test]
fn a_lost_reply_is_resent_with_its_count_and_holds_once_for_each_kind() {
    let (server, mut conn) = Server::started(&[]);
    for kind in KINDS {
        let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
        let proxy = DropReplyProxy::start(server.port, kind.command());
        let name = format!("req:{kind:?}");
        let (guard, field) = kind.acquire(&locks_on(&proxy.url()), &name, Duration::ZERO);
        let swallowed = proxy.swallowed();
        assert_eq!(swallowed.len(), 1, "{kind:?}: the first reply was lost");
        let command = String::from_utf8_lossy(kind.command()).to_lowercase();
        assert_eq!(
            command_calls(&mut conn, &command),
            2,
            "{kind:?}: sent twice"
        );
        // The server's replay replicates a write of its own for the replica
        // check's WAIT: the client writes nothing more.
        assert_eq!(command_calls(&mut conn, "pexpire"), 0, "{kind:?}");
        let count: String = query(&mut conn, &["HGET", &name, &field]);
        assert_eq!(count, "1", "{kind:?}: counted once");
        if kind.fenced() {
            let token = swallowed_token(&swallowed[0]);
            assert_eq!(guard.token(), Some(token), "{kind:?}: the grant's token");
            let stored: i64 = query(
                &mut conn,
                &["GET", &format!("redisson_lock_token:{{{name}}}")],
            );
            assert_eq!(stored, token, "{kind:?}: no second token");
        }
        assert_no_latch(&mut conn, &format!("{kind:?}"));
        guard.release().expect("released");
        let exists: i64 = query(&mut conn, &["EXISTS", &name]);
        assert_eq!(exists, 0, "{kind:?}: one release frees it: held once");
        assert_free(&mut conn, &name, &format!("{kind:?}"));
    }
}

#[test]
fn a_lost_reply_to_a_wait_is_resent_with_what_is_left_of_it() {
    let (server, mut conn) = Server::started(&[]);
    for (family, trigger) in [
        ("LOCK", &b"LOCK.ACQUIRE"[..]),
        ("FAIRLOCK", &b"FAIRLOCK.ACQUIRE"[..]),
    ] {
        let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
        let name = format!("req:wait:{family}");
        let acquire = format!("{family}.ACQUIRE");
        let _: () = query(&mut conn, &[acquire.as_str(), &name, "holder:1", "10000"]);
        let proxy = DropReplyProxy::start(server.port, trigger);
        let mut other = server.conn();
        let unlock = [format!("{family}.UNLOCK"), name.clone(), "holder:1".into()];
        let unlocker = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            let released: i64 = query(&mut other, &unlock);
            assert_eq!(released, 1);
        });
        let locks = locks_on(&proxy.url());
        let lock = if family == "LOCK" {
            locks.lock(&name)
        } else {
            locks.fair_lock(&name)
        }
        .with_lease(Duration::from_secs(10));
        let started = Instant::now();
        let guard = lock.try_acquire(Duration::from_secs(5)).expect("served");
        assert!(started.elapsed() < Duration::from_secs(4));
        unlocker.join().expect("unlock");
        let swallowed = proxy.swallowed();
        assert!(
            swallowed == [b"$-1\r\n".to_vec()] || swallowed == [b"_\r\n".to_vec()],
            "{family}: served (nil), then the reply lost: {swallowed:?}"
        );
        let stat = acquire.to_lowercase();
        assert_eq!(
            command_calls(&mut conn, &stat),
            3,
            "{family}: the holder's, the wait, its resend"
        );
        let count: String = query(&mut conn, &["HGET", &name, &lock.owner()]);
        assert_eq!(count, "1", "{family}");
        guard.release().expect("released");
        assert_free(&mut conn, &name, family);
    }
}

#[test]
fn a_session_acquisition_resends_plain() {
    // The lost reply's connection closed, and with it what the first send
    // bound to it (given back in the server's next event-loop turn): a
    // replay would answer granted and bind nothing; sent plain it
    // re-enters, and the give-back takes the dead connection's level.
    let (server, mut conn) = Server::started(&[]);
    let proxy = DropReplyProxy::start(server.port, b"LOCK.ACQUIRE");
    let lock = locks_on(&proxy.url()).lock("req:session").with_session();
    let guard = lock.try_acquire(Duration::ZERO).expect("acquired");
    assert_eq!(proxy.swallowed().len(), 1);
    let info: redis::Value = query(&mut conn, &["LOCK.INFO", "req:session"]);
    let holders: Vec<redis::Value> = match info {
        redis::Value::Array(items) => match &items[1] {
            redis::Value::Array(h) => h.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let holder: Vec<redis::Value> = redis::from_redis_value(holders[0].clone()).expect("holder");
    let (count, session): (i64, i64) = (
        redis::from_redis_value(holder[3].clone()).expect("count"),
        redis::from_redis_value(holder[5].clone()).expect("session"),
    );
    assert_eq!(
        (holders.len(), count, session),
        (1, 1, 1),
        "one hold, bound to the live connection"
    );
    assert_eq!(command_calls(&mut conn, "lock.acquire"), 2, "sent twice");
    assert_no_latch(&mut conn, "session");
    guard.release().expect("released");
    assert_free(&mut conn, "req:session", "session");
}

#[test]
fn the_async_client_resends_a_lost_reply_with_its_count() {
    let (server, mut conn) = Server::started(&[]);
    let proxy = DropReplyProxy::start(server.port, b"LOCK.ACQUIRE");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let locks = aio::Client::new(redis::Client::open(proxy.url()).expect("url"));
        let lock = locks
            .fenced_lock("req:async")
            .with_lease(Duration::from_secs(10));
        let guard = lock.try_acquire(Duration::ZERO).await.expect("acquired");
        let swallowed = proxy.swallowed();
        assert_eq!(swallowed.len(), 1);
        assert_eq!(guard.token(), Some(swallowed_token(&swallowed[0])));
        let count: String = query(&mut conn, &["HGET", "req:async", lock.owner()]);
        assert_eq!(count, "1");
        guard.release().await.expect("released");
    });
    assert_eq!(command_calls(&mut conn, "lock.acquire"), 2, "sent twice");
    assert_free(&mut conn, "req:async", "async");
}

/// A re-entered hold (count 2): the inner release's reply lost after it
/// ran, its resend (`HELD 2`, the owner's count now 1) is answered
/// released and frees no second level. The outer (last) release's reply
/// lost too: its resend (no `HELD`: 1 is never replayed) finds nothing held, which cannot tell
/// its own release from a hold gone before it: `ReleaseUnknown`, and the
/// lock is free.
#[test]
fn a_lost_release_reply_frees_one_level_and_a_last_ones_is_unknown() {
    let (server, mut conn) = Server::started(&[]);
    for kind in [KindOf::Plain, KindOf::Read, KindOf::Write, KindOf::Fair] {
        let unlock = kind.unlock();
        let stat = String::from_utf8_lossy(unlock).to_lowercase();
        let proxy = DropReplyProxy::start(server.port, unlock);
        let locks = locks_on(&proxy.url());
        let name = format!("rel:{kind:?}");
        let (outer, field) = kind.acquire(&locks, &name, Duration::ZERO);
        let (inner, _) = kind.acquire(&locks, &name, Duration::ZERO);
        let count: String = query(&mut conn, &["HGET", &name, &field]);
        assert_eq!(count, "2", "{kind:?}: re-entered");

        let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
        inner.release().expect("the re-entered release");
        assert_eq!(proxy.swallowed().len(), 1, "{kind:?}: its reply was lost");
        assert_eq!(command_calls(&mut conn, &stat), 2, "{kind:?}: sent twice");
        assert_eq!(command_calls(&mut conn, "del"), 0, "{kind:?}: no latch");
        let count: String = query(&mut conn, &["HGET", &name, &field]);
        assert_eq!(count, "1", "{kind:?}: one level released, not two");

        proxy.arm();
        let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
        let outcome = outer.release();
        assert!(
            matches!(outcome, Err(Error::ReleaseUnknown)),
            "{kind:?}: {outcome:?}"
        );
        assert_eq!(proxy.swallowed().len(), 2, "{kind:?}: its reply was lost");
        assert_eq!(command_calls(&mut conn, &stat), 2, "{kind:?}: sent twice");
        assert_free(&mut conn, &name, &format!("{kind:?}"));
    }
}

#[test]
fn the_async_client_resends_a_lost_release_reply_without_releasing_twice() {
    let (server, mut conn) = Server::started(&[]);
    let proxy = DropReplyProxy::start(server.port, b"LOCK.UNLOCK");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let locks = aio::Client::new(redis::Client::open(proxy.url()).expect("url"));
        let lock = locks.lock("rel:async").with_lease(Duration::from_secs(10));
        let outer = lock.try_acquire(Duration::ZERO).await.expect("acquired");
        let inner = lock.try_acquire(Duration::ZERO).await.expect("re-entered");
        inner.release().await.expect("the re-entered release");
        assert_eq!(proxy.swallowed().len(), 1);
        let count: String = query(&mut conn, &["HGET", "rel:async", lock.owner()]);
        assert_eq!(count, "1", "one level released, not two");
        proxy.arm();
        let outcome = outer.release().await;
        assert!(matches!(outcome, Err(Error::ReleaseUnknown)), "{outcome:?}");
        assert_eq!(proxy.swallowed().len(), 2);
    });
    assert_eq!(
        command_calls(&mut conn, "lock.unlock"),
        4,
        "each release sent twice"
    );
    assert_free(&mut conn, "rel:async", "async");
}

/// A hold gone before its release (here its key deleted, as a lease run
/// out or a failover would leave it), the release's reply lost after it
/// ran: the resend finds nothing held either. The owner's last hold:
/// `ReleaseUnknown` (nothing can tell this from the first send's release);
/// a re-entered one: `NotHeld` (a resend whose first send released would
/// have found the owner's count one lower). Never released.
#[test]
fn a_lost_release_reply_of_a_hold_already_gone_is_never_released() {
    let (server, mut conn) = Server::started(&[]);
    for kind in [
        KindOf::Plain,
        KindOf::Fenced,
        KindOf::Read,
        KindOf::Write,
        KindOf::Fair,
    ] {
        let proxy = DropReplyProxy::start(server.port, kind.unlock());
        let locks = locks_on(&proxy.url());
        let name = format!("gone:{kind:?}");
        let (guard, _) = kind.acquire(&locks, &name, Duration::ZERO);
        let deleted: i64 = query(&mut conn, &["DEL", &name]);
        assert_eq!(deleted, 1, "{kind:?}: the hold gone");

        let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
        let outcome = guard.release();
        assert!(
            matches!(outcome, Err(Error::ReleaseUnknown)),
            "{kind:?}: {outcome:?}"
        );
        assert_eq!(proxy.swallowed().len(), 1, "{kind:?}: its reply was lost");
        let stat = String::from_utf8_lossy(kind.unlock()).to_lowercase();
        assert_eq!(command_calls(&mut conn, &stat), 2, "{kind:?}: sent twice");
    }
    let proxy = DropReplyProxy::start(server.port, b"LOCK.UNLOCK");
    let locks = locks_on(&proxy.url());
    let (outer, _) = KindOf::Plain.acquire(&locks, "gone:reentered", Duration::ZERO);
    let (inner, _) = KindOf::Plain.acquire(&locks, "gone:reentered", Duration::ZERO);
    let deleted: i64 = query(&mut conn, &["DEL", "gone:reentered"]);
    assert_eq!(deleted, 1, "the holds gone");
    let outcome = inner.release();
    assert!(matches!(outcome, Err(Error::NotHeld)), "{outcome:?}");
    assert_eq!(proxy.swallowed().len(), 1, "its reply was lost");
    // The client forgot the owner's count: the outer release, sent once
    // (saying no count), finds nothing either.
    assert!(matches!(outer.release(), Err(Error::NotHeld)));
    let proxy = DropReplyProxy::start(server.port, b"LOCK.UNLOCK");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    runtime.block_on(async {
        let locks = aio::Client::new(redis::Client::open(proxy.url()).expect("url"));
        let lock = locks.lock("gone:async").with_lease(Duration::from_secs(10));
        let guard = lock.try_acquire(Duration::ZERO).await.expect("acquired");
        let deleted: i64 = query(&mut conn, &["DEL", "gone:async"]);
        assert_eq!(deleted, 1, "the hold gone");
        let outcome = guard.release().await;
        assert!(
            matches!(outcome, Err(Error::ReleaseUnknown)),
            "async: {outcome:?}"
        );
    });
    assert_eq!(proxy.swallowed().len(), 1, "async: its reply was lost");
    assert_eq!(
        command_calls(&mut conn, "lock.unlock"),
        2,
        "async: sent twice"
    );
}

#[test]
fn a_semaphores_lost_replies_take_and_give_permits_once() {
    let (server, mut conn) = Server::started(&[]);
    let name = "req:sem";
    let set: i64 = query(&mut conn, &["SEMAPHORE.TRYSETPERMITS", name, "3"]);
    assert_eq!(set, 1);
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    // The acquisition's reply lost: resent once with its id, answered
    // from its latch.
    let proxy = DropReplyProxy::start(server.port, b"SEMAPHORE.ACQUIRE");
    let sem = locks_on(&proxy.url()).semaphore(name);
    let taken = sem
        .try_acquire(2, Duration::ZERO)
        .expect("try")
        .expect("taken");
    let swallowed = proxy.swallowed();
    assert_eq!(swallowed.len(), 1);
    assert!(swallowed[0].starts_with(b":1\r\n"), "granted, lost");
    assert_eq!(
        command_calls(&mut conn, "semaphore.acquire"),
        2,
        "sent twice"
    );
    assert_eq!(
        command_calls(&mut conn, "pexpire"),
        1,
        "the replica check's write"
    );
    let count: String = query(&mut conn, &["GET", name]);
    assert_eq!(count, "1", "two permits taken once");
    let pattern = format!("redisson_lock_request_latch:{{{name}}}:*");
    assert_eq!(keys(&mut conn, &pattern).len(), 1);
    taken.release().expect("release");
    let count: String = query(&mut conn, &["GET", name]);
    assert_eq!(count, "3");
    assert!(
        keys(&mut conn, &pattern).is_empty(),
        "the release's DEL took the acquisition's latch"
    );
    // A release's reply lost: resent once with its id, answered from its
    // latch, so the permits come back once.
    let proxy = DropReplyProxy::start(server.port, b"SEMAPHORE.RELEASE");
    let sem = locks_on(&proxy.url()).semaphore(name);
    let taken = sem
        .try_acquire(1, Duration::ZERO)
        .expect("try")
        .expect("taken");
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    taken.release().expect("release");
    let swallowed = proxy.swallowed();
    assert_eq!(swallowed.len(), 1);
    assert!(swallowed[0].starts_with(b"$-1\r\n"), "released, lost");
    assert_eq!(
        command_calls(&mut conn, "semaphore.release"),
        2,
        "sent twice"
    );
    let count: String = query(&mut conn, &["GET", name]);
    assert_eq!(count, "3", "given back once");
    // Each client object's last release left its own latch, for its next
    // release's DEL (or to expire).
    let latches = keys(&mut conn, &format!("redisson_unlock_latch:{{{name}}}:*"));
    assert_eq!(latches.len(), 2, "{latches:?}");
}

#[test]
fn a_latch_wait_is_asked_again_and_a_count_down_never_resent() {
    let (server, mut conn) = Server::started(&[]);
    let name = "req:latch";
    let set: i64 = query(&mut conn, &["LATCH.TRYSETCOUNT", name, "2"]);
    assert_eq!(set, 1);
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    // A count-down's reply lost: raised, not sent again (it would count
    // down twice).
    let proxy = DropReplyProxy::start(server.port, b"LATCH.COUNTDOWN");
    let latch = locks_on(&proxy.url()).count_down_latch(name);
    match latch.count_down() {
        Err(Error::Redis(e)) => assert!(e.is_io_error() || e.is_connection_dropped(), "{e}"),
        other => panic!("expected the connection's error, got {other:?}"),
    }
    assert_eq!(proxy.swallowed().len(), 1);
    assert_eq!(command_calls(&mut conn, "latch.countdown"), 1, "sent once");
    let count: String = query(&mut conn, &["GET", name]);
    assert_eq!(count, "1", "counted down once");
    // A wait's reply lost: it only reads, so it is asked again, on a new
    // connection, and answered.
    let proxy = DropReplyProxy::start(server.port, b"LATCH.AWAIT");
    let latch = locks_on(&proxy.url()).count_down_latch(name);
    let mut other = server.conn();
    let counter = thread::spawn(move || {
        wait_for_waiters(&mut other, 1);
        let _: () = query(&mut other, &["LATCH.COUNTDOWN", name]);
    });
    assert!(latch.wait_timeout(Duration::from_secs(10)).expect("wait"));
    counter.join().expect("count down");
    let swallowed = proxy.swallowed();
    assert_eq!(swallowed.len(), 1);
    assert!(swallowed[0].starts_with(b":1\r\n"), "reached, lost");
    assert_eq!(command_calls(&mut conn, "latch.await"), 2, "asked twice");
}

#[test]
fn a_permit_acquisitions_lost_reply_gives_the_same_ids_once() {
    let (server, mut conn) = Server::started(&[]);
    let name = "req:permit";
    let set: i64 = query(&mut conn, &["PERMIT.TRYSETPERMITS", name, "3"]);
    assert_eq!(set, 1);
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    // The acquisition's reply lost: resent once with its id, answered from
    // its latch with the ids the first send took.
    let proxy = DropReplyProxy::start(server.port, b"PERMIT.ACQUIRE");
    let sem = locks_on(&proxy.url())
        .permit_expirable_semaphore(name)
        .never_expiring();
    let taken = sem
        .try_acquire(2, Duration::ZERO)
        .expect("try")
        .expect("taken");
    let swallowed = proxy.swallowed();
    assert_eq!(swallowed.len(), 1);
    let lost = String::from_utf8_lossy(&swallowed[0]).into_owned();
    assert!(lost.starts_with("*2\r\n"), "granted, lost: {lost:?}");
    assert_eq!(taken.ids().len(), 2);
    for id in taken.ids() {
        assert!(
            lost.contains(id.as_str()),
            "{id} was the first send's: {lost:?}"
        );
    }
    assert_eq!(command_calls(&mut conn, "permit.acquire"), 2, "sent twice");
    assert_eq!(
        command_calls(&mut conn, "pexpire"),
        1,
        "the replica check's write"
    );
    let held: i64 = query(&mut conn, &["PERMIT.ACQUIRED", name]);
    assert_eq!(held, 2, "two permits taken once");
    let pattern = format!("redisson_lock_request_latch:{{{name}}}:*");
    assert_eq!(keys(&mut conn, &pattern).len(), 1);
    taken.release().expect("release");
    let free: i64 = query(&mut conn, &["PERMIT.AVAILABLE", name]);
    assert_eq!(free, 3);
    assert!(
        keys(&mut conn, &pattern).is_empty(),
        "the release's DEL took the acquisition's latch"
    );
    // A release's lost reply is raised, never resent: a resend could not
    // tell its own release from an expiry.
    let proxy = DropReplyProxy::start(server.port, b"PERMIT.RELEASE");
    let sem = locks_on(&proxy.url())
        .permit_expirable_semaphore(name)
        .never_expiring();
    let taken = sem
        .try_acquire(1, Duration::ZERO)
        .expect("try")
        .expect("taken");
    let _: () = query(&mut conn, &["CONFIG", "RESETSTAT"]);
    assert!(matches!(taken.release(), Err(Error::Redis(_))));
    assert_eq!(proxy.swallowed().len(), 1, "released, lost");
    assert_eq!(command_calls(&mut conn, "permit.release"), 1, "sent once");
    let free: i64 = query(&mut conn, &["PERMIT.AVAILABLE", name]);
    assert_eq!(free, 3, "released once");
}

//! Memory per held lock and per read acquisition (INFO memory `used_memory`
//! deltas over many of them), the module against EVALSHA of Redisson's
//! scripts: the seed scripts for the read-write lock, Redisson 4.7's for the
//! plain lock (section lock-memory). Both keep the same keys, so they should
//! cost the same.

use crate::load::{self, Request};
use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Conn, Expect, Reply};
use crate::scripts::Scripts;

const LEASE: &str = "600000";

#[derive(Clone, Copy)]
pub enum Layout {
    /// Many locks, one writer each: a hash with `mode` and one write field.
    WriteLock,
    /// Many locks, one reader each: a hash and one lease key.
    ReadLock,
    /// One reader re-entering one lock: one more lease key each time.
    ReadReentry,
    /// Many plain locks, one holder each: a hash with one field.
    PlainLock,
    /// Many fenced locks: the hash and the lock's token counter.
    FencedLock,
}

/// The read-write lock's layouts (section memory).
pub const RWLOCK: &[Layout] = &[Layout::WriteLock, Layout::ReadLock, Layout::ReadReentry];
/// The plain lock's (section lock-memory).
pub const PLAIN: &[Layout] = &[Layout::PlainLock, Layout::FencedLock];

impl Layout {
    fn label(self) -> &'static str {
        match self {
            Layout::WriteLock => "per write lock (hash)",
            Layout::ReadLock => "per read lock (hash + lease key)",
            Layout::ReadReentry => "per read re-entry (lease key)",
            Layout::PlainLock => "per plain lock (hash)",
            Layout::FencedLock => "per fenced lock (hash + token)",
        }
    }
}

const OWNER: &str = "m-0000-4000-8000-000000000000:1";

/// The acquisition of lock `i` (by the module, or by Redisson's script),
/// and its reply.
fn acquisition(layout: Layout, i: usize, script: Option<&Scripts>) -> Request {
    let lock = match layout {
        Layout::ReadReentry => "bench:mem".to_string(),
        _ => format!("bench:mem:{i}"),
    };
    let write_field = format!("{OWNER}:write");
    let token = format!("redisson_lock_token:{}", testkit::prefix_of(&lock));
    let acquire = match (layout, script) {
        (Layout::WriteLock, None) => command(&["RWLOCK.WRITE", &lock, OWNER, LEASE]),
        (Layout::WriteLock, Some(s)) => {
            command(&["EVALSHA", &s.write_lock, "1", &lock, LEASE, &write_field])
        }
        (Layout::PlainLock, None) => command(&["LOCK.ACQUIRE", &lock, OWNER, LEASE]),
        (Layout::PlainLock, Some(s)) => {
            command(&["EVALSHA", &s.plain().lock, "1", &lock, LEASE, OWNER])
        }
        (Layout::FencedLock, None) => command(&["LOCK.ACQUIRE", &lock, OWNER, LEASE, "FENCED"]),
        (Layout::FencedLock, Some(s)) => command(&[
            "EVALSHA",
            &s.plain().fenced_lock,
            "2",
            &lock,
            &token,
            LEASE,
            OWNER,
        ]),
        (_, None) => command(&["RWLOCK.READ", &lock, OWNER, LEASE]),
        (_, Some(s)) => command(&[
            "EVALSHA",
            &s.read_lock,
            "2",
            &lock,
            &format!("{}:{OWNER}:rwlock_timeout", testkit::prefix_of(&lock)),
            LEASE,
            OWNER,
            &write_field,
        ]),
    };
    // A fenced acquisition replies [-1, token].
    let acquired = match layout {
        Layout::FencedLock => Expect::NoError,
        _ => Expect::Nil,
    };
    Request::new(acquire, vec![acquired])
}

/// Waits (5 s at most) until Redis has finished rehashing the key tables of
/// database 0, which the server cron does within a few ticks: until then
/// every command pays a step of it.
pub fn rehashed(conn: &mut Conn) {
    for _ in 0..100 {
        conn.send(&command(&["DEBUG", "HTSTATS", "0"]));
        let stats = String::from_utf8(conn.recv_bulk()).expect("HTSTATS is text");
        if !stats.contains("rehashing target") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `used_memory` once the key tables are rehashed: a table half way through
/// counts twice, and how far it got when the last key went in depends on how
/// many lookups each variant made.
fn used_memory(conn: &mut Conn) -> f64 {
    rehashed(conn);
    conn.info_number("memory", "used_memory")
}

/// Bytes per acquisition of `layout`, over `count` of them.
fn measure(conn: &mut Conn, layout: Layout, count: usize, script: Option<&Scripts>) -> f64 {
    assert_eq!(conn.call(&["FLUSHALL", "SYNC"]), Reply::Status);
    let requests: Vec<Request> = (0..count).map(|i| acquisition(layout, i, script)).collect();
    let before = used_memory(conn);
    load::pipeline(conn, &requests, "memory benchmark");
    let after = used_memory(conn);
    (after - before) / count as f64
}

/// Bytes per acquisition of each of `layouts`, as figures of `section`.
pub fn run(
    port: u16,
    scripts: &Scripts,
    settings: &Settings,
    (section, layouts): (&str, &[Layout]),
    report: &mut Report,
) {
    let mut conn = Conn::connect(port);
    let count = settings.scaled(20_000);
    for &layout in layouts {
        let (mut module, mut script) = (Vec::new(), Vec::new());
        // Alternating order, so neither always runs on a freshly flushed server.
        for round in 0..settings.rounds.max(2) {
            if round % 2 == 0 {
                module.push(measure(&mut conn, layout, count, None));
                script.push(measure(&mut conn, layout, count, Some(scripts)));
            } else {
                script.push(measure(&mut conn, layout, count, Some(scripts)));
                module.push(measure(&mut conn, layout, count, None));
            }
        }
        let (module, script) = (median(&mut module), median(&mut script));
        report.value(section, layout.label(), "module", module, "bytes");
        report.value(section, layout.label(), "EVALSHA", script, "bytes");
        report.ratio(
            section,
            layout.label(),
            "module / EVALSHA",
            module / script,
            Some(Target::About(1.0)),
        );
    }
    assert_eq!(conn.call(&["FLUSHALL", "SYNC"]), Reply::Status);
}

//! Memory per held lock and per read acquisition (INFO memory `used_memory`
//! deltas over many of them), the module against EVALSHA of the seed
//! scripts. Both keep the same keys, so they should cost the same.

use crate::load::{self, Request};
use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Conn, Expect, Reply};
use crate::scripts::Scripts;

const LEASE: &str = "600000";

#[derive(Clone, Copy)]
enum Layout {
    /// Many locks, one writer each: a hash with `mode` and one write field.
    WriteLock,
    /// Many locks, one reader each: a hash and one lease key.
    ReadLock,
    /// One reader re-entering one lock: one more lease key each time.
    ReadReentry,
}

impl Layout {
    fn label(self) -> &'static str {
        match self {
            Layout::WriteLock => "per write lock (hash)",
            Layout::ReadLock => "per read lock (hash + lease key)",
            Layout::ReadReentry => "per read re-entry (lease key)",
        }
    }
}

const OWNER: &str = "m-0000-4000-8000-000000000000:1";

fn acquisition(layout: Layout, i: usize, script: Option<&Scripts>) -> Vec<u8> {
    let lock = match layout {
        Layout::ReadReentry => "bench:mem".to_string(),
        _ => format!("bench:mem:{i}"),
    };
    let write_field = format!("{OWNER}:write");
    match (layout, script) {
        (Layout::WriteLock, None) => command(&["RWLOCK.WRITE", &lock, OWNER, LEASE]),
        (Layout::WriteLock, Some(s)) => {
            command(&["EVALSHA", &s.write_lock, "1", &lock, LEASE, &write_field])
        }
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
    }
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
    let requests: Vec<Request> = (0..count)
        .map(|i| Request::new(acquisition(layout, i, script), vec![Expect::Nil]))
        .collect();
    let before = used_memory(conn);
    load::pipeline(conn, &requests, "memory benchmark");
    let after = used_memory(conn);
    (after - before) / count as f64
}

pub fn run(port: u16, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let mut conn = Conn::connect(port);
    let count = settings.scaled(20_000);
    let section = "memory";
    for layout in [Layout::WriteLock, Layout::ReadLock, Layout::ReadReentry] {
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

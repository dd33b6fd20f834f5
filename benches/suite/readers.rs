//! Read unlock with N concurrent readers: Redisson's unlock scans the lease
//! of every reader to find the lock's new TTL, so its cost grows with N.
//! Microseconds per unlock as the server counts them (INFO commandstats),
//! the module's RWLOCK.UNLOCK against EVALSHA of the seed read_unlock script,
//! on the same lock; each unlock is followed by a re-acquisition so N holds.

use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Conn, Expect};
use crate::scripts::Scripts;

pub const READERS: [usize; 5] = [1, 10, 100, 1_000, 10_000];
const LOCK: &str = "bench:readers";
const LEASE: &str = "600000";

fn owner(i: usize) -> String {
    format!("r{i}-0000-4000-8000-000000000000:1")
}

/// Sends the requests pipelined in chunks, checking every reply.
fn pipeline(conn: &mut Conn, requests: &[(Vec<u8>, Expect)]) {
    for chunk in requests.chunks(512) {
        let mut bytes = Vec::new();
        for (r, _) in chunk {
            bytes.extend_from_slice(r);
        }
        conn.send(&bytes);
        for (_, expect) in chunk {
            expect.require(&conn.recv(), "readers benchmark");
        }
    }
}

fn read_lock(i: usize) -> (Vec<u8>, Expect) {
    (
        command(&["RWLOCK.READ", LOCK, &owner(i), LEASE]),
        Expect::Nil,
    )
}

/// `usec_per_call` of a command in INFO commandstats.
fn usec_per_call(conn: &mut Conn, name: &str) -> f64 {
    conn.send(&command(&["INFO", "commandstats"]));
    let info = String::from_utf8(conn.recv_bulk()).expect("INFO is text");
    let prefix = format!("cmdstat_{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|stats| {
            stats
                .split(',')
                .find_map(|kv| kv.strip_prefix("usec_per_call="))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no usec_per_call for {name} in INFO commandstats"))
}

/// Server microseconds per unlock among `n` readers.
fn measure(conn: &mut Conn, n: usize, unlocks: usize, script: Option<&Scripts>) -> f64 {
    let timeout_prefix =
        |i: usize| format!("{}:{}:rwlock_timeout", testkit::prefix_of(LOCK), owner(i));
    let mut requests = Vec::with_capacity(unlocks * 2);
    for k in 0..unlocks {
        let i = k % n;
        let unlock = match script {
            None => command(&["RWLOCK.UNLOCK", LOCK, &owner(i), "READ"]),
            Some(s) => command(&[
                "EVALSHA",
                &s.read_unlock,
                "4",
                LOCK,
                &testkit::channel(LOCK),
                &timeout_prefix(i),
                &testkit::prefix_of(LOCK),
                "0",
                &owner(i),
            ]),
        };
        // Still held by the others: 0; the only reader's release: 1.
        let released = if n == 1 { 1 } else { 0 };
        requests.push((unlock, Expect::Int(released)));
        requests.push(read_lock(i));
    }
    assert!(matches!(
        conn.call(&["CONFIG", "RESETSTAT"]),
        crate::resp::Reply::Status
    ));
    pipeline(conn, &requests);
    usec_per_call(
        conn,
        if script.is_some() {
            "evalsha"
        } else {
            "rwlock.unlock"
        },
    )
}

pub fn run(port: u16, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let mut conn = Conn::connect(port);
    let section = "readers";
    for n in READERS {
        assert!(matches!(
            conn.call(&["DEL", LOCK]),
            crate::resp::Reply::Int(_)
        ));
        let holders: Vec<_> = (0..n).map(read_lock).collect();
        pipeline(&mut conn, &holders);
        // About the same work per size: fewer unlocks when each scans more.
        let unlocks = settings.scaled((200_000 / n).clamp(40, 20_000));
        let (mut module, mut script) = (Vec::new(), Vec::new());
        for _ in 0..settings.rounds {
            module.push(measure(&mut conn, n, unlocks, None));
            script.push(measure(&mut conn, n, unlocks, Some(scripts)));
        }
        let (module, script) = (median(&mut module), median(&mut script));
        let case = format!("{n} readers");
        report.value(section, &case, "module", module, "us/unlock");
        report.value(section, &case, "EVALSHA", script, "us/unlock");
        let target = (n == 1_000).then_some(Target::AtLeast(20.0));
        report.ratio(section, &case, "EVALSHA / module", script / module, target);
        pipeline(
            &mut conn,
            &[(command(&["RWLOCK.FORCEUNLOCK", LOCK]), Expect::Int(1))],
        );
    }
}

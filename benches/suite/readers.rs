//! Read unlock with N concurrent readers: Redisson's unlock scans the lease
//! of every reader to find the lock's new TTL, so its cost grows with N.
//! Microseconds per unlock as the server counts them (INFO commandstats),
//! the module's RWLOCK.UNLOCK against EVALSHA of the seed read_unlock script,
//! on the same lock; each unlock is followed by a re-acquisition so N holds.

use crate::load::{self, Request};
use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Conn, Expect};
use crate::scripts::Scripts;
use crate::stats;

pub const READERS: [usize; 5] = [1, 10, 100, 1_000, 10_000];
const LOCK: &str = "bench:readers";
const LEASE: &str = "600000";

fn owner(i: usize) -> String {
    format!("r{i}-0000-4000-8000-000000000000:1")
}

fn read_lock(i: usize) -> Request {
    Request::new(
        command(&["RWLOCK.READ", LOCK, &owner(i), LEASE]),
        vec![Expect::Nil],
    )
}

fn pipeline(conn: &mut Conn, requests: &[Request]) {
    load::pipeline(conn, requests, "readers benchmark");
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
        requests.push(Request::new(unlock, vec![Expect::Int(released)]));
        requests.push(read_lock(i));
    }
    let unlock = if script.is_some() {
        "evalsha"
    } else {
        "rwlock.unlock"
    };
    // The re-acquisitions (RWLOCK.READ in both variants) count apart.
    stats::cost(conn, &[unlock], |c| pipeline(c, &requests))
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
        // Every unlock at least 3x cheaper than the script's; among 1,000
        // readers, where the script scans every lease, at least 20x.
        let target = Target::AtLeast(if n == 1_000 { 20.0 } else { 3.0 });
        report.ratio(
            section,
            &case,
            "EVALSHA / module",
            script / module,
            Some(target),
        );
        pipeline(
            &mut conn,
            &[Request::new(
                command(&["RWLOCK.FORCEUNLOCK", LOCK]),
                vec![Expect::Int(1)],
            )],
        );
    }
}

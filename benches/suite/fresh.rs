//! Fresh lock names on a keyspace holding 200,000 locks: what users with one
//! lock per entity meet. The keyspace is first filled with held locks (every
//! other one read, with its lease key), then each round takes locks of names
//! never used before and releases them, in pipelined batches, with the
//! module and with EVALSHA of Redisson's seed scripts. Acquisitions and
//! releases are counted apart (INFO commandstats), so each operation has its
//! own figure.

use crate::cycles::{self, Kind, Names};
use crate::load::{self, Request};
use crate::memory;
use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Conn, Expect, Reply};
use crate::scripts::Scripts;
use crate::stats;

pub const HELD: usize = 200_000;
/// Long enough that none of the held locks runs out during the bench.
const HELD_LEASE: &str = "3600000";
const OWNER: &str = "h-0000-4000-8000-000000000000:1";

fn fill(conn: &mut Conn) {
    let held: Vec<Request> = (0..HELD)
        .map(|i| {
            let acquire = if i % 2 == 0 {
                "RWLOCK.READ"
            } else {
                "RWLOCK.WRITE"
            };
            let lock = format!("bench:held:{i}");
            Request::new(
                command(&[acquire, &lock, OWNER, HELD_LEASE]),
                vec![Expect::Nil],
            )
        })
        .collect();
    load::pipeline(conn, &held, "filling the keyspace");
    // Neither variant is to pay for the growth of the key tables.
    memory::rehashed(conn);
}

/// Server microseconds per acquisition and per release of `count` fresh
/// locks, by the module or (with `script`) by EVALSHA.
fn measure(
    conn: &mut Conn,
    kind: Kind,
    count: usize,
    tag: &str,
    script: Option<&Scripts>,
) -> (f64, f64) {
    let (mut acquires, mut releases) = (Vec::new(), Vec::new());
    for i in 0..count {
        let n = Names::new(format!("bench:fresh:{tag}:{i}"), i);
        let cycle = match script {
            Some(s) => cycles::evalsha(kind, &n, s),
            None => cycles::module(kind, &n),
        };
        let [acquire, release] = <[Request; 2]>::try_from(cycle)
            .unwrap_or_else(|_| panic!("a cycle is an acquisition and a release"));
        acquires.push(acquire);
        releases.push(release);
    }
    let (acquire, release) = match (script, kind) {
        (Some(_), _) => ("evalsha", "evalsha"),
        (None, Kind::Read) => ("rwlock.read", "rwlock.unlock"),
        (None, Kind::Write) => ("rwlock.write", "rwlock.unlock"),
    };
    let what = "fresh names among held locks";
    (
        stats::cost(conn, &[acquire], |c| load::pipeline(c, &acquires, what)),
        stats::cost(conn, &[release], |c| load::pipeline(c, &releases, what)),
    )
}

pub fn run(port: u16, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let mut conn = Conn::connect(port);
    assert_eq!(conn.call(&["FLUSHALL", "SYNC"]), Reply::Status);
    fill(&mut conn);
    let count = settings.scaled(20_000);
    let section = "fresh";
    for kind in [Kind::Read, Kind::Write] {
        // Per round: (module acquire, module release, script acquire, script release).
        let mut rounds: Vec<[f64; 4]> = Vec::new();
        for round in 0..settings.rounds {
            let tag = |who: &str| format!("{}:{round}:{who}", kind.label());
            let by_module = |c: &mut Conn| measure(c, kind, count, &tag("module"), None);
            let by_script = |c: &mut Conn| measure(c, kind, count, &tag("script"), Some(scripts));
            // Alternating order, so neither always meets the table first.
            let ((ma, mr), (sa, sr)) = if round % 2 == 0 {
                let m = by_module(&mut conn);
                (m, by_script(&mut conn))
            } else {
                let s = by_script(&mut conn);
                (by_module(&mut conn), s)
            };
            rounds.push([ma, mr, sa, sr]);
        }
        let med =
            |f: &dyn Fn(&[f64; 4]) -> f64| median(&mut rounds.iter().map(f).collect::<Vec<_>>());
        let label = kind.label();
        let cases = [
            (format!("{label} lock, fresh name, {HELD} held"), 0, 2),
            (format!("{label} unlock, {HELD} held"), 1, 3),
        ];
        for (case, module, script) in &cases {
            report.value(
                section,
                case,
                "module",
                med(&|r| r[*module]),
                "server us/op",
            );
            report.value(
                section,
                case,
                "EVALSHA",
                med(&|r| r[*script]),
                "server us/op",
            );
        }
        for (case, module, script) in &cases {
            report.ratio(
                section,
                case,
                "EVALSHA / module, server us",
                med(&|r| r[*script] / r[*module]),
                Some(Target::Wished(3.0)),
            );
        }
        report.ratio(
            section,
            &format!("{label} lock + unlock, fresh names, {HELD} held"),
            "EVALSHA / module, server us",
            med(&|r| (r[2] + r[3]) / (r[0] + r[1])),
            Some(Target::Wished(3.0)),
        );
    }
    assert_eq!(conn.call(&["FLUSHALL", "SYNC"]), Reply::Status);
}

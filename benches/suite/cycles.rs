//! Uncontended cycles (acquire + release) with 50 clients, each on its own
//! lock: the module against EVALSHA of Redisson's seed scripts, against the
//! same plain commands the scripts run sent as MULTI/EXEC, and against the
//! floor of one `HINCRBY` per request.

use crate::load::{self, Request};
use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Expect};
use crate::scripts::Scripts;

pub const CLIENTS: usize = 50;
pub const DEPTHS: [usize; 2] = [1, 16];
const LEASE: &str = "30000";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }
}

/// One client's names: its own lock, so nobody contends.
struct Names {
    lock: String,
    owner: String,
    write_field: String,
    timeout_prefix: String,
    key_prefix: String,
    channel: String,
}

fn names(client: usize) -> Names {
    let lock = format!("bench:cycle:{client}");
    let owner = format!("c{client}-0000-4000-8000-000000000000:1");
    Names {
        write_field: format!("{owner}:write"),
        timeout_prefix: format!("{{{lock}}}:{owner}:rwlock_timeout"),
        key_prefix: format!("{{{lock}}}"),
        channel: format!("redisson_rwlock:{{{lock}}}"),
        lock,
        owner,
    }
}

fn module(kind: Kind, n: &Names) -> Vec<Request> {
    let (acquire, mode) = match kind {
        Kind::Read => ("RWLOCK.READ", "READ"),
        Kind::Write => ("RWLOCK.WRITE", "WRITE"),
    };
    vec![
        Request::new(
            command(&[acquire, &n.lock, &n.owner, LEASE]),
            vec![Expect::Nil],
        ),
        Request::new(
            command(&["RWLOCK.UNLOCK", &n.lock, &n.owner, mode]),
            vec![Expect::Int(1)],
        ),
    ]
}

fn evalsha(kind: Kind, n: &Names, s: &Scripts) -> Vec<Request> {
    let (acquire, release) = match kind {
        Kind::Read => (
            command(&[
                "EVALSHA",
                &s.read_lock,
                "2",
                &n.lock,
                &n.timeout_prefix,
                LEASE,
                &n.owner,
                &n.write_field,
            ]),
            command(&[
                "EVALSHA",
                &s.read_unlock,
                "4",
                &n.lock,
                &n.channel,
                &n.timeout_prefix,
                &n.key_prefix,
                "0",
                &n.owner,
            ]),
        ),
        Kind::Write => (
            command(&[
                "EVALSHA",
                &s.write_lock,
                "1",
                &n.lock,
                LEASE,
                &n.write_field,
            ]),
            command(&[
                "EVALSHA",
                &s.write_unlock,
                "2",
                &n.lock,
                &n.channel,
                "1",
                LEASE,
                &n.write_field,
            ]),
        ),
    };
    vec![
        Request::new(acquire, vec![Expect::Nil]),
        Request::new(release, vec![Expect::Int(1)]),
    ]
}

fn transaction(commands: &[Vec<&str>]) -> Request {
    let mut bytes = command(&["MULTI"]);
    for c in commands {
        bytes.extend(command(c));
    }
    bytes.extend(command(&["EXEC"]));
    // +OK, +QUEUED per command, then EXEC's array.
    Request::new(bytes, vec![Expect::NoError; commands.len() + 2])
}

/// The commands the seed scripts run on this path, in one MULTI/EXEC each.
fn multi(kind: Kind, n: &Names) -> Vec<Request> {
    let timeout_key = format!("{}:1", n.timeout_prefix);
    let (l, o, w, t) = (
        &n.lock[..],
        &n.owner[..],
        &n.write_field[..],
        &timeout_key[..],
    );
    match kind {
        Kind::Read => vec![
            transaction(&[
                vec!["HGET", l, "mode"],
                vec!["HSET", l, "mode", "read"],
                vec!["HSET", l, o, "1"],
                vec!["SET", t, "1"],
                vec!["PEXPIRE", t, LEASE],
                vec!["PEXPIRE", l, LEASE],
            ]),
            transaction(&[
                vec!["HGET", l, "mode"],
                vec!["HEXISTS", l, o],
                vec!["HINCRBY", l, o, "-1"],
                vec!["HDEL", l, o],
                vec!["DEL", t],
                vec!["HLEN", l],
                vec!["DEL", l],
                vec!["PUBLISH", &n.channel, "0"],
            ]),
        ],
        Kind::Write => vec![
            transaction(&[
                vec!["HGET", l, "mode"],
                vec!["HSET", l, "mode", "write"],
                vec!["HSET", l, w, "1"],
                vec!["PEXPIRE", l, LEASE],
            ]),
            transaction(&[
                vec!["HGET", l, "mode"],
                vec!["HEXISTS", l, w],
                vec!["HINCRBY", l, w, "-1"],
                vec!["HDEL", l, w],
                vec!["HLEN", l],
                vec!["DEL", l],
                vec!["PUBLISH", &n.channel, "1"],
            ]),
        ],
    }
}

/// The floor: one native command per request.
fn hincrby(client: usize) -> Vec<Request> {
    let key = format!("bench:floor:{client}");
    vec![
        Request::new(command(&["HINCRBY", &key, "f", "1"]), vec![Expect::Int(1)]),
        Request::new(command(&["HINCRBY", &key, "f", "-1"]), vec![Expect::Int(0)]),
    ]
}

struct Variant {
    name: &'static str,
    kind: Option<Kind>,
    cycles: Vec<Vec<Request>>,
}

fn variants(s: &Scripts) -> Vec<Variant> {
    let mut out = Vec::new();
    for kind in [Kind::Read, Kind::Write] {
        let all: Vec<Names> = (0..CLIENTS).map(names).collect();
        out.push(Variant {
            name: "module",
            kind: Some(kind),
            cycles: all.iter().map(|n| module(kind, n)).collect(),
        });
        out.push(Variant {
            name: "EVALSHA",
            kind: Some(kind),
            cycles: all.iter().map(|n| evalsha(kind, n, s)).collect(),
        });
        out.push(Variant {
            name: "MULTI/EXEC",
            kind: Some(kind),
            cycles: all.iter().map(|n| multi(kind, n)).collect(),
        });
    }
    out.push(Variant {
        name: "HINCRBY",
        kind: None,
        cycles: (0..CLIENTS).map(hincrby).collect(),
    });
    out
}

pub fn run(port: u16, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let variants = variants(scripts);
    for depth in DEPTHS {
        // Rounds interleave the variants, so drift on the machine hits all alike.
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        for _ in 0..settings.rounds {
            for (v, rate) in variants.iter().zip(&mut rates) {
                let per_s = load::run(port, &v.cycles, depth, settings.warmup, settings.measure);
                // Two requests make a cycle, for every variant.
                rate.push(per_s / 2.0);
            }
        }
        let section = "cycles";
        let mut rate_of = |name: &str, kind: Option<Kind>| -> f64 {
            let i = variants
                .iter()
                .position(|v| v.name == name && v.kind == kind)
                .expect("variant");
            median(&mut rates[i])
        };
        let floor = rate_of("HINCRBY", None);
        report.value(
            section,
            &format!("HINCRBY +1/-1, depth {depth}"),
            "HINCRBY",
            floor,
            "cycles/s",
        );
        for kind in [Kind::Read, Kind::Write] {
            let case = format!("{} lock + unlock, depth {depth}", kind.label());
            let module = rate_of("module", Some(kind));
            let script = rate_of("EVALSHA", Some(kind));
            let multi = rate_of("MULTI/EXEC", Some(kind));
            report.value(section, &case, "module", module, "cycles/s");
            report.value(section, &case, "EVALSHA", script, "cycles/s");
            report.value(section, &case, "MULTI/EXEC", multi, "cycles/s");
            let target = |t: f64| (depth == 16).then_some(Target::AtLeast(t));
            report.ratio(
                section,
                &case,
                "module / EVALSHA",
                module / script,
                target(3.0),
            );
            report.ratio(section, &case, "module / MULTI/EXEC", module / multi, None);
            report.ratio(
                section,
                &case,
                "module / HINCRBY",
                module / floor,
                target(0.7),
            );
        }
    }
}

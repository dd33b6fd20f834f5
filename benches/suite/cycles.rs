//! Uncontended cycles (acquire + release) with 50 clients, each on its own
//! lock: the module against EVALSHA of Redisson's seed scripts, against the
//! same plain commands the scripts run sent as MULTI/EXEC, against the
//! layout floor (benches/floor, in a server of its own) and against one
//! `HINCRBY` per request. Judged by the server's cost per cycle (INFO
//! commandstats); throughput and the server process's CPU time are shown.

use std::path::{Path, PathBuf};

use crate::load::{self, Request};
use crate::report::{median, Report, Settings, Target};
use crate::resp::{command, Conn, Expect, Value};
use crate::scripts::Scripts;
use crate::stats;
use testkit::Server;

pub const CLIENTS: usize = 50;
pub const DEPTHS: [usize; 2] = [1, 16];
const LEASE: &str = "30000";

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }
}

/// A lock's names, as one owner uses them.
pub struct Names {
    lock: String,
    owner: String,
    write_field: String,
    timeout_prefix: String,
    /// The lease key of the owner's first read hold.
    lease_key: String,
    key_prefix: String,
    channel: String,
}

/// One client's names: its own lock, so nobody contends.
fn names(client: usize) -> Names {
    Names::new(format!("bench:cycle:{client}"), client)
}

impl Names {
    /// The names of `lock` held by client `client`'s owner.
    pub fn new(lock: String, client: usize) -> Names {
        let owner = format!("c{client}-0000-4000-8000-000000000000:1");
        let timeout_prefix = format!("{}:{owner}:rwlock_timeout", testkit::prefix_of(&lock));
        Names {
            write_field: format!("{owner}:write"),
            lease_key: format!("{timeout_prefix}:1"),
            timeout_prefix,
            key_prefix: testkit::prefix_of(&lock),
            channel: testkit::channel(&lock),
            lock,
            owner,
        }
    }
}

/// The module's cycle: acquire, release.
pub fn module(kind: Kind, n: &Names) -> Vec<Request> {
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

/// Redisson's cycle: its acquire and release scripts.
pub fn evalsha(kind: Kind, n: &Names, s: &Scripts) -> Vec<Request> {
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
    let (mode, field, lease_key, message) = match kind {
        Kind::Read => ("read", &n.owner, Some(&n.lease_key[..]), "0"),
        Kind::Write => ("write", &n.write_field, None, "1"),
    };
    let l = &n.lock[..];
    // The hold, then its lease key (a read hold's) and the lock's deadline.
    let mut acquire = vec![
        vec!["HGET", l, "mode"],
        vec!["HSET", l, "mode", mode],
        vec!["HSET", l, field, "1"],
    ];
    acquire.extend(lease_key.map(|t| vec!["SET", t, "1"]));
    acquire.extend(lease_key.map(|t| vec!["PEXPIRE", t, LEASE]));
    acquire.push(vec!["PEXPIRE", l, LEASE]);
    // The only hold's release, its lease key's, the lock's, the message.
    let mut release = vec![
        vec!["HGET", l, "mode"],
        vec!["HEXISTS", l, field],
        vec!["HINCRBY", l, field, "-1"],
        vec!["HDEL", l, field],
    ];
    release.extend(lease_key.map(|t| vec!["DEL", t]));
    release.extend([
        vec!["HLEN", l],
        vec!["DEL", l],
        vec!["PUBLISH", &n.channel, message],
    ]);
    vec![transaction(&acquire), transaction(&release)]
}

/// The layout's floor: only the Redis calls the cycle cannot avoid on
/// Redisson's keys (the commands of benches/floor, in a server of their own).
fn layout_floor(kind: Kind, n: &Names) -> Vec<Request> {
    match kind {
        Kind::Read => {
            vec![
                Request::new(
                    command(&["RWLOCK.FLOOR.READ", &n.lock, &n.owner, &n.lease_key, LEASE]),
                    vec![Expect::Nil],
                ),
                Request::new(
                    command(&[
                        "RWLOCK.FLOOR.UNLOCK",
                        &n.lock,
                        &n.channel,
                        &n.owner,
                        &n.lease_key,
                    ]),
                    vec![Expect::Int(1)],
                ),
            ]
        }
        Kind::Write => vec![
            Request::new(
                command(&["RWLOCK.FLOOR.WRITE", &n.lock, &n.write_field, LEASE]),
                vec![Expect::Nil],
            ),
            Request::new(
                command(&["RWLOCK.FLOOR.UNLOCK", &n.lock, &n.channel, &n.write_field]),
                vec![Expect::Int(1)],
            ),
        ],
    }
}

/// The floor's module: `$RWLOCK_FLOOR_MODULE`, else this workspace's release
/// build (`make bench` builds it); None when there is none.
fn floor_module() -> Option<PathBuf> {
    let path = std::env::var_os("RWLOCK_FLOOR_MODULE")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/librwlock_floor.so")
        });
    path.is_file().then_some(path)
}

/// A server of the same binary and options as the module's, with the floor
/// loaded instead of the module. Not beside the module: with another module
/// loaded, rwlock raises every keyspace event (src/observers.rs), which
/// would inflate the module's measured cost.
pub fn floor_server(options: &[&str]) -> Option<Server> {
    let module = floor_module()?;
    let mut args = vec!["--loadmodule", module.to_str()?];
    args.extend_from_slice(options);
    Some(Server::start_plain(&args))
}

/// What a cycle's keys hold: the hash's fields, whether it has a deadline,
/// whether the lease key exists.
fn lock_state(c: &mut Conn, n: &Names) -> (Value, bool, Value) {
    let mut value = |args: &[&str]| {
        c.send(&command(args));
        c.recv_value()
    };
    let ttl = match value(&["PTTL", &n.lock]) {
        Value::Int(ms) => ms,
        other => panic!("PTTL gave {other:?}"),
    };
    (
        value(&["HGETALL", &n.lock]),
        ttl > 0,
        value(&["EXISTS", &n.lease_key]),
    )
}

/// Before anything is measured: the floor's commands, on the floor's
/// server, must leave the keys the module's leave on the module's, and
/// remove them, so that its figures stand for the same work.
fn check_layout_floor(module_port: u16, floor_port: u16) {
    let (mut on_module, mut on_floor) = (Conn::connect(module_port), Conn::connect(floor_port));
    let run = |c: &mut Conn, r: &Request| {
        c.send(&r.bytes);
        for e in &r.expect {
            e.require(&c.recv(), "layout floor check");
        }
    };
    for kind in [Kind::Read, Kind::Write] {
        let n = names(CLIENTS);
        for (step, (m, f)) in module(kind, &n)
            .iter()
            .zip(&layout_floor(kind, &n))
            .enumerate()
        {
            run(&mut on_module, m);
            run(&mut on_floor, f);
            assert_eq!(
                lock_state(&mut on_module, &n),
                lock_state(&mut on_floor, &n),
                "{} cycle, step {step}: the layout floor leaves other keys than the module",
                kind.label()
            );
        }
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
    /// Run on the floor's server rather than the module's.
    on_floor: bool,
    /// The commands the client sends, as INFO commandstats names them (a
    /// script's or a transaction's own calls are inside their figure).
    commands: &'static [&'static str],
    /// How many calls of `commands` make one cycle.
    calls_per_cycle: f64,
    cycles: Vec<Vec<Request>>,
}

impl Variant {
    fn new(name: &'static str, kind: Option<Kind>, cycles: Vec<Vec<Request>>) -> Variant {
        let (on_floor, commands, calls_per_cycle): (bool, &'static [&'static str], f64) =
            match (name, kind) {
                (LAYOUT_FLOOR, Some(Kind::Read)) => {
                    (true, &["rwlock.floor.read", "rwlock.floor.unlock"], 2.0)
                }
                (LAYOUT_FLOOR, _) => (true, &["rwlock.floor.write", "rwlock.floor.unlock"], 2.0),
                ("module", Some(Kind::Read)) => (false, &["rwlock.read", "rwlock.unlock"], 2.0),
                ("module", _) => (false, &["rwlock.write", "rwlock.unlock"], 2.0),
                ("EVALSHA", _) => (false, &["evalsha"], 2.0),
                // MULTI and EXEC for each of the two requests.
                ("MULTI/EXEC", _) => (false, &["multi", "exec"], 4.0),
                _ => (false, &["hincrby"], 2.0),
            };
        Variant {
            name,
            kind,
            on_floor,
            commands,
            calls_per_cycle,
            cycles,
        }
    }
}

const LAYOUT_FLOOR: &str = "layout floor";

fn variants(s: &Scripts, with_layout_floor: bool) -> Vec<Variant> {
    type Cycle<'a> = &'a dyn Fn(Kind, &Names) -> Vec<Request>;
    let by_script = |kind, n: &Names| evalsha(kind, n, s);
    let mut ways: Vec<(&'static str, Cycle)> = vec![
        ("module", &module),
        ("EVALSHA", &by_script),
        ("MULTI/EXEC", &multi),
    ];
    if with_layout_floor {
        ways.insert(0, (LAYOUT_FLOOR, &layout_floor));
    }
    let all: Vec<Names> = (0..CLIENTS).map(names).collect();
    let mut out = Vec::new();
    for kind in [Kind::Read, Kind::Write] {
        for (name, cycle) in &ways {
            let cycles = all.iter().map(|n| cycle(kind, n)).collect();
            out.push(Variant::new(name, Some(kind), cycles));
        }
    }
    out.push(Variant::new(
        "HINCRBY",
        None,
        (0..CLIENTS).map(hincrby).collect(),
    ));
    out
}

/// What a ratio compares.
struct Metric {
    unit: &'static str,
    of: fn(&Measured) -> f64,
}

const COST: Metric = Metric {
    unit: "server us",
    of: |m| m.cost_us,
};
const RATE: Metric = Metric {
    unit: "cycles/s",
    of: |m| m.per_s,
};

/// One variant's run: throughput and the server's cost per cycle.
struct Measured {
    per_s: f64,
    /// The server process's CPU time per cycle, I/O included.
    cpu_us: f64,
    /// INFO commandstats' time per cycle: the commands' own execution.
    cost_us: f64,
    /// INFO commandstats' time per call of each command.
    per_command: Vec<f64>,
}

fn measure(server: &Server, v: &Variant, depth: usize, settings: &Settings) -> Measured {
    let mut control = Conn::connect(server.port);
    stats::reset(&mut control);
    let t = load::run(
        server.port,
        server.pid(),
        &v.cycles,
        depth,
        settings.warmup,
        settings.measure,
    );
    let counted = stats::read(&mut control);
    Measured {
        // Two requests make a cycle, for every variant.
        per_s: t.per_s / 2.0,
        cpu_us: t.cpu_us * 2.0,
        cost_us: counted.usec_per_call(v.commands) * v.calls_per_cycle,
        per_command: v
            .commands
            .iter()
            .map(|c| counted.usec_per_call(&[c]))
            .collect(),
    }
}

pub fn run(server: &Server, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let floor = floor_server(crate::SERVER_OPTIONS);
    match &floor {
        Some(f) => check_layout_floor(server.port, f.port),
        None => println!("  (no layout floor: build benches/floor, or set RWLOCK_FLOOR_MODULE)"),
    }
    let variants = variants(scripts, floor.is_some());
    let index = |name: &str, kind: Option<Kind>| {
        variants
            .iter()
            .position(|v| v.name == name && v.kind == kind)
            .expect("variant")
    };
    for depth in DEPTHS {
        // Every round runs every variant, in alternating order (ABBA), so
        // drift on the machine hits all alike; ratios are taken per round.
        let mut rounds: Vec<Vec<Measured>> = Vec::new();
        for round in 0..settings.rounds {
            let mut order: Vec<usize> = (0..variants.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut results: Vec<Option<Measured>> = (0..variants.len()).map(|_| None).collect();
            for i in order {
                let v = &variants[i];
                let on = match (&floor, v.on_floor) {
                    (Some(f), true) => f,
                    _ => server,
                };
                results[i] = Some(measure(on, v, depth, settings));
            }
            rounds.push(
                results
                    .into_iter()
                    .map(|m| m.expect("every variant ran"))
                    .collect(),
            );
        }
        let med = |f: &dyn Fn(&[Measured]) -> f64| {
            median(&mut rounds.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        let section = "cycles";
        let hincrby = index("HINCRBY", None);
        let hincrby_case = format!("HINCRBY +1/-1, depth {depth}");
        report.value(
            section,
            &hincrby_case,
            "HINCRBY",
            med(&|r| r[hincrby].per_s),
            "cycles/s",
        );
        report.value(
            section,
            &hincrby_case,
            "HINCRBY",
            med(&|r| r[hincrby].cost_us),
            "server us/cycle",
        );
        for kind in [Kind::Read, Kind::Write] {
            let case = format!("{} lock + unlock, depth {depth}", kind.label());
            let module = index("module", Some(kind));
            let script = index("EVALSHA", Some(kind));
            let multi = index("MULTI/EXEC", Some(kind));
            let layout = floor.is_some().then(|| index(LAYOUT_FLOOR, Some(kind)));
            let shown: Vec<usize> = [module, script, multi].into_iter().chain(layout).collect();
            for &i in &shown {
                report.value(
                    section,
                    &case,
                    variants[i].name,
                    med(&|r| r[i].per_s),
                    "cycles/s",
                );
            }
            for &i in &shown {
                let cpu = med(&|r| r[i].cpu_us);
                report.value(
                    section,
                    &case,
                    variants[i].name,
                    cpu,
                    "process CPU us/cycle",
                );
            }
            for &i in &shown {
                let cost = med(&|r| r[i].cost_us);
                report.value(section, &case, variants[i].name, cost, "server us/cycle");
            }
            // Server cost is judged once, pipelined: the depth changes the
            // I/O around the commands, not the commands' own work.
            let judged = |t: Target| (depth == 16).then_some(t);
            let (three_times, near_floor) =
                (judged(Target::AtLeast(3.0)), judged(Target::AtMost(1.1)));
            if depth == 16 {
                for i in [module].into_iter().chain(layout) {
                    for (c, command) in variants[i].commands.iter().enumerate() {
                        let cost = med(&|r| r[i].per_command[c]);
                        report.value(section, &case, command, cost, "server us/call");
                    }
                }
            }
            // Each ratio is a metric of one variant over the same metric of
            // another, taken per round.
            let mut ratios = vec![
                (COST, "EVALSHA / module", script, module, three_times),
                (COST, "MULTI/EXEC / module", multi, module, None),
                (COST, "module / HINCRBY", module, hincrby, None),
                (RATE, "module / EVALSHA", module, script, None),
                (RATE, "module / HINCRBY", module, hincrby, None),
            ];
            if let Some(layout) = layout {
                // How close the module comes to what the layout leaves any
                // implementation.
                ratios.extend([
                    (COST, "module / layout floor", module, layout, near_floor),
                    (COST, "layout floor / HINCRBY", layout, hincrby, None),
                    (RATE, "module / layout floor", module, layout, None),
                ]);
            }
            for (metric, name, a, b, target) in ratios {
                let value = med(&|r| (metric.of)(&r[a]) / (metric.of)(&r[b]));
                let name = format!("{name}, {}", metric.unit);
                report.ratio(section, &case, &name, value, target);
            }
        }
    }
}

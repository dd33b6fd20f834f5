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
pub const DEPTHS: [usize; 2] = [1, JUDGED_DEPTH];
/// The depth at which server cost is judged.
pub const JUDGED_DEPTH: usize = 16;
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

/// The commands of a cycle as INFO commandstats names them (a script's or a
/// transaction's own calls are inside their figure), each with its calls
/// per cycle.
pub type Calls = &'static [(&'static str, f64)];

/// One way to run a cycle, by every client.
pub struct Variant {
    pub name: &'static str,
    /// The case it runs: a lock's label, or "" for a reference of all cases.
    pub of: &'static str,
    /// Run on the floor's server rather than the module's.
    pub on_floor: bool,
    /// The commands whose server cost is judged.
    pub cost: Calls,
    /// The cycle's other commands, shown apart (Redisson's `DEL` of the
    /// unlock latch, which both sides send after a release).
    pub also: Calls,
    /// Requests per cycle (a MULTI/EXEC counts as one).
    pub requests: f64,
    /// Each client's requests, run round and round.
    pub cycles: Vec<Vec<Request>>,
}

/// An acquire and a release, each one request: the read-write lock's cycles.
fn rwlock_variant(name: &'static str, kind: Option<Kind>, cycles: Vec<Vec<Request>>) -> Variant {
    let (on_floor, cost): (bool, Calls) = match (name, kind) {
        (LAYOUT_FLOOR, Some(Kind::Read)) => (
            true,
            &[("rwlock.floor.read", 1.0), ("rwlock.floor.unlock", 1.0)],
        ),
        (LAYOUT_FLOOR, _) => (
            true,
            &[("rwlock.floor.write", 1.0), ("rwlock.floor.unlock", 1.0)],
        ),
        ("module", Some(Kind::Read)) => (false, &[("rwlock.read", 1.0), ("rwlock.unlock", 1.0)]),
        ("module", _) => (false, &[("rwlock.write", 1.0), ("rwlock.unlock", 1.0)]),
        ("EVALSHA", _) => (false, &[("evalsha", 2.0)]),
        // MULTI and EXEC for each of the two requests.
        ("MULTI/EXEC", _) => (false, &[("multi", 2.0), ("exec", 2.0)]),
        _ => (false, HINCRBY_CALLS),
    };
    Variant {
        name,
        of: kind.map_or("", Kind::label),
        on_floor,
        cost,
        also: &[],
        requests: 2.0,
        cycles,
    }
}

const LAYOUT_FLOOR: &str = "layout floor";
const HINCRBY_CALLS: Calls = &[("hincrby", 2.0)];

/// The reference every section's cycles are shown against: one native
/// command per acquire and per release.
pub fn hincrby_variant() -> Variant {
    Variant {
        name: "HINCRBY",
        of: "",
        on_floor: false,
        cost: HINCRBY_CALLS,
        also: &[],
        requests: 2.0,
        cycles: (0..CLIENTS).map(hincrby).collect(),
    }
}

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
            out.push(rwlock_variant(name, Some(kind), cycles));
        }
    }
    out.push(hincrby_variant());
    out
}

/// The variant `name` of case `of`.
pub fn index(variants: &[Variant], name: &str, of: &str) -> usize {
    variants
        .iter()
        .position(|v| v.name == name && v.of == of)
        .unwrap_or_else(|| panic!("no variant {name} of {of:?}"))
}

/// What a ratio compares.
#[derive(Clone, Copy)]
pub struct Metric {
    unit: &'static str,
    of: fn(&Measured) -> f64,
}

pub const COST: Metric = Metric {
    unit: "server us",
    of: |m| m.cost_us,
};
/// The cost with the cycle's other commands.
pub const WHOLE_COST: Metric = Metric {
    unit: "server us, whole cycle",
    of: |m| m.cost_us + m.also_us,
};
pub const RATE: Metric = Metric {
    unit: "cycles/s",
    of: |m| m.per_s,
};

/// A ratio to report: a metric of one variant (by index) over the same
/// metric of another, with its target if it has one.
pub type RatioOf<'a> = (Metric, &'a str, usize, usize, Option<Target>);

/// One variant's run: throughput and the server's cost per cycle.
pub struct Measured {
    per_s: f64,
    /// The server process's CPU time per cycle, I/O included.
    cpu_us: f64,
    /// INFO commandstats' time per cycle of the judged commands: their own
    /// execution.
    cost_us: f64,
    /// The same for the cycle's other commands.
    also_us: f64,
    /// INFO commandstats' time per call of each judged command.
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
    let per_call = |calls: Calls| -> Vec<f64> {
        calls
            .iter()
            .map(|(c, _)| counted.usec_per_call(&[c]))
            .collect()
    };
    let per_cycle = |calls: Calls| -> f64 {
        calls
            .iter()
            .zip(per_call(calls))
            .map(|((_, n), us)| n * us)
            .sum()
    };
    Measured {
        per_s: t.per_s / v.requests,
        cpu_us: t.cpu_us * v.requests,
        cost_us: per_cycle(v.cost),
        also_us: per_cycle(v.also),
        per_command: per_call(v.cost),
    }
}

/// Every variant's measurements, round by round.
pub struct Rounds(Vec<Vec<Measured>>);

impl Rounds {
    /// Runs every variant once per round, in alternating order (ABBA), so
    /// drift on the machine hits all alike; ratios are taken per round.
    pub fn measure(
        server: &Server,
        floor: Option<&Server>,
        variants: &[Variant],
        depth: usize,
        settings: &Settings,
    ) -> Rounds {
        let mut rounds = Vec::new();
        for round in 0..settings.rounds {
            let mut order: Vec<usize> = (0..variants.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut results: Vec<Option<Measured>> = (0..variants.len()).map(|_| None).collect();
            for i in order {
                let v = &variants[i];
                let on = match (floor, v.on_floor) {
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
        Rounds(rounds)
    }

    /// The median over rounds of `f` of a round.
    pub fn median(&self, f: impl Fn(&[Measured]) -> f64) -> f64 {
        median(&mut self.0.iter().map(|r| f(r)).collect::<Vec<_>>())
    }

    /// Throughput, server CPU and server cost per cycle of the variants
    /// `shown`, as figures of `case`.
    pub fn values(
        &self,
        report: &mut Report,
        (section, case): (&str, &str),
        variants: &[Variant],
        shown: &[usize],
    ) {
        type Figure = (fn(&Measured) -> f64, &'static str);
        let figures: [Figure; 3] = [
            (|m| m.per_s, "cycles/s"),
            (|m| m.cpu_us, "process CPU us/cycle"),
            (|m| m.cost_us, "server us/cycle"),
        ];
        for (figure, unit) in figures {
            for &i in shown {
                let value = self.median(|r| figure(&r[i]));
                report.value(section, case, variants[i].name, value, unit);
            }
        }
    }

    /// The server time per call of each judged command of the variants
    /// `shown`.
    pub fn per_call(
        &self,
        report: &mut Report,
        (section, case): (&str, &str),
        variants: &[Variant],
        shown: &[usize],
    ) {
        for &i in shown {
            for (c, (command, _)) in variants[i].cost.iter().enumerate() {
                let cost = self.median(|r| r[i].per_command[c]);
                // Two module variants may send the same commands, with other
                // options ("module, REQUEST"): their names tell them apart.
                let name = variants[i].name;
                let label = if name.starts_with("module, ") {
                    format!("{command} ({name})")
                } else {
                    command.to_string()
                };
                report.value(section, case, &label, cost, "server us/call");
            }
        }
    }

    /// Each ratio's median over rounds, taken per round.
    pub fn ratios(&self, report: &mut Report, (section, case): (&str, &str), ratios: &[RatioOf]) {
        for &(metric, name, a, b, target) in ratios {
            let value = self.median(|r| (metric.of)(&r[a]) / (metric.of)(&r[b]));
            let name = format!("{name}, {}", metric.unit);
            report.ratio(section, case, &name, value, target);
        }
    }
}

pub fn run(server: &Server, scripts: &Scripts, settings: &Settings, report: &mut Report) {
    let floor = floor_server(crate::SERVER_OPTIONS);
    match &floor {
        Some(f) => check_layout_floor(server.port, f.port),
        None => println!("  (no layout floor: build benches/floor, or set RWLOCK_FLOOR_MODULE)"),
    }
    let variants = variants(scripts, floor.is_some());
    let hincrby = index(&variants, "HINCRBY", "");
    let section = "cycles";
    for depth in DEPTHS {
        let rounds = Rounds::measure(server, floor.as_ref(), &variants, depth, settings);
        let hincrby_case = format!("HINCRBY +1/-1, depth {depth}");
        rounds.values(report, (section, &hincrby_case), &variants, &[hincrby]);
        for kind in [Kind::Read, Kind::Write] {
            let case = format!("{} lock + unlock, depth {depth}", kind.label());
            let at = (section, case.as_str());
            let module = index(&variants, "module", kind.label());
            let script = index(&variants, "EVALSHA", kind.label());
            let multi = index(&variants, "MULTI/EXEC", kind.label());
            let layout = floor
                .is_some()
                .then(|| index(&variants, LAYOUT_FLOOR, kind.label()));
            let shown: Vec<usize> = [module, script, multi].into_iter().chain(layout).collect();
            rounds.values(report, at, &variants, &shown);
            // Server cost is judged once, pipelined: the depth changes the
            // I/O around the commands, not the commands' own work.
            let judged = |t: Target| (depth == JUDGED_DEPTH).then_some(t);
            let (three_times, near_floor) =
                (judged(Target::AtLeast(3.0)), judged(Target::AtMost(1.1)));
            if depth == JUDGED_DEPTH {
                let with_calls: Vec<usize> = [module].into_iter().chain(layout).collect();
                rounds.per_call(report, at, &variants, &with_calls);
            }
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
            rounds.ratios(report, at, &ratios);
        }
    }
}

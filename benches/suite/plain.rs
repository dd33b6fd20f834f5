//! Uncontended cycles of the plain lock (acquire + release), 50 clients each
//! on its own lock: the module against EVALSHA of Redisson 4.7's `lock.lua`
//! and `unlock.lua`, judged by the server's cost per cycle (INFO
//! commandstats), with the suite's cycles machinery.
//!
//! Redisson 4.7 releases with an unlock latch: `unlock.lua` with a fresh
//! request id, then, once it has the reply, a `DEL` of the latch. Its cycle
//! is that, and the module's is `LOCK.UNLOCK … REQUEST` followed by the same
//! `DEL`; the `DEL` is outside the judged cost and shown apart. A cycle
//! without `REQUEST` is judged against the same scripts, as is a fenced
//! cycle (`FENCED`) against `fenced_lock.lua`.

use crate::cycles::{self, Calls, Rounds, Variant, CLIENTS, COST, RATE, WHOLE_COST};
use crate::kinds::{plain_channel, LEASE};
use crate::load::Request;
use crate::report::{Report, Settings, Target};
use crate::resp::{command, Expect};
use crate::scripts::PlainScripts;
use testkit::Server;

/// Redisson's latch lifetime by default: (timeout 3000 ms + retry interval
/// 1500 ms) × 3 attempts.
const LATCH_TTL: &str = "13500";
/// Request ids per client: Redisson draws a new one for every release, so
/// the names of latches do not repeat from one cycle to the next.
const REQUEST_IDS: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// `LOCK.ACQUIRE`, `LOCK.UNLOCK` without a latch.
    Module,
    /// `LOCK.ACQUIRE`, `LOCK.UNLOCK … REQUEST`, `DEL` of the latch.
    ModuleRequest,
    /// `lock.lua`, `unlock.lua`, `DEL` of the latch.
    Script,
}

/// One client's cycle (`REQUEST_IDS` of them when there is a latch).
fn cycle(way: Way, fenced: bool, client: usize, s: &PlainScripts) -> Vec<Request> {
    let kind = if fenced { "fenced" } else { "plain" };
    let lock = format!("bench:{kind}:{client}");
    let owner = format!("c{client}-0000-4000-8000-000000000000:1");
    let token = format!("redisson_lock_token:{}", testkit::prefix_of(&lock));
    let acquired = if fenced { Expect::NoError } else { Expect::Nil };
    let acquire = match (way, fenced) {
        (Way::Script, false) => command(&["EVALSHA", &s.lock, "1", &lock, LEASE, &owner]),
        (Way::Script, true) => {
            command(&["EVALSHA", &s.fenced_lock, "2", &lock, &token, LEASE, &owner])
        }
        (_, false) => command(&["LOCK.ACQUIRE", &lock, &owner, LEASE]),
        (_, true) => command(&["LOCK.ACQUIRE", &lock, &owner, LEASE, "FENCED"]),
    };
    let acquire = Request::new(acquire, vec![acquired]);
    if way == Way::Module {
        let release = command(&["LOCK.UNLOCK", &lock, &owner]);
        return vec![acquire, Request::new(release, vec![Expect::Int(1)])];
    }
    let channel = plain_channel(&lock);
    let mut out = Vec::new();
    for i in 0..REQUEST_IDS {
        // 32 hex digits, as Redisson's ids.
        let id = format!("{client:04x}{i:028x}");
        let latch = testkit::latch_key(&lock, &id);
        let release = match way {
            Way::Script => command(&[
                "EVALSHA", &s.unlock, "3", &lock, &channel, &latch, "0", LEASE, &owner, "PUBLISH",
                LATCH_TTL,
            ]),
            _ => command(&["LOCK.UNLOCK", &lock, &owner, "REQUEST", &id, LATCH_TTL]),
        };
        out.extend([
            acquire.clone(),
            Request::new(release, vec![Expect::Int(1)]),
            Request::new(command(&["DEL", &latch]), vec![Expect::Int(1)]),
        ]);
    }
    out
}

const MODULE: Calls = &[("lock.acquire", 1.0), ("lock.unlock", 1.0)];
const SCRIPTS: Calls = &[("evalsha", 2.0)];
const LATCH_DEL: Calls = &[("del", 1.0)];

fn variants(s: &PlainScripts) -> Vec<Variant> {
    let ways = [
        ("module", Way::Module, MODULE),
        ("module, REQUEST", Way::ModuleRequest, MODULE),
        ("EVALSHA", Way::Script, SCRIPTS),
    ];
    let mut out = Vec::new();
    for (fenced, of) in [(false, "plain"), (true, "fenced")] {
        for (name, way, cost) in ways {
            // The fenced lock's release is the plain one's: only its
            // latch form is judged.
            if fenced && way == Way::Module {
                continue;
            }
            let with_latch = way != Way::Module;
            out.push(Variant {
                name,
                of,
                on_floor: false,
                cost,
                also: if with_latch { LATCH_DEL } else { &[] },
                requests: if with_latch { 3.0 } else { 2.0 },
                cycles: (0..CLIENTS).map(|c| cycle(way, fenced, c, s)).collect(),
            });
        }
    }
    out.push(cycles::hincrby_variant());
    out
}

/// The section lock-cycles, at the depth the suite judges server cost at
/// only: the cycles' I/O is the read-write lock's, and the run stays short.
pub fn run(server: &Server, scripts: &PlainScripts, settings: &Settings, report: &mut Report) {
    let variants = variants(scripts);
    let at = |name, of| cycles::index(&variants, name, of);
    let hincrby = at("HINCRBY", "");
    let depth = cycles::JUDGED_DEPTH;
    let rounds = Rounds::measure(server, None, &variants, depth, settings);
    let section = "lock-cycles";
    let case = format!("HINCRBY +1/-1, depth {depth}");
    rounds.values(report, (section, &case), &variants, &[hincrby]);
    for (of, label) in [("plain", "plain lock"), ("fenced", "fenced lock")] {
        let case = format!("{label} + unlock, depth {depth}");
        let at_case = (section, case.as_str());
        let script = at("EVALSHA", of);
        // The module's cycles of this case, each against the script's.
        let modules: Vec<usize> = ["module", "module, REQUEST"]
            .into_iter()
            .filter(|name| variants.iter().any(|v| v.name == *name && v.of == of))
            .map(|name| at(name, of))
            .collect();
        let shown: Vec<usize> = modules.iter().copied().chain([script]).collect();
        rounds.values(report, at_case, &variants, &shown);
        rounds.per_call(report, at_case, &variants, &modules);
        for &m in &modules {
            let name = variants[m].name.replace(',', "");
            let (over, under, per) = (
                format!("EVALSHA / {name}"),
                format!("{name} / EVALSHA"),
                format!("{name} / HINCRBY"),
            );
            let ratios = [
                (COST, over.as_str(), script, m, Some(Target::AtLeast(3.0))),
                (WHOLE_COST, over.as_str(), script, m, None),
                (RATE, under.as_str(), m, script, None),
                (COST, per.as_str(), m, hincrby, None),
            ];
            rounds.ratios(report, at_case, &ratios);
        }
    }
}

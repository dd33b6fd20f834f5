//! Deadlock detection on the server (docs/design.md, contract §14): the
//! wait-for graph of `graph` walked over the registries of parked clients
//! (the queues' and the fair lines') and the locks' data, when a request is about to park and when a hold is
//! handed to an owner that has clients parked; and the last cycles found,
//! for `RWLOCK.DEADLOCKS`. Reads only: detection never writes a key, so a
//! replica (which parks nobody) has nothing to do with it.

use std::cell::RefCell;
use std::collections::VecDeque;

use super::graph::{self, Need, View, WaitRequest, Wants};
use super::lines;
use super::parking::Handle;
use super::registry::Registry;
use crate::config;
use crate::engine::holders;
use crate::engine::lock::Options;
use crate::engine::names::LockId;
use crate::engine::names::LockNames;
use crate::engine::queue::Hold;
use crate::engine::store::{Fields, Line};
use crate::metrics::{self, Counter};
use crate::server;

/// How many of the last cycles `RWLOCK.DEADLOCKS` shows.
pub const RECENT_KEPT: usize = 16;

/// What stops a place in a fair lock's line: every other holder of its
/// hash, which is the plain lock's.
const LINE_HOLD: Hold = Hold::Lock(Options {
    fenced: false,
    non_reentrant: false,
});

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static RECENT: RefCell<VecDeque<(i64, String)>> = const { RefCell::new(VecDeque::new()) };
}

/// The graph as the registries (the queues' and the fair lines') and the
/// locks' data show it now. Each lock is read through a store of its own
/// (`open`), closed after the read: a store keeps every key it opened and
/// looks them up one by one, which would make a walk over a thousand locks
/// quadratic. A handle is a parked client's, in one registry or the other.
struct Live<'r, O> {
    registry: &'r Registry<Handle>,
    open: O,
    /// The lock read last and its fields: a line of n waiters on one lock
    /// asks for its holders n + 1 times in a row.
    last: Option<(LockId, Fields)>,
}

impl<'r, O> Live<'r, O> {
    fn new(registry: &'r Registry<Handle>, open: O) -> Self {
        Live {
            registry,
            open,
            last: None,
        }
    }
}

impl<S: Line, O: FnMut() -> S> View<Handle> for Live<'_, O> {
    fn waiter(&self, handle: Handle) -> Option<Wants> {
        if let Some(w) = self.registry.waiter(handle) {
            let wants = std::iter::once((w.lock.clone(), w.hold))
                .chain(w.others.iter().cloned())
                .map(|(id, hold)| (id, Need::Hold(hold)))
                .collect();
            return Some((w.owner.clone(), wants));
        }
        let (owner, lock, _) = lines::waiter(handle)?;
        Some((owner, vec![(lock, Need::Line)]))
    }

    fn ahead(
        &mut self,
        lock: &LockId,
        need: Need,
        handle: Option<Handle>,
        owner: &[u8],
    ) -> Vec<Handle> {
        match need {
            Need::Hold(_) => self.registry.ahead(lock, handle),
            Need::Line => {
                let parked = lines::parked_on(lock);
                if parked.is_empty() {
                    return Vec::new();
                }
                let Ok(names) = LockNames::new(&lock.1) else {
                    return Vec::new();
                };
                // The line's order, not the parking order: a waiter may
                // have stood in the line before it parked, or joined again.
                let line = (self.open)().lrange(&names.fair_queue());
                let mine = line.iter().position(|w| w == owner).unwrap_or(line.len());
                let before = &line[..mine];
                parked
                    .into_iter()
                    .filter(|(_, o)| before.contains(o))
                    .map(|(h, _)| h)
                    .collect()
            }
        }
    }

    fn parked_by(&self, owner: &[u8]) -> Vec<Handle> {
        let mut out = self.registry.parked_by(owner).to_vec();
        out.extend(lines::parked_by(owner));
        out
    }

    fn holders(&mut self, lock: &LockId, owner: &[u8], need: Need) -> (Vec<Vec<u8>>, bool) {
        let hold = match need {
            Need::Hold(hold) => hold,
            Need::Line => LINE_HOLD,
        };
        let (_, fields) = match self.last.take() {
            Some(last) if last.0 == *lock => self.last.insert(last),
            _ => {
                let fields = holders::read(&mut (self.open)(), &lock.1);
                self.last.insert((lock.clone(), fields))
            }
        };
        holders::blockers_in(fields, owner, hold)
    }
}

/// The cycle a request by `owner` for `wants` (locks of the selected
/// database) would close by parking: its `DEADLOCK` error, recorded. None
/// when detection is off or no cycle would form.
pub fn on_park<S: Line>(
    registry: &Registry<Handle>,
    mut open: impl FnMut() -> S,
    owner: &[u8],
    wants: &[(LockId, Need)],
) -> Option<String> {
    if !config::deadlock_detection() {
        return None;
    }
    if dead_end(registry, &mut open, owner, wants) {
        return None;
    }
    let request = WaitRequest {
        owner,
        wants,
        parked: None,
    };
    let cycle = graph::find(&mut Live::new(registry, open), &request)?;
    let text = cycle.message();
    record(&text);
    Some(text)
}

/// The common wait, proven cycle-free with one read: a request for one
/// lock whose queue holds single-lock waiters only. Its walk could reach the
/// lock's holders (as owners) and the waiters queued there, whose own waits
/// lead to the same holders; an owner leads on only through its parked
/// clients. So when `owner` holds no part of the lock and none of its
/// holders has a client parked, no cycle can close, and a line of n waiters
/// costs no walk over them.
fn dead_end<S: Line>(
    registry: &Registry<Handle>,
    open: &mut impl FnMut() -> S,
    owner: &[u8],
    wants: &[(LockId, Need)],
) -> bool {
    let [(lock, Need::Hold(_))] = wants else {
        return false;
    };
    registry.single_only(lock)
        && holders::all(&mut open(), &lock.1)
            .iter()
            .all(|(who, _, _)| {
                who.as_slice() != owner
                    && registry.parked_by(who).is_empty()
                    && lines::parked_by(who).is_empty()
            })
}

/// The one cycle a request can close while nobody else is parked: its
/// owner's read hold of `lock` stopping its write hold (the upgrade, which
/// the caller found with `holders::upgrade`); recorded, as the `DEADLOCK`
/// error.
pub fn upgrade(owner: &[u8], lock: LockId) -> String {
    let cycle = graph::Cycle::<()> {
        steps: vec![graph::Step {
            owner: owner.to_vec(),
            lock,
            how: graph::How::HeldBy,
            other: owner.to_vec(),
        }],
        waiters: Vec::new(),
    };
    let text = cycle.message();
    record(&text);
    text
}

/// A deadlock's victim: a parked client of either registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    /// Queued for a hold (`waiting::registry`).
    Queued(Handle),
    /// In a fair lock's line (`waiting::lines`).
    InLine(Handle),
}

/// After `owner` took a hold (handed over, or taken at once) in database
/// `db`: the waiters behind that hold now wait for `owner`, which closes a
/// cycle when `owner` has a client parked (in a queue or a fair lock's
/// line) that waits, directly or through others, on them. The victim, the
/// most recently parked waiter of the cycle, with its `DEADLOCK` error
/// (recorded); None when there is none. One cycle at a time: the caller
/// removes the victim and asks again.
pub fn after_hold<S: Line>(
    registry: &Registry<Handle>,
    mut open: impl FnMut() -> S,
    db: i32,
    owner: &[u8],
) -> Option<(Victim, String)> {
    if !config::deadlock_detection() {
        return None;
    }
    // The common case, a hold taken by an owner with nobody parked, costs
    // one lookup (and one thread-local read for the fair lines).
    let queued = registry.parked_by(owner);
    let in_line = lines::parked_by(owner);
    if queued.is_empty() && in_line.is_empty() {
        return None;
    }
    let mut starts: Vec<(Handle, Vec<(LockId, Need)>)> = Vec::new();
    for &handle in queued {
        let Some(w) = registry.waiter(handle) else {
            continue;
        };
        let wants = std::iter::once((w.lock.clone(), w.hold))
            .chain(w.others.iter().cloned())
            .map(|(id, hold)| (id, Need::Hold(hold)))
            .collect();
        starts.push((handle, wants));
    }
    for handle in in_line {
        if let Some((_, lock, _)) = lines::waiter(handle) {
            starts.push((handle, vec![(lock, Need::Line)]));
        }
    }
    for (handle, wants) in starts {
        // The store reads the selected database only.
        if wants.first().is_none_or(|(id, _)| id.0 != db) {
            continue;
        }
        let request = WaitRequest {
            owner,
            wants: &wants,
            parked: Some(handle),
        };
        let live = &mut Live::new(registry, &mut open);
        let Some(cycle) = graph::find(live, &request) else {
            continue;
        };
        let victim = cycle
            .waiters
            .iter()
            .filter_map(|&h| match registry.waiter(h) {
                Some(w) => Some((w.seq, Victim::Queued(h))),
                None => lines::waiter(h).map(|(_, _, seq)| (seq, Victim::InLine(h))),
            })
            .max_by_key(|(seq, _)| *seq)?
            .1;
        let text = cycle.message();
        record(&text);
        return Some((victim, text));
    }
    None
}

/// Counts a cycle found and keeps it among the last `RECENT_KEPT`.
fn record(text: &str) {
    metrics::bump(Counter::Deadlocks);
    RECENT.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() == RECENT_KEPT {
            r.pop_front();
        }
        r.push_back((server::milliseconds(), text.to_string()));
    });
}

/// The last cycles found, the newest first: when (Unix ms) and the error
/// its victim got.
pub fn recent() -> Vec<(i64, String)> {
    RECENT.with(|r| r.borrow().iter().rev().cloned().collect())
}

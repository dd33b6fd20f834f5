//! Deadlock detection on the server (docs/design.md, contract §14): the
//! wait-for graph of `graph` walked over the registry of parked clients and
//! the locks' data, when a request is about to park and when a hold is
//! handed to an owner that has clients parked; and the last cycles found,
//! for `RWLOCK.DEADLOCKS`. Reads only: detection never writes a key, so a
//! replica (which parks nobody) has nothing to do with it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::hash::Hash;

use super::graph::{self, Request, View, Wants};
use super::registry::{LockId, Registry};
use crate::config;
use crate::engine::holders::blockers;
use crate::engine::queue::Hold;
use crate::engine::store::Store;
use crate::metrics::{self, Counter};
use crate::server;

/// How many of the last cycles `RWLOCK.DEADLOCKS` shows.
pub const RECENT_KEPT: usize = 16;

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static RECENT: RefCell<VecDeque<(i64, String)>> = const { RefCell::new(VecDeque::new()) };
}

/// The graph as the registry and the locks' data show it now. Each lock is
/// read through a store of its own (`open`), closed after the read: a store
/// keeps every key it opened and looks them up one by one, which would make
/// a walk over a thousand locks quadratic.
struct Live<'r, H, O> {
    registry: &'r Registry<H>,
    open: O,
}

impl<H: Copy + Eq + Hash, S: Store, O: FnMut() -> S> View<H> for Live<'_, H, O> {
    fn waiter(&self, handle: H) -> Option<Wants> {
        let w = self.registry.waiter(handle)?;
        let wants = std::iter::once((w.lock.clone(), w.hold))
            .chain(w.others.iter().cloned())
            .collect();
        Some((w.owner.clone(), wants))
    }

    fn ahead(&self, lock: &LockId, handle: Option<H>) -> Vec<H> {
        self.registry.ahead(lock, handle)
    }

    fn parked_by(&self, owner: &[u8]) -> Vec<H> {
        self.registry.parked_by(owner).to_vec()
    }

    fn holders(&mut self, lock: &LockId, owner: &[u8], hold: Hold) -> (Vec<Vec<u8>>, bool) {
        blockers(&mut (self.open)(), &lock.1, owner, hold)
    }
}

/// The cycle a request by `owner` for `wants` (locks of the selected
/// database) would close by parking: its `DEADLOCK` error, recorded. None
/// when detection is off or no cycle would form.
pub fn on_park<H: Copy + Eq + Hash, S: Store>(
    registry: &Registry<H>,
    open: impl FnMut() -> S,
    owner: &[u8],
    wants: &[(LockId, Hold)],
) -> Option<String> {
    if !config::deadlock_detection() {
        return None;
    }
    let request = Request {
        owner,
        wants,
        parked: None,
    };
    let cycle = graph::find(&mut Live { registry, open }, &request)?;
    let text = cycle.message();
    record(&text);
    Some(text)
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

/// After `owner` took a hold (handed over, or taken at once) in database
/// `db`: the waiters behind that hold now wait for `owner`, which closes a
/// cycle when `owner` has a client parked that waits, directly or through
/// others, on them. The victim, the most recently parked waiter of the
/// cycle, with its `DEADLOCK` error (recorded); None when there is none.
/// One cycle at a time: the caller removes the victim and asks again.
pub fn after_hold<H: Copy + Eq + Hash, S: Store>(
    registry: &Registry<H>,
    mut open: impl FnMut() -> S,
    db: i32,
    owner: &[u8],
) -> Option<(H, String)> {
    // The common case, a hold taken by an owner with nobody parked, costs
    // one lookup.
    if registry.parked_by(owner).is_empty() || !config::deadlock_detection() {
        return None;
    }
    for &handle in registry.parked_by(owner) {
        let Some(w) = registry.waiter(handle) else {
            continue;
        };
        // The store reads the selected database only.
        if w.lock.0 != db {
            continue;
        }
        let wants: Vec<(LockId, Hold)> = std::iter::once((w.lock.clone(), w.hold))
            .chain(w.others.iter().cloned())
            .collect();
        let request = Request {
            owner,
            wants: &wants,
            parked: Some(handle),
        };
        let live = &mut Live {
            registry,
            open: &mut open,
        };
        let Some(cycle) = graph::find(live, &request) else {
            continue;
        };
        let victim = cycle
            .waiters
            .iter()
            .copied()
            .max_by_key(|h| registry.waiter(*h).map_or(0, |w| w.seq))?;
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

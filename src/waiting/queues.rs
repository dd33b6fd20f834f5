//! Who waits in a lock's queue on this server: the queues' registry
//! (`registry`) as the module keeps it between commands, the recent waits'
//! lengths, and what inspection and `INFO` read of them. Apart from the
//! code that parks and serves the clients (`clients`), which alone changes
//! them, so that the readers need not import the serving path.

use std::cell::RefCell;

use redis_module::Context;

use super::parking::Handle;
use super::registry::{Registry, Waiter};
use super::stats::{Percentiles, Waits};
use crate::engine::names::{LockId, LockNames};
use crate::engine::queue::Hold;
use crate::server;

thread_local! {
    // Module code only ever runs on Redis's main thread.
    pub(super) static REGISTRY: RefCell<Registry<Handle>> = RefCell::new(Registry::default());
    static WAITS: RefCell<Waits> = RefCell::new(Waits::default());
}

/// A wait that began at `since` ended at `now` (Unix ms).
pub(super) fn ended(since: i64, now: i64) {
    WAITS.with(|w| w.borrow_mut().record(now - since));
}

/// Percentiles of the recent waits' lengths, for `INFO rwlock`.
pub fn wait_percentiles() -> Percentiles {
    WAITS.with(|w| w.borrow().percentiles())
}

pub(super) fn with<R>(f: impl FnOnce(&mut Registry<Handle>) -> R) -> R {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

/// `with`, unless the registry is borrowed already: a deadlock search reads
/// locks while it walks the registry, and a read may expire a key, whose
/// keyspace event comes back into this module within that read.
pub(super) fn try_with<R>(f: impl FnOnce(&mut Registry<Handle>) -> R) -> Option<R> {
    REGISTRY.with(|r| r.try_borrow_mut().ok().map(|mut r| f(&mut r)))
}

/// Nobody waits for any lock: the hot path asks this first.
pub fn idle() -> bool {
    with(|r| r.idle())
}

pub(super) fn lock_id(ctx: &Context, names: &LockNames) -> LockId {
    (server::selected_db(ctx), names.hash().to_vec())
}

/// True when other clients wait for this lock.
pub fn has_waiters(ctx: &Context, names: &LockNames) -> bool {
    if idle() {
        return false;
    }
    let id = lock_id(ctx, names);
    with(|r| r.has_waiters(&id))
}

/// What inspection shows of one parked client.
pub struct Shown {
    pub owner: Vec<u8>,
    pub hold: Hold,
    pub since: i64,
    pub deadline: Option<i64>,
    pub client: u64,
}

fn shown(w: &Waiter, hold: Hold) -> Shown {
    Shown {
        owner: w.owner.clone(),
        hold,
        since: w.since,
        deadline: w.deadline(),
        client: w.client,
    }
}

/// The clients parked on the lock `names` of the selected database, in
/// arrival order (the order they will be served in).
pub fn waiters_of(ctx: &Context, names: &LockNames) -> Vec<Shown> {
    if idle() {
        return Vec::new();
    }
    let id = lock_id(ctx, names);
    with(|r| {
        r.waiters_of(&id)
            .into_iter()
            .filter_map(|w| Some(shown(w, w.hold_of(&id)?)))
            .collect()
    })
}

/// Every lock with waiters in a queue: its database and name, how many
/// wait, since when the earliest has waited (Unix ms) and what the first
/// in line wants.
pub fn locks_waited_for() -> Vec<(LockId, usize, i64, Hold)> {
    with(|r| r.overview())
}

/// Parked clients, and locks they wait for, for `INFO rwlock`.
pub fn counts() -> (usize, usize) {
    with(|r| r.counts())
}

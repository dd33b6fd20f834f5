//! Who waits with `FAIRLOCK.ACQUIRE … BLOCK` on this server: the fair
//! lock's registry of parked waiters (docs/design.md, contract §13 "BLOCK"),
//! apart from the code that serves them (`waiting::fair`, which imports
//! `waiting::clients`), so that the deadlock search (`waiting::deadlock`),
//! the other kinds' waiting code and inspection read it, and fail a fair
//! waiter chosen as a deadlock's victim, without an import cycle.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;

use redis_module::Context;

use super::parking::{self, Handle, Outcome};
use crate::engine::agenda::{Agenda, Slot};
use crate::engine::fair;
use crate::engine::hold::GrantLatch;
use crate::engine::names::LockId;
use crate::engine::names::LockNames;
use crate::keyspace::RedisStore;
use crate::server;

/// One parked waiter.
#[derive(Clone)]
pub struct Parked {
    pub handle: Handle,
    pub owner: Vec<u8>,
    pub lease: i64,
    pub wait: i64,
    pub non_reentrant: bool,
    /// When its wait ends (server ms); None: no limit.
    pub ends: Option<i64>,
    /// `REQUEST id ttl`: the latch its grant records (docs/design.md §14.7).
    pub request: Option<GrantLatch>,
    /// Its place in the order of every parking (`registry::next_parking`).
    pub seq: u64,
    /// When it parked (Unix ms), for `LOCK.WAITING`.
    pub since: i64,
}

/// The parked waiters of one lock, in arrival order.
#[derive(Default)]
pub struct LockLine {
    pub parked: Vec<Parked>,
    /// Its next look's entry on the lines' agenda.
    pub look: Option<Slot>,
    /// Set when a parked waiter's entry may have left the line from outside
    /// (a flush, a DEL, a cancel): the next look checks every entry.
    pub lost: bool,
    /// Waiters that left while no write was possible (a disconnect, CLIENT
    /// UNBLOCK): the next look takes them out of the line.
    pub leaving: Vec<(Vec<u8>, i64)>,
}

/// Every lock with parked fair waiters.
#[derive(Default)]
pub struct Lines {
    pub locks: HashMap<LockId, LockLine>,
    /// Each lock's hash, queue and deadline keys → the lock.
    pub keys: HashMap<LockId, LockId>,
    /// Parked handle → its lock.
    pub handles: HashMap<Handle, LockId>,
    /// Parked handles by owner, for the wait-for graph: every hold taken
    /// while a fair waiter is parked asks it once.
    pub owners: HashMap<Vec<u8>, Vec<Handle>>,
    /// When each line's next look falls due, served by one timer
    /// (`server::timers`), as the queues' timeouts and deadlines are.
    pub agenda: Agenda<LockId>,
}

impl Lines {
    /// Files a parked waiter under its lock, handle and owner.
    pub fn park(&mut self, id: LockId, parked: Parked) {
        self.handles.insert(parked.handle, id.clone());
        self.owners
            .entry(parked.owner.clone())
            .or_default()
            .push(parked.handle);
        self.locks.entry(id).or_default().parked.push(parked);
    }
}

thread_local! {
    // Module code only ever runs on Redis's main thread.
    pub(super) static LINES: RefCell<Lines> = RefCell::new(Lines::default());
    /// True while any fair waiter is parked or leaving: the one check of
    /// the keyspace hook and of the other kinds' paths otherwise.
    static ANY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on the registry. Never held across a store access: a read may
/// expire a key, whose keyspace event comes back here.
pub fn with<R>(f: impl FnOnce(&mut Lines) -> R) -> R {
    LINES.with(|l| {
        let mut lines = l.borrow_mut();
        let result = f(&mut lines);
        ANY.with(|any| any.set(!lines.locks.is_empty()));
        result
    })
}

/// True while any fair waiter is parked (or leaving): one thread-local read.
#[inline]
pub fn any() -> bool {
    ANY.with(Cell::get)
}

/// Takes `handle` out of the registry; its wait ends with this caller.
pub fn unregister(id: &LockId, handle: Handle) -> Option<Parked> {
    with(|l| {
        l.handles.remove(&handle);
        let line = l.locks.get_mut(id)?;
        let at = line.parked.iter().position(|p| p.handle == handle)?;
        let parked = line.parked.remove(at);
        if let Some(handles) = l.owners.get_mut(&parked.owner) {
            handles.retain(|h| *h != handle);
            if handles.is_empty() {
                l.owners.remove(&parked.owner);
            }
        }
        Some(parked)
    })
}

/// A parked fair waiter as the deadlock search sees it: its owner, its
/// lock and its place in the order of parkings.
pub fn waiter(handle: Handle) -> Option<(Vec<u8>, LockId, u64)> {
    if !any() {
        return None;
    }
    with(|l| {
        let id = l.handles.get(&handle)?;
        let p = l
            .locks
            .get(id)?
            .parked
            .iter()
            .find(|p| p.handle == handle)?;
        Some((p.owner.clone(), id.clone(), p.seq))
    })
}

/// The fair waiters parked by `owner`.
pub fn parked_by(owner: &[u8]) -> Vec<Handle> {
    if !any() {
        return Vec::new();
    }
    with(|l| l.owners.get(owner).cloned().unwrap_or_default())
}

/// The fair waiters parked on `id`, in arrival order, with their owners.
pub fn parked_on(id: &LockId) -> Vec<(Handle, Vec<u8>)> {
    if !any() {
        return Vec::new();
    }
    with(|l| {
        l.locks.get(id).map_or_else(Vec::new, |line| {
            line.parked
                .iter()
                .map(|p| (p.handle, p.owner.clone()))
                .collect()
        })
    })
}

/// Every lock with parked fair waiters: how many wait, and since when the
/// earliest has waited (Unix ms), for `LOCK.WAITING`.
pub fn overview() -> Vec<(LockId, usize, i64)> {
    if !any() {
        return Vec::new();
    }
    with(|l| {
        l.locks
            .iter()
            .filter_map(|(id, line)| {
                let since = line.parked.iter().map(|p| p.since).min()?;
                Some((id.clone(), line.parked.len(), since))
            })
            .collect()
    })
}

/// Fails the parked fair waiter `handle`, chosen as the victim of a
/// deadlock that appeared without a new request, with `text`: answered at
/// once, it leaves the line as `fair_acquire_failed.lua` does (those
/// behind it move up by its `WAIT`) from a timer at 0 ms. Not here: the
/// caller may be in the middle of a command or a look whose store holds
/// the line's list open, and a list changed under an open handle is one
/// Redis 7.0 asserts on (or frees). The line's keyspace events then give
/// the lock a look, for the waiters behind it. False when it is not parked
/// here.
pub fn fail_victim(ctx: &Context, handle: Handle, text: String) -> bool {
    let Some(id) = with(|l| l.handles.get(&handle).cloned()) else {
        return false;
    };
    let Some(p) = unregister(&id, handle) else {
        return false;
    };
    // Registered until now, so parked: unblocked once, here.
    parking::answer_later(p.handle, Outcome::Error(text));
    ctx.create_timer(Duration::ZERO, leave_line, (id, p.owner, p.wait));
    true
}

/// A deadlock victim's entry leaves its lock's line: `FAIRLOCK.CANCEL` of
/// its owner with its `WAIT`, on the master (a replica gets the cancel's
/// effects), once writes are allowed.
fn leave_line(ctx: &Context, (id, owner, wait): (LockId, Vec<u8>, i64)) {
    let retry = |after| {
        ctx.create_timer(after, leave_line, (id.clone(), owner.clone(), wait));
    };
    if !server::may_write(ctx, retry) {
        return;
    }
    let Ok(names) = LockNames::new(&id.1) else {
        return;
    };
    server::select_db(ctx, id.0);
    let mut store = RedisStore::new(ctx);
    // A line retyped since is left as it is, as a timed-out wait's.
    let _ = fair::cancel(&mut store, &names, &owner, wait);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> LockId {
        (0, name.as_bytes().to_vec())
    }

    /// Parks `handle` of `owner` on `lock`, the `seq`th parking, at `since`.
    fn park(lock: &str, handle: Handle, owner: &str, seq: u64, since: i64) {
        let parked = Parked {
            handle,
            owner: owner.as_bytes().to_vec(),
            lease: 30_000,
            wait: 5_000,
            non_reentrant: false,
            ends: None,
            request: None,
            seq,
            since,
        };
        with(|l| l.park(id(lock), parked));
    }

    /// A registry with nothing in it: each test starts from one (the
    /// registry is a thread-local, and a test runner may reuse a thread).
    fn fresh() {
        with(|l| *l = Lines::default());
    }

    fn owners_of(handles: &[(Handle, Vec<u8>)]) -> Vec<(Handle, &str)> {
        handles
            .iter()
            .map(|(h, o)| (*h, std::str::from_utf8(o).expect("utf-8")))
            .collect()
    }

    #[test]
    fn an_empty_registry_answers_nothing() {
        fresh();
        assert!(!any());
        assert_eq!(waiter(1), None);
        assert!(parked_by(b"o1").is_empty());
        assert!(parked_on(&id("L")).is_empty());
        assert!(overview().is_empty());
        assert!(unregister(&id("L"), 1).is_none());
    }

    #[test]
    fn a_parked_waiter_is_found_by_handle_lock_and_owner() {
        fresh();
        park("L", 1, "o1", 10, 1_000);
        park("L", 2, "o2", 11, 900);
        park("M", 3, "o1", 12, 2_000);
        assert!(any());
        assert_eq!(waiter(2), Some((b"o2".to_vec(), id("L"), 11)));
        assert_eq!(waiter(3), Some((b"o1".to_vec(), id("M"), 12)));
        assert_eq!(waiter(4), None);
        // In arrival order, not by handle or time.
        assert_eq!(owners_of(&parked_on(&id("L"))), [(1, "o1"), (2, "o2")]);
        assert_eq!(parked_by(b"o1"), [1, 3]);
        let mut seen = overview();
        seen.sort();
        // Per lock: how many wait, and the earliest parking.
        assert_eq!(seen, [(id("L"), 2, 900), (id("M"), 1, 2_000)]);
    }

    #[test]
    fn unregistering_takes_a_waiter_out_of_every_index_once() {
        fresh();
        for (handle, owner) in [(1, "o1"), (2, "o1"), (3, "o2")] {
            park("L", handle, owner, handle as u64, 0);
        }
        let gone = unregister(&id("L"), 2).expect("parked");
        assert_eq!(
            (gone.handle, gone.owner.as_slice(), gone.seq),
            (2, &b"o1"[..], 2)
        );
        assert!(unregister(&id("L"), 2).is_none(), "only once");
        assert_eq!(waiter(2), None);
        assert_eq!(parked_by(b"o1"), [1]);
        assert_eq!(owners_of(&parked_on(&id("L"))), [(1, "o1"), (3, "o2")]);
        unregister(&id("L"), 1).expect("parked");
        // An owner with no parked waiter left is no key of the index.
        with(|l| assert!(!l.owners.contains_key(&b"o1"[..])));
        assert!(parked_by(b"o1").is_empty());
        assert_eq!(parked_by(b"o2"), [3]);
    }

    #[test]
    fn the_registry_is_busy_while_a_lock_keeps_its_line() {
        fresh();
        park("L", 1, "o1", 1, 0);
        unregister(&id("L"), 1).expect("parked");
        // The lock's line stays (its look, its leaving waiters) until the
        // look that finds it empty removes it: the hook still checks it.
        assert!(any());
        assert!(parked_on(&id("L")).is_empty());
        assert!(overview().is_empty(), "a line without parked waiters");
        with(|l| l.locks.remove(&id("L")));
        assert!(!any());
    }
}

//! Lease indexes of locks with many readers, kept between commands (see
//! `engine::index`), and forgotten on every write to a lock's keys the module
//! did not make: a keyspace event that is not its own (a Redisson script,
//! DEL, RENAME, EXPIRE, eviction, a replicated write), a flush, SWAPDB, a
//! load, a change of role. Lease keys running out are no such write.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::config::LEASE_INDEX_FROM;
use crate::effects::notify;
use crate::engine::index::LeaseIndex;
use crate::engine::names::{is_lease_key_of, looks_like_lease_key};

/// Leases indexed at most, over all locks (about 40 bytes each): past it a
/// lock is served by reading its lease keys, as without indexes.
const MAX_INDEXED_LEASES: usize = 1_000_000;

#[derive(Default)]
struct Indexes {
    /// By database, then lock name.
    by_db: HashMap<i32, HashMap<Vec<u8>, LeaseIndex>>,
    leases: usize,
}

impl Indexes {
    fn recount(&mut self) {
        self.leases = self
            .by_db
            .values()
            .flat_map(HashMap::values)
            .map(LeaseIndex::leases)
            .sum();
    }
}

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    static INDEXES: RefCell<Indexes> = RefCell::default();
}

fn with<R>(f: impl FnOnce(&mut Indexes) -> R) -> R {
    INDEXES.with(|i| f(&mut i.borrow_mut()))
}

/// How many leases a lock needs for its index to be kept, if any is.
pub fn index_from() -> Option<usize> {
    let from = LEASE_INDEX_FROM.load(Ordering::Relaxed);
    if from <= 0 || with(|i| i.leases >= MAX_INDEXED_LEASES) {
        return None;
    }
    usize::try_from(from).ok()
}

pub fn with_index<R>(db: i32, hash: &[u8], f: impl FnOnce(&mut LeaseIndex) -> R) -> Option<R> {
    with(|i| {
        let index = i.by_db.get_mut(&db)?.get_mut(hash)?;
        let before = index.leases();
        let r = f(index);
        let after = index.leases();
        i.leases = i.leases - before + after;
        Some(r)
    })
}

/// Whether any index is kept: the hot path asks this first.
pub fn any() -> bool {
    with(|i| !i.by_db.is_empty())
}

pub fn keep(db: i32, hash: &[u8], index: LeaseIndex) {
    with(|i| {
        i.by_db.entry(db).or_default().insert(hash.to_vec(), index);
        i.recount();
    });
}

pub fn forget(db: i32, hash: &[u8]) {
    with(|i| {
        let Some(locks) = i.by_db.get_mut(&db) else {
            return;
        };
        if let Some(index) = locks.remove(hash) {
            i.leases -= index.leases();
        }
        if locks.is_empty() {
            i.by_db.remove(&db);
        }
    });
}

/// Forgets every index (of one database, or all with `None`).
pub fn forget_all(db: Option<i32>) {
    with(|i| {
        match db {
            Some(db) => {
                i.by_db.remove(&db);
            }
            None => i.by_db.clear(),
        }
        i.recount();
    });
}

/// Locks indexed and leases in their indexes, for `INFO rwlock`.
pub fn counts() -> (usize, usize) {
    with(|i| (i.by_db.values().map(HashMap::len).sum(), i.leases))
}

/// Every keyspace event the module subscribes to: one that is not the
/// module's own and touches an indexed lock's hash or lease keys makes its
/// index stale. Lease keys expiring are accounted for by their deadlines.
pub fn on_keyspace_event(db: i32, event: &str, key: &[u8]) {
    if !any() || notify::raising() {
        return;
    }
    let lease = looks_like_lease_key(key);
    if lease && event == "expired" {
        return;
    }
    with(|i| {
        let Some(locks) = i.by_db.get_mut(&db) else {
            return;
        };
        locks.remove(key);
        if lease {
            locks.retain(|hash, _| !is_lease_key_of(hash, key));
        }
        if locks.is_empty() {
            i.by_db.remove(&db);
        }
        i.recount();
    });
}

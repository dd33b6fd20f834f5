//! Which holds each connection took with `SESSION`, and when each falls due
//! for renewal: the state the module keeps for session holds. Pure, so it
//! is tested without a server; the shell (`sessions`, `disconnect`)
//! reads the counts, renews and releases.
//!
//! A hold count is a stack: the owner's holds of one kind on one lock are
//! numbered 1..=count in the order they were taken, and an unlock gives
//! back the top one (the latest). A session hold is remembered by its
//! *level*, the owner's count right after it was taken. Whenever the module
//! sees the count drop to `c` (any unlock, a forced unlock, a deletion, an
//! expiry, a flush, the key replaced), every level above `c` is gone: those
//! holds were given back already. When a connection closes, the module
//! releases one hold per level it still has, never more than the count:
//! a non-session re-entry is never taken for a session hold, and another
//! owner's never touched (docs/design.md, contract §12).

use std::collections::{HashMap, HashSet};

use crate::engine::agenda::{Agenda, Slot};
use crate::engine::kinds::Kind;
use crate::engine::names::LockId;

/// A connection, by Redis's client id.
pub type ClientId = u64;

/// One owner's holds of one kind on one lock: what a session hold is part of.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bond {
    pub lock: LockId,
    pub kind: Kind,
    pub owner: Vec<u8>,
}

/// A connection's session holds of one bond.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The owner's count right after each session acquisition, ascending.
    levels: Vec<i64>,
    /// The lease of the latest, which renewals keep.
    lease: i64,
    /// When it is next renewed.
    renewal: Slot,
}

/// What a closed connection leaves to release: its bond, the levels of its
/// session holds, and the lease a hold still held after a release gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub bond: Bond,
    pub levels: Vec<i64>,
    pub lease: i64,
}

/// A renewal that fell due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renewal {
    pub bond: Bond,
    pub lease: i64,
}

#[derive(Default)]
pub struct Sessions {
    by_client: HashMap<ClientId, HashMap<Bond, Entry>>,
    /// The connections with session holds on each lock.
    by_lock: HashMap<LockId, HashSet<ClientId>>,
    /// Renewals.
    agenda: Agenda<(ClientId, Bond)>,
}

/// How often a hold with `lease` is renewed: every lease/3, as Redisson's
/// watchdog does, and never more than once a millisecond.
pub fn period(lease: i64) -> i64 {
    (lease / 3).max(1)
}

impl Sessions {
    /// No session hold anywhere: the hot path asks this first.
    pub fn idle(&self) -> bool {
        self.by_client.is_empty()
    }

    /// Whether the connection `client` has session holds.
    pub fn binds_client(&self, client: ClientId) -> bool {
        self.by_client.contains_key(&client)
    }

    /// `client` took a hold of `bond` with `SESSION`, leaving the owner's
    /// count at `level`, at `now`; it is renewed every lease/3 from now.
    pub fn bind(&mut self, client: ClientId, bond: Bond, level: i64, lease: i64, now: i64) {
        let slot = self
            .agenda
            .appoint(now + period(lease), (client, bond.clone()));
        self.by_lock
            .entry(bond.lock.clone())
            .or_default()
            .insert(client);
        let entries = self.by_client.entry(client).or_default();
        match entries.get_mut(&bond) {
            Some(entry) => {
                // A level at or above this one was given back unseen.
                entry.levels.retain(|&l| l < level);
                entry.levels.push(level);
                entry.lease = lease;
                let old = std::mem::replace(&mut entry.renewal, slot);
                self.agenda.cancel(&old);
            }
            None => {
                let entry = Entry {
                    levels: vec![level],
                    lease,
                    renewal: slot,
                };
                entries.insert(bond, entry);
            }
        }
    }

    /// The bonds held on `lock`, each once, to observe after a write to it.
    pub fn bonds_on(&self, lock: &LockId) -> Vec<Bond> {
        let Some(clients) = self.by_lock.get(lock) else {
            return Vec::new();
        };
        let mut bonds: Vec<Bond> = clients
            .iter()
            .filter_map(|c| self.by_client.get(c))
            .flat_map(|entries| entries.keys().filter(|b| &b.lock == lock).cloned())
            .collect();
        bonds.sort();
        bonds.dedup();
        bonds
    }

    /// The owner's count of `bond` is `count` now: session holds above it
    /// were given back, and are forgotten.
    pub fn observe(&mut self, bond: &Bond, count: i64) {
        self.each_entry(bond, |levels| levels.retain(|&l| l <= count));
    }

    /// The module released the session hold at `level` of `bond` for a
    /// closed connection: the holds above it move down one.
    pub fn released(&mut self, bond: &Bond, level: i64) {
        self.each_entry(bond, |levels| {
            for l in levels.iter_mut().filter(|l| **l > level) {
                *l -= 1;
            }
        });
    }

    /// The connection closed: takes every session hold it had.
    pub fn close(&mut self, client: ClientId) -> Vec<Orphan> {
        let Some(entries) = self.by_client.remove(&client) else {
            return Vec::new();
        };
        let mut orphans: Vec<Orphan> = entries
            .into_iter()
            .map(|(bond, entry)| {
                self.agenda.cancel(&entry.renewal);
                self.unlink(client, &bond.lock);
                Orphan {
                    bond,
                    levels: entry.levels,
                    lease: entry.lease,
                }
            })
            .collect();
        orphans.sort_by(|a, b| a.bond.cmp(&b.bond));
        orphans
    }

    /// Takes the renewals due by `now`, each put back on the agenda a
    /// period later; the timer that fired is gone.
    pub fn take_due(&mut self, now: i64) -> Vec<Renewal> {
        let due = self.agenda.take_due(now);
        let mut renewals = Vec::new();
        for (client, bond) in due {
            let Some(lease) = self
                .by_client
                .get(&client)
                .and_then(|e| e.get(&bond))
                .map(|e| e.lease)
            else {
                continue;
            };
            let slot = self
                .agenda
                .appoint(now + period(lease), (client, bond.clone()));
            if let Some(entry) = self
                .by_client
                .get_mut(&client)
                .and_then(|e| e.get_mut(&bond))
            {
                entry.renewal = slot;
            }
            renewals.push(Renewal { bond, lease });
        }
        renewals.sort_by(|a, b| a.bond.cmp(&b.bond));
        renewals.dedup_by(|a, b| a.bond == b.bond);
        renewals
    }

    /// The agenda, whose timer the shell arms.
    pub fn agenda(&mut self) -> &mut Agenda<(ClientId, Bond)> {
        &mut self.agenda
    }

    /// Forgets the session holds on the locks of `db` (all with `None`):
    /// their data went with a flush, a load or a change of role. The
    /// connections stay open; their closing releases nothing there.
    pub fn forget(&mut self, db: Option<i32>) {
        let locks: Vec<LockId> = self
            .by_lock
            .keys()
            .filter(|(d, _)| db.is_none_or(|db| *d == db))
            .cloned()
            .collect();
        for lock in locks {
            for bond in self.bonds_on(&lock) {
                self.observe(&bond, 0);
            }
        }
    }

    /// The session holds of `owner` on `lock`, by kind, for the INFO
    /// commands.
    pub fn bound(&self, lock: &LockId, owner: &[u8], kind: Kind) -> i64 {
        let Some(clients) = self.by_lock.get(lock) else {
            return 0;
        };
        clients
            .iter()
            .filter_map(|c| self.by_client.get(c))
            .flat_map(|entries| entries.iter())
            .filter(|(b, _)| &b.lock == lock && b.kind == kind && b.owner == owner)
            .map(|(_, e)| e.levels.len() as i64)
            .sum()
    }

    /// The levels `client` has of `bond`, ascending.
    #[cfg(test)]
    fn levels_of(&self, client: ClientId, bond: &Bond) -> Vec<i64> {
        self.by_client
            .get(&client)
            .and_then(|e| e.get(bond))
            .map(|e| e.levels.clone())
            .unwrap_or_default()
    }

    /// Connections with session holds, and those holds, for `INFO rwlock`.
    pub fn counts(&self) -> (usize, usize) {
        let holds = self
            .by_client
            .values()
            .flat_map(HashMap::values)
            .map(|e| e.levels.len())
            .sum();
        (self.by_client.len(), holds)
    }

    /// Runs `f` on the levels of every connection's entry of `bond`, then
    /// drops the entries left empty.
    fn each_entry(&mut self, bond: &Bond, mut f: impl FnMut(&mut Vec<i64>)) {
        let Some(clients) = self.by_lock.get(&bond.lock).cloned() else {
            return;
        };
        for client in clients {
            let Some(entries) = self.by_client.get_mut(&client) else {
                continue;
            };
            let Some(entry) = entries.get_mut(bond) else {
                continue;
            };
            f(&mut entry.levels);
            if !entry.levels.is_empty() {
                continue;
            }
            if let Some(entry) = entries.remove(bond) {
                self.agenda.cancel(&entry.renewal);
            }
            if entries.is_empty() {
                self.by_client.remove(&client);
            }
            let still = self
                .by_client
                .get(&client)
                .is_some_and(|e| e.keys().any(|b| b.lock == bond.lock));
            if !still {
                self.unlink(client, &bond.lock);
            }
        }
    }

    fn unlink(&mut self, client: ClientId, lock: &LockId) {
        if let Some(clients) = self.by_lock.get_mut(lock) {
            clients.remove(&client);
            if clients.is_empty() {
                self.by_lock.remove(lock);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bond(kind: Kind, owner: &str) -> Bond {
        Bond {
            lock: (0, b"L".to_vec()),
            kind,
            owner: owner.as_bytes().to_vec(),
        }
    }

    fn levels(orphans: &[Orphan]) -> Vec<(Kind, Vec<i64>)> {
        orphans
            .iter()
            .map(|o| (o.bond.kind, o.levels.clone()))
            .collect()
    }

    /// A registry where connection 1 holds `a:1`'s first hold of `kind` in a
    /// session (lease 900 ms, bound at 0): most cases start there.
    fn one_session_hold(kind: Kind) -> (Sessions, Bond) {
        let mut r = Sessions::default();
        let a = bond(kind, "a:1");
        r.bind(1, a.clone(), 1, 900, 0);
        (r, a)
    }

    #[test]
    fn an_empty_registry_is_idle() {
        let mut r = Sessions::default();
        assert!(r.idle());
        assert_eq!(r.counts(), (0, 0));
        assert_eq!(r.agenda().timer_needed(), None);
        assert_eq!(r.close(7), vec![]);
        assert_eq!(r.take_due(1_000), vec![]);
    }

    #[test]
    fn a_close_takes_exactly_the_connections_own_session_holds() {
        let (mut r, a) = one_session_hold(Kind::Lock);
        r.bind(1, bond(Kind::Read, "b:1"), 1, 900, 0);
        r.bind(2, bond(Kind::Read, "b:1"), 2, 900, 0);
        assert_eq!(r.counts(), (2, 3));
        assert!(!r.bonds_on(&(0, b"L".to_vec())).is_empty());
        assert!(r.binds_client(1) && !r.binds_client(3));
        assert_eq!(r.bound(&a.lock, b"b:1", Kind::Read), 2);
        let orphans = r.close(1);
        assert_eq!(
            levels(&orphans),
            vec![(Kind::Read, vec![1]), (Kind::Lock, vec![1])]
        );
        assert_eq!(orphans[1].lease, 900);
        assert_eq!(r.counts(), (1, 1), "the other connection keeps its own");
        assert_eq!(r.close(1), vec![], "closed once");
    }

    #[test]
    fn an_unlock_gives_back_the_latest_hold_first() {
        // A non-session hold at level 1, a session hold at level 2: the
        // owner's unlock gives back level 2, so the close releases nothing.
        let mut r = Sessions::default();
        let a = bond(Kind::Write, "a:1");
        r.bind(1, a.clone(), 2, 900, 0);
        r.observe(&a, 1);
        assert!(r.idle(), "the session hold was the one given back");
        // A session hold at level 1 under a non-session re-entry at 2:
        // the unlock gives back the re-entry, the session hold stays.
        r.bind(1, a.clone(), 1, 900, 0);
        r.observe(&a, 2);
        r.observe(&a, 1);
        assert_eq!(levels(&r.close(1)), vec![(Kind::Write, vec![1])]);
    }

    #[test]
    fn a_lock_gone_and_taken_again_keeps_no_old_session_hold() {
        let (mut r, a) = one_session_hold(Kind::Lock);
        // Deleted (FORCEUNLOCK, DEL, expiry): seen as a count of 0.
        r.observe(&a, 0);
        assert!(r.idle());
        assert_eq!(
            r.agenda().timer_needed(),
            None,
            "its renewal left the agenda"
        );
        assert_eq!(r.close(1), vec![]);
    }

    #[test]
    fn a_rebind_at_a_lower_level_drops_levels_given_back_unseen() {
        let (mut r, a) = one_session_hold(Kind::Read);
        r.bind(1, a.clone(), 2, 900, 0);
        r.bind(1, a.clone(), 2, 600, 10);
        assert_eq!(levels(&r.close(1)), vec![(Kind::Read, vec![1, 2])]);
    }

    #[test]
    fn a_release_for_one_connection_moves_the_others_holds_down() {
        let (mut r, a) = one_session_hold(Kind::Read);
        r.bind(2, a.clone(), 2, 900, 0);
        let orphans = r.close(1);
        assert_eq!(levels(&orphans), vec![(Kind::Read, vec![1])]);
        r.released(&a, 1);
        // The count is 1 now and connection 2's hold is that one.
        r.observe(&a, 1);
        assert_eq!(levels(&r.close(2)), vec![(Kind::Read, vec![1])]);
    }

    #[test]
    fn renewals_fall_due_every_third_of_the_lease() {
        let mut r = Sessions::default();
        let a = bond(Kind::Lock, "a:1");
        r.bind(1, a.clone(), 1, 900, 1_000);
        r.bind(2, bond(Kind::Read, "b:1"), 1, 30, 1_000);
        assert_eq!(r.agenda().timer_needed(), Some((None, 1_010)));
        r.agenda().set_timer((5, 1_010));
        assert_eq!(r.agenda().timer_needed(), None);
        let due = r.take_due(1_010);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].lease, 30);
        assert_eq!(r.agenda().timer_needed(), Some((None, 1_020)));
        let due = r.take_due(1_300);
        let kinds: Vec<Kind> = due.iter().map(|d| d.bond.kind).collect();
        assert_eq!(kinds, vec![Kind::Read, Kind::Lock]);
        assert_eq!(period(1), 1);
        r.observe(&a, 0);
        r.close(2);
        assert_eq!(r.agenda().timer_needed(), None, "nothing left to renew");
    }

    #[test]
    fn the_same_bond_renewed_for_two_connections_is_renewed_once() {
        let mut r = Sessions::default();
        let a = bond(Kind::Lock, "a:1");
        r.bind(1, a.clone(), 1, 300, 0);
        r.bind(2, a.clone(), 2, 300, 0);
        assert_eq!(r.take_due(100).len(), 1);
        assert_eq!(r.bonds_on(&a.lock), vec![a]);
    }

    #[test]
    fn a_flush_forgets_one_database_or_all() {
        let mut r = Sessions::default();
        r.bind(1, bond(Kind::Lock, "a:1"), 1, 300, 0);
        let other = Bond {
            lock: (3, b"L".to_vec()),
            ..bond(Kind::Lock, "a:1")
        };
        r.bind(1, other.clone(), 1, 300, 0);
        r.forget(Some(0));
        assert_eq!(r.counts(), (1, 1));
        assert_eq!(r.bonds_on(&other.lock), vec![other]);
        r.forget(None);
        assert!(r.idle());
        assert_eq!(r.agenda().timer_needed(), None);
    }

    /// One owner's holds of one kind on one lock, each tagged with the
    /// connection that bound it, if any: the stack an unlock pops.
    #[derive(Debug, Clone)]
    enum Op {
        Take { client: ClientId, session: bool },
        Unlock,
        Delete,
        Close(ClientId),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (1..4u64, any::<bool>()).prop_map(|(client, session)| Op::Take { client, session }),
            3 => Just(Op::Unlock),
            1 => Just(Op::Delete),
            2 => (1..4u64).prop_map(Op::Close),
        ]
    }

    proptest::proptest! {
        /// Against a model that knows which hold each connection bound: the
        /// registry's levels are always where that connection's holds are in
        /// the stack, and a close releases exactly them.
        #[test]
        fn levels_follow_the_holds_each_connection_bound(
            ops in proptest::collection::vec(op(), 1..60)
        ) {
            let a = bond(Kind::Lock, "a:1");
            let mut r = Sessions::default();
            let mut stack: Vec<Option<ClientId>> = Vec::new();
            let mut closed = std::collections::HashSet::new();
            for op in ops {
                match op {
                    Op::Take { client, session } => {
                        if closed.contains(&client) {
                            continue;
                        }
                        let tag = session.then_some(client);
                        stack.push(tag);
                        if session {
                            r.bind(client, a.clone(), stack.len() as i64, 900, 0);
                        }
                    }
                    Op::Unlock => {
                        stack.pop();
                        r.observe(&a, stack.len() as i64);
                    }
                    Op::Delete => {
                        stack.clear();
                        r.observe(&a, 0);
                    }
                    Op::Close(client) => {
                        closed.insert(client);
                        let count = stack.len() as i64;
                        for orphan in r.close(client) {
                            // As the shell releases: latest first, each one
                            // hold off the top.
                            for &level in orphan.levels.iter().rev().filter(|&&l| l <= count) {
                                r.released(&orphan.bond, level);
                                stack.remove(level as usize - 1);
                                r.observe(&a, stack.len() as i64);
                            }
                        }
                        proptest::prop_assert!(
                            !stack.contains(&Some(client)),
                            "a session hold of {client} left: {stack:?}"
                        );
                    }
                }
                for client in 1..4u64 {
                    let expected: Vec<i64> = stack
                        .iter()
                        .enumerate()
                        .filter(|(_, tag)| **tag == Some(client))
                        .map(|(i, _)| i as i64 + 1)
                        .collect();
                    proptest::prop_assert_eq!(r.levels_of(client, &a), expected);
                }
            }
        }
    }
}

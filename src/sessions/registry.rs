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

use std::collections::{BTreeSet, HashMap, HashSet};

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

/// What a connection bound of one bond: one variant per way a kind counts
/// what it hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// Holds of a lock (`Kind::Read`, `Write`, `Lock`): the owner's count
    /// right after each session acquisition, ascending, and the lease of
    /// the latest, which renewals keep and a release re-arms.
    Holds { levels: Vec<i64>, lease: i64 },
    /// A semaphore's permits (`Kind::Permits`, no owner): how many the
    /// connection took and has not given back. Nothing to renew.
    Permits(i64),
    /// A permit-expirable semaphore's permits (`Kind::PermitIds`, no
    /// owner): the ids the connection took and the module has not seen
    /// given back. Nothing to renew: each runs to its own lease.
    Ids(BTreeSet<Vec<u8>>),
}

impl Bound {
    /// How many holds or permits it binds.
    fn size(&self) -> i64 {
        match self {
            Bound::Holds { levels, .. } => levels.len() as i64,
            Bound::Permits(n) => *n,
            Bound::Ids(ids) => ids.len() as i64,
        }
    }
}

/// A connection's session holds or permits of one bond.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    bound: Bound,
    /// When its holds are next renewed; permits have no lease.
    renewal: Option<Slot>,
}

/// What a closed connection leaves to give back: its bond and what it
/// bound there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub bond: Bond,
    pub bound: Bound,
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

/// The bond of a semaphore's session permits: nobody's.
pub fn permits_of(lock: LockId) -> Bond {
    Bond {
        lock,
        kind: Kind::Permits,
        owner: Vec::new(),
    }
}

/// The bond of a permit-expirable semaphore's session permits: nobody's.
pub fn permit_ids_of(lock: LockId) -> Bond {
    Bond {
        lock,
        kind: Kind::PermitIds,
        owner: Vec::new(),
    }
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
        let holds = Bound::Holds {
            levels: vec![level],
            lease,
        };
        let entry = self.entry(client, bond, holds, Some(slot));
        if let Bound::Holds { levels, lease: l } = &mut entry.bound {
            // A level at or above this one was given back unseen.
            levels.retain(|&l| l < level);
            levels.push(level);
            *l = lease;
        }
        if let Some(old) = entry.renewal.replace(slot).filter(|old| *old != slot) {
            self.agenda.cancel(&old);
        }
    }

    /// `client` took `permits` of the semaphore `lock` with `SESSION`.
    pub fn bind_permits(&mut self, client: ClientId, lock: LockId, permits: i64) {
        let entry = self.entry(client, permits_of(lock), Bound::Permits(0), None);
        if let Bound::Permits(n) = &mut entry.bound {
            *n += permits;
        }
    }

    /// `client` gave back `permits` of the semaphore `lock`: as many of its
    /// session permits there, up to `permits`, are no longer bound. How
    /// many were.
    pub fn unbind_permits(&mut self, client: ClientId, lock: LockId, permits: i64) -> i64 {
        let bond = permits_of(lock);
        let mut unbound = 0;
        self.for_client(client, &bond, |bound| {
            if let Bound::Permits(n) = bound {
                unbound = permits.min(*n);
                *n -= unbound;
            }
        });
        unbound
    }

    /// `client` took the permits `ids` of the permit-expirable semaphore
    /// `lock` with `SESSION`.
    pub fn bind_ids(&mut self, client: ClientId, lock: LockId, ids: impl Iterator<Item = Vec<u8>>) {
        let entry = self.entry(
            client,
            permit_ids_of(lock),
            Bound::Ids(BTreeSet::new()),
            None,
        );
        if let Bound::Ids(bound) = &mut entry.bound {
            bound.extend(ids);
        }
    }

    /// Every id bound of `bond`, by any connection, ascending: what to
    /// look for in the semaphore's set after a write to it.
    pub fn ids_of(&self, bond: &Bond) -> Vec<Vec<u8>> {
        let mut ids: Vec<Vec<u8>> = self
            .by_lock
            .get(&bond.lock)
            .into_iter()
            .flatten()
            .filter_map(|c| self.by_client.get(c)?.get(bond))
            .flat_map(|entry| match &entry.bound {
                Bound::Ids(ids) => ids.iter().cloned().collect(),
                _ => Vec::new(),
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The permits `gone` of `bond` are no longer held (released by
    /// anyone, reclaimed at their expiry): whoever bound them, they are
    /// unbound, never given back on close.
    pub fn unbind_ids(&mut self, bond: &Bond, gone: &[Vec<u8>]) {
        self.each_entry(bond, |bound| {
            if let Bound::Ids(ids) = bound {
                for id in gone {
                    ids.remove(id);
                }
            }
        });
    }

    /// The entry of `client` for `bond`, made with `bound` and `renewal`
    /// when it has none, and listed by the lock.
    fn entry(
        &mut self,
        client: ClientId,
        bond: Bond,
        bound: Bound,
        renewal: Option<Slot>,
    ) -> &mut Entry {
        self.by_lock
            .entry(bond.lock.clone())
            .or_default()
            .insert(client);
        self.by_client
            .entry(client)
            .or_default()
            .entry(bond)
            .or_insert(Entry { bound, renewal })
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
    /// were given back, and are forgotten. For permits (and permit ids) the count is 1
    /// while the semaphore exists and 0 once it is gone (deleted, expired,
    /// replaced by another type): permits bound before are then nobody's to
    /// give back, even to a semaphore made again under the name.
    pub fn observe(&mut self, bond: &Bond, count: i64) {
        self.each_entry(bond, |bound| match bound {
            Bound::Holds { levels, .. } => levels.retain(|&l| l <= count),
            Bound::Permits(n) if count == 0 => *n = 0,
            Bound::Ids(ids) if count == 0 => ids.clear(),
            Bound::Permits(_) | Bound::Ids(_) => {}
        });
    }

    /// The module released the session hold at `level` of `bond` for a
    /// closed connection: the holds above it move down one.
    pub fn released(&mut self, bond: &Bond, level: i64) {
        self.each_entry(bond, |bound| {
            if let Bound::Holds { levels, .. } = bound {
                for l in levels.iter_mut().filter(|l| **l > level) {
                    *l -= 1;
                }
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
                if let Some(renewal) = &entry.renewal {
                    self.agenda.cancel(renewal);
                }
                self.unlink(client, &bond.lock);
                Orphan {
                    bond,
                    bound: entry.bound,
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
            let lease = self
                .by_client
                .get(&client)
                .and_then(|e| e.get(&bond))
                .map(|e| &e.bound);
            let Some(&Bound::Holds { lease, .. }) = lease else {
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
                entry.renewal = Some(slot);
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
            .map(|(_, e)| e.bound.size())
            .sum()
    }

    /// The session permits of the semaphore `lock`, by connection (in
    /// ascending id), for `LOCK.WAITING`.
    pub fn permits_on(&self, lock: &LockId) -> Vec<(ClientId, i64)> {
        let bond = permits_of(lock.clone());
        let mut bound: Vec<(ClientId, i64)> = self
            .by_lock
            .get(lock)
            .into_iter()
            .flatten()
            .filter_map(|c| Some((*c, self.by_client.get(c)?.get(&bond)?.bound.size())))
            .collect();
        bound.sort_unstable();
        bound
    }

    /// The levels `client` has of `bond`, ascending.
    #[cfg(test)]
    fn levels_of(&self, client: ClientId, bond: &Bond) -> Vec<i64> {
        match self.by_client.get(&client).and_then(|e| e.get(bond)) {
            Some(Entry {
                bound: Bound::Holds { levels, .. },
                ..
            }) => levels.clone(),
            _ => Vec::new(),
        }
    }

    /// Connections with session holds or permits, those holds, and those
    /// permits (of semaphores and permit-expirable semaphores alike), for
    /// `INFO rwlock`.
    pub fn counts(&self) -> (usize, i64, i64) {
        let (mut holds, mut permits) = (0, 0);
        for entry in self.by_client.values().flat_map(HashMap::values) {
            match entry.bound {
                Bound::Holds { .. } => holds += entry.bound.size(),
                Bound::Permits(_) | Bound::Ids(_) => permits += entry.bound.size(),
            }
        }
        (self.by_client.len(), holds, permits)
    }

    /// Runs `f` on what every connection bound of `bond`, then drops the
    /// entries left empty.
    fn each_entry(&mut self, bond: &Bond, mut f: impl FnMut(&mut Bound)) {
        let Some(clients) = self.by_lock.get(&bond.lock).cloned() else {
            return;
        };
        for client in clients {
            self.for_client(client, bond, &mut f);
        }
    }

    /// Runs `f` on what `client` bound of `bond`, if anything, then drops
    /// its entry when left empty.
    fn for_client(&mut self, client: ClientId, bond: &Bond, f: impl FnOnce(&mut Bound)) {
        let Some(entries) = self.by_client.get_mut(&client) else {
            return;
        };
        let Some(entry) = entries.get_mut(bond) else {
            return;
        };
        f(&mut entry.bound);
        if entry.bound.size() > 0 {
            return;
        }
        if let Some(renewal) = entries.remove(bond).and_then(|e| e.renewal) {
            self.agenda.cancel(&renewal);
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
            .map(|o| match &o.bound {
                Bound::Holds { levels, .. } => (o.bond.kind, levels.clone()),
                Bound::Permits(n) => (o.bond.kind, vec![*n]),
                Bound::Ids(ids) => (o.bond.kind, vec![ids.len() as i64]),
            })
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
        assert_eq!(r.counts(), (0, 0, 0));
        assert_eq!(r.agenda().timer_needed(), None);
        assert_eq!(r.close(7), vec![]);
        assert_eq!(r.take_due(1_000), vec![]);
    }

    #[test]
    fn a_close_takes_exactly_the_connections_own_session_holds() {
        let (mut r, a) = one_session_hold(Kind::Lock);
        r.bind(1, bond(Kind::Read, "b:1"), 1, 900, 0);
        r.bind(2, bond(Kind::Read, "b:1"), 2, 900, 0);
        assert_eq!(r.counts(), (2, 3, 0));
        assert!(!r.bonds_on(&(0, b"L".to_vec())).is_empty());
        assert!(r.binds_client(1) && !r.binds_client(3));
        assert_eq!(r.bound(&a.lock, b"b:1", Kind::Read), 2);
        let orphans = r.close(1);
        assert_eq!(
            levels(&orphans),
            vec![(Kind::Read, vec![1]), (Kind::Lock, vec![1])]
        );
        assert!(matches!(orphans[1].bound, Bound::Holds { lease: 900, .. }));
        assert_eq!(r.counts(), (1, 1, 0), "the other connection keeps its own");
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
        assert_eq!(r.counts(), (1, 1, 0));
        assert_eq!(r.bonds_on(&other.lock), vec![other]);
        r.forget(None);
        assert!(r.idle());
        assert_eq!(r.agenda().timer_needed(), None);
    }

    #[test]
    fn session_permits_add_up_and_a_release_unbinds_at_most_them() {
        let lock: LockId = (0, b"S".to_vec());
        let mut r = Sessions::default();
        r.bind_permits(1, lock.clone(), 2);
        r.bind_permits(1, lock.clone(), 1);
        r.bind_permits(2, lock.clone(), 4);
        assert_eq!(r.counts(), (2, 0, 7));
        assert_eq!(r.permits_on(&lock), vec![(1, 3), (2, 4)]);
        assert_eq!(r.agenda().timer_needed(), None, "permits are not renewed");
        assert_eq!(r.unbind_permits(1, lock.clone(), 2), 2);
        assert_eq!(
            r.unbind_permits(1, lock.clone(), 5),
            1,
            "only what it bound"
        );
        assert!(!r.binds_client(1), "nothing left bound");
        assert_eq!(
            r.unbind_permits(3, lock.clone(), 1),
            0,
            "another connection's"
        );
        assert_eq!(levels(&r.close(2)), vec![(Kind::Permits, vec![4])]);
        assert!(r.idle());
    }

    #[test]
    fn permits_of_a_semaphore_gone_are_forgotten_and_holds_beside_them_kept() {
        let lock: LockId = (0, b"S".to_vec());
        let (mut r, _) = one_session_hold(Kind::Lock);
        r.bind_permits(1, lock.clone(), 2);
        r.bind_permits(1, (3, b"S".to_vec()), 1);
        let bond = permits_of(lock.clone());
        assert_eq!(r.bonds_on(&lock), vec![bond.clone()]);
        r.observe(&bond, 1);
        assert_eq!(r.counts(), (1, 1, 3), "the semaphore is still there");
        r.observe(&bond, 0);
        assert_eq!(r.counts(), (1, 1, 1), "deleted: its permits are nobody's");
        assert!(r.bonds_on(&lock).is_empty());
        r.forget(Some(3));
        assert_eq!(r.counts(), (1, 1, 0), "flushed");
        assert_eq!(levels(&r.close(1)), vec![(Kind::Lock, vec![1])]);
    }

    #[test]
    fn permit_ids_are_unbound_by_whoever_gives_them_back() {
        let lock: LockId = (0, b"P".to_vec());
        let id = |n: u8| vec![n; 16];
        let mut r = Sessions::default();
        r.bind_ids(1, lock.clone(), [id(1), id(2)].into_iter());
        r.bind_ids(2, lock.clone(), [id(3)].into_iter());
        // A plain semaphore of the same name is another bond.
        r.bind_permits(1, lock.clone(), 4);
        assert_eq!(r.counts(), (2, 0, 7));
        let bond = permit_ids_of(lock.clone());
        assert_eq!(r.ids_of(&bond), vec![id(1), id(2), id(3)]);
        r.unbind_ids(&bond, &[id(2), id(3), id(9)]);
        assert!(!r.binds_client(2), "its one id was given back");
        assert_eq!(r.ids_of(&bond), vec![id(1)]);
        r.observe(&bond, 1);
        assert_eq!(r.ids_of(&bond), vec![id(1)], "the semaphore is still there");
        let orphans = r.close(1);
        assert_eq!(
            levels(&orphans),
            vec![(Kind::Permits, vec![4]), (Kind::PermitIds, vec![1])]
        );
        assert_eq!(orphans[1].bound, Bound::Ids([id(1)].into_iter().collect()));
        r.bind_ids(3, lock, [id(4)].into_iter());
        r.observe(&bond, 0);
        assert!(r.idle(), "a semaphore gone forgets its ids");
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
                            let Bound::Holds { levels, .. } = &orphan.bound else {
                                continue;
                            };
                            for &level in levels.iter().rev().filter(|&&l| l <= count) {
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

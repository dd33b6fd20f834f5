//! Who waits for which lock, and what falls due when: the state the module
//! keeps between commands for clients parked with `BLOCK`. Pure, so it is
//! tested without a server; `clients` parks and wakes the clients and keeps
//! the one timer.
//!
//! Wait timeouts and lock deadlines are entries of one agenda served by one
//! timer, set for the earliest: parking and serving a client, which happen on
//! every handoff, then mostly create and stop no timer (a stop would be on
//! the handoff's path).

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::engine::agenda::{Agenda, Slot};
use crate::engine::names::LockId;
use crate::engine::queue::{Hold, Ticket};

/// What falls due on the agenda; `H` is a parked client's handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due<H> {
    /// A parked client's wait ends.
    Timeout(H),
    /// A lock with waiters reaches its TTL: Redis drops it then.
    Deadline(LockId),
}

/// A parked client: the lock it waits for, what it asked for, its timeout,
/// if any, and with `SESSION` the connection its holds are bound to once
/// served. A multi-hold waits for several locks at once: the first listed
/// is `lock`, the others (with what it asks of each) `others`, empty for a
/// single acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub lock: LockId,
    pub hold: Hold,
    pub others: Vec<(LockId, Hold)>,
    timeout: Option<Slot>,
    pub session: Option<u64>,
    /// Who waits: the owner of its tickets.
    pub owner: Vec<u8>,
    /// Its place in the order of all parkings (the most recent is the
    /// victim of a deadlock that appears without a new request).
    pub seq: u64,
    /// When it parked (Unix ms) and its connection's id, for inspection
    /// (see [`Registry::stamp`]); 0 until stamped.
    pub since: i64,
    pub client: u64,
}

impl Waiter {
    /// Every lock it waits for, the first listed first.
    pub fn locks(&self) -> impl Iterator<Item = &LockId> {
        std::iter::once(&self.lock).chain(self.others.iter().map(|(id, _)| id))
    }

    /// When its wait times out (Unix ms), if it does.
    pub fn deadline(&self) -> Option<i64> {
        self.timeout.map(|(at, _)| at)
    }

    /// What it asks of `id`: the hold, or None when it does not wait for it.
    pub fn hold_of(&self, id: &LockId) -> Option<Hold> {
        std::iter::once((&self.lock, self.hold))
            .chain(self.others.iter().map(|(l, h)| (l, *h)))
            .find(|(l, _)| *l == id)
            .map(|(_, h)| h)
    }
}

struct Queue<H> {
    tickets: VecDeque<Ticket<H>>,
    deadline: Option<Slot>,
    /// A look at the lock is scheduled (its own timer, not the agenda's).
    soon: bool,
}

pub struct Registry<H> {
    queues: HashMap<LockId, Queue<H>>,
    /// Every parked client, by handle.
    waiting: HashMap<H, Waiter>,
    /// Wait timeouts and deadlines of locks with waiters.
    agenda: Agenda<Due<H>>,
    /// The lock a command is changing and then serving, whose own keyspace
    /// events need no second look.
    settling: Option<LockId>,
    /// Every parked client by its owner, for the wait-for graph.
    owners: HashMap<Vec<u8>, Vec<H>>,
}

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static PARKINGS: Cell<u64> = const { Cell::new(0) };
}

/// The next place in the order of every parking on this server, of this
/// registry's clients and of the fair lock's line (`waiting::lines`) alike:
/// a deadlock that appears without a new request fails the most recently
/// parked waiter of its cycle, whatever its kind.
pub fn next_parking() -> u64 {
    PARKINGS.with(|p| {
        let n = p.get() + 1;
        p.set(n);
        n
    })
}

impl<H> Default for Registry<H> {
    fn default() -> Self {
        Registry {
            queues: HashMap::new(),
            waiting: HashMap::new(),
            agenda: Agenda::default(),
            settling: None,
            owners: HashMap::new(),
        }
    }
}

impl<H: Copy + Eq + Hash> Registry<H> {
    /// The common case, checked before any allocation on the hot path.
    pub fn idle(&self) -> bool {
        self.queues.is_empty()
    }

    /// True when clients wait for this lock.
    pub fn has_waiters(&self, id: &LockId) -> bool {
        self.queues.get(id).is_some_and(|q| !q.tickets.is_empty())
    }

    /// Queues `ticket` (whose token is the client's handle) behind the
    /// lock's waiters, with a timeout at `ends` if any, bound to the
    /// connection `session` once served if any.
    pub fn park(&mut self, id: LockId, ticket: Ticket<H>, ends: Option<i64>, session: Option<u64>) {
        let handle = ticket.token;
        let timeout = ends.map(|at| self.agenda.appoint(at, Due::Timeout(handle)));
        let seq = self.note_owner(&ticket.owner, handle);
        self.waiting.insert(
            handle,
            Waiter {
                lock: id.clone(),
                hold: ticket.hold,
                others: Vec::new(),
                timeout,
                session,
                owner: ticket.owner.clone(),
                seq,
                since: 0,
                client: 0,
            },
        );
        self.enqueue(id, ticket);
    }

    /// Queues a multi-hold's `tickets` (one per lock, the first listed
    /// first, all with the client's handle and marked multi) behind each
    /// lock's waiters, with one timeout at `ends` if any. Every queue is in
    /// arrival order, so any two waiters stand in the same order in every
    /// queue they share: the earliest waiter is first in all of its queues,
    /// and no order of names can deadlock.
    pub fn park_all(
        &mut self,
        tickets: Vec<(LockId, Ticket<H>)>,
        ends: Option<i64>,
        session: Option<u64>,
    ) {
        let Some((first, head)) = tickets.first() else {
            return;
        };
        let handle = head.token;
        let seq = self.note_owner(&head.owner, handle);
        let waiter = Waiter {
            lock: first.clone(),
            hold: head.hold,
            others: tickets[1..]
                .iter()
                .map(|(id, t)| (id.clone(), t.hold))
                .collect(),
            timeout: ends.map(|at| self.agenda.appoint(at, Due::Timeout(handle))),
            session,
            owner: head.owner.clone(),
            seq,
            since: 0,
            client: 0,
        };
        self.waiting.insert(handle, waiter);
        for (id, ticket) in tickets {
            self.enqueue(id, ticket);
        }
    }

    /// The holds a multi-hold asks for, the first listed first, each with
    /// whether another waiter stands ahead of it in that lock's queue (never
    /// in `serving`, whose queue the caller has lent out, with this waiter
    /// at its head). None when it no longer waits.
    pub fn line_of(&self, handle: H, serving: &LockId) -> Option<Vec<(LockId, Hold, bool)>> {
        let waiter = self.waiting.get(&handle)?;
        let ahead = |id: &LockId| {
            id != serving
                && self
                    .queues
                    .get(id)
                    .and_then(|q| q.tickets.front())
                    .is_some_and(|t| t.token != handle)
        };
        let mut line = vec![(waiter.lock.clone(), waiter.hold, ahead(&waiter.lock))];
        for (id, hold) in &waiter.others {
            line.push((id.clone(), *hold, ahead(id)));
        }
        Some(line)
    }

    fn enqueue(&mut self, id: LockId, ticket: Ticket<H>) {
        self.queues
            .entry(id)
            .or_insert_with(|| Queue {
                tickets: VecDeque::new(),
                deadline: None,
                soon: false,
            })
            .tickets
            .push_back(ticket);
    }

    /// The lock's waiters, in arrival order, lent out while the lock machine
    /// serves them (it raises keyspace events, which re-enter the module).
    pub fn take_tickets(&mut self, id: &LockId) -> Option<VecDeque<Ticket<H>>> {
        self.queues
            .get_mut(id)
            .map(|q| std::mem::take(&mut q.tickets))
    }

    /// Puts back the waiters left after serving, ahead of any that queued
    /// meanwhile, and forgets the `served` ones; returns those that asked
    /// for `SESSION`, with their connection.
    pub fn return_tickets(
        &mut self,
        id: &LockId,
        mut left: VecDeque<Ticket<H>>,
        served: impl IntoIterator<Item = H>,
    ) -> Vec<(H, u64)> {
        if let Some(q) = self.queues.get_mut(id) {
            left.append(&mut q.tickets);
            q.tickets = left;
        }
        served
            .into_iter()
            .filter_map(|handle| Some((handle, self.forget(handle)?.session?)))
            .collect()
    }

    /// Drops an empty queue, or keeps the lock's deadline (`wanted`, when it
    /// has a TTL) on the agenda, so an expiry wakes the waiters without
    /// relying on Redis's lazy expiry.
    pub fn rearm(&mut self, id: &LockId, wanted: Option<i64>) {
        let Some(q) = self.queues.get_mut(id) else {
            return;
        };
        if q.tickets.is_empty() {
            if let Some(slot) = self.queues.remove(id).and_then(|q| q.deadline) {
                self.agenda.cancel(&slot);
            }
            return;
        }
        if q.deadline.map(|(at, _)| at) == wanted {
            return;
        }
        if let Some(slot) = q.deadline.take() {
            self.agenda.cancel(&slot);
        }
        if let Some(at) = wanted {
            let slot = self.agenda.appoint(at, Due::Deadline(id.clone()));
            if let Some(q) = self.queues.get_mut(id) {
                q.deadline = Some(slot);
            }
        }
    }

    /// What the first waiter of the lock's queue asks for, if any waits.
    pub fn first_hold(&self, id: &LockId) -> Option<Hold> {
        self.queues.get(id)?.tickets.front().map(|t| t.hold)
    }

    /// Notes that a look at the lock is scheduled; false when one was
    /// already, or nobody waits for it.
    pub fn mark_soon(&mut self, id: &LockId) -> bool {
        match self.queues.get_mut(id) {
            Some(q) if !q.soon => {
                q.soon = true;
                true
            }
            _ => false,
        }
    }

    /// True when nothing can have freed the lock for its waiters since
    /// their last look: none is scheduled, and its deadline (if any) is
    /// after `now`. True too when nobody waits for it.
    pub fn settled(&self, id: &LockId, now: i64) -> bool {
        self.queues
            .get(id)
            .is_none_or(|q| !q.soon && q.deadline.is_none_or(|(at, _)| now < at))
    }

    /// The scheduled look is happening; false when the queue is gone.
    pub fn soon_done(&mut self, id: &LockId) -> bool {
        self.queues.get_mut(id).map(|q| q.soon = false).is_some()
    }

    /// The lock's deadline fell due; false when the queue is gone.
    pub fn deadline_done(&mut self, id: &LockId) -> bool {
        self.queues.get_mut(id).map(|q| q.deadline = None).is_some()
    }

    /// Removes a parked client from the registry and its queue; its waiter,
    /// or None when it was already served or released.
    pub fn unregister(&mut self, handle: H) -> Option<Waiter> {
        let waiter = self.forget(handle)?;
        for id in waiter.locks() {
            if let Some(q) = self.queues.get_mut(id) {
                q.tickets.retain(|t| t.token != handle);
            }
        }
        Some(waiter)
    }

    /// Takes what fell due by `now` off the agenda, earliest first; the
    /// timer that fired is gone.
    pub fn take_due(&mut self, now: i64) -> Vec<Due<H>> {
        self.agenda.take_due(now).collect()
    }

    /// The agenda, whose timer the shell arms.
    pub fn agenda(&mut self) -> &mut Agenda<Due<H>> {
        &mut self.agenda
    }

    /// Marks `id` as changed by the running command, which serves it itself;
    /// returns the mark it replaces, to restore after.
    pub fn settle(&mut self, id: Option<LockId>) -> Option<LockId> {
        std::mem::replace(&mut self.settling, id)
    }

    /// Whether `key` of `db` is the lock the running command serves itself.
    pub fn settling(&self, db: i32, key: &[u8]) -> bool {
        self.settling
            .as_ref()
            .is_some_and(|(d, k)| *d == db && k.as_slice() == key)
    }

    /// The locks with waiters in `db`, or in every database with `None`.
    pub fn locks_in(&self, db: Option<i32>) -> Vec<LockId> {
        self.queues
            .keys()
            .filter(|(d, _)| db.is_none_or(|db| *d == db))
            .cloned()
            .collect()
    }

    /// Empties the registry: every waiter's handle (once, though a
    /// multi-hold stands in several queues), and the timer to stop.
    pub fn drain(&mut self) -> (Vec<H>, Option<u64>) {
        let all = std::mem::take(self);
        let handles = all.waiting.into_keys().collect();
        (handles, all.agenda.timer())
    }

    /// Parked clients, and locks they wait for. A queue emptied by a timeout
    /// or a disconnect lingers until its next look drops it: it has no
    /// waiter and is not counted.
    pub fn counts(&self) -> (usize, usize) {
        let locks = self.queues.values().filter(|q| !q.tickets.is_empty());
        (self.waiting.len(), locks.count())
    }

    /// Drops a parked client's registration and timeout (not its ticket).
    fn forget(&mut self, handle: H) -> Option<Waiter> {
        let waiter = self.waiting.remove(&handle)?;
        if let Some(slot) = waiter.timeout {
            self.agenda.cancel(&slot);
        }
        if let Some(handles) = self.owners.get_mut(&waiter.owner) {
            handles.retain(|h| *h != handle);
            if handles.is_empty() {
                self.owners.remove(&waiter.owner);
            }
        }
        Some(waiter)
    }

    /// Files a parking under its owner; its place in the order of parkings.
    fn note_owner(&mut self, owner: &[u8], handle: H) -> u64 {
        match self.owners.get_mut(owner) {
            Some(handles) => handles.push(handle),
            None => {
                self.owners.insert(owner.to_vec(), vec![handle]);
            }
        }
        next_parking()
    }

    /// Notes when a parked client began waiting (Unix ms) and its
    /// connection's id, which inspection shows.
    pub fn stamp(&mut self, handle: H, since: i64, client: u64) {
        if let Some(w) = self.waiting.get_mut(&handle) {
            w.since = since;
            w.client = client;
        }
    }

    /// The clients queued on `id`, in arrival order.
    pub fn waiters_of(&self, id: &LockId) -> Vec<&Waiter> {
        let Some(q) = self.queues.get(id) else {
            return Vec::new();
        };
        q.tickets
            .iter()
            .filter_map(|t| self.waiting.get(&t.token))
            .collect()
    }

    /// Every lock with waiters, with how many wait, when the earliest
    /// still waiting parked and what the first in line wants of it.
    pub fn overview(&self) -> Vec<(LockId, usize, i64, Hold)> {
        self.queues
            .iter()
            .filter_map(|(id, q)| {
                let since = q
                    .tickets
                    .iter()
                    .filter_map(|t| self.waiting.get(&t.token))
                    .map(|w| w.since)
                    .min()?;
                let head = q.tickets.front()?.hold;
                Some((id.clone(), q.tickets.len(), since, head))
            })
            .collect()
    }

    /// A parked client, by handle.
    pub fn waiter(&self, handle: H) -> Option<&Waiter> {
        self.waiting.get(&handle)
    }

    /// The clients parked by `owner` (none: empty).
    pub fn parked_by(&self, owner: &[u8]) -> &[H] {
        self.owners.get(owner).map_or(&[], Vec::as_slice)
    }

    /// True when every client queued on `id` waits for that lock alone (no
    /// multi-hold stands in its queue).
    pub fn single_only(&self, id: &LockId) -> bool {
        self.queues
            .get(id)
            .is_none_or(|q| q.tickets.iter().all(|t| !t.multi))
    }

    /// The clients queued on `id` before `handle`, in arrival order (all of
    /// them for `None`, or when `handle` is not queued there).
    pub fn ahead(&self, id: &LockId, handle: Option<H>) -> Vec<H> {
        let Some(q) = self.queues.get(id) else {
            return Vec::new();
        };
        q.tickets
            .iter()
            .map(|t| t.token)
            .take_while(|t| Some(*t) != handle)
            .collect()
    }
}

#[cfg(test)]
mod tests;

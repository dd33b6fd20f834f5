//! The read leases of one lock, remembered between commands.
//!
//! Releasing a read hold while others remain gives the lock the TTL of the
//! longest lease still running, and Redisson's script finds it by reading the
//! TTL of every reader's every lease key: a read unlock costs O(holds). The
//! lock machine reads them once, keeps what it found here, and from then on
//! updates the index with its own writes, so later unlocks cost O(log holds).
//!
//! An index is only as good as the knowledge that nothing else wrote the
//! lock: the store keeping it must forget it on any write it did not make
//! (a Redisson script, DEL, a flush), and the machine checks the field count
//! and the caller's hold count against the hash before trusting it. Lease
//! keys running out need no forgetting: deadlines are absolute, and a lease
//! whose deadline has passed no longer counts.

use std::collections::{BTreeMap, HashMap};

/// Each hold field's lease deadlines, hold 1 first (`None`: the lease key
/// was missing or had no TTL, so it never counts), and every deadline in
/// order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseIndex {
    holds: HashMap<Vec<u8>, Vec<Option<i64>>>,
    deadlines: BTreeMap<i64, u32>,
    leases: usize,
}

impl LeaseIndex {
    /// Records a hold field as the hash has it, with the deadline of each
    /// of its leases, hold 1 first.
    pub fn insert(&mut self, field: &[u8], deadlines: Vec<Option<i64>>) {
        if let Some(old) = self.holds.remove(field) {
            old.iter().flatten().for_each(|&d| self.forget(d));
            self.leases -= old.len();
        }
        deadlines.iter().flatten().for_each(|&d| self.remember(d));
        self.leases += deadlines.len();
        self.holds.insert(field.to_vec(), deadlines);
    }

    /// Hold fields known, `mode` not counted.
    pub fn fields(&self) -> usize {
        self.holds.len()
    }

    /// Leases known, for the store's memory budget.
    pub fn leases(&self) -> usize {
        self.leases
    }

    /// The hold count of `field` as the index knows it (0 if absent).
    pub fn count(&self, field: &[u8]) -> i64 {
        self.holds.get(field).map_or(0, |d| d.len() as i64)
    }

    /// The latest lease deadline, whether or not it has passed.
    pub fn latest(&self) -> Option<i64> {
        self.deadlines.keys().next_back().copied()
    }

    /// Hold number `count(field) + 1` taken, with its lease.
    pub fn push(&mut self, field: &[u8], deadline: i64) {
        self.remember(deadline);
        self.leases += 1;
        match self.holds.get_mut(field) {
            Some(deadlines) => deadlines.push(Some(deadline)),
            None => {
                self.holds.insert(field.to_vec(), vec![Some(deadline)]);
            }
        }
    }

    /// The last hold of `field` released (its lease key deleted); the field
    /// goes with its last hold.
    pub fn pop(&mut self, field: &[u8]) {
        let Some(deadlines) = self.holds.get_mut(field) else {
            return;
        };
        let last = deadlines.pop();
        if deadlines.is_empty() {
            self.holds.remove(field);
        }
        if let Some(last) = last {
            self.leases -= 1;
            if let Some(d) = last {
                self.forget(d);
            }
        }
    }

    /// Every lease of `field` still running at `now` extended to
    /// `deadline`, as RENEW does with PEXPIREAT; a lease key gone stays gone.
    pub fn renew(&mut self, field: &[u8], now: i64, deadline: i64) {
        let Some(deadlines) = self.holds.get_mut(field) else {
            return;
        };
        let mut old = Vec::new();
        for lease in deadlines.iter_mut() {
            if let Some(d) = *lease {
                old.push(d);
                // Redis keeps a key until the clock is past its deadline.
                *lease = (d >= now).then_some(deadline);
            }
        }
        let renewed = deadlines.iter().flatten().count();
        for d in old {
            self.forget(d);
        }
        for _ in 0..renewed {
            self.remember(deadline);
        }
    }

    fn remember(&mut self, deadline: i64) {
        *self.deadlines.entry(deadline).or_insert(0) += 1;
    }

    fn forget(&mut self, deadline: i64) {
        if let Some(n) = self.deadlines.get_mut(&deadline) {
            *n -= 1;
            if *n == 0 {
                self.deadlines.remove(&deadline);
            }
        }
    }
}

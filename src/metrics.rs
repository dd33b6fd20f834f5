//! Counters for `INFO rwlock`: plain relaxed atomics, one increment per
//! command at most, cheap enough to keep on. Module code runs on Redis's main
//! thread only, so the counts need no ordering with anything else.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::hold::Granted;
use crate::engine::queue::Hold;
use crate::engine::rwlock::{Release, Unlocked};

/// Every counter, in the order `INFO` lists them.
#[derive(Clone, Copy)]
pub enum Counter {
    ReadAcquired,
    WriteAcquired,
    LockAcquired,
    Reentries,
    TokensIssued,
    Refused,
    Unlocks,
    UnlocksNotHeld,
    UnlocksReplayed,
    Renewals,
    RenewalsNotHeld,
    ForceUnlocks,
    WaitsStarted,
    WaitsServed,
    WaitsTimedOut,
    WaitsAborted,
    WaitRechecks,
    SessionBinds,
    SessionRenewals,
    SessionReleases,
    /// Session permits given back when their connection closed (permits,
    /// not calls; contract §15.6).
    SessionPermitsReleased,
    FairAcquired,
    FairQueued,
    FairCancels,
    /// Permits taken by `SEMAPHORE.ACQUIRE`, and given back by
    /// `SEMAPHORE.RELEASE` (calls, not permits; contract §15).
    PermitsAcquired,
    PermitsReleased,
    /// `LATCH.AWAIT` calls answered 1, at once or after a wait.
    LatchAwaited,
    /// Cycles of waits found (contract §14).
    Deadlocks,
}

const COUNTERS: usize = Counter::Deadlocks as usize + 1;

static COUNTS: [AtomicU64; COUNTERS] = [const { AtomicU64::new(0) }; COUNTERS];

/// One more of `counter`.
pub fn bump(counter: Counter) {
    COUNTS[counter as usize].fetch_add(1, Ordering::Relaxed);
}

/// `n` more of `counter`.
pub fn add(counter: Counter, n: u64) {
    COUNTS[counter as usize].fetch_add(n, Ordering::Relaxed);
}

pub fn get(counter: Counter) -> u64 {
    COUNTS[counter as usize].load(Ordering::Relaxed)
}

/// A hold taken, at once or handed to a waiter.
pub fn acquired(hold: Hold, granted: Granted) {
    bump(match hold {
        Hold::Read => Counter::ReadAcquired,
        Hold::Write { .. } => Counter::WriteAcquired,
        Hold::Lock(_) => Counter::LockAcquired,
        Hold::Semaphore { .. } | Hold::Permit { .. } => Counter::PermitsAcquired,
        Hold::Latch => Counter::LatchAwaited,
    });
    if granted.reentry {
        bump(Counter::Reentries);
    }
    if granted.token.is_some() {
        bump(Counter::TokensIssued);
    }
}

pub fn unlocked(outcome: Unlocked) {
    bump(match outcome {
        Unlocked::Ran(Release::StillHeld | Release::Released) => Counter::Unlocks,
        Unlocked::Ran(Release::NotLocked | Release::NotHeld) => Counter::UnlocksNotHeld,
        Unlocked::Replayed(_) => Counter::UnlocksReplayed,
    });
}

pub fn renewed(held: bool) {
    bump(if held {
        Counter::Renewals
    } else {
        Counter::RenewalsNotHeld
    });
}

//! Counters for `INFO rwlock`: plain relaxed atomics, one increment per
//! command at most, cheap enough to keep on. Module code runs on Redis's main
//! thread only, so the counts need no ordering with anything else.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::raw;

use crate::blocking;
use crate::core::lock::{Mode, Release, Unlocked};
use crate::leases;
use crate::subscription;

/// Every counter, in the order `INFO` lists them.
#[derive(Clone, Copy)]
enum Counter {
    ReadAcquired,
    WriteAcquired,
    Reentries,
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
}

const COUNTERS: usize = Counter::WaitRechecks as usize + 1;

static COUNTS: [AtomicU64; COUNTERS] = [const { AtomicU64::new(0) }; COUNTERS];

fn bump(counter: Counter) {
    COUNTS[counter as usize].fetch_add(1, Ordering::Relaxed);
}

fn get(counter: Counter) -> u64 {
    COUNTS[counter as usize].load(Ordering::Relaxed)
}

/// A hold taken, at once or handed to a waiter.
pub fn acquired(mode: Mode, reentry: bool) {
    bump(match mode {
        Mode::Read => Counter::ReadAcquired,
        Mode::Write => Counter::WriteAcquired,
    });
    if reentry {
        bump(Counter::Reentries);
    }
}

/// An acquisition answered at once with the lock's PTTL (no wait).
pub fn refused() {
    bump(Counter::Refused);
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

/// A lock deleted by `RWLOCK.FORCEUNLOCK`.
pub fn force_unlocked() {
    bump(Counter::ForceUnlocks);
}

pub fn wait_started() {
    bump(Counter::WaitsStarted);
}

pub fn wait_served() {
    bump(Counter::WaitsServed);
}

pub fn wait_timed_out() {
    bump(Counter::WaitsTimedOut);
}

pub fn wait_aborted() {
    bump(Counter::WaitsAborted);
}

/// A keyspace event or a flush on a lock with waiters, outside a release
/// that serves them itself: its waiters get another look.
pub fn wait_recheck() {
    bump(Counter::WaitRechecks);
}

/// `INFO rwlock`: the sections `rwlock_locks` and `rwlock_waiting`; Redis
/// prefixes every field with `rwlock_`.
///
/// # Safety
/// Redis calls it, on the main thread, with a live info context.
pub unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let locks = [
        ("read_acquired", Counter::ReadAcquired),
        ("write_acquired", Counter::WriteAcquired),
        ("reentries", Counter::Reentries),
        ("refused", Counter::Refused),
        ("unlocks", Counter::Unlocks),
        ("unlocks_not_held", Counter::UnlocksNotHeld),
        ("unlocks_replayed", Counter::UnlocksReplayed),
        ("renewals", Counter::Renewals),
        ("renewals_not_held", Counter::RenewalsNotHeld),
        ("force_unlocks", Counter::ForceUnlocks),
    ];
    raw::add_info_section(ctx, Some("locks"));
    for (name, counter) in locks {
        raw::add_info_field_unsigned_long_long(ctx, name, get(counter));
    }
    let (indexed_locks, indexed_leases) = leases::counts();
    raw::add_info_field_unsigned_long_long(ctx, "lease_indexes", indexed_locks as u64);
    raw::add_info_field_unsigned_long_long(ctx, "indexed_leases", indexed_leases as u64);
    let (waiters, queues) = blocking::counts();
    let waiting = [
        ("waiters", waiters as u64),
        ("locks_with_waiters", queues as u64),
        ("waits_started", get(Counter::WaitsStarted)),
        ("waits_served", get(Counter::WaitsServed)),
        ("waits_timed_out", get(Counter::WaitsTimedOut)),
        ("waits_aborted", get(Counter::WaitsAborted)),
        ("wait_rechecks", get(Counter::WaitRechecks)),
        // 1 once a waiter or a lease index made the module watch every write.
        ("keyspace_subscribed", u64::from(subscription::subscribed())),
    ];
    raw::add_info_section(ctx, Some("waiting"));
    for (name, value) in waiting {
        raw::add_info_field_unsigned_long_long(ctx, name, value);
    }
}

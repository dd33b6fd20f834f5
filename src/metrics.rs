//! Counters for `INFO rwlock`: plain relaxed atomics, cheap enough to keep on.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::raw;

use crate::blocking;

static WAITS_STARTED: AtomicU64 = AtomicU64::new(0);
static WAITS_SERVED: AtomicU64 = AtomicU64::new(0);
static WAITS_TIMED_OUT: AtomicU64 = AtomicU64::new(0);
static WAITS_ABORTED: AtomicU64 = AtomicU64::new(0);

pub fn wait_started() {
    WAITS_STARTED.fetch_add(1, Ordering::Relaxed);
}

pub fn wait_served() {
    WAITS_SERVED.fetch_add(1, Ordering::Relaxed);
}

pub fn wait_timed_out() {
    WAITS_TIMED_OUT.fetch_add(1, Ordering::Relaxed);
}

pub fn wait_aborted() {
    WAITS_ABORTED.fetch_add(1, Ordering::Relaxed);
}

/// The `rwlock_waiting` section of `INFO`.
pub unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let (waiters, locks) = blocking::counts();
    let fields = [
        ("waiters", waiters as u64),
        ("locks_with_waiters", locks as u64),
        ("waits_started", WAITS_STARTED.load(Ordering::Relaxed)),
        ("waits_served", WAITS_SERVED.load(Ordering::Relaxed)),
        ("waits_timed_out", WAITS_TIMED_OUT.load(Ordering::Relaxed)),
        ("waits_aborted", WAITS_ABORTED.load(Ordering::Relaxed)),
    ];
    raw::add_info_section(ctx, Some("waiting"));
    for (name, value) in fields {
        raw::add_info_field_unsigned_long_long(ctx, name, value);
    }
}

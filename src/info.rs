//! `INFO rwlock`: the counters of `metrics` and the state of waiting, lease
//! indexes and the keyspace subscription, and the session holds, in the
//! sections `rwlock_locks`, `rwlock_waiting` and `rwlock_sessions`.

use std::os::raw::c_int;

use redis_module::{raw, Status};

use crate::census;
use crate::events;
use crate::keyspace::leases;
use crate::metrics::{self, Counter};
use crate::sessions;
use crate::waiting::fair as fair_waiting;
use crate::waiting::queues;

/// `INFO rwlock`: the sections `rwlock_locks`, `rwlock_waiting` and
/// `rwlock_sessions`; Redis
/// prefixes every field with `rwlock_`.
///
/// # Safety
/// Redis calls it, on the main thread, with a live info context.
pub unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    let locks = [
        ("read_acquired", Counter::ReadAcquired),
        ("write_acquired", Counter::WriteAcquired),
        ("lock_acquired", Counter::LockAcquired),
        ("reentries", Counter::Reentries),
        ("tokens_issued", Counter::TokensIssued),
        ("refused", Counter::Refused),
        ("unlocks", Counter::Unlocks),
        ("unlocks_not_held", Counter::UnlocksNotHeld),
        ("unlocks_replayed", Counter::UnlocksReplayed),
        ("renewals", Counter::Renewals),
        ("renewals_not_held", Counter::RenewalsNotHeld),
        ("force_unlocks", Counter::ForceUnlocks),
        ("fair_acquired", Counter::FairAcquired),
        ("fair_queued", Counter::FairQueued),
        ("fair_cancels", Counter::FairCancels),
        ("permits_acquired", Counter::PermitsAcquired),
        ("permits_released", Counter::PermitsReleased),
        ("latch_awaited", Counter::LatchAwaited),
    ];
    // Redis skips the fields of a section INFO did not ask for.
    let locks_asked = raw::add_info_section(ctx, Some("locks")) == Status::Ok;
    for (name, counter) in locks {
        raw::add_info_field_unsigned_long_long(ctx, name, metrics::get(counter));
    }
    // Holds held now, by kind: a census of the keyspace, at most
    // census::MAX_KEYS keys, taken here and nowhere on a lock's path, when
    // the section is asked for; never in a crash report, where the
    // keyspace may be what is broken.
    if locks_asked && for_crash_report == 0 {
        let now = census::take();
        let held = [
            ("read_holds", now.read),
            ("write_holds", now.write),
            ("lock_holds", now.lock),
            ("locks_held", now.locks),
            ("census_keys", now.keys),
            ("census_complete", u64::from(now.complete)),
        ];
        for (name, value) in held {
            raw::add_info_field_unsigned_long_long(ctx, name, value);
        }
    }
    let (indexed_locks, indexed_leases) = leases::counts();
    raw::add_info_field_unsigned_long_long(ctx, "lease_indexes", indexed_locks as u64);
    raw::add_info_field_unsigned_long_long(ctx, "indexed_leases", indexed_leases as u64);
    let (waiters, queues) = queues::counts();
    let waits = queues::wait_percentiles();
    // Fair-lock waiters parked in their lock's line count as waiters too.
    let (fair_waiters, fair_queues) = fair_waiting::counts();
    let (waiters, queues) = (waiters + fair_waiters, queues + fair_queues);
    let waiting = [
        ("waiters", waiters as u64),
        ("locks_with_waiters", queues as u64),
        ("waits_started", metrics::get(Counter::WaitsStarted)),
        ("waits_served", metrics::get(Counter::WaitsServed)),
        ("waits_timed_out", metrics::get(Counter::WaitsTimedOut)),
        ("waits_aborted", metrics::get(Counter::WaitsAborted)),
        ("wait_rechecks", metrics::get(Counter::WaitRechecks)),
        ("deadlocks", metrics::get(Counter::Deadlocks)),
        ("wait_ms_p50", waits.p50 as u64),
        ("wait_ms_p99", waits.p99 as u64),
        ("wait_ms_max", waits.max as u64),
        // 1 once a waiter or a lease index made the module watch every write.
        ("keyspace_subscribed", u64::from(events::subscribed())),
    ];
    raw::add_info_section(ctx, Some("waiting"));
    for (name, value) in waiting {
        raw::add_info_field_unsigned_long_long(ctx, name, value);
    }
    let (clients, holds, permits) = sessions::counts();
    let session = [
        ("session_clients", clients as u64),
        ("session_holds", holds as u64),
        ("session_permits", permits as u64),
        ("session_binds", metrics::get(Counter::SessionBinds)),
        ("session_renewals", metrics::get(Counter::SessionRenewals)),
        ("session_releases", metrics::get(Counter::SessionReleases)),
        (
            "session_permits_released",
            metrics::get(Counter::SessionPermitsReleased),
        ),
    ];
    raw::add_info_section(ctx, Some("sessions"));
    for (name, value) in session {
        raw::add_info_field_unsigned_long_long(ctx, name, value);
    }
}

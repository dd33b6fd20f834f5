//! The semaphore's commands, `SEMAPHORE.*`: Redisson's `RSemaphore` on the
//! same data as its scripts (contract §15). An acquisition is a hold of the
//! lock queue's kind `Hold::Semaphore`, taken through the one driver, so
//! `BLOCK` waits in the name's queue like the locks' waiters; every command
//! that may free permits serves that queue before it replies.

use std::ffi::CStr;

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, change, lock_and_owner};
use super::docs::{
    acquire_request_option, arg, block, flag, millis, request_option, ArgDoc, ArgKind, Command,
    ACQUIRE_KEY, INFO_KEY, V4,
};
use crate::args::{self, counts, lock_error, ArgString};
use crate::engine::hold::{Release, Unlocked};
use crate::engine::queue::Hold;
use crate::engine::semaphore;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::sessions;

/// `SEMAPHORE.ACQUIRE name permits [BLOCK ms] [SESSION] [REQUEST id ttl]`
///
/// Takes `permits` when that many are free: replies 1, else 0, as
/// Redisson's `tryAcquire(n)`. While clients wait for the semaphore a new
/// acquisition queues behind them (`BLOCK`) or is refused (0), so a waiter
/// for many permits is not starved by takers of one. `BLOCK` waits on the
/// server, served in arrival order; `SESSION` binds the permits taken to
/// the calling connection, given back when it closes; `REQUEST` makes a
/// retry reply 1 again without taking more.
pub fn acquire_permits(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (a, permits) = counts::semaphore_acquire(args)?;
    acquire(ctx, args, &a, Hold::Semaphore { permits })
}

/// `SEMAPHORE.RELEASE name permits [IFEXISTS] [REQUEST id ttl]`
///
/// Gives `permits` back (anyone may: permits have no owner), publishes the
/// new count on `redisson_sc:{name}` and serves the waiters. Replies nil, as
/// Redisson's `release(n)`; with `IFEXISTS`, 1, or 0 and nothing done when
/// there is no count (`releaseIfExists(n)`). With `REQUEST` a retry gives
/// nothing back twice and replies as the first call. Given back by a
/// connection with session permits there, they are its session permits
/// first: up to `permits` of them are no longer given back at its close.
pub fn release(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = counts::semaphore_release(args)?;
    let outcome = change(ctx, lock_and_owner(args), &a.names, |store| {
        semaphore::release(store, &a.names, a.permits, a.if_exists, a.request)
    })?;
    let given = match outcome {
        Unlocked::Ran(Release::Released) => {
            metrics::bump(Counter::PermitsReleased);
            sessions::unbind_permits(ctx, &a.names, a.permits);
            1
        }
        Unlocked::Ran(_) => 0,
        Unlocked::Replayed(value) => value,
    };
    Ok(if a.if_exists {
        RedisValue::Integer(given)
    } else {
        RedisValue::Null
    })
}

/// `SEMAPHORE.TRYSETPERMITS name permits [TTL ms]`
///
/// Sets the count when there is none (with `TTL`, for that long), publishes
/// it and serves the waiters: replies 1; 0 when a count exists.
pub fn try_set(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, permits, ttl) = counts::semaphore_try_set(args)?;
    let set = change(ctx, lock_and_owner(args), &names, |store| {
        semaphore::try_set(store, &names, permits, ttl)
    })?;
    Ok(RedisValue::Integer(set.into()))
}

/// `SEMAPHORE.ADDPERMITS name n`
///
/// Adds `n` (negative: takes away; the count may go below 0) with a `SET`
/// that drops any TTL, as Redisson's `addPermits(n)`, publishes the new
/// count and serves the waiters. Replies nil.
pub fn add(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, n) = counts::semaphore_add(args)?;
    change(ctx, lock_and_owner(args), &names, |store| {
        semaphore::add(store, &names, n)
    })?;
    Ok(RedisValue::Null)
}

/// `SEMAPHORE.DRAIN name`
///
/// Takes every free permit: replies the count before and sets it to 0
/// (dropping any TTL), as Redisson's `drainPermits()`; 0 when there is
/// none.
pub fn drain(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = args::lock_only(args)?;
    let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
    let before = semaphore::drain(&mut store, &names).map_err(lock_error)?;
    Ok(RedisValue::Integer(before))
}

/// `SEMAPHORE.AVAILABLE name`
///
/// Read-only: the free permits, 0 when there is no count
/// (`availablePermits()`).
pub fn available(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = args::lock_only(args)?;
    let count = semaphore::available(&mut RedisStore::new(ctx), &names).map_err(lock_error)?;
    Ok(RedisValue::Integer(count))
}

/// What a semaphore command touches besides its count.
const SEMAPHORE_KEYS: &CStr = c"Also its latches redisson_unlock_latch:{name}:id (RELEASE … REQUEST) and redisson_lock_request_latch:{name}:id (ACQUIRE … REQUEST), named from the semaphore and in its hash slot; it publishes on redisson_sc:{name}";

fn semaphore_name() -> ArgDoc {
    arg(
        c"name",
        ArgKind::Key,
        c"The semaphore's name: the key of its count, as Redisson names it",
    )
}

fn permits(summary: &'static CStr) -> ArgDoc {
    arg(c"permits", ArgKind::Int, summary)
}

/// Redisson's `RSemaphore` (contract §15): every row on the count's key,
/// from 0.4.0; those that may hand permits to waiters say so.
pub(super) fn commands() -> Vec<Command> {
    let row = |name, entry, flags, summary, arity, args| Command {
        name,
        entry,
        flags,
        summary,
        complexity: c"O(1), O(W) when permits are handed to W waiters",
        since: V4,
        arity,
        key: ACQUIRE_KEY,
        key_notes: SEMAPHORE_KEYS,
        args,
    };
    vec![
        row(
            c"semaphore.acquire",
            entry!(acquire_permits),
            c"write deny-oom blocking",
            c"Takes permits of a Redisson semaphore (RSemaphore) when that many are free and nobody waits before. Replies 1 when taken, else 0; BLOCK waits on the server in arrival order; SESSION gives them back when the connection closes",
            -3,
            vec![
                semaphore_name(),
                permits(c"How many permits to take (1 or more)"),
                block(),
                flag(
                    c"session",
                    c"SESSION",
                    c"Bind the permits to this connection: given back when it closes",
                ),
                acquire_request_option(),
            ],
        ),
        row(
            c"semaphore.release",
            entry!(release),
            c"write",
            c"Gives permits back to a semaphore (anyone may), publishes the new count and serves its waiters. Replies nil; IFEXISTS: 1, or 0 when there is no count",
            -3,
            vec![
                semaphore_name(),
                permits(c"How many permits to give back (1 or more)"),
                flag(
                    c"ifexists",
                    c"IFEXISTS",
                    c"releaseIfExists: do nothing when the semaphore has no count",
                ),
                request_option(),
            ],
        ),
        row(
            c"semaphore.trysetpermits",
            entry!(try_set),
            c"write deny-oom",
            c"Sets a semaphore's count when it has none and publishes it. Replies 1 when set, else 0",
            -3,
            vec![
                semaphore_name(),
                permits(c"The count (any 64-bit integer)"),
                millis(c"TTL", c"Milliseconds the count lasts (SET … PX)"),
            ],
        ),
        row(
            c"semaphore.addpermits",
            entry!(add),
            c"write deny-oom",
            c"Adds to a semaphore's count (negative takes away; a TTL is dropped, as Redisson's SET) and publishes it. Replies nil",
            3,
            vec![
                semaphore_name(),
                permits(c"How many to add (negative: take away)"),
            ],
        ),
        Command {
            complexity: c"O(1)",
            ..row(
                c"semaphore.drain",
                entry!(drain),
                c"write",
                c"Takes every free permit of a semaphore: sets its count to 0. Replies the count before, 0 when there was none",
                2,
                vec![semaphore_name()],
            )
        },
        Command {
            complexity: c"O(1)",
            key: INFO_KEY,
            ..row(
                c"semaphore.available",
                entry!(available),
                c"readonly",
                c"Shows a semaphore's free permits, 0 when it has no count",
                2,
                vec![semaphore_name()],
            )
        },
    ]
}

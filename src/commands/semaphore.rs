//! The semaphore's commands, `SEMAPHORE.*`: Redisson's `RSemaphore` on the
//! same data as its scripts (contract §15). An acquisition is a hold of the
//! lock queue's kind `Hold::Semaphore`, taken through the one driver, so
//! `BLOCK` waits in the name's queue like the locks' waiters; every command
//! that may free permits serves that queue before it replies.

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, change, lock_and_owner};
use crate::args::{self, lock_error, ArgString};
use crate::engine::hold::{Release, Unlocked};
use crate::engine::queue::Hold;
use crate::engine::semaphore;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};

/// `SEMAPHORE.ACQUIRE name permits [BLOCK ms] [REQUEST id ttl]`
///
/// Takes `permits` when that many are free: replies 1, else 0, as
/// Redisson's `tryAcquire(n)`. While clients wait for the semaphore a new
/// acquisition queues behind them (`BLOCK`) or is refused (0), so a waiter
/// for many permits is not starved by takers of one. `BLOCK` waits on the
/// server, served in arrival order; `REQUEST` makes a retry reply 1 again
/// without taking more.
pub fn acquire_permits(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (a, permits) = args::semaphore_acquire(args)?;
    acquire(ctx, args, &a, Hold::Semaphore { permits })
}

/// `SEMAPHORE.RELEASE name permits [IFEXISTS] [REQUEST id ttl]`
///
/// Gives `permits` back (anyone may: permits have no owner), publishes the
/// new count on `redisson_sc:{name}` and serves the waiters. Replies nil, as
/// Redisson's `release(n)`; with `IFEXISTS`, 1, or 0 and nothing done when
/// there is no count (`releaseIfExists(n)`). With `REQUEST` a retry gives
/// nothing back twice and replies as the first call.
pub fn release(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::semaphore_release(args)?;
    let outcome = change(ctx, lock_and_owner(args), &a.names, |store| {
        semaphore::release(store, &a.names, a.permits, a.if_exists, a.request)
    })?;
    let given = match outcome {
        Unlocked::Ran(Release::Released) => {
            metrics::bump(Counter::PermitsReleased);
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
    let (names, permits, ttl) = args::semaphore_try_set(args)?;
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
    let (names, n) = args::semaphore_add(args)?;
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

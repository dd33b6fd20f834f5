//! The fair lock's commands, `FAIRLOCK.*`: Redisson's `RFairLock` and its
//! non-reentrant variant on the same data as Redisson's scripts (the hash,
//! the line `redisson_lock_queue:{lock}` and its deadlines
//! `redisson_lock_timeout:{lock}`), with the server's clock as `now`.
//! Renewal is `LOCK.RENEW`'s: the hold is the plain lock's hash.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use super::apply::{change, forced, lock_and_owner};
use crate::args::{self, lock_error, ArgString};
use crate::config;
use crate::engine::fair::{self, FairOptions, FairTaken};
use crate::engine::hold::{self, Granting};
use crate::events;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::reply;
use crate::waiting::clients as waiting;
use crate::waiting::fair as fair_waiting;

/// `FAIRLOCK.ACQUIRE lock owner lease [WAIT ms] [NOQUEUE] [NOREENTRY] [BLOCK ms] [REQUEST id ttl]`
///
/// As `fair_lock.lua`: nil when held (a re-entry resets the TTL to
/// `lease`), else the caller joins the line and gets the script's `ttl`
/// (negative when the last waiter is stale, -2 when the lock is gone).
/// `NOQUEUE`: as `fair_trylock.lua`, nil or 1, never joining. `NOREENTRY`:
/// the holder asking again is `NON_REENTRANT_REACQUIRE`. `BLOCK ms`: a
/// queued caller waits on the server, in the line, until served (nil) or
/// its wait ends (the lock's TTL, having left the line); outside MULTI and
/// scripts only, which make their one attempt. `REQUEST id ttl`: a retry
/// within `ttl` ms of the grant replies nil and changes nothing
/// (docs/design.md §14.7).
pub fn acquire(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::fair_acquire(args)?;
    let options = FairOptions {
        no_queue: a.no_queue,
        non_reentrant: a.non_reentrant,
        wait: a.wait.unwrap_or_else(config::fair_wait),
    };
    let (names, owner, lease) = (&a.lock.names, a.lock.owner, a.lock.lease);
    // `REQUEST`: read before anything else; a retry replies what the first
    // call did and changes nothing. Without it no key is looked up.
    let latch = match a.request {
        None => None,
        Some(request) => {
            let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
            match hold::grant_latch(&mut store, names, Some(request)).map_err(lock_error)? {
                Granting::Replay(_) => return Ok(RedisValue::Null),
                Granting::Run(latch) => latch,
            }
        }
    };
    // A wait that would close a cycle fails before the line is written:
    // nothing changes (contract §14). A call that acquires at once has no
    // wait in its way, so no cycle to find.
    let block = a.block.filter(|_| waiting::can_block(ctx));
    if block.is_some() {
        if let Some(cycle) = waiting::deadlock_in_line(ctx, owner, names) {
            return Err(RedisError::String(cycle));
        }
    }
    let taken = change(ctx, lock_and_owner(args), names, |store| {
        fair::acquire_latched(store, names, owner, lease, options, latch.as_ref())
    })?;
    match taken {
        FairTaken::Acquired { reentry } => {
            metrics::bump(Counter::FairAcquired);
            if reentry {
                metrics::bump(Counter::Reentries);
            }
            // Those waiting for the lock now wait for its owner.
            waiting::took_hold(ctx, owner);
        }
        FairTaken::Refused => metrics::bump(Counter::Refused),
        FairTaken::Queued { .. } => {
            metrics::bump(Counter::FairQueued);
            // The lease running out must tell the line's head.
            events::follow_expiries(ctx);
            if let Some(timeout) = block {
                let wait = fair_waiting::FairWait {
                    owner,
                    lease,
                    options,
                    timeout,
                    request: latch,
                };
                fair_waiting::park(ctx, names, wait);
                return Ok(RedisValue::NoReply);
            }
        }
    }
    Ok(reply::release(taken.reply()))
}

/// `FAIRLOCK.CANCEL lock owner [WAIT ms]`
///
/// As `fair_acquire_failed.lua`: the owner leaves the line, those behind it
/// move up by `WAIT` (default `rwlock.fair-wait`). Replies 1 when it was in
/// the line, else 0.
pub fn cancel(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, owner, wait) = args::fair_cancel(args)?;
    let wait = wait.unwrap_or_else(config::fair_wait);
    let was = change(ctx, lock_and_owner(args), &names, |store| {
        fair::cancel(store, &names, owner, wait)
    })?;
    if was {
        metrics::bump(Counter::FairCancels);
        // The head may have left: a parked waiter behind it may go in.
        fair_waiting::serve(ctx, &names);
    }
    Ok(RedisValue::Integer(was.into()))
}

/// `FAIRLOCK.UNLOCK lock owner [LEASE ms] [REQUEST id ttl]`
///
/// As `fair_unlock.lua`: nil (the owner holds nothing), 0 (still held, TTL
/// re-armed to `LEASE`) or 1 (released, or no lock at all); `0` is
/// published on the head waiter's channel
/// `redisson_lock__channel:{lock}:<owner>`. With `REQUEST` a retry replies
/// what the first call did.
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::lock_unlock(args)?;
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let outcome = change(ctx, lock_and_owner(args), &a.names, |store| {
        fair::unlock(store, &a.names, a.owner, lease, a.request)
    })?;
    metrics::unlocked(outcome);
    fair_waiting::serve(ctx, &a.names);
    Ok(reply::release(fair::unlock_reply(outcome)))
}

/// `FAIRLOCK.FORCEUNLOCK lock`
///
/// As `fair_force_unlock.lua`: stale heads purged, the lock deleted
/// whoever holds it and the head waiter told. Replies 1 if it deleted it.
pub fn force_unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = args::lock_only(args)?;
    let deleted = change(ctx, lock_and_owner(args), &names, |store| {
        fair::force_unlock(store, &names)
    })?;
    fair_waiting::serve(ctx, &names);
    Ok(forced(deleted))
}

/// `FAIRLOCK.INFO lock`
///
/// Read-only: `holders` (each `owner` with its `count`), `ttl` (the hash's
/// PTTL, -2 when free) and `line`, the waiters in order, each `owner` with
/// its `deadline` (absolute ms, nil when it has none) and `parked` (1 when
/// it waits with `BLOCK` on this server).
pub fn info(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = args::lock_only(args)?;
    let mut store = RedisStore::new(ctx);
    let info = fair::info(&mut store, &names).map_err(lock_error)?;
    let label = RedisValue::SimpleStringStatic;
    let holders = info
        .holders
        .into_iter()
        .map(|(owner, count)| {
            RedisValue::Array(vec![
                label("owner"),
                RedisValue::StringBuffer(owner),
                label("count"),
                RedisValue::Integer(count),
            ])
        })
        .collect();
    let parked = fair_waiting::parked_owners(ctx, &names);
    let line = info
        .line
        .into_iter()
        .map(|w| {
            let here = parked.contains(&w.owner);
            RedisValue::Array(vec![
                label("owner"),
                RedisValue::StringBuffer(w.owner),
                label("deadline"),
                w.deadline.map_or(RedisValue::Null, RedisValue::Integer),
                label("parked"),
                RedisValue::Integer(here.into()),
            ])
        })
        .collect();
    Ok(RedisValue::Array(vec![
        label("holders"),
        RedisValue::Array(holders),
        label("ttl"),
        RedisValue::Integer(info.pttl),
        label("line"),
        RedisValue::Array(line),
    ]))
}

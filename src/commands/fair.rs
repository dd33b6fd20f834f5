//! The fair lock's commands, `FAIRLOCK.*`: Redisson's `RFairLock` and its
//! non-reentrant variant on the same data as Redisson's scripts (the hash,
//! the line `redisson_lock_queue:{lock}` and its deadlines
//! `redisson_lock_timeout:{lock}`), with the server's clock as `now`.
//! Renewal is `LOCK.RENEW`'s: the hold is the plain lock's hash.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use super::apply::{
    change, drive, force_unlock_hash, lock_and_owner, read_info, unlock_hash, Acquisition, OneLock,
    Terms,
};
use crate::args::{self, lock_error, ArgString};
use crate::config;
use crate::engine::error::LockError;
use crate::engine::fair::{self, FairAttempt, FairOptions};
use crate::engine::hold::{GrantLatch, Granted};
use crate::engine::kinds::{self, Kind};
use crate::events;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::reply;
use crate::waiting::clients as waiting;
use crate::waiting::fair as fair_waiting;
use crate::waiting::parking::Parking;

/// `FAIRLOCK.ACQUIRE lock owner lease [WAIT ms] [NOQUEUE] [NOREENTRY] [BLOCK ms] [REQUEST id ttl] [HELD n]`
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
    let line = OneLock {
        a: &a.call,
        way: options,
    };
    drive(ctx, lock_and_owner(args), &line)
}

/// A place in a fair lock's line, the way `FAIRLOCK.ACQUIRE` takes it.
impl Acquisition for OneLock<'_, '_, FairOptions> {
    type Outcome = FairAttempt;

    fn terms(&self) -> Terms<'_> {
        OneLock::terms(self)
    }

    fn granted_before(
        &self,
        store: &mut RedisStore,
        held: i64,
    ) -> Result<Option<RedisValue>, LockError> {
        let l = &self.a.lock;
        let token = kinds::granted_before(store, &l.names, Kind::Lock, l.owner, held, false)?;
        Ok(token.map(|token| self.replay(token)))
    }

    fn cycle_before(&self, ctx: &Context) -> Option<String> {
        // Asked before the line is written: nothing changes (contract §14).
        // A call that acquires at once has no wait in its way, so no cycle
        // to find.
        if !waiting::can_block(ctx) {
            return None;
        }
        waiting::deadlock_in_line(ctx, self.a.lock.owner, &self.a.lock.names)
    }

    fn attempt(
        &self,
        ctx: &Context,
        store: &mut RedisStore,
        latch: Option<&GrantLatch>,
    ) -> Result<FairAttempt, RedisError> {
        let l = &self.a.lock;
        let (names, owner, lease) = (&l.names, l.owner, l.lease);
        let taken = waiting::serve_after(ctx, store, names, |store| {
            fair::acquire_latched(store, names, owner, lease, self.way, latch)
        })
        .map_err(lock_error)?;
        if let FairAttempt::Queued { .. } = taken {
            metrics::bump(Counter::FairQueued);
        }
        Ok(taken)
    }

    fn granted(taken: &FairAttempt) -> bool {
        matches!(taken, FairAttempt::Granted(_))
    }

    fn may_wait(taken: &FairAttempt) -> bool {
        matches!(taken, FairAttempt::Queued { .. })
    }

    fn took(&self, _: &Context, _: &mut RedisStore, taken: &FairAttempt) {
        metrics::bump(Counter::FairAcquired);
        if let FairAttempt::Granted(Granted { reentry: true, .. }) = taken {
            metrics::bump(Counter::Reentries);
        }
    }

    fn park(&self, ctx: &Context, _: &mut RedisStore, parking: Parking) {
        // Parked, it must hear of the hash deleted or changed by others
        // (the lease running out is heard from load on).
        events::follow_fair_writes(ctx);
        let wait = fair_waiting::FairWait {
            owner: self.a.lock.owner,
            lease: self.a.lock.lease,
            options: self.way,
            parking,
        };
        fair_waiting::park(ctx, &self.a.lock.names, wait);
    }

    fn reply(&self, taken: FairAttempt) -> RedisValue {
        if let FairAttempt::Refused = taken {
            metrics::bump(Counter::Refused);
        }
        reply::release(taken.reply())
    }
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

/// `FAIRLOCK.UNLOCK lock owner [LEASE ms] [REQUEST id ttl] [HELD n]`
///
/// As `fair_unlock.lua`: nil (the owner holds nothing, the lock missing
/// included, where the script replies 1), 0 (still held, TTL re-armed to
/// `LEASE`) or 1 (released); `0` is published on the head waiter's channel
/// `redisson_lock__channel:{lock}:<owner>`. With `REQUEST` a retry replies
/// what the first call did; with `HELD n` (2 or more) a resend finding
/// n - 1 holds replies 0, changing nothing.
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let outcome = unlock_hash(ctx, args, |s, names, owner, lease, request| {
        fair::unlock(s, names, owner, lease, request)
    })?;
    Ok(reply::release(outcome.reply()))
}

/// `FAIRLOCK.FORCEUNLOCK lock`
///
/// As `fair_force_unlock.lua`: stale heads purged, the lock deleted
/// whoever holds it and the head waiter told. Replies 1 if it deleted it.
pub fn force_unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    force_unlock_hash(ctx, args, |store, names| fair::force_unlock(store, names))
}

/// `FAIRLOCK.INFO lock`
///
/// Read-only: `holders` (each `owner` with its `count`), `ttl` (the hash's
/// PTTL, -2 when free) and `line`, the waiters in order, each `owner` with
/// its `deadline` (absolute ms, nil when it has none) and `parked` (1 when
/// it waits with `BLOCK` on this server).
pub fn info(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, info) = read_info(ctx, args, |store, names| fair::info(store, names))?;
    let holders = info
        .holders
        .into_iter()
        .map(|(owner, count)| {
            reply::record([
                ("owner", RedisValue::StringBuffer(owner)),
                ("count", RedisValue::Integer(count)),
            ])
        })
        .collect();
    let parked = fair_waiting::parked_owners(ctx, &names);
    let line = info
        .line
        .into_iter()
        .map(|w| {
            let here = parked.contains(&w.owner);
            reply::record([
                ("owner", RedisValue::StringBuffer(w.owner)),
                (
                    "deadline",
                    w.deadline.map_or(RedisValue::Null, RedisValue::Integer),
                ),
                ("parked", RedisValue::Integer(here.into())),
            ])
        })
        .collect();
    Ok(reply::record([
        ("holders", RedisValue::Array(holders)),
        ("ttl", RedisValue::Integer(info.pttl)),
        ("line", RedisValue::Array(line)),
    ]))
}

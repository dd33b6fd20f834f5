//! The read-write lock's commands, `RWLOCK.*`: parse, run the engine's
//! machine on the live keyspace and serve the lock's waiters, reply.

use redis_module::{Context, RedisResult, RedisValue};

use crate::args::{self, lock_error, ArgString};
use crate::config;
use crate::engine::queue;
use crate::engine::rwlock::{self, Acquire, LockInfo, Mode};
use crate::engine::store::Store;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::waiting::clients as waiting;

/// `RWLOCK.READ lock owner lease [BLOCK ms]`
///
/// Takes a read hold for `lease` ms. Replies nil when held, else the lock's
/// PTTL (a writer holds it). With `BLOCK` the client waits on the server for
/// up to `ms` (0: no limit) and gets nil once it holds the lock, or the PTTL
/// at the timeout.
pub fn read(ctx: &Context, args: &[ArgString]) -> RedisResult {
    acquire(ctx, args, Mode::Read)
}

/// `RWLOCK.WRITE lock owner lease [BLOCK ms]`
///
/// Takes the write hold for `lease` ms. Replies nil when held, else the
/// lock's PTTL; `BLOCK` waits as for `RWLOCK.READ`.
pub fn write(ctx: &Context, args: &[ArgString]) -> RedisResult {
    acquire(ctx, args, Mode::Write)
}

fn acquire(ctx: &Context, args: &[ArgString], mode: Mode) -> RedisResult {
    let a = args::acquire(args)?;
    let (names, owner, lease) = (&a.lock.names, a.lock.owner, a.lock.lease);
    let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
    // Waiters the lock could take already go first; those left are served
    // again after the attempt, which may have moved the lock's deadline.
    waiting::serve(ctx, &mut store, names);
    let outcome = waiting::serve_after(ctx, &mut store, names, |store| {
        let queued = config::fair()
            && waiting::has_waiters(ctx, names)
            && !queue::may_overtake(store, names, owner)?;
        if queued {
            Ok(Acquire::Refused {
                pttl: store.pttl(names.hash()),
            })
        } else {
            queue::attempt(store, names, owner, mode, lease)
        }
    })
    .map_err(lock_error)?;
    match (outcome, a.block) {
        (Acquire::Acquired { reentry }, _) => {
            metrics::acquired(mode, reentry);
            Ok(RedisValue::Null)
        }
        (Acquire::Refused { .. }, Some(timeout)) if waiting::can_block(ctx) => {
            waiting::park(ctx, &mut store, names, owner, mode, lease, timeout);
            Ok(RedisValue::NoReply)
        }
        (Acquire::Refused { pttl }, _) => {
            metrics::bump(Counter::Refused);
            Ok(RedisValue::Integer(pttl))
        }
    }
}

/// `RWLOCK.UNLOCK lock owner READ|WRITE [LEASE ms] [REQUEST id ttl]`
///
/// Releases one hold. Replies nil (nothing held), 0 (still held) or 1
/// (released); with `REQUEST` a retry replies what the first call did.
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::unlock(args)?;
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
    let outcome = waiting::serve_after(ctx, &mut store, &a.names, |store| {
        rwlock::unlock(store, &a.names, a.owner, a.mode, lease, a.request)
    })
    .map_err(lock_error)?;
    metrics::unlocked(outcome);
    Ok(outcome
        .reply()
        .map_or(RedisValue::Null, RedisValue::Integer))
}

/// `RWLOCK.RENEW lock owner lease`
///
/// The watchdog's call: extends the owner's own holds. Replies 1 if it held
/// anything, else 0.
pub fn renew(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::owner_lease(args)?;
    let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
    // A shorter lease moves the deadline its waiters are woken at.
    let held = waiting::serve_after(ctx, &mut store, &a.names, |store| {
        rwlock::renew(store, &a.names, a.owner, a.lease)
    })
    .map_err(lock_error)?;
    metrics::renewed(held);
    Ok(RedisValue::Integer(held.into()))
}

/// `RWLOCK.FORCEUNLOCK lock [READ|WRITE]`
///
/// Deletes the lock (only in the given mode, if any) with its timeout keys.
/// Replies 1 if it deleted it, else 0.
pub fn force_unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, only) = args::force_unlock(args)?;
    let mut store = RedisStore::for_write(ctx, args.get(1..2).unwrap_or_default());
    let deleted = waiting::serve_after(ctx, &mut store, &names, |store| {
        rwlock::force_unlock(store, &names, only)
    })
    .map_err(lock_error)?;
    if deleted {
        metrics::bump(Counter::ForceUnlocks);
    }
    Ok(RedisValue::Integer(deleted.into()))
}

/// `RWLOCK.INFO lock`
///
/// Read-only: `mode` (read, write or none), `ttl` (the hash's PTTL) and
/// `owners`, each with `owner`, `reads`, `writes` and `leases` (the PTTL of
/// each read acquisition, first first). Arrays only, the same in RESP2 and 3.
pub fn info(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = args::lock_only(args)?;
    let mut store = RedisStore::new(ctx);
    let info = rwlock::info(&mut store, &names).map_err(lock_error)?;
    Ok(info_reply(info))
}

/// The lock name and owner arguments, which name the lock hash and the
/// owner's hash field: the store reuses their strings.
fn lock_and_owner(args: &[ArgString]) -> &[ArgString] {
    args.get(1..3).unwrap_or_default()
}

fn info_reply(info: LockInfo) -> RedisValue {
    let label = RedisValue::SimpleStringStatic;
    let mode = info.mode.map_or(&b"none"[..], |m| m.as_bytes());
    let owners = info
        .owners
        .into_iter()
        .map(|o| {
            RedisValue::Array(vec![
                label("owner"),
                RedisValue::StringBuffer(o.owner),
                label("reads"),
                RedisValue::Integer(o.reads),
                label("writes"),
                RedisValue::Integer(o.writes),
                label("leases"),
                RedisValue::Array(o.leases.into_iter().map(RedisValue::Integer).collect()),
            ])
        })
        .collect();
    RedisValue::Array(vec![
        label("mode"),
        RedisValue::StringBuffer(mode.to_vec()),
        label("ttl"),
        RedisValue::Integer(info.pttl),
        label("owners"),
        RedisValue::Array(owners),
    ])
}

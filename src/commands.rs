//! Command handlers: parse, run the lock machine on the live keyspace, reply.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::args::{self, lock_error};
use crate::blocking;
use crate::config;
use crate::core::lock::{self, Acquire, LockInfo, Mode};
use crate::core::queue;
use crate::core::store::Store;
use crate::keyspace::RedisStore;
use crate::metrics;

/// `RWLOCK.READ lock owner lease [BLOCK ms]`
///
/// Takes a read hold for `lease` ms. Replies nil when held, else the lock's
/// PTTL (a writer holds it). With `BLOCK` the client waits on the server for
/// up to `ms` (0: no limit) and gets nil once it holds the lock, or the PTTL
/// at the timeout.
pub fn read(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    acquire(ctx, &args, Mode::Read)
}

/// `RWLOCK.WRITE lock owner lease [BLOCK ms]`
///
/// Takes the write hold for `lease` ms. Replies nil when held, else the
/// lock's PTTL; `BLOCK` waits as for `RWLOCK.READ`.
pub fn write(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    acquire(ctx, &args, Mode::Write)
}

fn acquire(ctx: &Context, args: &[RedisString], mode: Mode) -> RedisResult {
    let a = args::acquire(args)?;
    let (names, owner, lease) = (&a.lock.names, a.lock.owner, a.lock.lease);
    let mut store = RedisStore::new(ctx);
    // Waiters the lock could take already go first.
    blocking::serve(ctx, &mut store, names);
    let queued = config::fair()
        && blocking::has_waiters(ctx, names)
        && !queue::may_overtake(&mut store, names, owner).map_err(lock_error)?;
    let outcome = if queued {
        Acquire::Refused {
            pttl: store.pttl(names.hash()),
        }
    } else {
        queue::attempt(&mut store, names, owner, mode, lease).map_err(lock_error)?
    };
    match (outcome, a.block) {
        (Acquire::Acquired { reentry }, _) => {
            metrics::acquired(mode, reentry);
            Ok(RedisValue::Null)
        }
        (Acquire::Refused { .. }, Some(timeout)) if blocking::can_block(ctx) => {
            blocking::park(ctx, &mut store, names, owner, mode, lease, timeout);
            Ok(RedisValue::NoReply)
        }
        (Acquire::Refused { pttl }, _) => {
            metrics::refused();
            Ok(RedisValue::Integer(pttl))
        }
    }
}

/// `RWLOCK.UNLOCK lock owner READ|WRITE [LEASE ms] [REQUEST id ttl]`
///
/// Releases one hold. Replies nil (nothing held), 0 (still held) or 1
/// (released); with `REQUEST` a retry replies what the first call did.
pub fn unlock(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let a = args::unlock(&args)?;
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let mut store = RedisStore::new(ctx);
    let outcome = lock::unlock(&mut store, &a.names, a.owner, a.mode, lease, a.request)
        .map_err(lock_error)?;
    metrics::unlocked(outcome);
    blocking::serve(ctx, &mut store, &a.names);
    Ok(outcome
        .reply()
        .map_or(RedisValue::Null, RedisValue::Integer))
}

/// `RWLOCK.RENEW lock owner lease`
///
/// The watchdog's call: extends the owner's own holds. Replies 1 if it held
/// anything, else 0.
pub fn renew(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let a = args::owner_lease(&args)?;
    let mut store = RedisStore::new(ctx);
    let held = lock::renew(&mut store, &a.names, a.owner, a.lease).map_err(lock_error)?;
    metrics::renewed(held);
    Ok(RedisValue::Integer(held.into()))
}

/// `RWLOCK.FORCEUNLOCK lock [READ|WRITE]`
///
/// Deletes the lock (only in the given mode, if any) with its timeout keys.
/// Replies 1 if it deleted it, else 0.
pub fn force_unlock(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let (names, only) = args::force_unlock(&args)?;
    let mut store = RedisStore::new(ctx);
    let deleted = lock::force_unlock(&mut store, &names, only).map_err(lock_error)?;
    if deleted {
        metrics::force_unlocked();
    }
    blocking::serve(ctx, &mut store, &names);
    Ok(RedisValue::Integer(deleted.into()))
}

/// `RWLOCK.INFO lock`
///
/// Read-only: `mode` (read, write or none), `ttl` (the hash's PTTL) and
/// `owners`, each with `owner`, `reads`, `writes` and `leases` (the PTTL of
/// each read acquisition, first first). Arrays only, the same in RESP2 and 3.
pub fn info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let names = args::lock_only(&args)?;
    let mut store = RedisStore::new(ctx);
    let info = lock::info(&mut store, &names).map_err(lock_error)?;
    Ok(info_reply(info))
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

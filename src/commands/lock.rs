//! The plain lock's commands, `LOCK.*`: Redisson's `RLock`, its fenced and
//! non-reentrant variants, on the same data as Redisson's scripts.

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, force_unlock_hash, read_info, renew_with, unlock_hash};
use super::inspect;
use crate::args::{self, ArgString, Flags};
use crate::engine::kinds::Kind;
use crate::engine::lock::{self, Options};
use crate::engine::queue::Hold;
use crate::reply;
use crate::sessions;

/// `LOCK.ACQUIRE lock owner lease [BLOCK ms] [SESSION] [FENCED] [NOREENTRY] [REQUEST id ttl] [HELD n]`
///
/// Takes the lock for `lease` ms (a re-entry by its owner resets the TTL to
/// `lease`). Replies nil when held, else the lock's PTTL; `BLOCK` waits on
/// the server and `SESSION` binds the hold to the connection as for
/// `RWLOCK.READ`. `FENCED`: every acquisition takes the
/// next fencing token and replies `[-1, token]`, or `[pttl, -1]` when
/// refused. `NOREENTRY`: its holder taking it again is an error
/// (`NON_REENTRANT_REACQUIRE`) that changes nothing. `REQUEST` and `HELD`:
/// a resend of a granted call replies as granted and changes nothing
/// (docs/design.md §14.7, §14.8).
pub fn acquire_lock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let accepted = Flags {
        fenced: true,
        non_reentrant: true,
    };
    let (a, flags) = args::acquire_with(args, accepted)?;
    let options = Options {
        fenced: flags.fenced,
        non_reentrant: flags.non_reentrant,
    };
    acquire(ctx, args, &a, Hold::Lock(options))
}

/// `LOCK.UNLOCK lock owner [LEASE ms] [REQUEST id ttl] [HELD n]`
///
/// Releases one hold. Replies nil (the owner holds nothing), 0 (still held:
/// the TTL re-armed to `LEASE`, default `rwlock.default-lease`) or 1
/// (released, `0` published on `redisson_lock__channel:{lock}`); with
/// `REQUEST` a retry replies what the first call did; with `HELD n` (2 or
/// more) a resend finding n - 1 holds replies 0, changing nothing.
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let outcome = unlock_hash(ctx, args, |s, names, owner, lease, request| {
        lock::unlock(s, names, owner, lease, request)
    })?;
    Ok(reply::release(outcome.reply()))
}

/// `LOCK.RENEW lock owner lease`
///
/// The watchdog's call: 1 and the TTL set to `lease` when the owner holds
/// the lock, else 0 (stop renewing).
pub fn renew(ctx: &Context, args: &[ArgString]) -> RedisResult {
    renew_with(ctx, args, |s, names, owner, lease| {
        lock::renew(s, names, owner, lease)
    })
}

/// `LOCK.FORCEUNLOCK lock`
///
/// Deletes the lock whoever holds it and publishes `0`. Replies 1 if it
/// deleted it, else 0.
pub fn force_unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    force_unlock_hash(ctx, args, |store, names| lock::force_unlock(store, names))
}

/// `LOCK.INFO lock`
///
/// Read-only: `holders` (each `owner` with its `count` and how many of
/// those are bound to a connection with `SESSION`, `session`), `ttl` (the hash's
/// PTTL, -2 when free) and `token` (the current fencing token, nil when the
/// lock was never fenced), then `waiters` (the parked clients, see
/// `inspect::waiters`). Arrays only, the same in RESP2 and RESP3.
pub fn info(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, info) = read_info(ctx, args, |store, names| lock::info(store, names))?;
    let holders = info
        .holders
        .into_iter()
        .map(|(owner, count)| {
            let bound = sessions::bound(ctx, &names, &owner, Kind::Lock);
            reply::record([
                ("owner", RedisValue::StringBuffer(owner)),
                ("count", RedisValue::Integer(count)),
                ("session", RedisValue::Integer(bound)),
            ])
        })
        .collect();
    Ok(RedisValue::Array(
        reply::fields([
            ("holders", RedisValue::Array(holders)),
            ("ttl", RedisValue::Integer(info.pttl)),
            (
                "token",
                info.token.map_or(RedisValue::Null, RedisValue::Integer),
            ),
        ])
        .chain(inspect::waiters(ctx, &names))
        .collect(),
    ))
}

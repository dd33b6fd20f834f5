//! The read-write lock's commands, `RWLOCK.*`: parse, run the engine's
//! machine on the live keyspace and serve the lock's waiters, reply.

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, change, forced, lock_and_owner, read_info, released, renew_with};
use super::inspect;
use crate::args::{self, ArgString, Flags};
use crate::config;
use crate::engine::hold::Unlocked;
use crate::engine::kinds::{self, Kind};
use crate::engine::queue::Hold;
use crate::engine::rwlock::{self, Mode, RwLockInfo};
use crate::events;
use crate::reply;
use crate::sessions;

/// `RWLOCK.READ lock owner lease [BLOCK ms] [SESSION] [REQUEST id ttl] [HELD n]`
///
/// Takes a read hold for `lease` ms. Replies nil when held, else the lock's
/// PTTL (a writer holds it). With `BLOCK` the client waits on the server for
/// up to `ms` (0: no limit) and gets nil once it holds the lock, or the PTTL
/// at the timeout. With `SESSION` the hold is bound to the connection: the
/// module renews it every lease/3 while the connection is open and releases
/// it when it closes. `REQUEST` and `HELD`: a resend of a granted call
/// replies as granted and changes nothing (docs/design.md §14.7, §14.8).
pub fn read(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::acquire(args)?;
    acquire(ctx, args, &a, Hold::Read)
}

/// `RWLOCK.WRITE lock owner lease [BLOCK ms] [SESSION] [FENCED] [REQUEST id ttl] [HELD n]`
///
/// Takes the write hold for `lease` ms. Replies nil when held, else the
/// lock's PTTL; `BLOCK` and `SESSION` as for `RWLOCK.READ`. With `FENCED` every
/// acquisition takes the lock's next fencing token and replies `[-1, token]`,
/// or `[pttl, -1]` when refused.
pub fn write(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let accepted = Flags {
        fenced: true,
        ..Flags::default()
    };
    let (a, flags) = args::acquire_with(args, accepted)?;
    acquire(
        ctx,
        args,
        &a,
        Hold::Write {
            fenced: flags.fenced,
        },
    )
}

/// `RWLOCK.UNLOCK lock owner READ|WRITE [LEASE ms] [REQUEST id ttl] [HELD n]`
///
/// Releases one hold. Replies nil (nothing held), 0 (still held) or 1
/// (released); with `REQUEST` a retry replies what the first call did,
/// with `HELD n` (2 or more) a resend finding n - 1 holds of the kind
/// replies 0, changing nothing.
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::unlock(args)?;
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let outcome = change(ctx, lock_and_owner(args), &a.names, |store| {
        if let Some(held) = a.held {
            let kind = match a.mode {
                Mode::Read => Kind::Read,
                Mode::Write => Kind::Write,
            };
            if kinds::released_before(store, &a.names, kind, a.owner, held)? {
                return Ok(Unlocked::Replayed(0));
            }
        }
        rwlock::unlock(store, &a.names, a.owner, a.mode, lease, a.request)
    })?;
    // A read unlock may have kept the lock's lease index, which other
    // clients' writes must be able to drop.
    events::follow_writes(ctx);
    Ok(released(outcome))
}

/// `RWLOCK.RENEW lock owner lease`
///
/// The watchdog's call: extends the owner's own holds. Replies 1 if it held
/// anything, else 0.
pub fn renew(ctx: &Context, args: &[ArgString]) -> RedisResult {
    renew_with(ctx, args, |s, names, owner, lease| {
        rwlock::renew(s, names, owner, lease)
    })
}

/// `RWLOCK.FORCEUNLOCK lock [READ|WRITE]`
///
/// Deletes the lock (only in the given mode, if any) with its timeout keys.
/// Replies 1 if it deleted it, else 0.
pub fn force_unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, only) = args::force_unlock(args)?;
    let deleted = change(ctx, lock_and_owner(args), &names, |store| {
        rwlock::force_unlock(store, &names, only)
    })?;
    Ok(forced(deleted))
}

/// `RWLOCK.INFO lock`
///
/// Read-only: `mode` (read, write or none), `ttl` (the hash's PTTL) and
/// `owners`, each with `owner`, `reads`, `writes`, `leases` (the PTTL of
/// each read acquisition, first first), and `session_reads` and
/// `session_writes` (how many of its holds are bound to a connection with
/// `SESSION`), then `waiters` (the parked clients, see
/// `inspect::waiters`). Arrays only, the same in RESP2 and 3.
pub fn info(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, info) = read_info(ctx, args, |store, names| rwlock::info(store, names))?;
    let bound = |owner: &[u8], kind| sessions::bound(ctx, &names, owner, kind);
    Ok(info_reply(info, bound, inspect::waiters(ctx, &names)))
}

fn info_reply(
    info: RwLockInfo,
    bound: impl Fn(&[u8], Kind) -> i64,
    waiters: [RedisValue; 2],
) -> RedisValue {
    let mode = info.mode.map_or(&b"none"[..], |m| m.as_bytes());
    let owners = info
        .owners
        .into_iter()
        .map(|o| {
            let (reads, writes) = (bound(&o.owner, Kind::Read), bound(&o.owner, Kind::Write));
            reply::record([
                ("owner", RedisValue::StringBuffer(o.owner)),
                ("reads", RedisValue::Integer(o.reads)),
                ("writes", RedisValue::Integer(o.writes)),
                (
                    "leases",
                    RedisValue::Array(o.leases.into_iter().map(RedisValue::Integer).collect()),
                ),
                ("session_reads", RedisValue::Integer(reads)),
                ("session_writes", RedisValue::Integer(writes)),
            ])
        })
        .collect();
    RedisValue::Array(
        reply::fields([
            ("mode", RedisValue::StringBuffer(mode.to_vec())),
            ("ttl", RedisValue::Integer(info.pttl)),
            ("owners", RedisValue::Array(owners)),
        ])
        .chain(waiters)
        .collect(),
    )
}

//! The permit-expirable semaphore's commands, `PERMIT.*`: Redisson's
//! `RPermitExpirableSemaphore` on the same data as its scripts (contract
//! §17). An acquisition is a hold of the lock queue's kind `Hold::Permit`,
//! taken through the one driver, so `BLOCK` waits in the name's queue like
//! the other kinds' waiters; every command that may free permits serves
//! that queue before it replies.

use std::cell::Cell;
use std::ffi::CStr;
use std::hash::{BuildHasher, RandomState};

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, change};
use super::docs::{
    acquire_request_option, arg, block, flag, ArgDoc, ArgKind, Command, ACQUIRE_KEY, RELEASE_KEY,
    V4,
};
use crate::args::permits as parse;
use crate::args::{self, ArgString};
use crate::engine::error::LockError;
use crate::engine::names::LockNames;
use crate::engine::permit;
use crate::engine::queue::Hold;
use crate::engine::semaphore;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::sessions;

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static DRAWN: Cell<u64> = const { Cell::new(0) };
}

/// A fresh seed for an acquisition's ids: SipHash under keys the standard
/// library draws from the system's randomness, over a counter, so no two
/// acquisitions of a process share one and none can be guessed.
fn random_seed() -> [u64; 2] {
    let n = DRAWN.with(|d| {
        d.set(d.get().wrapping_add(1));
        d.get()
    });
    let keys = RandomState::new();
    [keys.hash_one(n), keys.hash_one(!n)]
}

/// The name and the arguments the store reuses: a permit command names no
/// owner.
fn name_arg(args: &[ArgString]) -> &[ArgString] {
    args.get(1..2).unwrap_or_default()
}

/// `PERMIT.ACQUIRE name permits lease [BLOCK ms] [SESSION] [REQUEST id ttl]`
///
/// Takes `permits` when that many are free (after reclaiming expired
/// ones), each expiring `lease` ms from now (-1: never): replies their ids,
/// as Redisson's `tryAcquire(n, lease)`; refused, the lowest expiry held
/// (absolute ms), or nil when none will expire. While clients wait a new
/// acquisition queues behind them (`BLOCK`) or is refused. `SESSION` binds
/// the ids taken to the calling connection: those still held are released
/// when it closes. With `REQUEST` the ids are made from the request id: a
/// retry replies them again and takes nothing.
pub fn acquire_permits(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (a, permits) = parse::acquire(args)?;
    let seed = match &a.request {
        Some(request) => permit::request_seed(request.id),
        None => random_seed(),
    };
    acquire(ctx, args, &a, Hold::Permit { permits, seed })
}

/// `PERMIT.RELEASE name id [id ...]`
///
/// Gives the permits back, all or none, as Redisson's `tryRelease(ids)`:
/// replies how many were released, 0 (nothing done) when one is not held
/// or has expired; publishes that number and serves the waiters. Ids bound
/// to a connection (`SESSION`), whoever releases them, are unbound.
pub fn release(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, ids) = parse::release(args)?;
    let removed = change(ctx, name_arg(args), &names, |store| {
        permit::release(store, &names, &ids)
    })?;
    if removed > 0 {
        metrics::bump(Counter::PermitsReleased);
        sessions::unbind_ids(ctx, &names, &ids);
    }
    Ok(RedisValue::Integer(removed))
}

/// `PERMIT.TRYRELEASE name id`
///
/// Gives one permit back, as Redisson's `tryRelease(id)`: 1, or 0 when its
/// lease had run out (it comes back all the same) or it is not held
/// (nothing done). Publishes the new count and serves the waiters.
pub fn release_one(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, id) = parse::one_id(args)?;
    let released = change(ctx, name_arg(args), &names, |store| {
        permit::release_one(store, &names, &id)
    })?;
    if released.is_some() {
        metrics::bump(Counter::PermitsReleased);
        sessions::unbind_ids(ctx, &names, std::slice::from_ref(&id));
    }
    Ok(RedisValue::Integer(released.unwrap_or(false).into()))
}

/// `PERMIT.UPDATELEASE name id lease`
///
/// Gives a held permit a new lease from now (-1: never expires), as
/// Redisson's `updateLeaseTime`: 1, or 0 when it is not held. Reclaims
/// expired permits first and serves the waiters.
pub fn update_lease(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, id, lease) = parse::update_lease(args)?;
    let held = change(ctx, name_arg(args), &names, |store| {
        permit::update_lease(store, &names, &id, lease)
    })?;
    Ok(RedisValue::Integer(held.into()))
}

/// `PERMIT.LEASETIME name id`
///
/// The milliseconds a held permit has left, -1 when it never expires, 0
/// when it is not held (Redisson's `getLeaseTime`, which throws there).
/// Reclaims expired permits first and serves the waiters.
pub fn lease_time(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, id) = parse::one_id(args)?;
    let left = change(ctx, name_arg(args), &names, |store| {
        permit::lease_time(store, &names, &id)
    })?;
    Ok(RedisValue::Integer(left))
}

/// `PERMIT.TRYSETPERMITS name permits`
///
/// Sets the free count when there is none, publishes it and serves the
/// waiters: replies 1; 0 when a count exists. Redisson runs the
/// semaphore's own try-set script (`semaphore_try_set.lua`, the same
/// SHA1), so this is the semaphore's machine.
pub fn try_set(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, n) = parse::count(args)?;
    let set = change(ctx, name_arg(args), &names, |store| {
        semaphore::try_set(store, &names, n, None)
    })?;
    Ok(RedisValue::Integer(set.into()))
}

/// `PERMIT.SETPERMITS name permits`
///
/// Makes free plus taken `permits` (Redisson's `setPermits`), publishes it
/// when it changed anything and serves the waiters. Replies nil.
pub fn set_permits(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, n) = parse::count(args)?;
    change(ctx, name_arg(args), &names, |store| {
        permit::set_permits(store, &names, n)
    })?;
    Ok(RedisValue::Null)
}

/// `PERMIT.ADDPERMITS name n`
///
/// Adds `n` to the free count (negative takes away) with a `SET` that drops
/// any TTL, as Redisson's `addPermits`; publishes `n` when above 0 and
/// serves the waiters. Replies nil.
pub fn add(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, n) = parse::count(args)?;
    change(ctx, name_arg(args), &names, |store| {
        permit::add(store, &names, n)
    })?;
    Ok(RedisValue::Null)
}

/// `PERMIT.AVAILABLE name`, `PERMIT.PERMITS name`, `PERMIT.ACQUIRED name`:
/// `read` after reclaiming expired permits (which serves the waiters).
fn count_of(
    ctx: &Context,
    args: &[ArgString],
    read: impl FnOnce(&mut RedisStore, &LockNames) -> Result<i64, LockError>,
) -> RedisResult {
    let names = args::lock_only(args)?;
    let n = change(ctx, name_arg(args), &names, |store| read(store, &names))?;
    Ok(RedisValue::Integer(n))
}

/// `PERMIT.AVAILABLE name`: the free permits, 0 when there is no count
/// (`availablePermits()`).
pub fn available(ctx: &Context, args: &[ArgString]) -> RedisResult {
    count_of(ctx, args, |store, names| permit::available(store, names))
}

/// `PERMIT.PERMITS name`: free plus taken, 0 when there is no count
/// (`getPermits()`).
pub fn permits(ctx: &Context, args: &[ArgString]) -> RedisResult {
    count_of(ctx, args, |store, names| permit::permits(store, names))
}

/// `PERMIT.ACQUIRED name`: how many are taken (`acquiredPermits()`).
pub fn acquired(ctx: &Context, args: &[ArgString]) -> RedisResult {
    count_of(ctx, args, |store, names| permit::acquired(store, names))
}

/// What a permit command touches besides its count.
const PERMIT_KEYS: &CStr = c"Also its permits taken {name}:timeout (a sorted set of permit id to expiry ms; name:timeout when the name has braces) and acquisition latches redisson_lock_request_latch:{name}:id (ACQUIRE … REQUEST), named from the semaphore and in its hash slot; it publishes on redisson_sc:{name}";

fn semaphore_name() -> ArgDoc {
    arg(
        c"name",
        ArgKind::Key,
        c"The semaphore's name: the key of its free count, as Redisson names it",
    )
}

fn id(summary: &'static CStr) -> ArgDoc {
    arg(c"id", ArgKind::Str, summary)
}

fn lease(summary: &'static CStr) -> ArgDoc {
    arg(c"lease", ArgKind::Int, summary)
}

fn count(summary: &'static CStr) -> ArgDoc {
    arg(c"permits", ArgKind::Int, summary)
}

/// Redisson's `RPermitExpirableSemaphore` (contract §17): every row on the
/// count's key, from 0.4.0. Each may reclaim expired permits, so even the
/// reads write (as Redisson runs them: `evalWrite`); none is denied under
/// `maxmemory` but the acquisition and the two that raise the count.
pub(super) fn commands() -> Vec<Command> {
    let row = |name, entry, flags, summary, arity, args| {
        Command {
        name,
        entry,
        flags,
        summary,
        complexity: c"O(log N + E) for N permits taken and E expired; O(W) more when permits are handed to W waiters",
        since: V4,
        arity,
        key: RELEASE_KEY,
        key_notes: PERMIT_KEYS,
        args,
    }
    };
    vec![
        Command {
            key: ACQUIRE_KEY,
            ..row(
                c"permit.acquire",
                entry!(acquire_permits),
                c"write deny-oom blocking",
                c"Takes permits of a Redisson permit-expirable semaphore, each with a lease, when that many are free and nobody waits before. Replies their ids; refused, the first expiry held or nil; BLOCK waits on the server in arrival order; SESSION releases them when the connection closes",
                -4,
                vec![
                    semaphore_name(),
                    count(c"How many permits to take (1 to 100000)"),
                    lease(c"Milliseconds each permit lasts, or -1: it never expires"),
                    block(),
                    flag(
                        c"session",
                        c"SESSION",
                        c"Bind the permits to this connection: those still held are released when it closes",
                    ),
                    acquire_request_option(),
                ],
            )
        },
        row(
            c"permit.release",
            entry!(release),
            c"write",
            c"Gives permits back by id, all or none, publishes how many and serves the waiters. Replies how many, 0 when one is not held or expired",
            -3,
            vec![
                semaphore_name(),
                ArgDoc {
                    multiple: true,
                    ..id(c"A permit's id (hex)")
                },
            ],
        ),
        row(
            c"permit.tryrelease",
            entry!(release_one),
            c"write",
            c"Gives one permit back by id, publishes the new count and serves the waiters. Replies 1, or 0 when its lease had run out or it is not held",
            3,
            vec![semaphore_name(), id(c"The permit's id (hex)")],
        ),
        row(
            c"permit.updatelease",
            entry!(update_lease),
            c"write",
            c"Gives a held permit a new lease from now. Replies 1, or 0 when it is not held",
            4,
            vec![
                semaphore_name(),
                id(c"The permit's id (hex)"),
                lease(c"Milliseconds from now, or -1: it never expires"),
            ],
        ),
        row(
            c"permit.leasetime",
            entry!(lease_time),
            c"write",
            c"Shows the milliseconds a held permit has left, -1 when it never expires, 0 when it is not held",
            3,
            vec![semaphore_name(), id(c"The permit's id (hex)")],
        ),
        Command {
            key: ACQUIRE_KEY,
            ..row(
                c"permit.trysetpermits",
                entry!(try_set),
                c"write deny-oom",
                c"Sets a permit-expirable semaphore's free count when it has none and publishes it. Replies 1 when set, else 0",
                3,
                vec![semaphore_name(), count(c"The count (any 64-bit integer)")],
            )
        },
        Command {
            key: ACQUIRE_KEY,
            ..row(
                c"permit.setpermits",
                entry!(set_permits),
                c"write deny-oom",
                c"Makes free plus taken permits the given total, publishing it when that changed the count. Replies nil",
                3,
                vec![semaphore_name(), count(c"The total (any 64-bit integer)")],
            )
        },
        Command {
            key: ACQUIRE_KEY,
            ..row(
                c"permit.addpermits",
                entry!(add),
                c"write deny-oom",
                c"Adds to the free count (negative takes away; a TTL is dropped) and publishes what was added when above 0. Replies nil",
                3,
                vec![semaphore_name(), count(c"How many to add (negative: take away)")],
            )
        },
        row(
            c"permit.available",
            entry!(available),
            c"write",
            c"Shows the free permits after reclaiming expired ones, 0 when there is no count",
            2,
            vec![semaphore_name()],
        ),
        row(
            c"permit.permits",
            entry!(permits),
            c"write",
            c"Shows free plus taken permits after reclaiming expired ones, 0 when there is no count",
            2,
            vec![semaphore_name()],
        ),
        row(
            c"permit.acquired",
            entry!(acquired),
            c"write",
            c"Shows how many permits are taken after reclaiming expired ones",
            2,
            vec![semaphore_name()],
        ),
    ]
}

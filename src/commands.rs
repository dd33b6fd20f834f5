//! Command handlers: parse, run the lock machine on the live keyspace, reply.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisResult, RedisValue};

use crate::args::{self, lock_error, ArgString};
use crate::blocking;
use crate::config;
use crate::core::lock::{self, Acquire, LockInfo, Mode};
use crate::core::queue;
use crate::core::store::Store;
use crate::keyspace::RedisStore;
use crate::metrics;

type Handler = fn(&Context, &[ArgString]) -> RedisResult;

/// Wraps a handler in the C entry point Redis calls.
macro_rules! entry {
    ($handler:path) => {{
        unsafe extern "C" fn entry(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            // SAFETY: Redis passes the command's own context and `argc`
            // arguments, alive until the handler returns.
            unsafe { run(ctx, ArgString::slice(argv, argc), $handler) }
        }
        entry as unsafe extern "C" fn(_, _, _) -> _
    }};
}

/// Every command: name, entry point, flags (`blocking`: BLOCK may park the
/// client) and the key spec (the lock name is the only key).
const COMMANDS: [(&CStr, raw::RedisModuleCmdFunc, &CStr); 6] = [
    (
        c"rwlock.read",
        Some(entry!(read)),
        c"write deny-oom blocking",
    ),
    (
        c"rwlock.write",
        Some(entry!(write)),
        c"write deny-oom blocking",
    ),
    (c"rwlock.unlock", Some(entry!(unlock)), c"write"),
    (c"rwlock.renew", Some(entry!(renew)), c"write"),
    (c"rwlock.forceunlock", Some(entry!(force_unlock)), c"write"),
    (c"rwlock.info", Some(entry!(info)), c"readonly"),
];

/// Registers the commands. Done here rather than by the crate's command
/// table, whose entry points copy and retain every argument first.
pub fn register(ctx: &Context) -> Result<(), String> {
    for (name, entry, flags) in COMMANDS {
        // SAFETY: a loading module's context and NUL-terminated literals.
        let status = unsafe {
            raw::RedisModule_CreateCommand.expect("CreateCommand")(
                ctx.get_raw(),
                name.as_ptr(),
                entry,
                flags.as_ptr(),
                1,
                1,
                1,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(format!("cannot create command {}", name.to_string_lossy()));
        }
    }
    Ok(())
}

fn run(ctx: *mut raw::RedisModuleCtx, args: &[ArgString], handler: Handler) -> c_int {
    let context = Context::new(ctx);
    context.reply(handler(&context, args)) as c_int
}

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
    blocking::serve(ctx, &mut store, names);
    let outcome = blocking::serve_after(ctx, &mut store, names, |store| {
        let queued = config::fair()
            && blocking::has_waiters(ctx, names)
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
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = args::unlock(args)?;
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
    let outcome = blocking::serve_after(ctx, &mut store, &a.names, |store| {
        lock::unlock(store, &a.names, a.owner, a.mode, lease, a.request)
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
    let held = blocking::serve_after(ctx, &mut store, &a.names, |store| {
        lock::renew(store, &a.names, a.owner, a.lease)
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
    let deleted = blocking::serve_after(ctx, &mut store, &names, |store| {
        lock::force_unlock(store, &names, only)
    })
    .map_err(lock_error)?;
    if deleted {
        metrics::force_unlocked();
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
    let info = lock::info(&mut store, &names).map_err(lock_error)?;
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

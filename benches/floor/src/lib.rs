//! The layout's floor, for `make bench` and `make profile` only: a module of
//! its own (`librwlock_floor.so`) whose commands make just the Redis calls a
//! lock cycle cannot avoid on Redisson's keys, through the API rwlock uses,
//! and nothing else (no name or owner checks, no replication, keyspace
//! events, modified-key signals or waiters). The bench loads it into a
//! server of its own beside rwlock's, to show how much of a cycle is the
//! layout's own work. They trust their arguments: never load it anywhere else.
//!
//! - `RWLOCK.FLOOR.WRITE lock field lease`: the hash `{mode: write, field: 1}`
//!   expiring `lease` ms from now; replies nil.
//! - `RWLOCK.FLOOR.READ lock owner lease-key lease`: the hash
//!   `{mode: read, owner: 1}` and the lease key `1`, both expiring `lease` ms
//!   from now; replies nil.
//! - `RWLOCK.FLOOR.UNLOCK lock channel field [lease-key]`: the release of the
//!   only hold: reads `mode` and `field`, deletes the lease key (given for a
//!   read hold) and the hash, publishes Redisson's unlock message (0 for a
//!   read hold, 1 for a write hold); replies 1.

use std::ffi::{c_void, CStr};
use std::os::raw::c_int;
use std::ptr;

use redis_module::alloc::RedisAlloc;
use redis_module::{
    raw, redis_module, Context, RedisError, RedisResult, RedisString, RedisValue, Status,
};

type Str = *mut raw::RedisModuleString;

/// The texts every cycle writes, made once like rwlock's own constants, so
/// that the floor pays no more for them than the module does.
#[derive(Clone, Copy)]
enum Text {
    Mode,
    Read,
    Write,
    /// A hold's count, a lease key's value, and the write unlock message.
    One,
    /// The read unlock message.
    Zero,
}

const TEXTS: [&[u8]; 5] = [b"mode", b"read", b"write", b"1", b"0"];

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static MADE: [Str; 5] = TEXTS.map(|text| {
        // SAFETY: a string with no context belongs to the module; these are
        // never freed, and Redis copies what it stores from them.
        unsafe {
            raw::RedisModule_CreateString.expect("CreateString")(
                ptr::null_mut(),
                text.as_ptr().cast(),
                text.len(),
            )
        }
    });
}

fn text(t: Text) -> Str {
    MADE.with(|m| m[t as usize])
}

fn open(ctx: &Context, name: Str) -> *mut raw::RedisModuleKey {
    let mode = raw::REDISMODULE_READ | raw::REDISMODULE_WRITE;
    // SAFETY: the running command's context; the name outlives the key.
    unsafe { raw::RedisModule_OpenKey.expect("OpenKey")(ctx.get_raw(), name, mode as c_int) }
}

/// The absolute deadline `lease` ms from the server's clock.
fn deadline(lease: Str) -> Result<i64, RedisError> {
    let ms = RedisString::string_as_slice(lease);
    let ms: i64 = std::str::from_utf8(ms)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&ms| ms > 0)
        .ok_or(RedisError::Str("ERR the lease must be a positive integer"))?;
    // SAFETY: a plain read of the server's clock, from the main thread.
    let now = unsafe { raw::RedisModule_Milliseconds.expect("Milliseconds")() };
    Ok(now.saturating_add(ms))
}

/// A new lock hash `{mode: mode, field: 1}` that expires at `deadline`.
fn create(ctx: &Context, lock: Str, mode: Text, field: Str, deadline: i64) {
    let key = open(ctx, lock);
    // SAFETY: a writable key; two field/value pairs closed by a null, as
    // HashSet's variadic protocol requires; the key is closed once, here.
    unsafe {
        raw::RedisModule_HashSet.expect("HashSet")(
            key,
            raw::REDISMODULE_HASH_NONE as c_int,
            text(Text::Mode),
            text(mode),
            field,
            text(Text::One),
            ptr::null_mut::<c_void>(),
        );
        raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(key, deadline);
        raw::RedisModule_CloseKey.expect("CloseKey")(key);
    }
}

fn write(ctx: &Context, args: &[Str]) -> RedisResult {
    let &[_, lock, field, lease] = args else {
        return Err(RedisError::WrongArity);
    };
    create(ctx, lock, Text::Write, field, deadline(lease)?);
    Ok(RedisValue::Null)
}

fn read(ctx: &Context, args: &[Str]) -> RedisResult {
    let &[_, lock, owner, lease_key, lease] = args else {
        return Err(RedisError::WrongArity);
    };
    let deadline = deadline(lease)?;
    create(ctx, lock, Text::Read, owner, deadline);
    let key = open(ctx, lease_key);
    // SAFETY: a writable key, closed once, here.
    unsafe {
        raw::RedisModule_StringSet.expect("StringSet")(key, text(Text::One));
        raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(key, deadline);
        raw::RedisModule_CloseKey.expect("CloseKey")(key);
    }
    Ok(RedisValue::Null)
}

fn unlock(ctx: &Context, args: &[Str]) -> RedisResult {
    let (lock, channel, field, lease_key) = match *args {
        [_, lock, channel, field] => (lock, channel, field, None),
        [_, lock, channel, field, lease_key] => (lock, channel, field, Some(lease_key)),
        _ => return Err(RedisError::WrongArity),
    };
    let key = open(ctx, lock);
    let mut values = [ptr::null_mut::<raw::RedisModuleString>(); 2];
    let [mode, count] = &mut values;
    // SAFETY: a writable key; two field/out-pointer pairs closed by a null,
    // as HashGet's variadic protocol requires (a key of another type reads
    // nothing); the values are freed once and the keys closed once.
    unsafe {
        raw::RedisModule_HashGet.expect("HashGet")(
            key,
            raw::REDISMODULE_HASH_NONE as c_int,
            text(Text::Mode),
            mode as *mut Str,
            field,
            count as *mut Str,
            ptr::null_mut::<c_void>(),
        );
        for value in values.into_iter().filter(|v| !v.is_null()) {
            raw::RedisModule_FreeString.expect("FreeString")(ptr::null_mut(), value);
        }
        if let Some(lease_key) = lease_key {
            let lease = open(ctx, lease_key);
            raw::RedisModule_DeleteKey.expect("DeleteKey")(lease);
            raw::RedisModule_CloseKey.expect("CloseKey")(lease);
        }
        raw::RedisModule_DeleteKey.expect("DeleteKey")(key);
        raw::RedisModule_CloseKey.expect("CloseKey")(key);
        let message = match lease_key {
            Some(_) => Text::Zero,
            None => Text::One,
        };
        raw::RedisModule_PublishMessage.expect("PublishMessage")(
            ctx.get_raw(),
            channel,
            text(message),
        );
    }
    Ok(RedisValue::Integer(1))
}

type Handler = fn(&Context, &[Str]) -> RedisResult;

/// Wraps a handler in the C entry point Redis calls, handing it the
/// arguments as Redis passes them: rwlock's commands take them uncopied too.
macro_rules! entry {
    ($handler:path) => {{
        unsafe extern "C" fn entry(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut Str,
            argc: c_int,
        ) -> c_int {
            // SAFETY: Redis passes the command's own context and `argc`
            // arguments, alive until the handler returns.
            unsafe { run(ctx, argv, argc, $handler) }
        }
        entry as unsafe extern "C" fn(_, _, _) -> _
    }};
}

/// # Safety
/// `argv` must point to `argc` strings that outlive the call.
unsafe fn run(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut Str,
    argc: c_int,
    handler: Handler,
) -> c_int {
    let args = match usize::try_from(argc) {
        // SAFETY: the caller vouches for `argc` strings at `argv`.
        Ok(len) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, len) },
        _ => &[],
    };
    let context = Context::new(ctx);
    context.reply(handler(&context, args)) as c_int
}

const COMMANDS: [(&CStr, raw::RedisModuleCmdFunc); 3] = [
    (c"rwlock.floor.read", Some(entry!(read))),
    (c"rwlock.floor.write", Some(entry!(write))),
    (c"rwlock.floor.unlock", Some(entry!(unlock))),
];

fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    for (name, entry) in COMMANDS {
        // SAFETY: a loading module's context and NUL-terminated literals.
        let status = unsafe {
            raw::RedisModule_CreateCommand.expect("CreateCommand")(
                ctx.get_raw(),
                name.as_ptr(),
                entry,
                c"write".as_ptr(),
                1,
                1,
                1,
            )
        };
        if status != raw::REDISMODULE_OK as c_int {
            ctx.log_warning(&format!("rwlock-floor: cannot create {name:?}"));
            return Status::Err;
        }
    }
    Status::Ok
}

redis_module! {
    name: "rwlockfloor",
    version: 1,
    allocator: (RedisAlloc, RedisAlloc),
    data_types: [],
    init: init,
    commands: [],
}

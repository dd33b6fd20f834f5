//! The layout's floor, built only with the `layout-floor` feature, for
//! `make bench`: commands that make just the Redis calls a lock cycle cannot
//! avoid on Redisson's keys, through the same API the module uses, and
//! nothing else (no name or owner checks, no replication, keyspace events,
//! modified-key signals or waiters). The bench runs them beside the module
//! to show how much of a cycle is the layout's own work. Never in a
//! production build: they trust their arguments.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisError, RedisResult, RedisValue};

use crate::args::{self, ArgString};
use crate::core::lock::{Mode, READ_RELEASED, WRITE_RELEASED};
use crate::core::names::MODE_FIELD;
use crate::keyspace::{constant, open_raw, server_ms};

const ONE: &[u8] = b"1";

fn text(bytes: &[u8]) -> *mut raw::RedisModuleString {
    constant(bytes).expect("a constant text")
}

fn open(ctx: &Context, name: &ArgString) -> *mut raw::RedisModuleKey {
    open_raw(ctx, name.ptr(), true)
}

/// A new lock hash `{mode: mode, field: 1}` that expires at `deadline`.
fn create(ctx: &Context, lock: &ArgString, mode: Mode, field: &ArgString, deadline: i64) {
    let key = open(ctx, lock);
    // SAFETY: a writable key; two field/value pairs closed by a null, as
    // HashSet's variadic protocol requires; the key is closed once, here.
    unsafe {
        raw::RedisModule_HashSet.expect("HashSet")(
            key,
            raw::REDISMODULE_HASH_NONE as c_int,
            text(MODE_FIELD),
            text(mode.as_bytes()),
            field.ptr(),
            text(ONE),
            ptr::null_mut::<c_void>(),
        );
        raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(key, deadline);
        raw::RedisModule_CloseKey.expect("CloseKey")(key);
    }
}

/// `RWLOCK.FLOOR.WRITE lock field lease`
///
/// A write lock taken on a free lock: the hash `{mode: write, field: 1}`
/// with a deadline `lease` ms away.
pub fn write(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let [_, lock, field, lease] = args else {
        return Err(RedisError::WrongArity);
    };
    let deadline = server_ms() + args::lease(lease)?;
    create(ctx, lock, Mode::Write, field, deadline);
    Ok(RedisValue::Null)
}

/// `RWLOCK.FLOOR.READ lock owner lease-key lease`
///
/// A read lock taken on a free lock: the hash `{mode: read, owner: 1}` and
/// the lease key `1`, both with a deadline `lease` ms away.
pub fn read(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let [_, lock, owner, lease_key, lease] = args else {
        return Err(RedisError::WrongArity);
    };
    let deadline = server_ms() + args::lease(lease)?;
    create(ctx, lock, Mode::Read, owner, deadline);
    let key = open(ctx, lease_key);
    // SAFETY: a writable key, closed once, here.
    unsafe {
        raw::RedisModule_StringSet.expect("StringSet")(key, text(ONE));
        raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(key, deadline);
        raw::RedisModule_CloseKey.expect("CloseKey")(key);
    }
    Ok(RedisValue::Null)
}

/// `RWLOCK.FLOOR.UNLOCK lock channel field [lease-key]`
///
/// The release of the only hold: reads `mode` and `field`, deletes the lease
/// key (given for a read hold) and the hash, publishes the release. Replies 1.
pub fn unlock(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (lock, channel, field, lease_key) = match args {
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
            text(MODE_FIELD),
            mode as *mut *mut raw::RedisModuleString,
            field.ptr(),
            count as *mut *mut raw::RedisModuleString,
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
        let message = if lease_key.is_some() {
            READ_RELEASED
        } else {
            WRITE_RELEASED
        };
        raw::RedisModule_PublishMessage.expect("PublishMessage")(
            ctx.get_raw(),
            channel.ptr(),
            text(message),
        );
    }
    Ok(RedisValue::Integer(1))
}

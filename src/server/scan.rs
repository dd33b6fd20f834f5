//! A bounded walk of the whole keyspace for `INFO rwlock`'s census
//! (`census`): every database's keys through `RM_Scan`, the hashes with a
//! TTL read field by field. Reads only, on the main thread, through a
//! context of its own so the caller's selected database is untouched.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use super::strings;

/// What a walk saw: keys looked at, and whether that was every key.
pub struct Walked {
    pub keys: u64,
    pub complete: bool,
}

/// A hash's fields and values, as the walk hands them over.
pub type FieldPairs = [(Vec<u8>, Vec<u8>)];

/// What the scan's callbacks fill in.
struct Walk<'f> {
    keys: u64,
    /// The fields of the hash being read.
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    each: &'f mut dyn FnMut(&FieldPairs),
}

unsafe extern "C" fn on_field(
    _key: *mut raw::RedisModuleKey,
    field: *mut raw::RedisModuleString,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
) {
    // SAFETY: privdata is the Walk of `hashes_with_ttl`, alive for the scan;
    // field and value are live during the callback.
    let walk = unsafe { &mut *(privdata as *mut Walk) };
    walk.fields.push((
        strings::bytes(field).to_vec(),
        strings::bytes(value).to_vec(),
    ));
}

unsafe extern "C" fn on_key(
    _ctx: *mut raw::RedisModuleCtx,
    _name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    privdata: *mut c_void,
) {
    // SAFETY: privdata is the Walk of `hashes_with_ttl`, alive for the scan.
    let walk = unsafe { &mut *(privdata as *mut Walk) };
    walk.keys += 1;
    if key.is_null() {
        return;
    }
    // SAFETY: a key the scan opened for this callback; the cursor is created
    // and destroyed here, and on_field only touches the Walk.
    unsafe {
        if raw::RedisModule_KeyType.expect("KeyType")(key) as isize != raw::REDISMODULE_KEYTYPE_HASH
        {
            return;
        }
        // A lock hash always has its lease: a hash without one is no lock,
        // and one whose lease ran out (the scan opens keys as they lie) is
        // held by nobody.
        let ttl = raw::RedisModule_GetExpire.expect("GetExpire")(key);
        if ttl == raw::REDISMODULE_NO_EXPIRE as i64 || ttl <= 0 {
            return;
        }
        walk.fields.clear();
        let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
        while raw::RedisModule_ScanKey.expect("ScanKey")(key, cursor, Some(on_field), privdata) != 0
        {
        }
        raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
    }
    (walk.each)(&walk.fields);
}

/// Calls `each` with the fields of every hash that has a TTL, in every
/// database, until `max_keys` keys were looked at (one scan step reads a
/// bucket of the table, a few keys: the bound is passed by a few at most).
pub fn hashes_with_ttl(max_keys: u64, mut each: impl FnMut(&FieldPairs)) -> Walked {
    let mut walk = Walk {
        keys: 0,
        fields: Vec::new(),
        each: &mut each,
    };
    let privdata = &mut walk as *mut Walk as *mut c_void;
    let seen = |p: *mut c_void| {
        // SAFETY: p is `walk`, not borrowed while the scan is not running.
        unsafe { (*(p as *mut Walk)).keys }
    };
    let mut complete = true;
    // SAFETY: INFO runs on the main thread, which holds the server's lock, so
    // a thread-safe context is used without locking; it is freed once,
    // below, and each cursor is created and destroyed here.
    unsafe {
        let ctx =
            raw::RedisModule_GetThreadSafeContext.expect("GetThreadSafeContext")(ptr::null_mut());
        let select = raw::RedisModule_SelectDb.expect("SelectDb");
        let mut db: c_int = 0;
        'dbs: while select(ctx, db) == raw::REDISMODULE_OK as c_int {
            db += 1;
            if raw::RedisModule_DbSize.expect("DbSize")(ctx) == 0 {
                continue;
            }
            if seen(privdata) >= max_keys {
                complete = false;
                break;
            }
            let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
            let scan_db = raw::RedisModule_Scan.expect("Scan");
            while scan_db(ctx, cursor, Some(on_key), privdata) != 0 {
                if seen(privdata) >= max_keys {
                    complete = false;
                    raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
                    break 'dbs;
                }
            }
            raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
        }
        raw::RedisModule_FreeThreadSafeContext.expect("FreeThreadSafeContext")(ctx);
    }
    Walked {
        keys: walk.keys,
        complete,
    }
}

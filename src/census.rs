//! `INFO rwlock`'s hold counts by kind (docs/design.md, "INFO rwlock
//! fields"): a census of the keyspace taken when `INFO rwlock` is read, so
//! that no lock command pays anything for it. Counters kept on the
//! module's own grants and releases would cost every acquisition and still
//! be wrong: a lease that runs out, a `DEL`, a flush or a Redisson script
//! changes holds without a module command.
//!
//! A key counts as a lock when it is a hash with a TTL (every lock hash has
//! its lease) whose fields are all holds, each a count from 1 to
//! `MAX_HOLDS` as Redisson writes them, besides a `mode` of `read` or
//! `write`: the data of contract §2 and §10.1, whoever wrote it. A field
//! `<owner>:write` is a write hold, another field of a hash with a `mode` a
//! read hold, of a hash without one a plain (or fair) lock's hold. The
//! census stops after `MAX_KEYS` keys, so `INFO rwlock` costs at most that
//! scan however large the keyspace, and says whether it saw every key.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use crate::engine::hold::parse_count;
use crate::engine::names::{field_owner, MODE_FIELD};

/// Most keys one census looks at (all databases together): about 1.5 ms
/// of `INFO rwlock` on a 2-vCPU VM, 4 ms at most in a keyspace of 100,000
/// keys (docs/design.md).
pub const MAX_KEYS: u64 = 10_000;

/// What one census found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// Holds by kind: the sum of the counts (a re-entered hold counts as
    /// many times as it was taken).
    pub read: u64,
    pub write: u64,
    /// Plain and fair locks' holds: both are the plain lock's hash.
    pub lock: u64,
    /// Lock hashes found.
    pub locks: u64,
    /// Keys looked at.
    pub keys: u64,
    /// True when every key of every database was looked at.
    pub complete: bool,
}

impl Census {
    /// Counts the hash with these fields, when it is a lock (see the
    /// module's comment); anything else counts nothing.
    pub fn add_hash<'a>(&mut self, fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) {
        let fields: Vec<(&[u8], &[u8])> = fields.into_iter().collect();
        let mut rw = false;
        for (field, value) in &fields {
            if *field == MODE_FIELD {
                if *value != b"read" && *value != b"write" {
                    return;
                }
                rw = true;
            }
        }
        let (mut read, mut write, mut lock) = (0u64, 0u64, 0u64);
        for (field, value) in fields.iter().filter(|(f, _)| *f != MODE_FIELD) {
            let Ok(n) = parse_count(value) else {
                return;
            };
            let n = n as u64;
            match (field_owner(field).1, rw) {
                (true, _) => write += n,
                (false, true) => read += n,
                (false, false) => lock += n,
            }
        }
        if read + write + lock == 0 {
            return;
        }
        self.read += read;
        self.write += write;
        self.lock += lock;
        self.locks += 1;
    }
}

/// What the scan's callbacks fill in.
struct Scan {
    census: Census,
    /// The fields of the hash being read.
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The bytes of a Redis string, valid while it is.
///
/// # Safety
/// `s` is a live module string.
unsafe fn bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: a live string; its buffer outlives the borrow (the caller's).
    unsafe {
        let p = raw::RedisModule_StringPtrLen.expect("StringPtrLen")(s, &mut len);
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

unsafe extern "C" fn on_field(
    _key: *mut raw::RedisModuleKey,
    field: *mut raw::RedisModuleString,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
) {
    // SAFETY: privdata is the Scan of `take`, alive for the scan; field and
    // value are live during the callback.
    unsafe {
        let scan = &mut *(privdata as *mut Scan);
        scan.fields
            .push((bytes(field).to_vec(), bytes(value).to_vec()));
    }
}

unsafe extern "C" fn on_key(
    _ctx: *mut raw::RedisModuleCtx,
    _name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    privdata: *mut c_void,
) {
    // SAFETY: privdata is the Scan of `take`, alive for the scan; the key,
    // when not null, is open for the callback.
    unsafe {
        let scan = &mut *(privdata as *mut Scan);
        scan.census.keys += 1;
        if key.is_null() {
            return;
        }
        let kind = raw::RedisModule_KeyType.expect("KeyType")(key) as isize;
        if kind != raw::REDISMODULE_KEYTYPE_HASH {
            return;
        }
        // A lock hash always has its lease: a hash without TTL is no lock,
        // and one whose lease ran out (not yet reclaimed: the scan opens
        // keys as they lie) is held by nobody.
        let ttl = raw::RedisModule_GetExpire.expect("GetExpire")(key);
        if ttl == raw::REDISMODULE_NO_EXPIRE as i64 || ttl <= 0 {
            return;
        }
        scan.fields.clear();
        let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
        while raw::RedisModule_ScanKey.expect("ScanKey")(key, cursor, Some(on_field), privdata) != 0
        {
        }
        raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
        let fields = std::mem::take(&mut scan.fields);
        scan.census
            .add_hash(fields.iter().map(|(f, v)| (f.as_slice(), v.as_slice())));
        scan.fields = fields;
    }
}

/// Takes the census of every database, at most `MAX_KEYS` keys. Reads
/// only, on the main thread (INFO's), through a context of its own so the
/// caller's selected database is untouched.
pub fn take() -> Census {
    let mut scan = Scan {
        census: Census::default(),
        fields: Vec::new(),
    };
    let privdata = &mut scan as *mut Scan as *mut c_void;
    // SAFETY: INFO runs on the main thread, which holds the server's lock,
    // so a thread-safe context is used without locking; it is freed once,
    // below, and the cursor is created and destroyed here.
    unsafe {
        let ctx =
            raw::RedisModule_GetThreadSafeContext.expect("GetThreadSafeContext")(ptr::null_mut());
        let select = raw::RedisModule_SelectDb.expect("SelectDb");
        let mut complete = true;
        let mut db: c_int = 0;
        let seen = |p: *mut c_void| (*(p as *mut Scan)).census.keys;
        'dbs: while select(ctx, db) == raw::REDISMODULE_OK as c_int {
            db += 1;
            if raw::RedisModule_DbSize.expect("DbSize")(ctx) == 0 {
                continue;
            }
            if seen(privdata) >= MAX_KEYS {
                complete = false;
                break;
            }
            let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
            let scan_db = raw::RedisModule_Scan.expect("Scan");
            // One step of the scan visits a bucket of the keyspace's table,
            // a few keys: the bound is passed by a few at most.
            while scan_db(ctx, cursor, Some(on_key), privdata) != 0 {
                if seen(privdata) >= MAX_KEYS {
                    complete = false;
                    raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
                    break 'dbs;
                }
            }
            raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
        }
        raw::RedisModule_FreeThreadSafeContext.expect("FreeThreadSafeContext")(ctx);
        scan.census.complete = complete;
    }
    scan.census
}

#[cfg(test)]
mod tests {
    use super::*;

    fn census(hashes: &[&[(&str, &str)]]) -> Census {
        let mut c = Census::default();
        for fields in hashes {
            c.add_hash(fields.iter().map(|(f, v)| (f.as_bytes(), v.as_bytes())));
        }
        c
    }

    #[test]
    fn holds_are_counted_by_kind_with_their_counts() {
        let c = census(&[
            // Two readers, one re-entered.
            &[("mode", "read"), ("a:1", "2"), ("b:1", "1")],
            // A writer who also reads.
            &[("mode", "write"), ("w:1:write", "1"), ("w:1", "3")],
            // A plain (or fair) lock, re-entered.
            &[("p:1", "4")],
        ]);
        assert_eq!(
            c,
            Census {
                read: 6,
                write: 1,
                lock: 4,
                locks: 3,
                ..Census::default()
            }
        );
    }

    #[test]
    fn hashes_that_are_no_locks_count_nothing() {
        let c = census(&[
            &[("name", "x")],
            &[("count", "0")],
            &[("count", "100001")],
            &[("mode", "other"), ("a:1", "1")],
            &[("mode", "read")],
            &[("a", "1"), ("b", "01")],
            &[],
        ]);
        assert_eq!(c, Census::default());
    }
}

//! Keys through Redis's low-level key API: opened once per command, read
//! and written as the commands Redisson's scripts call would (hashes,
//! strings, deadlines, and the fair lock's list and sorted set), each
//! unsafe call and its contract written once. The store (`keyspace`)
//! decides what to write; this file only carries it to the server.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

use super::strings::{self, RawString};

/// A key opened by [`open_key`], valid until [`Key::close`]; a missing key
/// opened read-only is a null handle, which every method here accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(*mut raw::RedisModuleKey);

/// What a key holds, by Redis's own key types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Empty,
    Hash,
    String,
    Other,
}

/// Opens the key `name` (a string that outlives the key) in the context's
/// database.
#[inline]
pub fn open_key(ctx: &Context, name: RawString, writable: bool) -> Key {
    let mode = if writable {
        raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
    } else {
        raw::REDISMODULE_READ
    };
    // SAFETY: a live context; the caller keeps the name alive with the key.
    Key(unsafe { raw::RedisModule_OpenKey.expect("OpenKey")(ctx.get_raw(), name, mode as c_int) })
}

impl Key {
    #[inline]
    pub fn close(self) {
        // SAFETY: a handle opened by open_key and closed once, here; CloseKey
        // accepts null.
        unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(self.0) };
    }

    #[inline]
    pub fn kind(self) -> KeyType {
        // SAFETY: KeyType accepts null (a missing key) and open handles.
        match unsafe { raw::RedisModule_KeyType.expect("KeyType")(self.0) } as isize {
            t if t == raw::REDISMODULE_KEYTYPE_EMPTY => KeyType::Empty,
            t if t == raw::REDISMODULE_KEYTYPE_HASH => KeyType::Hash,
            t if t == raw::REDISMODULE_KEYTYPE_STRING => KeyType::String,
            _ => KeyType::Other,
        }
    }

    /// Whether the key is a list (`Some(true)`), a sorted set
    /// (`Some(false)`), or neither (`None`, a missing key included).
    pub fn list_or_zset(self) -> Option<bool> {
        // SAFETY: KeyType accepts null (a missing key) and open handles.
        match unsafe { raw::RedisModule_KeyType.expect("KeyType")(self.0) } as isize {
            t if t == raw::REDISMODULE_KEYTYPE_LIST => Some(true),
            t if t == raw::REDISMODULE_KEYTYPE_ZSET => Some(false),
            _ => None,
        }
    }

    /// The key's absolute deadline: None when the key is missing,
    /// `REDISMODULE_NO_EXPIRE` when it has none.
    #[inline]
    pub fn abs_expire(self) -> Option<i64> {
        if self.kind() == KeyType::Empty {
            return None;
        }
        // SAFETY: an open handle of an existing key.
        Some(unsafe { raw::RedisModule_GetAbsExpire.expect("GetAbsExpire")(self.0) })
    }

    /// Sets the deadline of an existing key opened writable.
    #[inline]
    pub fn set_abs_expire(self, deadline: i64) {
        // SAFETY: a writable handle of an existing key.
        unsafe { raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(self.0, deadline) };
    }

    /// Deletes an existing key opened writable.
    #[inline]
    pub fn delete(self) {
        // SAFETY: a writable handle of an existing key.
        unsafe { raw::RedisModule_DeleteKey.expect("DeleteKey")(self.0) };
    }

    /// Elements of an existing hash.
    #[inline]
    pub fn value_length(self) -> usize {
        // SAFETY: ValueLength accepts null and open handles (0 for missing).
        unsafe { raw::RedisModule_ValueLength.expect("ValueLength")(self.0) }
    }

    /// The value of a hash field, as a new string the caller owns (free it
    /// with [`strings::free`] or wrap it), or null; None when not a hash.
    #[inline]
    pub fn hash_get(self, field: RawString) -> Option<RawString> {
        if self.kind() != KeyType::Hash {
            return None;
        }
        let mut value: RawString = ptr::null_mut();
        // SAFETY: a hash key; one field/out-pointer pair closed by a null, as
        // HashGet's variadic protocol requires.
        unsafe {
            raw::RedisModule_HashGet.expect("HashGet")(
                self.0,
                raw::REDISMODULE_HASH_NONE as c_int,
                field,
                &mut value as *mut RawString,
                ptr::null_mut::<c_void>(),
            );
        }
        (!value.is_null()).then_some(value)
    }

    /// Sets one or two hash fields (a `value` of [`HASH_DELETE`] deletes
    /// one) on a key opened writable that is empty or a hash; Redis copies
    /// what it keeps. Two in one call make a new hash once rather than once
    /// per field.
    #[inline]
    pub fn hash_set(self, pairs: &[(RawString, RawString)]) {
        let none = raw::REDISMODULE_HASH_NONE as c_int;
        let end = ptr::null_mut::<c_void>();
        // SAFETY: a writable hash or empty key; field/value pairs closed by a
        // null, as HashSet's variadic protocol requires.
        unsafe {
            let set = raw::RedisModule_HashSet.expect("HashSet");
            match *pairs {
                [(f, v)] => set(self.0, none, f, v, end),
                [(f1, v1), (f2, v2)] => set(self.0, none, f1, v1, f2, v2, end),
                _ => unreachable!("the store sets one or two fields"),
            };
        }
    }

    /// Calls `f` with every field and value of a hash key.
    pub fn scan_hash(self, mut f: impl FnMut(&[u8], &[u8])) {
        type Visit<'a> = &'a mut dyn FnMut(&[u8], &[u8]);
        unsafe extern "C" fn visit(
            _key: *mut raw::RedisModuleKey,
            field: RawString,
            value: RawString,
            privdata: *mut c_void,
        ) {
            // SAFETY: privdata is the visitor passed to ScanKey below, alive
            // for the scan; field and value are valid during the callback.
            let f = unsafe { &mut *(privdata as *mut Visit) };
            f(strings::bytes(field), strings::bytes(value));
        }
        let mut visitor: Visit = &mut f;
        // SAFETY: a hash handle; the cursor is created and destroyed here, and
        // the callback only touches the visitor, which outlives the loop.
        unsafe {
            let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
            while raw::RedisModule_ScanKey.expect("ScanKey")(
                self.0,
                cursor,
                Some(visit),
                &mut visitor as *mut Visit as *mut c_void,
            ) != 0
            {}
            raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
        }
    }

    /// Replaces the value of a key opened writable with the string `value`.
    #[inline]
    pub fn string_set(self, value: RawString) {
        // SAFETY: a writable handle; StringSet replaces a value of any type.
        unsafe { raw::RedisModule_StringSet.expect("StringSet")(self.0, value) };
    }

    /// Runs `f` on the bytes of a string key opened writable, to change them
    /// in place: Redis first gives the key a plain string of its own (an
    /// integer, a shared or an embedded string is copied).
    pub fn with_string_mut<R>(self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut len = 0usize;
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        // SAFETY: a writable string handle; the bytes are the key's own and
        // stay valid while nothing else touches the key, which is for `f`.
        unsafe {
            let data = raw::RedisModule_StringDMA.expect("StringDMA")(self.0, &mut len, mode);
            f(std::slice::from_raw_parts_mut(data as *mut u8, len))
        }
    }

    /// Resizes a string key opened writable to `len` bytes.
    pub fn string_truncate(self, len: usize) {
        // SAFETY: a writable string handle.
        unsafe { raw::RedisModule_StringTruncate.expect("StringTruncate")(self.0, len) };
    }

    /// A copy of a string key's bytes. Needs a writable handle: Redis decodes
    /// shared integer strings in place first.
    pub fn string_bytes(self) -> Vec<u8> {
        let mut len = 0usize;
        // SAFETY: a writable string handle; the bytes are copied before the
        // key can change.
        unsafe {
            let data = raw::RedisModule_StringDMA.expect("StringDMA")(
                self.0,
                &mut len,
                raw::REDISMODULE_READ as c_int,
            );
            std::slice::from_raw_parts(data as *const u8, len).to_vec()
        }
    }
}

/// A string Redis handed over (a list element, a sorted set member) copied
/// out and freed: the store's line works on owned bytes.
fn take_string(s: RawString) -> Option<Vec<u8>> {
    if s.is_null() {
        return None;
    }
    let bytes = strings::bytes(s).to_vec();
    // SAFETY: a string Redis returned to the module without auto-memory; freed
    // once, here, after its bytes were copied.
    unsafe { raw::RedisModule_FreeString.expect("FreeString")(ptr::null_mut(), s) };
    Some(bytes)
}

/// The fair lock's line: a list (`redisson_lock_queue:…`) and a sorted set
/// (`redisson_lock_timeout:…`) worked on through the key API, as the commands
/// Redisson's scripts call would. A key emptied by a removal is deleted by
/// Redis; each caller checks `kind` for that.
impl Key {
    /// `LINDEX`: the element at `index` (negative from the tail) of a list.
    pub fn list_get(self, index: i64) -> Option<Vec<u8>> {
        if self.list_or_zset() != Some(true) {
            return None;
        }
        // SAFETY: a list handle; ListGet returns a new string or null (out of
        // range), and take_string frees it.
        take_string(unsafe { raw::RedisModule_ListGet.expect("ListGet")(self.0, index as _) })
    }

    /// `LPOP` of a list opened writable; true when an element was removed.
    pub fn list_pop_head(self) -> bool {
        if self.list_or_zset() != Some(true) {
            return false;
        }
        let head = raw::REDISMODULE_LIST_HEAD as c_int;
        // SAFETY: a writable list handle; the popped string is freed.
        take_string(unsafe { raw::RedisModule_ListPop.expect("ListPop")(self.0, head) }).is_some()
    }

    /// `RPUSH` onto a list or empty key opened writable (Redis copies `value`).
    pub fn list_push_tail(self, value: RawString) {
        let tail = raw::REDISMODULE_LIST_TAIL as c_int;
        // SAFETY: a writable handle of a list or a missing key, and a valid
        // string; the push creates the list when the key is missing.
        unsafe { raw::RedisModule_ListPush.expect("ListPush")(self.0, tail, value) };
    }

    /// `ZSCORE`: the member's score in a sorted set.
    pub fn zset_score(self, member: RawString) -> Option<f64> {
        if self.list_or_zset() != Some(false) {
            return None;
        }
        let mut score = 0.0;
        // SAFETY: a sorted set handle, a valid member and an out-pointer.
        let found =
            unsafe { raw::RedisModule_ZsetScore.expect("ZsetScore")(self.0, member, &mut score) };
        (found == raw::REDISMODULE_OK as c_int).then_some(score)
    }

    /// `ZADD key score member` on a sorted set or empty key opened writable:
    /// whether the member was added, and whether anything changed.
    pub fn zset_add(self, score: f64, member: RawString) -> (bool, bool) {
        let mut flags: c_int = 0;
        // SAFETY: a writable sorted set or missing key, a valid member and an
        // in/out flags word (0: no condition).
        unsafe { raw::RedisModule_ZsetAdd.expect("ZsetAdd")(self.0, score, member, &mut flags) };
        let added = flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0;
        let updated = flags & raw::REDISMODULE_ZADD_UPDATED as c_int != 0;
        (added, added || updated)
    }

    /// `ZINCRBY` on a sorted set or empty key opened writable (a missing
    /// member starts at 0).
    pub fn zset_incrby(self, delta: f64, member: RawString) {
        let (mut flags, mut score): (c_int, f64) = (0, 0.0);
        // SAFETY: a writable sorted set or missing key, a valid member and two
        // out-pointers.
        unsafe {
            raw::RedisModule_ZsetIncrby.expect("ZsetIncrby")(
                self.0, delta, member, &mut flags, &mut score,
            )
        };
    }

    /// `ZREM` of one member of a sorted set opened writable; true when it was
    /// there.
    pub fn zset_remove(self, member: RawString) -> bool {
        if self.list_or_zset() != Some(false) {
            return false;
        }
        let mut deleted: c_int = 0;
        // SAFETY: a writable sorted set handle, a valid member, an out-pointer.
        unsafe { raw::RedisModule_ZsetRem.expect("ZsetRem")(self.0, member, &mut deleted) };
        deleted != 0
    }

    /// Calls `f` with every member of a sorted set, by score then bytes, as
    /// `ZRANGE key 0 -1` lists them.
    pub fn scan_zset(self, mut f: impl FnMut(Vec<u8>)) {
        self.scan_zset_range(f64::NEG_INFINITY, f64::INFINITY, |member, _| {
            f(member);
            true
        });
    }

    /// Calls `f` with each member of a sorted set scored from `min` to
    /// `max` and its score, lowest first, as `ZRANGEBYSCORE` lists them,
    /// until `f` returns false.
    pub fn scan_zset_range(self, min: f64, max: f64, mut f: impl FnMut(Vec<u8>, f64) -> bool) {
        if self.list_or_zset() != Some(false) {
            return;
        }
        // SAFETY: a sorted set handle; the range is opened, walked and stopped
        // here, and each element string is freed by take_string.
        unsafe {
            raw::RedisModule_ZsetFirstInScoreRange.expect("ZsetFirstInScoreRange")(
                self.0, min, max, 0, 0,
            );
            while raw::RedisModule_ZsetRangeEndReached.expect("ZsetRangeEndReached")(self.0) == 0 {
                let mut score = 0.0;
                let element = raw::RedisModule_ZsetRangeCurrentElement
                    .expect("ZsetRangeCurrentElement")(
                    self.0, &mut score
                );
                let more = take_string(element).is_none_or(|member| f(member, score));
                if !more || raw::RedisModule_ZsetRangeNext.expect("ZsetRangeNext")(self.0) == 0 {
                    break;
                }
            }
            raw::RedisModule_ZsetRangeStop.expect("ZsetRangeStop")(self.0);
        }
    }
}

/// The value that deletes a field in [`Key::hash_set`].
pub const HASH_DELETE: RawString = raw::REDISMODULE_HASH_DELETE as RawString;

//! The lock machine's [`Store`] on a live server, through the low-level key
//! API (no `RM_Call` on the hot path). Every write is followed by the keyspace
//! event and the replicated effect the equivalent command would produce.

use std::collections::HashMap;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString};

use crate::core::store::{KeyKind, Store, PTTL_MISSING, PTTL_PERSISTENT};
use crate::notify::{notify, Event};
use crate::publish::publish;
use crate::replicate;

/// A key kept open for the length of one command.
struct OpenKey {
    name: RedisString,
    /// Null when the key did not exist at a read-only open.
    handle: *mut raw::RedisModuleKey,
    writable: bool,
}

/// Past this many open keys they are found through an index: a reader
/// with many holds has one timeout key per hold, and a search through all
/// of them for each made a command quadratic (47 s for 100000 holds).
const INDEX_FROM: usize = 16;

/// Keys are opened on first use and closed when the command's store drops.
pub struct RedisStore<'c> {
    ctx: &'c Context,
    open: Vec<OpenKey>,
    /// Position of each open key by name, once there are many.
    index: Option<HashMap<Vec<u8>, usize>>,
    /// One clock reading per command: deadlines computed from it are also
    /// checked against it, so a millisecond ticking over mid-command cannot
    /// turn a 1 ms lease into a deletion.
    now: Option<i64>,
}

impl<'c> RedisStore<'c> {
    pub fn new(ctx: &'c Context) -> Self {
        RedisStore {
            ctx,
            open: Vec::with_capacity(4),
            index: None,
            now: None,
        }
    }

    fn raw_ctx(&self) -> *mut raw::RedisModuleCtx {
        self.ctx.get_raw()
    }

    /// Index of the open key `name`, opened (or reopened) writable if asked.
    fn slot(&mut self, name: &[u8], writable: bool) -> usize {
        let found = match &self.index {
            Some(index) => index.get(name).copied(),
            None => self.open.iter().position(|k| k.name.as_slice() == name),
        };
        if let Some(i) = found {
            if writable && !self.open[i].writable {
                // SAFETY: the handle was opened by us and is closed once, here.
                unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(self.open[i].handle) };
                self.open[i].handle = self.open_raw(&self.open[i].name, true);
                self.open[i].writable = true;
            }
            return i;
        }
        let key = RedisString::create_from_slice(ptr::null_mut(), name);
        let handle = self.open_raw(&key, writable);
        self.open.push(OpenKey {
            name: key,
            handle,
            writable,
        });
        let i = self.open.len() - 1;
        match &mut self.index {
            Some(index) => {
                index.insert(name.to_vec(), i);
            }
            None if self.open.len() > INDEX_FROM => {
                let names = self.open.iter().enumerate();
                self.index = Some(
                    names
                        .map(|(i, k)| (k.name.as_slice().to_vec(), i))
                        .collect(),
                );
            }
            None => {}
        }
        i
    }

    fn open_raw(&self, name: &RedisString, writable: bool) -> *mut raw::RedisModuleKey {
        let mode = if writable {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: the context is the running command's; the name outlives the key.
        unsafe {
            raw::RedisModule_OpenKey.expect("OpenKey")(self.raw_ctx(), name.inner, mode as c_int)
        }
    }

    fn read(&mut self, name: &[u8]) -> *mut raw::RedisModuleKey {
        let i = self.slot(name, false);
        self.open[i].handle
    }

    fn write(&mut self, name: &[u8]) -> *mut raw::RedisModuleKey {
        let i = self.slot(name, true);
        self.open[i].handle
    }

    fn key_type(handle: *mut raw::RedisModuleKey) -> isize {
        // SAFETY: KeyType accepts a null handle (a missing key) and open handles.
        unsafe { raw::RedisModule_KeyType.expect("KeyType")(handle) as isize }
    }

    fn hash_get(&mut self, handle: *mut raw::RedisModuleKey, field: &[u8]) -> Option<Vec<u8>> {
        if Self::key_type(handle) != raw::REDISMODULE_KEYTYPE_HASH {
            return None;
        }
        let field = RedisString::create_from_slice(ptr::null_mut(), field);
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: a hash key; one field/out-pointer pair closed by a null, as HashGet's
        // variadic protocol requires.
        unsafe {
            raw::RedisModule_HashGet.expect("HashGet")(
                handle,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            );
        }
        if value.is_null() {
            return None;
        }
        // Not auto-memory: wrapping it frees it after the copy.
        let value = RedisString::from_redis_module_string(ptr::null_mut(), value);
        Some(value.as_slice().to_vec())
    }

    fn hash_put(&mut self, key: &[u8], field: &[u8], value: *mut raw::RedisModuleString) {
        let handle = self.write(key);
        let field = RedisString::create_from_slice(ptr::null_mut(), field);
        // SAFETY: a writable key that is empty or a hash (the lock machine checked
        // its type); one field/value pair closed by a null.
        unsafe {
            raw::RedisModule_HashSet.expect("HashSet")(
                handle,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                value,
                ptr::null_mut::<c_void>(),
            );
        }
    }

    fn abs_expire(handle: *mut raw::RedisModuleKey) -> Option<i64> {
        if Self::key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
            return None;
        }
        // SAFETY: a non-null handle of an existing key.
        Some(unsafe { raw::RedisModule_GetAbsExpire.expect("GetAbsExpire")(handle) })
    }

    fn delete_open(&mut self, key: &[u8]) -> bool {
        let handle = self.write(key);
        if Self::key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
            return false;
        }
        // SAFETY: a writable handle of an existing key.
        unsafe { raw::RedisModule_DeleteKey.expect("DeleteKey")(handle) };
        self.event(Event::Del, key);
        replicate::del(self.ctx, key);
        true
    }

    fn event(&mut self, event: Event, key: &[u8]) {
        let i = self.slot(key, true);
        notify(self.ctx, event, &self.open[i].name);
    }
}

impl Drop for RedisStore<'_> {
    fn drop(&mut self) {
        for key in self.open.drain(..) {
            // SAFETY: each handle was opened by this store and is closed once;
            // CloseKey accepts null (a missing key opened read-only).
            unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(key.handle) };
        }
    }
}

impl Store for RedisStore<'_> {
    fn now_ms(&mut self) -> i64 {
        // SAFETY: a plain clock read.
        *self.now.get_or_insert_with(|| unsafe {
            raw::RedisModule_Milliseconds.expect("Milliseconds")()
        })
    }

    fn kind(&mut self, key: &[u8]) -> KeyKind {
        match Self::key_type(self.read(key)) {
            t if t == raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Missing,
            t if t == raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            t if t == raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            _ => KeyKind::Other,
        }
    }

    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        let handle = self.read(key);
        self.hash_get(handle, field)
    }

    fn hgetall(&mut self, key: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let handle = self.read(key);
        if Self::key_type(handle) != raw::REDISMODULE_KEYTYPE_HASH {
            return Vec::new();
        }
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        unsafe extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            privdata: *mut c_void,
        ) {
            // SAFETY: privdata is the Vec passed to ScanKey below, alive for the scan;
            // field and value are valid for the callback's duration.
            let fields = unsafe { &mut *(privdata as *mut Vec<(Vec<u8>, Vec<u8>)>) };
            fields.push((
                RedisString::string_as_slice(field).to_vec(),
                RedisString::string_as_slice(value).to_vec(),
            ));
        }
        // SAFETY: a hash handle; the cursor is created and destroyed here, and the
        // callback only touches `fields`, which outlives the loop.
        unsafe {
            let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
            while raw::RedisModule_ScanKey.expect("ScanKey")(
                handle,
                cursor,
                Some(collect),
                &mut fields as *mut _ as *mut c_void,
            ) != 0
            {}
            raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
        }
        fields
    }

    fn hlen(&mut self, key: &[u8]) -> usize {
        let handle = self.read(key);
        if Self::key_type(handle) != raw::REDISMODULE_KEYTYPE_HASH {
            return 0;
        }
        // SAFETY: a hash handle.
        unsafe { raw::RedisModule_ValueLength.expect("ValueLength")(handle) }
    }

    fn hset(&mut self, key: &[u8], field: &[u8], value: &[u8]) {
        let value_str = RedisString::create_from_slice(ptr::null_mut(), value);
        self.hash_put(key, field, value_str.inner);
        self.event(Event::Hset, key);
        replicate::hset(self.ctx, key, field, value);
    }

    fn hincrby(&mut self, key: &[u8], field: &[u8], delta: i64) -> i64 {
        let handle = self.write(key);
        let current = self
            .hash_get(handle, field)
            .and_then(|v| crate::core::lock::parse_i64(&v))
            .unwrap_or(0);
        let next = current + delta;
        let value = RedisString::create_from_slice(ptr::null_mut(), next.to_string().as_bytes());
        self.hash_put(key, field, value.inner);
        self.event(Event::Hincrby, key);
        replicate::hincrby(self.ctx, key, field, delta);
        next
    }

    fn hdel(&mut self, key: &[u8], field: &[u8]) {
        // SAFETY: REDISMODULE_HASH_DELETE is the API's sentinel for deletion.
        self.hash_put(key, field, raw::REDISMODULE_HASH_DELETE as *mut _);
        self.event(Event::Hdel, key);
        replicate::hdel(self.ctx, key, field);
        let handle = self.write(key);
        if Self::key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
            self.event(Event::Del, key);
        }
    }

    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        // Reading through DMA needs a writable handle: Redis decodes shared
        // integer strings in place first.
        let handle = self.write(key);
        if Self::key_type(handle) != raw::REDISMODULE_KEYTYPE_STRING {
            return None;
        }
        let mut len = 0usize;
        // SAFETY: a string handle; the bytes are copied before the key changes.
        unsafe {
            let data = raw::RedisModule_StringDMA.expect("StringDMA")(
                handle,
                &mut len,
                raw::REDISMODULE_READ as c_int,
            );
            Some(std::slice::from_raw_parts(data as *const u8, len).to_vec())
        }
    }

    fn set_until(&mut self, key: &[u8], value: &[u8], deadline: i64) {
        let handle = self.write(key);
        let value_str = RedisString::create_from_slice(ptr::null_mut(), value);
        // SAFETY: a writable handle; StringSet replaces a value of any type and
        // the new key then takes the absolute deadline.
        unsafe {
            raw::RedisModule_StringSet.expect("StringSet")(handle, value_str.inner);
            raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(handle, deadline);
        }
        self.event(Event::Set, key);
        self.event(Event::Expire, key);
        replicate::set_until(self.ctx, key, value, deadline);
    }

    fn pttl(&mut self, key: &[u8]) -> i64 {
        let handle = self.read(key);
        match Self::abs_expire(handle) {
            None => PTTL_MISSING,
            Some(at) if at == raw::REDISMODULE_NO_EXPIRE as i64 => PTTL_PERSISTENT,
            Some(at) => (at - self.now_ms()).max(0),
        }
    }

    fn expire_at(&mut self, key: &[u8], deadline: i64) -> bool {
        if deadline <= self.now_ms() {
            // As PEXPIRE does with a deadline already past.
            return self.delete_open(key);
        }
        let handle = self.write(key);
        if Self::key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
            return false;
        }
        // SAFETY: a writable handle of an existing key and a future deadline.
        unsafe { raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(handle, deadline) };
        self.event(Event::Expire, key);
        replicate::expire_at(self.ctx, key, deadline);
        true
    }

    fn del(&mut self, key: &[u8]) -> bool {
        self.delete_open(key)
    }

    fn publish(&mut self, channel: &[u8], message: &[u8]) {
        publish(self.ctx, channel, message);
    }
}

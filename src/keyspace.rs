//! The lock machine's [`Store`] on a live server, through the low-level key
//! API (no `RM_Call` on the hot path). Every write is followed by the keyspace
//! event and the replicated effect the equivalent command would produce.
//!
//! Kept cheap on purpose: the keys a command uses repeatedly (the lock hash,
//! a latch) are opened once and kept open; every other key (a reader's lease
//! key among thousands) is opened for the one operation and closed, so a
//! command never searches a long list of open keys. Field names and values
//! that never change (`mode`, `read`, `write`, `0`, `1`) are strings made
//! once, other names come from the `interned` table of recent ones; numbers
//! are formatted on the stack.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString};

use crate::args::{Arg, ArgString};
use crate::core::index::LeaseIndex;
use crate::core::lock::parse_i64;
use crate::core::names::{decimal, DECIMAL_LEN, MODE_FIELD};
use crate::core::store::{Fields, KeyKind, Moot, Store, PTTL_MISSING, PTTL_PERSISTENT};
use crate::interned;
use crate::leases;
use crate::notify::{notify, Event};
use crate::observers;
use crate::publish::publish;
use crate::replicate::Replication;
use crate::subscription;

/// Strings every command may need, made on first use and kept for the life
/// of the process: hash fields and values and published messages, which Redis
/// copies, and lease key values, which keys share (see `set_until`).
const CONSTANT_TEXTS: [&[u8]; 5] = [b"mode", b"read", b"write", b"0", b"1"];

/// The index of `bytes` in [`CONSTANT_TEXTS`]. Every string a command makes
/// is looked up here first, so the literals are matched as integers rather
/// than through a byte comparison each.
fn constant_index(bytes: &[u8]) -> Option<usize> {
    match bytes {
        b"mode" => Some(0),
        b"read" => Some(1),
        b"write" => Some(2),
        b"0" => Some(3),
        b"1" => Some(4),
        _ => None,
    }
}

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static CONSTANTS: [*mut raw::RedisModuleString; 5] = CONSTANT_TEXTS.map(|text| {
        // SAFETY: a string with no context is owned by the module; this one is
        // never freed.
        unsafe {
            raw::RedisModule_CreateString.expect("CreateString")(
                ptr::null_mut(),
                text.as_ptr().cast(),
                text.len(),
            )
        }
    });
}

/// The string made once for `bytes`, one of [`CONSTANT_TEXTS`].
pub fn constant(bytes: &[u8]) -> Option<*mut raw::RedisModuleString> {
    constant_index(bytes).map(|i| CONSTANTS.with(|c| c[i]))
}

/// A string for `bytes`: a constant when there is one, else a reference to
/// an interned one that lives as long as the returned guard.
fn string(bytes: &[u8]) -> Str {
    match constant(bytes) {
        Some(s) => Str::Borrowed(s),
        None => Str::Owned(interned::string(bytes)),
    }
}

enum Str {
    /// A constant, or a string someone else keeps alive for the call.
    Borrowed(*mut raw::RedisModuleString),
    Owned(RedisString),
}

impl Str {
    fn ptr(&self) -> *mut raw::RedisModuleString {
        match self {
            Str::Borrowed(s) => *s,
            Str::Owned(s) => s.inner,
        }
    }
}

/// A key kept open for the length of one command.
struct OpenKey {
    name: Str,
    /// The name's bytes, owned by `name`.
    bytes: *const u8,
    len: usize,
    /// Null when the key did not exist at a read-only open.
    handle: *mut raw::RedisModuleKey,
    writable: bool,
}

impl OpenKey {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the bytes of `name`, a string this key owns and never changes.
        unsafe { std::slice::from_raw_parts(self.bytes, self.len) }
    }
}

/// A key opened for one operation, closed on drop.
struct OneShot {
    name: RedisString,
    handle: *mut raw::RedisModuleKey,
}

impl Drop for OneShot {
    fn drop(&mut self) {
        // SAFETY: opened by this guard and closed once; CloseKey accepts null.
        unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(self.handle) };
    }
}

/// How many kept-open keys fit without allocating (a command keeps the lock
/// hash open, and with an idempotent unlock its latch).
const KEPT_INLINE: usize = 4;

/// The last hash field a command named, so the string for it is made once
/// (an unlock reads, decrements and deletes the same field), with the hold
/// count it is known to have, as HINCRBY would read it.
struct FieldMemo {
    key: usize,
    name: Str,
    count: Option<i64>,
}

/// How many of a command's arguments a store may reuse (the lock, the owner).
const LENT: usize = 2;

/// Keys are opened on first use and closed when the command's store drops.
pub struct RedisStore<'c> {
    ctx: &'c Context,
    /// The command's own arguments: any key name or hash field with the same
    /// bytes (the lock, the owner) uses these strings instead of new ones.
    lent: [Option<(&'c [u8], *mut raw::RedisModuleString)>; LENT],
    /// A write command opens the keys it keeps writable at once rather than
    /// reopening them for the first write (signals are explicit, see `lib`).
    writing: bool,
    open: [Option<OpenKey>; KEPT_INLINE],
    more: Vec<OpenKey>,
    field: Option<FieldMemo>,
    /// One clock reading per command: deadlines computed from it are also
    /// checked against it, so a millisecond ticking over mid-command cannot
    /// turn a 1 ms lease into a deletion.
    now: Option<i64>,
    /// The command's context flags, read on first need.
    flags: Option<c_int>,
    replication: Option<Replication>,
    /// The event classes anyone could receive, read on the first event.
    classes: Option<c_int>,
}

pub fn open_raw(
    ctx: &Context,
    name: *mut raw::RedisModuleString,
    writable: bool,
) -> *mut raw::RedisModuleKey {
    let mode = if writable {
        raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
    } else {
        raw::REDISMODULE_READ
    };
    // SAFETY: the context is the running command's; the name outlives the key.
    unsafe { raw::RedisModule_OpenKey.expect("OpenKey")(ctx.get_raw(), name, mode as c_int) }
}

fn key_type(handle: *mut raw::RedisModuleKey) -> isize {
    // SAFETY: KeyType accepts a null handle (a missing key) and open handles.
    unsafe { raw::RedisModule_KeyType.expect("KeyType")(handle) as isize }
}

fn abs_expire(handle: *mut raw::RedisModuleKey) -> Option<i64> {
    if key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
        return None;
    }
    // SAFETY: a non-null handle of an existing key.
    Some(unsafe { raw::RedisModule_GetAbsExpire.expect("GetAbsExpire")(handle) })
}

/// The value of a hash field, owned by the returned string.
fn hash_get(handle: *mut raw::RedisModuleKey, field: &Str) -> Option<RedisString> {
    if key_type(handle) != raw::REDISMODULE_KEYTYPE_HASH {
        return None;
    }
    let mut value: *mut raw::RedisModuleString = ptr::null_mut();
    // SAFETY: a hash key; one field/out-pointer pair closed by a null, as HashGet's
    // variadic protocol requires.
    unsafe {
        raw::RedisModule_HashGet.expect("HashGet")(
            handle,
            raw::REDISMODULE_HASH_NONE as c_int,
            field.ptr(),
            &mut value as *mut *mut raw::RedisModuleString,
            ptr::null_mut::<c_void>(),
        );
    }
    // Not auto-memory: the wrapper frees it.
    (!value.is_null()).then(|| RedisString::from_redis_module_string(ptr::null_mut(), value))
}

fn hash_put(handle: *mut raw::RedisModuleKey, field: &Str, value: *mut raw::RedisModuleString) {
    // SAFETY: a writable key that is empty or a hash (the lock machine checked
    // its type); one field/value pair closed by a null.
    unsafe {
        raw::RedisModule_HashSet.expect("HashSet")(
            handle,
            raw::REDISMODULE_HASH_NONE as c_int,
            field.ptr(),
            value,
            ptr::null_mut::<c_void>(),
        );
    }
}

impl<'c> RedisStore<'c> {
    pub fn new(ctx: &'c Context) -> Self {
        RedisStore::with_args(ctx, &[], false)
    }

    /// The store of a write command with arguments `args`.
    pub fn for_write(ctx: &'c Context, args: &'c [ArgString]) -> Self {
        RedisStore::with_args(ctx, args, true)
    }

    fn with_args(ctx: &'c Context, args: &'c [ArgString], writing: bool) -> Self {
        let mut lent = [None; LENT];
        for (slot, arg) in lent.iter_mut().zip(args) {
            *slot = Some((arg.bytes(), arg.ptr()));
        }
        RedisStore {
            ctx,
            lent,
            writing,
            open: [None, None, None, None],
            more: Vec::new(),
            field: None,
            now: None,
            flags: None,
            replication: None,
            classes: None,
        }
    }

    fn flags(&mut self) -> c_int {
        let ctx = self.ctx;
        // SAFETY: a live context.
        *self.flags.get_or_insert_with(|| unsafe {
            raw::RedisModule_GetContextFlags.expect("GetContextFlags")(ctx.get_raw())
        })
    }

    fn classes(&mut self) -> c_int {
        *self
            .classes
            .get_or_insert_with(observers::announced_classes)
    }

    fn db(&self) -> i32 {
        // SAFETY: a live context.
        unsafe { raw::RedisModule_GetSelectedDb.expect("GetSelectedDb")(self.ctx.get_raw()) }
    }

    fn replication(&mut self) -> Replication {
        if let Some(r) = self.replication {
            return r;
        }
        let r = Replication::new(self.ctx, self.flags());
        self.replication = Some(r);
        r
    }

    fn kept(&self, i: usize) -> &OpenKey {
        match self.open.get(i) {
            Some(Some(key)) => key,
            _ => &self.more[i - KEPT_INLINE],
        }
    }

    fn kept_mut(&mut self, i: usize) -> &mut OpenKey {
        match self.open.get_mut(i) {
            Some(Some(key)) => key,
            _ => &mut self.more[i - KEPT_INLINE],
        }
    }

    /// Most lookups name the lock itself with the very bytes it was opened
    /// by (the command's argument): those match by address, without a call.
    #[inline]
    fn find(&self, name: &[u8]) -> Option<usize> {
        match &self.open[0] {
            Some(key) if ptr::eq(key.bytes, name.as_ptr()) && key.len == name.len() => Some(0),
            _ => self.search(name),
        }
    }

    fn search(&self, name: &[u8]) -> Option<usize> {
        for (i, key) in self.open.iter().enumerate() {
            match key {
                Some(key) if key.bytes() == name => return Some(i),
                Some(_) => {}
                // Filled in order: the rest is empty, and so is `more`.
                None => return None,
            }
        }
        let at = self.more.iter().position(|k| k.bytes() == name)?;
        Some(KEPT_INLINE + at)
    }

    /// A string for `bytes`: a constant or an argument of the command when
    /// one has these bytes, else a new one that lives as long as the guard.
    fn string(&self, bytes: &[u8]) -> Str {
        match self.lent.iter().flatten().find(|(arg, _)| *arg == bytes) {
            Some(&(_, arg)) => Str::Borrowed(arg),
            None => string(bytes),
        }
    }

    /// Tells Redis a key changed (WATCH, client-side caching): with the
    /// module's implicit signals off, only keys the command wrote are named.
    fn signal(&self, name: *mut raw::RedisModuleString) {
        // SAFETY: a live context and a valid key name.
        unsafe {
            raw::RedisModule_SignalModifiedKey.expect("SignalModifiedKey")(self.ctx.get_raw(), name)
        };
    }

    /// Index of the kept-open key `name`, opened (or reopened) writable if asked.
    fn slot(&mut self, name: &[u8], writable: bool) -> usize {
        let writable = writable || self.writing;
        if let Some(i) = self.find(name) {
            let ctx = self.ctx;
            let key = self.kept_mut(i);
            if writable && !key.writable {
                // SAFETY: the handle was opened by us and is closed once, here.
                unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(key.handle) };
                key.handle = open_raw(ctx, key.name.ptr(), true);
                key.writable = true;
            }
            return i;
        }
        let name = self.string(name);
        let handle = open_raw(self.ctx, name.ptr(), writable);
        let bytes = RedisString::string_as_slice(name.ptr());
        let key = OpenKey {
            bytes: bytes.as_ptr(),
            len: bytes.len(),
            name,
            handle,
            writable,
        };
        match self.open.iter().position(Option::is_none) {
            Some(i) => {
                self.open[i] = Some(key);
                i
            }
            None => {
                self.more.push(key);
                KEPT_INLINE + self.more.len() - 1
            }
        }
    }

    fn read(&mut self, name: &[u8]) -> (usize, *mut raw::RedisModuleKey) {
        let i = self.slot(name, false);
        (i, self.kept(i).handle)
    }

    /// The kept-open key, writable, with its name.
    fn write(
        &mut self,
        name: &[u8],
    ) -> (usize, *mut raw::RedisModuleKey, *mut raw::RedisModuleString) {
        let i = self.slot(name, true);
        let key = self.kept(i);
        (i, key.handle, key.name.ptr())
    }

    /// The string for field `name` of kept-open key `key`, made once while
    /// the command keeps naming the same field.
    fn field(&mut self, key: usize, name: &[u8]) -> &mut FieldMemo {
        let memo = match self.field.take() {
            Some(memo) if RedisString::string_as_slice(memo.name.ptr()) == name => {
                self.field.insert(memo)
            }
            _ => {
                let name = self.string(name);
                self.field.insert(FieldMemo {
                    key,
                    name,
                    count: None,
                })
            }
        };
        if memo.key != key {
            memo.key = key;
            memo.count = None;
        }
        memo
    }

    /// Any write but a HINCRBY may change a count the memo holds.
    fn forget_count(&mut self) {
        if let Some(memo) = &mut self.field {
            memo.count = None;
        }
    }

    /// The key opened for one operation, unless it is kept open already
    /// (then its index, reopened writable if asked).
    fn one_shot(&mut self, name: &[u8], writable: bool) -> Result<OneShot, usize> {
        match self.find(name) {
            Some(i) if !writable => Err(i),
            Some(_) => Err(self.slot(name, true)),
            None => {
                let name = interned::string(name);
                let handle = open_raw(self.ctx, name.inner, writable);
                Ok(OneShot { name, handle })
            }
        }
    }

    /// Runs `f` on the writable key `name` (and its name string): the
    /// kept-open handle if there is one, else one opened for the call.
    fn with_writable<R>(
        &mut self,
        name: &[u8],
        f: impl FnOnce(&mut Self, *mut raw::RedisModuleKey, *mut raw::RedisModuleString) -> R,
    ) -> R {
        match self.one_shot(name, true) {
            Ok(key) => f(self, key.handle, key.name.inner),
            Err(i) => {
                let key = self.kept(i);
                let (handle, name) = (key.handle, key.name.ptr());
                f(self, handle, name)
            }
        }
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        self.forget_count();
        self.with_writable(key, |s, handle, name| {
            if key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
                return false;
            }
            // SAFETY: a writable handle of an existing key.
            unsafe { raw::RedisModule_DeleteKey.expect("DeleteKey")(handle) };
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Del, name);
            s.replication().del(s.ctx, key);
            true
        })
    }
}

/// The server's clock in Unix milliseconds, the one lock deadlines are set
/// by: a store reads it once per command, timers each time they fire.
pub fn server_ms() -> i64 {
    // SAFETY: a plain read of the server's clock, from the main thread.
    unsafe { raw::RedisModule_Milliseconds.expect("Milliseconds")() }
}

impl Drop for RedisStore<'_> {
    fn drop(&mut self) {
        for key in self.open.iter().flatten().chain(&self.more) {
            // SAFETY: each handle was opened by this store and is closed once;
            // CloseKey accepts null (a missing key opened read-only).
            unsafe { raw::RedisModule_CloseKey.expect("CloseKey")(key.handle) };
        }
    }
}

impl Store for RedisStore<'_> {
    fn now_ms(&mut self) -> i64 {
        *self.now.get_or_insert_with(server_ms)
    }

    fn kind(&mut self, key: &[u8]) -> KeyKind {
        match key_type(self.read(key).1) {
            t if t == raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Missing,
            t if t == raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            t if t == raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            _ => KeyKind::Other,
        }
    }

    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        self.hget_with(key, field, |v| v.map(<[u8]>::to_vec))
    }

    fn hget_with<R>(&mut self, key: &[u8], field: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        let (i, handle) = self.read(key);
        if field == MODE_FIELD {
            return f(hash_get(handle, &string(field))
                .as_ref()
                .map(RedisString::as_slice));
        }
        let memo = self.field(i, field);
        let value = hash_get(handle, &Str::Borrowed(memo.name.ptr()));
        let value = value.as_ref().map(RedisString::as_slice);
        memo.count = Some(value.and_then(parse_i64).unwrap_or(0));
        f(value)
    }

    fn hgetall(&mut self, key: &[u8]) -> Fields {
        let (_, handle) = self.read(key);
        let mut fields = Fields::default();
        if key_type(handle) != raw::REDISMODULE_KEYTYPE_HASH {
            return fields;
        }
        unsafe extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            privdata: *mut c_void,
        ) {
            // SAFETY: privdata is the Fields passed to ScanKey below, alive for the
            // scan; field and value are valid for the callback's duration.
            let fields = unsafe { &mut *(privdata as *mut Fields) };
            fields.push(
                RedisString::string_as_slice(field),
                RedisString::string_as_slice(value),
            );
        }
        // SAFETY: a hash handle; the cursor is created and destroyed here, and the
        // callback only touches `fields`, which outlives the loop.
        unsafe {
            let cursor = raw::RedisModule_ScanCursorCreate.expect("ScanCursorCreate")();
            while raw::RedisModule_ScanKey.expect("ScanKey")(
                handle,
                cursor,
                Some(collect),
                &mut fields as *mut Fields as *mut c_void,
            ) != 0
            {}
            raw::RedisModule_ScanCursorDestroy.expect("ScanCursorDestroy")(cursor);
        }
        fields
    }

    fn hlen(&mut self, key: &[u8]) -> usize {
        let (_, handle) = self.read(key);
        if key_type(handle) != raw::REDISMODULE_KEYTYPE_HASH {
            return 0;
        }
        // SAFETY: a hash handle.
        unsafe { raw::RedisModule_ValueLength.expect("ValueLength")(handle) }
    }

    fn hset(&mut self, key: &[u8], field: &[u8], value: &[u8]) {
        self.forget_count();
        let (_, handle, name) = self.write(key);
        hash_put(handle, &self.string(field), self.string(value).ptr());
        self.signal(name);
        notify(self.ctx, self.classes(), Event::Hset, name);
        self.replication().hset(self.ctx, key, field, value);
    }

    fn create_hash(&mut self, key: &[u8], fields: [(&[u8], &[u8]); 2]) {
        self.forget_count();
        let (_, handle, name) = self.write(key);
        let [(f1, v1), (f2, v2)] = fields;
        let strings = [
            self.string(f1),
            self.string(v1),
            self.string(f2),
            self.string(v2),
        ];
        // SAFETY: a writable key the lock machine found missing; two
        // field/value pairs closed by a null, as HashSet's variadic protocol
        // requires. One call makes the hash once rather than once per field.
        unsafe {
            raw::RedisModule_HashSet.expect("HashSet")(
                handle,
                raw::REDISMODULE_HASH_NONE as c_int,
                strings[0].ptr(),
                strings[1].ptr(),
                strings[2].ptr(),
                strings[3].ptr(),
                ptr::null_mut::<c_void>(),
            );
        }
        self.signal(name);
        for (field, value) in fields {
            notify(self.ctx, self.classes(), Event::Hset, name);
            self.replication().hset(self.ctx, key, field, value);
        }
    }

    fn hincrby(&mut self, key: &[u8], field: &[u8], delta: i64) -> i64 {
        let (i, handle, name) = self.write(key);
        let memo = self.field(i, field);
        let field_str = Str::Borrowed(memo.name.ptr());
        let current = match memo.count {
            Some(count) => count,
            None => hash_get(handle, &field_str)
                .and_then(|v| parse_i64(v.as_slice()))
                .unwrap_or(0),
        };
        let next = current + delta;
        memo.count = Some(next);
        let mut buf = [0; DECIMAL_LEN];
        hash_put(handle, &field_str, string(decimal(next, &mut buf)).ptr());
        self.signal(name);
        notify(self.ctx, self.classes(), Event::Hincrby, name);
        self.replication().hincrby(self.ctx, key, field, delta);
        next
    }

    fn hdel(&mut self, key: &[u8], field: &[u8]) {
        let (i, handle, name) = self.write(key);
        let memo = self.field(i, field);
        memo.count = None;
        hash_put(
            handle,
            &Str::Borrowed(memo.name.ptr()),
            raw::REDISMODULE_HASH_DELETE as *mut _,
        );
        self.signal(name);
        notify(self.ctx, self.classes(), Event::Hdel, name);
        self.replication().hdel(self.ctx, key, field);
        if key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
            notify(self.ctx, self.classes(), Event::Del, name);
        }
    }

    fn moot(&mut self, write: Moot<'_>) {
        self.forget_count();
        let (event, key) = match write {
            Moot::Hincrby { key, .. } => (Event::Hincrby, key),
            Moot::Hdel { key, .. } => (Event::Hdel, key),
        };
        let i = self.slot(key, false);
        notify(self.ctx, self.classes(), event, self.kept(i).name.ptr());
        let r = self.replication();
        match write {
            Moot::Hincrby { key, field, delta } => r.hincrby(self.ctx, key, field, delta),
            Moot::Hdel { key, field } => r.hdel(self.ctx, key, field),
        }
    }

    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        // Reading through DMA needs a writable handle: Redis decodes shared
        // integer strings in place first.
        let (_, handle, _) = self.write(key);
        if key_type(handle) != raw::REDISMODULE_KEYTYPE_STRING {
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
        self.forget_count();
        // A lease key holds "1", which the script's SET stores as Redis's
        // shared integer: no allocation per key. Keys sharing the constant
        // cost the same (Redis copies a shared string before changing it in
        // place), except under an eviction policy, which may need each
        // value's own access time, as Redis's shared integers do.
        let evicting = self.flags() & raw::REDISMODULE_CTX_FLAGS_EVICT as c_int != 0;
        let value_str = if evicting {
            Str::Owned(RedisString::create_from_slice(ptr::null_mut(), value))
        } else {
            string(value)
        };
        self.with_writable(key, |s, handle, name| {
            // SAFETY: a writable handle; StringSet replaces a value of any type and
            // the new key then takes the absolute deadline.
            unsafe {
                raw::RedisModule_StringSet.expect("StringSet")(handle, value_str.ptr());
                raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(handle, deadline);
            }
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Set, name);
            notify(s.ctx, s.classes(), Event::Expire, name);
            s.replication().set_until(s.ctx, key, value, deadline);
        });
    }

    fn pttl(&mut self, key: &[u8]) -> i64 {
        let at = match self.one_shot(key, false) {
            Ok(key) => abs_expire(key.handle),
            Err(i) => abs_expire(self.kept(i).handle),
        };
        match at {
            None => PTTL_MISSING,
            Some(at) if at == raw::REDISMODULE_NO_EXPIRE as i64 => PTTL_PERSISTENT,
            Some(at) => (at - self.now_ms()).max(0),
        }
    }

    fn expire_at(&mut self, key: &[u8], deadline: i64) -> bool {
        if deadline <= self.now_ms() {
            // As PEXPIRE does with a deadline already past.
            return self.delete(key);
        }
        self.with_writable(key, |s, handle, name| {
            if key_type(handle) == raw::REDISMODULE_KEYTYPE_EMPTY {
                return false;
            }
            // SAFETY: a writable handle of an existing key and a future deadline.
            unsafe { raw::RedisModule_SetAbsExpire.expect("SetAbsExpire")(handle, deadline) };
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Expire, name);
            s.replication().expire_at(s.ctx, key, deadline);
            true
        })
    }

    fn del(&mut self, key: &[u8]) -> bool {
        self.delete(key)
    }

    fn publish(&mut self, channel: &[u8], message: &[u8]) {
        let flags = self.flags();
        publish(self.ctx, flags, channel, string(message).ptr());
    }

    fn lease_index_from(&mut self) -> Option<usize> {
        leases::index_from()
    }

    fn with_lease_index<R>(
        &mut self,
        hash: &[u8],
        f: impl FnOnce(&mut LeaseIndex) -> R,
    ) -> Option<R> {
        if !leases::any() {
            return None;
        }
        leases::with_index(self.db(), hash, f)
    }

    fn keep_lease_index(&mut self, hash: &[u8], index: LeaseIndex) {
        subscription::ensure(self.ctx);
        leases::keep(self.db(), hash, index);
    }

    fn forget_lease_index(&mut self, hash: &[u8]) {
        if leases::any() {
            leases::forget(self.db(), hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{constant_index, CONSTANT_TEXTS};

    #[test]
    fn every_constant_text_is_found_at_its_own_index() {
        for (i, text) in CONSTANT_TEXTS.iter().enumerate() {
            assert_eq!(constant_index(text), Some(i));
        }
        for other in [&b""[..], b"mod", b"modes", b"2", b"READ", b"10"] {
            assert_eq!(constant_index(other), None);
        }
    }
}

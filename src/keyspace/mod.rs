//! The lock machine's [`Store`] on a live server, through the low-level key
//! API (no `RM_Call` on the hot path). Every write is followed by the keyspace
//! event and the replicated effect the equivalent command would produce.
//!
//! Kept cheap on purpose: keys a command uses repeatedly stay open (`keys`),
//! strings that never change are constants and other names come from the
//! interned table (`server::strings`); numbers are formatted on the stack.

pub mod expiry;
pub mod keys;
pub mod leases;
mod line;
mod permits;
pub mod tokens;

use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString};

use self::keys::{FieldMemo, OneShot, OpenKey, Str};
use crate::effects::notify::{notify, Event};
use crate::effects::observers;
use crate::effects::publish::publish;
use crate::effects::replicate::Replication;
use crate::engine::index::LeaseIndex;
use crate::engine::int::{decimal, parse_i64, DECIMAL_LEN};
use crate::engine::names::MODE_FIELD;
use crate::engine::store::{Fields, KeyKind, Moot, Store, PTTL_MISSING, PTTL_PERSISTENT};
use crate::server::{self, strings, ArgString, Key, KeyType, RawString, HASH_DELETE};

/// How many kept-open keys fit without allocating (a command keeps the lock
/// hash open, and with an idempotent unlock its latch).
const KEPT_INLINE: usize = 4;

/// How many of a command's arguments a store may reuse (the lock, the owner).
const LENT: usize = 2;

/// Keys are opened on first use and closed when the command's store drops.
pub struct RedisStore<'c> {
    ctx: &'c Context,
    /// The command's own arguments: any key name or hash field with the same
    /// bytes (the lock, the owner) uses these strings instead of new ones.
    lent: [Option<(&'c [u8], RawString)>; LENT],
    /// A write command opens the keys it keeps writable at once rather than
    /// reopening them for the first write (signals are explicit, see `lib`).
    writing: bool,
    open: [Option<OpenKey>; KEPT_INLINE],
    more: Vec<OpenKey>,
    field: Option<FieldMemo>,
    /// Where a kept-open list's iterator stands (the key's index and the
    /// last element read, walking forward): see `line`. None when unknown.
    list_at: Option<(usize, i64)>,
    /// One clock reading per command: deadlines computed from it are also
    /// checked against it, so a millisecond ticking over mid-command cannot
    /// turn a 1 ms lease into a deletion.
    now: Option<i64>,
    /// The command's context flags, read on first need.
    flags: Option<c_int>,
    replication: Option<Replication>,
    /// Writes made so far (each replicated, so each asks for
    /// `replication`): whether a change wrote anything at all.
    writes: u32,
    /// The event classes anyone could receive, read on the first event.
    classes: Option<c_int>,
}

/// The value of a hash field, owned by the returned string.
fn hash_get(key: Key, field: &Str) -> Option<RedisString> {
    // Not auto-memory: the wrapper frees it.
    key.hash_get(field.ptr())
        .map(|value| RedisString::from_redis_module_string(ptr::null_mut(), value))
}

impl<'c> RedisStore<'c> {
    /// How many writes this store made so far, wrapping: two readings that
    /// differ mean a write between them.
    pub fn writes(&self) -> u32 {
        self.writes
    }

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
            list_at: None,
            now: None,
            flags: None,
            replication: None,
            writes: 0,
            classes: None,
        }
    }

    fn flags(&mut self) -> c_int {
        let ctx = self.ctx;
        *self.flags.get_or_insert_with(|| server::context_flags(ctx))
    }

    fn classes(&mut self) -> c_int {
        *self
            .classes
            .get_or_insert_with(observers::announced_classes)
    }

    fn db(&self) -> i32 {
        server::selected_db(self.ctx)
    }

    fn replication(&mut self) -> Replication {
        self.writes = self.writes.wrapping_add(1);
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
            Some(key) if key.is_at(name) => Some(0),
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
        self.string_lent(bytes).unwrap_or_else(|| Str::of(bytes))
    }

    /// The command's argument with these bytes, if one has them.
    fn string_lent(&self, bytes: &[u8]) -> Option<Str> {
        let &(_, arg) = self.lent.iter().flatten().find(|(arg, _)| *arg == bytes)?;
        Some(Str::Borrowed(arg))
    }

    /// Tells Redis a key changed (WATCH, client-side caching): with the
    /// module's implicit signals off, only keys the command wrote are named.
    fn signal(&self, name: RawString) {
        server::signal_modified(self.ctx, name);
    }

    /// Index of the kept-open key `name`, opened (or reopened) writable if asked.
    fn slot(&mut self, name: &[u8], writable: bool) -> usize {
        let writable = writable || self.writing;
        if let Some(i) = self.find(name) {
            let ctx = self.ctx;
            let key = self.kept_mut(i);
            if writable && !key.writable {
                key.handle.close();
                key.handle = server::open_key(ctx, key.name.ptr(), true);
                key.writable = true;
            }
            return i;
        }
        let name = self.string(name);
        let handle = server::open_key(self.ctx, name.ptr(), writable);
        let key = OpenKey::new(name, handle, writable);
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

    fn read(&mut self, name: &[u8]) -> (usize, Key) {
        let i = self.slot(name, false);
        (i, self.kept(i).handle)
    }

    /// The kept-open key, writable, with its name.
    fn write(&mut self, name: &[u8]) -> (usize, Key, RawString) {
        let i = self.slot(name, true);
        let key = self.kept(i);
        (i, key.handle, key.name.ptr())
    }

    /// The string for field `name` of kept-open key `key`, made once while
    /// the command keeps naming the same field.
    fn field(&mut self, key: usize, name: &[u8]) -> &mut FieldMemo {
        let memo = match self.field.take() {
            Some(memo) if strings::bytes(memo.name.ptr()) == name => self.field.insert(memo),
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
                let name = strings::interned(name);
                let handle = server::open_key(self.ctx, name.inner, writable);
                Ok(OneShot { name, handle })
            }
        }
    }

    /// Runs `f` on the writable key `name` (and its name string): the
    /// kept-open handle if there is one, else one opened for the call.
    fn with_writable<R>(
        &mut self,
        name: &[u8],
        f: impl FnOnce(&mut Self, Key, RawString) -> R,
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

    /// The string a `SET` stores. A lease key holds "1", which the script's
    /// SET stores as Redis's shared integer: no allocation per key. Keys
    /// sharing the constant cost the same (Redis copies a shared string
    /// before changing it in place, as a latch's DECR does), except under an
    /// eviction policy, which may need each value's own access time, as
    /// Redis's shared integers do.
    fn value(&mut self, value: &[u8]) -> Str {
        let evicting = self.flags() & raw::REDISMODULE_CTX_FLAGS_EVICT as c_int != 0;
        if evicting {
            Str::Owned(RedisString::create_from_slice(ptr::null_mut(), value))
        } else {
            Str::of(value)
        }
    }

    /// `INCRBY key by`, in place as Redis does it; `token`: the key is a
    /// fencing token counter, which a promoted node's gap follows
    /// (`tokens`), where a semaphore's count is not.
    fn incr(&mut self, key: &[u8], by: i64, token: bool) -> i64 {
        self.forget_count();
        self.with_writable(key, |s, handle, name| {
            // In place, as INCR does: the TTL stays and no new value is made
            // (but the first time, when Redis copies the value to a string of
            // the key's own).
            let current = match handle.kind() {
                KeyType::String => handle.with_string_mut(|b| parse_i64(b)),
                _ => None,
            };
            let next = current.unwrap_or(0) + by;
            let mut buf = [0; DECIMAL_LEN];
            let digits = decimal(next, &mut buf);
            let in_place = current.is_some() && {
                handle.string_truncate(digits.len());
                handle.with_string_mut(|b| {
                    let fits = b.len() == digits.len();
                    if fits {
                        b.copy_from_slice(digits);
                    }
                    fits
                })
            };
            if !in_place {
                handle.string_set(Str::of(digits).ptr());
            }
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Incrby, name);
            s.replication().incr_by(s.ctx, key, by);
            if token {
                tokens::advanced(s.db(), key);
            }
            next
        })
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        self.forget_count();
        self.with_writable(key, |s, handle, name| {
            if handle.kind() == KeyType::Empty {
                return false;
            }
            handle.delete();
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Del, name);
            s.replication().del(s.ctx, key);
            true
        })
    }
}

impl Drop for RedisStore<'_> {
    fn drop(&mut self) {
        for key in self.open.iter().flatten().chain(&self.more) {
            key.handle.close();
        }
    }
}

impl Store for RedisStore<'_> {
    fn now_ms(&mut self) -> i64 {
        *self.now.get_or_insert_with(server::milliseconds)
    }

    fn kind(&mut self, key: &[u8]) -> KeyKind {
        match self.read(key).1.kind() {
            KeyType::Empty => KeyKind::Missing,
            KeyType::Hash => KeyKind::Hash,
            KeyType::String => KeyKind::String,
            KeyType::Other => KeyKind::Other,
        }
    }

    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        self.hget_with(key, field, |v| v.map(<[u8]>::to_vec))
    }

    fn hget_with<R>(&mut self, key: &[u8], field: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        let (i, handle) = self.read(key);
        if field == MODE_FIELD {
            return f(hash_get(handle, &Str::of(field))
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
        if handle.kind() == KeyType::Hash {
            handle.scan_hash(|field, value| fields.push(field, value));
        }
        fields
    }

    fn hlen(&mut self, key: &[u8]) -> usize {
        let (_, handle) = self.read(key);
        if handle.kind() != KeyType::Hash {
            return 0;
        }
        handle.value_length()
    }

    fn hset(&mut self, key: &[u8], field: &[u8], value: &[u8]) {
        self.forget_count();
        let (_, handle, name) = self.write(key);
        handle.hash_set(&[(self.string(field).ptr(), self.string(value).ptr())]);
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
        // The lock machine found the key missing: one call makes the hash.
        handle.hash_set(&[
            (strings[0].ptr(), strings[1].ptr()),
            (strings[2].ptr(), strings[3].ptr()),
        ]);
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
        handle.hash_set(&[(field_str.ptr(), Str::of(decimal(next, &mut buf)).ptr())]);
        self.signal(name);
        notify(self.ctx, self.classes(), Event::Hincrby, name);
        self.replication().hincrby(self.ctx, key, field, delta);
        next
    }

    fn hdel(&mut self, key: &[u8], field: &[u8]) {
        let (i, handle, name) = self.write(key);
        let memo = self.field(i, field);
        memo.count = None;
        handle.hash_set(&[(memo.name.ptr(), HASH_DELETE)]);
        self.signal(name);
        notify(self.ctx, self.classes(), Event::Hdel, name);
        self.replication().hdel(self.ctx, key, field);
        if handle.kind() == KeyType::Empty {
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

    fn replicate_unchanged(&mut self, key: &[u8], field: &[u8]) {
        let r = self.replication();
        r.hincrby(self.ctx, key, field, 0);
    }

    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        // Reading a string's bytes needs a writable handle.
        let (_, handle, _) = self.write(key);
        (handle.kind() == KeyType::String).then(|| handle.string_bytes())
    }

    fn set_until(&mut self, key: &[u8], value: &[u8], deadline: i64) {
        self.forget_count();
        let value_str = self.value(value);
        self.with_writable(key, |s, handle, name| {
            // The new key then takes the absolute deadline.
            handle.string_set(value_str.ptr());
            handle.set_abs_expire(deadline);
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Set, name);
            notify(s.ctx, s.classes(), Event::Expire, name);
            s.replication().set_until(s.ctx, key, value, deadline);
        });
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.forget_count();
        let value_str = self.value(value);
        self.with_writable(key, |s, handle, name| {
            // As SET without KEEPTTL: setting the string drops the TTL.
            handle.string_set(value_str.ptr());
            s.signal(name);
            notify(s.ctx, s.classes(), Event::Set, name);
            s.replication().set(s.ctx, key, value);
        });
    }

    fn incr_by(&mut self, key: &[u8], by: i64) -> i64 {
        self.incr(key, by, true)
    }

    fn add_to(&mut self, key: &[u8], by: i64) -> i64 {
        self.incr(key, by, false)
    }

    fn token_gap(&mut self, key: &[u8]) -> i64 {
        tokens::gap(self.db(), key)
    }

    fn pttl(&mut self, key: &[u8]) -> i64 {
        let at = match self.one_shot(key, false) {
            Ok(key) => key.handle.abs_expire(),
            Err(i) => self.kept(i).handle.abs_expire(),
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
            if handle.kind() == KeyType::Empty {
                return false;
            }
            handle.set_abs_expire(deadline);
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
        publish(self.ctx, flags, channel, Str::of(message).ptr());
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
        leases::keep(self.db(), hash, index);
    }

    fn forget_lease_index(&mut self, hash: &[u8]) {
        if leases::any() {
            leases::forget(self.db(), hash);
        }
    }
}

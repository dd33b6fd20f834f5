//! The keys one command keeps open, and the strings that name them.
//!
//! The keys a command uses repeatedly (the lock hash, a latch) are opened
//! once and kept open; every other key (a reader's lease key among
//! thousands) is opened for the one operation and closed, so a command
//! never searches a long list of open keys.

use redis_module::RedisString;

use crate::server::{strings, Key, RawString};

/// A string the store names a key or field with: a constant, an argument
/// of the command (borrowed), or an interned one (a counted reference).
pub enum Str {
    /// A constant, or a string someone else keeps alive for the call.
    Borrowed(RawString),
    Owned(RedisString),
}

impl Str {
    #[inline]
    pub fn ptr(&self) -> RawString {
        match self {
            Str::Borrowed(s) => *s,
            Str::Owned(s) => s.inner,
        }
    }

    /// A constant when there is one for `bytes`, else an interned string.
    #[inline]
    pub fn of(bytes: &[u8]) -> Str {
        match strings::constant(bytes) {
            Some(s) => Str::Borrowed(s),
            None => Str::Owned(strings::interned(bytes)),
        }
    }
}

/// A key kept open for the length of one command.
pub struct OpenKey {
    pub name: Str,
    /// The name's bytes, owned by `name`.
    bytes: *const u8,
    len: usize,
    /// Null when the key did not exist at a read-only open.
    pub handle: Key,
    pub writable: bool,
}

impl OpenKey {
    pub fn new(name: Str, handle: Key, writable: bool) -> OpenKey {
        let bytes = strings::bytes(name.ptr());
        OpenKey {
            bytes: bytes.as_ptr(),
            len: bytes.len(),
            name,
            handle,
            writable,
        }
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the bytes of `name`, a string this key owns and never changes.
        unsafe { std::slice::from_raw_parts(self.bytes, self.len) }
    }

    /// Whether `name` is this key's name by address: the lock is named with
    /// the very bytes of the argument it was opened by.
    #[inline]
    pub fn is_at(&self, name: &[u8]) -> bool {
        std::ptr::eq(self.bytes, name.as_ptr()) && self.len == name.len()
    }
}

/// A key opened for one operation, closed on drop.
pub struct OneShot {
    pub name: RedisString,
    pub handle: Key,
}

impl Drop for OneShot {
    fn drop(&mut self) {
        self.handle.close();
    }
}

/// The last hash field a command named, so the string for it is made once
/// (an unlock reads, decrements and deletes the same field), with the hold
/// count it is known to have, as HINCRBY would read it.
pub struct FieldMemo {
    pub key: usize,
    pub name: Str,
    pub count: Option<i64>,
}

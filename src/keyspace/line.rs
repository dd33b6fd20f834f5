//! The fair lock's line on a live server: its list and sorted set are read
//! and written through the low-level key API on keys the command keeps
//! open, as the other kinds' hashes are. Each write is followed by what the
//! command Redisson's scripts call would produce: the keyspace event (and
//! `del` when the key empties), the key's signal, and that command
//! replicated (a ZADD's score is an absolute deadline already). Taking the
//! head of a line of N waiters moves N − 1 deadlines: through `RM_Call` each
//! move cost a command's parse and reply (about 15,000 instructions); on the
//! open key it is one `ZsetIncrby` (docs/benchmarks.md, "The fair lock").

use std::ptr;

use redis_module::{CallOptionsBuilder, CallReply, CallResult, RedisString};

use super::keys::Str;
use super::RedisStore;
use crate::effects::notify::{notify, Event};
use crate::engine::int::{decimal, DECIMAL_LEN};
use crate::engine::store::{Line, LineKind};
use crate::server::{self, Key, KeyType, RawString};

/// Up to this many elements a range is read element by element on the
/// open key (`RM_ListGet`, hundreds of instructions each); past it one
/// `LRANGE` call (a fixed cost of several thousand, then tens each) is
/// cheaper (benches/fair_lines.py).
const SHORT_WALK: usize = 16;

/// An integer reply, None for nil (or anything else).
pub(super) fn integer(reply: &CallReply) -> Option<usize> {
    match reply {
        CallReply::I64(n) => usize::try_from(n.to_i64()).ok(),
        _ => None,
    }
}

/// An array reply's bulk strings.
fn strings(reply: &CallReply) -> Vec<Vec<u8>> {
    match reply {
        CallReply::Array(items) => items
            .iter()
            .filter_map(|item| match item.ok()? {
                CallReply::String(s) => Some(s.as_bytes().to_vec()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl RedisStore<'_> {
    /// The line's key `name`, kept open for the command.
    pub(super) fn line_read(&mut self, name: &[u8]) -> Key {
        self.read(name).1
    }

    /// The list `name`'s handle, ready to read element `index`. A handle
    /// keeps an iterator between reads; Redis 7.0 asserts (and the server
    /// dies) when that iterator is turned back towards the head, or walked
    /// after the list changed. So a handle is only reused for reads moving
    /// forward from its last one; otherwise the key is reopened, which
    /// drops the iterator (a few hundred instructions).
    fn list_from(&mut self, name: &[u8], index: i64) -> Key {
        let i = self.slot(name, false);
        let forward =
            matches!(self.list_at, Some((at, last)) if at == i && 0 <= last && last <= index);
        // Only a list's handle can hold an iterator.
        if !forward && self.kept(i).handle.list_or_zset() == Some(true) {
            let ctx = self.ctx;
            let key = self.kept_mut(i);
            key.handle.close();
            key.handle = server::open_key(ctx, key.name.ptr(), key.writable);
        }
        self.list_at = (index >= 0).then_some((i, index));
        self.kept(i).handle
    }

    /// A string for a line member: the owner argument when it is that,
    /// else a new one. Not interned: a walk names every waiter once, and
    /// each would evict another name from the table for nothing.
    pub(super) fn member(&self, bytes: &[u8]) -> Str {
        match self.string_lent(bytes) {
            Some(s) => s,
            None => Str::Owned(RedisString::create_from_slice(ptr::null_mut(), bytes)),
        }
    }

    /// Runs `f`, which changes the list `name` by `RM_Call`, with the
    /// store's handle of it closed: the call may free the list (emptied),
    /// and a handle kept across it would point at freed memory.
    fn around_call(&mut self, name: &[u8], f: impl FnOnce(&mut Self)) {
        self.list_changes();
        // Replicated by the call itself, not through `replication`.
        self.writes = self.writes.wrapping_add(1);
        let i = self.slot(name, false);
        self.kept(i).handle.close();
        f(self);
        let ctx = self.ctx;
        let key = self.kept_mut(i);
        key.handle = server::open_key(ctx, key.name.ptr(), key.writable);
    }

    /// Runs `command args…` through `RM_Call`, handing its reply to `f`;
    /// a failed call (the machine checked the types first, so only the
    /// server's own limits) is logged and reads as `otherwise`.
    pub(super) fn call<R>(
        &self,
        write: bool,
        command: &str,
        args: &[&[u8]],
        f: impl FnOnce(&CallReply) -> R,
        otherwise: R,
    ) -> R {
        let options = if write {
            CallOptionsBuilder::new()
                .replicate()
                .errors_as_replies()
                .build()
        } else {
            CallOptionsBuilder::new().errors_as_replies().build()
        };
        let reply: CallResult = self.ctx.call_ext(command, &options, args);
        match reply {
            Ok(reply) => f(&reply),
            Err(e) => {
                self.ctx
                    .log_warning(&format!("rwlock: fair lock {command} failed: {e}"));
                otherwise
            }
        }
    }

    /// The list `name` is about to change: its handle's iterator is stale
    /// from now on.
    fn list_changes(&mut self) {
        self.list_at = None;
    }

    /// After a write to the line's key `name`: signal, the command's event,
    /// `del` when Redis removed the emptied key, and the replicated command.
    pub(super) fn line_written(
        &mut self,
        handle: Key,
        name: RawString,
        event: Event,
        replicate: impl FnOnce(&mut Self),
    ) {
        self.signal(name);
        notify(self.ctx, self.classes(), event, name);
        replicate(self);
        if handle.kind() == KeyType::Empty {
            notify(self.ctx, self.classes(), Event::Del, name);
        }
    }
}

impl Line for RedisStore<'_> {
    fn line_kind(&mut self, key: &[u8]) -> LineKind {
        let handle = self.line_read(key);
        match handle.list_or_zset() {
            Some(true) => LineKind::List,
            Some(false) => LineKind::Zset,
            None if handle.kind() == KeyType::Empty => LineKind::Missing,
            None => LineKind::Other,
        }
    }

    fn lindex(&mut self, key: &[u8], index: i64) -> Option<Vec<u8>> {
        self.list_from(key, index).list_get(index)
    }

    fn lrange(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        let handle = self.list_from(key, 0);
        let mut all = Vec::with_capacity(handle.value_length());
        while let Some(element) = handle.list_get(all.len() as i64) {
            all.push(element);
        }
        self.list_changes();
        all
    }

    fn lpop(&mut self, key: &[u8]) {
        self.list_changes();
        let (_, handle, name) = self.write(key);
        if handle.list_pop_head() {
            self.line_written(handle, name, Event::Lpop, |s| {
                s.replication().lpop(s.ctx, key);
            });
        }
    }

    fn rpush(&mut self, key: &[u8], value: &[u8]) {
        self.list_changes();
        let (_, handle, name) = self.write(key);
        handle.list_push_tail(self.member(value).ptr());
        self.line_written(handle, name, Event::Rpush, |s| {
            s.replication().rpush(s.ctx, key, value);
        });
    }

    fn lrem(&mut self, key: &[u8], value: &[u8]) {
        if self.line_read(key).list_or_zset() != Some(true) {
            return;
        }
        // LREM scans the whole list: Redis's own loop costs tens of
        // instructions an element where `RM_ListGet` costs hundreds. The
        // command raises its events and is replicated by itself.
        self.around_call(key, |s| {
            s.call(true, "LREM", &[key, b"0", value], |_| (), ());
        });
    }

    fn lpos(&mut self, key: &[u8], value: &[u8]) -> Option<usize> {
        if self.line_read(key).list_or_zset() != Some(true) {
            return None;
        }
        self.call(false, "LPOS", &[key, value], integer, None)
    }

    fn lrange_from(&mut self, key: &[u8], start: usize) -> Vec<Vec<u8>> {
        let handle = self.line_read(key);
        let len = handle.value_length();
        if handle.list_or_zset() != Some(true) || start >= len {
            return Vec::new();
        }
        if len - start <= SHORT_WALK {
            // Cheaper than a call's reply for a few elements.
            let handle = self.list_from(key, start as i64);
            let all = (start..len)
                .map_while(|at| handle.list_get(at as i64))
                .collect();
            self.list_changes();
            return all;
        }
        let mut buf = [0; DECIMAL_LEN];
        let from = decimal(start as i64, &mut buf);
        self.call(false, "LRANGE", &[key, from, b"-1"], strings, Vec::new())
    }

    fn zscore(&mut self, key: &[u8], member: &[u8]) -> Option<i64> {
        let handle = self.line_read(key);
        handle
            .zset_score(self.member(member).ptr())
            .map(|score| score as i64)
    }

    fn zadd(&mut self, key: &[u8], at: i64, member: &[u8]) -> bool {
        let (_, handle, name) = self.write(key);
        let (added, changed) = handle.zset_add(at as f64, self.member(member).ptr());
        if changed {
            self.line_written(handle, name, Event::Zadd, |s| {
                s.replication().zadd(s.ctx, key, at, member);
            });
        }
        added
    }

    fn zincrby(&mut self, key: &[u8], delta: i64, member: &[u8]) {
        let (_, handle, name) = self.write(key);
        handle.zset_incrby(delta as f64, self.member(member).ptr());
        self.line_written(handle, name, Event::Zincr, |s| {
            s.replication().zincrby(s.ctx, key, delta, member);
        });
    }

    fn zrem(&mut self, key: &[u8], member: &[u8]) {
        let (_, handle, name) = self.write(key);
        if handle.zset_remove(self.member(member).ptr()) {
            self.line_written(handle, name, Event::Zrem, |s| {
                s.replication().zrem(s.ctx, key, member);
            });
        }
    }

    fn zrange(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        let handle = self.line_read(key);
        let mut all = Vec::with_capacity(handle.value_length());
        handle.scan_zset(|member| all.push(member));
        all
    }
}

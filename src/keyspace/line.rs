//! The fair lock's line on a live server: its list and sorted set are
//! read and written through `RM_Call` of the very commands Redisson's
//! scripts call, so each write raises its own keyspace event, is signalled
//! and is replicated as that command (a ZADD's score is an absolute
//! deadline already). Only the fair lock's commands come here; the other
//! kinds' paths never do.

use redis_module::{CallOptions, CallOptionsBuilder, CallReply, CallResult};

use super::RedisStore;
use crate::engine::int::{decimal, parse_i64, DECIMAL_LEN};
use crate::engine::store::{Line, LineKind};
use crate::server::KeyType;

/// Options of a read: nothing replicated, errors as replies.
fn read_options() -> CallOptions {
    CallOptionsBuilder::new().errors_as_replies().build()
}

/// Options of a write: replicated to replicas and the AOF.
fn write_options() -> CallOptions {
    CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .build()
}

/// A bulk string reply's bytes; None for nil (or anything else).
fn bytes(reply: &CallReply) -> Option<Vec<u8>> {
    match reply {
        CallReply::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// A score reply (a bulk string, or a double in RESP3) as whole milliseconds.
fn score(reply: &CallReply) -> Option<i64> {
    match reply {
        CallReply::String(s) => {
            let text = std::str::from_utf8(s.as_bytes()).ok()?;
            parse_i64(text.as_bytes()).or_else(|| text.parse::<f64>().ok().map(|f| f as i64))
        }
        CallReply::Double(d) => Some(d.to_double() as i64),
        _ => None,
    }
}

fn integer(reply: &CallReply) -> i64 {
    match reply {
        CallReply::I64(n) => n.to_i64(),
        _ => 0,
    }
}

impl RedisStore<'_> {
    /// Whether `key` exists, by the low-level API: a call on a missing key
    /// (the line of a lock nobody waits for) is skipped, as it would read
    /// nothing and write nothing.
    fn exists(&mut self, key: &[u8]) -> bool {
        let kind = match self.one_shot(key, false) {
            Ok(shot) => shot.handle.kind(),
            Err(i) => self.kept(i).handle.kind(),
        };
        kind != KeyType::Empty
    }

    /// Runs `command args…`, handing its reply to `f`; a failed call (the
    /// machine checked the types first, so only the server's own limits)
    /// is logged and reads as nil.
    fn call<R>(
        &self,
        write: bool,
        command: &str,
        args: &[&[u8]],
        f: impl FnOnce(&CallReply) -> R,
        otherwise: R,
    ) -> R {
        let options = if write {
            write_options()
        } else {
            read_options()
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

    /// Array reply's bulk strings.
    fn strings(&self, command: &str, args: &[&[u8]]) -> Vec<Vec<u8>> {
        self.call(
            false,
            command,
            args,
            |reply| match reply {
                CallReply::Array(items) => items
                    .iter()
                    .filter_map(|item| item.ok().as_ref().and_then(bytes))
                    .collect(),
                _ => Vec::new(),
            },
            Vec::new(),
        )
    }
}

impl Line for RedisStore<'_> {
    fn line_kind(&mut self, key: &[u8]) -> LineKind {
        let handle = match self.one_shot(key, false) {
            Ok(shot) => {
                let handle = shot.handle;
                let kind = (handle.kind(), handle.list_or_zset());
                drop(shot);
                kind
            }
            Err(i) => {
                let handle = self.kept(i).handle;
                (handle.kind(), handle.list_or_zset())
            }
        };
        match handle {
            (KeyType::Empty, _) => LineKind::Missing,
            (_, Some(true)) => LineKind::List,
            (_, Some(false)) => LineKind::Zset,
            (_, None) => LineKind::Other,
        }
    }

    fn lindex(&mut self, key: &[u8], index: i64) -> Option<Vec<u8>> {
        if !self.exists(key) {
            return None;
        }
        let mut buf = [0; DECIMAL_LEN];
        let at = decimal(index, &mut buf);
        self.call(false, "LINDEX", &[key, at], bytes, None)
    }

    fn lrange(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        if !self.exists(key) {
            return Vec::new();
        }
        self.strings("LRANGE", &[key, b"0", b"-1"])
    }

    fn lpop(&mut self, key: &[u8]) {
        if !self.exists(key) {
            return;
        }
        self.call(true, "LPOP", &[key], |_| (), ());
    }

    fn rpush(&mut self, key: &[u8], value: &[u8]) {
        self.call(true, "RPUSH", &[key, value], |_| (), ());
    }

    fn lrem(&mut self, key: &[u8], value: &[u8]) {
        if !self.exists(key) {
            return;
        }
        self.call(true, "LREM", &[key, b"0", value], |_| (), ());
    }

    fn zscore(&mut self, key: &[u8], member: &[u8]) -> Option<i64> {
        if !self.exists(key) {
            return None;
        }
        self.call(false, "ZSCORE", &[key, member], score, None)
    }

    fn zadd(&mut self, key: &[u8], at: i64, member: &[u8]) -> bool {
        let mut buf = [0; DECIMAL_LEN];
        let at = decimal(at, &mut buf);
        self.call(true, "ZADD", &[key, at, member], |r| integer(r) == 1, false)
    }

    fn zincrby(&mut self, key: &[u8], delta: i64, member: &[u8]) {
        let mut buf = [0; DECIMAL_LEN];
        let delta = decimal(delta, &mut buf);
        self.call(true, "ZINCRBY", &[key, delta, member], |_| (), ());
    }

    fn zrem(&mut self, key: &[u8], member: &[u8]) {
        if !self.exists(key) {
            return;
        }
        self.call(true, "ZREM", &[key, member], |_| (), ());
    }

    fn zrange(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        if !self.exists(key) {
            return Vec::new();
        }
        self.strings("ZRANGE", &[key, b"0", b"-1"])
    }
}

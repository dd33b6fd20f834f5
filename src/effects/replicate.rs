//! Effect replication: each write goes to replicas and the AOF as the plain
//! command that reproduces it, with absolute deadlines, so a replay lands on
//! the same state and the same expiry times. Redis wraps one command's
//! effects in MULTI/EXEC. When nothing could receive them (see `observers`)
//! only the dirty counter moves, as it would for the replicated command, so
//! save points still count these writes.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::Context;

use super::observers;
use crate::engine::int::{decimal, DECIMAL_LEN};
use crate::server;

/// How one command's writes leave the node, decided once per command.
#[derive(Clone, Copy)]
pub struct Replication {
    live: bool,
}

impl Replication {
    pub fn new(ctx: &Context, flags: c_int) -> Replication {
        Replication {
            live: observers::propagating(ctx, flags),
        }
    }

    pub fn hset(self, ctx: &Context, key: &[u8], field: &[u8], value: &[u8]) {
        self.emit(ctx, c"HSET", &[key, field, value], None);
    }

    pub fn hincrby(self, ctx: &Context, key: &[u8], field: &[u8], delta: i64) {
        self.emit(ctx, c"HINCRBY", &[key, field], Some(delta));
    }

    pub fn hdel(self, ctx: &Context, key: &[u8], field: &[u8]) {
        self.emit(ctx, c"HDEL", &[key, field], None);
    }

    pub fn set_until(self, ctx: &Context, key: &[u8], value: &[u8], deadline: i64) {
        self.emit(ctx, c"SET", &[key, value, b"PXAT"], Some(deadline));
    }

    /// A semaphore's count, as its scripts' `SET` (no TTL), or a latch's
    /// new count.
    pub fn set(self, ctx: &Context, key: &[u8], value: &[u8]) {
        self.emit(ctx, c"SET", &[key, value], None);
    }

    pub fn expire_at(self, ctx: &Context, key: &[u8], deadline: i64) {
        self.emit(ctx, c"PEXPIREAT", &[key], Some(deadline));
    }

    /// As `INCR` itself (`INCRBY` for a token's jump after a promotion): a
    /// replica and an AOF reload hold the same value before it, so they
    /// reach the same token.
    pub fn incr_by(self, ctx: &Context, key: &[u8], by: i64) {
        if by == 1 {
            self.emit(ctx, c"INCR", &[key], None);
        } else {
            self.emit(ctx, c"INCRBY", &[key], Some(by));
        }
    }

    pub fn del(self, ctx: &Context, key: &[u8]) {
        self.emit(ctx, c"DEL", &[key], None);
    }

    /// The fair lock's line (contract §13): each write as the command
    /// Redisson's scripts run, so a replica's list and deadlines match.
    pub fn lpop(self, ctx: &Context, key: &[u8]) {
        self.emit(ctx, c"LPOP", &[key], None);
    }

    pub fn rpush(self, ctx: &Context, key: &[u8], value: &[u8]) {
        self.emit(ctx, c"RPUSH", &[key, value], None);
    }

    /// `ZADD key score member` (the score an absolute deadline).
    pub fn zadd(self, ctx: &Context, key: &[u8], score: i64, member: &[u8]) {
        self.emit_number_before(ctx, c"ZADD", key, score, member);
    }

    pub fn zincrby(self, ctx: &Context, key: &[u8], delta: i64, member: &[u8]) {
        self.emit_number_before(ctx, c"ZINCRBY", key, delta, member);
    }

    pub fn zrem(self, ctx: &Context, key: &[u8], member: &[u8]) {
        self.emit(ctx, c"ZREM", &[key, member], None);
    }

    /// One `ZREM key member…`, as a permit script's reclaim or list release
    /// runs it (contract §17).
    pub fn zrem_all(self, ctx: &Context, key: &[u8], members: &[Vec<u8>]) {
        if !self.live {
            server::replicate_verbatim(ctx);
            return;
        }
        let mut args: Vec<&[u8]> = Vec::with_capacity(members.len() + 1);
        args.push(key);
        args.extend(members.iter().map(Vec::as_slice));
        server::replicate(ctx, c"ZREM", &args);
    }

    /// `command key number last`, the number formatted only when something
    /// receives it.
    fn emit_number_before(self, ctx: &Context, command: &CStr, key: &[u8], n: i64, last: &[u8]) {
        if !self.live {
            server::replicate_verbatim(ctx);
            return;
        }
        let mut buf = [0; DECIMAL_LEN];
        server::replicate(ctx, command, &[key, decimal(n, &mut buf), last]);
    }

    /// Propagates `command` with `args` and, last, `number` in decimal (a
    /// delta or a deadline), formatted only when something receives it.
    fn emit(self, ctx: &Context, command: &CStr, args: &[&[u8]], number: Option<i64>) {
        if !self.live {
            server::replicate_verbatim(ctx);
            return;
        }
        let mut buf = [0; DECIMAL_LEN];
        let mut all: [&[u8]; 4] = [&[]; 4];
        all[..args.len()].copy_from_slice(args);
        let len = match number {
            Some(n) => {
                all[args.len()] = decimal(n, &mut buf);
                args.len() + 1
            }
            None => args.len(),
        };
        server::replicate(ctx, command, &all[..len]);
    }
}

//! Effect replication: each write goes to replicas and the AOF as the plain
//! command that reproduces it, with absolute deadlines, so a replay lands on
//! the same state and the same expiry times. Redis wraps one command's
//! effects in MULTI/EXEC.

use redis_module::Context;

pub fn hset(ctx: &Context, key: &[u8], field: &[u8], value: &[u8]) {
    ctx.replicate("HSET", &[key, field, value]);
}

pub fn hincrby(ctx: &Context, key: &[u8], field: &[u8], delta: i64) {
    ctx.replicate("HINCRBY", &[key, field, delta.to_string().as_bytes()]);
}

pub fn hdel(ctx: &Context, key: &[u8], field: &[u8]) {
    ctx.replicate("HDEL", &[key, field]);
}

pub fn set_until(ctx: &Context, key: &[u8], value: &[u8], deadline: i64) {
    let deadline = deadline.to_string();
    ctx.replicate("SET", &[key, value, b"PXAT", deadline.as_bytes()]);
}

pub fn expire_at(ctx: &Context, key: &[u8], deadline: i64) {
    ctx.replicate("PEXPIREAT", &[key, deadline.to_string().as_bytes()]);
}

pub fn del(ctx: &Context, key: &[u8]) {
    ctx.replicate("DEL", &[key]);
}

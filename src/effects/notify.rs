//! Keyspace notifications: the low-level key API raises none, so every write
//! announces the event its command would, for Redisson's lock listeners,
//! whenever anyone could receive it (see `observers`).

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context};

use crate::server::{self, RawString};

#[derive(Debug, Clone, Copy)]
pub enum Event {
    Hset,
    Hincrby,
    Hdel,
    Del,
    Set,
    Expire,
    Incrby,
    Lpop,
    Rpush,
    Zadd,
    Zincr,
    Zrem,
}

impl Event {
    fn class_and_name(self) -> (c_int, &'static CStr) {
        match self {
            Event::Hset => (raw::REDISMODULE_NOTIFY_HASH, c"hset"),
            Event::Hincrby => (raw::REDISMODULE_NOTIFY_HASH, c"hincrby"),
            Event::Hdel => (raw::REDISMODULE_NOTIFY_HASH, c"hdel"),
            Event::Del => (raw::REDISMODULE_NOTIFY_GENERIC, c"del"),
            Event::Set => (raw::REDISMODULE_NOTIFY_STRING, c"set"),
            Event::Expire => (raw::REDISMODULE_NOTIFY_GENERIC, c"expire"),
            Event::Incrby => (raw::REDISMODULE_NOTIFY_STRING, c"incrby"),
            Event::Lpop => (raw::REDISMODULE_NOTIFY_LIST, c"lpop"),
            Event::Rpush => (raw::REDISMODULE_NOTIFY_LIST, c"rpush"),
            Event::Zadd => (raw::REDISMODULE_NOTIFY_ZSET, c"zadd"),
            Event::Zincr => (raw::REDISMODULE_NOTIFY_ZSET, c"zincr"),
            Event::Zrem => (raw::REDISMODULE_NOTIFY_ZSET, c"zrem"),
        }
    }
}

/// Raises `event` on `key` (the name of a key the command has open) when
/// its class is among `classes` (from `observers::announced_classes`).
pub fn notify(ctx: &Context, classes: c_int, event: Event, key: RawString) {
    let (class, name) = event.class_and_name();
    if class & classes == 0 {
        return;
    }
    RAISING.with(|r| r.set(true));
    server::notify_keyspace_event(ctx, class, name, key);
    RAISING.with(|r| r.set(false));
}

thread_local! {
    // Redis delivers an event to its subscribers before NotifyKeyspaceEvent
    // returns, on this same thread.
    static RAISING: Cell<bool> = const { Cell::new(false) };
}

/// True while the module announces a write of its own, so its own
/// subscribers can tell it from a write by anyone else.
pub fn raising() -> bool {
    RAISING.with(Cell::get)
}

//! Keyspace notifications: the low-level key API raises none, so every write
//! announces the event its command would, for Redisson's lock listeners.

use redis_module::{Context, NotifyEvent, RedisString};

#[derive(Debug, Clone, Copy)]
pub enum Event {
    Hset,
    Hincrby,
    Hdel,
    Del,
    Set,
    Expire,
}

pub fn notify(ctx: &Context, event: Event, key: &RedisString) {
    let (class, name) = match event {
        Event::Hset => (NotifyEvent::HASH, "hset"),
        Event::Hincrby => (NotifyEvent::HASH, "hincrby"),
        Event::Hdel => (NotifyEvent::HASH, "hdel"),
        Event::Del => (NotifyEvent::GENERIC, "del"),
        Event::Set => (NotifyEvent::STRING, "set"),
        Event::Expire => (NotifyEvent::GENERIC, "expire"),
    };
    ctx.notify_keyspace_event(class, name, key);
}

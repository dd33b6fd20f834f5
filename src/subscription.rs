//! The module's keyspace subscription. Redis makes a context and a
//! temporary client for each subscriber on every matching event of the
//! server, whoever writes, which costs every write of other clients about
//! a tenth of a HINCRBY. Only waiters and lease indexes need the events, so
//! the module subscribes, once and for every class, when the first of
//! either appears, and a server that never has one never pays.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context, NotifyEvent, RedisString};

use crate::{blocking, leases};

/// The classes of the writes that may free a lock its waiters wait on.
const WAKES_WAITERS: NotifyEvent = NotifyEvent::GENERIC
    .union(NotifyEvent::HASH)
    .union(NotifyEvent::STRING)
    .union(NotifyEvent::EXPIRED)
    .union(NotifyEvent::EVICTED);

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static SUBSCRIBED: Cell<bool> = const { Cell::new(false) };
}

/// Subscribes unless done already; call before keeping anything the events
/// must keep current. Redis 7.0 cannot unsubscribe, so it lasts.
pub fn ensure(ctx: &Context) {
    if subscribed() {
        return;
    }
    // Every class: a lease key replaced by a list is a foreign write too.
    let classes = NotifyEvent::ALL.bits() & raw::get_keyspace_notification_flags_all().bits();
    // SAFETY: a module context and a callback of the signature Redis expects;
    // subscribing adds to the list of subscribers at any time.
    let status = unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents.expect("SubscribeToKeyspaceEvents")(
            ctx.get_raw(),
            classes,
            Some(on_event),
        )
    };
    if status == raw::REDISMODULE_OK as c_int {
        SUBSCRIBED.with(|s| s.set(true));
    } else {
        ctx.log_warning("rwlock: cannot subscribe to keyspace events");
    }
}

/// Whether the module receives keyspace events (INFO).
pub fn subscribed() -> bool {
    SUBSCRIBED.with(Cell::get)
}

unsafe extern "C" fn on_event(
    ctx: *mut raw::RedisModuleCtx,
    class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    let ctx = Context::new(ctx);
    let class = NotifyEvent::from_bits_truncate(class);
    // SAFETY: Redis passes a NUL-terminated event name and a valid key name,
    // both alive for the call.
    let event = unsafe { CStr::from_ptr(event) }
        .to_str()
        .unwrap_or_default();
    let key = RedisString::string_as_slice(key);
    if class.intersects(WAKES_WAITERS) {
        blocking::on_keyspace_event(&ctx, key);
    }
    leases::on_keyspace_event(&ctx, event, key);
    raw::REDISMODULE_OK as c_int
}

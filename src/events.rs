//! Where the server's events reach the module, and fan out: flushes, role
//! changes, SWAPDB, loads, forks, replica links, module loads and closed
//! connections (server events, subscribed at load), and writes to keys
//! (keyspace events, subscribed on first need). A module has one callback per event, so each
//! callback here tells every part that cares.
//!
//! The keyspace subscription: Redis makes a context and a temporary client
//! for each subscriber on every matching event of the server, whoever
//! writes, which costs every write of other clients about a tenth of a
//! HINCRBY. Only waiters, lease indexes and session holds need the events,
//! so the module subscribes, once and for every class, when the first
//! appears,
//! and a server that never has one never pays.

use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context, NotifyEvent};

use crate::disconnect;
use crate::effects::observers;
use crate::keyspace::{expiry, leases, tokens};
use crate::server::{self, strings, RawString};
use crate::sessions;
use crate::waiting::clients as waiting;
use crate::waiting::fair as fair_waiting;
use crate::waiting::queues;

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

/// Whether the module receives keyspace events (INFO).
pub fn subscribed() -> bool {
    SUBSCRIBED.with(Cell::get)
}

/// Subscribes to keyspace events once a waiter, a lease index or a session
/// hold needs to hear of other clients' writes; called by the commands that
/// park a client, may keep an index or bind a hold, before they return (so no write of anyone else
/// comes between). Redis 7.0 cannot unsubscribe, so it lasts.
#[inline]
pub fn follow_writes(ctx: &Context) {
    if subscribed() || (queues::idle() && !leases::any() && sessions::idle()) {
        return;
    }
    subscribe_keyspace(ctx);
}

/// Subscribes to keyspace events of every class: a lease key replaced by a
/// list is a foreign write too.
fn subscribe_keyspace(ctx: &Context) {
    let classes = NotifyEvent::ALL.bits() & raw::get_keyspace_notification_flags_all().bits();
    if server::subscribe_keyspace_events(ctx, classes, on_keyspace_event) {
        SUBSCRIBED.with(|s| s.set(true));
    } else {
        ctx.log_warning("rwlock: cannot subscribe to keyspace events");
    }
}

/// Subscribes to keyspace events, if not yet, for a fair lock's line: its
/// parked waiters must hear of its hash deleted or changed by others.
/// Called when a fair lock parks a waiter, never on other kinds' paths.
pub fn follow_fair_writes(ctx: &Context) {
    if !subscribed() {
        subscribe_keyspace(ctx);
    }
}

unsafe extern "C" fn on_keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    class: c_int,
    event: *const c_char,
    key: RawString,
) -> c_int {
    let ctx = Context::new(ctx);
    let class = NotifyEvent::from_bits_truncate(class);
    // SAFETY: Redis passes a NUL-terminated event name, alive for the call.
    let event = unsafe { CStr::from_ptr(event) }
        .to_str()
        .unwrap_or_default();
    let key = strings::bytes(key);
    let db = server::selected_db(&ctx);
    if class.intersects(WAKES_WAITERS) {
        waiting::on_keyspace_event(&ctx, db, key);
    }
    if class.intersects(NotifyEvent::ZSET) {
        // A permit's lease changed by another client's script
        // (`updateLeaseTime`) moves the semaphore's next expiry.
        for name in permit_names(key) {
            waiting::on_keyspace_event(&ctx, db, name);
        }
    }
    fair_waiting::on_keyspace_event(&ctx, db, event, key);
    leases::on_keyspace_event(db, event, key);
    sessions::on_keyspace_event(&ctx, db, key);
    if !sessions::idle() && event != "zadd" {
        // Session permits released or reclaimed by a script, or their set
        // deleted: they are no longer the connection's to give back.
        for name in permit_names(key) {
            sessions::on_permit_set_event(&ctx, db, name);
        }
    }
    raw::REDISMODULE_OK as c_int
}

/// The permit-expirable semaphores whose set of permits taken may be `key`
/// (contract §17): `{name}:timeout` is the set of `name`, and of `{name}`
/// too, which is named as it is.
fn permit_names(key: &[u8]) -> impl Iterator<Item = &[u8]> {
    let stem = key.strip_suffix(b":timeout");
    let braced = stem.filter(|s| s.contains(&b'{'));
    let wrapped = stem
        .and_then(|s| s.strip_prefix(b"{"))
        .and_then(|s| s.strip_suffix(b"}"))
        .filter(|s| !s.contains(&b'{'));
    braced.into_iter().chain(wrapped)
}

/// Keys expiring, from load on (a subscription of its own, to this one
/// class): a fair lock's hash running out while waiters queue tells the
/// head (`keyspace::expiry`, Redisson #3730), even when every waiter is a
/// Redisson client's and no command of the module has run. Costs only when
/// a key expires: one lookup of the name's line.
unsafe extern "C" fn on_expired_event(
    ctx: *mut raw::RedisModuleCtx,
    _class: c_int,
    _event: *const c_char,
    key: RawString,
) -> c_int {
    expiry::on_expired(&Context::new(ctx), strings::bytes(key));
    raw::REDISMODULE_OK as c_int
}

/// The data of `db` (every database with `None`) changed without a keyspace
/// event (a flush, a swap, a load): every lock with waiters, in a queue or
/// a fair lock's line, gets a look.
fn look_at_every_queue(ctx: &Context, db: Option<i32>) {
    waiting::on_flush(ctx, db);
    fair_waiting::on_flush(ctx, db);
}

/// Every server event the module follows, told to each part that cares.
unsafe extern "C" fn on_server_event(
    ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    let ctx = Context::new(ctx);
    match eid.id {
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED => {
            // The data may be replaced by the new master's: no index stays
            // trusted.
            leases::forget_all(None);
            // Nor are session holds the module's any more: a replica never
            // writes, and a promoted one knows no connections of the old
            // master; their holds end at their lease.
            sessions::forget(None);
            if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
                tokens::forget_all();
                waiting::abort_all(&ctx);
                fair_waiting::abort_all(&ctx);
            } else {
                // Its token counters may be behind the old master's.
                tokens::promoted();
            }
        }
        // FLUSHDB and FLUSHALL raise no per-key event.
        raw::REDISMODULE_EVENT_FLUSHDB if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END => {
            // SAFETY: for FlushDB events Redis passes a RedisModuleFlushInfo.
            let db = unsafe { (*(data as *const raw::RedisModuleFlushInfo)).dbnum };
            let db = (db != -1).then_some(db);
            leases::forget_all(db);
            sessions::forget(db);
            look_at_every_queue(&ctx, db);
        }
        // SWAPDB exchanges whole databases without a keyspace event: every
        // lock with waiters gets a look, as after a flush.
        raw::REDISMODULE_EVENT_SWAPDB => {
            tokens::forget_all();
            leases::forget_all(None);
            sessions::forget(None);
            look_at_every_queue(&ctx, None);
        }
        raw::REDISMODULE_EVENT_FORK_CHILD
        | raw::REDISMODULE_EVENT_REPLICA_CHANGE
        | raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE => observers::replication_may_have_changed(),
        raw::REDISMODULE_EVENT_LOADING => {
            observers::replication_may_have_changed();
            // A load (a restart's, DEBUG RELOAD, a full sync) replaces the
            // data without keyspace events.
            tokens::forget_all();
            leases::forget_all(None);
            sessions::forget(None);
            if subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
                // DEBUG RELOAD on a master keeps its parked clients.
                look_at_every_queue(&ctx, None);
            }
        }
        raw::REDISMODULE_EVENT_CLIENT_CHANGE
            if subevent == raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED
                && !data.is_null() =>
        {
            // SAFETY: for client change events Redis passes a
            // RedisModuleClientInfo (version 1) of the client.
            let client = unsafe { (*(data as *const raw::RedisModuleClientInfo)).id };
            disconnect::on_disconnect(&ctx, client);
        }
        raw::REDISMODULE_EVENT_MODULE_CHANGE
            if subevent == raw::REDISMODULE_SUBEVENT_MODULE_LOADED && !data.is_null() =>
        {
            // SAFETY: for module change events Redis passes a
            // RedisModuleModuleChange whose name is a NUL-terminated string.
            let name = unsafe {
                CStr::from_ptr((*(data as *const raw::RedisModuleModuleChange)).module_name)
            };
            observers::module_loaded(name);
        }
        _ => {}
    }
}

/// Subscribes to every server event the module follows, and to keys
/// expiring; called at load.
pub fn subscribe(ctx: &Context) -> Result<(), &'static str> {
    let events = [
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        raw::REDISMODULE_EVENT_FLUSHDB,
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_FORK_CHILD,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_MODULE_CHANGE,
        raw::REDISMODULE_EVENT_CLIENT_CHANGE,
    ];
    let all = events
        .into_iter()
        .all(|id| server::subscribe_server_event(ctx, id, on_server_event));
    all.then_some(())
        .ok_or("cannot subscribe to server events")?;
    let expired = NotifyEvent::EXPIRED.bits();
    server::subscribe_keyspace_events(ctx, expired, on_expired_event)
        .then_some(())
        .ok_or("cannot subscribe to expired keys")
}

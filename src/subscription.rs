//! The module's one keyspace subscription. Redis makes a context and a
//! temporary client for each subscriber on every matching event of the
//! server, whoever writes: one subscription for every class, handed on to
//! the parts that need it, costs other clients' writes half of what one per
//! part would.

use redis_module::{Context, NotifyEvent};

use crate::{blocking, leases};

/// The classes of the writes that may free a lock its waiters wait on.
const WAKES_WAITERS: NotifyEvent = NotifyEvent::GENERIC
    .union(NotifyEvent::HASH)
    .union(NotifyEvent::STRING)
    .union(NotifyEvent::EXPIRED)
    .union(NotifyEvent::EVICTED);

pub fn on_keyspace_event(ctx: &Context, class: NotifyEvent, event: &str, key: &[u8]) {
    if class.intersects(WAKES_WAITERS) {
        blocking::on_keyspace_event(ctx, key);
    }
    // Every class: a lease key replaced by a list is a foreign write too.
    leases::on_keyspace_event(ctx, event, key);
}

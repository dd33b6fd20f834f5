//! Where the server does better than Redisson's scripts (#3730): when a
//! fair lock's hash expires while waiters are in its line, `0` is published
//! on the head waiter's own channel, as an unlock would, so the head retries
//! at once instead of sleeping out the `ttl` it was given. Redisson's
//! scripts publish nothing then. Heard through the keyspace `expired` event,
//! which the module follows from load on (`events`), so Redisson's own
//! waiters are told even where no module command ever ran.

use redis_module::Context;

use super::RedisStore;
use crate::engine::fair;
use crate::engine::lock::RELEASED;
use crate::engine::names::LockNames;
use crate::engine::store::{Line, LineKind, Store};

/// The key `key` of the event's database expired: if it names a fair lock
/// with a line, tell the line's first live waiter. Reads and publishes
/// only (no write inside a keyspace notification).
pub fn on_expired(ctx: &Context, key: &[u8]) {
    let Ok(names) = LockNames::new(key) else {
        return;
    };
    let mut store = RedisStore::new(ctx);
    // Most expiring keys are no fair lock: one key lookup tells.
    if store.line_kind(&names.fair_queue()) != LineKind::List {
        return;
    }
    let now = store.now_ms();
    if let Ok(Some(head)) = fair::head(&mut store, &names, now) {
        store.publish(&names.waiter_channel(&head), RELEASED);
    }
}

//! A connection closed (QUIT, `CLIENT KILL`, its peer gone, a timeout): the
//! session holds it took (`sessions`) are released at once, each as its owner's unlock
//! would (the same writes, replicated, the lock's message published), its
//! session permits given back as `SEMAPHORE.RELEASE` or `PERMIT.RELEASE`
//! would, and the waiters served. The disconnect arrives inside Redis freeing
//! the client, maybe in the middle of another client's command (`CLIENT
//! KILL`), where writing is unsafe: the release runs from a timer that
//! fires in the next turn of the event loop, which the module wakes in case
//! it was about to wait (a client freed between turns, after QUIT).
//!
//! It sits above both `sessions` (what the connection bound) and `waiting`
//! (who is served after the release), which know nothing of each other's
//! reaction to a close.

use std::collections::BTreeSet;
use std::time::Duration;

use redis_module::Context;

use crate::engine::hold::{Release, Unlocked};
use crate::engine::kinds;
use crate::engine::names::LockNames;
use crate::engine::store::{KeyKind, Line, Store};
use crate::engine::{permit, semaphore};
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::server;
use crate::sessions::{
    self,
    registry::{Bond, Bound, ClientId, Orphan},
};
use crate::waiting::clients as waiting;

/// The connection `client` closed: its session holds are released in the
/// next turn of the event loop. Until then they stay in the registry, where
/// the writes of the rest of this turn (other clients' unlocks) still move
/// their levels.
pub fn on_disconnect(ctx: &Context, client: ClientId) {
    if sessions::binds_client(client) {
        ctx.create_timer(Duration::ZERO, release_all, client);
        server::wake_event_loop();
    }
}

fn release_all(ctx: &Context, client: ClientId) {
    // A master demoted since forgot what it bound; the holds end at their
    // lease.
    let retry = |after| {
        ctx.create_timer(after, release_all, client);
    };
    if !server::may_write(ctx, retry) {
        return;
    }
    for orphan in sessions::take(client) {
        release(ctx, orphan);
    }
}

/// Gives back what the connection bound of one bond, then serves the
/// waiters there.
fn release(ctx: &Context, orphan: Orphan) {
    let Orphan { bond, bound } = orphan;
    let Ok(names) = LockNames::new(&bond.lock.1) else {
        return;
    };
    server::select_db(ctx, bond.lock.0);
    let mut store = RedisStore::new(ctx);
    match bound {
        Bound::Holds { levels, lease } => {
            release_holds(ctx, &mut store, &names, &bond, &levels, lease);
        }
        Bound::Permits(permits) => give_back(ctx, &mut store, &names, permits),
        Bound::Ids(ids) => give_back_ids(ctx, &mut store, &names, &ids),
    }
}

/// Releases one hold per session level the owner's count still has, the
/// latest first, then serves the lock's waiters.
fn release_holds(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    bond: &Bond,
    levels: &[i64],
    lease: i64,
) {
    let released = waiting::serve_after(ctx, store, names, |store| {
        let count = kinds::held(store, names, bond.kind, &bond.owner);
        let mut released = 0;
        for &level in levels.iter().rev().filter(|&&l| l <= count) {
            // Other connections' holds of the bond above it move down first:
            // the release's own keyspace events read the new count.
            sessions::released(bond, level);
            match kinds::release(store, names, bond.kind, &bond.owner, lease) {
                Ok(Unlocked::Ran(Release::StillHeld | Release::Released)) => released += 1,
                _ => break,
            }
        }
        released
    });
    for _ in 0..released {
        metrics::bump(Counter::SessionReleases);
    }
}

/// Gives the connection's session permits back to the semaphore as
/// `SEMAPHORE.RELEASE name permits IFEXISTS` would (`INCRBY`, the new count
/// published, replicated), then serves its waiters. A semaphore deleted
/// since the permits were bound forgot them at its deletion; one that
/// expired after the close is found missing here: neither gets them (nor is
/// made again by them).
fn give_back(ctx: &Context, store: &mut RedisStore, names: &LockNames, permits: i64) {
    let given = waiting::serve_after(ctx, store, names, |store| {
        semaphore::release(store, names, permits, true, None)
    });
    if matches!(given, Ok(Unlocked::Ran(Release::Released))) {
        metrics::bump(Counter::PermitsReleased);
        metrics::add(Counter::SessionPermitsReleased, permits as u64);
    }
}

/// Gives the connection's session permits of a permit-expirable semaphore
/// back as `PERMIT.RELEASE name id…` of those still held would (the expired
/// permits reclaimed, one `ZREM`, `INCRBY`, how many published, all
/// replicated), then serves its waiters. An id released by anyone or
/// reclaimed at its expiry since is skipped, and so is an id whose lease ran
/// out and that is not yet reclaimed (the release's reclaim takes it back
/// all the same). A semaphore whose count is gone (expired after the close)
/// gets nothing, and is not made again.
fn give_back_ids(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    ids: &BTreeSet<Vec<u8>>,
) {
    let given = waiting::serve_after(ctx, store, names, |store| {
        if store.kind(names.hash()) != KeyKind::String {
            return Ok(0);
        }
        let now = store.now_ms();
        let set = names.permit_timeout();
        let held: Vec<Vec<u8>> = ids
            .iter()
            .filter(|id| store.zscore(&set, id).is_some_and(|at| at > now))
            .cloned()
            .collect();
        if held.is_empty() {
            return Ok(0);
        }
        permit::release(store, names, &held)
    });
    if let Some(n) = given.ok().filter(|n| *n > 0) {
        metrics::bump(Counter::PermitsReleased);
        metrics::add(Counter::SessionPermitsReleased, n as u64);
    }
}

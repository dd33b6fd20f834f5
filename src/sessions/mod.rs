//! Holds bound to the connection that took them (`SESSION`, docs/design.md,
//! contract §12): the registry of who bound what (`registry`, pure), kept
//! here with the one timer that renews every session hold each lease/3 on
//! a master, and kept true by every write to a bound lock (keyspace
//! events). `disconnect` (above this and `waiting`) releases a closed
//! connection's holds.
//!
//! The API an acquisition uses is [`caller`] and [`bind`], once per hold
//! taken: `LOCK.ACQUIRE`, `RWLOCK.READ`, `RWLOCK.WRITE`, `SEMAPHORE.ACQUIRE`
//! (at once, or when a parked waiter is served), `PERMIT.ACQUIRE` and any
//! command that takes several holds; a semaphore's release by the binding
//! connection calls [`unbind_permits`], a permit-expirable semaphore's
//! release by anyone [`unbind_ids`].

pub mod registry;

use std::cell::RefCell;

use redis_module::Context;

use self::registry::{permit_ids_of, Bond, ClientId, Orphan, Sessions};
use crate::engine::kinds::{self, Kind};
use crate::engine::multi::Want;
use crate::engine::names::LockId;
use crate::engine::names::LockNames;
use crate::engine::permit;
use crate::engine::queue::Hold;
use crate::engine::store::{KeyKind, Line, Store};
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::server;

/// Data of the renewal agenda's timer.
struct Agenda;

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static REGISTRY: RefCell<Sessions> = RefCell::new(Sessions::default());
}

fn with<R>(f: impl FnOnce(&mut Sessions) -> R) -> R {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

/// No session hold anywhere: the hot path asks this first.
pub fn idle() -> bool {
    with(|r| r.idle())
}

/// The connection of the command running in `ctx`; None for a script or
/// another module's call, which have no connection to bind holds to.
pub fn caller(ctx: &Context) -> Option<ClientId> {
    server::calling_connection(ctx)
}

/// Binds one hold just taken by `owner` on the lock `names` (of the
/// database selected in `ctx`) to the connection `client`: renewed every
/// lease/3 while it is open, released when it closes; a semaphore's
/// permits (no owner, no lease) are added to what the connection bound
/// there, given back when it closes, and so are a permit-expirable
/// semaphore's permit ids (made again from the hold's seed, as its reply
/// makes them). Call it once per hold granted with
/// `SESSION`, after the grant, with the store that made it.
pub fn bind(
    ctx: &Context,
    store: &mut RedisStore,
    client: ClientId,
    names: &LockNames,
    hold: Hold,
    owner: &[u8],
    lease: i64,
) {
    let lock = (server::selected_db(ctx), names.hash().to_vec());
    // A latch's waiter holds nothing to bind (and never asks SESSION).
    let kind = match hold {
        Hold::Semaphore { permits } => {
            with(|r| r.bind_permits(client, lock, permits));
            metrics::bump(Counter::SessionBinds);
            return;
        }
        Hold::Permit { permits, seed } => {
            let ids = permit::ids(seed, permits).map(Vec::from);
            with(|r| r.bind_ids(client, lock, ids));
            metrics::bump(Counter::SessionBinds);
            return;
        }
        hold => match Kind::try_from(hold) {
            Ok(kind) => kind,
            Err(_) => return,
        },
    };
    let level = kinds::held(store, names, kind, owner);
    if level == 0 {
        return;
    }
    let bond = Bond {
        lock,
        kind,
        owner: owner.to_vec(),
    };
    let now = server::milliseconds();
    with(|r| r.bind(client, bond, level, lease, now));
    metrics::bump(Counter::SessionBinds);
    arm(ctx);
}

/// [`bind`] for each hold of a multi-hold (`LOCK.ACQUIREALL`) just granted
/// to `owner`.
pub fn bind_all(
    ctx: &Context,
    store: &mut RedisStore,
    client: ClientId,
    wants: &[Want],
    owner: &[u8],
    lease: i64,
) {
    for w in wants {
        bind(ctx, store, client, &w.names, w.hold, owner, lease);
    }
}

/// The calling connection gave back `permits` of the semaphore `names` (of
/// the database selected in `ctx`): as many of its session permits there,
/// up to `permits`, are no longer bound, so its close gives back only the
/// rest. A script's release has no connection and unbinds nothing.
pub fn unbind_permits(ctx: &Context, names: &LockNames, permits: i64) {
    if idle() {
        return;
    }
    let Some(client) = caller(ctx).filter(|c| binds_client(*c)) else {
        return;
    };
    let lock = (server::selected_db(ctx), names.hash().to_vec());
    with(|r| r.unbind_permits(client, lock, permits));
}

/// The permits `ids` of the permit-expirable semaphore `names` (of the
/// database selected in `ctx`) were given back, by any connection or
/// script: they are no longer bound to whichever connection took them, so
/// no close gives them back again. Ids are owned: a release names them.
pub fn unbind_ids(ctx: &Context, names: &LockNames, ids: &[Vec<u8>]) {
    if idle() {
        return;
    }
    let bond = permit_ids_of((server::selected_db(ctx), names.hash().to_vec()));
    with(|r| r.unbind_ids(&bond, ids));
}

/// The session permits of the semaphore `names` (of the database selected
/// in `ctx`), by connection, for `LOCK.WAITING`.
pub fn permits_on(ctx: &Context, names: &LockNames) -> Vec<(ClientId, i64)> {
    if idle() {
        return Vec::new();
    }
    let lock = (server::selected_db(ctx), names.hash().to_vec());
    with(|r| r.permits_on(&lock))
}

/// How many of `owner`'s holds of `kind` on the lock are session-bound.
pub fn bound(ctx: &Context, names: &LockNames, owner: &[u8], kind: Kind) -> i64 {
    if idle() {
        return 0;
    }
    let lock = (server::selected_db(ctx), names.hash().to_vec());
    with(|r| r.bound(&lock, owner, kind))
}

/// The module changed the lock `names` (any command, a served waiter, a
/// release on close): as [`on_keyspace_event`]. The module's writes raise
/// keyspace events only when `notify-keyspace-events` asks for them.
pub fn settle(ctx: &Context, names: &LockNames) {
    if !idle() {
        observe(ctx, server::selected_db(ctx), names.hash(), true);
    }
}

/// A write to `key` of `db` by anyone: the counts of the session holds on
/// it are read again, and holds given back forgotten. Reads only, as a
/// keyspace event callback must.
pub fn on_keyspace_event(ctx: &Context, db: i32, key: &[u8]) {
    if !idle() {
        observe(ctx, db, key, false);
    }
}

/// A write by anyone that may have taken permits out of the set of the
/// permit-expirable semaphore `name` of `db` (a `ZREM` by Redisson's
/// release or reclaim, the set deleted, expired or renamed; not a `ZADD`,
/// which takes none and comes once per permit acquired): the permits bound
/// there that are no longer in the set are unbound.
pub fn on_permit_set_event(ctx: &Context, db: i32, name: &[u8]) {
    if !idle() {
        observe(ctx, db, name, true);
    }
}

/// Reads the lock `key` of `db` again for every bond held there; with
/// `ids`, looks each bound permit id up in the permit-expirable
/// semaphore's set too (one read per id, so only where the set may have
/// lost some).
fn observe(ctx: &Context, db: i32, key: &[u8], ids: bool) {
    let lock: LockId = (db, key.to_vec());
    // The registry is not borrowed while reading: a read may expire the key,
    // whose event comes back here.
    let bonds = with(|r| r.bonds_on(&lock));
    let Ok(names) = LockNames::new(key) else {
        return;
    };
    for bond in bonds {
        let mut store = RedisStore::new(ctx);
        let count = match bond.kind {
            // Permits stay bound while the semaphore's count is a string:
            // a write to it (an add, a drain, anyone's SET) keeps the
            // semaphore; a deletion, an expiry or another type ends it.
            Kind::Permits | Kind::PermitIds => i64::from(store.kind(key) == KeyKind::String),
            kind => kinds::held(&mut store, &names, kind, &bond.owner),
        };
        with(|r| r.observe(&bond, count));
        if ids && count > 0 && bond.kind == Kind::PermitIds {
            let set = names.permit_timeout();
            let gone: Vec<Vec<u8>> = with(|r| r.ids_of(&bond))
                .into_iter()
                .filter(|id| store.zscore(&set, id).is_none())
                .collect();
            if !gone.is_empty() {
                with(|r| r.unbind_ids(&bond, &gone));
            }
        }
    }
}

/// The locks of `db` (every database with `None`) were flushed, swapped or
/// loaded anew, or the node changed role: their session holds are no
/// longer the module's to renew or release.
pub fn forget(db: Option<i32>) {
    if !idle() {
        with(|r| r.forget(db));
    }
}

/// Whether the connection `client` has session holds.
pub fn binds_client(client: ClientId) -> bool {
    !idle() && with(|r| r.binds_client(client))
}

/// Takes what the closed connection `client` had bound.
pub fn take(client: ClientId) -> Vec<Orphan> {
    if idle() {
        return Vec::new();
    }
    with(|r| r.close(client))
}

/// The module is about to release the session hold at `level` of `bond`.
pub fn released(bond: &Bond, level: i64) {
    with(|r| r.released(bond, level));
}

/// Connections with session holds or permits, those holds, and those
/// permits, for `INFO rwlock`.
pub fn counts() -> (usize, i64, i64) {
    with(|r| r.counts())
}

/// Makes the agenda's timer fire by the first renewal due.
fn arm(ctx: &Context) {
    server::timers::arm_agenda(ctx, &REGISTRY, Sessions::agenda, on_agenda, Agenda);
}

/// Renews what fell due, as `RWLOCK.RENEW` or `LOCK.RENEW` would, then
/// arms the timer for the next.
fn on_agenda(ctx: &Context, _: Agenda) {
    let due = with(|r| r.take_due(server::milliseconds()));
    // A demoted master forgot its session holds when it changed role. While
    // clients are paused, the next renewal, a third of the lease later,
    // tries again.
    if server::may_write(ctx, |_| ()) {
        for renewal in due {
            renew(ctx, &renewal.bond, renewal.lease);
        }
    }
    arm(ctx);
}

fn renew(ctx: &Context, bond: &Bond, lease: i64) {
    let Ok(names) = LockNames::new(&bond.lock.1) else {
        return;
    };
    server::select_db(ctx, bond.lock.0);
    let mut store = RedisStore::new(ctx);
    let held = kinds::renew(&mut store, &names, bond.kind, &bond.owner, lease);
    if matches!(held, Ok(true)) {
        metrics::bump(Counter::SessionRenewals);
    } else {
        with(|r| r.observe(bond, 0));
    }
}

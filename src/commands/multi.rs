//! The multi-hold commands (docs/design.md, contract §11): several holds of
//! distinct locks, plain or read-write, taken all or none, released or
//! renewed in one round trip. Each hold is made on its own lock exactly as
//! its single command makes it; Redis wraps the effects of one command in
//! MULTI/EXEC for replicas and the AOF.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use super::apply::{drive, released, renewed, Acquisition, Terms};
use crate::args::{self, lock_error, ArgString, Multi, MultiCommand};
use crate::config;
use crate::engine::hold::{Attempt, GrantLatch, Granted};
use crate::engine::multi::{self, longer, Want};
use crate::engine::store::Store;
use crate::events;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::server;
use crate::sessions::{self, registry::ClientId};
use crate::waiting::clients as waiting;
use crate::waiting::parking::Parking;
use crate::waiting::queues;

/// The call parsed as `command`, or None for a keys-position request
/// (COMMAND GETKEYS, cluster routing, ACL key checks), answered here with
/// the listed names (`HOLDS` searched for after the fixed arguments): then
/// the command must not run.
fn parse<'a>(
    ctx: &Context,
    args: &'a [ArgString],
    command: MultiCommand,
) -> Result<Option<Multi<'a>>, RedisError> {
    if !server::keys_position_request(ctx) {
        return args::multi(args, command).map(Some);
    }
    for pos in args::hold_positions(args, command.fixed())
        .into_iter()
        .flatten()
    {
        server::key_at(ctx, pos);
    }
    Ok(None)
}

/// The owner argument, which names a hash field in every lock: the store
/// reuses its string.
fn owner_arg(args: &[ArgString]) -> &[ArgString] {
    args.get(1..2).unwrap_or_default()
}

/// `LOCK.ACQUIREALL owner lease [BLOCK ms] [SESSION] HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]`
///
/// Takes every listed hold for `lease` ms, each as `LOCK.ACQUIRE`,
/// `RWLOCK.READ` or `RWLOCK.WRITE` takes it, or none. Replies nil when all
/// were taken, else the largest PTTL among the locks in the way (-1, a lock
/// without TTL, counting as the largest). With `BLOCK` the client waits on
/// the server until it can take them all at once, holding none meanwhile;
/// at the timeout it gets the largest PTTL of its locks. With `SESSION`
/// every hold is bound to the calling connection (docs/design.md, contract
/// §12), now or when the parked client is served.
pub fn acquire_all(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let Some(a) = parse(ctx, args, MultiCommand::AcquireAll)? else {
        return Ok(RedisValue::NoReply);
    };
    let lease = a.lease.unwrap_or_else(config::default_lease);
    drive(ctx, owner_arg(args), &All { a: &a, lease })
}

/// Every hold of several, the way `LOCK.ACQUIREALL` takes them.
struct All<'a, 'b> {
    a: &'b Multi<'a>,
    lease: i64,
}

impl Acquisition for All<'_, '_> {
    type Outcome = Attempt<Vec<Granted>>;

    fn terms(&self) -> Terms<'_> {
        Terms {
            owner: self.a.owner,
            session: self.a.session,
            block: self.a.block,
            request: None,
            held: None,
        }
    }

    fn serve_first(&self, ctx: &Context, store: &mut RedisStore) {
        for w in &self.a.wants {
            waiting::serve(ctx, store, &w.names);
        }
    }

    fn attempt(
        &self,
        ctx: &Context,
        store: &mut RedisStore,
        _: Option<&GrantLatch>,
    ) -> Result<Attempt<Vec<Granted>>, RedisError> {
        let (owner, wants) = (self.a.owner, &self.a.wants);
        // In fair mode it queues behind the waiters of any of its locks.
        let queued = config::fair()
            && !queues::idle()
            && waiting::queued_before(ctx, store, owner, wants).map_err(lock_error)?;
        if queued {
            Ok(Attempt::Refused {
                pttl: longest_pttl(store, wants),
            })
        } else {
            multi::acquire_all(store, owner, self.lease, wants).map_err(lock_error)
        }
    }

    fn granted(outcome: &Attempt<Vec<Granted>>) -> bool {
        matches!(outcome, Attempt::Granted(_))
    }

    fn bind(&self, ctx: &Context, store: &mut RedisStore, client: ClientId) {
        sessions::bind_all(ctx, store, client, &self.a.wants, self.a.owner, self.lease);
    }

    fn took(&self, ctx: &Context, store: &mut RedisStore, outcome: &Attempt<Vec<Granted>>) {
        let Attempt::Granted(granted) = outcome else {
            return;
        };
        for (w, g) in self.a.wants.iter().zip(granted) {
            metrics::acquired(w.hold, *g);
            // The new holds moved the lock's deadline.
            waiting::serve(ctx, store, &w.names);
        }
    }

    fn cycle(&self, ctx: &Context, store: &mut RedisStore) -> Option<String> {
        let wants: Vec<_> = self.a.wants.iter().map(|w| (&w.names, w.hold)).collect();
        waiting::deadlock(ctx, store, self.a.owner, &wants)
    }

    fn park(&self, ctx: &Context, store: &mut RedisStore, parking: Parking) {
        let (owner, wants) = (self.a.owner, &self.a.wants);
        waiting::park_all(ctx, store, owner, self.lease, wants, parking);
        // From now on other clients' writes may free the locks.
        events::follow_writes(ctx);
    }

    fn reply(&self, outcome: Attempt<Vec<Granted>>) -> RedisValue {
        match outcome {
            Attempt::Granted(_) => RedisValue::Null,
            Attempt::Refused { pttl } => {
                metrics::bump(Counter::Refused);
                RedisValue::Integer(pttl)
            }
        }
    }
}

/// The largest PTTL among the locks (a lock without TTL the largest).
fn longest_pttl(store: &mut RedisStore, wants: &[Want]) -> i64 {
    wants
        .iter()
        .map(|w| store.pttl(w.names.hash()))
        .reduce(longer)
        .unwrap_or_default()
}

/// `LOCK.UNLOCKALL owner HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]`
///
/// Releases one hold of each, as `LOCK.UNLOCK` or `RWLOCK.UNLOCK` does
/// (publishing for each lock that ends, the TTL of one still held re-armed
/// to `rwlock.default-lease`). Replies the array of the single unlocks'
/// replies: nil (not held), 0 (still held) or 1 (released). An error on any
/// hold changes nothing.
pub fn unlock_all(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let Some(a) = parse(ctx, args, MultiCommand::UnlockAll)? else {
        return Ok(RedisValue::NoReply);
    };
    let lease = config::default_lease();
    let mut store = RedisStore::for_write(ctx, owner_arg(args));
    let outcomes = multi::unlock_all(&mut store, a.owner, lease, &a.wants).map_err(lock_error)?;
    for w in &a.wants {
        waiting::serve(ctx, &mut store, &w.names);
    }
    // A read unlock may have kept the lock's lease index, which other
    // clients' writes must be able to drop.
    events::follow_writes(ctx);
    Ok(RedisValue::Array(
        outcomes.into_iter().map(released).collect(),
    ))
}

/// `LOCK.RENEWALL owner lease HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]`
///
/// The watchdog's call for a multi-hold: each lock renewed as `LOCK.RENEW`
/// or `RWLOCK.RENEW` renews it. Replies the array of 1 (held, renewed) or 0.
pub fn renew_all(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let Some(a) = parse(ctx, args, MultiCommand::RenewAll)? else {
        return Ok(RedisValue::NoReply);
    };
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let mut store = RedisStore::for_write(ctx, owner_arg(args));
    let held = multi::renew_all(&mut store, a.owner, lease, &a.wants).map_err(lock_error)?;
    for w in &a.wants {
        waiting::serve(ctx, &mut store, &w.names);
    }
    Ok(RedisValue::Array(held.into_iter().map(renewed).collect()))
}

//! The steps every lock command shares, whatever the lock's kind: run the
//! machine's change on the live keyspace and serve the lock's waiters in
//! the same command, count it, reply. Acquisitions also let the waiters the
//! lock could take go first, queue behind them in fair mode, and park the
//! client with `BLOCK` when refused.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use crate::args::{lock_error, Acquire};
use crate::config;
use crate::engine::error::{LockError, ERR_SESSION};
use crate::engine::hold::{self, Granting};
use crate::engine::names::LockNames;
use crate::engine::queue::{self, Attempt, Granted, Hold};
use crate::engine::rwlock::Unlocked;
use crate::engine::store::Store;
use crate::events;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::reply;
use crate::server::ArgString;
use crate::sessions::{self, registry::ClientId};
use crate::waiting::clients as waiting;

/// Takes `hold` as the parsed call `a` asks; `args` are the command's
/// arguments, whose lock and owner strings the store reuses. With
/// `SESSION` the hold is bound to the calling connection, now or when the
/// parked client is served.
pub fn acquire(ctx: &Context, args: &[ArgString], a: &Acquire, hold: Hold) -> RedisResult {
    let (names, owner, lease) = (&a.lock.names, a.lock.owner, a.lock.lease);
    let session = session_client(ctx, a.session)?;
    let mut store = RedisStore::for_write(ctx, lock_and_owner(args));
    // `REQUEST`: a retry replies what the first call did and changes
    // nothing; without it no key is looked up.
    let latch = match a.request {
        None => None,
        Some(request) => match hold::grant_latch(&mut store, names, Some(request)) {
            Ok(Granting::Replay(token)) => {
                let token = Some(token).filter(|_| reply::fenced(hold));
                let granted = Granted {
                    reentry: true,
                    token,
                };
                return Ok(reply::attempt(Attempt::Granted(granted), hold));
            }
            Ok(Granting::Run(latch)) => latch,
            Err(e) => return Err(lock_error(e)),
        },
    };
    // Waiters the lock could take already go first; those left are served
    // again after the attempt, which may have moved the lock's deadline.
    waiting::serve(ctx, &mut store, names);
    let outcome = waiting::serve_after(ctx, &mut store, names, |store| {
        let queued = config::fair()
            && waiting::has_waiters(ctx, names)
            && !queue::may_overtake(store, names, owner)?;
        if queued {
            Ok(Attempt::Refused {
                pttl: store.pttl(names.hash()),
            })
        } else {
            queue::attempt_latched(store, names, owner, hold, lease, latch.as_ref())
        }
    })
    .map_err(lock_error)?;
    match (outcome, a.block) {
        (Attempt::Granted(granted), _) => {
            metrics::acquired(hold, granted);
            if let Some(client) = session {
                sessions::bind(ctx, &mut store, client, names, hold, owner, lease);
                // Later writes to the lock must reach the session's counts.
                events::follow_writes(ctx);
            }
            waiting::took_hold(ctx, owner);
        }
        (Attempt::Refused { .. }, Some(timeout)) if waiting::can_block(ctx) => {
            // A wait that would close a cycle fails now, nothing changed.
            if let Some(cycle) = waiting::deadlock(ctx, &mut store, owner, &[(names, hold)]) {
                return Err(RedisError::String(cycle));
            }
            let wait = waiting::Wait {
                owner,
                hold,
                lease,
                timeout,
                session,
                request: latch,
            };
            waiting::park(ctx, &mut store, names, wait);
            // From now on other clients' writes may free the lock.
            events::follow_writes(ctx);
            return Ok(RedisValue::NoReply);
        }
        (Attempt::Refused { .. }, _) => metrics::bump(Counter::Refused),
    }
    Ok(reply::attempt(outcome, hold))
}

/// With `SESSION` (`wanted`), the calling connection its holds bind to;
/// scripts and other modules' calls have none, and are refused before any
/// key is touched.
pub fn session_client(ctx: &Context, wanted: bool) -> Result<Option<ClientId>, RedisError> {
    if !wanted {
        return Ok(None);
    }
    match sessions::caller(ctx) {
        Some(client) => Ok(Some(client)),
        None => Err(RedisError::Str(ERR_SESSION)),
    }
}

/// The lock name and owner arguments, which name the lock hash and the
/// owner's hash field: the store reuses their strings.
pub fn lock_and_owner(args: &[ArgString]) -> &[ArgString] {
    args.get(1..3).unwrap_or_default()
}

/// Makes `change` to the lock `names` (the store reusing the `lent`
/// arguments' strings), then serves its waiters: a release, a renewal or a
/// forced unlock may free the lock or move its deadline.
pub fn change<T>(
    ctx: &Context,
    lent: &[ArgString],
    names: &LockNames,
    change: impl FnOnce(&mut RedisStore) -> Result<T, LockError>,
) -> Result<T, RedisError> {
    let mut store = RedisStore::for_write(ctx, lent);
    waiting::serve_after(ctx, &mut store, names, change).map_err(lock_error)
}

/// An unlock's reply: nil, 0 or 1.
pub fn released(outcome: Unlocked) -> RedisValue {
    metrics::unlocked(outcome);
    reply::release(outcome.reply())
}

/// A renewal's reply: 1 when the owner held the lock, else 0.
pub fn renewed(held: bool) -> RedisValue {
    metrics::renewed(held);
    RedisValue::Integer(held.into())
}

/// A forced unlock's reply: 1 when it deleted the lock, else 0.
pub fn forced(deleted: bool) -> RedisValue {
    if deleted {
        metrics::bump(Counter::ForceUnlocks);
    }
    RedisValue::Integer(deleted.into())
}

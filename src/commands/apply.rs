//! The steps every lock command shares, whatever the lock's kind: run the
//! machine's change on the live keyspace and serve the lock's waiters in
//! the same command, count it, reply. Acquisitions also let the waiters the
//! lock could take go first, queue behind them in fair mode, and park the
//! client with `BLOCK` when refused.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use crate::args::{self, lock_error, Acquire};
use crate::config;
use crate::engine::error::{LockError, ERR_SESSION};
use crate::engine::hold::{self, GrantLatch, Granting, Request};
use crate::engine::hold::{Attempt, Granted};
use crate::engine::kinds::{self, Kind};
use crate::engine::names::LockNames;
use crate::engine::permit;
use crate::engine::queue::{self, Hold};
use crate::engine::rwlock::Unlocked;
use crate::engine::store::Store;
use crate::events;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::reply;
use crate::server::ArgString;
use crate::sessions::{self, registry::ClientId};
use crate::waiting::clients as waiting;
use crate::waiting::fair as fair_waiting;
use crate::waiting::parking::Parking;
use crate::waiting::queues;

/// What one way of acquiring gives the one driver, [`drive`]: a single
/// hold, a place in a fair lock's line, every hold of several. The steps
/// and their order are the driver's; a kind of lock adds a way only when
/// it waits differently (docs/design.md, "How to add a lock kind").
pub trait Acquisition {
    /// What the attempt answers.
    type Outcome;
    /// What the call asks, as every way of acquiring words it.
    fn terms(&self) -> Terms<'_>;
    /// What a retry of a granted request replies (`token`: the latch's, or
    /// with `HELD` the counter's).
    fn replay(&self, _token: i64) -> RedisValue {
        RedisValue::Null
    }
    /// With `HELD n`: the reply of a call whose owner's count shows it was
    /// granted before (docs/design.md §14.8), nothing changed; None runs
    /// it. Only the single-lock ways take `HELD`.
    fn granted_before(
        &self,
        _store: &mut RedisStore,
        _held: i64,
    ) -> Result<Option<RedisValue>, LockError> {
        Ok(None)
    }
    /// The `DEADLOCK` error of a client that may park, asked before the
    /// attempt: for a way whose refused attempt writes (joining a line),
    /// so that a refused request changes nothing.
    fn cycle_before(&self, _ctx: &Context) -> Option<String> {
        None
    }
    /// Before the attempt: the waiters its locks could take go first.
    fn serve_first(&self, _ctx: &Context, _store: &mut RedisStore) {}
    /// The attempt, the lock's waiters served after it.
    fn attempt(
        &self,
        ctx: &Context,
        store: &mut RedisStore,
        latch: Option<&GrantLatch>,
    ) -> Result<Self::Outcome, RedisError>;
    /// True when the outcome is a grant.
    fn granted(outcome: &Self::Outcome) -> bool;
    /// True when, refused, the client waits with `BLOCK` (every refusal,
    /// unless the way of acquiring says otherwise).
    fn may_wait(_outcome: &Self::Outcome) -> bool {
        true
    }
    /// After a grant with `SESSION`, before [`Acquisition::took`]: what it
    /// took bound to the connection `client`, at the levels it took them.
    fn bind(&self, _ctx: &Context, _store: &mut RedisStore, _client: ClientId) {}
    /// After a grant: counted.
    fn took(&self, ctx: &Context, store: &mut RedisStore, outcome: &Self::Outcome);
    /// The `DEADLOCK` error of a wait that would close a cycle, asked when
    /// the client is about to park.
    fn cycle(&self, _ctx: &Context, _store: &mut RedisStore) -> Option<String> {
        None
    }
    /// Parks the calling client until it is served or its wait ends.
    fn park(&self, ctx: &Context, store: &mut RedisStore, parking: Parking);
    /// The reply of an outcome answered at once (a refusal is counted here).
    fn reply(&self, outcome: Self::Outcome) -> RedisValue;
}

/// What the driver asks of every way of acquiring alike.
pub struct Terms<'s> {
    /// The owner that takes the holds.
    pub owner: &'s [u8],
    /// `SESSION`: bind what is granted to the calling connection.
    pub session: bool,
    /// `BLOCK ms`: how long the client may wait on the server (0: no limit).
    pub block: Option<i64>,
    /// `REQUEST id ttl` and the lock its latch is kept on.
    pub request: Option<(&'s LockNames<'s>, Request<'s>)>,
    /// `HELD n`: the owner's holds of the kind before the call.
    pub held: Option<i64>,
}

/// The one acquisition driver of every command that takes holds, whatever
/// the lock's kind: latch, serve, attempt, then grant, or check for a
/// cycle and park. `lent`: the command's arguments whose strings the store
/// reuses.
pub fn drive<A: Acquisition>(ctx: &Context, lent: &[ArgString], a: &A) -> RedisResult {
    let terms = a.terms();
    let session = session_client(ctx, terms.session)?;
    let mut store = RedisStore::for_write(ctx, lent);
    // `REQUEST`: a retry replies what the first call did and changes
    // nothing; without it no key is looked up.
    let latch = match terms.request {
        None => None,
        Some((names, request)) => match hold::grant_latch(&mut store, names, Some(request)) {
            Ok(Granting::Replay(token)) => return Ok(a.replay(token)),
            Ok(Granting::Run(latch)) => latch,
            Err(e) => return Err(lock_error(e)),
        },
    };
    // `HELD`: a resend its owner's count shows granted replies so, changing
    // nothing; the normal path reads nothing more.
    if let Some(held) = terms.held {
        if let Some(reply) = a.granted_before(&mut store, held).map_err(lock_error)? {
            return Ok(reply);
        }
    }
    if terms.block.is_some() {
        if let Some(cycle) = a.cycle_before(ctx) {
            return Err(RedisError::String(cycle));
        }
    }
    a.serve_first(ctx, &mut store);
    let outcome = a.attempt(ctx, &mut store, latch.as_ref())?;
    if A::granted(&outcome) {
        if let Some(client) = session {
            a.bind(ctx, &mut store, client);
        }
        a.took(ctx, &mut store, &outcome);
        if session.is_some() {
            // Later writes to the locks must reach the session's counts.
            events::follow_writes(ctx);
        }
        // Those waiting for its locks now wait for its owner.
        waiting::took_hold(ctx, terms.owner);
    } else if let Some(timeout) = terms.block.filter(|_| A::may_wait(&outcome)) {
        if waiting::can_block(ctx) {
            // A wait that would close a cycle fails now, nothing changed.
            if let Some(cycle) = a.cycle(ctx, &mut store) {
                return Err(RedisError::String(cycle));
            }
            a.park(
                ctx,
                &mut store,
                Parking {
                    timeout,
                    session,
                    latch,
                },
            );
            return Ok(RedisValue::NoReply);
        }
    }
    Ok(a.reply(outcome))
}

/// An acquisition on the one lock of the call `a`, taken `way`: a single
/// hold of a plain or read-write lock (a [`Hold`]: `LOCK.ACQUIRE`,
/// `RWLOCK.READ`, `RWLOCK.WRITE`) or a place in a fair lock's line
/// (`FairOptions`: `FAIRLOCK.ACQUIRE`).
pub struct OneLock<'a, 'b, W> {
    pub a: &'b Acquire<'a>,
    pub way: W,
}

impl<W> OneLock<'_, '_, W> {
    /// The call's terms, whichever way it is taken.
    pub fn terms(&self) -> Terms<'_> {
        let a = self.a;
        Terms {
            owner: a.lock.owner,
            session: a.session,
            block: a.block,
            request: a.request.map(|r| (&a.lock.names, r)),
            held: a.held,
        }
    }
}

impl Acquisition for OneLock<'_, '_, Hold> {
    type Outcome = Attempt;

    fn terms(&self) -> Terms<'_> {
        OneLock::terms(self)
    }

    fn replay(&self, token: i64) -> RedisValue {
        let token = Some(token).filter(|_| reply::fenced(self.way));
        let granted = Granted {
            reentry: true,
            token,
        };
        reply::attempt(Attempt::Granted(granted), self.way)
    }

    fn granted_before(
        &self,
        store: &mut RedisStore,
        held: i64,
    ) -> Result<Option<RedisValue>, LockError> {
        // A latch's wait or a permit semaphore's takes no `HELD`.
        let Ok(kind) = Kind::try_from(self.way) else {
            return Ok(None);
        };
        let fenced = reply::fenced(self.way);
        let (names, owner) = (&self.a.lock.names, self.a.lock.owner);
        let token = kinds::granted_before(store, names, kind, owner, held, fenced)?;
        Ok(token.map(|token| self.replay(token)))
    }

    fn serve_first(&self, ctx: &Context, store: &mut RedisStore) {
        waiting::serve_first(ctx, store, &self.a.lock.names);
    }

    fn attempt(
        &self,
        ctx: &Context,
        store: &mut RedisStore,
        latch: Option<&GrantLatch>,
    ) -> Result<Attempt, RedisError> {
        let (names, owner, lease) = (&self.a.lock.names, self.a.lock.owner, self.a.lock.lease);
        // Those left waiting are served again after an attempt that wrote,
        // which may have moved the lock's deadline; in fair mode it queues
        // behind them.
        waiting::serve_after_attempt(ctx, store, names, |store| {
            // Permits are nobody's: no acquisition of them goes past the
            // waiters, whatever `rwlock.fairness` says (contract §15.3).
            let permits = matches!(self.way, Hold::Semaphore { .. } | Hold::Permit { .. });
            // A latch's waiter takes nothing, so it never goes ahead of anyone.
            let queued = self.way != Hold::Latch
                && (permits || config::fair())
                && queues::has_waiters(ctx, names)
                && (permits || !queue::may_overtake(store, names, owner)?);
            if queued {
                Ok(match self.way {
                    Hold::Permit { .. } => permit::refusal(store, names),
                    _ => Attempt::Refused {
                        pttl: store.pttl(names.hash()),
                    },
                })
            } else {
                queue::attempt_latched(store, names, owner, self.way, lease, latch)
            }
        })
        .map_err(lock_error)
    }

    fn granted(outcome: &Attempt) -> bool {
        matches!(outcome, Attempt::Granted(_))
    }

    fn bind(&self, ctx: &Context, store: &mut RedisStore, client: ClientId) {
        let l = &self.a.lock;
        sessions::bind(ctx, store, client, &l.names, self.way, l.owner, l.lease);
    }

    fn took(&self, _: &Context, _: &mut RedisStore, outcome: &Attempt) {
        if let Attempt::Granted(granted) = outcome {
            metrics::acquired(self.way, *granted);
        }
    }

    fn cycle(&self, ctx: &Context, store: &mut RedisStore) -> Option<String> {
        let wants = [(&self.a.lock.names, self.way)];
        waiting::deadlock(ctx, store, self.a.lock.owner, &wants)
    }

    fn park(&self, ctx: &Context, store: &mut RedisStore, parking: Parking) {
        let wait = waiting::Wait {
            owner: self.a.lock.owner,
            hold: self.way,
            lease: self.a.lock.lease,
            parking,
        };
        waiting::park(ctx, store, &self.a.lock.names, wait);
        // From now on other clients' writes may free the lock.
        events::follow_writes(ctx);
    }

    fn reply(&self, outcome: Attempt) -> RedisValue {
        if let Attempt::Refused { .. } = outcome {
            metrics::bump(Counter::Refused);
        }
        reply::attempt(outcome, self.way)
    }
}

/// Takes `hold` as the parsed call `a` asks; `args` are the command's
/// arguments, whose lock and owner strings the store reuses. With
/// `SESSION` the hold is bound to the calling connection, now or when the
/// parked client is served.
pub fn acquire(ctx: &Context, args: &[ArgString], a: &Acquire, hold: Hold) -> RedisResult {
    drive(ctx, lock_and_owner(args), &OneLock { a, way: hold })
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

/// What `read` (a machine's `info`) finds in the lock a `*.INFO lock`
/// command names, with the lock's names.
pub fn read_info<'a, T>(
    ctx: &Context,
    args: &'a [ArgString],
    read: impl FnOnce(&mut RedisStore, &LockNames) -> Result<T, LockError>,
) -> Result<(LockNames<'a>, T), RedisError> {
    let names = args::lock_only(args)?;
    let info = read(&mut RedisStore::new(ctx), &names).map_err(lock_error)?;
    Ok((names, info))
}

/// `LOCK.UNLOCK` and `FAIRLOCK.UNLOCK lock owner [LEASE ms] [REQUEST id
/// ttl] [HELD n]`: a release its owner's count shows done before replies
/// 0, changing nothing (docs/design.md §14.8); else `unlock` (the plain or the fair machine's) releases one hold of
/// the hash the two kinds share, re-arming it to `LEASE` (default
/// `rwlock.default-lease`) while held, then its waiters of both kinds are
/// served. Counted here; each kind words its reply.
pub fn unlock_hash(
    ctx: &Context,
    args: &[ArgString],
    unlock: impl FnOnce(
        &mut RedisStore,
        &LockNames,
        &[u8],
        i64,
        Option<Request>,
    ) -> Result<Unlocked, LockError>,
) -> Result<Unlocked, RedisError> {
    let a = args::lock_unlock(args)?;
    let lease = a.lease.unwrap_or_else(config::default_lease);
    let outcome = change(ctx, lock_and_owner(args), &a.names, |store| {
        if let Some(held) = a.held {
            if kinds::released_before(store, &a.names, Kind::Lock, a.owner, held)? {
                return Ok(Unlocked::Replayed(0));
            }
        }
        unlock(store, &a.names, a.owner, lease, a.request)
    })?;
    metrics::unlocked(outcome);
    // A fair lock's hash is the plain lock's: its parked head may go in.
    fair_waiting::serve(ctx, &a.names);
    Ok(outcome)
}

/// `LOCK.FORCEUNLOCK lock` and `FAIRLOCK.FORCEUNLOCK lock`: `unlock` (the
/// plain or the fair machine's) deletes the hash the two kinds share,
/// whoever holds it, then its waiters of both kinds are served. Replies 1
/// if it deleted it, else 0.
pub fn force_unlock_hash(
    ctx: &Context,
    args: &[ArgString],
    unlock: impl FnOnce(&mut RedisStore, &LockNames) -> Result<bool, LockError>,
) -> RedisResult {
    let names = args::lock_only(args)?;
    let deleted = change(ctx, lock_and_owner(args), &names, |store| {
        unlock(store, &names)
    })?;
    fair_waiting::serve(ctx, &names);
    Ok(forced(deleted))
}

/// An unlock's reply: nil, 0 or 1.
pub fn released(outcome: Unlocked) -> RedisValue {
    metrics::unlocked(outcome);
    reply::release(outcome.reply())
}

/// `LOCK.RENEW lock owner lease` and `RWLOCK.RENEW`: `renew` (the kind's
/// machine) run as a [`change`]. Replies 1 when the owner held the lock,
/// else 0.
pub fn renew_with(
    ctx: &Context,
    args: &[ArgString],
    renew: impl FnOnce(&mut RedisStore, &LockNames, &[u8], i64) -> Result<bool, LockError>,
) -> RedisResult {
    let a = args::owner_lease(args)?;
    let held = change(ctx, lock_and_owner(args), &a.names, |store| {
        renew(store, &a.names, a.owner, a.lease)
    })?;
    Ok(renewed(held))
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

//! The one blocked-client lifecycle of every waiter, whatever it waits for
//! (a hold, several, a place in a fair lock's line): parked with Redis's
//! four callbacks written once here, answered once with an [`Outcome`],
//! and each ended wait unblocked exactly once. What differs by kind of
//! waiter (its registry, what `CLIENT UNBLOCK` answers it, what its leaving
//! sets off) is a [`Waiters`] implementation.
//!
//! The module's waits have no Redis timeout (see `clients`): Redis calls
//! the timeout callback only for `CLIENT UNBLOCK`, and the wait then ends as
//! its own timeout would.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisValue};

use crate::engine::hold::{Attempt, GrantLatch};
use crate::engine::queue::Hold;
use crate::metrics::{self, Counter};
use crate::reply;
use crate::server::{self, Blocked, RawString};
use crate::sessions::registry::ClientId;

/// Never expected: Redis replied for a parked client we did not unblock.
const ERR_NO_OUTCOME: &str = "ERR rwlock: the wait ended without an outcome";

/// A parked client's handle, as the registries key it.
pub type Handle = usize;

/// The blocked client behind a handle.
fn blocked(handle: Handle) -> Blocked {
    handle as Blocked
}

/// What the acquisition driver decides for every client it parks, whatever
/// it waits for.
pub struct Parking {
    /// How long it waits at most; 0 without limit.
    pub timeout: i64,
    /// With `SESSION`, the connection its holds are bound to once served.
    pub session: Option<ClientId>,
    /// `REQUEST id ttl`: the latch its grant records when it is served.
    pub latch: Option<GrantLatch>,
}

/// What a parked client is answered: what its command would have replied
/// at once.
pub enum Outcome {
    /// A single hold's attempt, as `LOCK.ACQUIRE`, `RWLOCK.READ` and
    /// `RWLOCK.WRITE` reply it.
    Attempt(Attempt, Hold),
    /// Nil or an integer: a multi-hold's (nil when it took every hold, else
    /// the largest PTTL) and a fair waiter's (nil when served, else the
    /// lock's TTL, as `fair_lock.lua` replies a queued waiter).
    NilOr(Option<i64>),
    /// An error: the node stopped being a master, the machine refused, or
    /// the waiter is a deadlock's victim (its `DEADLOCK` error).
    Error(String),
}

/// The outcome as a parked client's private data, which Redis hands back
/// to [`reply_callback`] and then to [`free_outcome`].
fn boxed(outcome: Outcome) -> *mut c_void {
    Box::into_raw(Box::new(outcome)) as *mut c_void
}

/// Ends a parked client's wait with `outcome`. The caller took it out of
/// its registry, so it is parked and not yet unblocked: once, here.
pub fn answer_later(handle: Handle, outcome: Outcome) {
    server::unblock(blocked(handle), boxed(outcome));
}

/// Why a waiter left without being served or timing out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// `CLIENT UNBLOCK`: answered as its timeout would.
    Unblocked,
    /// Its connection closed.
    Disconnected,
}

/// One kind of waiter's registry, as the callbacks need it.
pub trait Waiters {
    /// What the registry held for a parked client.
    type Parked;
    /// Takes the client out of the registry; its wait ends with the caller.
    /// None: not parked here (any more).
    fn take(handle: Handle) -> Option<Self::Parked>;
    /// What `CLIENT UNBLOCK` answers it, in its own context (the database it
    /// waited in): what its timeout would.
    fn refusal(ctx: &Context, parked: &Self::Parked) -> Outcome;
    /// After it left: those behind it may be first now.
    fn left(ctx: &Context, parked: Self::Parked, why: Left);
}

/// Parks the calling client with the callbacks of `W`, and no Redis timeout.
pub fn block<W: Waiters>(ctx: &Context) -> Blocked {
    server::block_client(
        ctx,
        reply_callback,
        unblock_callback::<W>,
        free_outcome,
        disconnect_callback::<W>,
    )
}

/// `CLIENT UNBLOCK` of a parked client (Redis's timeout callback, which only
/// that command calls). A client the module served earlier in the same
/// event-loop turn is not handed here (Redis skips the callback for a
/// handle already unblocked): Redis 7.2+ and Valkey then deliver the served
/// reply, Redis 7.0 drops it (docs/clients.md says how clients cover that).
unsafe extern "C" fn unblock_callback<W: Waiters>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut RawString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let bc = server::blocked_handle(ctx);
    let Some(parked) = W::take(bc as Handle) else {
        return context.reply_error_string(ERR_NO_OUTCOME) as c_int;
    };
    let refused = W::refusal(&context, &parked);
    metrics::bump(Counter::WaitsAborted);
    let status = answer(&context, Some(&refused));
    // Registered until now, so parked and not yet unblocked: once, here.
    // Redis frees a handle that is not blocked on keys only then; without
    // data it replies nothing more.
    server::unblock(bc, ptr::null_mut());
    W::left(&context, parked, Left::Unblocked);
    status
}

unsafe extern "C" fn reply_callback(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut RawString,
    _argc: c_int,
) -> c_int {
    let outcome = server::blocked_data(ctx) as *const Outcome;
    // SAFETY: non-null private data is a boxed Outcome (from `boxed`) that
    // lives until free_outcome.
    answer(&Context::new(ctx), unsafe { outcome.as_ref() })
}

/// Replies a parked client's outcome.
fn answer(context: &Context, outcome: Option<&Outcome>) -> c_int {
    let status = match outcome {
        Some(Outcome::Attempt(attempt, hold)) => context.reply(Ok(reply::attempt(*attempt, *hold))),
        Some(Outcome::NilOr(n)) => {
            context.reply(Ok(n.map_or(RedisValue::Null, RedisValue::Integer)))
        }
        Some(Outcome::Error(message)) => context.reply_error_string(message),
        None => context.reply_error_string(ERR_NO_OUTCOME),
    };
    status as c_int
}

unsafe extern "C" fn free_outcome(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: data came from `boxed`, and Redis frees it once.
        drop(unsafe { Box::from_raw(data as *mut Outcome) });
    }
}

/// A parked client went away. Redis frees the handle of a client that was
/// not blocked on keys only once the module unblocks it.
unsafe extern "C" fn disconnect_callback<W: Waiters>(ctx: *mut raw::RedisModuleCtx, bc: Blocked) {
    let Some(parked) = W::take(bc as Handle) else {
        return;
    };
    // Still registered, so unblocked once, here; without data Redis replies
    // nothing more and frees it.
    server::unblock(bc, ptr::null_mut());
    metrics::bump(Counter::WaitsAborted);
    W::left(&Context::new(ctx), parked, Left::Disconnected);
}

//! Server-side waiting (SPEC section 4): parked clients, one queue per lock
//! that has waiters, and every way a lock can end waking them. Redis's
//! `BlockClientOnKeys` never wakes for a deleted key, so the queues live here
//! and are served by the releasing command itself, by keyspace events (a
//! Redisson Lua unlock, DEL, expiry), by FLUSHDB/FLUSHALL and by a timer at
//! the lock's deadline.
//!
//! A wait's own timeout is the module's too, not Redis's blocking timeout:
//! Redis 7.0 may time out a client in the same event-loop turn in which the
//! module handed it the lock, and then drops both replies, so the client
//! hangs while holding a lock it never hears about. With every wait ended by
//! `UnblockClient` alone, each parked client gets exactly one reply.
//!
//! Wait timeouts and lock deadlines are entries of one agenda served by one
//! timer, set for the earliest: parking and serving a client, which happen on
//! every handoff, then mostly create and stop no timer (each costs some
//! 1,500 to 3,000 server instructions, on the handoff's path for a stop).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::c_void;
use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{raw, Context, ContextFlags, RedisValue};

use crate::core::error::ERR_REPLICA;

/// Never expected: Redis replied for a parked client we did not unblock.
const ERR_NO_OUTCOME: &str = "ERR rwlock: the wait ended without an outcome";
use crate::core::lock::Mode;
use crate::core::names::LockNames;
use crate::core::queue::{self, Served, Ticket};
use crate::core::store::Store;
use crate::keyspace::{server_ms, RedisStore};
use crate::leases;
use crate::metrics;
use crate::subscription;

/// A lock is its database and its name.
type LockId = (i32, Vec<u8>);

/// A parked client's handle, valid until Redis calls back for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Blocked(*mut raw::RedisModuleBlockedClient);

/// What the reply callback answers a parked client.
enum Outcome {
    Acquired,
    Failed(&'static str),
    /// The wait's timeout passed: the lock's PTTL then.
    TimedOut(i64),
}

/// An agenda entry's key: when it falls due (Unix milliseconds, Redis's
/// clock) and a number that tells entries of the same millisecond apart.
type Slot = (i64, u64);

/// What falls due on the agenda.
enum Due {
    /// A parked client's wait ends (its handle).
    Timeout(usize),
    /// A lock with waiters reaches its TTL: Redis drops it then.
    Deadline(LockId),
}

/// A parked client: the lock it waits for and its timeout, if any.
struct Waiter {
    lock: LockId,
    timeout: Option<Slot>,
}

/// Data of the agenda's timer.
struct Agenda;

struct Queue {
    tickets: VecDeque<Ticket<Blocked>>,
    deadline: Option<Slot>,
    /// A look at the lock is scheduled (its own timer, not the agenda's).
    soon: bool,
}

#[derive(Default)]
struct Registry {
    queues: HashMap<LockId, Queue>,
    /// Every parked client, by handle.
    waiting: HashMap<usize, Waiter>,
    /// Wait timeouts and deadlines of locks with waiters, earliest first.
    agenda: BTreeMap<Slot, Due>,
    /// Numbers agenda entries.
    entries: u64,
    /// The agenda's timer and when it fires: never after the first entry,
    /// maybe before (that entry was dropped since, its client served).
    agenda_timer: Option<(raw::RedisModuleTimerID, i64)>,
    /// The lock a command is changing and then serving, whose own keyspace
    /// events need no second look.
    settling: Option<LockId>,
}

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> R {
    REGISTRY.with(|r| f(&mut r.borrow_mut()))
}

/// The common case, checked before any allocation on the hot path.
fn nobody_waits() -> bool {
    with(|r| r.queues.is_empty())
}

fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: a live context.
    unsafe { raw::RedisModule_GetSelectedDb.expect("GetSelectedDb")(ctx.get_raw()) }
}

fn lock_id(ctx: &Context, names: &LockNames) -> LockId {
    (selected_db(ctx), names.hash().to_vec())
}

/// BLOCK is refused inside MULTI, scripts and other contexts that cannot wait:
/// there the command makes its one attempt and replies at once.
pub fn can_block(ctx: &Context) -> bool {
    // SAFETY: a live context.
    let flags =
        unsafe { raw::RedisModule_GetContextFlags.expect("GetContextFlags")(ctx.get_raw()) };
    flags & raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING as c_int == 0
}

/// True when other clients wait for this lock.
pub fn has_waiters(ctx: &Context, names: &LockNames) -> bool {
    if nobody_waits() {
        return false;
    }
    let id = lock_id(ctx, names);
    with(|r| r.queues.get(&id).is_some_and(|q| !q.tickets.is_empty()))
}

/// Parks the calling client until it holds the lock or `timeout_ms` passes
/// (0: no limit). The caller replies nothing now.
pub fn park(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    owner: &[u8],
    mode: Mode,
    lease: i64,
    timeout_ms: i64,
) {
    // Before the client waits: a foreign write from now on may free the lock.
    subscription::ensure(ctx);
    // SAFETY: a command context that may block (checked by the caller); the
    // callbacks match the signatures BlockClient expects. No Redis timeout:
    // ours is a timer (see the module's comment).
    let bc = unsafe {
        let bc = raw::RedisModule_BlockClient.expect("BlockClient")(
            ctx.get_raw(),
            Some(reply_callback),
            None,
            Some(free_outcome),
            0,
        );
        raw::RedisModule_SetDisconnectCallback.expect("SetDisconnectCallback")(
            bc,
            Some(disconnect_callback),
        );
        bc
    };
    let id = lock_id(ctx, names);
    // A millisecond more: the clock read is the command's, made earlier, and
    // a wait never ends before its time.
    let ends = (timeout_ms > 0).then(|| store.now_ms().saturating_add(timeout_ms + 1));
    with(|r| {
        let timeout = ends.map(|at| r.appoint(at, Due::Timeout(bc as usize)));
        r.waiting.insert(
            bc as usize,
            Waiter {
                lock: id.clone(),
                timeout,
            },
        );
        r.queues
            .entry(id.clone())
            .or_insert_with(|| Queue {
                tickets: VecDeque::new(),
                deadline: None,
                soon: false,
            })
            .tickets
            .push_back(Ticket {
                owner: owner.to_vec(),
                mode,
                lease,
                token: Blocked(bc),
            });
    });
    metrics::wait_started();
    rearm(ctx, store, names, &id);
}

/// Hands the lock to the waiters that can take it now, in arrival order.
/// Every command that may free a lock calls this before it replies, so the
/// handoff is part of the same atomic, replicated unit.
pub fn serve(ctx: &Context, store: &mut RedisStore, names: &LockNames) {
    serve_after(ctx, store, names, |_| ());
}

/// Makes `change` to the lock, then serves its waiters. The keyspace events
/// that both raise on the lock's hash are ignored: this serve looks at the
/// lock after them anyway, and each would cost a timer and another look
/// (together some 7,700 server instructions per handoff, 40 % of its serve).
pub fn serve_after<T>(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    change: impl FnOnce(&mut RedisStore) -> T,
) -> T {
    if nobody_waits() {
        return change(store);
    }
    let id = lock_id(ctx, names);
    let outer = with(|r| r.settling.replace(id.clone()));
    let result = change(store);
    serve_now(ctx, store, names, id);
    with(|r| r.settling = outer);
    result
}

fn serve_now(ctx: &Context, store: &mut RedisStore, names: &LockNames, id: LockId) {
    // The store raises keyspace events, which re-enter this module: the
    // registry must not stay borrowed while the lock machine runs.
    let Some(mut tickets) = with(|r| {
        r.queues
            .get_mut(&id)
            .map(|q| std::mem::take(&mut q.tickets))
    }) else {
        return;
    };
    let served = queue::admit(store, names, &mut tickets);
    with(|r| {
        if let Some(q) = r.queues.get_mut(&id) {
            tickets.append(&mut q.tickets);
            q.tickets = tickets;
        }
        for waiter in &served {
            r.forget(waiter.ticket.token.0 as usize);
        }
    });
    for Served { ticket, outcome } in served {
        let bc = ticket.token.0;
        let outcome = match outcome {
            Ok(reentry) => {
                metrics::acquired(ticket.mode, reentry);
                Outcome::Acquired
            }
            Err(e) => Outcome::Failed(e.message()),
        };
        metrics::wait_served();
        // SAFETY: the handle is parked (it was in the queue) and is unblocked
        // once; Redis hands the box back to free_outcome.
        unsafe {
            raw::RedisModule_UnblockClient.expect("UnblockClient")(
                bc,
                Box::into_raw(Box::new(outcome)) as *mut c_void,
            );
        }
    }
    rearm(ctx, store, names, &id);
}

/// Drops an empty queue, or keeps the lock's deadline on the agenda so an
/// expiry wakes the waiters without relying on Redis's lazy expiry; then
/// arms the agenda's timer for what `park` or this put on it.
fn rearm(ctx: &Context, store: &mut RedisStore, names: &LockNames, id: &LockId) {
    let pttl = store.pttl(names.hash());
    let now = store.now_ms();
    with(|r| {
        let Some(q) = r.queues.get_mut(id) else {
            return;
        };
        if q.tickets.is_empty() {
            if let Some(slot) = r.queues.remove(id).and_then(|q| q.deadline) {
                r.agenda.remove(&slot);
            }
            return;
        }
        // Redis drops a key once the clock is past its deadline.
        let wanted = (pttl > 0).then_some(now + pttl + 1);
        if q.deadline.map(|(at, _)| at) == wanted {
            return;
        }
        if let Some(slot) = q.deadline.take() {
            r.agenda.remove(&slot);
        }
        if let Some(at) = wanted {
            let slot = r.appoint(at, Due::Deadline(id.clone()));
            if let Some(q) = r.queues.get_mut(id) {
                q.deadline = Some(slot);
            }
        }
    });
    arm_agenda(ctx);
}

/// True when this scheduled a new look.
fn schedule_soon(ctx: &Context, id: LockId) -> bool {
    schedule_in(ctx, id, Duration::ZERO)
}

/// A look at the lock's waiters after an outside change (a keyspace event,
/// a flush), counted in `INFO` unless one was due already.
fn recheck(ctx: &Context, id: LockId) {
    if schedule_soon(ctx, id) {
        metrics::wait_recheck();
    }
}

/// Looks at the lock's waiters again after `delay`, unless a look is due;
/// true when this scheduled a new look.
fn schedule_in(ctx: &Context, id: LockId, delay: Duration) -> bool {
    let schedule = with(|r| match r.queues.get_mut(&id) {
        Some(q) if !q.soon => {
            q.soon = true;
            true
        }
        _ => false,
    });
    if schedule {
        ctx.create_timer(delay, on_soon, id);
    }
    schedule
}

/// How often a lock's waiters are looked at again while writes are paused.
const PAUSED_RETRY: Duration = Duration::from_millis(10);

/// True while clients are paused (CLIENT PAUSE, a manual failover). Redis
/// then lets no write through and holds back expiry: a key past its
/// deadline reads as missing but is still there, and a timer writing it
/// anew trips an assertion that takes the server down (Redis 7.0).
fn writes_paused() -> bool {
    // SAFETY: a plain query of the server's state, from the main thread.
    unsafe { raw::RedisModule_AvoidReplicaTraffic.expect("AvoidReplicaTraffic")() != 0 }
}

fn on_soon(ctx: &Context, id: LockId) {
    look_after(ctx, id, |q| q.soon = false);
}

/// Notes in the lock's queue what has fired, then serves its waiters; not
/// when the queue is gone.
fn look_after(ctx: &Context, id: LockId, fired: impl FnOnce(&mut Queue)) {
    if with(|r| r.queues.get_mut(&id).map(fired).is_some()) {
        look(ctx, id);
    }
}

/// Serves the lock's waiters from a timer.
fn look(ctx: &Context, id: LockId) {
    // Timers also run on replicas, which must never write.
    if !ctx.get_flags().contains(ContextFlags::MASTER) {
        return;
    }
    if writes_paused() {
        schedule_in(ctx, id, PAUSED_RETRY);
        return;
    }
    let Ok(names) = LockNames::new(&id.1) else {
        return;
    };
    // SAFETY: a timer's context owns a temporary client whose db we may select.
    unsafe { raw::RedisModule_SelectDb.expect("SelectDb")(ctx.get_raw(), id.0) };
    let mut store = RedisStore::new(ctx);
    serve(ctx, &mut store, &names);
}

/// Keyspace events on a lock with waiters: a Lua unlock, DEL, UNLINK,
/// expiry, eviction, a TTL change. Writing here is unsafe, so the work is
/// deferred to a timer.
pub fn on_keyspace_event(ctx: &Context, key: &[u8]) {
    if nobody_waits() {
        return;
    }
    let db = selected_db(ctx);
    let settling = with(|r| {
        r.settling
            .as_ref()
            .is_some_and(|(d, k)| *d == db && k.as_slice() == key)
    });
    if !settling {
        recheck(ctx, (db, key.to_vec()));
    }
}

impl Registry {
    /// Puts `due` on the agenda at `at`; the caller arms the timer.
    fn appoint(&mut self, at: i64, due: Due) -> Slot {
        self.entries += 1;
        let slot = (at, self.entries);
        self.agenda.insert(slot, due);
        slot
    }

    /// Drops a parked client's registration and timeout (not its ticket).
    fn forget(&mut self, handle: usize) -> Option<Waiter> {
        let waiter = self.waiting.remove(&handle)?;
        if let Some(slot) = waiter.timeout {
            self.agenda.remove(&slot);
        }
        Some(waiter)
    }
}

/// Makes the agenda's timer fire by the first entry. A timer set earlier,
/// for an entry dropped since, is kept: it finds nothing due and arms the
/// next.
fn arm_agenda(ctx: &Context) {
    let Some((stale, at)) = with(|r| {
        let (&(first, _), _) = r.agenda.first_key_value()?;
        match r.agenda_timer {
            Some((_, at)) if at <= first => None,
            timer => Some((timer.map(|(t, _)| t), first)),
        }
    }) else {
        return;
    };
    if let Some(timer) = stale {
        // It may have fired already; then there is nothing to stop.
        let _ = ctx.stop_timer::<Agenda>(timer);
    }
    let now = server_ms();
    let delay = (at - now).max(0);
    let timer = ctx.create_timer(Duration::from_millis(delay as u64), on_agenda, Agenda);
    with(|r| r.agenda_timer = Some((timer, now + delay)));
}

/// Serves what has fallen due, then arms the timer for the next entry.
fn on_agenda(ctx: &Context, _: Agenda) {
    let now = server_ms();
    let due = with(|r| {
        r.agenda_timer = None;
        let later = r.agenda.split_off(&(now + 1, 0));
        std::mem::replace(&mut r.agenda, later)
    });
    for due in due.into_values() {
        match due {
            Due::Timeout(handle) => time_out(ctx, handle),
            Due::Deadline(id) => look_after(ctx, id, |q| q.deadline = None),
        }
    }
    arm_agenda(ctx);
}

/// Removes a parked client from the registry and its queue; returns its
/// waiter, or None when it was already served or released.
fn unregister(handle: usize) -> Option<Waiter> {
    with(|r| {
        let waiter = r.forget(handle)?;
        if let Some(q) = r.queues.get_mut(&waiter.lock) {
            q.tickets.retain(|t| t.token.0 as usize != handle);
        }
        Some(waiter)
    })
}

/// The wait's timeout passed: the client gets the lock's PTTL now, as an
/// immediate refusal would, and the waiters behind it may now be first.
fn time_out(ctx: &Context, handle: usize) {
    let Some(Waiter { lock: id, .. }) = unregister(handle) else {
        return;
    };
    // SAFETY: a timer's context owns a temporary client whose db we may select.
    unsafe { raw::RedisModule_SelectDb.expect("SelectDb")(ctx.get_raw(), id.0) };
    let pttl = RedisStore::new(ctx).pttl(&id.1);
    metrics::wait_timed_out();
    // SAFETY: the handle was still registered, so it is parked and is
    // unblocked here, once; Redis hands the box back to free_outcome.
    unsafe {
        raw::RedisModule_UnblockClient.expect("UnblockClient")(
            handle as *mut raw::RedisModuleBlockedClient,
            Box::into_raw(Box::new(Outcome::TimedOut(pttl))) as *mut c_void,
        );
    }
    schedule_soon(ctx, id);
}

unsafe extern "C" fn reply_callback(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    // SAFETY: Redis passes the private data given to UnblockClient: a boxed Outcome.
    let outcome = unsafe {
        raw::RedisModule_GetBlockedClientPrivateData.expect("GetBlockedClientPrivateData")(ctx)
            as *const Outcome
    };
    let context = Context::new(ctx);
    // SAFETY: non-null private data is an Outcome that lives until free_outcome.
    let status = match unsafe { outcome.as_ref() } {
        Some(Outcome::Acquired) => context.reply(Ok(RedisValue::Null)),
        Some(Outcome::Failed(message)) => context.reply_error_string(message),
        Some(Outcome::TimedOut(pttl)) => context.reply(Ok(RedisValue::Integer(*pttl))),
        None => context.reply_error_string(ERR_NO_OUTCOME),
    };
    status as c_int
}

unsafe extern "C" fn free_outcome(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: data came from Box::into_raw in serve, on_wait_timeout or abort_all.
        drop(unsafe { Box::from_raw(data as *mut Outcome) });
    }
}

/// A parked client went away. Redis frees the handle of a client that was
/// not blocked on keys only once the module unblocks it.
unsafe extern "C" fn disconnect_callback(
    ctx: *mut raw::RedisModuleCtx,
    bc: *mut raw::RedisModuleBlockedClient,
) {
    let Some(waiter) = unregister(bc as usize) else {
        return;
    };
    let context = Context::new(ctx);
    // SAFETY: the handle was still registered, so it is unblocked here, once;
    // without private data Redis replies nothing more and frees it.
    unsafe { raw::RedisModule_UnblockClient.expect("UnblockClient")(bc, std::ptr::null_mut()) };
    metrics::wait_aborted();
    schedule_soon(&context, waiter.lock);
}

/// Fails every waiter at once: the node stopped being a master.
fn abort_all(ctx: &Context) {
    let registry = with(std::mem::take);
    if let Some((timer, _)) = registry.agenda_timer {
        let _ = ctx.stop_timer::<Agenda>(timer);
    }
    for (_, q) in registry.queues {
        for ticket in q.tickets {
            metrics::wait_aborted();
            // SAFETY: every ticket's handle is parked and unblocked once.
            unsafe {
                raw::RedisModule_UnblockClient.expect("UnblockClient")(
                    ticket.token.0,
                    Box::into_raw(Box::new(Outcome::Failed(ERR_REPLICA))) as *mut c_void,
                );
            }
        }
    }
}

unsafe extern "C" fn on_role_changed(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    // The data may be replaced by the new master's: no index stays trusted.
    leases::forget_all(None);
    if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
        abort_all(&Context::new(ctx));
    }
}

/// FLUSHDB and FLUSHALL raise no per-key event: look at every queue of the
/// flushed database(s).
unsafe extern "C" fn on_flush(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        return;
    }
    // SAFETY: for FlushDB events Redis passes a RedisModuleFlushInfo.
    let db = unsafe { (*(data as *const raw::RedisModuleFlushInfo)).dbnum };
    leases::forget_all((db != -1).then_some(db));
    let context = Context::new(ctx);
    let ids: Vec<LockId> = with(|r| {
        r.queues
            .keys()
            .filter(|(d, _)| db == -1 || *d == db)
            .cloned()
            .collect()
    });
    for id in ids {
        recheck(&context, id);
    }
}

/// Subscribes to the server events waiting depends on.
pub fn subscribe(ctx: &Context) -> Result<(), &'static str> {
    // The header's event constants are statics of its own, not exported
    // symbols: build them as it does (data version 1).
    let role = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        dataver: 1,
    };
    let flush = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_FLUSHDB,
        dataver: 1,
    };
    let subscribed = raw::subscribe_to_server_event(ctx.get_raw(), role, Some(on_role_changed))
        == raw::Status::Ok
        && raw::subscribe_to_server_event(ctx.get_raw(), flush, Some(on_flush)) == raw::Status::Ok;
    subscribed
        .then_some(())
        .ok_or("cannot subscribe to server events")
}

/// Parked clients, and locks they wait for, for `INFO rwlock`. A queue
/// emptied by a timeout or a disconnect lingers until its timer drops it:
/// it has no waiter and is not counted.
pub fn counts() -> (usize, usize) {
    with(|r| {
        let locks = r.queues.values().filter(|q| !q.tickets.is_empty());
        (r.waiting.len(), locks.count())
    })
}

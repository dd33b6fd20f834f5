//! Parking and waking clients (docs/design.md, contract §4): the registry's
//! decisions carried out on the server, with blocked clients and timers.
//!
//! Redis's `BlockClientOnKeys` never wakes for a deleted key, so the queues
//! are the module's and are served by the releasing command itself, by
//! keyspace events (a Redisson Lua unlock, DEL, expiry), by FLUSHDB and
//! FLUSHALL and by a timer at the lock's deadline.
//!
//! A wait's own timeout is the module's too, not Redis's blocking timeout:
//! Redis 7.0 may time out a client in the same event-loop turn in which the
//! module handed it the lock, and then drops both replies, so the client
//! hangs while holding a lock it never hears about. With every wait ended by
//! an unblock of the module's alone, each parked client gets exactly one
//! reply. `CLIENT UNBLOCK` still reaches a parked client (Redis calls the
//! timeout callback for it, which Redis itself never does without a
//! timeout): its wait ends as its timeout would.

use std::os::raw::c_int;
use std::time::Duration;

use redis_module::{raw, Context};

use super::deadlock::{self, Victim};
use super::graph::Need;
use super::lines;
use super::parking::{self, Handle, Left, Outcome, Parking, Waiters};
use super::queues::{ended, has_waiters, idle, lock_id, try_with, with, REGISTRY};
use super::registry::{Due, Registry, Waiter};
use crate::config;
use crate::engine::error::{LockError, ERR_REPLICA};
use crate::engine::hold::Attempt;
use crate::engine::holders;
use crate::engine::multi::{self, longer, Want};
use crate::engine::names::LockId;
use crate::engine::names::LockNames;
use crate::engine::permit;
use crate::engine::queue::{self, Hold, Served, Ticket};
use crate::engine::store::Store;
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::server::{self, Blocked};
use crate::sessions;

/// Data of the agenda's timer.
struct Agenda;

/// BLOCK is refused inside MULTI, scripts and other contexts that cannot wait:
/// there the command makes its one attempt and replies at once.
pub fn can_block(ctx: &Context) -> bool {
    server::context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING as c_int == 0
}

/// What a parked client asks for.
pub struct Wait<'a> {
    pub owner: &'a [u8],
    pub hold: Hold,
    pub lease: i64,
    pub parking: Parking,
}

/// The waiters of this file, as the one parking lifecycle sees them.
struct Queued;

impl Waiters for Queued {
    type Parked = Waiter;

    fn take(handle: Handle) -> Option<Waiter> {
        with(|r| r.unregister(handle))
    }

    fn refusal(ctx: &Context, waiter: &Waiter) -> Outcome {
        // The context is the parked client's own, still in the database it
        // waited in: the lock's.
        refusal(&mut RedisStore::new(ctx), waiter)
    }

    fn left(ctx: &Context, waiter: Waiter, why: Left) {
        if why == Left::Disconnected {
            ended(waiter.since, server::milliseconds());
        }
        look_again(ctx, &waiter);
    }
}

/// Parks the calling client, with no Redis timeout: ours is on the agenda
/// (see the module's comment).
fn block(ctx: &Context) -> Blocked {
    parking::block::<Queued>(ctx)
}

/// The `DEADLOCK` error a request by `owner` for `wants` would get instead of
/// parking: its wait would close a cycle (contract §14). Asked on the park
/// path only, so an acquisition that does not wait pays nothing.
pub fn deadlock(
    ctx: &Context,
    store: &mut RedisStore,
    owner: &[u8],
    wants: &[(&LockNames, Hold)],
) -> Option<String> {
    if !config::deadlock_detection() {
        return None;
    }
    if idle() && !lines::any() {
        // Nobody parked, so no wait for another owner leads anywhere: only
        // the upgrade can close a cycle, read with the command's own store
        // (the lock is open in it). This is the handoff's path.
        let (names, _) = wants
            .iter()
            .find(|(names, hold)| holders::upgrade(store, names.hash(), owner, *hold))?;
        return Some(deadlock::upgrade(owner, lock_id(ctx, names)));
    }
    let wants: Vec<(LockId, Need)> = wants
        .iter()
        .map(|(names, hold)| (lock_id(ctx, names), Need::Hold(*hold)))
        .collect();
    with(|r| deadlock::on_park(r, || RedisStore::new(ctx), owner, &wants))
}

/// The `DEADLOCK` error `FAIRLOCK.ACQUIRE … BLOCK` by `owner` would get
/// instead of joining (or waiting in) the line of `names`: its wait for the
/// lock's holders and the parked waiters before it in the line would close
/// a cycle (contract §14). Asked before the line is written, so a refused
/// request changes nothing; with nobody parked anywhere nothing is read (a
/// fair lock re-entered by its holder never waits).
pub fn deadlock_in_line(ctx: &Context, owner: &[u8], names: &LockNames) -> Option<String> {
    if !config::deadlock_detection() || (idle() && !lines::any()) {
        return None;
    }
    let wants = [(lock_id(ctx, names), Need::Line)];
    with(|r| deadlock::on_park(r, || RedisStore::new(ctx), owner, &wants))
}

/// `owner` took a hold at once: the waiters of that lock now wait for it.
/// When it has clients parked too (in a queue or a fair lock's line), that
/// may close a cycle, whose most recently parked waiter fails with
/// `DEADLOCK`.
pub fn took_hold(ctx: &Context, owner: &[u8]) {
    if !idle() || lines::any() {
        break_cycles(ctx, owner);
    }
}

/// Fails the victims of the cycles a hold just taken by `owner` closed, one
/// cycle at a time; each victim's locks get a look, as after a timeout (a
/// fair victim leaves its line, whose events give the lock a look).
fn break_cycles(ctx: &Context, owner: &[u8]) {
    let db = server::selected_db(ctx);
    let open = || RedisStore::new(ctx);
    while let Some((victim, text)) = with(|r| deadlock::after_hold(r, open, db, owner)) {
        match victim {
            Victim::Queued(victim) => {
                let Some(waiter) = with(|r| r.unregister(victim)) else {
                    break;
                };
                ended(waiter.since, server::milliseconds());
                // Still registered until now, so parked: unblocked once, here.
                parking::answer_later(victim, Outcome::Error(text));
                look_again(ctx, &waiter);
            }
            Victim::InLine(victim) => {
                if !lines::fail_victim(ctx, victim, text) {
                    break;
                }
            }
        }
    }
}

/// Parks the calling client until it holds the lock or its wait's timeout
/// passes. The caller replies nothing now.
pub fn park(ctx: &Context, store: &mut RedisStore, names: &LockNames, wait: Wait) {
    let Wait {
        owner,
        hold,
        lease,
        parking:
            Parking {
                timeout: timeout_ms,
                session,
                latch: request,
            },
    } = wait;
    let bc = block(ctx);
    let id = lock_id(ctx, names);
    // A millisecond more: the clock read is the command's, made earlier, and
    // a wait never ends before its time.
    let ends = (timeout_ms > 0).then(|| store.now_ms().saturating_add(timeout_ms + 1));
    let ticket = Ticket {
        owner: owner.to_vec(),
        hold,
        lease,
        token: bc as Handle,
        multi: false,
        request,
    };
    let (now, client) = (store.now_ms(), server::client_id(ctx));
    with(|r| {
        r.park(id.clone(), ticket, ends, session);
        r.stamp(bc as Handle, now, client);
    });
    metrics::bump(Counter::WaitsStarted);
    rearm(ctx, store, names, &id);
}

/// Parks the calling client until it can take every hold of `wants` at
/// once, or its timeout passes (0: no limit): queued on each lock, it holds
/// none of them while it waits. A multi-hold takes no `REQUEST`, so the
/// parking has no latch. The caller replies nothing now.
pub fn park_all(
    ctx: &Context,
    store: &mut RedisStore,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
    parking: Parking,
) {
    let Parking {
        timeout: timeout_ms,
        session,
        ..
    } = parking;
    let bc = block(ctx);
    let ends = (timeout_ms > 0).then(|| store.now_ms().saturating_add(timeout_ms + 1));
    let tickets = wants
        .iter()
        .map(|w| {
            let ticket = Ticket {
                owner: owner.to_vec(),
                hold: w.hold,
                lease,
                token: bc as Handle,
                multi: true,
                request: None,
            };
            (lock_id(ctx, &w.names), ticket)
        })
        .collect();
    let (now, client) = (store.now_ms(), server::client_id(ctx));
    with(|r| {
        r.park_all(tickets, ends, session);
        r.stamp(bc as Handle, now, client);
    });
    metrics::bump(Counter::WaitsStarted);
    for w in wants {
        rearm(ctx, store, &w.names, &lock_id(ctx, &w.names));
    }
}

/// True when clients wait for any lock of `wants` that `owner` may not
/// overtake in fair mode (it holds none of its holds).
pub fn queued_before(
    ctx: &Context,
    store: &mut RedisStore,
    owner: &[u8],
    wants: &[Want],
) -> Result<bool, LockError> {
    for w in wants {
        if has_waiters(ctx, &w.names) && !queue::may_overtake(store, &w.names, owner)? {
            return Ok(true);
        }
    }
    Ok(false)
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
/// Every change the module makes to a lock comes through here, so here the
/// session holds the change gave back are forgotten too (`sessions`).
pub fn serve_after<T>(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    change: impl FnOnce(&mut RedisStore) -> T,
) -> T {
    serve_around(ctx, store, names, change, true)
}

/// [`serve_after`] for both: the lock settling while `change` runs, then
/// its waiters served and its session holds looked at, `always`, or only
/// when `change` wrote.
fn serve_around<T>(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    change: impl FnOnce(&mut RedisStore) -> T,
    always: bool,
) -> T {
    let before = store.writes();
    let (result, changed) = if idle() {
        let result = change(store);
        (result, always || store.writes() != before)
    } else {
        let id = lock_id(ctx, names);
        let outer = with(|r| r.settle(Some(id.clone())));
        let result = change(store);
        let changed = always || store.writes() != before;
        if changed {
            serve_now(ctx, store, names, id);
        }
        with(|r| r.settle(outer));
        (result, changed)
    };
    if changed {
        sessions::settle(ctx, names);
    }
    result
}

/// Serves the lock's waiters before a newcomer's attempt, so that a lock
/// freed since they were last looked at goes to them first; unless nothing
/// can have freed it: no look is due (every outside change, a timeout, a
/// flush or a swap schedules one) and its deadline is ahead (an expiry, the
/// one change nobody announces in time, is on the agenda). Their last look
/// refused them then, and the lock is as it left it: a contended
/// acquisition pays no refused attempt for the head here.
pub fn serve_first(ctx: &Context, store: &mut RedisStore, names: &LockNames) {
    if idle() {
        return;
    }
    let (id, now) = (lock_id(ctx, names), store.now_ms());
    if !with(|r| r.settled(&id, now)) {
        serve(ctx, store, names);
    }
}

/// [`serve_after`] for an acquisition's own attempt (after
/// [`serve_first`]): its waiters are served again when the attempt wrote
/// (a grant moves the lock's deadline; a reclaimed permit frees one). A
/// refusal that wrote nothing left the lock as their last look did.
pub fn serve_after_attempt<T>(
    ctx: &Context,
    store: &mut RedisStore,
    names: &LockNames,
    attempt: impl FnOnce(&mut RedisStore) -> T,
) -> T {
    serve_around(ctx, store, names, attempt, false)
}

fn serve_now(ctx: &Context, store: &mut RedisStore, names: &LockNames, id: LockId) {
    // The store raises keyspace events, which re-enter this module: the
    // registry must not stay borrowed while the lock machine runs.
    let Some(mut tickets) = with(|r| r.take_tickets(&id)) else {
        return;
    };
    let mut served = queue::admit(store, names, &mut tickets);
    // A multi-hold at the head: served when it can take all its holds,
    // then those behind it.
    // Owners of the multi-holds served: their new holds are looked at for
    // cycles once the queue is back (a victim's ticket must not stay in the
    // lent-out queue).
    let mut multi_holders = Vec::new();
    while let Some(head) = tickets.front().filter(|t| t.multi) {
        if !serve_all(ctx, store, head, &id) {
            break;
        }
        if let Some(ticket) = tickets.pop_front() {
            multi_holders.push(ticket.owner);
        }
        served.extend(queue::admit(store, names, &mut tickets));
    }
    let now = store.now_ms();
    let bound = with(|r| {
        for s in &served {
            if let Some(w) = r.waiter(s.ticket.token) {
                ended(w.since, now);
            }
        }
        r.return_tickets(&id, tickets, served.iter().map(|s| s.ticket.token))
    });
    for Served { ticket, outcome } in served {
        let took = outcome.is_ok();
        let outcome = match outcome {
            Ok(granted) => {
                metrics::acquired(ticket.hold, granted);
                let session = bound.iter().find(|(h, _)| *h == ticket.token);
                if let Some(&(_, client)) = session {
                    let Ticket {
                        owner, hold, lease, ..
                    } = &ticket;
                    sessions::bind(ctx, store, client, names, *hold, owner, *lease);
                }
                Outcome::Attempt(Attempt::Granted(granted), ticket.hold)
            }
            Err(e) => Outcome::Error(e.message().to_string()),
        };
        metrics::bump(Counter::WaitsServed);
        // The handle was in the queue, so it is parked, and it left the
        // registry above: it is unblocked once.
        parking::answer_later(ticket.token, outcome);
        if took {
            // The waiters left now wait for the new holder.
            took_hold(ctx, &ticket.owner);
        }
    }
    for owner in multi_holders {
        took_hold(ctx, &owner);
    }
    rearm(ctx, store, names, &id);
}

/// Serves the multi-hold whose ticket heads the queue of `serving`, which
/// is lent out: when it is first in line for all its other locks too (or
/// holds a lock where others stand ahead of it: they wait for its owner
/// anyway, and it must not wait for them) and can take every hold now, it
/// takes them, leaves every queue and is answered, and its other locks get
/// a look (readers behind it may enter). False when it must wait on.
fn serve_all(
    ctx: &Context,
    store: &mut RedisStore,
    head: &Ticket<Handle>,
    serving: &LockId,
) -> bool {
    let handle = head.token;
    let Some(line) = with(|r| r.line_of(handle, serving)) else {
        return false;
    };
    let mut wants = Vec::with_capacity(line.len());
    for (id, hold, ahead) in &line {
        // Every name was checked when the client parked.
        let Ok(names) = LockNames::new(&id.1) else {
            return false;
        };
        if *ahead && !queue::may_overtake(store, &names, &head.owner).unwrap_or(false) {
            return false;
        }
        wants.push(Want { names, hold: *hold });
    }
    let outcome = match multi::acquire_all(store, &head.owner, head.lease, &wants) {
        Ok(Attempt::Refused { .. }) => return false,
        Ok(Attempt::Granted(granted)) => {
            for (w, g) in wants.iter().zip(granted) {
                metrics::acquired(w.hold, g);
            }
            Outcome::NilOr(None)
        }
        Err(e) => Outcome::Error(e.message().to_string()),
    };
    // Its ticket in `serving` goes with the caller's pop.
    let session = with(|r| r.unregister(handle)).and_then(|w| {
        ended(w.since, store.now_ms());
        w.session
    });
    if let (Outcome::NilOr(_), Some(client)) = (&outcome, session) {
        sessions::bind_all(ctx, store, client, &wants, &head.owner, head.lease);
    }
    metrics::bump(Counter::WaitsServed);
    // It was registered until now, so parked: unblocked once, here.
    parking::answer_later(handle, outcome);
    for (id, _, _) in line.into_iter().filter(|(id, _, _)| id != serving) {
        schedule_in(ctx, id, Duration::ZERO);
    }
    true
}

/// Keeps the lock's deadline on the agenda, or drops its empty queue; then
/// arms the agenda's timer for what `park` or this put on it.
fn rearm(ctx: &Context, store: &mut RedisStore, names: &LockNames, id: &LockId) {
    // Permit waiters look again when the first permit held expires, which
    // the acquisition then reclaims (contract §17.3).
    let wanted = if with(|r| r.first_hold(id)).is_some_and(|h| matches!(h, Hold::Permit { .. })) {
        permit::next_expiry(store, names)
    } else {
        let pttl = store.pttl(names.hash());
        // Redis drops a key once the clock is past its deadline.
        (pttl > 0).then(|| store.now_ms() + pttl + 1)
    };
    with(|r| r.rearm(id, wanted));
    arm_agenda(ctx);
}

/// A look at the lock's waiters after an outside change (a keyspace event,
/// a flush), counted in `INFO` unless one was due already.
fn recheck(ctx: &Context, id: LockId) {
    if schedule_in(ctx, id, Duration::ZERO) {
        metrics::bump(Counter::WaitRechecks);
    }
}

/// Looks at the lock's waiters again after `delay`, unless a look is due;
/// true when this scheduled a new look.
fn schedule_in(ctx: &Context, id: LockId, delay: Duration) -> bool {
    let schedule = with(|r| r.mark_soon(&id));
    if schedule {
        ctx.create_timer(delay, on_soon, id);
    }
    schedule
}

fn on_soon(ctx: &Context, id: LockId) {
    if with(|r| r.soon_done(&id)) {
        look(ctx, id);
    }
}

/// Serves the lock's waiters from a timer.
fn look(ctx: &Context, id: LockId) {
    if !server::may_write(ctx, |after| {
        schedule_in(ctx, id.clone(), after);
    }) {
        return;
    }
    let Ok(names) = LockNames::new(&id.1) else {
        return;
    };
    server::select_db(ctx, id.0);
    let mut store = RedisStore::new(ctx);
    serve(ctx, &mut store, &names);
}

/// A keyspace event on `key` of `db`: a Lua unlock, DEL, UNLINK, expiry,
/// eviction, a TTL change may have freed a lock with waiters. Writing here
/// is unsafe, so the work is deferred to a timer.
pub fn on_keyspace_event(ctx: &Context, db: i32, key: &[u8]) {
    match try_with(|r| r.idle() || r.settling(db, key)) {
        Some(true) => {}
        Some(false) => recheck(ctx, (db, key.to_vec())),
        // Within a deadlock search's read (a key it read expired): the look
        // is scheduled without the registry, so without its de-duplication.
        None => {
            metrics::bump(Counter::WaitRechecks);
            ctx.create_timer(Duration::ZERO, look, (db, key.to_vec()));
        }
    }
}

/// FLUSHDB and FLUSHALL raise no per-key event: every queue of the flushed
/// database (`None`: all) gets a look.
pub fn on_flush(ctx: &Context, db: Option<i32>) {
    for id in with(|r| r.locks_in(db)) {
        recheck(ctx, id);
    }
}

/// Makes the agenda's timer fire by the first entry.
fn arm_agenda(ctx: &Context) {
    server::timers::arm_agenda(ctx, &REGISTRY, Registry::agenda, on_agenda, Agenda);
}

/// Serves what has fallen due, then arms the timer for the next entry.
fn on_agenda(ctx: &Context, _: Agenda) {
    let now = server::milliseconds();
    for due in with(|r| r.take_due(now)) {
        match due {
            Due::Timeout(handle) => time_out(ctx, handle),
            Due::Deadline(id) => {
                if with(|r| r.deadline_done(&id)) {
                    look(ctx, id);
                }
            }
        }
    }
    arm_agenda(ctx);
}

/// The wait's timeout passed: the client gets what an immediate refusal
/// would (the lock's PTTL), and the waiters behind it may now be first.
fn time_out(ctx: &Context, handle: Handle) {
    let Some(waiter) = with(|r| r.unregister(handle)) else {
        return;
    };
    server::select_db(ctx, waiter.lock.0);
    let mut store = RedisStore::new(ctx);
    ended(waiter.since, store.now_ms());
    let refused = refusal(&mut store, &waiter);
    metrics::bump(Counter::WaitsTimedOut);
    // Still registered until now, so parked: unblocked once, here.
    parking::answer_later(handle, refused);
    look_again(ctx, &waiter);
}

/// A waiter left its queues (timed out, unblocked, gone, a deadlock's
/// victim): each of its locks gets a look, as those behind it may be first
/// now.
fn look_again(ctx: &Context, waiter: &Waiter) {
    for id in waiter.locks() {
        schedule_in(ctx, id.clone(), Duration::ZERO);
    }
}

/// What a waiter that gives up is answered: the lock's PTTL, for a
/// multi-hold the largest of its locks'.
fn refusal(store: &mut RedisStore, waiter: &Waiter) -> Outcome {
    if let (Hold::Permit { .. }, Ok(names)) = (waiter.hold, LockNames::new(&waiter.lock.1)) {
        return Outcome::Attempt(permit::refusal(store, &names), waiter.hold);
    }
    let pttl = store.pttl(&waiter.lock.1);
    if waiter.others.is_empty() {
        return Outcome::Attempt(Attempt::Refused { pttl }, waiter.hold);
    }
    let longest = waiter
        .others
        .iter()
        .fold(pttl, |p, (id, _)| longer(p, store.pttl(&id.1)));
    Outcome::NilOr(Some(longest))
}

/// Fails every waiter at once: the node stopped being a master.
pub fn abort_all(ctx: &Context) {
    let (handles, timer) = with(|r| r.drain());
    if let Some(timer) = timer {
        let _ = ctx.stop_timer::<Agenda>(timer);
    }
    for handle in handles {
        metrics::bump(Counter::WaitsAborted);
        // Every ticket's handle is parked, and the registry is gone: each is
        // unblocked once.
        parking::answer_later(handle, Outcome::Error(ERR_REPLICA.to_string()));
    }
}

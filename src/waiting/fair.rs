//! `FAIRLOCK.ACQUIRE … BLOCK ms`: fair-lock waiters parked on the server
//! (docs/design.md, contract §13 "BLOCK"). A parked waiter stands in the
//! lock's line (`redisson_lock_queue:{lock}` and its deadline in
//! `redisson_lock_timeout:{lock}`) exactly as `fair_lock.lua` queued it, so
//! module and Redisson waiters keep one arrival order. The server acts for
//! it as Redisson's client would, retrying `fair_lock.lua`'s step, only
//! when that can change something: when it heads the line and the lock is
//! free (then it acquires as the head, the others' deadlines moving down by
//! its `WAIT`), or when its entry is gone (a flush, a DEL: it joins again).
//!
//! Unlike a Redisson client, it never goes stale: while it is parked its
//! deadline is kept ahead of the clock (Redisson #3004), at least
//! `(position + 1) × WAIT` plus a margin ahead of now, so neither time
//! nor the heads ahead acquiring (each moves it down by one `WAIT`) can
//! bring it to the clock before a look here raises it again.
//!
//! Looks run from the releasing fair command itself, from an entry per
//! lock on the lines' agenda, served by one timer as the queues' is (the
//! wait's end, the next refresh, the lease's end, a stale head's
//! deadline) and, deferred to an entry at 0 ms, from keyspace events on
//! the lock's three keys (a Lua unlock, DEL, expiry, a Redisson waiter
//! leaving) and flushes. A waiter that times out, is unblocked by
//! `CLIENT UNBLOCK` or disconnects leaves the line as
//! `fair_acquire_failed.lua` does. Other kinds' paths never come here; the
//! keyspace hook asks one thread-local flag first.

use std::cell::Cell;
use std::time::Duration;

use redis_module::Context;

use super::clients;
use super::lines::{any, unregister, with, Parked, LINES};
use super::parking::{self, Handle, Left, Outcome, Parking, Waiters};
use super::queues::lock_id;
use super::registry::next_parking;
use crate::engine::error::ERR_REPLICA;
use crate::engine::fair::{self, FairAttempt, FairOptions};
use crate::engine::names::LockId;
use crate::engine::names::LockNames;
use crate::engine::store::{KeyKind, Line, Store};
use crate::keyspace::RedisStore;
use crate::metrics::{self, Counter};
use crate::server;

/// The shortest and longest time between two refreshes of a parked
/// waiter's deadline; in between, a quarter of its `WAIT`.
const REFRESH_MIN: i64 = 10;
const REFRESH_MAX: i64 = 60_000;

thread_local! {
    // Module code only ever runs on Redis's main thread.
    /// Set during a look: its own writes' events need no other look.
    static LOOKING: Cell<bool> = const { Cell::new(false) };
}

/// The owners of `names`' line that are parked on this server.
pub fn parked_owners(ctx: &Context, names: &LockNames) -> Vec<Vec<u8>> {
    if !any() {
        return Vec::new();
    }
    let id = lock_id(ctx, names);
    with(|l| {
        l.locks.get(&id).map_or_else(Vec::new, |line| {
            line.parked.iter().map(|p| p.owner.clone()).collect()
        })
    })
}

/// Parked fair waiters, and locks they wait for, for `INFO rwlock`.
pub fn counts() -> (usize, usize) {
    if !any() {
        return (0, 0);
    }
    with(|l| {
        let waiters = l.locks.values().map(|line| line.parked.len()).sum();
        let locks = l.locks.values().filter(|line| !line.parked.is_empty());
        (waiters, locks.count())
    })
}

/// What a parked fair waiter asks for.
/// It takes no `SESSION`: the parking binds no connection.
pub struct FairWait<'a> {
    pub owner: &'a [u8],
    pub lease: i64,
    pub options: FairOptions,
    pub parking: Parking,
}

/// Parks the calling client, which `fair::acquire` has just queued (or
/// found queued): it is answered when served, or when its wait ends. The
/// caller replies nothing now.
pub fn park(ctx: &Context, names: &LockNames, wait: FairWait) {
    let bc = parking::block::<InLine>(ctx);
    let id = lock_id(ctx, names);
    let now = server::milliseconds();
    // A millisecond more: a wait never ends before its time.
    let timeout = wait.parking.timeout;
    let ends = (timeout > 0).then(|| now.saturating_add(timeout + 1));
    let parked = Parked {
        handle: bc as Handle,
        owner: wait.owner.to_vec(),
        lease: wait.lease,
        wait: wait.options.wait,
        non_reentrant: wait.options.non_reentrant,
        ends,
        request: wait.parking.latch,
        seq: next_parking(),
        since: now,
    };
    with(|l| {
        for key in [
            names.hash().to_vec(),
            names.fair_queue().to_vec(),
            names.fair_timeout().to_vec(),
        ] {
            l.keys.insert((id.0, key), id.clone());
        }
        l.park(id.clone(), parked);
    });
    metrics::bump(Counter::WaitsStarted);
    // Its deadline may be stale already (a stale last waiter gives a
    // negative ttl): refreshed now, in the same command.
    look_now(ctx, names, &id);
}

/// Serves `names`' parked waiters after a fair command changed the lock:
/// part of the same command, so the handoff is atomic and replicated with it.
/// One thread-local read when no fair waiter is parked anywhere (the plain
/// lock's unlocks call it too).
#[inline]
pub fn serve(ctx: &Context, names: &LockNames) {
    if any() && !LOOKING.with(Cell::get) {
        serve_parked(ctx, names);
    }
}

fn serve_parked(ctx: &Context, names: &LockNames) {
    let id = lock_id(ctx, names);
    if with(|l| l.locks.contains_key(&id)) {
        look_now(ctx, names, &id);
    }
}

/// A keyspace event on `key` of `db`: if it is a key of a lock with parked
/// waiters, a look at 0 ms (writes are unsafe inside the event).
pub fn on_keyspace_event(ctx: &Context, db: i32, event: &str, key: &[u8]) {
    if !any() || LOOKING.with(Cell::get) {
        return;
    }
    let Some(id) = with(|l| l.keys.get(&(db, key.to_vec())).cloned()) else {
        return;
    };
    // Appends and deadline moves leave every entry where it was.
    if !matches!(
        event,
        "rpush" | "lpop" | "zadd" | "zincr" | "hset" | "hincrby"
    ) {
        with(|l| {
            if let Some(line) = l.locks.get_mut(&id) {
                line.lost = true;
            }
        });
    }
    arm(ctx, &id, server::milliseconds());
}

/// FLUSHDB and FLUSHALL raise no per-key event: every line of the flushed
/// database (`None`: all) is looked at again, its entries gone.
pub fn on_flush(ctx: &Context, db: Option<i32>) {
    if !any() {
        return;
    }
    let ids: Vec<LockId> = with(|l| {
        l.locks
            .iter_mut()
            .filter(|(id, _)| db.is_none_or(|db| id.0 == db))
            .map(|(id, line)| {
                line.lost = true;
                id.clone()
            })
            .collect()
    });
    let now = server::milliseconds();
    for id in ids {
        arm(ctx, &id, now);
    }
}

/// Fails every parked fair waiter: the node stopped being a master (its
/// line is now the new master's to keep).
pub fn abort_all(ctx: &Context) {
    let (lines, timer) = with(|l| {
        l.keys.clear();
        l.handles.clear();
        l.owners.clear();
        let agenda = std::mem::take(&mut l.agenda);
        (std::mem::take(&mut l.locks), agenda.timer())
    });
    if let Some(timer) = timer {
        let _ = ctx.stop_timer::<Looks>(timer);
    }
    for (_, line) in lines {
        for p in line.parked {
            metrics::bump(Counter::WaitsAborted);
            parking::answer_later(p.handle, Outcome::Error(ERR_REPLICA.to_string()));
        }
    }
}

/// Data of the lines' agenda timer.
struct Looks;

/// Puts the lock's next look on the agenda by `at` (server ms), unless one
/// is due by then already.
fn arm(ctx: &Context, id: &LockId, at: i64) {
    let moved = with(|l| {
        let line = l.locks.get_mut(id)?;
        if line.look.is_some_and(|(when, _)| when <= at) {
            return None;
        }
        if let Some(slot) = line.look.take() {
            l.agenda.cancel(&slot);
        }
        line.look = Some(l.agenda.appoint(at, id.clone()));
        Some(())
    });
    if moved.is_some() {
        arm_agenda(ctx);
    }
}

/// Makes the agenda's timer fire by the first look.
fn arm_agenda(ctx: &Context) {
    server::timers::arm_agenda(ctx, &LINES, |l| &mut l.agenda, on_agenda, Looks);
}

/// Looks at the lines that fell due, then arms the timer for the next.
fn on_agenda(ctx: &Context, _: Looks) {
    let due: Vec<LockId> = with(|l| l.agenda.take_due(server::milliseconds()).collect());
    for id in due {
        look_due(ctx, id);
    }
    arm_agenda(ctx);
}

fn look_due(ctx: &Context, id: LockId) {
    with(|l| {
        if let Some(line) = l.locks.get_mut(&id) {
            line.look = None;
        }
    });
    let retry = |after: Duration| {
        arm(ctx, &id, server::milliseconds() + after.as_millis() as i64);
    };
    if !server::may_write(ctx, retry) {
        return;
    }
    let Ok(names) = LockNames::new(&id.1) else {
        return;
    };
    server::select_db(ctx, id.0);
    look_now(ctx, &names, &id);
}

/// Looks at the lock's line and acts for its parked waiters, then arms
/// the timer for the next thing that may need a look.
fn look_now(ctx: &Context, names: &LockNames, id: &LockId) {
    let was = LOOKING.with(|l| l.replace(true));
    let next = look(ctx, names, id);
    LOOKING.with(|l| l.set(was));
    // Forget the lock when nobody is parked on it any more.
    let empty = with(|l| {
        let empty = l
            .locks
            .get(id)
            .is_some_and(|line| line.parked.is_empty() && line.leaving.is_empty());
        if empty {
            if let Some(slot) = l.locks.remove(id).and_then(|line| line.look) {
                l.agenda.cancel(&slot);
            }
            l.keys.retain(|_, lock| lock != id);
        }
        empty
    });
    if let (false, Some(at)) = (empty, next) {
        arm(ctx, id, at);
    }
}

/// Answers and unblocks a waiter that `unregister` handed out.
fn answer_later(p: &Parked, outcome: Outcome, counter: Counter) {
    metrics::bump(counter);
    parking::answer_later(p.handle, outcome);
}

/// One look (see `look_now`); returns when the next one is due.
fn look(ctx: &Context, names: &LockNames, id: &LockId) -> Option<i64> {
    let mut store = RedisStore::new(ctx);
    let now = server::milliseconds();
    let (queue, timeout) = (names.fair_queue(), names.fair_timeout());
    let (leaving, lost) = with(|l| {
        l.locks.get_mut(id).map(|line| {
            (
                std::mem::take(&mut line.leaving),
                std::mem::replace(&mut line.lost, false),
            )
        })
    })?;
    // Those gone since (a disconnect, CLIENT UNBLOCK) leave the line.
    for (owner, wait) in leaving {
        let _ = clients::serve_after(ctx, &mut store, names, |s| {
            fair::cancel(s, names, &owner, wait)
        });
    }
    let parked = with(|l| l.locks.get(id).map(|line| line.parked.clone()))?;
    // A waiter whose entry left the line from outside retries as
    // Redisson's client would: it acquires or joins again, in arrival order.
    if lost {
        for p in &parked {
            if store.zscore(&timeout, &p.owner).is_none() {
                attempt(ctx, &mut store, names, id, p);
            }
        }
    }
    // The head, if parked here, acquires when the lock is free.
    let free = matches!(store.kind(names.hash()), KeyKind::Missing);
    match fair::head(&mut store, names, now) {
        Ok(Some(head)) if free => {
            let first = with(|l| {
                l.locks
                    .get(id)
                    .and_then(|line| line.parked.iter().find(|p| p.owner == head).cloned())
            });
            if let Some(p) = first {
                attempt(ctx, &mut store, names, id, &p);
                // Other connections parked for the same owner (one
                // Redisson thread id) hold it now too: a re-entry each.
                let twins: Vec<Parked> = with(|l| {
                    l.locks.get(id).map_or_else(Vec::new, |line| {
                        line.parked
                            .iter()
                            .filter(|t| t.owner == head)
                            .cloned()
                            .collect()
                    })
                });
                if twins.len() < parked.iter().filter(|t| t.owner == head).count() {
                    for twin in &twins {
                        attempt(ctx, &mut store, names, id, twin);
                    }
                }
            }
        }
        Ok(_) => {}
        Err(e) => {
            // Not a line any more (another type at its key): every waiter
            // fails as its retry would.
            for p in parked {
                if let Some(p) = unregister(id, p.handle) {
                    answer_later(
                        &p,
                        Outcome::Error(e.message().to_string()),
                        Counter::WaitsAborted,
                    );
                }
            }
            return None;
        }
    }
    // Waits that ended leave the line as fair_acquire_failed.lua does.
    let parked = with(|l| l.locks.get(id).map(|line| line.parked.clone()))?;
    for p in parked
        .iter()
        .filter(|p| p.ends.is_some_and(|end| end <= now))
    {
        let Some(p) = unregister(id, p.handle) else {
            continue;
        };
        let ttl = store.pttl(names.hash()).max(0);
        let _ = clients::serve_after(ctx, &mut store, names, |s| {
            fair::cancel(s, names, &p.owner, p.wait)
        });
        answer_later(&p, Outcome::NilOr(Some(ttl)), Counter::WaitsTimedOut);
    }
    // The deadlines of those still parked, kept ahead of the clock.
    let parked = with(|l| l.locks.get(id).map(|line| line.parked.clone()))?;
    let line = store.lrange(&queue);
    let mut next = i64::MAX;
    for p in &parked {
        let period = (p.wait / 4).clamp(REFRESH_MIN, REFRESH_MAX);
        next = next.min(now + period);
        if let Some(end) = p.ends {
            next = next.min(end);
        }
        let Some(at) = line.iter().position(|w| *w == p.owner) else {
            continue;
        };
        let ahead = (at as i64 + 1).saturating_mul(p.wait);
        let wanted = now.saturating_add(ahead).saturating_add(period);
        match store.zscore(&timeout, &p.owner) {
            Some(score) if score >= wanted => {}
            Some(_) => {
                store.zadd(&timeout, wanted.saturating_add(period), &p.owner);
            }
            None => {}
        }
    }
    // A stale head that nobody purges, or the lease's end (expiry may be
    // late), lets the head in: a look then.
    if let Ok(Some(head)) = fair::head(&mut store, names, now) {
        if let Some(at) = store.zscore(&timeout, &head).filter(|&at| at > now) {
            next = next.min(at + 1);
        }
    }
    let pttl = store.pttl(names.hash());
    if pttl > 0 {
        next = next.min(now + pttl + 1);
    }
    Some(next)
}

/// Runs `fair_lock.lua`'s step for the parked waiter `p`, answering it when
/// it acquires (or fails).
fn attempt(ctx: &Context, store: &mut RedisStore, names: &LockNames, id: &LockId, p: &Parked) {
    let options = FairOptions {
        no_queue: false,
        non_reentrant: p.non_reentrant,
        wait: p.wait,
    };
    let taken = clients::serve_after(ctx, store, names, |s| {
        fair::acquire_latched(s, names, &p.owner, p.lease, options, p.request.as_ref())
    });
    let (outcome, took) = match taken {
        Ok(FairAttempt::Granted(_)) => {
            metrics::bump(Counter::FairAcquired);
            (Outcome::NilOr(None), true)
        }
        Ok(_) => return,
        Err(e) => (Outcome::Error(e.message().to_string()), false),
    };
    if let Some(p) = unregister(id, p.handle) {
        answer_later(&p, outcome, Counter::WaitsServed);
    }
    if took {
        // The waiters behind it in the line now wait for its owner, which
        // may close a cycle through the owner's other parked clients.
        clients::took_hold(ctx, &p.owner);
    }
}

/// Fair waiters, as the one parking lifecycle sees them: `CLIENT UNBLOCK`
/// answers as a timeout would (the lock's TTL), and a waiter gone leaves
/// the line at the next look, a 0 ms timer.
struct InLine;

impl Waiters for InLine {
    type Parked = (LockId, Parked);

    fn take(handle: Handle) -> Option<(LockId, Parked)> {
        let id = with(|l| l.handles.get(&handle).cloned())?;
        let p = unregister(&id, handle)?;
        Some((id, p))
    }

    fn refusal(ctx: &Context, (id, _): &(LockId, Parked)) -> Outcome {
        // The context is the parked client's own, in the lock's database.
        Outcome::NilOr(Some(RedisStore::new(ctx).pttl(&id.1).max(0)))
    }

    fn left(ctx: &Context, (id, p): (LockId, Parked), _: Left) {
        leave(ctx, &id, p);
    }
}

/// `p` left without a look: it leaves the line at a look 0 ms from now.
fn leave(ctx: &Context, id: &LockId, p: Parked) {
    with(|l| {
        if let Some(line) = l.locks.get_mut(id) {
            line.leaving.push((p.owner, p.wait));
        }
    });
    arm(ctx, id, server::milliseconds());
}

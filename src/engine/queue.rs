//! Waiting on the server (docs/design.md, contract §4): who of the waiters gets the lock
//! when it may have changed, and whether a new acquisition must queue behind
//! them, for every lock kind: a name may have waiters of both kinds, each
//! served by its own machine. Pure: the shell keeps the queues and parks
//! the clients.

use std::collections::VecDeque;

use super::error::LockError;
use super::hold::{remember_grant, Attempt, GrantLatch, Granted};
use super::latch;
use super::lock::{self, Options};
use super::names::{write_field, LockNames};
use super::permit::{self, Permits};
use super::rwlock::{read_lock, write_lock, Mode};
use super::semaphore;
use super::store::{KeyKind, Store};

/// What an acquisition asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// A read hold of a read-write lock (`RWLOCK.READ`).
    Read,
    /// The write hold of a read-write lock (`RWLOCK.WRITE`), with a fencing
    /// token when `fenced`.
    Write { fenced: bool },
    /// A plain lock (`LOCK.ACQUIRE`).
    Lock(Options),
    /// Permits of a semaphore (`SEMAPHORE.ACQUIRE`, contract §15): nobody's
    /// hold, so its waiter has no owner.
    Semaphore { permits: i64 },
    /// A count-down latch's zero (`LATCH.AWAIT`): granted to every waiter
    /// at once, owning nothing.
    Latch,
    /// Permits of a permit-expirable semaphore (`PERMIT.ACQUIRE`, contract
    /// §17), each with the ticket's lease (-1: never expires) and an id made
    /// from `seed` (`permit::ids`), which the reply makes again. Nobody's
    /// hold, as a semaphore's.
    Permit { permits: i64, seed: [u64; 2] },
}

impl From<Mode> for Hold {
    fn from(mode: Mode) -> Hold {
        match mode {
            Mode::Read => Hold::Read,
            Mode::Write => Hold::Write { fenced: false },
        }
    }
}

/// One parked acquisition; `token` is what the shell needs to answer it.
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket<T> {
    pub owner: Vec<u8>,
    pub hold: Hold,
    pub lease: i64,
    pub token: T,
    /// One of a multi-hold's tickets, one in each of its locks' queues:
    /// served by the shell, which takes all its holds at once or none.
    pub multi: bool,
    /// `REQUEST id ttl`: the latch its grant records (docs/design.md §14.7).
    pub request: Option<GrantLatch>,
}

/// Tries one acquisition as the command would, on the machine of its kind.
pub fn attempt<S: Permits>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    hold: Hold,
    lease: i64,
) -> Result<Attempt, LockError> {
    match hold {
        Hold::Permit { permits, seed } => permit::acquire(s, names, permits, lease, seed),
        hold => attempt_on(s, names, owner, hold, lease),
    }
}

/// [`attempt`] of a hold whose machine needs no sorted set: every kind but
/// the permit-expirable semaphore's, which it refuses (a multi-hold, whose
/// dry run is a plain [`Store`], lists none).
pub fn attempt_on<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    hold: Hold,
    lease: i64,
) -> Result<Attempt, LockError> {
    match hold {
        Hold::Read => read_lock(s, names, owner, lease),
        Hold::Write { fenced } => write_lock(s, names, owner, lease, fenced),
        Hold::Lock(options) => lock::acquire(s, names, owner, lease, options),
        Hold::Semaphore { permits } => semaphore::acquire(s, names, permits),
        Hold::Latch => latch::reached(s, names),
        Hold::Permit { .. } => Err(LockError::NotAHold),
    }
}

/// [`attempt`], recording a grant in the idempotent acquisition's `latch`
/// (when it has one) in the same command; a refusal records nothing.
pub fn attempt_latched<S: Permits>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    hold: Hold,
    lease: i64,
    latch: Option<&GrantLatch>,
) -> Result<Attempt, LockError> {
    let outcome = attempt(s, names, owner, hold, lease)?;
    if let (Some(latch), Attempt::Granted(granted)) = (latch, outcome) {
        remember_grant(s, latch, granted.token);
    }
    Ok(outcome)
}

/// A waiter taken off the queue: it holds the lock now, or its attempt
/// failed with an error it must be told.
#[derive(Debug, PartialEq, Eq)]
pub struct Served<T> {
    pub ticket: Ticket<T>,
    pub outcome: Result<Granted, LockError>,
}

/// Serves the queue in arrival order: the head acquires while it can, so all
/// consecutive readers (or a latch's waiters) at the head get in together; a multi-hold's ticket
/// at the head stops it, for the shell to serve. A waiter whose attempt
/// fails with an error (a corrupt or retyped key, a non-reentrant lock its
/// owner holds already) leaves with that error rather than blocking the
/// queue.
pub fn admit<S: Permits, T>(
    s: &mut S,
    names: &LockNames,
    queue: &mut VecDeque<Ticket<T>>,
) -> Vec<Served<T>> {
    let mut served = Vec::new();
    while let Some(head) = queue.front().filter(|t| !t.multi) {
        let (owner, hold, lease) = (&head.owner, head.hold, head.lease);
        let outcome = match attempt_latched(s, names, owner, hold, lease, head.request.as_ref()) {
            Ok(Attempt::Refused { .. }) => break,
            Ok(Attempt::Granted(granted)) => Ok(granted),
            Err(e) => Err(e),
        };
        let ticket = queue.pop_front().expect("the head exists");
        served.push(Served { ticket, outcome });
    }
    served
}

/// Fair mode: a new acquisition may go ahead of the waiters only as a
/// re-entry by a current holder (so a holder never deadlocks itself).
pub fn may_overtake<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
) -> Result<bool, LockError> {
    let hash = names.hash();
    match s.kind(hash) {
        KeyKind::Missing => Ok(false),
        KeyKind::Hash => {
            Ok(s.hget(hash, owner).is_some() || s.hget(hash, &write_field(owner)).is_some())
        }
        KeyKind::String | KeyKind::Other => Err(LockError::WrongType),
    }
}

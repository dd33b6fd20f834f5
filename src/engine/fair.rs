//! Redisson's fair lock (`RFairLock`) and its non-reentrant variant as a
//! state machine over a [`Line`] store (docs/design.md, contract §13). The
//! hold is the plain lock's hash `<lock>` (owner → count, TTL = lease); the
//! line is the list `redisson_lock_queue:{lock}` (waiters in arrival order)
//! with the zset `redisson_lock_timeout:{lock}` (each waiter's absolute
//! deadline in ms, past which it counts as gone). Every function follows one
//! of Redisson 4.7's scripts step for step, its odd edges kept (a negative
//! `ttl` stored into a deadline unclamped) but one: an unlock of a missing
//! lock replies nil and latches nothing, where the script replies and
//! latches 1 (docs/design.md §13.5); `now` is the server's clock where the
//! scripts take the client's. All reads that could fail are checked before the first write,
//! so a refused call changes nothing.

use super::error::LockError;
use super::hold::{count_of, deadline, one_more, remember_grant, unlock_latched};
use super::hold::{parse_count, GrantLatch, Granted, Release, Request, Unlocked};
use super::lock::RELEASED;
use super::names::{check_owner, LockNames};
use super::store::{KeyKind, Line, LineKind, Moot, Store};

/// How an acquisition behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairOptions {
    /// `fair_trylock.lua`: never join the line.
    pub no_queue: bool,
    /// The non-reentrant scripts: the holder asking again is an error.
    pub non_reentrant: bool,
    /// Redisson's thread wait time (`fairLockWaitTimeout` or `tryLock`'s
    /// wait): how far a waiter's deadline lies behind the one before it.
    pub wait: i64,
}

/// Outcome of an acquisition: unlike [`super::hold::Attempt`], a refusal
/// carries no PTTL and a waiter may be put in the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairAttempt {
    /// Held now (`reentry` when the owner held it already; no token): reply
    /// nil.
    Granted(Granted),
    /// `NOQUEUE` and not acquired: reply 1.
    Refused,
    /// In the line: reply `ttl`. `joined` when this call put the owner
    /// there (else it was in the zset already and `ttl` is the lock's
    /// PTTL, at least 0).
    Queued { ttl: i64, joined: bool },
}

impl FairAttempt {
    /// Granted, as the fair lock grants: never a token.
    fn granted(reentry: bool) -> FairAttempt {
        FairAttempt::Granted(Granted {
            reentry,
            token: None,
        })
    }

    /// The scripts' reply: nil, 1 or the ttl.
    pub fn reply(self) -> Option<i64> {
        match self {
            FairAttempt::Granted(_) => None,
            FairAttempt::Refused => Some(1),
            FairAttempt::Queued { ttl, .. } => Some(ttl),
        }
    }
}

/// One place in a fair lock's line as `FAIRLOCK.INFO` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineEntry {
    pub owner: Vec<u8>,
    /// Its deadline in the zset, None when it has none.
    pub deadline: Option<i64>,
}

/// What `FAIRLOCK.INFO` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairLockInfo {
    /// Every field of the hash with its count, in byte order.
    pub holders: Vec<(Vec<u8>, i64)>,
    pub pttl: i64,
    /// The line in order.
    pub line: Vec<LineEntry>,
}

/// Checks the three keys' types before anything is written: the hash
/// (true when it exists), the queue list and the deadline zset.
fn check_keys<S: Line>(s: &mut S, names: &LockNames) -> Result<bool, LockError> {
    check_line(s, names)?;
    match s.kind(names.hash()) {
        KeyKind::Missing => Ok(false),
        KeyKind::Hash => Ok(true),
        KeyKind::String | KeyKind::Other => Err(LockError::WrongType),
    }
}

/// [`check_keys`], then the owner's count: whether the lock exists, and
/// how many holds the owner has in it.
fn owner_count<S: Line>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
) -> Result<(bool, Option<i64>), LockError> {
    if check_keys(s, names)? {
        Ok((true, count_of(s, names.hash(), owner)?))
    } else {
        Ok((false, None))
    }
}

/// The queue must be a list and the deadlines a zset, when they exist.
fn check_line<S: Line>(s: &mut S, names: &LockNames) -> Result<(), LockError> {
    let queue_ok = matches!(
        s.line_kind(&names.fair_queue()),
        LineKind::Missing | LineKind::List
    );
    let timeout_ok = matches!(
        s.line_kind(&names.fair_timeout()),
        LineKind::Missing | LineKind::Zset
    );
    if queue_ok && timeout_ok {
        Ok(())
    } else {
        Err(LockError::WrongType)
    }
}

/// The scripts' first step: drops waiters from the head of the line while
/// the head's deadline is `now` or earlier (a head without a deadline stops
/// it). Returns the head left, if any.
pub fn purge<S: Line>(s: &mut S, names: &LockNames, now: i64) -> Option<Vec<u8>> {
    let (queue, timeout) = (names.fair_queue(), names.fair_timeout());
    loop {
        let head = s.lindex(&queue, 0)?;
        match s.zscore(&timeout, &head) {
            Some(at) if at <= now => {
                s.zrem(&timeout, &head);
                s.lpop(&queue);
            }
            _ => return Some(head),
        }
    }
}

/// `FAIRLOCK.ACQUIRE`: `fair_lock.lua` (`fair_trylock.lua` with `no_queue`;
/// the non-reentrant scripts with `non_reentrant`) at the server's clock.
pub fn acquire<S: Line>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    options: FairOptions,
) -> Result<FairAttempt, LockError> {
    check_owner(owner)?;
    let hash = names.hash();
    // The re-entry's HINCRBY would fail on a corrupt count, after the purge.
    let (exists, held) = owner_count(s, names, owner)?;
    if let (Some(n), false) = (held, options.non_reentrant) {
        one_more(n)?;
    }
    let now = s.now_ms();
    let until = deadline(now, lease)?;
    let head = purge(s, names, now);
    let (queue, timeout) = (names.fair_queue(), names.fair_timeout());
    if !exists && head.as_deref().is_none_or(|h| h == owner) {
        s.lpop(&queue);
        s.zrem(&timeout, owner);
        for member in s.zrange(&timeout) {
            s.zincrby(&timeout, -options.wait, &member);
        }
        s.hset(hash, owner, b"1");
        s.expire_at(hash, until);
        return Ok(FairAttempt::granted(false));
    }
    if held.is_some() {
        if options.non_reentrant {
            return Err(LockError::Reentry);
        }
        s.hincrby(hash, owner, 1);
        s.expire_at(hash, until);
        return Ok(FairAttempt::granted(true));
    }
    if options.no_queue {
        return Ok(FairAttempt::Refused);
    }
    if s.zscore(&timeout, owner).is_some() {
        let ttl = s.pttl(hash).max(0);
        return Ok(FairAttempt::Queued { ttl, joined: false });
    }
    let last = s.lindex(&queue, -1).filter(|last| last != owner);
    let ttl = match last.and_then(|last| s.zscore(&timeout, &last)) {
        Some(at) => at - now,
        None => s.pttl(hash),
    };
    let at = ttl.saturating_add(options.wait).saturating_add(now);
    if s.zadd(&timeout, at, owner) {
        s.rpush(&queue, owner);
    }
    Ok(FairAttempt::Queued { ttl, joined: true })
}

/// [`acquire`], recording a grant in the idempotent acquisition's `latch`
/// (`REQUEST id ttl`, read first with [`super::hold::grant_latch`]) in the
/// same command, as 0: the fair lock has no token. A refused or queued call,
/// or an error, records nothing, so its retry tries again (docs/design.md
/// §14.7).
pub fn acquire_latched<S: Line>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    options: FairOptions,
    latch: Option<&GrantLatch>,
) -> Result<FairAttempt, LockError> {
    let taken = acquire(s, names, owner, lease, options)?;
    if let (Some(latch), FairAttempt::Granted(_)) = (latch, taken) {
        remember_grant(s, latch, None);
    }
    Ok(taken)
}

/// `FAIRLOCK.CANCEL`: `fair_acquire_failed.lua`, a waiter giving up. Those
/// behind it in the line move up by `wait`; true when it was in the line or
/// had a deadline.
pub fn cancel<S: Line>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    wait: i64,
) -> Result<bool, LockError> {
    check_owner(owner)?;
    check_line(s, names)?;
    let (queue, timeout) = (names.fair_queue(), names.fair_timeout());
    // The script reads the whole line to find the caller; only those behind
    // it are needed.
    let at = s.lpos(&queue, owner);
    let behind = match at {
        Some(at) => s.lrange_from(&queue, at + 1),
        None => Vec::new(),
    };
    for waiter in &behind {
        s.zincrby(&timeout, -wait, waiter);
    }
    let had_deadline = s.zscore(&timeout, owner).is_some();
    s.zrem(&timeout, owner);
    s.lrem(&queue, owner);
    Ok(had_deadline || at.is_some())
}

/// `FAIRLOCK.UNLOCK`: `fair_unlock.lua`, but a missing lock is
/// [`Release::NotLocked`] (nil, no latch: the caller held nothing, where the
/// script replies and latches 1) and still tells the head of the line; a
/// release tells the head too, on its own channel.
pub fn unlock<S: Line>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    request: Option<Request<'_>>,
) -> Result<Unlocked, LockError> {
    // The head of the line, told after the latch is set when the release
    // frees the lock (the script sets the latch before it publishes).
    let mut head = None;
    let unlocked = unlock_latched(s, names, owner, request, |s| {
        let hash = names.hash();
        let (exists, held) = owner_count(s, names, owner)?;
        let now = s.now_ms();
        let until = deadline(now, lease)?;
        head = purge(s, names, now);
        Ok(if !exists {
            tell(s, names, head.as_deref());
            Release::NotLocked
        } else {
            match held {
                None => Release::NotHeld,
                Some(n) if n > 1 => {
                    s.hincrby(hash, owner, -1);
                    s.expire_at(hash, until);
                    Release::StillHeld
                }
                Some(_) => {
                    s.moot(Moot::Hincrby {
                        key: hash,
                        field: owner,
                        delta: -1,
                    });
                    s.del(hash);
                    Release::Released
                }
            }
        })
    })?;
    if unlocked == Unlocked::Ran(Release::Released) {
        tell(s, names, head.as_deref());
    }
    Ok(unlocked)
}

/// Publishes `0` on the head waiter's own channel, if there is a head.
fn tell<S: Store>(s: &mut S, names: &LockNames, head: Option<&[u8]>) {
    if let Some(head) = head {
        s.publish(&names.waiter_channel(head), RELEASED);
    }
}

/// `FAIRLOCK.FORCEUNLOCK`: `fair_force_unlock.lua`. True when there was a
/// lock to delete (then the head of the line is told). A key of another
/// type is an error, where the script would delete it.
pub fn force_unlock<S: Line>(s: &mut S, names: &LockNames) -> Result<bool, LockError> {
    let exists = check_keys(s, names)?;
    let now = s.now_ms();
    let head = purge(s, names, now);
    if !exists {
        return Ok(false);
    }
    s.del(names.hash());
    tell(s, names, head.as_deref());
    Ok(true)
}

/// The head waiter's owner once stale heads are gone, without changing
/// anything: who the next acquisition must be.
pub fn head<S: Line>(s: &mut S, names: &LockNames, now: i64) -> Result<Option<Vec<u8>>, LockError> {
    check_line(s, names)?;
    let (queue, timeout) = (names.fair_queue(), names.fair_timeout());
    // Element by element: the first live waiter is usually the first.
    let mut at = 0;
    while let Some(waiter) = s.lindex(&queue, at) {
        match s.zscore(&timeout, &waiter) {
            Some(deadline) if deadline <= now => at += 1,
            _ => return Ok(Some(waiter)),
        }
    }
    Ok(None)
}

/// `FAIRLOCK.INFO`: read-only.
pub fn info<S: Line>(s: &mut S, names: &LockNames) -> Result<FairLockInfo, LockError> {
    let hash = names.hash();
    let mut holders = Vec::new();
    if check_keys(s, names)? {
        for (field, value) in s.hgetall(hash).iter() {
            holders.push((field.to_vec(), parse_count(value)?));
        }
        holders.sort();
    }
    let timeout = names.fair_timeout();
    let line = s
        .lrange(&names.fair_queue())
        .into_iter()
        .map(|owner| LineEntry {
            deadline: s.zscore(&timeout, &owner),
            owner,
        })
        .collect();
    Ok(FairLockInfo {
        holders,
        pttl: s.pttl(hash),
        line,
    })
}

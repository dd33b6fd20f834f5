//! Redisson's semaphore (`RSemaphore`) as a state machine over a [`Store`]
//! (docs/design.md, contract §15). The free permits are the string
//! `<name>`, an integer that may be negative; new counts are published on
//! `redisson_sc:{name}`. Nobody owns a permit: anyone may release. Each
//! command does what Redisson 4.7's script for it does to the keys, events
//! and channel, after checking what it reads, so a refused or failing call
//! changes nothing.

use super::error::LockError;
use super::hold::{deadline, latched, Attempt, Granted, Release, Request, Unlocked};
use super::int::{decimal, DECIMAL_LEN};
use super::names::LockNames;
use super::store::{integer_at, KeyKind, Store};

/// The count, None when the semaphore does not exist. A key of another type
/// or a count that is not an integer is an error.
fn count<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<i64>, LockError> {
    integer_at(s, key, LockError::BadCount)
}

/// Publishes the new count, as the scripts that raise it do.
fn announce<S: Store>(s: &mut S, names: &LockNames, count: i64) {
    let mut digits = [0; DECIMAL_LEN];
    s.publish(&names.semaphore_channel(), decimal(count, &mut digits));
}

/// `SEMAPHORE.ACQUIRE`: as `semaphore_acquire.lua` (`tryAcquire(n)`). At
/// least `permits` free: they are taken (`DECRBY`, the TTL kept, nothing
/// published). Else refused with the key's PTTL, which the reply does not
/// show (it is 0, as the script's).
pub fn acquire<S: Store>(s: &mut S, names: &LockNames, permits: i64) -> Result<Attempt, LockError> {
    let key = names.hash();
    match count(s, key)? {
        Some(free) if free >= permits => {
            s.add_to(key, -permits);
            Ok(Attempt::Granted(Granted {
                reentry: false,
                token: None,
            }))
        }
        _ => Ok(Attempt::Refused { pttl: s.pttl(key) }),
    }
}

/// `SEMAPHORE.RELEASE`: as `semaphore_release.lua` (`release(n)`): the
/// count raised by `permits` (`INCRBY`: a missing count starts at 0, the
/// TTL stays) and the new count published; `Released`. With `if_exists`,
/// as `semaphore_release_if_exists.lua`: nothing when there is no count
/// (`NotHeld`). With `request`, a retry within the latch's TTL replays and
/// gives nothing back twice.
pub fn release<S: Store>(
    s: &mut S,
    names: &LockNames,
    permits: i64,
    if_exists: bool,
    request: Option<Request<'_>>,
) -> Result<Unlocked, LockError> {
    latched(s, names, request, |s| {
        let key = names.hash();
        let current = match count(s, key)? {
            None if if_exists => return Ok(Release::NotHeld),
            current => current.unwrap_or(0),
        };
        let next = current
            .checked_add(permits)
            .ok_or(LockError::PermitsOverflow)?;
        s.add_to(key, permits);
        announce(s, names, next);
        Ok(Release::Released)
    })
}

/// `SEMAPHORE.TRYSETPERMITS`: as `semaphore_try_set.lua` (with `ttl`,
/// `semaphore_try_set_ttl.lua`). No count yet: it is set to `permits`
/// (`SET`, or `SET … PX ttl`) and published; true. A count exists: false,
/// nothing changed.
pub fn try_set<S: Store>(
    s: &mut S,
    names: &LockNames,
    permits: i64,
    ttl: Option<i64>,
) -> Result<bool, LockError> {
    let key = names.hash();
    match s.kind(key) {
        KeyKind::Missing => {}
        KeyKind::String => return Ok(false),
        KeyKind::Hash | KeyKind::Other => return Err(LockError::WrongType),
    }
    let mut digits = [0; DECIMAL_LEN];
    let value = decimal(permits, &mut digits);
    match ttl {
        Some(ms) => {
            let until = deadline(s.now_ms(), ms)?;
            s.set_until(key, value, until);
        }
        None => s.set(key, value),
    }
    announce(s, names, permits);
    Ok(true)
}

/// `SEMAPHORE.ADDPERMITS`: as `semaphore_add.lua` (`addPermits(n)`): the
/// count becomes count + `n` (a missing count is 0; `n` may be negative and
/// the count go below 0), written with `SET`, which drops a TTL, and
/// published. Returns the new count.
pub fn add<S: Store>(s: &mut S, names: &LockNames, n: i64) -> Result<i64, LockError> {
    let key = names.hash();
    let next = count(s, key)?
        .unwrap_or(0)
        .checked_add(n)
        .ok_or(LockError::PermitsOverflow)?;
    let mut digits = [0; DECIMAL_LEN];
    s.set(key, decimal(next, &mut digits));
    announce(s, names, next);
    Ok(next)
}

/// `SEMAPHORE.DRAIN`: as `semaphore_drain.lua` (`drainPermits()`): the
/// count before, set to 0 (`SET`, which drops a TTL; nothing published);
/// 0 and nothing done when there is no count.
pub fn drain<S: Store>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    let key = names.hash();
    let Some(before) = count(s, key)? else {
        return Ok(0);
    };
    s.set(key, b"0");
    Ok(before)
}

/// `SEMAPHORE.AVAILABLE`: the count (`availablePermits()`'s `GET`), 0 when
/// there is none. Read-only.
pub fn available<S: Store>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    Ok(count(s, names.hash())?.unwrap_or(0))
}

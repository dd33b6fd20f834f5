//! Redisson's plain reentrant lock (`RLock`) as a state machine over a
//! [`Store`], with its fenced (`RFencedLock`) and non-reentrant variants
//! (docs/design.md, contract §10). The lock is the hash `<lock>` with one
//! field per holder, `<owner>` → hold count, whose TTL is the lease. As in
//! the read-write machine, every command checks what it reads before it
//! writes, so a refused or failing call changes nothing.

use super::error::LockError;
use super::hold::{count_of, deadline, one_more, renew_held, token_key, unlock_latched};
use super::hold::{parse_count, Attempt, Granted, Release, Request, Unlocked};
use super::names::{check_owner, LockNames, MODE_FIELD};
use super::store::{integer_at, KeyKind, Moot, Store};

/// Payload published when the lock ends (Redisson's `UNLOCK_MESSAGE`).
pub const RELEASED: &[u8] = b"0";

/// How an acquisition treats the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    /// Take the next fencing token on every acquisition, re-entry included.
    pub fenced: bool,
    /// The holder may not take it again (`NON_REENTRANT_REACQUIRE`).
    pub non_reentrant: bool,
}

/// What `LOCK.INFO` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// Every field of the hash with its count, in byte order (one holder for
    /// a plain lock).
    pub holders: Vec<(Vec<u8>, i64)>,
    pub pttl: i64,
    /// The current fencing token, when the counter exists.
    pub token: Option<i64>,
}

/// Whether the lock exists, checking it is a hash.
fn exists<S: Store>(s: &mut S, hash: &[u8]) -> Result<bool, LockError> {
    match s.kind(hash) {
        KeyKind::Missing => Ok(false),
        KeyKind::Hash => Ok(true),
        KeyKind::String | KeyKind::Other => Err(LockError::WrongType),
    }
}

/// The owner's hold count, None when the lock or its field is missing.
fn held_by<S: Store>(s: &mut S, hash: &[u8], owner: &[u8]) -> Result<Option<i64>, LockError> {
    if exists(s, hash)? {
        count_of(s, hash, owner)
    } else {
        Ok(None)
    }
}

/// `LOCK.ACQUIRE`: as Redisson's `lock.lua` (`fenced_lock.lua` with
/// `fenced`, `nonreentrant_lock.lua` with `non_reentrant`). A free lock or
/// one the owner holds: one more hold, the TTL set to `lease` (a re-entry
/// resets it, where the read-write lock's write hold adds).
pub fn acquire<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    options: Options,
) -> Result<Attempt, LockError> {
    check_owner(owner)?;
    let hash = names.hash();
    let held = if exists(s, hash)? {
        match count_of(s, hash, owner)? {
            None => return Ok(Attempt::Refused { pttl: s.pttl(hash) }),
            Some(_) if options.non_reentrant => return Err(LockError::Reentry),
            Some(held) => Some(held),
        }
    } else {
        None
    };
    one_more(held.unwrap_or(0))?;
    let until = deadline(s.now_ms(), lease)?;
    let token_key = token_key(s, names, options.fenced)?;
    // The scripts' order of writes: the token, the count, the TTL.
    let token = token_key.map(|next| next.take(s));
    // A count the read-write machine's lease index does not track, on a
    // name it may also serve.
    s.forget_lease_index(hash);
    s.hincrby(hash, owner, 1);
    s.expire_at(hash, until);
    let reentry = held.is_some();
    Ok(Attempt::Granted(Granted { reentry, token }))
}

/// `LOCK.UNLOCK`: as Redisson's `unlock.lua`. Releases one hold of
/// `owner`: the lock re-armed with `lease` while holds are left, else
/// deleted and `0` published on its channel. With `request`, a retry within
/// the latch's TTL replies what the first call did.
pub fn unlock<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    request: Option<Request<'_>>,
) -> Result<Unlocked, LockError> {
    unlock_latched(s, names, owner, request, |s| {
        let hash = names.hash();
        Ok(match held_by(s, hash, owner)? {
            None => Release::NotHeld,
            Some(held) if held > 1 => {
                let until = deadline(s.now_ms(), lease)?;
                // A read-write lock's index would keep the leases of holds its
                // hash no longer counts.
                s.forget_lease_index(hash);
                s.hincrby(hash, owner, -1);
                s.expire_at(hash, until);
                Release::StillHeld
            }
            Some(_) => {
                s.forget_lease_index(hash);
                // The count reaches 0 and the hash goes: the decrement is moot.
                s.moot(Moot::Hincrby {
                    key: hash,
                    field: owner,
                    delta: -1,
                });
                s.del(hash);
                s.publish(&names.lock_channel(), RELEASED);
                Release::Released
            }
        })
    })
}

/// `LOCK.RENEW`: as Redisson's `renew.lua` for one lock, the watchdog's
/// call. True, with the TTL set to `lease`, when the owner holds the lock.
pub fn renew<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
) -> Result<bool, LockError> {
    let held = |s: &mut S, hash: &[u8]| held_by(s, hash, owner);
    renew_held(s, names, owner, lease, held, |_, _, _, _| {})
}

/// `LOCK.FORCEUNLOCK`: as Redisson's `force_unlock.lua`, whoever holds it;
/// true when there was a lock to delete. A key of another type is an error,
/// where the script would delete it.
pub fn force_unlock<S: Store>(s: &mut S, names: &LockNames) -> Result<bool, LockError> {
    let hash = names.hash();
    if !exists(s, hash)? {
        return Ok(false);
    }
    s.forget_lease_index(hash);
    s.del(hash);
    s.publish(&names.lock_channel(), RELEASED);
    Ok(true)
}

/// `LOCK.INFO`: read-only.
pub fn info<S: Store>(s: &mut S, names: &LockNames) -> Result<LockInfo, LockError> {
    let hash = names.hash();
    let mut holders = Vec::new();
    if exists(s, hash)? {
        // A read-write lock's hash shows its holds' fields as they are, its
        // `mode` left out: the plain machine reads that data as its scripts do.
        for (field, value) in s.hgetall(hash).iter().filter(|(f, _)| *f != MODE_FIELD) {
            holders.push((field.to_vec(), parse_count(value)?));
        }
        holders.sort();
    }
    let token_key = names.token_key();
    let token = integer_at(s, &token_key, LockError::BadToken)?;
    Ok(LockInfo {
        holders,
        pttl: s.pttl(hash),
        token,
    })
}

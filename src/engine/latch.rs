//! The count-down latch's machine (docs/design.md, contract §16):
//! Redisson's `RCountDownLatch` on its own data. The count is the string
//! `<name>`; its channel `redisson_countdownlatch__channel__{<name>}` gets
//! `0` when the count reaches zero and `1` on a new count or a delete, as
//! Redisson 4.7's scripts publish them, so Redisson's `await()` wakes.

use super::error::LockError;
use super::hold::{Attempt, Granted};
use super::int::{decimal, DECIMAL_LEN};
use super::names::LockNames;
use super::store::{integer_at, KeyKind, Store};

const CHANNEL_PREFIX: &[u8] = b"redisson_countdownlatch__channel__{";
/// Published when the count reaches zero (Redisson's `ZERO_COUNT_MESSAGE`).
pub const ZERO_MESSAGE: &[u8] = b"0";
/// Published on a new count and on a delete (`NEW_COUNT_MESSAGE`).
pub const NEW_COUNT_MESSAGE: &[u8] = b"1";

/// The names of the latch `name`, which is its own count's key. Redisson
/// wraps the name in braces for the channel whatever it holds, so a name
/// with braces would put the channel in another hash slot than the count;
/// such names are refused (and so are the lock names' other refusals).
pub fn names(name: &[u8]) -> Result<LockNames<'_>, LockError> {
    if name.iter().any(|&b| b == b'{' || b == b'}') {
        return Err(LockError::LatchName);
    }
    LockNames::new(name).map_err(|_| LockError::LatchName)
}

/// Redisson's channel of the latch: `redisson_countdownlatch__channel__{<name>}`.
pub fn channel(names: &LockNames) -> Vec<u8> {
    [CHANNEL_PREFIX, names.hash(), b"}"].concat()
}

/// The count as stored: `None` when there is no latch. Read and checked
/// before any write, so an error changes nothing.
fn stored<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<i64>, LockError> {
    integer_at(s, key, LockError::LatchCount)
}

/// `trySetCount`: when no key has the name, the count becomes `count`
/// (`SET`) and `1` is published; true. Any key there, of any type, leaves
/// everything as it is (the script tests `EXISTS`); false.
pub fn try_set_count<S: Store>(s: &mut S, names: &LockNames, count: i64) -> bool {
    let key = names.hash();
    if s.kind(key) != KeyKind::Missing {
        return false;
    }
    let mut buf = [0; DECIMAL_LEN];
    s.set(key, decimal(count, &mut buf));
    s.publish(&channel(names), NEW_COUNT_MESSAGE);
    true
}

/// `countDown`: the count minus one (`DECR`, which makes a missing latch
/// -1); at zero or below the key is deleted, and at exactly zero `0` is
/// published. The count left.
pub fn count_down<S: Store>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    let key = names.hash();
    let next = stored(s, key)?
        .unwrap_or(0)
        .checked_sub(1)
        .ok_or(LockError::Overflow)?;
    s.add_to(key, -1);
    if next <= 0 {
        s.del(key);
    }
    if next == 0 {
        s.publish(&channel(names), ZERO_MESSAGE);
    }
    Ok(next)
}

/// `getCount`: the count, 0 when there is no latch.
pub fn count<S: Store>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    Ok(stored(s, names.hash())?.unwrap_or(0))
}

/// `delete`: the latch deleted and `1` published; true. False when there
/// is none. A key of another type is refused (the script's `DEL` would
/// delete it, contract §16.7).
pub fn delete<S: Store>(s: &mut S, names: &LockNames) -> Result<bool, LockError> {
    let key = names.hash();
    match s.kind(key) {
        KeyKind::Missing => Ok(false),
        KeyKind::String => {
            s.del(key);
            s.publish(&channel(names), NEW_COUNT_MESSAGE);
            Ok(true)
        }
        KeyKind::Hash | KeyKind::Other => Err(LockError::WrongType),
    }
}

/// `await`'s question, as a waiter's attempt: granted (it holds nothing)
/// when the latch is gone or its count is zero or below, else refused with
/// the key's PTTL (a latch given a TTL by someone wakes its waiters when it
/// runs out). Reads only.
pub fn reached<S: Store>(s: &mut S, names: &LockNames) -> Result<Attempt, LockError> {
    let key = names.hash();
    match stored(s, key)? {
        Some(left) if left > 0 => Ok(Attempt::Refused { pttl: s.pttl(key) }),
        _ => Ok(Attempt::Granted(Granted {
            reentry: false,
            token: None,
        })),
    }
}

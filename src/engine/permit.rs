//! Redisson's permit-expirable semaphore (`RPermitExpirableSemaphore`) as a
//! state machine over a [`Store`] (docs/design.md, contract §17). The free
//! permits are the string `<name>` (an integer that may be negative), the
//! permits taken the sorted set `{<name>}:timeout` of permit id → absolute
//! expiry ms ([`NEVER`] for a permit that never expires); new counts are
//! published on `redisson_sc:{name}`. Each command does to the keys, events
//! and channel what Redisson 4.7's script for it does, after checking
//! everything it reads, so a refused or failing call changes nothing.
//!
//! Every script but the single release and the two that set permits first
//! reclaims the permits whose expiry has passed ([`reclaim`]); the module
//! also looks at the nearest expiry while its clients wait (the waiting
//! registry's deadline, `waiting::clients`), so a waiter is served when a
//! crashed holder's permit runs out.

use super::error::LockError;
use super::hold::{deadline, Attempt, Granted};
use super::int::{decimal, DECIMAL_LEN};
use super::names::LockNames;
use super::store::{integer_at, Line, LineKind};

/// The expiry Redisson writes for a permit acquired without a lease
/// (`nonExpirableTimeout`): the scripts compare scores with it.
pub const NEVER: i64 = 922_337_203_685_477;

/// Most permits one acquisition takes: each is an id in the reply and a
/// member of the set, so a bound keeps one call from stalling the server
/// (Redisson takes an `int` and makes an id per permit on the client).
pub const MAX_PERMITS: i64 = 100_000;

/// Bytes of a permit id, as Redisson makes them (`generateIdArray`).
pub const ID_LEN: usize = 16;

/// What a refused acquisition replies when no permit held will expire
/// (none is held, or the first never expires): the script's nil.
pub const NO_EXPIRY: i64 = i64::MIN;

/// The sorted-set reads and writes of Redisson's permit scripts beyond the
/// fair lock's ([`Line`]), each with the keyspace event and the replicated
/// effect the same command has when a script runs it. Scores are whole
/// milliseconds, as every score the scripts and commands write is.
pub trait Permits: Line {
    /// `ZRANGEBYSCORE key 0 max LIMIT 0 limit` (`None`: no limit): the
    /// members scored from 0 to `max`, lowest first.
    fn zrange_by_score(&mut self, key: &[u8], max: i64, limit: Option<usize>) -> Vec<Vec<u8>>;
    /// One `ZREM key member…` of members that may be absent or repeated:
    /// event `zrem` (and `del` when the set empties) when it removed any;
    /// how many it removed.
    fn zrem_all(&mut self, key: &[u8], members: &[Vec<u8>]) -> i64;
    /// `ZCOUNT key 0 +inf`.
    fn zcount_from_zero(&mut self, key: &[u8]) -> i64;
    /// The lowest score, as `ZRANGE key 0 0 WITHSCORES` gives it; from 0
    /// up only (`ZRANGEBYSCORE key 0 +inf LIMIT 0 1`) with `from_zero`.
    fn zfirst_score(&mut self, key: &[u8], from_zero: bool) -> Option<i64>;
}

/// The `n` permit ids of one acquisition, made from its `seed` (random, or
/// the request id's for `REQUEST`): a reply computes them again from the
/// hold, which stays a small `Copy` value in the waiters' queues.
pub fn ids(seed: [u64; 2], n: i64) -> impl Iterator<Item = [u8; ID_LEN]> {
    (0..n as u64).map(move |i| {
        let high = mix(seed[0] ^ mix(i));
        let low = mix(seed[1].wrapping_add(high) ^ i);
        let mut id = [0; ID_LEN];
        id[..8].copy_from_slice(&high.to_be_bytes());
        id[8..].copy_from_slice(&low.to_be_bytes());
        id
    })
}

/// A seed from a request id, the same on every node and build, so a retry
/// of an idempotent acquisition replies the ids the first call took.
pub fn request_seed(request_id: &[u8]) -> [u64; 2] {
    // FNV-1a, twice with different bases, each then mixed.
    let fnv = |basis: u64| {
        request_id.iter().fold(basis, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    [
        mix(fnv(0xcbf2_9ce4_8422_2325)),
        mix(fnv(0x6c62_272e_07bb_0142)),
    ]
}

/// SplitMix64's finalizer: every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// An id as Redisson's Java shows it: lower-case hex (`ByteBufUtil.hexDump`).
pub fn hex(id: &[u8]) -> Vec<u8> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    id.iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .collect()
}

/// The bytes of a hex id (either case, as `ByteBufUtil.decodeHexDump`
/// reads it); None for an empty, odd-length or non-hex argument.
pub fn parse_id(text: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    text.chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// The count, checked as the scripts read it, and the set's type: None
/// when there is no count. A count that is not an integer, a key of another
/// type at either name, fails before anything is written.
fn check<S: Permits>(s: &mut S, names: &LockNames) -> Result<Option<i64>, LockError> {
    let count = free(s, names)?;
    check_set(s, names)?;
    Ok(count)
}

/// The count alone, for the scripts that never read the set.
fn free<S: Permits>(s: &mut S, names: &LockNames) -> Result<Option<i64>, LockError> {
    integer_at(s, names.hash(), LockError::BadCount)
}

/// The set of permits taken is a sorted set or missing.
fn check_set<S: Permits>(s: &mut S, names: &LockNames) -> Result<(), LockError> {
    match s.line_kind(&names.permit_timeout()) {
        LineKind::Missing | LineKind::Zset => Ok(()),
        LineKind::List | LineKind::Other => Err(LockError::WrongType),
    }
}

/// `count + n` in 64 bits, a missing count read as 0.
fn plus(count: Option<i64>, n: i64) -> Result<i64, LockError> {
    count
        .unwrap_or(0)
        .checked_add(n)
        .ok_or(LockError::PermitsOverflow)
}

fn announce<S: Permits>(s: &mut S, names: &LockNames, n: i64) {
    let mut digits = [0; DECIMAL_LEN];
    s.publish(&names.semaphore_channel(), decimal(n, &mut digits));
}

/// The scripts' reclaim: the permits expired by `now` (at most `limit`),
/// one `ZREM` of them, the count raised by as many (`INCRBY`, which makes a
/// missing count) and the new count published when above 0. `more` is
/// what the caller will add after it, checked here with the reclaim so
/// that an overflow fails before the first write. Returns the count after.
fn reclaim<S: Permits>(
    s: &mut S,
    names: &LockNames,
    count: Option<i64>,
    now: i64,
    limit: Option<usize>,
    more: i64,
) -> Result<Option<i64>, LockError> {
    let set = names.permit_timeout();
    let expired = s.zrange_by_score(&set, now, limit);
    if expired.is_empty() {
        plus(count, more)?;
        return Ok(count);
    }
    let n = expired.len() as i64;
    let after = plus(count, n)?;
    plus(Some(after), more)?;
    s.zrem_all(&set, &expired);
    s.add_to(names.hash(), n);
    if after > 0 {
        announce(s, names, after);
    }
    Ok(Some(after))
}

/// The expiry of a permit taken now with `lease` ms (-1: [`NEVER`]).
fn expiry(now: i64, lease: i64) -> Result<i64, LockError> {
    if lease < 0 {
        Ok(NEVER)
    } else {
        deadline(now, lease)
    }
}

/// `PERMIT.ACQUIRE`: as `permit_acquire.lua` (`tryAcquire(n, lease)`): up
/// to `permits` expired permits reclaimed; then, with at least `permits`
/// free, they are taken (`DECRBY`), each id of `seed` added with its expiry
/// (`lease` ms from now, or [`NEVER`] for -1) and the count's TTL, if any,
/// given to the set. Refused: `pttl` is the lowest expiry held, or
/// [`NO_EXPIRY`] when none is held or it never expires.
pub fn acquire<S: Permits>(
    s: &mut S,
    names: &LockNames,
    permits: i64,
    lease: i64,
    seed: [u64; 2],
) -> Result<Attempt, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    let until = expiry(now, lease)?;
    let limit = usize::try_from(permits).unwrap_or(usize::MAX);
    let count = reclaim(s, names, count, now, Some(limit), 0)?;
    let set = names.permit_timeout();
    match count {
        Some(free) if free >= permits => {
            let key = names.hash();
            s.add_to(key, -permits);
            for id in ids(seed, permits) {
                s.zadd(&set, until, &id);
            }
            let ttl = s.pttl(key);
            if ttl > 0 {
                s.expire_at(&set, now.saturating_add(ttl));
            }
            Ok(Attempt::Granted(Granted {
                reentry: false,
                token: None,
            }))
        }
        _ => Ok(refusal(s, names)),
    }
}

/// What a refused acquisition answers: the lowest expiry held, unless it
/// is [`NEVER`] or nothing is held ([`NO_EXPIRY`]). Read-only.
pub fn refusal<S: Permits>(s: &mut S, names: &LockNames) -> Attempt {
    let first = s.zfirst_score(&names.permit_timeout(), false);
    Attempt::Refused {
        pttl: first.filter(|at| *at != NEVER).unwrap_or(NO_EXPIRY),
    }
}

/// When the first permit held expires, for the waiters' agenda: None when
/// none is held, the set is of another type or the first never expires.
/// Scores below 0, which no script reclaims (its range starts at 0), are
/// passed over: a deadline in the past that no look can clear would fire
/// again at once, for ever.
pub fn next_expiry<S: Permits>(s: &mut S, names: &LockNames) -> Option<i64> {
    let set = names.permit_timeout();
    if s.line_kind(&set) != LineKind::Zset {
        return None;
    }
    s.zfirst_score(&set, true).filter(|at| *at != NEVER)
}

/// `PERMIT.RELEASE` of several ids: as `permit_release_list.lua`
/// (`tryRelease(ids)`): 0 and nothing done when an id is not held or its
/// expiry has passed; else every expired permit reclaimed, the ids removed
/// (one `ZREM`), the count raised by how many were removed and that number
/// (not the new count) published. Returns how many were removed.
pub fn release<S: Permits>(
    s: &mut S,
    names: &LockNames,
    ids: &[Vec<u8>],
) -> Result<i64, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    let set = names.permit_timeout();
    for id in ids {
        match s.zscore(&set, id) {
            Some(at) if at > now => {}
            _ => return Ok(0),
        }
    }
    let mut distinct: Vec<&Vec<u8>> = ids.iter().collect();
    distinct.sort();
    distinct.dedup();
    reclaim(s, names, count, now, None, distinct.len() as i64)?;
    let removed = s.zrem_all(&set, ids);
    s.add_to(names.hash(), removed);
    announce(s, names, removed);
    Ok(removed)
}

/// `PERMIT.TRYRELEASE`: as `permit_release.lua` (`tryRelease(id)`), with
/// no reclaim: a held id is removed, the count raised by 1 and the new
/// count published; `Some(true)`, or `Some(false)` when its expiry had
/// passed (the permit comes back all the same: the script replies 0).
/// None and nothing done when it is not held.
pub fn release_one<S: Permits>(
    s: &mut S,
    names: &LockNames,
    id: &[u8],
) -> Result<Option<bool>, LockError> {
    let count = check(s, names)?;
    let set = names.permit_timeout();
    let Some(at) = s.zscore(&set, id) else {
        return Ok(None);
    };
    let next = plus(count, 1)?;
    let now = s.now_ms();
    s.zrem(&set, id);
    s.add_to(names.hash(), 1);
    announce(s, names, next);
    Ok(Some(at > now))
}

/// `PERMIT.UPDATELEASE`: as `permit_update_lease.lua`
/// (`updateLeaseTime(id, lease)`): expired permits reclaimed; a held id
/// gets the expiry `lease` ms from now (-1: [`NEVER`]): true; false when
/// it is not held (or was just reclaimed).
pub fn update_lease<S: Permits>(
    s: &mut S,
    names: &LockNames,
    id: &[u8],
    lease: i64,
) -> Result<bool, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    let until = expiry(now, lease)?;
    reclaim(s, names, count, now, None, 0)?;
    let set = names.permit_timeout();
    if s.zscore(&set, id).is_none() {
        return Ok(false);
    }
    s.zadd(&set, until, id);
    Ok(true)
}

/// `PERMIT.LEASETIME`: as `permit_lease_time.lua` (`getLeaseTime(id)`):
/// expired permits reclaimed; the ms left of a held id, -1 when it never
/// expires, 0 when it is not held.
pub fn lease_time<S: Permits>(s: &mut S, names: &LockNames, id: &[u8]) -> Result<i64, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    reclaim(s, names, count, now, None, 0)?;
    Ok(match s.zscore(&names.permit_timeout(), id) {
        None => 0,
        Some(NEVER) => -1,
        Some(at) => at - now,
    })
}

/// `PERMIT.SETPERMITS`: as `permit_set.lua` (`setPermits(n)`), with no
/// reclaim: no count: set to `permits` and published; else the count moved
/// (`INCRBY`) so that free plus taken (`ZCOUNT 0 +inf`) is `permits`, and
/// `permits` published, unless it is so already.
pub fn set_permits<S: Permits>(
    s: &mut S,
    names: &LockNames,
    permits: i64,
) -> Result<(), LockError> {
    let key = names.hash();
    let Some(free) = free(s, names)? else {
        let mut digits = [0; DECIMAL_LEN];
        s.set(key, decimal(permits, &mut digits));
        announce(s, names, permits);
        return Ok(());
    };
    check_set(s, names)?;
    let taken = s.zcount_from_zero(&names.permit_timeout());
    let total = plus(Some(free), taken)?;
    if total == permits {
        return Ok(());
    }
    let by = permits
        .checked_sub(total)
        .ok_or(LockError::PermitsOverflow)?;
    plus(Some(free), by)?;
    s.add_to(key, by);
    announce(s, names, permits);
    Ok(())
}

/// `PERMIT.ADDPERMITS`: as `permit_add.lua` (`addPermits(n)`): the count
/// set (`SET`, which drops a TTL) to count + `n` (a missing count is 0),
/// and `n` (not the new count) published when above 0. Returns the count.
pub fn add<S: Permits>(s: &mut S, names: &LockNames, n: i64) -> Result<i64, LockError> {
    let count = free(s, names)?;
    let next = plus(count, n)?;
    let mut digits = [0; DECIMAL_LEN];
    s.set(names.hash(), decimal(next, &mut digits));
    if n > 0 {
        announce(s, names, n);
    }
    Ok(next)
}

/// `PERMIT.AVAILABLE`: as `permit_available.lua` (`availablePermits()`):
/// expired permits reclaimed; the free count, 0 when there is none.
pub fn available<S: Permits>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    Ok(reclaim(s, names, count, now, None, 0)?.unwrap_or(0))
}

/// `PERMIT.PERMITS`: as `permit_get_permits.lua` (`getPermits()`): expired
/// permits reclaimed; free plus taken, 0 when there is no count.
pub fn permits<S: Permits>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    let Some(free) = reclaim(s, names, count, now, None, 0)? else {
        return Ok(0);
    };
    let taken = s.zcount_from_zero(&names.permit_timeout());
    plus(Some(free), taken)
}

/// `PERMIT.ACQUIRED`: as `permit_acquired.lua` (`acquiredPermits()`):
/// expired permits reclaimed; how many are taken.
pub fn acquired<S: Permits>(s: &mut S, names: &LockNames) -> Result<i64, LockError> {
    let count = check(s, names)?;
    let now = s.now_ms();
    reclaim(s, names, count, now, None, 0)?;
    Ok(s.zcount_from_zero(&names.permit_timeout()))
}

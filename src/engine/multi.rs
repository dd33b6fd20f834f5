//! Several holds of distinct locks as one step (docs/design.md, contract
//! §11): `LOCK.ACQUIREALL` takes all or none, `LOCK.UNLOCKALL` and
//! `LOCK.RENEWALL` release or renew each. Every machine reads and checks
//! what it needs before it writes, and distinct names share no key, so each
//! hold is first decided on a [`DryRun`] of the store, which drops the
//! writes: only when every hold would succeed is any of them made.

use super::error::LockError;
use super::hold::{Attempt, Granted, Unlocked};
use super::index::LeaseIndex;
use super::kinds::{self, Kind};
use super::names::LockNames;
use super::queue::{attempt_on as attempt, Hold};
use super::store::{Fields, KeyKind, Moot, Store, PTTL_PERSISTENT};

/// One listed hold: its lock and what is asked of it, `LOCK`, `READ` or
/// `WRITE` (no fencing token, no `NOREENTRY`: their replies have no place
/// in the multi-hold's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want<'a> {
    pub names: LockNames<'a>,
    pub hold: Hold,
}

/// The longer of two waits a refusal reports: a lock without TTL (`-1`)
/// is held until released, longer than any PTTL.
pub fn longer(a: i64, b: i64) -> i64 {
    if a == PTTL_PERSISTENT || b == PTTL_PERSISTENT {
        PTTL_PERSISTENT
    } else {
        a.max(b)
    }
}

/// Whether every hold could be taken now: None when all could, else the
/// largest PTTL among the locks in the way. Writes nothing.
pub fn refusal<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Option<i64>, LockError> {
    let mut dry = DryRun(s);
    let mut refused = None;
    for w in wants {
        if let Attempt::Refused { pttl } = attempt(&mut dry, &w.names, owner, w.hold, lease)? {
            refused = Some(refused.map_or(pttl, |p| longer(p, pttl)));
        }
    }
    Ok(refused)
}

/// `LOCK.ACQUIREALL`: every hold as its single command takes it, or none:
/// granted with each hold's grant in the listed order, or nothing taken and
/// the largest PTTL among the locks in the way.
/// An error on any hold (a wrong type, a corrupt lock) changes nothing.
pub fn acquire_all<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Attempt<Vec<Granted>>, LockError> {
    if let Some(pttl) = refusal(s, owner, lease, wants)? {
        return Ok(Attempt::Refused { pttl });
    }
    let mut granted = Vec::with_capacity(wants.len());
    for w in wants {
        match attempt(s, &w.names, owner, w.hold, lease)? {
            Attempt::Granted(g) => granted.push(g),
            // The dry run read the same keys: a refusal now would mean a
            // machine that writes before it decides.
            Attempt::Refused { pttl } => return Ok(Attempt::Refused { pttl }),
        }
    }
    Ok(Attempt::Granted(granted))
}

/// What `LOCK.UNLOCKALL` and `LOCK.RENEWALL` make of each listed hold: its
/// single command's change, generic over the store so that [`each`] can
/// decide it on a [`DryRun`] first (a closure cannot be).
trait EachHold {
    type Reply;
    fn change<S: Store>(&self, s: &mut S, w: &Want) -> Result<Self::Reply, LockError>;
}

/// `Release(owner, lease)`: one hold released as its single unlock (`lease`:
/// the TTL re-armed while holds are left).
struct Release<'o>(&'o [u8], i64);

impl EachHold for Release<'_> {
    type Reply = Unlocked;
    fn change<S: Store>(&self, s: &mut S, w: &Want) -> Result<Unlocked, LockError> {
        kinds::release(s, &w.names, Kind::try_from(w.hold)?, self.0, self.1)
    }
}

/// `Renew(owner, lease)`: one lock renewed as its single renew.
struct Renew<'o>(&'o [u8], i64);

impl EachHold for Renew<'_> {
    type Reply = bool;
    fn change<S: Store>(&self, s: &mut S, w: &Want) -> Result<bool, LockError> {
        kinds::renew(s, &w.names, Kind::try_from(w.hold)?, self.0, self.1)
    }
}

/// `step` made to every hold in the listed order, after checking on a
/// [`DryRun`] that none fails.
fn each<S: Store, E: EachHold>(
    s: &mut S,
    wants: &[Want],
    step: E,
) -> Result<Vec<E::Reply>, LockError> {
    for w in wants {
        step.change(&mut DryRun(s), w)?;
    }
    wants.iter().map(|w| step.change(s, w)).collect()
}

/// `LOCK.UNLOCKALL`: one hold of each released as its single unlock does
/// (the per-hold replies nil, 0 or 1), after checking that none fails.
pub fn unlock_all<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Vec<Unlocked>, LockError> {
    each(s, wants, Release(owner, lease))
}

/// `LOCK.RENEWALL`: each lock renewed as its single renew does (true when
/// the owner held it), after checking that none fails.
pub fn renew_all<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Vec<bool>, LockError> {
    each(s, wants, Renew(owner, lease))
}

/// A store whose reads are the store's and whose writes go nowhere: the
/// machines decide on it what they would do.
pub struct DryRun<'s, S>(pub &'s mut S);

impl<S: Store> Store for DryRun<'_, S> {
    fn now_ms(&mut self) -> i64 {
        self.0.now_ms()
    }
    fn kind(&mut self, key: &[u8]) -> KeyKind {
        self.0.kind(key)
    }
    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        self.0.hget(key, field)
    }
    fn hget_with<R>(&mut self, key: &[u8], field: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        self.0.hget_with(key, field, f)
    }
    fn hgetall(&mut self, key: &[u8]) -> Fields {
        self.0.hgetall(key)
    }
    fn hlen(&mut self, key: &[u8]) -> usize {
        self.0.hlen(key)
    }
    fn hset(&mut self, _: &[u8], _: &[u8], _: &[u8]) {}
    fn create_hash(&mut self, _: &[u8], _: [(&[u8], &[u8]); 2]) {}
    fn hincrby(&mut self, _: &[u8], _: &[u8], _: i64) -> i64 {
        0
    }
    fn hdel(&mut self, _: &[u8], _: &[u8]) {}
    fn moot(&mut self, _: Moot<'_>) {}
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.get(key)
    }
    fn set_until(&mut self, _: &[u8], _: &[u8], _: i64) {}
    fn set(&mut self, _: &[u8], _: &[u8]) {}
    fn incr_by(&mut self, _: &[u8], _: i64) -> i64 {
        0
    }
    fn token_gap(&mut self, key: &[u8]) -> i64 {
        self.0.token_gap(key)
    }
    fn pttl(&mut self, key: &[u8]) -> i64 {
        self.0.pttl(key)
    }
    fn expire_at(&mut self, _: &[u8], _: i64) -> bool {
        false
    }
    fn del(&mut self, _: &[u8]) -> bool {
        false
    }
    fn publish(&mut self, _: &[u8], _: &[u8]) {}
    // No lease index: the machines fall back to the keys, which decide
    // the same, and none is kept or dropped.
    fn lease_index_from(&mut self) -> Option<usize> {
        None
    }
    fn with_lease_index<R>(&mut self, _: &[u8], _: impl FnOnce(&mut LeaseIndex) -> R) -> Option<R> {
        None
    }
}

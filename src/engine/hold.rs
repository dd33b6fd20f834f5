//! What every lock kind shares: hold counts as Redisson keeps them in a
//! lock's hash, deadlines, the outcome of an unlock and its idempotent
//! replay through an unlock latch (`redisson_unlock_latch:{lock}:<id>`).

use super::error::LockError;
use super::int::parse_i64;
use super::names::{check_owner, KeyBuf, LockNames};
use super::store::{integer_at, Store};

/// Most holds one owner may stack on one lock. Commands loop over a reader's
/// acquisitions (one timeout key each), so a bound keeps a bogus count from
/// stalling the server; no real client re-enters this deep.
pub const MAX_HOLDS: i64 = 100_000;

/// Parses a hold count: an integer from 1 to `MAX_HOLDS`, written the way
/// Redis writes integers.
pub fn parse_count(value: &[u8]) -> Result<i64, LockError> {
    match parse_i64(value) {
        Some(n) if (1..=MAX_HOLDS).contains(&n) => Ok(n),
        _ => Err(LockError::Corrupt),
    }
}

/// One more hold, refused past `MAX_HOLDS`.
pub(super) fn one_more(held: i64) -> Result<i64, LockError> {
    Some(held + 1)
        .filter(|n| *n <= MAX_HOLDS)
        .ok_or(LockError::Overflow)
}

pub(super) fn deadline(now: i64, ms: i64) -> Result<i64, LockError> {
    now.checked_add(ms).ok_or(LockError::Overflow)
}

pub(super) fn count_of<S: Store>(
    s: &mut S,
    hash: &[u8],
    field: &[u8],
) -> Result<Option<i64>, LockError> {
    s.hget_with(hash, field, |v| v.map(parse_count).transpose())
}

/// A hold taken: whether its owner held the lock already (the reply does not
/// tell, `INFO rwlock` counts it), and the fencing token of a fenced one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    pub reentry: bool,
    pub token: Option<i64>,
}

/// Outcome of an acquisition, of every kind that answers a refusal with the
/// lock's PTTL: `G` is one hold's [`Granted`], or a multi-hold's, one per
/// listed hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt<G = Granted> {
    Granted(G),
    /// Held by others: the lock's PTTL (a multi-hold's: the longest of the
    /// locks in the way).
    Refused {
        pttl: i64,
    },
}

/// Outcome of an unlock, before it is mapped to Redisson's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The lock hash did not exist: the caller held nothing either, so it
    /// replies and latches as [`Release::NotHeld`]; the read-write and fair
    /// locks still publish then, as Redisson's scripts do.
    NotLocked,
    /// The caller held nothing of the kind it released.
    NotHeld,
    /// One hold released, the lock is still held.
    StillHeld,
    /// The caller's last hold of the kind released.
    Released,
}

impl Release {
    /// Redisson's reply: nil, 0 or 1.
    pub fn reply(self) -> Option<i64> {
        match self {
            Release::NotLocked | Release::NotHeld => None,
            Release::StillHeld => Some(0),
            Release::Released => Some(1),
        }
    }

    /// What an idempotent unlock remembers in its latch: nothing when the
    /// caller held nothing, the lock missing included, so a retry sees the
    /// lock as it is then and never replays "released" for a hold that was
    /// gone before the first send (Redisson's read-write and fair scripts
    /// latch 1 there).
    pub(super) fn latch_value(self) -> Option<i64> {
        match self {
            Release::Released => Some(1),
            Release::StillHeld => Some(0),
            Release::NotLocked | Release::NotHeld => None,
        }
    }
}

/// What an unlock did. The reply alone cannot tell a retried idempotent
/// unlock from a real release, and `INFO rwlock` counts them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlocked {
    /// This call ran the unlock.
    Ran(Release),
    /// A retry of an idempotent unlock: the remembered reply, nothing changed.
    Replayed(i64),
}

impl Unlocked {
    /// Redisson's reply: nil, 0 or 1.
    pub fn reply(self) -> Option<i64> {
        match self {
            Unlocked::Ran(release) => release.reply(),
            Unlocked::Replayed(value) => Some(value),
        }
    }
}

/// An idempotent unlock's request id and how long its latch lives.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub id: &'a [u8],
    pub ttl: i64,
}

/// The value a latch of either kind (unlock or acquisition) holds: None
/// when there is none, an error when it is not an integer string. The two
/// kinds fail alike on a corrupt latch.
fn read_latch<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<i64>, LockError> {
    integer_at(s, key, LockError::BadLatch)
}

/// Remembers what the unlock did in its latch, when it has one.
fn remember<S: Store>(s: &mut S, latch: Option<(Vec<u8>, i64)>, release: Release) {
    if let (Some((key, until)), Some(value)) = (latch, release.latch_value()) {
        s.set_until(&key, value.to_string().as_bytes(), until);
    }
}

/// The unlock every kind shares around its own release: the owner checked,
/// a retry of `request` within its latch's TTL replayed (nothing else
/// runs), else `release` run and what it did remembered in the latch.
pub(super) fn unlock_latched<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    request: Option<Request<'_>>,
    release: impl FnOnce(&mut S) -> Result<Release, LockError>,
) -> Result<Unlocked, LockError> {
    check_owner(owner)?;
    latched(s, names, request, release)
}

/// [`unlock_latched`] without an owner: a retry of `request` within its
/// latch's TTL replayed, else `release` run and remembered. A semaphore's
/// release, whose permits are nobody's, uses it as it is.
pub(super) fn latched<S: Store>(
    s: &mut S,
    names: &LockNames,
    request: Option<Request<'_>>,
    release: impl FnOnce(&mut S) -> Result<Release, LockError>,
) -> Result<Unlocked, LockError> {
    // Read before any write: a corrupt latch fails the unlock unchanged.
    let latch = match request {
        None => None,
        Some(request) => {
            let key = names.latch_key(request.id);
            if let Some(reply) = read_latch(s, &key)? {
                return Ok(Unlocked::Replayed(reply));
            }
            Some((key, deadline(s.now_ms(), request.ttl)?))
        }
    };
    let release = release(s)?;
    remember(s, latch, release);
    Ok(Unlocked::Ran(release))
}

/// The renewal every kind shares around its own reading of the owner's
/// holds: the owner checked; false, nothing written, when `held` finds no
/// hold of the owner; else the lock's TTL set to `lease` from now and
/// `also` run with what `held` found, the time and the new deadline (a
/// read hold's timeout keys).
pub(super) fn renew_held<S: Store, H>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    held: impl FnOnce(&mut S, &[u8]) -> Result<Option<H>, LockError>,
    also: impl FnOnce(&mut S, H, i64, i64),
) -> Result<bool, LockError> {
    check_owner(owner)?;
    let hash = names.hash();
    let Some(holds) = held(s, hash)? else {
        return Ok(false);
    };
    let now = s.now_ms();
    let until = deadline(now, lease)?;
    s.expire_at(hash, until);
    also(s, holds, now, until);
    Ok(true)
}

/// The next fencing token of a fenced acquisition: its counter and how far
/// the counter moves, 1 as Redisson's `INCR`, or more once after a
/// promotion ([`Store::token_gap`]).
pub(super) struct NextToken {
    key: KeyBuf,
    step: i64,
}

impl NextToken {
    /// Takes the token: the counter's new value.
    pub(super) fn take<S: Store>(self, s: &mut S) -> i64 {
        s.incr_by(&self.key, self.step)
    }
}

/// The fencing token counter of a fenced acquisition, checked before any
/// write (see [`check_token`]); None, and no key name made, for others.
pub(super) fn token_key<S: Store>(
    s: &mut S,
    names: &LockNames,
    fenced: bool,
) -> Result<Option<NextToken>, LockError> {
    if !fenced {
        return Ok(None);
    }
    let key = names.token_key();
    let step = check_token(s, &key)?;
    Ok(Some(NextToken { key, step }))
}

/// Checks, before any write, that the fencing token at `key` can move on:
/// missing (the first token is 1, or the gap's value after a promotion) or
/// an integer the step does not take past the largest. Redisson's script
/// would fail half way, after its INCR. Returns the step.
fn check_token<S: Store>(s: &mut S, key: &[u8]) -> Result<i64, LockError> {
    let current = integer_at(s, key, LockError::BadToken)?.unwrap_or(0);
    let step = s.token_gap(key).saturating_add(1);
    current
        .checked_add(step)
        .map(|_| step)
        .ok_or(LockError::Overflow)
}

/// The latch an idempotent acquisition (`REQUEST id ttl`) records when it
/// is granted: its key and how long it lives from the grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantLatch {
    pub key: Vec<u8>,
    pub ttl: i64,
}

/// What the latch of an idempotent acquisition says before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granting {
    /// A retry: the first call's token (0 when it was not fenced).
    Replay(i64),
    /// Run the acquisition, recording its grant in this latch, if any.
    Run(Option<GrantLatch>),
}

/// Reads the acquisition latch of `request`, if any (no key is looked up
/// without one): a retry replays, anything else runs. Fails on a latch that
/// is not an integer, before any write.
pub fn grant_latch<S: Store>(
    s: &mut S,
    names: &LockNames,
    request: Option<Request<'_>>,
) -> Result<Granting, LockError> {
    let Some(request) = request else {
        return Ok(Granting::Run(None));
    };
    let key = names.request_latch_key(request.id);
    Ok(match read_latch(s, &key)? {
        Some(token) => Granting::Replay(token),
        None => Granting::Run(Some(GrantLatch {
            key,
            ttl: request.ttl,
        })),
    })
}

/// Records a grant in its latch: the token (0 when not fenced) until `ttl`
/// ms from now, as an absolute deadline so a replica keeps the same one.
pub fn remember_grant<S: Store>(s: &mut S, latch: &GrantLatch, token: Option<i64>) {
    // The ttl is at most MAX_MILLIS: no clock makes this overflow, and a
    // grant already written must not fail here.
    let until = s.now_ms().saturating_add(latch.ttl);
    s.set_until(&latch.key, token.unwrap_or(0).to_string().as_bytes(), until);
}

//! Redisson's read-write lock as a state machine over a [`Store`] (docs/design.md,
//! contract §3.1–§3.6). Every command reads and checks what it needs first and
//! only then writes, so a refused or failing call changes nothing.

use std::collections::BTreeMap;

use super::error::LockError;
use super::hold::{count_of, deadline, one_more, renew_held, token_key, unlock_latched};
pub use super::hold::{parse_count, Release, Request, Unlocked, MAX_HOLDS};
use super::hold::{Attempt, Granted};
use super::index::LeaseIndex;
use super::names::{check_owner, field_owner, write_field, LockNames, MODE_FIELD};
use super::store::{Fields, KeyKind, Moot, Store};

/// Payload published when a read hold ends the lock.
pub const READ_RELEASED: &[u8] = b"0";
/// Payload published when a write hold (or a forced unlock) ends the lock.
pub const WRITE_RELEASED: &[u8] = b"1";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

impl Mode {
    pub fn as_bytes(self) -> &'static [u8] {
        match self {
            Mode::Read => b"read",
            Mode::Write => b"write",
        }
    }
}

/// One owner's holds, for `RWLOCK.INFO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerInfo {
    pub owner: Vec<u8>,
    pub reads: i64,
    pub writes: i64,
    /// PTTL of each read acquisition's timeout key, first acquisition first.
    pub leases: Vec<i64>,
}

/// What `RWLOCK.INFO` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RwLockInfo {
    pub mode: Option<Mode>,
    pub pttl: i64,
    pub owners: Vec<OwnerInfo>,
}

fn mode_of<S: Store>(s: &mut S, hash: &[u8]) -> Result<Option<Mode>, LockError> {
    match s.kind(hash) {
        KeyKind::Missing => Ok(None),
        KeyKind::Hash => s.hget_with(hash, MODE_FIELD, |mode| match mode {
            Some(b"read") => Ok(Some(Mode::Read)),
            Some(b"write") => Ok(Some(Mode::Write)),
            _ => Err(LockError::Corrupt),
        }),
        KeyKind::String | KeyKind::Other => Err(LockError::WrongType),
    }
}

/// Every hold field of the hash (from `hgetall`) with its count; fails on
/// any corrupt count.
fn holds_of(fields: &Fields) -> Result<Vec<(&[u8], i64)>, LockError> {
    fields
        .iter()
        .filter(|(field, _)| *field != MODE_FIELD)
        .map(|(field, value)| Ok((field, parse_count(value)?)))
        .collect()
}

/// Granted, not fenced: `reentry` when the owner already held the lock
/// (read→read, write→write or write→read).
fn granted(reentry: bool) -> Attempt {
    Attempt::Granted(Granted {
        reentry,
        token: None,
    })
}

/// `RWLOCK.READ` (contract §3.1): Redisson replies nil, or the lock's PTTL.
pub fn read_lock<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
) -> Result<Attempt, LockError> {
    check_owner(owner)?;
    let hash = names.hash();
    let now = s.now_ms();
    let lease_deadline = deadline(now, lease)?;
    let Some(mode) = mode_of(s, hash)? else {
        s.forget_lease_index(hash);
        s.create_hash(hash, [(MODE_FIELD, Mode::Read.as_bytes()), (owner, b"1")]);
        s.set_until(&names.lease_key(owner, 1), b"1", lease_deadline);
        s.expire_at(hash, lease_deadline);
        return Ok(granted(false));
    };
    let admitted = mode == Mode::Read || count_of(s, hash, &write_field(owner))?.is_some();
    if !admitted {
        return Ok(Attempt::Refused { pttl: s.pttl(hash) });
    }
    let held = count_of(s, hash, owner)?;
    // Admitted in write mode means this owner holds the write lock.
    let reentry = held.is_some() || mode == Mode::Write;
    let n = one_more(held.unwrap_or(0))?;
    let hash_deadline = deadline(now, s.pttl(hash).max(lease))?;
    s.hincrby(hash, owner, 1);
    s.set_until(&names.lease_key(owner, n), b"1", lease_deadline);
    s.expire_at(hash, hash_deadline);
    update_index(s, hash, owner, n - 1, |ix| ix.push(owner, lease_deadline));
    Ok(granted(reentry))
}

/// `RWLOCK.WRITE` (contract §3.2); with `fenced` (`RWLOCK.WRITE … FENCED`)
/// the write hold takes the lock's next fencing token
/// (`redisson_lock_token:{lock}`, as Redisson's fenced lock takes it) on
/// every acquisition, re-entry included.
pub fn write_lock<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
    fenced: bool,
) -> Result<Attempt, LockError> {
    check_owner(owner)?;
    let hash = names.hash();
    let now = s.now_ms();
    let field = write_field(owner);
    let mode = mode_of(s, hash)?;
    let held = match mode {
        None => None,
        Some(Mode::Write) => count_of(s, hash, &field)?,
        Some(Mode::Read) => None,
    };
    let hash_deadline = match (mode, held) {
        (None, _) => deadline(now, lease)?,
        (Some(Mode::Write), Some(held)) => {
            one_more(held)?;
            // Redisson adds the lease to what is left: a persistent hash (PTTL -1)
            // gets lease - 1, and a 1 ms lease on it expires the lock at once.
            let extended = s.pttl(hash).checked_add(lease).ok_or(LockError::Overflow)?;
            deadline(now, extended)?
        }
        _ => return Ok(Attempt::Refused { pttl: s.pttl(hash) }),
    };
    let token_key = token_key(s, names, fenced)?;
    // The token first, as Redisson's fenced lock takes it.
    let token = token_key.map(|next| next.take(s));
    // Write holds are not tracked: an index would miss a count.
    s.forget_lease_index(hash);
    if held.is_some() {
        s.hincrby(hash, &field, 1);
    } else {
        s.create_hash(hash, [(MODE_FIELD, Mode::Write.as_bytes()), (&field, b"1")]);
    }
    s.expire_at(hash, hash_deadline);
    Ok(Attempt::Granted(Granted {
        reentry: held.is_some(),
        token,
    }))
}

/// `RWLOCK.UNLOCK` (contract §3.3): releases one hold of `mode`, idempotently when
/// a request is given.
pub fn unlock<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    mode: Mode,
    lease: i64,
    request: Option<Request<'_>>,
) -> Result<Unlocked, LockError> {
    unlock_latched(s, names, owner, request, |s| match mode {
        Mode::Read => unlock_read(s, names, owner),
        Mode::Write => unlock_write(s, names, owner, lease),
    })
}

fn unlock_read<S: Store>(s: &mut S, names: &LockNames, owner: &[u8]) -> Result<Release, LockError> {
    let hash = names.hash();
    let Some(mode) = mode_of(s, hash)? else {
        s.publish(&names.channel(), READ_RELEASED);
        return Ok(Release::NotLocked);
    };
    let Some(held) = count_of(s, hash, owner)? else {
        return Ok(Release::NotHeld);
    };
    let now = s.now_ms();
    let left = held - 1;
    let hlen = s.hlen(hash);
    // `mode` plus the hold fields that survive this release.
    let fields_after = hlen - usize::from(left == 0);
    // The lock lives as long as the longest read lease still running, the
    // released acquisition's own key excluded: from the index when it is
    // known to match the hash, else from every lease key.
    let indexed = s.with_lease_index(hash, |ix| {
        let matches = ix.fields() + 1 == hlen && ix.count(owner) == held;
        if matches {
            ix.pop(owner);
        }
        matches.then(|| ix.latest())
    });
    let (longest, built) = match indexed {
        Some(Some(latest)) => {
            let longest = match latest {
                Some(at) if fields_after > 1 => at - now,
                _ => -3,
            };
            (longest, None)
        }
        stale => {
            if stale.is_some() {
                s.forget_lease_index(hash);
            }
            longest_lease(s, names, owner, held, hlen, now)?
        }
    };
    // Whether the hash outlives this release decides which writes are moot:
    // a decrement to 0 (the field goes), anything before the hash goes.
    let keeps_hash = fields_after > 1 && (longest > 0 || mode == Mode::Write);
    let decrement = Moot::Hincrby {
        key: hash,
        field: owner,
        delta: -1,
    };
    if left == 0 || !keeps_hash {
        s.moot(decrement);
    } else {
        s.hincrby(hash, owner, -1);
    }
    if left == 0 {
        if keeps_hash {
            s.hdel(hash, owner);
        } else {
            s.moot(Moot::Hdel {
                key: hash,
                field: owner,
            });
        }
    }
    s.del(&names.lease_key(owner, held));
    if keeps_hash {
        if let Some(index) = built {
            s.keep_lease_index(hash, index);
        }
        if longest > 0 {
            s.expire_at(hash, now + longest);
        }
        return Ok(Release::StillHeld);
    }
    s.forget_lease_index(hash);
    s.del(hash);
    s.publish(&names.channel(), READ_RELEASED);
    Ok(Release::Released)
}

/// Redisson's scan for the longest read lease still running once `owner`
/// releases its hold `held`: every lease key of every hold field. Returns
/// the longest PTTL (-3 when there is no lease to read) and, when the lock
/// has enough leases for the store to keep an index, the index of the holds
/// that remain.
fn longest_lease<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    held: i64,
    hlen: usize,
    now: i64,
) -> Result<(i64, Option<LeaseIndex>), LockError> {
    let left = held - 1;
    // Other fields than `mode` and this owner's are read only when there are.
    let fields = if hlen == 2 {
        Fields::default()
    } else {
        s.hgetall(names.hash())
    };
    let all = holds_of(&fields)?;
    let only_owner = [(owner, held)];
    let holds = if hlen == 2 { &only_owner[..] } else { &all[..] };
    let remaining = |field: &[u8], count: i64| if field == owner { left } else { count };
    let leases: i64 = holds.iter().map(|&(f, c)| remaining(f, c)).sum();
    let mut index = s
        .lease_index_from()
        .filter(|&from| leases > 0 && leases as usize >= from)
        .map(|_| LeaseIndex::default());
    let mut longest = -3;
    let mut key = Vec::new();
    for &(field, count) in holds {
        let count = remaining(field, count);
        let mut deadlines = Vec::with_capacity(if index.is_some() { count as usize } else { 0 });
        for i in (1..=count).rev() {
            names.write_timeout_key(&mut key, field, i);
            let pttl = s.pttl(&key);
            longest = longest.max(pttl);
            if index.is_some() {
                deadlines.push((pttl >= 0).then_some(now + pttl));
            }
        }
        if let Some(index) = index.as_mut().filter(|_| count > 0) {
            deadlines.reverse();
            index.insert(field, deadlines);
        }
    }
    Ok((longest, index))
}

/// Applies `change` to the lock's lease index when it has `owner` at
/// `count` holds, as the hash had before this command; forgets it otherwise.
fn update_index<S: Store>(
    s: &mut S,
    hash: &[u8],
    owner: &[u8],
    count: i64,
    change: impl FnOnce(&mut LeaseIndex),
) {
    let matched = s.with_lease_index(hash, |ix| {
        let matches = ix.count(owner) == count;
        if matches {
            change(ix);
        }
        matches
    });
    if matched == Some(false) {
        s.forget_lease_index(hash);
    }
}

fn unlock_write<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
) -> Result<Release, LockError> {
    let hash = names.hash();
    match mode_of(s, hash)? {
        None => {
            s.publish(&names.channel(), WRITE_RELEASED);
            return Ok(Release::NotLocked);
        }
        Some(Mode::Read) => return Ok(Release::NotHeld),
        Some(Mode::Write) => {}
    }
    let field = write_field(owner);
    let Some(held) = count_of(s, hash, &field)? else {
        return Ok(Release::NotHeld);
    };
    if held > 1 {
        let now = s.now_ms();
        let lease_deadline = deadline(now, lease)?;
        s.forget_lease_index(hash);
        s.hincrby(hash, &field, -1);
        s.expire_at(hash, lease_deadline);
        return Ok(Release::StillHeld);
    }
    // Checked before writing: a downgrade must not leave a corrupt read lock.
    // `mode` and this field alone need no further reading.
    let others = if s.hlen(hash) == 2 {
        0
    } else {
        holds_of(&s.hgetall(hash))?.len() - 1
    };
    s.forget_lease_index(hash);
    // The field goes: its decrement to 0 is moot, and so is its removal when
    // the whole hash goes.
    s.moot(Moot::Hincrby {
        key: hash,
        field: &field,
        delta: -1,
    });
    if others == 0 {
        s.moot(Moot::Hdel {
            key: hash,
            field: &field,
        });
        s.del(hash);
        s.publish(&names.channel(), WRITE_RELEASED);
    } else {
        s.hdel(hash, &field);
        // The writer still holds reads: downgrade, keeping the TTL.
        s.hset(hash, MODE_FIELD, Mode::Read.as_bytes());
    }
    Ok(Release::Released)
}

/// `RWLOCK.RENEW` (contract §3.4): the watchdog's call. True when the owner held
/// anything.
pub fn renew<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    lease: i64,
) -> Result<bool, LockError> {
    // The owner's read count, when it holds anything.
    let held = |s: &mut S, hash: &[u8]| -> Result<Option<Option<i64>>, LockError> {
        if mode_of(s, hash)?.is_none() {
            return Ok(None);
        }
        let writes = count_of(s, hash, &write_field(owner))?;
        let reads = count_of(s, hash, owner)?;
        Ok((writes.is_some() || reads.is_some()).then_some(reads))
    };
    renew_held(
        s,
        names,
        owner,
        lease,
        held,
        |s, reads, now, lease_deadline| {
            let Some(reads) = reads else { return };
            let hash = names.hash();
            for i in (1..=reads).rev() {
                s.expire_at(&names.lease_key(owner, i), lease_deadline);
            }
            update_index(s, hash, owner, reads, |ix| {
                ix.renew(owner, now, lease_deadline)
            });
        },
    )
}

/// `RWLOCK.FORCEUNLOCK` (contract §3.5): deletes the lock if it is in `only` mode
/// (any mode when `None`), with its readers' timeout keys.
pub fn force_unlock<S: Store>(
    s: &mut S,
    names: &LockNames,
    only: Option<Mode>,
) -> Result<bool, LockError> {
    let hash = names.hash();
    let Some(mode) = mode_of(s, hash)? else {
        return Ok(false);
    };
    if only.is_some_and(|wanted| wanted != mode) {
        return Ok(false);
    }
    let fields = s.hgetall(hash);
    let holds = holds_of(&fields)?;
    s.forget_lease_index(hash);
    s.del(hash);
    let mut key = Vec::new();
    for &(field, count) in &holds {
        if !field_owner(field).1 {
            for i in 1..=count {
                names.write_timeout_key(&mut key, field, i);
                s.del(&key);
            }
        }
    }
    let message = match only {
        Some(Mode::Read) => READ_RELEASED,
        _ => WRITE_RELEASED,
    };
    s.publish(&names.channel(), message);
    Ok(true)
}

/// `RWLOCK.INFO` (contract §3.6): read-only view, owners in byte order.
pub fn info<S: Store>(s: &mut S, names: &LockNames) -> Result<RwLockInfo, LockError> {
    let hash = names.hash();
    let mode = mode_of(s, hash)?;
    let fields = if mode.is_some() {
        s.hgetall(hash)
    } else {
        Fields::default()
    };
    let mut owners: BTreeMap<Vec<u8>, OwnerInfo> = BTreeMap::new();
    for (field, count) in holds_of(&fields)? {
        let (owner, is_write) = field_owner(field);
        let entry = owners.entry(owner.to_vec()).or_insert_with(|| OwnerInfo {
            owner: owner.to_vec(),
            reads: 0,
            writes: 0,
            leases: Vec::new(),
        });
        if is_write {
            entry.writes = count;
        } else {
            entry.reads = count;
            entry.leases = (1..=count)
                .map(|i| s.pttl(&names.timeout_key(field, i)))
                .collect();
        }
    }
    Ok(RwLockInfo {
        mode,
        pttl: s.pttl(hash),
        owners: owners.into_values().collect(),
    })
}

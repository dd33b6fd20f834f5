//! A hold's kind (a read or write hold of a read-write lock, or a plain
//! lock) and what its machine answers for one owner: the count it holds,
//! its unlock and its renewal. The multi-hold commands release and renew
//! each listed hold through here (contract §11); session holds (contract
//! §12) are ordinary holds of their kind, which the shell counts, renews
//! and, when their connection closes, releases with the owner's own unlock.

use super::error::LockError;
use super::hold::{count_of, Release, Unlocked};
use super::lock;
use super::names::{write_field, LockNames};
use super::queue::Hold;
use super::rwlock::{self, Mode};
use super::store::{integer_at, KeyKind, Store};

/// Which of an owner's counts a session hold is part of, and which unlock
/// gives it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A read hold of a read-write lock: the hash field `<owner>`.
    Read,
    /// The write hold of a read-write lock: the field `<owner>:write`.
    Write,
    /// A plain lock: the field `<owner>`.
    Lock,
    /// A semaphore's permits (contract §15): no owner holds them, so no
    /// owner has a count of them to release or renew.
    Permits,
    /// A permit-expirable semaphore's permits (contract §17): no owner
    /// either; each is its id, which a session keeps to give it back.
    PermitIds,
}

/// A latch's wait is no hold: nothing to count, release or renew.
impl TryFrom<Hold> for Kind {
    type Error = LockError;

    fn try_from(hold: Hold) -> Result<Kind, LockError> {
        match hold {
            Hold::Read => Ok(Kind::Read),
            Hold::Write { .. } => Ok(Kind::Write),
            Hold::Lock(_) => Ok(Kind::Lock),
            Hold::Semaphore { .. } => Ok(Kind::Permits),
            Hold::Latch | Hold::Permit { .. } => Err(LockError::NotAHold),
        }
    }
}

/// The owner's count of `kind` on the lock now, 0 when the lock or the
/// owner's field is missing (or `kind` is nobody's); a key of another type
/// or a corrupt count is the error the commands give. Reads only.
fn count<S: Store>(
    s: &mut S,
    names: &LockNames,
    kind: Kind,
    owner: &[u8],
) -> Result<i64, LockError> {
    let hash = names.hash();
    match s.kind(hash) {
        KeyKind::Missing => return Ok(0),
        KeyKind::Hash => {}
        KeyKind::String | KeyKind::Other => return Err(LockError::WrongType),
    }
    let count = on_field(kind, owner, |field| count_of(s, hash, field));
    Ok(count.transpose()?.flatten().unwrap_or(0))
}

/// `f` of the hash field that counts an owner's holds of `kind`: `<owner>`,
/// or `<owner>:write` for a write hold; None for permits, nobody's.
fn on_field<R>(kind: Kind, owner: &[u8], f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    match kind {
        Kind::Read | Kind::Lock => Some(f(owner)),
        Kind::Write => Some(f(&write_field(owner))),
        Kind::Permits | Kind::PermitIds => None,
    }
}

/// The owner's count of `kind` on the lock now: 0 when the lock is gone,
/// replaced by another type, corrupt, or the owner holds none of `kind`.
/// Reads only.
pub fn held<S: Store>(s: &mut S, names: &LockNames, kind: Kind, owner: &[u8]) -> i64 {
    count(s, names, kind, owner).unwrap_or(0)
}

/// An acquisition with `HELD n` (docs/design.md §14.8): when the owner
/// holds n + 1 of `kind`, the call was granted already (a resend whose
/// reply was lost, or a late copy): the fencing token to reply (the
/// counter's current value with `fenced`, else 0), nothing changed but a
/// no-op sent to the replicas. None: the call runs as without `HELD`.
/// Checked as the call itself checks the lock, before any write.
pub fn granted_before<S: Store>(
    s: &mut S,
    names: &LockNames,
    kind: Kind,
    owner: &[u8],
    held: i64,
    fenced: bool,
) -> Result<Option<i64>, LockError> {
    if count(s, names, kind, owner)? != held + 1 {
        return Ok(None);
    }
    let token = if fenced {
        integer_at(s, &names.token_key(), LockError::BadToken)?.unwrap_or(0)
    } else {
        0
    };
    on_field(kind, owner, |field| {
        s.replicate_unchanged(names.hash(), field)
    });
    Ok(Some(token))
}

/// A release with `HELD n` (docs/design.md §14.8): when n is 2 or more and
/// the owner holds n - 1 of `kind`, the release was done already: true,
/// nothing changed but a no-op sent to the replicas, and the call replies
/// 0 (still held). A last release (n = 1) is never answered so: a lock
/// gone could as well have been gone before it.
pub fn released_before<S: Store>(
    s: &mut S,
    names: &LockNames,
    kind: Kind,
    owner: &[u8],
    held: i64,
) -> Result<bool, LockError> {
    if held < 2 || count(s, names, kind, owner)? != held - 1 {
        return Ok(false);
    }
    on_field(kind, owner, |field| {
        s.replicate_unchanged(names.hash(), field)
    });
    Ok(true)
}

/// Gives back one hold of `kind` as the owner's unlock would (`lease` re-arms
/// a lock still held).
pub fn release<S: Store>(
    s: &mut S,
    names: &LockNames,
    kind: Kind,
    owner: &[u8],
    lease: i64,
) -> Result<Unlocked, LockError> {
    match kind {
        Kind::Read => rwlock::unlock(s, names, owner, Mode::Read, lease, None),
        Kind::Write => rwlock::unlock(s, names, owner, Mode::Write, lease, None),
        Kind::Lock => lock::unlock(s, names, owner, lease, None),
        Kind::Permits | Kind::PermitIds => Ok(Unlocked::Ran(Release::NotHeld)),
    }
}

/// Extends the owner's holds to `lease` as the watchdog's renewal of its
/// kind would; false when the owner holds nothing there.
pub fn renew<S: Store>(
    s: &mut S,
    names: &LockNames,
    kind: Kind,
    owner: &[u8],
    lease: i64,
) -> Result<bool, LockError> {
    match kind {
        Kind::Read | Kind::Write => rwlock::renew(s, names, owner, lease),
        Kind::Lock => lock::renew(s, names, owner, lease),
        Kind::Permits | Kind::PermitIds => Ok(false),
    }
}

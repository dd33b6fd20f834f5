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
use super::store::{KeyKind, Store};

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

/// The owner's count of `kind` on the lock now: 0 when the lock is gone,
/// replaced by another type, corrupt, or the owner holds none of `kind`.
/// Reads only.
pub fn held<S: Store>(s: &mut S, names: &LockNames, kind: Kind, owner: &[u8]) -> i64 {
    let hash = names.hash();
    if s.kind(hash) != KeyKind::Hash {
        return 0;
    }
    let count = match kind {
        Kind::Read | Kind::Lock => count_of(s, hash, owner),
        Kind::Write => count_of(s, hash, &write_field(owner)),
        Kind::Permits | Kind::PermitIds => return 0,
    };
    count.ok().flatten().unwrap_or(0)
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

//! A hold's kind (a read or write hold of a read-write lock, or a plain
//! lock) and what its machine answers for one owner: the count it holds,
//! its unlock and its renewal. The multi-hold commands release and renew
//! each listed hold through here (contract §11); session holds (contract
//! §12) are ordinary holds of their kind, which the shell counts, renews
//! and, when their connection closes, releases with the owner's own unlock.

use super::error::LockError;
use super::hold::{count_of, Unlocked};
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
}

impl From<Hold> for Kind {
    fn from(hold: Hold) -> Kind {
        match hold {
            Hold::Read => Kind::Read,
            Hold::Write { .. } => Kind::Write,
            Hold::Lock(_) => Kind::Lock,
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::hold::Release;
    use crate::engine::lock::Options;
    use crate::engine::memstore::MemStore;
    use crate::engine::queue::attempt;

    fn names() -> LockNames<'static> {
        LockNames::new(b"S").expect("name")
    }

    #[test]
    fn counts_are_read_per_kind_and_missing_reads_as_zero() {
        let (mut s, n) = (MemStore::new(1_000), names());
        assert_eq!(held(&mut s, &n, Kind::Read, b"a:1"), 0);
        attempt(&mut s, &n, b"a:1", Hold::Write { fenced: false }, 500).expect("write");
        attempt(&mut s, &n, b"a:1", Hold::Write { fenced: false }, 500).expect("again");
        attempt(&mut s, &n, b"a:1", Hold::Read, 500).expect("read");
        assert_eq!(held(&mut s, &n, Kind::Write, b"a:1"), 2);
        assert_eq!(held(&mut s, &n, Kind::Read, b"a:1"), 1);
        assert_eq!(held(&mut s, &n, Kind::Read, b"b:1"), 0);
        // The write re-entry added its lease to the TTL left.
        s.advance(1_100);
        assert_eq!(held(&mut s, &n, Kind::Write, b"a:1"), 0, "expired");
    }

    #[test]
    fn release_and_renew_run_the_kinds_own_machine() {
        let (mut s, n) = (MemStore::new(1_000), names());
        let plain = Hold::Lock(Options::default());
        attempt(&mut s, &n, b"a:1", plain, 500).expect("lock");
        attempt(&mut s, &n, b"a:1", plain, 500).expect("re-entry");
        s.advance(400);
        assert!(renew(&mut s, &n, Kind::Lock, b"a:1", 500).expect("renew"));
        s.advance(400);
        assert_eq!(held(&mut s, &n, Kind::Lock, b"a:1"), 2, "renewed");
        let once = release(&mut s, &n, Kind::Lock, b"a:1", 500).expect("release");
        assert_eq!(once, Unlocked::Ran(Release::StillHeld));
        let twice = release(&mut s, &n, Kind::Lock, b"a:1", 500).expect("release");
        assert_eq!(twice, Unlocked::Ran(Release::Released));
        assert!(!renew(&mut s, &n, Kind::Lock, b"a:1", 500).expect("renew"));
        assert_eq!(s.kind(b"S"), KeyKind::Missing);
    }
}

//! Who holds a lock in a way that stops a given acquisition, read from the
//! lock's own hash, so a hold a Redisson script took counts as much as one
//! the module took. The deadlock detector (`waiting::deadlock`) asks this
//! for every lock of the wait-for graph it walks. Reads only.

use super::hold::parse_count;
use super::kinds::Kind;
use super::names::{field_owner, MODE_FIELD};
use super::queue::Hold;
use super::store::{KeyKind, Store};

/// The owners holding the lock `hash` in a way that stops `owner`'s `hold`
/// (each once, in field order), and whether `owner` holds the lock at all.
///
/// A read hold is stopped only by a write hold of another owner; a write
/// hold or a plain lock by every other holder. The owner's own holds stop
/// it only in the one case the machine never grants: a write hold asked by
/// an owner holding a read hold of a lock in read mode (the upgrade), where
/// the owner is listed among the holders in its own way. A lock that is
/// missing, of another type or without `mode` where one is needed stops
/// nothing here: the machine's own error is the answer there.
pub fn blockers<S: Store>(
    s: &mut S,
    hash: &[u8],
    owner: &[u8],
    hold: Hold,
) -> (Vec<Vec<u8>>, bool) {
    if s.kind(hash) != KeyKind::Hash {
        return (Vec::new(), false);
    }
    let fields = s.hgetall(hash);
    let mut mode: Option<&[u8]> = None;
    let mut mine = false;
    let mut i_write = false;
    for (field, value) in fields.iter() {
        if field == MODE_FIELD {
            mode = Some(value);
            continue;
        }
        let (who, write) = field_owner(field);
        if who == owner {
            mine = true;
            i_write |= write;
        }
    }
    // Which holders stop the hold, and whether the owner's own do.
    let (stops, me_too) = match (hold, mode) {
        // Readers share a lock in read mode; in write mode its writer may
        // read, everyone else waits for the writer.
        (Hold::Read, Some(b"read")) => (false, false),
        (Hold::Read, Some(_)) => (!i_write, false),
        // A write hold is granted in write mode to the writer again; in
        // read mode every reader stops it, the asker's own reads too.
        (Hold::Write { .. }, Some(b"write")) => (!i_write, false),
        (Hold::Write { .. }, Some(_)) => (true, true),
        // A plain lock is shared by nobody; its holder re-enters.
        (Hold::Lock(_), None) => (!mine, false),
        (Hold::Read | Hold::Write { .. }, None) | (Hold::Lock(_), Some(_)) => (false, false),
    };
    let mut out: Vec<Vec<u8>> = Vec::new();
    if !stops {
        return (out, mine);
    }
    for (field, _) in fields.iter() {
        if field == MODE_FIELD {
            continue;
        }
        let (who, _) = field_owner(field);
        if (who != owner || me_too) && !out.iter().any(|o| o.as_slice() == who) {
            out.push(who.to_vec());
        }
    }
    (out, mine)
}

/// Whether `owner`'s `hold` is the upgrade the machine never grants: a write
/// hold asked by an owner holding a read hold of a lock in read mode, which
/// waits for itself. Two field reads at most, one for any other hold.
pub fn upgrade<S: Store>(s: &mut S, hash: &[u8], owner: &[u8], hold: Hold) -> bool {
    matches!(hold, Hold::Write { .. })
        && s.kind(hash) == KeyKind::Hash
        && s.hget_with(hash, owner, |v| v.is_some())
        && s.hget_with(hash, MODE_FIELD, |m| m == Some(b"read"))
}

/// Every hold of the lock `hash`: owner, kind (a field `<owner>:write` is a
/// write hold; another field is a read hold when the hash has a `mode`,
/// else a plain lock) and count, in field order; a count that is not one
/// reads as 0. Empty when the lock is missing or not a hash.
pub fn all<S: Store>(s: &mut S, hash: &[u8]) -> Vec<(Vec<u8>, Kind, i64)> {
    if s.kind(hash) != KeyKind::Hash {
        return Vec::new();
    }
    let fields = s.hgetall(hash);
    let rw = fields.iter().any(|(f, _)| f == MODE_FIELD);
    fields
        .iter()
        .filter(|(f, _)| *f != MODE_FIELD)
        .map(|(field, value)| {
            let (owner, write) = field_owner(field);
            let kind = match (write, rw) {
                (true, _) => Kind::Write,
                (false, true) => Kind::Read,
                (false, false) => Kind::Lock,
            };
            (owner.to_vec(), kind, parse_count(value).unwrap_or(0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lock::Options;
    use crate::engine::memstore::MemStore;
    use crate::engine::names::LockNames;
    use crate::engine::queue::attempt;

    const READ: Hold = Hold::Read;
    const WRITE: Hold = Hold::Write { fenced: false };
    const LOCK: Hold = Hold::Lock(Options {
        fenced: false,
        non_reentrant: false,
    });

    fn take(s: &mut MemStore, owner: &str, hold: Hold) {
        let n = LockNames::new(b"L").expect("name");
        attempt(s, &n, owner.as_bytes(), hold, 10_000).expect("attempt");
    }

    fn who(s: &mut MemStore, owner: &str, hold: Hold) -> (Vec<String>, bool) {
        let (owners, mine) = blockers(s, b"L", owner.as_bytes(), hold);
        let owners = owners
            .into_iter()
            .map(|o| String::from_utf8(o).expect("utf-8"))
            .collect();
        (owners, mine)
    }

    #[test]
    fn all_holds_with_their_kind_and_count() {
        let mut s = MemStore::new(1_000);
        take(&mut s, "w", WRITE);
        take(&mut s, "w", WRITE);
        take(&mut s, "w", READ);
        let mut got = all(&mut s, b"L");
        got.sort();
        assert_eq!(
            got,
            vec![
                (b"w".to_vec(), Kind::Read, 1),
                (b"w".to_vec(), Kind::Write, 2)
            ]
        );
        let mut s = MemStore::new(1_000);
        take(&mut s, "p", LOCK);
        assert_eq!(all(&mut s, b"L"), vec![(b"p".to_vec(), Kind::Lock, 1)]);
        assert!(all(&mut s, b"missing").is_empty());
    }

    #[test]
    fn only_a_readers_write_hold_is_an_upgrade() {
        let mut s = MemStore::new(1_000);
        take(&mut s, "r", READ);
        assert!(upgrade(&mut s, b"L", b"r", WRITE));
        assert!(!upgrade(&mut s, b"L", b"r", READ));
        assert!(!upgrade(&mut s, b"L", b"x", WRITE));
        let mut s = MemStore::new(1_000);
        take(&mut s, "w", WRITE);
        take(&mut s, "w", READ);
        assert!(!upgrade(&mut s, b"L", b"w", WRITE), "a re-entry");
        assert!(!upgrade(&mut s, b"M", b"w", WRITE), "no lock");
    }

    #[test]
    fn a_free_lock_stops_nobody() {
        let mut s = MemStore::new(1_000);
        assert_eq!(who(&mut s, "a", WRITE), (vec![], false));
        assert_eq!(who(&mut s, "a", LOCK), (vec![], false));
    }

    #[test]
    fn readers_stop_writers_but_not_readers() {
        let mut s = MemStore::new(1_000);
        take(&mut s, "r1", READ);
        take(&mut s, "r2", READ);
        take(&mut s, "r1", READ);
        assert_eq!(who(&mut s, "x", READ), (vec![], false));
        let both = vec!["r1".to_string(), "r2".to_string()];
        assert_eq!(who(&mut s, "x", WRITE), (both.clone(), false));
        // The upgrade: r1's own read hold stops its write hold.
        assert_eq!(who(&mut s, "r1", WRITE), (both, true));
    }

    #[test]
    fn a_writer_stops_everyone_but_itself() {
        let mut s = MemStore::new(1_000);
        take(&mut s, "w", WRITE);
        take(&mut s, "w", READ);
        assert_eq!(who(&mut s, "x", READ), (vec!["w".to_string()], false));
        assert_eq!(who(&mut s, "x", WRITE), (vec!["w".to_string()], false));
        assert_eq!(who(&mut s, "w", WRITE), (vec![], true), "a re-entry");
        assert_eq!(who(&mut s, "w", READ), (vec![], true), "write then read");
    }

    #[test]
    fn a_plain_lock_stops_all_but_its_holder() {
        let mut s = MemStore::new(1_000);
        take(&mut s, "p", LOCK);
        assert_eq!(who(&mut s, "x", LOCK), (vec!["p".to_string()], false));
        assert_eq!(who(&mut s, "p", LOCK), (vec![], true));
    }

    #[test]
    fn a_hold_of_the_other_kind_stops_nothing_here() {
        let mut s = MemStore::new(1_000);
        take(&mut s, "p", LOCK);
        assert_eq!(who(&mut s, "x", WRITE), (vec![], false));
        let mut s = MemStore::new(1_000);
        take(&mut s, "w", WRITE);
        assert_eq!(who(&mut s, "x", LOCK), (vec![], false));
    }
}

//! Who holds a lock in a way that stops a given acquisition, read from the
//! lock's own hash, so a hold a Redisson script took counts as much as one
//! the module took. The deadlock detector (`waiting::deadlock`) asks this
//! for every lock of the wait-for graph it walks. Reads only.

use super::hold::parse_count;
use super::kinds::Kind;
use super::names::{field_owner, MODE_FIELD};
use super::queue::Hold;
use super::store::{Fields, KeyKind, Store};

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
    blockers_in(&read(s, hash), owner, hold)
}

/// The lock `hash`'s fields as [`blockers_in`] reads them: empty when the
/// lock is missing or not a hash. The deadlock detector reads each lock of
/// its walk once, however many waiters of it the walk meets.
pub fn read<S: Store>(s: &mut S, hash: &[u8]) -> Fields {
    if s.kind(hash) != KeyKind::Hash {
        return Fields::default();
    }
    s.hgetall(hash)
}

/// [`blockers`] of a lock whose fields were read already ([`read`]).
pub fn blockers_in(fields: &Fields, owner: &[u8], hold: Hold) -> (Vec<Vec<u8>>, bool) {
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
        // Permits are nobody's: no owner stops a semaphore's acquisition.
        (Hold::Semaphore { .. } | Hold::Permit { .. }, _) => (false, false),
        // A latch's waiter waits for a count, which no holder keeps.
        (Hold::Latch, _) => (false, false),
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

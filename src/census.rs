//! `INFO rwlock`'s hold counts by kind (docs/design.md, "INFO rwlock
//! fields"): a census of the keyspace taken when `INFO rwlock` is read, so
//! that no lock command pays anything for it. Counters kept on the
//! module's own grants and releases would cost every acquisition and still
//! be wrong: a lease that runs out, a `DEL`, a flush or a Redisson script
//! changes holds without a module command.
//!
//! A key counts as a lock when it is a hash with a TTL (every lock hash has
//! its lease) whose fields are all holds, each a count from 1 to
//! `MAX_HOLDS` as Redisson writes them, besides a `mode` of `read` or
//! `write`: the data of contract §2 and §10.1, whoever wrote it. A field
//! `<owner>:write` is a write hold, another field of a hash with a `mode` a
//! read hold, of a hash without one a plain (or fair) lock's hold. The
//! census stops after `MAX_KEYS` keys, so `INFO rwlock` costs at most that
//! scan however large the keyspace, and says whether it saw every key.

use crate::engine::hold::parse_count;
use crate::engine::names::{field_owner, MODE_FIELD};
use crate::server;

/// Most keys one census looks at (all databases together): about 1.5 ms
/// of `INFO rwlock` on a 2-vCPU VM, 4 ms at most in a keyspace of 100,000
/// keys (docs/design.md).
pub const MAX_KEYS: u64 = 10_000;

/// What one census found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// Holds by kind: the sum of the counts (a re-entered hold counts as
    /// many times as it was taken).
    pub read: u64,
    pub write: u64,
    /// Plain and fair locks' holds: both are the plain lock's hash.
    pub lock: u64,
    /// Lock hashes found.
    pub locks: u64,
    /// Keys looked at.
    pub keys: u64,
    /// True when every key of every database was looked at.
    pub complete: bool,
}

impl Census {
    /// Counts the hash with these fields, when it is a lock (see the
    /// module's comment); anything else counts nothing.
    pub fn add_hash<'a>(&mut self, fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) {
        let fields: Vec<(&[u8], &[u8])> = fields.into_iter().collect();
        let mut rw = false;
        for (field, value) in &fields {
            if *field == MODE_FIELD {
                if *value != b"read" && *value != b"write" {
                    return;
                }
                rw = true;
            }
        }
        let (mut read, mut write, mut lock) = (0u64, 0u64, 0u64);
        for (field, value) in fields.iter().filter(|(f, _)| *f != MODE_FIELD) {
            let Ok(n) = parse_count(value) else {
                return;
            };
            let n = n as u64;
            match (field_owner(field).1, rw) {
                (true, _) => write += n,
                (false, true) => read += n,
                (false, false) => lock += n,
            }
        }
        if read + write + lock == 0 {
            return;
        }
        self.read += read;
        self.write += write;
        self.lock += lock;
        self.locks += 1;
    }
}

/// Takes the census of every database, at most `MAX_KEYS` keys.
pub fn take() -> Census {
    let mut census = Census::default();
    let walked = server::scan::hashes_with_ttl(MAX_KEYS, |fields| {
        census.add_hash(fields.iter().map(|(f, v)| (f.as_slice(), v.as_slice())));
    });
    census.keys = walked.keys;
    census.complete = walked.complete;
    census
}

#[cfg(test)]
mod tests {
    use super::*;

    fn census(hashes: &[&[(&str, &str)]]) -> Census {
        let mut c = Census::default();
        for fields in hashes {
            c.add_hash(fields.iter().map(|(f, v)| (f.as_bytes(), v.as_bytes())));
        }
        c
    }

    #[test]
    fn holds_are_counted_by_kind_with_their_counts() {
        let c = census(&[
            // Two readers, one re-entered.
            &[("mode", "read"), ("a:1", "2"), ("b:1", "1")],
            // A writer who also reads.
            &[("mode", "write"), ("w:1:write", "1"), ("w:1", "3")],
            // A plain (or fair) lock, re-entered.
            &[("p:1", "4")],
        ]);
        assert_eq!(
            c,
            Census {
                read: 6,
                write: 1,
                lock: 4,
                locks: 3,
                ..Census::default()
            }
        );
    }

    #[test]
    fn hashes_that_are_no_locks_count_nothing() {
        let c = census(&[
            &[("name", "x")],
            &[("count", "0")],
            &[("count", "100001")],
            &[("mode", "other"), ("a:1", "1")],
            &[("mode", "read")],
            &[("a", "1"), ("b", "01")],
            &[],
        ]);
        assert_eq!(c, Census::default());
    }
}

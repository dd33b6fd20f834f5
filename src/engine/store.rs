//! The storage the lock machine runs on: the few Redis operations Redisson's
//! scripts use, each with the side effects (keyspace event, replication) the
//! same command would have when a script runs it.

use super::error::LockError;
use super::index::LeaseIndex;
use super::int::parse_i64;

/// What a key holds, as far as the lock cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Missing,
    Hash,
    String,
    Other,
}

/// TTL reply of a missing key, as `PTTL` gives it.
pub const PTTL_MISSING: i64 = -2;
/// TTL reply of a key without expiry, as `PTTL` gives it.
pub const PTTL_PERSISTENT: i64 = -1;

/// Every field and value of a hash, kept in one buffer however many there
/// are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    bytes: Vec<u8>,
    /// Where each field ends in `bytes`, and where its value ends.
    ends: Vec<(usize, usize)>,
}

impl Fields {
    pub fn push(&mut self, field: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(field);
        let field_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((field_end, self.bytes.len()));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// `(field, value)` pairs in the order they were pushed.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(_, end)| end));
        starts.zip(&self.ends).map(|(start, &(field_end, end))| {
            (&self.bytes[start..field_end], &self.bytes[field_end..end])
        })
    }
}

/// A write the command itself makes moot before it returns: HINCRBY of a
/// field it then deletes, HDEL from a hash it then deletes (`mode` still in
/// it, so never the hash's last field).
#[derive(Debug, Clone, Copy)]
pub enum Moot<'a> {
    Hincrby {
        key: &'a [u8],
        field: &'a [u8],
        delta: i64,
    },
    Hdel {
        key: &'a [u8],
        field: &'a [u8],
    },
}

pub trait Store {
    /// The clock deadlines are computed from, in Unix milliseconds.
    fn now_ms(&mut self) -> i64;
    fn kind(&mut self, key: &[u8]) -> KeyKind;
    /// A hash field; `None` when the field or the hash is missing.
    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>>;
    /// [`Store::hget`], the value lent to `f` instead of copied.
    fn hget_with<R>(&mut self, key: &[u8], field: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        f(self.hget(key, field).as_deref())
    }
    /// Every field and value of a hash (empty when missing).
    fn hgetall(&mut self, key: &[u8]) -> Fields;
    fn hlen(&mut self, key: &[u8]) -> usize;
    /// `HSET`: event `hset`.
    fn hset(&mut self, key: &[u8], field: &[u8], value: &[u8]);
    /// A new hash with a lock's first two fields, `mode` and the first
    /// holder's: `HSET` of each in turn, as Redisson's scripts create it
    /// (two `hset` events). The default makes the two writes.
    fn create_hash(&mut self, key: &[u8], fields: [(&[u8], &[u8]); 2]) {
        for (field, value) in fields {
            self.hset(key, field, value);
        }
    }
    /// `HINCRBY`, the caller having checked the field is an integer that does
    /// not overflow: event `hincrby`.
    fn hincrby(&mut self, key: &[u8], field: &[u8], delta: i64) -> i64;
    /// `HDEL` of one existing field: event `hdel` (and `del` if the hash empties).
    fn hdel(&mut self, key: &[u8], field: &[u8]);
    /// A moot write: its event and propagated effect exactly as the write's,
    /// the data maybe left as it is, since nothing reads it before the
    /// command overwrites it. The default applies the write.
    fn moot(&mut self, write: Moot<'_>) {
        match write {
            Moot::Hincrby { key, field, delta } => {
                self.hincrby(key, field, delta);
            }
            Moot::Hdel { key, field } => self.hdel(key, field),
        }
    }
    /// Sends the replicas `HINCRBY key field 0`, which changes nothing and
    /// raises no event: a call answered from the lock as it is (`HELD n`,
    /// docs/design.md §14.8) writes this so that a `WAIT` behind it on its
    /// connection covers what the call it repeats wrote. A store without
    /// replicas sends nothing.
    fn replicate_unchanged(&mut self, _key: &[u8], _field: &[u8]) {}
    /// A string value, `None` when missing (the caller checked the kind).
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>>;
    /// `SET key value` then `PEXPIREAT key deadline`: events `set`, `expire`.
    fn set_until(&mut self, key: &[u8], value: &[u8], deadline: i64);
    /// `INCRBY key by` (`INCR` when `by` is 1) of a missing key or of an
    /// integer that `by` cannot overflow, which the caller checked: event
    /// `incrby`; the new value.
    fn incr_by(&mut self, key: &[u8], by: i64) -> i64;
    /// `INCRBY key by` of a count that is no fencing token (a semaphore's
    /// permits, a latch's count; `by` may be negative, as `DECRBY`, for which Redis raises
    /// `incrby` too), on the caller's checks as [`Store::incr_by`]: the TTL
    /// stays; the new value.
    fn add_to(&mut self, key: &[u8], by: i64) -> i64 {
        self.incr_by(key, by)
    }
    /// `SET key value`, any TTL dropped, as Redisson's semaphore scripts
    /// write a count and a latch's TRYSETCOUNT sets one: event `set`.
    fn set(&mut self, key: &[u8], value: &[u8]);
    /// How far past its value the next fencing token of the counter `key`
    /// must jump: 0, except for the first token a node issues for it after
    /// it was promoted to master, when its copy of the counter may be behind
    /// tokens the old master issued (contract §10.1).
    fn token_gap(&mut self, _key: &[u8]) -> i64 {
        0
    }
    /// `PTTL`: remaining milliseconds, `PTTL_MISSING` or `PTTL_PERSISTENT`.
    fn pttl(&mut self, key: &[u8]) -> i64;
    /// `PEXPIREAT`: event `expire`, or `del` when the deadline has passed.
    /// Does nothing and returns false when the key is missing.
    fn expire_at(&mut self, key: &[u8], deadline: i64) -> bool;
    /// `DEL`: event `del` when the key existed.
    fn del(&mut self, key: &[u8]) -> bool;
    /// Publishes a lock message (the payload `0` or `1`).
    fn publish(&mut self, channel: &[u8], message: &[u8]);

    /// How many read leases a lock needs before its [`LeaseIndex`] is worth
    /// keeping; `None` when the store keeps none.
    fn lease_index_from(&mut self) -> Option<usize> {
        None
    }
    /// Runs `f` on the lease index kept for the lock `hash`, if there is one.
    fn with_lease_index<R>(
        &mut self,
        _hash: &[u8],
        _f: impl FnOnce(&mut LeaseIndex) -> R,
    ) -> Option<R> {
        None
    }
    /// Keeps `index` for the lock `hash` (the store may decline).
    fn keep_lease_index(&mut self, _hash: &[u8], _index: LeaseIndex) {}
    /// Drops the lock's index: the machine changed it in a way it does not track.
    fn forget_lease_index(&mut self, _hash: &[u8]) {}
}

/// What a fair lock's line keys hold: its queue must be a list, its
/// deadlines a sorted set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Missing,
    List,
    Zset,
    Other,
}

/// The list and sorted-set operations of Redisson's fair-lock scripts
/// (`RFairLock`'s line `redisson_lock_queue:{lock}` and its deadlines
/// `redisson_lock_timeout:{lock}`), each with the keyspace event and the
/// replicated effect the same command has when a script runs it. Scores are
/// whole milliseconds, as every score the scripts and commands write is.
/// Kept apart from [`Store`] so that stores which never serve a fair lock
/// need none of it.
pub trait Line: Store {
    /// What `key` holds, by the types the line uses.
    fn line_kind(&mut self, key: &[u8]) -> LineKind;
    /// `LINDEX key index` (negative from the end); `None` past either end.
    fn lindex(&mut self, key: &[u8], index: i64) -> Option<Vec<u8>>;
    /// `LRANGE key 0 -1`.
    fn lrange(&mut self, key: &[u8]) -> Vec<Vec<u8>>;
    /// `LPOS key value`: the index of the first `value`.
    fn lpos(&mut self, key: &[u8], value: &[u8]) -> Option<usize> {
        self.lrange(key).iter().position(|element| element == value)
    }
    /// `LRANGE key start -1`.
    fn lrange_from(&mut self, key: &[u8], start: usize) -> Vec<Vec<u8>> {
        let mut all = self.lrange(key);
        all.drain(..start.min(all.len()));
        all
    }
    /// `LPOP key`: event `lpop` (and `del` when it empties) unless missing.
    fn lpop(&mut self, key: &[u8]);
    /// `RPUSH key value`: event `rpush`.
    fn rpush(&mut self, key: &[u8], value: &[u8]);
    /// `LREM key 0 value`: event `lrem` (and `del`) when it removed any.
    fn lrem(&mut self, key: &[u8], value: &[u8]);
    /// `ZSCORE key member`.
    fn zscore(&mut self, key: &[u8], member: &[u8]) -> Option<i64>;
    /// `ZADD key score member`: event `zadd`; true when the member is new.
    fn zadd(&mut self, key: &[u8], score: i64, member: &[u8]) -> bool;
    /// `ZINCRBY key delta member` (a missing member starts at 0): event `zincr`.
    fn zincrby(&mut self, key: &[u8], delta: i64, member: &[u8]);
    /// `ZREM key member`: event `zrem` (and `del`) when it was there.
    fn zrem(&mut self, key: &[u8], member: &[u8]);
    /// `ZRANGE key 0 -1`: members by score, then by bytes.
    fn zrange(&mut self, key: &[u8]) -> Vec<Vec<u8>>;
}

/// The integer a string key holds (a fencing token, a latch, a semaphore's
/// or a count-down latch's count): None when the key is missing, `corrupt`
/// when its value is not an integer, `WrongType` for a hash or another type.
pub fn integer_at<S: Store>(
    s: &mut S,
    key: &[u8],
    corrupt: LockError,
) -> Result<Option<i64>, LockError> {
    match s.kind(key) {
        KeyKind::Missing => Ok(None),
        KeyKind::String => s
            .get(key)
            .as_deref()
            .and_then(parse_i64)
            .map(Some)
            .ok_or(corrupt),
        KeyKind::Hash | KeyKind::Other => Err(LockError::WrongType),
    }
}

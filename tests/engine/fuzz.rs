//! Fuzz test of the lock machine (proptest): random sequences of every
//! operation, with time passing, on an in-memory store that the test also
//! fills with arbitrary and corrupt contents (hashes with any fields and
//! values, keys of other types where the lock, its timeout keys or its
//! latches live). Whatever the input:
//!
//! - nothing panics (the store panics on a write the machine must never
//!   make: a hash field into another type, an increment of a non-integer);
//! - an operation that fails leaves every key, value and deadline as it was,
//!   raises no event and publishes nothing; `INFO` never changes anything;
//! - from a well-formed lock, a successful operation leaves a well-formed
//!   lock: a `mode` of `read` or `write`, counts from 1 to 100000, a write
//!   lock held by one owner only (with that owner's reads), a read lock with
//!   no write field;
//! - a corrupt lock is never repaired silently: after a successful
//!   operation its bad mode and bad counts are still there (the one way it
//!   may go is Redisson's: a write re-entry of 1 ms on a hash without TTL
//!   expires it at once);
//! - the queue serves waiters in order, a prefix of the queue.
//!
//! The plain lock's fuzz test (lock_fuzz.rs) draws from the same strategies.
//!
//! `PROPTEST_CASES` sets the number of cases (`make fuzz` runs many more);
//! failures are kept in `proptest-regressions/`.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use crate::fuzz_cases::cases;
use crate::memstore::{MemStore, Value};
use ::rwlock::engine::error::MAX_MILLIS;
use ::rwlock::engine::int::parse_i64;
use ::rwlock::engine::names::{LockNames, MODE_FIELD, WRITE_SUFFIX};
use ::rwlock::engine::queue::{admit, Ticket};
use ::rwlock::engine::rwlock::{
    force_unlock, info, parse_count, read_lock, renew, unlock, write_lock, Mode, Request,
};

pub(super) const T0: i64 = 1_700_000_000_000;
pub(super) const LOCKS: [&str; 2] = ["L", "{t}:a"];
/// Valid owners, and three the machine must refuse.
pub(super) const OWNERS: [&str; 6] = ["u:1", "u:2", "{o}", "mode", "x:write", ""];
pub(super) const REQUESTS: [&str; 2] = ["r1", "r2"];
const LEASES: [i64; 8] = [1, 2, 7, 50, 1_000, 30_000, 600_000, MAX_MILLIS];

#[derive(Debug, Clone)]
enum Op {
    Read(usize, usize, i64),
    Write(usize, usize, i64),
    Unlock(usize, usize, Mode, i64, Option<(usize, i64)>),
    Renew(usize, usize, i64),
    Force(usize, Option<Mode>),
    Info(usize),
    Admit(usize, Vec<(usize, Mode, i64)>),
    Advance(i64),
    /// Raw contents written by someone else: key, value, deadline offset.
    Put(Vec<u8>, Value, Option<i64>),
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![Just(Mode::Read), Just(Mode::Write)]
}

pub(super) fn lease() -> impl Strategy<Value = i64> {
    prop::sample::select(&LEASES[..])
}

pub(super) fn owner() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0..3usize, 1 => 3..OWNERS.len()]
}

pub(super) fn bytes_from(list: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(list).prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..6),
    ]
}

/// A hold count: mostly a good one (the largest included), sometimes one
/// that is not.
pub(super) fn count() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => prop::sample::select(&["1", "2", "3", "99999", "100000"][..])
            .prop_map(|s| s.as_bytes().to_vec()),
        1 => bytes_from(&["0", "-1", "01", "100001", "99999999999999999999", "", "1.0", " 1"]),
    ]
}

/// Hash contents: mostly a plausible lock (a mode, owners with counts) with
/// a bad mode or a bad count here and there, sometimes anything at all.
fn hash_value() -> impl Strategy<Value = Value> {
    let field = bytes_from(&["u:1", "u:2", "{o}", "u:1:write", "u:2:write", "mode", "x"]);
    let mode = prop_oneof![
        6 => prop::sample::select(&["read", "write"][..]).prop_map(|s| Some(s.as_bytes().to_vec())),
        1 => bytes_from(&["READ", "", "x", "readwrite"]).prop_map(Some),
        1 => Just(None),
    ];
    (mode, prop::collection::btree_map(field, count(), 0..4)).prop_map(|(mode, mut fields)| {
        if let Some(m) = mode {
            fields.insert(MODE_FIELD.to_vec(), m);
        }
        Value::Hash(fields)
    })
}

pub(super) fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => hash_value(),
        2 => bytes_from(&["1", "0", "x", ""]).prop_map(Value::Str),
        1 => Just(Value::List),
    ]
}

/// A key where the machine reads or writes: a lock, a timeout key, a latch.
fn key() -> impl Strategy<Value = Vec<u8>> {
    let lock = 0..LOCKS.len();
    prop_oneof![
        3 => lock.clone().prop_map(|l| LOCKS[l].as_bytes().to_vec()),
        3 => (lock.clone(), 0..3usize, 1i64..4).prop_map(|(l, o, n)| {
            names(l).timeout_key(OWNERS[o].as_bytes(), n)
        }),
        1 => (lock, 0..REQUESTS.len()).prop_map(|(l, r)| names(l).latch_key(REQUESTS[r].as_bytes())),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let lock = 0..LOCKS.len();
    prop_oneof![
        4 => (lock.clone(), owner(), lease()).prop_map(|(l, o, x)| Op::Read(l, o, x)),
        3 => (lock.clone(), owner(), lease()).prop_map(|(l, o, x)| Op::Write(l, o, x)),
        4 => (
            lock.clone(),
            owner(),
            mode(),
            lease(),
            prop::option::of((0..REQUESTS.len(), lease()))
        )
            .prop_map(|(l, o, m, x, r)| Op::Unlock(l, o, m, x, r)),
        2 => (lock.clone(), owner(), lease()).prop_map(|(l, o, x)| Op::Renew(l, o, x)),
        1 => (lock.clone(), prop::option::of(mode())).prop_map(|(l, m)| Op::Force(l, m)),
        1 => lock.clone().prop_map(Op::Info),
        2 => (lock, prop::collection::vec((owner(), mode(), lease()), 0..4))
            .prop_map(|(l, q)| Op::Admit(l, q)),
        2 => prop::sample::select(&[0i64, 1, 2, 49, 1_000, 30_000, 1_000_000_000][..])
            .prop_map(Op::Advance),
        2 => (key(), any_value(), prop::option::of(-5i64..100_000))
            .prop_map(|(k, v, d)| Op::Put(k, v, d)),
    ]
}

pub(super) fn names(lock: usize) -> LockNames<'static> {
    LockNames::new(LOCKS[lock].as_bytes()).expect("a valid lock name")
}

type Dump = [(Vec<u8>, Value, Option<i64>)];

fn hash_of(dump: &Dump, lock: usize) -> Option<&Value> {
    dump.iter()
        .find(|(k, _, _)| k == LOCKS[lock].as_bytes())
        .map(|(_, v, _)| v)
}

/// The fields of a lock hash that no operation may accept: a mode other
/// than read or write, a count that is not one.
fn corrupt_fields(hash: Option<&Value>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Some(Value::Hash(fields)) = hash else {
        return Vec::new();
    };
    fields
        .iter()
        .filter(|(f, v)| {
            if f.as_slice() == MODE_FIELD {
                v.as_slice() != b"read" && v.as_slice() != b"write"
            } else {
                parse_count(v).is_err()
            }
        })
        .map(|(f, v)| (f.clone(), v.clone()))
        .collect()
}

/// Whether `op` may be a write re-entry that a persistent hash cannot survive.
fn expires_at_once(op: &Op, dump: &Dump, lock: usize) -> bool {
    let persistent = dump
        .iter()
        .any(|(k, _, at)| k == LOCKS[lock].as_bytes() && at.is_none());
    let one_ms_write = match op {
        Op::Write(l, _, 1) => *l == lock,
        // A waiter's attempt is the same acquisition.
        Op::Admit(l, queue) => {
            *l == lock && queue.iter().any(|(_, m, x)| *m == Mode::Write && *x == 1)
        }
        _ => false,
    };
    one_ms_write && persistent
}

/// A lock as the contract describes it (absent counts as well-formed); else why not.
fn well_formed(hash: Option<&Value>) -> Result<(), String> {
    let fields = match hash {
        None => return Ok(()),
        Some(Value::Hash(fields)) => fields,
        Some(other) => return Err(format!("the lock is a {other:?}")),
    };
    let holds: BTreeMap<&[u8], &[u8]> = fields
        .iter()
        .filter(|(f, _)| f.as_slice() != MODE_FIELD)
        .map(|(f, v)| (f.as_slice(), v.as_slice()))
        .collect();
    for (f, v) in &holds {
        parse_count(v).map_err(|_| {
            format!(
                "count {:?} of {:?}",
                v.escape_ascii().to_string(),
                f.escape_ascii().to_string()
            )
        })?;
    }
    let writers: Vec<&[u8]> = holds
        .keys()
        .filter_map(|f| f.strip_suffix(WRITE_SUFFIX))
        .collect();
    match fields.get(MODE_FIELD).map(Vec::as_slice) {
        Some(b"write") => {
            let [writer] = writers[..] else {
                return Err(format!("a write lock with writers {writers:?}"));
            };
            // Mutual exclusion: only the writer's own reads beside it.
            for f in holds.keys() {
                if *f != writer && f.strip_suffix(WRITE_SUFFIX) != Some(writer) {
                    return Err(format!("another owner {f:?} beside writer {writer:?}"));
                }
            }
            Ok(())
        }
        Some(b"read") if writers.is_empty() && !holds.is_empty() => Ok(()),
        other => Err(format!("mode {other:?} with holds {holds:?}")),
    }
}

/// Runs one operation; `Err` when the machine reported an error.
fn run(s: &mut MemStore, op: &Op) -> Result<(), String> {
    let owner = |o: &usize| OWNERS[*o].as_bytes();
    let shown = |e: ::rwlock::engine::error::LockError| e.message().to_string();
    match op {
        Op::Read(l, o, x) => read_lock(s, &names(*l), owner(o), *x)
            .map(drop)
            .map_err(shown),
        Op::Write(l, o, x) => write_lock(s, &names(*l), owner(o), *x, false)
            .map(drop)
            .map_err(shown),
        Op::Unlock(l, o, m, x, r) => {
            let request = r.map(|(id, ttl)| Request {
                id: REQUESTS[id].as_bytes(),
                ttl,
            });
            unlock(s, &names(*l), owner(o), *m, *x, request)
                .map(drop)
                .map_err(shown)
        }
        Op::Renew(l, o, x) => renew(s, &names(*l), owner(o), *x).map(drop).map_err(shown),
        Op::Force(l, m) => force_unlock(s, &names(*l), *m).map(drop).map_err(shown),
        Op::Info(l) => info(s, &names(*l)).map(drop).map_err(shown),
        Op::Admit(l, waiting) => {
            let mut queue: VecDeque<Ticket<usize>> = waiting
                .iter()
                .enumerate()
                .map(|(i, (o, m, x))| Ticket {
                    owner: OWNERS[*o].as_bytes().to_vec(),
                    hold: (*m).into(),
                    lease: *x,
                    token: i,
                    multi: false,
                    request: None,
                })
                .collect();
            let served = admit(s, &names(*l), &mut queue);
            let order: Vec<usize> = served.iter().map(|w| w.ticket.token).collect();
            if order != (0..served.len()).collect::<Vec<_>>() {
                return Err(format!("served out of order: {order:?}"));
            }
            Ok(())
        }
        Op::Advance(ms) => {
            s.advance(*ms);
            Ok(())
        }
        Op::Put(k, v, d) => {
            s.put(k, v.clone(), d.map(|d| s.now + d));
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(1500)))]

    #[test]
    fn the_machine_survives_any_contents_and_fails_without_effect(
        ops in prop::collection::vec(op(), 1..40)
    ) {
        let mut s = MemStore::new(T0);
        for (step, op) in ops.iter().enumerate() {
            let before = s.dump();
            s.events.clear();
            s.published.clear();
            let result = run(&mut s, op);
            let after = s.dump();
            match (&result, op) {
                (_, Op::Put(..)) | (_, Op::Advance(_)) => continue,
                (Err(e), Op::Admit(..)) if e.starts_with("served") => {
                    prop_assert!(false, "step {step} {op:?}: {e}");
                }
                (Err(e), _) => {
                    prop_assert_eq!(&before, &after, "step {} {:?} failed ({}) but changed the store", step, op, e);
                    prop_assert!(s.events.is_empty(), "step {step} {op:?} failed ({e}) but raised {:?}", s.events);
                    prop_assert!(s.published.is_empty(), "step {step} {op:?} failed ({e}) but published");
                }
                (Ok(()), Op::Info(_)) => {
                    prop_assert_eq!(&before, &after, "step {} INFO changed the store", step);
                    prop_assert!(s.events.is_empty() && s.published.is_empty());
                }
                (Ok(()), _) => {}
            }
            for (lock, name) in LOCKS.iter().enumerate() {
                let bad = corrupt_fields(hash_of(&before, lock));
                if result.is_ok() && !bad.is_empty() && !expires_at_once(op, &before, lock) {
                    let Some(Value::Hash(now)) = hash_of(&after, lock) else {
                        prop_assert!(false, "step {step} {op:?} removed corrupt lock {} ({bad:?})", name);
                        continue;
                    };
                    for (f, v) in &bad {
                        prop_assert_eq!(now.get(f), Some(v), "step {} {:?} repaired {:?} of {}", step, op, f, name);
                    }
                }
                if well_formed(hash_of(&before, lock)).is_ok() {
                    let now = well_formed(hash_of(&after, lock));
                    prop_assert!(now.is_ok(), "step {step} {op:?} broke {}: {}", name, now.unwrap_err());
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(20000)))]

    /// Accepted exactly when the bytes are an i64 as Rust prints it (the
    /// canonical form `string2ll` accepts), with that value.
    #[test]
    fn parse_i64_accepts_exactly_canonical_decimals(
        text in prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            "-?[0-9]{1,20}",
            "[-+0-9 .x]{0,22}",
        ]
    ) {
        let canonical = text.parse::<i64>().ok().filter(|n| n.to_string() == text);
        prop_assert_eq!(parse_i64(text.as_bytes()), canonical, "{:?}", text);
    }
}

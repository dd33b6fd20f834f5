//! Unit tests of `engine::multi` (src/engine/multi.rs), over the in-memory store.

use crate::memstore::{MemStore, Value};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, Unlocked};
use ::rwlock::engine::lock::{self, Options};
use ::rwlock::engine::multi::*;
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::{attempt, Hold};
use ::rwlock::engine::rwlock;
use ::rwlock::engine::store::Store;

const LOCK: Hold = Hold::Lock(Options {
    fenced: false,
    non_reentrant: false,
});
const WRITE: Hold = Hold::Write { fenced: false };

fn want(name: &'static str, hold: Hold) -> Want<'static> {
    Want {
        names: LockNames::new(name.as_bytes()).expect("name"),
        hold,
    }
}

#[test]
fn all_holds_are_taken_as_the_single_commands_take_them() {
    let mut s = MemStore::new(1_000);
    let wants = [want("A", LOCK), want("B", Hold::Read), want("C", WRITE)];
    let granted = acquire_all(&mut s, b"o:1", 5_000, &wants).expect("no error");
    assert!(matches!(granted, Attempt::Granted(ref g) if g.len() == 3));
    let mut single = MemStore::new(1_000);
    for w in &wants {
        attempt(&mut single, &w.names, b"o:1", w.hold, 5_000).expect("single");
    }
    assert_eq!(s.dump(), single.dump(), "the same data, deadlines and keys");
    assert_eq!(s.take_events(), single.take_events(), "and the same events");
}

#[test]
fn one_lock_in_the_way_takes_nothing_and_replies_the_largest_pttl() {
    let mut s = MemStore::new(1_000);
    lock::acquire(
        &mut s,
        &want("B", LOCK).names,
        b"x:1",
        700,
        Options::default(),
    )
    .expect("B");
    rwlock::write_lock(&mut s, &want("C", LOCK).names, b"x:1", 900, false).expect("C");
    s.take_events();
    let before = s.dump();
    let wants = [want("A", LOCK), want("B", LOCK), want("C", Hold::Read)];
    assert_eq!(
        acquire_all(&mut s, b"o:1", 5_000, &wants),
        Ok(Attempt::Refused { pttl: 900 })
    );
    assert_eq!(s.dump(), before, "A was free but is not taken");
    assert!(s.take_events().is_empty());
    assert!(s.published.is_empty());
}

#[test]
fn a_lock_without_ttl_in_the_way_counts_as_the_longest() {
    let mut s = MemStore::new(1_000);
    s.put(b"B", Value::hash(&[(b"x:1", b"1")]), None);
    lock::acquire(
        &mut s,
        &want("A", LOCK).names,
        b"x:1",
        700,
        Options::default(),
    )
    .expect("A");
    let wants = [want("A", LOCK), want("B", LOCK)];
    assert_eq!(
        acquire_all(&mut s, b"o:1", 5_000, &wants),
        Ok(Attempt::Refused { pttl: -1 })
    );
    assert_eq!(longer(5, -1), -1);
    assert_eq!(longer(-2, 7), 7);
}

#[test]
fn an_error_on_any_hold_changes_nothing() {
    let mut s = MemStore::new(1_000);
    s.put(b"C", Value::Str(b"x".to_vec()), None);
    s.put(b"D", Value::hash(&[(b"mode", b"bogus")]), None);
    let before = s.dump();
    let wrong = [want("A", LOCK), want("B", Hold::Read), want("C", LOCK)];
    assert_eq!(
        acquire_all(&mut s, b"o:1", 5_000, &wrong),
        Err(LockError::WrongType)
    );
    let corrupt = [want("A", LOCK), want("D", WRITE)];
    assert_eq!(
        acquire_all(&mut s, b"o:1", 5_000, &corrupt),
        Err(LockError::Corrupt)
    );
    assert_eq!(
        unlock_all(&mut s, b"o:1", 5_000, &wrong),
        Err(LockError::WrongType)
    );
    assert_eq!(
        renew_all(&mut s, b"o:1", 5_000, &corrupt),
        Err(LockError::Corrupt)
    );
    assert_eq!(s.dump(), before);
    assert!(s.take_events().is_empty());
}

#[test]
fn unlock_all_and_renew_all_reply_each_single_commands_reply() {
    let mut s = MemStore::new(1_000);
    let wants = [want("A", LOCK), want("B", Hold::Read), want("C", WRITE)];
    acquire_all(&mut s, b"o:1", 5_000, &wants).expect("taken");
    // A taken twice: its release leaves it held.
    lock::acquire(&mut s, &wants[0].names, b"o:1", 5_000, Options::default()).expect("A");
    let not_held = [want("Z", LOCK)];
    assert_eq!(renew_all(&mut s, b"o:1", 9_000, &wants), Ok(vec![true; 3]));
    assert_eq!(renew_all(&mut s, b"o:1", 9_000, &not_held), Ok(vec![false]));
    assert_eq!(s.pttl(b"A"), 9_000);
    let replies: Vec<_> = unlock_all(&mut s, b"o:1", 5_000, &wants)
        .expect("released")
        .into_iter()
        .map(Unlocked::reply)
        .collect();
    assert_eq!(replies, vec![Some(0), Some(1), Some(1)]);
    assert_eq!(
        s.published.len(),
        2,
        "B and C published as their unlocks do"
    );
    let again: Vec<_> = unlock_all(&mut s, b"o:1", 5_000, &wants[1..])
        .expect("nothing held")
        .into_iter()
        .map(Unlocked::reply)
        .collect();
    assert_eq!(again, vec![None, None]);
}

#[test]
fn the_owners_own_holds_re_enter() {
    let mut s = MemStore::new(1_000);
    let wants = [want("A", LOCK), want("B", WRITE)];
    acquire_all(&mut s, b"o:1", 5_000, &wants).expect("first");
    let read_under_write = [want("A", LOCK), want("B", Hold::Read)];
    let again = acquire_all(&mut s, b"o:1", 5_000, &read_under_write).expect("again");
    assert!(
        matches!(again, Attempt::Granted(ref g) if g.iter().all(|g| g.reentry)),
        "{again:?}"
    );
    assert_eq!(s.hget(b"A", b"o:1").as_deref(), Some(&b"2"[..]));
}

/// Locks of the property test: two plain, two read-write.
const NAMES: [&str; 4] = ["P0", "P1", "R0", "R1"];
const OWNERS: [&[u8]; 3] = [b"a:1", b"b:1", b"m:1"];

/// A hold its lock's kind takes: plain locks `LOCK`, read-write locks
/// `READ` or `WRITE`.
fn hold_of(lock: usize, write: bool) -> Hold {
    match (lock < 2, write) {
        (true, _) => LOCK,
        (false, false) => Hold::Read,
        (false, true) => WRITE,
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
        crate::fuzz_cases::cases(2000)
    ))]

    /// Whatever the locks hold: the multi-hold does exactly what the
    /// single commands would do one after another when all of them
    /// would succeed, and otherwise changes nothing and replies the
    /// first error, or else the largest PTTL of the refusals.
    #[test]
    fn a_multi_hold_is_the_single_commands_or_nothing(
        before in proptest::collection::vec((0..3usize, 0..4usize, proptest::bool::ANY, 1..5_000i64), 0..8),
        retyped in proptest::option::of(0..4usize),
        owner in 0..3usize,
        picks in proptest::collection::vec((0..4usize, proptest::bool::ANY), 1..5),
        lease in 1..5_000i64,
    ) {
        let mut s = MemStore::new(1_000);
        for (o, l, write, lease) in before {
            let n = LockNames::new(NAMES[l].as_bytes()).expect("name");
            let _ = attempt(&mut s, &n, OWNERS[o], hold_of(l, write), lease);
        }
        if let Some(l) = retyped {
            s.put(NAMES[l].as_bytes(), Value::Str(b"x".to_vec()), None);
        }
        let mut wants = Vec::new();
        for (l, write) in picks {
            if !wants.iter().any(|w: &Want| w.names.hash() == NAMES[l].as_bytes()) {
                wants.push(want(NAMES[l], hold_of(l, write)));
            }
        }
        let owner = OWNERS[owner];
        s.take_events();
        let original = s.dump();
        let mut singles = s.clone();
        let mut expected: Result<Option<i64>, LockError> = Ok(None);
        for w in &wants {
            match attempt(&mut singles, &w.names, owner, w.hold, lease) {
                Err(e) => {
                    expected = Err(e);
                    break;
                }
                Ok(Attempt::Refused { pttl }) => {
                    if let Ok(refused) = &mut expected {
                        *refused = Some(refused.map_or(pttl, |p| longer(p, pttl)));
                    }
                }
                Ok(Attempt::Granted(_)) => {}
            }
        }
        let got = acquire_all(&mut s, owner, lease, &wants);
        match expected {
            Err(e) => proptest::prop_assert_eq!(got, Err(e)),
            Ok(Some(pttl)) => proptest::prop_assert_eq!(got, Ok(Attempt::Refused { pttl })),
            Ok(None) => {
                proptest::prop_assert!(matches!(got, Ok(Attempt::Granted(ref g)) if g.len() == wants.len()));
                proptest::prop_assert_eq!(s.dump(), singles.dump());
                proptest::prop_assert_eq!(s.take_events(), singles.take_events());
                return Ok(());
            }
        }
        proptest::prop_assert_eq!(s.dump(), original, "a refusal or an error changes nothing");
        proptest::prop_assert!(s.take_events().is_empty());
    }
}

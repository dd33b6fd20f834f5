//! Several holds of distinct locks as one step (docs/design.md, contract
//! §11): `LOCK.ACQUIREALL` takes all or none, `LOCK.UNLOCKALL` and
//! `LOCK.RENEWALL` release or renew each. Every machine reads and checks
//! what it needs before it writes, and distinct names share no key, so each
//! hold is first decided on a [`DryRun`] of the store, which drops the
//! writes: only when every hold would succeed is any of them made.

use super::error::LockError;
use super::hold::Unlocked;
use super::index::LeaseIndex;
use super::kinds::{self, Kind};
use super::names::LockNames;
use super::queue::{attempt, Attempt, Granted, Hold};
use super::store::{Fields, KeyKind, Moot, Store, PTTL_PERSISTENT};

/// One listed hold: its lock and what is asked of it, `LOCK`, `READ` or
/// `WRITE` (no fencing token, no `NOREENTRY`: their replies have no place
/// in the multi-hold's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want<'a> {
    pub names: LockNames<'a>,
    pub hold: Hold,
}

/// Outcome of a multi-hold acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllAttempt {
    /// Every hold taken, in the listed order.
    Granted(Vec<Granted>),
    /// Nothing taken: the largest PTTL among the locks in the way.
    Refused { pttl: i64 },
}

/// The longer of two waits a refusal reports: a lock without TTL (`-1`)
/// is held until released, longer than any PTTL.
pub fn longer(a: i64, b: i64) -> i64 {
    if a == PTTL_PERSISTENT || b == PTTL_PERSISTENT {
        PTTL_PERSISTENT
    } else {
        a.max(b)
    }
}

/// Whether every hold could be taken now: None when all could, else the
/// largest PTTL among the locks in the way. Writes nothing.
pub fn refusal<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Option<i64>, LockError> {
    let mut dry = DryRun(s);
    let mut refused = None;
    for w in wants {
        if let Attempt::Refused { pttl } = attempt(&mut dry, &w.names, owner, w.hold, lease)? {
            refused = Some(refused.map_or(pttl, |p| longer(p, pttl)));
        }
    }
    Ok(refused)
}

/// `LOCK.ACQUIREALL`: every hold as its single command takes it, or none.
/// An error on any hold (a wrong type, a corrupt lock) changes nothing.
pub fn acquire_all<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<AllAttempt, LockError> {
    if let Some(pttl) = refusal(s, owner, lease, wants)? {
        return Ok(AllAttempt::Refused { pttl });
    }
    let mut granted = Vec::with_capacity(wants.len());
    for w in wants {
        match attempt(s, &w.names, owner, w.hold, lease)? {
            Attempt::Granted(g) => granted.push(g),
            // The dry run read the same keys: a refusal now would mean a
            // machine that writes before it decides.
            Attempt::Refused { pttl } => return Ok(AllAttempt::Refused { pttl }),
        }
    }
    Ok(AllAttempt::Granted(granted))
}

/// One hold's release as its single unlock (`lease`: the TTL re-armed
/// while holds are left).
fn unlock_one<S: Store>(
    s: &mut S,
    w: &Want,
    owner: &[u8],
    lease: i64,
) -> Result<Unlocked, LockError> {
    kinds::release(s, &w.names, Kind::from(w.hold), owner, lease)
}

/// One lock's renewal as its single renew.
fn renew_one<S: Store>(s: &mut S, w: &Want, owner: &[u8], lease: i64) -> Result<bool, LockError> {
    kinds::renew(s, &w.names, Kind::from(w.hold), owner, lease)
}

/// `LOCK.UNLOCKALL`: one hold of each released as its single unlock does
/// (the per-hold replies nil, 0 or 1), after checking that none fails.
pub fn unlock_all<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Vec<Unlocked>, LockError> {
    for w in wants {
        unlock_one(&mut DryRun(s), w, owner, lease)?;
    }
    wants
        .iter()
        .map(|w| unlock_one(s, w, owner, lease))
        .collect()
}

/// `LOCK.RENEWALL`: each lock renewed as its single renew does (true when
/// the owner held it), after checking that none fails.
pub fn renew_all<S: Store>(
    s: &mut S,
    owner: &[u8],
    lease: i64,
    wants: &[Want],
) -> Result<Vec<bool>, LockError> {
    for w in wants {
        renew_one(&mut DryRun(s), w, owner, lease)?;
    }
    wants
        .iter()
        .map(|w| renew_one(s, w, owner, lease))
        .collect()
}

/// A store whose reads are the store's and whose writes go nowhere: the
/// machines decide on it what they would do.
pub struct DryRun<'s, S>(pub &'s mut S);

impl<S: Store> Store for DryRun<'_, S> {
    fn now_ms(&mut self) -> i64 {
        self.0.now_ms()
    }
    fn kind(&mut self, key: &[u8]) -> KeyKind {
        self.0.kind(key)
    }
    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        self.0.hget(key, field)
    }
    fn hget_with<R>(&mut self, key: &[u8], field: &[u8], f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        self.0.hget_with(key, field, f)
    }
    fn hgetall(&mut self, key: &[u8]) -> Fields {
        self.0.hgetall(key)
    }
    fn hlen(&mut self, key: &[u8]) -> usize {
        self.0.hlen(key)
    }
    fn hset(&mut self, _: &[u8], _: &[u8], _: &[u8]) {}
    fn create_hash(&mut self, _: &[u8], _: [(&[u8], &[u8]); 2]) {}
    fn hincrby(&mut self, _: &[u8], _: &[u8], _: i64) -> i64 {
        0
    }
    fn hdel(&mut self, _: &[u8], _: &[u8]) {}
    fn moot(&mut self, _: Moot<'_>) {}
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.get(key)
    }
    fn set_until(&mut self, _: &[u8], _: &[u8], _: i64) {}
    fn incr_by(&mut self, _: &[u8], _: i64) -> i64 {
        0
    }
    fn token_gap(&mut self, key: &[u8]) -> i64 {
        self.0.token_gap(key)
    }
    fn pttl(&mut self, key: &[u8]) -> i64 {
        self.0.pttl(key)
    }
    fn expire_at(&mut self, _: &[u8], _: i64) -> bool {
        false
    }
    fn del(&mut self, _: &[u8]) -> bool {
        false
    }
    fn publish(&mut self, _: &[u8], _: &[u8]) {}
    // No lease index: the machines fall back to the keys, which decide
    // the same, and none is kept or dropped.
    fn lease_index_from(&mut self) -> Option<usize> {
        None
    }
    fn with_lease_index<R>(&mut self, _: &[u8], _: impl FnOnce(&mut LeaseIndex) -> R) -> Option<R> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lock::{self, Options};
    use crate::engine::memstore::{MemStore, Value};
    use crate::engine::rwlock;

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
        assert!(matches!(granted, AllAttempt::Granted(ref g) if g.len() == 3));
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
        rwlock::write_lock(&mut s, &want("C", LOCK).names, b"x:1", 900).expect("C");
        s.take_events();
        let before = s.dump();
        let wants = [want("A", LOCK), want("B", LOCK), want("C", Hold::Read)];
        assert_eq!(
            acquire_all(&mut s, b"o:1", 5_000, &wants),
            Ok(AllAttempt::Refused { pttl: 900 })
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
            Ok(AllAttempt::Refused { pttl: -1 })
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
            matches!(again, AllAttempt::Granted(ref g) if g.iter().all(|g| g.reentry)),
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
            crate::engine::fuzz_cases::cases(2000)
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
                Ok(Some(pttl)) => proptest::prop_assert_eq!(got, Ok(AllAttempt::Refused { pttl })),
                Ok(None) => {
                    proptest::prop_assert!(matches!(got, Ok(AllAttempt::Granted(ref g)) if g.len() == wants.len()));
                    proptest::prop_assert_eq!(s.dump(), singles.dump());
                    proptest::prop_assert_eq!(s.take_events(), singles.take_events());
                    return Ok(());
                }
            }
            proptest::prop_assert_eq!(s.dump(), original, "a refusal or an error changes nothing");
            proptest::prop_assert!(s.take_events().is_empty());
        }
    }
}

//! Unit tests of the lock machine, one or more per row of contract §3.1–§3.6.
//! The set-up and checks marked `pub(super)` serve the plain lock's tests
//! (lock_tests.rs) too.

use std::fmt::Debug;

use crate::memstore::{MemStore, Value};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, Granted};
use ::rwlock::engine::int::parse_i64;
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::rwlock::*;
use ::rwlock::engine::store::Store;

pub(super) const T0: i64 = 1_700_000_000_000;
pub(super) const U: &[u8] = b"u1:57";
pub(super) const V: &[u8] = b"u2:9";

pub(super) fn setup() -> (MemStore, LockNames<'static>) {
    (MemStore::new(T0), LockNames::new(b"L").expect("name"))
}

/// One acquisition a test starts from: owner, mode, lease.
type Hold = (&'static [u8], Mode, i64);

fn reading(owner: &'static [u8], lease: i64) -> Hold {
    (owner, Mode::Read, lease)
}

fn writing(owner: &'static [u8], lease: i64) -> Hold {
    (owner, Mode::Write, lease)
}

/// The store of [`setup`] once each hold has acquired the lock in turn, all
/// at `T0`; the events those raised are dropped, so that a test sees only
/// its own.
fn held(holds: &[Hold]) -> (MemStore, LockNames<'static>) {
    let (mut s, n) = setup();
    for &(owner, mode, lease) in holds {
        let taken = match mode {
            Mode::Read => read_lock(&mut s, &n, owner, lease),
            Mode::Write => write_lock(&mut s, &n, owner, lease, false),
        };
        taken.expect("a set-up acquisition");
    }
    s.take_events();
    (s, n)
}

fn tk(n: &LockNames, owner: &[u8], i: i64) -> Vec<u8> {
    n.timeout_key(owner, i)
}

/// Asserts the keyspace events raised since the last look, each written
/// `"event key"`, and forgets them.
#[track_caller]
pub(super) fn assert_events(s: &mut MemStore, expected: &[&'static str]) {
    let expected: Vec<(&str, Vec<u8>)> = expected
        .iter()
        .map(|e| {
            let (event, key) = e.split_once(' ').expect("an event, a space, its key");
            (event, key.as_bytes().to_vec())
        })
        .collect();
    assert_eq!(s.take_events(), expected);
}

/// A field of the lock hash `L`.
pub(super) fn field(s: &mut MemStore, f: &[u8]) -> Option<String> {
    s.hget(b"L", f).map(|v| String::from_utf8(v).expect("utf8"))
}

/// The one message an unlock of `L` publishes, with its payload.
fn released(payload: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(b"redisson_rwlock:{L}".to_vec(), payload.to_vec())]
}

const FIRST: Result<Attempt, LockError> = granted(false);
const REENTRY: Result<Attempt, LockError> = granted(true);

const fn granted(reentry: bool) -> Result<Attempt, LockError> {
    Ok(Attempt::Granted(Granted {
        reentry,
        token: None,
    }))
}

fn refused(pttl: i64) -> Result<Attempt, LockError> {
    Ok(Attempt::Refused { pttl })
}

/// The reply an unlock gives, as the command sends it.
fn unlock_reply(
    s: &mut MemStore,
    n: &LockNames,
    owner: &[u8],
    mode: Mode,
    lease: i64,
    request: Option<Request<'_>>,
) -> Result<Option<i64>, LockError> {
    unlock(s, n, owner, mode, lease, request).map(Unlocked::reply)
}

/// [`unlock_reply`] with no `REQUEST` and a lease of 30 s (which only a
/// write unlock that leaves a hold uses).
fn release(
    s: &mut MemStore,
    n: &LockNames,
    owner: &[u8],
    mode: Mode,
) -> Result<Option<i64>, LockError> {
    unlock_reply(s, n, owner, mode, 30_000, None)
}

/// A `REQUEST id ttl` whose latch lives 5 s.
pub(super) fn request(id: &[u8]) -> Option<Request<'_>> {
    Some(Request { id, ttl: 5_000 })
}

/// Asserts that `call` gives `expected` and leaves the store as it was:
/// every key, value and deadline, no event raised and nothing published
/// (contract §7 for errors; a refusal or a call by a non-holder changes
/// nothing either).
#[track_caller]
pub(super) fn gives_without_effect<R: Debug + PartialEq>(
    s: &mut MemStore,
    expected: R,
    call: impl FnOnce(&mut MemStore) -> R,
) {
    let before = (s.dump(), s.events.len(), s.published.len());
    assert_eq!(call(s), expected);
    let after = (s.dump(), s.events.len(), s.published.len());
    assert_eq!(after, before, "the call changed the store");
}

// --- 3.1 RWLOCK.READ ---

#[test]
fn read_on_unlocked_creates_hash_and_timeout_key() {
    let (mut s, n) = setup();
    assert_eq!(read_lock(&mut s, &n, U, 30_000), FIRST);
    assert_eq!(field(&mut s, b"mode").as_deref(), Some("read"));
    assert_eq!(field(&mut s, U).as_deref(), Some("1"));
    assert_eq!(s.pttl(b"L"), 30_000);
    assert_eq!(s.get(&tk(&n, U, 1)), Some(b"1".to_vec()));
    assert_eq!(s.pttl(&tk(&n, U, 1)), 30_000);
    assert_events(
        &mut s,
        &[
            "hset L",
            "hset L",
            "set {L}:u1:57:rwlock_timeout:1",
            "expire {L}:u1:57:rwlock_timeout:1",
            "expire L",
        ],
    );
    assert!(s.published.is_empty());
}

#[test]
fn read_joins_read_mode_and_keeps_the_longer_ttl() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    s.advance(1_000);
    // A shorter lease keeps the hash's longer TTL.
    assert_eq!(read_lock(&mut s, &n, V, 5_000), FIRST);
    assert_eq!(field(&mut s, V).as_deref(), Some("1"));
    assert_eq!(s.pttl(b"L"), 29_000);
    assert_eq!(s.pttl(&tk(&n, V, 1)), 5_000);
    assert_events(
        &mut s,
        &[
            "hincrby L",
            "set {L}:u2:9:rwlock_timeout:1",
            "expire {L}:u2:9:rwlock_timeout:1",
            "expire L",
        ],
    );
    // A longer lease extends it.
    assert_eq!(read_lock(&mut s, &n, V, 60_000), REENTRY);
    assert_eq!(s.pttl(b"L"), 60_000);
}

#[test]
fn read_reentry_counts_and_adds_a_timeout_key() {
    let (mut s, n) = setup();
    for i in 0..3 {
        assert_eq!(read_lock(&mut s, &n, U, 10_000), granted(i > 0));
    }
    assert_eq!(field(&mut s, U).as_deref(), Some("3"));
    for i in 1..=3 {
        assert_eq!(s.pttl(&tk(&n, U, i)), 10_000);
    }
}

#[test]
fn read_on_persistent_read_hash_sets_the_lease() {
    let (mut s, n) = setup();
    s.put(b"L", Value::hash(&[(b"mode", b"read"), (V, b"1")]), None);
    assert_eq!(read_lock(&mut s, &n, U, 7_000), FIRST);
    assert_eq!(s.pttl(b"L"), 7_000);
}

#[test]
fn writer_may_take_reads_of_its_own_lock() {
    let (mut s, n) = held(&[writing(U, 30_000)]);
    assert_eq!(read_lock(&mut s, &n, U, 10_000), REENTRY);
    assert_eq!(field(&mut s, b"mode").as_deref(), Some("write"));
    assert_eq!(field(&mut s, U).as_deref(), Some("1"));
    assert_eq!(s.pttl(&tk(&n, U, 1)), 10_000);
    assert_eq!(s.pttl(b"L"), 30_000);
}

#[test]
fn read_is_refused_with_pttl_when_another_owner_writes() {
    let (mut s, n) = held(&[writing(V, 30_000)]);
    s.advance(500);
    gives_without_effect(&mut s, refused(29_500), |s| read_lock(s, &n, U, 10_000));
}

// --- 3.2 RWLOCK.WRITE ---

#[test]
fn write_on_unlocked_creates_hash() {
    let (mut s, n) = setup();
    assert_eq!(write_lock(&mut s, &n, U, 30_000, false), FIRST);
    assert_eq!(field(&mut s, b"mode").as_deref(), Some("write"));
    assert_eq!(field(&mut s, b"u1:57:write").as_deref(), Some("1"));
    assert_eq!(s.pttl(b"L"), 30_000);
    assert_events(&mut s, &["hset L", "hset L", "expire L"]);
    assert_eq!(s.dump().len(), 1, "a write hold has no side keys");
}

#[test]
fn write_reentry_adds_the_lease_to_the_remaining_ttl() {
    let (mut s, n) = held(&[writing(U, 30_000)]);
    s.advance(10_000);
    assert_eq!(write_lock(&mut s, &n, U, 30_000, false), REENTRY);
    assert_eq!(field(&mut s, b"u1:57:write").as_deref(), Some("2"));
    assert_eq!(s.pttl(b"L"), 50_000);
    assert_events(&mut s, &["hincrby L", "expire L"]);
}

#[test]
fn write_reentry_on_persistent_hash_gives_lease_minus_one() {
    let (mut s, n) = held(&[writing(U, 30_000)]);
    let h = Value::hash(&[(b"mode", b"write"), (b"u1:57:write", b"1")]);
    s.put(b"L", h.clone(), None);
    assert_eq!(write_lock(&mut s, &n, U, 30_000, false), REENTRY);
    assert_eq!(s.pttl(b"L"), 29_999);
    // With a 1 ms lease the deadline is now: Redis deletes the key at once.
    s.put(b"L", h, None);
    s.take_events();
    assert_eq!(write_lock(&mut s, &n, U, 1, false), REENTRY);
    assert_eq!(s.pttl(b"L"), -2);
    assert_events(&mut s, &["hincrby L", "del L"]);
}

#[test]
fn write_is_refused_in_read_mode_even_for_the_only_reader() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    s.advance(100);
    gives_without_effect(&mut s, refused(29_900), |s| {
        write_lock(s, &n, U, 10_000, false)
    });
    gives_without_effect(&mut s, refused(29_900), |s| {
        write_lock(s, &n, V, 10_000, false)
    });
}

#[test]
fn write_is_refused_when_another_owner_writes() {
    let (mut s, n) = held(&[writing(V, 30_000)]);
    assert_eq!(write_lock(&mut s, &n, U, 10_000, false), refused(30_000));
}

#[test]
fn write_acquires_after_the_lease_runs_out() {
    let (mut s, n) = held(&[reading(V, 1_000)]);
    s.advance(1_001);
    assert_eq!(write_lock(&mut s, &n, U, 1_000, false), FIRST);
}

// --- 3.3 RWLOCK.UNLOCK ... READ ---

#[test]
fn read_unlock_of_absent_lock_publishes_and_replies_nil() {
    let (mut s, n) = setup();
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(None));
    assert_eq!(s.published, released(b"0"));
    assert!(s.dump().is_empty());
}

#[test]
fn read_unlock_by_non_holder_changes_nothing() {
    let (mut s, n) = held(&[reading(V, 30_000)]);
    gives_without_effect(&mut s, Ok(None), |s| release(s, &n, U, Mode::Read));
    assert!(s.published.is_empty());
}

#[test]
fn read_unlock_of_last_hold_deletes_and_publishes() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(1)));
    assert!(s.dump().is_empty());
    assert_events(
        &mut s,
        &[
            "hincrby L",
            "hdel L",
            "del {L}:u1:57:rwlock_timeout:1",
            "del L",
        ],
    );
    assert_eq!(s.published, released(b"0"));
}

#[test]
fn read_unlock_with_other_readers_sets_ttl_to_longest_remaining_lease() {
    let (mut s, n) = held(&[reading(U, 30_000), reading(V, 10_000)]);
    s.advance(1_000);
    read_lock(&mut s, &n, V, 20_000).expect("v2");
    s.take_events();
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(0)));
    assert!(s.published.is_empty());
    // U's key is gone; V's longest lease (20 000 from t+1000) rules.
    assert_eq!(s.pttl(b"L"), 20_000);
    assert_eq!(s.hget(b"L", U), None);
    assert_eq!(s.pttl(&tk(&n, U, 1)), -2);
    assert_events(
        &mut s,
        &[
            "hincrby L",
            "hdel L",
            "del {L}:u1:57:rwlock_timeout:1",
            "expire L",
        ],
    );
}

#[test]
fn read_unlock_of_reentered_hold_drops_the_newest_key() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    s.advance(100);
    read_lock(&mut s, &n, U, 5_000).expect("2");
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(0)));
    assert_eq!(field(&mut s, U).as_deref(), Some("1"));
    assert_eq!(s.pttl(&tk(&n, U, 2)), -2);
    assert_eq!(s.pttl(b"L"), 29_900);
}

#[test]
fn read_unlock_deletes_when_remaining_readers_leases_are_gone() {
    let (mut s, n) = held(&[reading(V, 1_000), reading(U, 30_000), reading(U, 30_000)]);
    s.advance(2_000);
    // V crashed: its field remains but its timeout key expired. U releases
    // one hold: its other key still runs, so the lock lives.
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(0)));
    assert_eq!(s.pttl(b"L"), 28_000);
    // U releases its last hold: only V's dead field is left, so the lock ends.
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(1)));
    assert!(s.dump().is_empty());
    assert_eq!(s.published.len(), 1);
}

#[test]
fn read_unlock_under_own_write_keeps_ttl() {
    let (mut s, n) = held(&[writing(U, 30_000), reading(U, 10_000)]);
    s.advance(10_000);
    // Reader's key expired exactly now (PTTL 0): no positive lease is left,
    // and in write mode the TTL stays.
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(0)));
    assert_eq!(s.pttl(b"L"), 20_000);
    assert_eq!(field(&mut s, b"mode").as_deref(), Some("write"));
    assert!(s.published.is_empty());
}

#[test]
fn read_unlock_under_own_write_with_other_read_hold_uses_its_lease() {
    let (mut s, n) = held(&[writing(U, 30_000), reading(U, 50_000), reading(U, 50_000)]);
    assert_eq!(release(&mut s, &n, U, Mode::Read), Ok(Some(0)));
    assert_eq!(s.pttl(b"L"), 50_000);
}

// --- 3.3 RWLOCK.UNLOCK ... WRITE ---

#[test]
fn write_unlock_of_absent_lock_publishes_one_and_replies_nil() {
    let (mut s, n) = setup();
    assert_eq!(release(&mut s, &n, U, Mode::Write), Ok(None));
    assert_eq!(s.published, released(b"1"));
}

#[test]
fn write_unlock_in_read_mode_or_by_non_holder_replies_nil() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    gives_without_effect(&mut s, Ok(None), |s| release(s, &n, U, Mode::Write));
    let (mut s, n) = held(&[writing(V, 30_000)]);
    gives_without_effect(&mut s, Ok(None), |s| release(s, &n, U, Mode::Write));
    assert!(s.published.is_empty());
}

#[test]
fn write_unlock_of_reentered_hold_rearms_with_the_lease() {
    let (mut s, n) = held(&[writing(U, 30_000), writing(U, 30_000)]);
    assert_eq!(
        unlock_reply(&mut s, &n, U, Mode::Write, 7_000, None),
        Ok(Some(0))
    );
    assert_eq!(s.pttl(b"L"), 7_000);
    assert_eq!(field(&mut s, b"u1:57:write").as_deref(), Some("1"));
    assert_events(&mut s, &["hincrby L", "expire L"]);
}

#[test]
fn write_unlock_of_last_hold_deletes_and_publishes_one() {
    let (mut s, n) = held(&[writing(U, 30_000)]);
    assert_eq!(release(&mut s, &n, U, Mode::Write), Ok(Some(1)));
    assert!(s.dump().is_empty());
    assert_events(&mut s, &["hincrby L", "hdel L", "del L"]);
    assert_eq!(s.published, released(b"1"));
}

#[test]
fn write_unlock_with_own_reads_downgrades() {
    let (mut s, n) = held(&[writing(U, 30_000), reading(U, 10_000)]);
    s.advance(1_000);
    assert_eq!(release(&mut s, &n, U, Mode::Write), Ok(Some(1)));
    assert_eq!(field(&mut s, b"mode").as_deref(), Some("read"));
    assert_eq!(s.pttl(b"L"), 29_000, "TTL unchanged");
    assert!(s.published.is_empty());
    assert_events(&mut s, &["hincrby L", "hdel L", "hset L"]);
    // Another reader may now join.
    assert_eq!(read_lock(&mut s, &n, V, 1_000), FIRST);
}

// --- 3.3 REQUEST id ttl ---

#[test]
fn request_latch_makes_a_retried_unlock_idempotent() {
    let (mut s, n) = held(&[writing(U, 30_000), writing(U, 30_000)]);
    assert_eq!(
        unlock(&mut s, &n, U, Mode::Write, 30_000, request(b"r1")),
        Ok(Unlocked::Ran(Release::StillHeld))
    );
    let latch = n.latch_key(b"r1");
    assert_eq!(s.get(&latch), Some(b"0".to_vec()));
    assert_eq!(s.pttl(&latch), 5_000);
    // The retry replies the stored value and releases nothing more.
    assert_eq!(
        unlock(&mut s, &n, U, Mode::Write, 30_000, request(b"r1")),
        Ok(Unlocked::Replayed(0))
    );
    assert_eq!(field(&mut s, b"u1:57:write").as_deref(), Some("1"));
    assert_eq!(
        unlock_reply(&mut s, &n, U, Mode::Write, 30_000, request(b"r2")),
        Ok(Some(1))
    );
    assert_eq!(s.get(&n.latch_key(b"r2")), Some(b"1".to_vec()));
    s.advance(5_001);
    assert_eq!(s.get(&latch), None, "the latch expires");
}

#[test]
fn request_latch_stores_nothing_for_absent_lock_or_non_holder() {
    let (mut s, n) = setup();
    for mode in [Mode::Read, Mode::Write] {
        assert_eq!(
            unlock(&mut s, &n, U, mode, 30_000, request(b"a")),
            Ok(Unlocked::Ran(Release::NotLocked))
        );
        // Redisson's scripts latch 1 here: their resend would answer
        // "released" for a hold that was gone before the first send.
        assert_eq!(s.get(&n.latch_key(b"a")), None, "{mode:?}");
        assert_eq!(
            unlock_reply(&mut s, &n, U, mode, 30_000, request(b"a")),
            Ok(None),
            "{mode:?}"
        );
    }
    read_lock(&mut s, &n, V, 30_000).expect("v");
    assert_eq!(
        unlock_reply(&mut s, &n, U, Mode::Read, 30_000, request(b"b")),
        Ok(None)
    );
    assert_eq!(s.get(&n.latch_key(b"b")), None);
}

#[test]
fn request_latch_of_wrong_type_or_value_is_an_error() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    s.put(&n.latch_key(b"h"), Value::List, None);
    s.put(&n.latch_key(b"x"), Value::Str(b"x".to_vec()), None);
    gives_without_effect(&mut s, Err(LockError::WrongType), |s| {
        unlock_reply(s, &n, U, Mode::Read, 1, request(b"h"))
    });
    gives_without_effect(&mut s, Err(LockError::BadLatch), |s| {
        unlock_reply(s, &n, U, Mode::Read, 1, request(b"x"))
    });
}

// --- 3.4 RWLOCK.RENEW ---

#[test]
fn renew_of_writer_extends_the_hash() {
    let (mut s, n) = held(&[writing(U, 30_000)]);
    s.advance(20_000);
    assert_eq!(renew(&mut s, &n, U, 30_000), Ok(true));
    assert_eq!(s.pttl(b"L"), 30_000);
}

#[test]
fn renew_of_reader_extends_only_its_own_keys() {
    let (mut s, n) = held(&[reading(U, 10_000), reading(U, 10_000), reading(V, 10_000)]);
    s.advance(5_000);
    assert_eq!(renew(&mut s, &n, U, 30_000), Ok(true));
    assert_eq!(s.pttl(b"L"), 30_000);
    assert_eq!(s.pttl(&tk(&n, U, 1)), 30_000);
    assert_eq!(s.pttl(&tk(&n, U, 2)), 30_000);
    assert_eq!(s.pttl(&tk(&n, V, 1)), 5_000, "other readers are untouched");
    assert_events(
        &mut s,
        &[
            "expire L",
            "expire {L}:u1:57:rwlock_timeout:2",
            "expire {L}:u1:57:rwlock_timeout:1",
        ],
    );
}

#[test]
fn renew_of_non_holder_replies_false_and_changes_nothing() {
    let (mut s, n) = setup();
    assert_eq!(renew(&mut s, &n, U, 30_000), Ok(false));
    read_lock(&mut s, &n, V, 10_000).expect("v");
    gives_without_effect(&mut s, Ok(false), |s| renew(s, &n, U, 30_000));
}

// --- 3.5 RWLOCK.FORCEUNLOCK ---

#[test]
fn force_unlock_read_only_when_in_read_mode() {
    let (mut s, n) = held(&[writing(U, 30_000)]);
    assert_eq!(force_unlock(&mut s, &n, Some(Mode::Read)), Ok(false));
    assert!(s.published.is_empty());
    let (mut s, n) = held(&[reading(U, 30_000), reading(V, 30_000), reading(V, 30_000)]);
    assert_eq!(force_unlock(&mut s, &n, Some(Mode::Read)), Ok(true));
    assert!(s.dump().is_empty(), "hash and every timeout key are gone");
    assert_eq!(s.published, released(b"0"));
}

#[test]
fn force_unlock_write_only_when_in_write_mode() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    assert_eq!(force_unlock(&mut s, &n, Some(Mode::Write)), Ok(false));
    let (mut s, n) = held(&[writing(U, 30_000), reading(U, 30_000)]);
    assert_eq!(force_unlock(&mut s, &n, Some(Mode::Write)), Ok(true));
    assert!(s.dump().is_empty());
    assert_eq!(s.published[0].1, b"1");
}

#[test]
fn force_unlock_any_mode() {
    let (mut s, n) = setup();
    assert_eq!(force_unlock(&mut s, &n, None), Ok(false));
    assert!(s.published.is_empty());
    read_lock(&mut s, &n, U, 30_000).expect("r");
    assert_eq!(force_unlock(&mut s, &n, None), Ok(true));
    assert!(s.dump().is_empty());
    assert_eq!(s.published[0].1, b"1");
}

// --- 3.6 RWLOCK.INFO ---

#[test]
fn info_lists_owners_with_counts_and_leases() {
    let (mut s, n) = setup();
    assert_eq!(
        info(&mut s, &n),
        Ok(RwLockInfo {
            mode: None,
            pttl: -2,
            owners: vec![]
        })
    );
    write_lock(&mut s, &n, V, 30_000, false).expect("w");
    read_lock(&mut s, &n, V, 10_000).expect("r1");
    s.advance(1_000);
    read_lock(&mut s, &n, V, 20_000).expect("r2");
    assert_eq!(
        info(&mut s, &n),
        Ok(RwLockInfo {
            mode: Some(Mode::Write),
            pttl: 29_000,
            owners: vec![OwnerInfo {
                owner: V.to_vec(),
                reads: 2,
                writes: 1,
                leases: vec![9_000, 20_000],
            }]
        })
    );
}

// --- contract §7: bad state and input change nothing ---

#[test]
fn wrong_type_and_corrupt_hashes_are_errors_for_every_command() {
    let names = LockNames::new(b"L").expect("name");
    let cases = [
        (Value::Str(b"x".to_vec()), LockError::WrongType),
        (Value::List, LockError::WrongType),
        (Value::hash(&[(b"mode", b"banana")]), LockError::Corrupt),
        (Value::hash(&[(U, b"1")]), LockError::Corrupt),
    ];
    for (value, err) in cases {
        let mut s = MemStore::new(T0);
        s.put(b"L", value, Some(T0 + 1000));
        let before = s.dump();
        assert_eq!(read_lock(&mut s, &names, U, 1), Err(err));
        assert_eq!(write_lock(&mut s, &names, U, 1, false), Err(err));
        assert_eq!(
            unlock_reply(&mut s, &names, U, Mode::Read, 1, None),
            Err(err)
        );
        assert_eq!(
            unlock_reply(&mut s, &names, U, Mode::Write, 1, None),
            Err(err)
        );
        assert_eq!(renew(&mut s, &names, U, 1), Err(err));
        assert_eq!(force_unlock(&mut s, &names, None), Err(err));
        assert_eq!(info(&mut s, &names), Err(err));
        assert_eq!(s.dump(), before);
        assert!(s.events.is_empty() && s.published.is_empty());
    }
    let bad_count = Value::hash(&[
        (b"mode", b"read"),
        (U, b"x1"),
        (b"u1:57:write", b"-1"),
        (V, b"01"),
    ]);
    let mut s = MemStore::new(T0);
    s.put(b"L", bad_count, Some(T0 + 1000));
    let before = s.dump();
    let c = Err(LockError::Corrupt);
    assert_eq!(read_lock(&mut s, &names, U, 1).map(|_| ()), c);
    assert_eq!(read_lock(&mut s, &names, V, 1).map(|_| ()), c);
    assert_eq!(
        unlock_reply(&mut s, &names, U, Mode::Read, 1, None).map(|_| ()),
        c
    );
    // A write unlock in read mode replies nil without reading any count.
    assert_eq!(
        unlock_reply(&mut s, &names, U, Mode::Write, 1, None),
        Ok(None)
    );
    assert_eq!(renew(&mut s, &names, U, 1).map(|_| ()), c);
    assert_eq!(force_unlock(&mut s, &names, None).map(|_| ()), c);
    assert_eq!(info(&mut s, &names).map(|_| ()), c);
    assert_eq!(s.dump(), before);
}

#[test]
fn a_downgrade_checks_the_remaining_counts_before_writing() {
    let (mut s, n) = setup();
    let h = Value::hash(&[(b"mode", b"write"), (b"u1:57:write", b"1"), (U, b"x")]);
    s.put(b"L", h, Some(T0 + 30_000));
    gives_without_effect(&mut s, Err(LockError::Corrupt), |s| {
        unlock_reply(s, &n, U, Mode::Write, 1, None)
    });
}

#[test]
fn read_unlock_checks_every_count_before_writing() {
    let (mut s, n) = held(&[reading(U, 30_000)]);
    let h = Value::hash(&[(b"mode", b"read"), (U, b"1"), (V, b"one")]);
    s.put(b"L", h, Some(T0 + 30_000));
    gives_without_effect(&mut s, Err(LockError::Corrupt), |s| {
        unlock_reply(s, &n, U, Mode::Read, 1, None)
    });
}

#[test]
fn counts_and_deadlines_that_would_overflow_are_refused() {
    let (mut s, n) = setup();
    let max = MAX_HOLDS.to_string().into_bytes();
    let h = Value::hash(&[(b"mode", b"write"), (b"u1:57:write", &max), (U, &max)]);
    s.put(b"L", h, None);
    let overflow = Err(LockError::Overflow);
    gives_without_effect(&mut s, overflow, |s| write_lock(s, &n, U, 1, false));
    gives_without_effect(&mut s, overflow, |s| read_lock(s, &n, U, 1));
    // Past the bound a count is corrupt: no command loops over it.
    let past = i64::MAX.to_string().into_bytes();
    let h = Value::hash(&[(b"mode", b"write"), (b"u1:57:write", &max), (U, &past)]);
    s.put(b"L", h, None);
    let corrupt = Err(LockError::Corrupt);
    gives_without_effect(&mut s, corrupt, |s| read_lock(s, &n, U, 1).map(drop));
    gives_without_effect(&mut s, corrupt, |s| renew(s, &n, U, 1).map(drop));
    gives_without_effect(&mut s, corrupt, |s| info(s, &n).map(drop));
    gives_without_effect(&mut s, corrupt, |s| force_unlock(s, &n, None).map(drop));
    let h = Value::hash(&[(b"mode", b"write"), (b"u1:57:write", b"1")]);
    s.put(b"L", h, Some(i64::MAX - 5));
    assert_eq!(
        write_lock(&mut s, &n, U, 10, false),
        Err(LockError::Overflow)
    );
}

#[test]
fn reserved_owners_are_refused_by_every_owner_command() {
    let (mut s, n) = setup();
    for owner in [&b""[..], b"mode", b"x:write"] {
        let e = Err(LockError::BadOwner);
        assert_eq!(read_lock(&mut s, &n, owner, 1).map(|_| ()), e);
        assert_eq!(write_lock(&mut s, &n, owner, 1, false).map(|_| ()), e);
        assert_eq!(
            unlock_reply(&mut s, &n, owner, Mode::Read, 1, None).map(|_| ()),
            e
        );
        assert_eq!(renew(&mut s, &n, owner, 1).map(|_| ()), e);
    }
    assert!(s.dump().is_empty());
}

#[test]
fn parse_i64_is_as_strict_as_redis() {
    for ok in [
        "0",
        "1",
        "-1",
        "42",
        "9223372036854775807",
        "-9223372036854775808",
    ] {
        assert_eq!(parse_i64(ok.as_bytes()), ok.parse().ok(), "{ok}");
    }
    for bad in [
        "",
        "-",
        "01",
        "-0",
        "+1",
        " 1",
        "1 ",
        "1.0",
        "9223372036854775808",
        "x",
    ] {
        assert_eq!(parse_i64(bad.as_bytes()), None, "{bad:?}");
    }
}

// --- Lease indexes ---

/// Unlock among many readers, with and without the index: the lock keeps
/// the TTL of the longest lease still running, including one renewed at the
/// very millisecond it was due (Redis keeps a key until the clock is past
/// its deadline, so PEXPIREAT still finds it).
#[test]
fn indexed_unlock_keeps_the_longest_lease_even_one_renewed_when_due() {
    let run = |index_from: Option<usize>| {
        let (mut s, n) = setup();
        s.index_from = index_from;
        let readers: Vec<Vec<u8>> = (0..6).map(|i| format!("r{i}:1").into_bytes()).collect();
        for (i, r) in readers.iter().enumerate() {
            assert_eq!(read_lock(&mut s, &n, r, 100 + i as i64), FIRST);
        }
        assert_eq!(read_lock(&mut s, &n, U, 50), FIRST);
        assert_eq!(read_lock(&mut s, &n, U, 50), REENTRY);
        // The first unlock reads every lease (and builds the index).
        assert_eq!(
            unlock_reply(&mut s, &n, &readers[0], Mode::Read, 0, None),
            Ok(Some(0))
        );
        assert_eq!(s.pttl(b"L"), 105);
        s.advance(50);
        // U's leases are due now: renewed, they outlive every other.
        assert_eq!(renew(&mut s, &n, U, 1_000), Ok(true));
        assert_eq!(
            unlock_reply(&mut s, &n, &readers[5], Mode::Read, 0, None),
            Ok(Some(0))
        );
        assert_eq!(s.pttl(b"L"), 1_000);
        s.advance(600);
        assert_eq!(
            unlock_reply(&mut s, &n, U, Mode::Read, 0, None),
            Ok(Some(0))
        );
        assert_eq!(s.pttl(b"L"), 400, "U's other hold keeps the lock");
        let kept = !s.indexes().is_empty();
        assert_eq!(
            unlock_reply(&mut s, &n, U, Mode::Read, 0, None),
            Ok(Some(1))
        );
        assert!(s.indexes().is_empty(), "the lock is gone, and its index");
        (kept, s.dump(), s.take_events())
    };
    let (kept_plain, dump_plain, events_plain) = run(None);
    let (kept, dump, events) = run(Some(4));
    assert!(!kept_plain && kept);
    assert_eq!(dump, dump_plain);
    assert_eq!(events, events_plain);
}

//! Unit tests of the plain lock machine (engine/lock.rs) and of the fenced
//! write hold of the read-write one, one or more per behaviour of Redisson's
//! scripts (`lock.lua`, `fenced_lock.lua`, `nonreentrant_lock.lua`,
//! `unlock.lua`, `renew.lua`, `force_unlock.lua`), with the module's own
//! rules on top: every error changes nothing, a retyped or corrupt key is an
//! error before any write, and `LOCK.FORCEUNLOCK` refuses a key that is not
//! a hash where the script would delete it.

use crate::memstore::{MemStore, Value};
use crate::rwlock_tests::{assert_events, field, gives_without_effect, request, setup, T0, U, V};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, Granted, Release, Request, Unlocked, MAX_HOLDS};
use ::rwlock::engine::lock::{acquire, force_unlock, info, renew, unlock, LockInfo, Options};
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::rwlock::{self, Mode};
use ::rwlock::engine::store::Store;

const PLAIN: Options = options(false, false);
const FENCED: Options = options(true, false);
const NOREENTRY: Options = options(false, true);
const FENCED_NOREENTRY: Options = options(true, true);

const fn options(fenced: bool, non_reentrant: bool) -> Options {
    Options {
        fenced,
        non_reentrant,
    }
}

/// The fencing token counter and the channel of the lock `L`.
const TOKEN: &[u8] = b"redisson_lock_token:{L}";
const CHANNEL: &[u8] = b"redisson_lock__channel:{L}";

const FIRST: Result<Attempt, LockError> = taken(false, None);
const AGAIN: Result<Attempt, LockError> = taken(true, None);

const fn taken(reentry: bool, token: Option<i64>) -> Result<Attempt, LockError> {
    Ok(Attempt::Granted(Granted { reentry, token }))
}

fn refused(pttl: i64) -> Result<Attempt, LockError> {
    Ok(Attempt::Refused { pttl })
}

/// The store of [`setup`] once `owner` took `L` `holds` times with a lease of
/// 30 s, at `T0`; the events those raised are dropped, so that a test sees
/// only its own.
fn held_by(owner: &[u8], holds: i64, options: Options) -> (MemStore, LockNames<'static>) {
    let (mut s, n) = setup();
    for _ in 0..holds {
        let taken = acquire(&mut s, &n, owner, 30_000, options);
        assert!(
            matches!(taken, Ok(Attempt::Granted(_))),
            "a set-up acquisition: {taken:?}"
        );
    }
    s.take_events();
    (s, n)
}

/// The reply an unlock gives, as `LOCK.UNLOCK` sends it.
fn release(
    s: &mut MemStore,
    n: &LockNames,
    owner: &[u8],
    lease: i64,
    request: Option<Request<'_>>,
) -> Result<Option<i64>, LockError> {
    unlock(s, n, owner, lease, request).map(Unlocked::reply)
}

/// The one message a release of `L` publishes.
fn released() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(CHANNEL.to_vec(), b"0".to_vec())]
}

fn string(text: &str) -> Value {
    Value::Str(text.as_bytes().to_vec())
}

/// Values of a key that must hold an integer (a latch, a token counter)
/// that the machine refuses, with the error each gives: another type is
/// `WRONGTYPE`, a string Redis would not read as an integer is `corrupt`.
fn not_integers(corrupt: LockError) -> Vec<(Value, LockError)> {
    let mut values = vec![
        (Value::hash(&[(b"n", b"1")]), LockError::WrongType),
        (Value::List, LockError::WrongType),
    ];
    for text in ["x", "", "01", " 1", "1.0"] {
        values.push((string(text), corrupt));
    }
    values
}

/// Every key of the store, for tests that look at which keys remain.
fn keys(s: &mut MemStore) -> Vec<Vec<u8>> {
    s.dump().into_iter().map(|(key, _, _)| key).collect()
}

/// A command of the plain machine on `L`, for the tests that run each of
/// them through the same bad state.
#[derive(Debug, Clone, Copy)]
enum Command {
    Acquire(Options),
    /// With `REQUEST r 5000` when true.
    Unlock(bool),
    Renew,
    Info,
    Force,
}

/// The commands that read the caller's own hold count.
const BY_OWNER: [Command; 7] = [
    Command::Acquire(PLAIN),
    Command::Acquire(FENCED),
    Command::Acquire(NOREENTRY),
    Command::Acquire(FENCED_NOREENTRY),
    Command::Unlock(false),
    Command::Unlock(true),
    Command::Renew,
];

impl Command {
    /// Runs the command by `owner` (which `INFO` and `FORCEUNLOCK` do not
    /// take), its reply dropped.
    fn run(self, s: &mut MemStore, n: &LockNames, owner: &[u8]) -> Result<(), LockError> {
        match self {
            Command::Acquire(options) => acquire(s, n, owner, 1_000, options).map(drop),
            Command::Unlock(latched) => {
                let latch = if latched { request(b"r") } else { None };
                unlock(s, n, owner, 1_000, latch).map(drop)
            }
            Command::Renew => renew(s, n, owner, 1_000).map(drop),
            Command::Info => info(s, n).map(drop),
            Command::Force => force_unlock(s, n).map(drop),
        }
    }
}

// --- lock.lua: acquisition ---

#[test]
fn acquire_takes_a_free_lock_for_the_lease() {
    let (mut s, n) = setup();
    assert_eq!(acquire(&mut s, &n, U, 30_000, PLAIN), FIRST);
    assert_eq!(field(&mut s, U).as_deref(), Some("1"));
    assert_eq!(s.pttl(b"L"), 30_000);
    assert_events(&mut s, &["hincrby L", "expire L"]);
    assert_eq!(keys(&mut s), [b"L"], "no token, no side key");
    assert!(s.published.is_empty());
}

#[test]
fn reentry_adds_a_hold_and_resets_the_ttl_to_the_lease() {
    let (mut s, n) = held_by(U, 1, PLAIN);
    s.advance(10_000);
    // 20 s were left: the TTL is the lease, neither the longer nor the sum
    // (the read-write lock's write re-entry adds).
    assert_eq!(acquire(&mut s, &n, U, 5_000, PLAIN), AGAIN);
    assert_eq!(field(&mut s, U).as_deref(), Some("2"));
    assert_eq!(s.pttl(b"L"), 5_000);
    assert_events(&mut s, &["hincrby L", "expire L"]);
    assert_eq!(acquire(&mut s, &n, U, 60_000, PLAIN), AGAIN);
    assert_eq!(field(&mut s, U).as_deref(), Some("3"));
    assert_eq!(s.pttl(b"L"), 60_000);
}

#[test]
fn reentry_on_a_lock_without_ttl_sets_the_lease() {
    let (mut s, n) = setup();
    s.put(b"L", Value::hash(&[(U, b"4")]), None);
    assert_eq!(acquire(&mut s, &n, U, 7_000, PLAIN), AGAIN);
    assert_eq!(field(&mut s, U).as_deref(), Some("5"));
    assert_eq!(s.pttl(b"L"), 7_000);
}

#[test]
fn another_owner_is_refused_with_the_pttl_until_the_lease_runs_out() {
    for options in [PLAIN, FENCED, NOREENTRY, FENCED_NOREENTRY] {
        let (mut s, n) = held_by(U, 1, PLAIN);
        s.advance(500);
        gives_without_effect(&mut s, refused(29_500), |s| {
            acquire(s, &n, V, 10_000, options)
        });
        // Redis keeps a key until the clock is past its deadline.
        s.advance(29_500);
        gives_without_effect(&mut s, refused(0), |s| acquire(s, &n, V, 10_000, options));
        s.advance(1);
        let token = options.fenced.then_some(1);
        assert_eq!(acquire(&mut s, &n, V, 10_000, options), taken(false, token));
    }
    // A lock another client left without TTL: PTTL -1.
    let (mut s, n) = setup();
    s.put(b"L", Value::hash(&[(U, b"1")]), None);
    gives_without_effect(&mut s, refused(-1), |s| acquire(s, &n, V, 10_000, PLAIN));
}

// --- fenced_lock.lua ---

#[test]
fn fenced_acquisitions_take_the_next_token_re_entries_included() {
    let (mut s, n) = setup();
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(false, Some(1))
    );
    assert_events(
        &mut s,
        &["incrby redisson_lock_token:{L}", "hincrby L", "expire L"],
    );
    assert_eq!(s.get(TOKEN), Some(b"1".to_vec()));
    assert_eq!(s.pttl(TOKEN), -1, "the counter never expires");
    assert_eq!(acquire(&mut s, &n, U, 30_000, FENCED), taken(true, Some(2)));
    assert_eq!(field(&mut s, U).as_deref(), Some("2"));
    // The next holder's tokens go on from there; a plain acquisition takes
    // none and leaves the counter as it is.
    for _ in 0..2 {
        release(&mut s, &n, U, 30_000, None).expect("unlock");
    }
    assert_eq!(
        acquire(&mut s, &n, V, 30_000, FENCED),
        taken(false, Some(3))
    );
    assert_eq!(acquire(&mut s, &n, V, 30_000, PLAIN), AGAIN);
    assert_eq!(acquire(&mut s, &n, V, 30_000, FENCED), taken(true, Some(4)));
}

#[test]
fn a_refused_fenced_acquisition_takes_no_token() {
    let (mut s, n) = held_by(U, 1, FENCED);
    gives_without_effect(&mut s, refused(30_000), |s| {
        acquire(s, &n, V, 1_000, FENCED)
    });
    assert_eq!(s.get(TOKEN), Some(b"1".to_vec()));
}

#[test]
fn tokens_go_on_from_the_counter_as_it_is() {
    let (mut s, n) = setup();
    s.put(TOKEN, string("41"), Some(T0 + 90_000));
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(false, Some(42))
    );
    assert_eq!(s.pttl(TOKEN), 90_000, "INCR keeps the counter's TTL");
    // The largest token is given once; the next would overflow.
    release(&mut s, &n, U, 30_000, None).expect("unlock");
    s.put(TOKEN, string(&(i64::MAX - 1).to_string()), None);
    let last = taken(false, Some(i64::MAX));
    assert_eq!(acquire(&mut s, &n, U, 30_000, FENCED), last);
}

// --- after a promotion (contract §10.1) ---

#[test]
fn a_promoted_nodes_first_token_of_each_counter_jumps_by_the_gap_once() {
    let (mut s, n) = setup();
    s.put(TOKEN, string("250"), None);
    s.promote(1_000);
    // The old master may have issued up to 1,000 tokens past this copy's
    // 250: the first is past them all; the next ones go on one by one.
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(false, Some(1_251))
    );
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(true, Some(1_252))
    );
    // A counter the promoted node has not seen yet jumps too: the old
    // master may have made it after the last write this node received.
    let other = LockNames::new(b"M").expect("name");
    assert_eq!(
        acquire(&mut s, &other, U, 30_000, FENCED),
        taken(false, Some(1_001))
    );
    // Another promotion: another gap, once.
    s.promote(1_000);
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(true, Some(2_253))
    );
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(true, Some(2_254))
    );
    // Plain acquisitions take no token and leave the gap for the next.
    s.promote(1_000);
    assert_eq!(acquire(&mut s, &other, U, 30_000, PLAIN), AGAIN);
    assert_eq!(s.get(b"redisson_lock_token:{M}"), Some(b"1001".to_vec()));
}

#[test]
fn a_gap_that_would_overflow_the_counter_fails_before_any_write() {
    let (mut s, n) = setup();
    s.put(TOKEN, string(&(i64::MAX - 1_000).to_string()), None);
    s.promote(1_000);
    gives_without_effect(&mut s, Err(LockError::Overflow), |s| {
        acquire(s, &n, U, 30_000, FENCED)
    });
    s.promote(999);
    let last = taken(false, Some(i64::MAX));
    assert_eq!(acquire(&mut s, &n, U, 30_000, FENCED), last);
}

// --- nonreentrant_lock.lua ---

#[test]
fn a_non_reentrant_lock_refuses_its_own_holder_with_an_error() {
    let (mut s, n) = setup();
    assert_eq!(acquire(&mut s, &n, U, 30_000, NOREENTRY), FIRST);
    assert_events(&mut s, &["hincrby L", "expire L"]);
    s.advance(1_000);
    for options in [NOREENTRY, FENCED_NOREENTRY] {
        gives_without_effect(&mut s, Err(LockError::Reentry), |s| {
            acquire(s, &n, U, 30_000, options)
        });
        gives_without_effect(&mut s, refused(29_000), |s| {
            acquire(s, &n, V, 30_000, options)
        });
    }
    // Only a non-reentrant acquisition refuses: the data is RLock's, and a
    // plain one re-enters it.
    assert_eq!(acquire(&mut s, &n, U, 30_000, PLAIN), AGAIN);
    for _ in 0..2 {
        release(&mut s, &n, U, 30_000, None).expect("unlock");
    }
    assert_eq!(acquire(&mut s, &n, U, 30_000, NOREENTRY), FIRST);
}

// --- unlock.lua ---

#[test]
fn unlock_by_a_non_holder_replies_nil_and_writes_nothing() {
    // Unlike the read-write lock's, the plain unlock publishes nothing when
    // the lock does not exist, and remembers nothing in a latch.
    for (mut s, n) in [setup(), held_by(V, 1, PLAIN)] {
        for latch in [None, request(b"r")] {
            gives_without_effect(&mut s, Ok(None), |s| release(s, &n, U, 30_000, latch));
        }
    }
}

#[test]
fn unlock_of_a_reentered_hold_keeps_the_lock_for_the_given_lease() {
    let (mut s, n) = held_by(U, 2, PLAIN);
    s.advance(1_000);
    assert_eq!(release(&mut s, &n, U, 7_000, None), Ok(Some(0)));
    assert_eq!(field(&mut s, U).as_deref(), Some("1"));
    assert_eq!(s.pttl(b"L"), 7_000);
    assert_events(&mut s, &["hincrby L", "expire L"]);
    assert!(s.published.is_empty());
}

#[test]
fn unlock_of_the_last_hold_deletes_the_lock_and_publishes_zero() {
    let (mut s, n) = held_by(U, 1, FENCED);
    assert_eq!(
        unlock(&mut s, &n, U, 30_000, None),
        Ok(Unlocked::Ran(Release::Released))
    );
    assert_events(&mut s, &["hincrby L", "del L"]);
    assert_eq!(s.published, released());
    assert_eq!(keys(&mut s), [TOKEN], "the token outlives the lock");
}

#[test]
fn a_braced_name_is_used_as_it_is_in_every_derived_key() {
    let mut s = MemStore::new(T0);
    let n = LockNames::new(b"{t}:a").expect("name");
    assert_eq!(
        acquire(&mut s, &n, U, 30_000, FENCED),
        taken(false, Some(1))
    );
    assert_eq!(release(&mut s, &n, U, 30_000, request(b"r")), Ok(Some(1)));
    assert_events(
        &mut s,
        &[
            "incrby redisson_lock_token:{t}:a",
            "hincrby {t}:a",
            "expire {t}:a",
            "hincrby {t}:a",
            "del {t}:a",
            "set redisson_unlock_latch:{t}:a:r",
            "expire redisson_unlock_latch:{t}:a:r",
        ],
    );
    let channel = b"redisson_lock__channel:{t}:a".to_vec();
    assert_eq!(s.published, vec![(channel, b"0".to_vec())]);
}

#[test]
fn a_request_latch_remembers_each_reply_and_replays_it() {
    let (mut s, n) = held_by(U, 2, PLAIN);
    let unlocks = [
        (
            &b"r1"[..],
            Release::StillHeld,
            [
                "hincrby L",
                "expire L",
                "set redisson_unlock_latch:{L}:r1",
                "expire redisson_unlock_latch:{L}:r1",
            ],
        ),
        (
            b"r2",
            Release::Released,
            [
                "hincrby L",
                "del L",
                "set redisson_unlock_latch:{L}:r2",
                "expire redisson_unlock_latch:{L}:r2",
            ],
        ),
    ];
    for (id, release, events) in unlocks {
        let ran = unlock(&mut s, &n, U, 30_000, Some(Request { id, ttl: 5_000 }));
        assert_eq!(ran, Ok(Unlocked::Ran(release)));
        assert_events(&mut s, &events);
        let value = release.reply().expect("a release replies 0 or 1");
        let latch = n.latch_key(id);
        let remembered = value.to_string().into_bytes();
        assert_eq!((s.get(&latch), s.pttl(&latch)), (Some(remembered), 5_000));
        // A retry gets the same reply and releases nothing more; the script
        // reads the latch first, so the reply stands whoever asks, and
        // after the lock is gone.
        gives_without_effect(&mut s, Ok(Unlocked::Replayed(value)), |s| {
            unlock(s, &n, V, 30_000, Some(Request { id, ttl: 5_000 }))
        });
    }
    assert_eq!(s.published, released());
    // Once the latch runs out the request is new: not held, no latch.
    s.advance(5_001);
    gives_without_effect(&mut s, Ok(Unlocked::Ran(Release::NotHeld)), |s| {
        unlock(s, &n, U, 30_000, request(b"r1"))
    });
}

#[test]
fn a_latch_replays_before_the_lock_is_read() {
    let (mut s, n) = held_by(U, 1, PLAIN);
    s.put(&n.latch_key(b"r"), string("1"), Some(T0 + 100));
    let replay = |s: &mut MemStore| unlock(s, &n, U, 30_000, request(b"r"));
    gives_without_effect(&mut s, Ok(Unlocked::Replayed(1)), replay);
    // Even a lock of another type is not looked at.
    s.put(b"L", Value::List, None);
    gives_without_effect(&mut s, Ok(Unlocked::Replayed(1)), replay);
}

#[test]
fn a_latch_of_another_type_or_not_an_integer_is_an_error() {
    let (mut s, n) = held_by(U, 2, PLAIN);
    for (latch, error) in not_integers(LockError::BadLatch) {
        s.put(&n.latch_key(b"r"), latch, Some(T0 + 5_000));
        gives_without_effect(&mut s, Err(error), |s| {
            release(s, &n, U, 30_000, request(b"r"))
        });
    }
}

// --- renew.lua ---

#[test]
fn renew_sets_the_holder_s_ttl_to_the_lease() {
    let (mut s, n) = held_by(U, 2, PLAIN);
    s.advance(20_000);
    assert_eq!(renew(&mut s, &n, U, 30_000), Ok(true));
    assert_eq!(s.pttl(b"L"), 30_000);
    assert_events(&mut s, &["expire L"]);
    // Set, not extended: a shorter lease shortens the lock.
    assert_eq!(renew(&mut s, &n, U, 1_000), Ok(true));
    assert_eq!(s.pttl(b"L"), 1_000);
    assert_eq!(field(&mut s, U).as_deref(), Some("2"), "no hold taken");
}

#[test]
fn renew_by_a_non_holder_replies_false_and_changes_nothing() {
    for (mut s, n) in [setup(), held_by(V, 1, PLAIN)] {
        gives_without_effect(&mut s, Ok(false), |s| renew(s, &n, U, 30_000));
    }
}

// --- force_unlock.lua ---

#[test]
fn force_unlock_deletes_whoever_holds_it_and_publishes_zero() {
    let (mut s, n) = held_by(U, 3, FENCED);
    assert_eq!(force_unlock(&mut s, &n), Ok(true));
    assert_events(&mut s, &["del L"]);
    assert_eq!(s.published, released());
    // Tokens only grow: the counter stays for the next holder.
    assert_eq!(keys(&mut s), [TOKEN]);
    assert_eq!(acquire(&mut s, &n, V, 1_000, FENCED), taken(false, Some(4)));
}

#[test]
fn force_unlock_of_nothing_replies_false() {
    let (mut s, n) = setup();
    gives_without_effect(&mut s, Ok(false), |s| force_unlock(s, &n));
}

// --- LOCK.INFO ---

#[test]
fn info_shows_every_holder_in_byte_order_the_ttl_and_the_token() {
    let (mut s, n) = setup();
    let nothing = LockInfo {
        holders: vec![],
        pttl: -2,
        token: None,
    };
    gives_without_effect(&mut s, Ok(nothing), |s| info(s, &n));
    let (mut s, n) = held_by(U, 2, FENCED);
    s.advance(1_000);
    let fenced = LockInfo {
        holders: vec![(U.to_vec(), 2)],
        pttl: 29_000,
        token: Some(2),
    };
    gives_without_effect(&mut s, Ok(fenced), |s| info(s, &n));
    // A hash another client wrote with several fields: all of them.
    s.put(b"L", Value::hash(&[(V, b"1"), (U, b"3")]), None);
    let shared = LockInfo {
        holders: vec![(U.to_vec(), 3), (V.to_vec(), 1)],
        pttl: -1,
        token: Some(2),
    };
    gives_without_effect(&mut s, Ok(shared), |s| info(s, &n));
    // A read-write lock's hash: its holds, without `mode`.
    s.put(
        b"L",
        Value::hash(&[(b"mode", b"write"), (b"w:1:write", b"2"), (b"w:1", b"1")]),
        None,
    );
    let read_write = LockInfo {
        holders: vec![(b"w:1".to_vec(), 1), (b"w:1:write".to_vec(), 2)],
        pttl: -1,
        token: Some(2),
    };
    gives_without_effect(&mut s, Ok(read_write), |s| info(s, &n));
}

// --- Bad state and input change nothing ---

#[test]
fn a_lock_of_another_type_is_an_error_for_every_command() {
    for value in [string("1"), Value::List] {
        let (mut s, n) = setup();
        s.put(b"L", value, Some(T0 + 1_000));
        for command in BY_OWNER.into_iter().chain([Command::Info, Command::Force]) {
            gives_without_effect(&mut s, Err(LockError::WrongType), |s| command.run(s, &n, U));
        }
    }
}

#[test]
fn a_corrupt_count_is_an_error_for_the_commands_that_read_it() {
    for count in ["0", "-1", "01", "x", "", "1.0", "100001"] {
        let (mut s, n) = setup();
        s.put(
            b"L",
            Value::hash(&[(U, count.as_bytes())]),
            Some(T0 + 1_000),
        );
        for command in BY_OWNER.into_iter().chain([Command::Info]) {
            gives_without_effect(&mut s, Err(LockError::Corrupt), |s| command.run(s, &n, U));
        }
        // Another owner reads only its own field, as the scripts do.
        gives_without_effect(&mut s, refused(1_000), |s| acquire(s, &n, V, 1, PLAIN));
        gives_without_effect(&mut s, Ok(None), |s| release(s, &n, V, 1, None));
        gives_without_effect(&mut s, Ok(false), |s| renew(s, &n, V, 1));
        // Forcing reads no count: it deletes the hash as the script does.
        assert_eq!(force_unlock(&mut s, &n), Ok(true));
    }
}

/// Fencing token counters no acquisition may increment, with the error each
/// gives: those of [`not_integers`], and the largest token.
fn bad_tokens() -> Vec<(Value, LockError)> {
    let mut tokens = not_integers(LockError::BadToken);
    tokens.push((string(&i64::MAX.to_string()), LockError::Overflow));
    tokens
}

#[test]
fn a_bad_token_fails_every_fenced_acquisition_before_any_write() {
    for (token, error) in bad_tokens() {
        let (mut s, n) = setup();
        s.put(TOKEN, token, None);
        let fenced_write = |s: &mut MemStore| rwlock::write_lock(s, &n, U, 1_000, true).map(drop);
        gives_without_effect(&mut s, Err(error), |s| acquire(s, &n, U, 1_000, FENCED));
        gives_without_effect(&mut s, Err(error), fenced_write);
        // A plain acquisition does not read it; a fenced re-entry does.
        assert_eq!(acquire(&mut s, &n, U, 1_000, PLAIN), FIRST);
        gives_without_effect(&mut s, Err(error), |s| acquire(s, &n, U, 1_000, FENCED));
        // INFO shows the largest token, and fails on any other.
        if error != LockError::Overflow {
            gives_without_effect(&mut s, Err(error), |s| info(s, &n).map(drop));
        }
        force_unlock(&mut s, &n).expect("forced");
        rwlock::write_lock(&mut s, &n, U, 1_000, false).expect("write");
        gives_without_effect(&mut s, Err(error), fenced_write);
    }
}

#[test]
fn a_count_at_its_bound_overflows_without_effect() {
    let (mut s, n) = setup();
    let max = MAX_HOLDS.to_string();
    s.put(b"L", Value::hash(&[(U, max.as_bytes())]), Some(T0 + 1_000));
    for options in [PLAIN, FENCED] {
        gives_without_effect(&mut s, Err(LockError::Overflow), |s| {
            acquire(s, &n, U, 1_000, options)
        });
    }
    // A hold may still be given back.
    assert_eq!(release(&mut s, &n, U, 1_000, None), Ok(Some(0)));
    assert_eq!(field(&mut s, U), Some((MAX_HOLDS - 1).to_string()));
}

#[test]
fn deadlines_past_the_clock_s_range_overflow_without_effect() {
    let (mut s, n) = held_by(U, 2, PLAIN);
    // The first lease whose deadline an i64 cannot hold.
    let far = i64::MAX - T0 + 1;
    let far_latch = Some(Request { id: b"r", ttl: far });
    let overflow = Err(LockError::Overflow);
    gives_without_effect(&mut s, overflow, |s| {
        acquire(s, &n, U, far, PLAIN).map(drop)
    });
    gives_without_effect(&mut s, overflow, |s| release(s, &n, U, far, None).map(drop));
    gives_without_effect(&mut s, overflow, |s| renew(s, &n, U, far).map(drop));
    gives_without_effect(&mut s, overflow, |s| {
        release(s, &n, U, 1_000, far_latch).map(drop)
    });
}

#[test]
fn reserved_owners_are_refused_by_every_owner_command() {
    let (mut s, n) = held_by(U, 1, PLAIN);
    for owner in [&b""[..], b"mode", b"x:write"] {
        for command in BY_OWNER {
            gives_without_effect(&mut s, Err(LockError::BadOwner), |s| {
                command.run(s, &n, owner)
            });
        }
    }
}

// --- One name, both machines ---

#[test]
fn a_read_write_hash_is_taken_as_lock_lua_takes_it() {
    let (mut s, n) = setup();
    rwlock::read_lock(&mut s, &n, U, 30_000).expect("read");
    s.advance(1_000);
    s.take_events();
    // U's read count is a field U holds: the script re-enters it, one more
    // hold and the TTL reset to the lease, `mode` left as it is.
    assert_eq!(acquire(&mut s, &n, U, 5_000, PLAIN), AGAIN);
    assert_eq!(field(&mut s, U).as_deref(), Some("2"));
    assert_eq!(field(&mut s, b"mode").as_deref(), Some("read"));
    assert_eq!(s.pttl(b"L"), 5_000);
    assert_events(&mut s, &["hincrby L", "expire L"]);
    gives_without_effect(&mut s, refused(5_000), |s| acquire(s, &n, V, 1, PLAIN));
    gives_without_effect(&mut s, Err(LockError::Reentry), |s| {
        acquire(s, &n, U, 1, NOREENTRY)
    });
    // The last hold given back deletes the whole hash, as the script's DEL
    // does, and tells the plain lock's channel; the read lease key, which
    // the script does not know, stays.
    assert_eq!(release(&mut s, &n, U, 30_000, None), Ok(Some(0)));
    assert_eq!(release(&mut s, &n, U, 30_000, None), Ok(Some(1)));
    assert_eq!(s.published, released());
    assert_eq!(keys(&mut s), [n.timeout_key(U, 1)]);
}

#[test]
fn a_write_hold_is_another_field_than_its_owner_s() {
    let (mut s, n) = setup();
    rwlock::write_lock(&mut s, &n, U, 30_000, false).expect("write");
    // The writer's field is `U:write`: the plain machine sees U hold nothing.
    gives_without_effect(&mut s, refused(30_000), |s| acquire(s, &n, U, 1, PLAIN));
    gives_without_effect(&mut s, Ok(None), |s| release(s, &n, U, 1, None));
    gives_without_effect(&mut s, Ok(false), |s| renew(s, &n, U, 1));
}

#[test]
fn the_read_write_machine_calls_a_plain_lock_corrupt() {
    // Contract §2: a hash without `mode` is corrupt to it.
    let (mut s, n) = held_by(U, 1, PLAIN);
    gives_without_effect(&mut s, Err(LockError::Corrupt), |s| {
        rwlock::read_lock(s, &n, U, 1)
    });
}

// --- rwlock::write_lock, fenced ---

#[test]
fn a_fenced_write_takes_a_token_on_every_acquisition() {
    let (mut s, n) = setup();
    let first = taken(false, Some(1));
    assert_eq!(rwlock::write_lock(&mut s, &n, U, 30_000, true), first);
    assert_events(
        &mut s,
        &[
            "incrby redisson_lock_token:{L}",
            "hset L",
            "hset L",
            "expire L",
        ],
    );
    s.advance(10_000);
    let again = taken(true, Some(2));
    assert_eq!(rwlock::write_lock(&mut s, &n, U, 30_000, true), again);
    assert_events(
        &mut s,
        &["incrby redisson_lock_token:{L}", "hincrby L", "expire L"],
    );
    assert_eq!(s.pttl(b"L"), 50_000, "a write re-entry adds the lease");
    let no = refused(50_000);
    gives_without_effect(&mut s, no, |s| rwlock::write_lock(s, &n, V, 1, true));
    // One counter per name, whichever machine takes the token.
    for _ in 0..2 {
        rwlock::unlock(&mut s, &n, U, Mode::Write, 1, None).expect("unlock");
    }
    assert_eq!(acquire(&mut s, &n, V, 1_000, FENCED), taken(false, Some(3)));
}

#[test]
fn a_fenced_write_in_read_mode_is_refused_without_a_token() {
    let (mut s, n) = setup();
    rwlock::read_lock(&mut s, &n, U, 30_000).expect("read");
    for owner in [U, V] {
        let no = refused(30_000);
        gives_without_effect(&mut s, no, |s| rwlock::write_lock(s, &n, owner, 1, true));
    }
}

#[test]
fn a_fenced_write_at_its_bound_overflows_before_its_token() {
    let (mut s, n) = setup();
    let max = MAX_HOLDS.to_string();
    let h = Value::hash(&[(b"mode", b"write"), (b"u1:57:write", max.as_bytes())]);
    s.put(b"L", h, Some(T0 + 1_000));
    gives_without_effect(&mut s, Err(LockError::Overflow), |s| {
        rwlock::write_lock(s, &n, U, 1, true)
    });
}

#[test]
fn plain_writes_to_a_read_write_hash_drop_its_lease_index() {
    // The read-write machine may keep its readers' lease deadlines in an
    // index (docs/design.md, "Lease indexes stay a cache"). The plain
    // machine changes counts the index does not track: kept, it would make
    // a read unlock count the lease of a hold the hash no longer has.
    for index_from in [None, Some(1)] {
        let (mut s, n) = setup();
        s.index_from = index_from;
        for (owner, lease) in [(V, 1_000), (U, 1_000), (U, 50_000), (b"w:1", 1)] {
            rwlock::read_lock(&mut s, &n, owner, lease).expect("read");
        }
        // This read unlock reads every lease key, and keeps the index.
        rwlock::unlock(&mut s, &n, b"w:1", Mode::Read, 1, None).expect("unlock");
        assert_eq!(s.indexes().is_empty(), index_from.is_none());
        // As unlock.lua: U's count drops to 1, its second lease key stays.
        assert_eq!(release(&mut s, &n, U, 30_000, None), Ok(Some(0)));
        let read_unlock = rwlock::unlock(&mut s, &n, V, Mode::Read, 1, None);
        assert_eq!(read_unlock.map(Unlocked::reply), Ok(Some(0)));
        // Redisson's read unlock reads U's one counted lease, not the 50 s key.
        assert_eq!(s.pttl(b"L"), 1_000, "index from {index_from:?}");
    }
}

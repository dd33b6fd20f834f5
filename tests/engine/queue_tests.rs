//! Unit tests of `engine::queue` (src/engine/queue.rs), over the in-memory store.

use crate::memstore::MemStore;
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, GrantLatch, Granted};
use ::rwlock::engine::lock::{self, Options};
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::*;
use ::rwlock::engine::rwlock::unlock;
use ::rwlock::engine::rwlock::{read_lock, write_lock, Mode};
use ::rwlock::engine::store::Store;
use std::collections::VecDeque;

const LOCK: Hold = Hold::Lock(Options {
    fenced: false,
    non_reentrant: false,
});
const FENCED_LOCK: Hold = Hold::Lock(Options {
    fenced: true,
    non_reentrant: false,
});
const NOREENTRY_LOCK: Hold = Hold::Lock(Options {
    fenced: false,
    non_reentrant: true,
});
const FENCED_WRITE: Hold = Hold::Write { fenced: true };

fn ticket(owner: &str, hold: impl Into<Hold>, token: u32) -> Ticket<u32> {
    Ticket {
        owner: owner.as_bytes().to_vec(),
        hold: hold.into(),
        lease: 10_000,
        token,
        multi: false,
        request: None,
    }
}

fn setup() -> (MemStore, LockNames<'static>) {
    (MemStore::new(1_000), LockNames::new(b"Q").expect("name"))
}

/// (token, re-entry or error) of each waiter served, none fenced.
fn outcomes(served: Vec<Served<u32>>) -> Vec<(u32, Result<bool, LockError>)> {
    served
        .into_iter()
        .map(|s| {
            let reentry = s.outcome.map(|g| {
                assert_eq!(g.token, None, "no waiter here is fenced");
                g.reentry
            });
            (s.ticket.token, reentry)
        })
        .collect()
}

/// (ticket, grant or error) of each waiter served.
fn grants(served: Vec<Served<u32>>) -> Vec<(u32, Result<Granted, LockError>)> {
    served
        .into_iter()
        .map(|s| (s.ticket.token, s.outcome))
        .collect()
}

fn granted(reentry: bool, token: Option<i64>) -> Result<Granted, LockError> {
    Ok(Granted { reentry, token })
}

/// Gives back every hold `owner` has of the plain lock `Q`.
fn free(s: &mut MemStore, n: &LockNames, owner: &[u8]) {
    while lock::unlock(s, n, owner, 10_000, None)
        .expect("unlock")
        .reply()
        == Some(0)
    {}
}

/// Asserts that `owner` holds `Q` `holds` times with one waiter left,
/// then frees it: that waiter, `next`, takes the lock.
#[track_caller]
fn hands_over(
    s: &mut MemStore,
    n: &LockNames,
    q: &mut VecDeque<Ticket<u32>>,
    owner: &[u8],
    holds: &[u8],
    next: u32,
) {
    assert_eq!(s.hget(b"Q", owner).as_deref(), Some(holds));
    assert_eq!(q.len(), 1, "the last waiter waits");
    free(s, n, owner);
    assert_eq!(grants(admit(s, n, q)), vec![(next, granted(false, None))]);
}

#[test]
fn plain_and_fenced_locks_wait_in_line_with_read_write_tickets() {
    let (mut s, n) = setup();
    let mut q: VecDeque<_> = [
        ticket("a:1", FENCED_WRITE, 1),
        ticket("a:1", FENCED_WRITE, 2),
        ticket("b:1", FENCED_LOCK, 3),
        ticket("c:1", Mode::Read, 4),
        ticket("b:1", LOCK, 5),
        ticket("d:1", LOCK, 6),
    ]
    .into();
    assert_eq!(
        grants(admit(&mut s, &n, &mut q)),
        vec![(1, granted(false, Some(1))), (2, granted(true, Some(2)))],
        "the writer, then its own re-entry; b is no holder of the write lock"
    );
    for _ in 0..2 {
        unlock(&mut s, &n, b"a:1", Mode::Write, 1, None).expect("unlock");
    }
    assert_eq!(
        grants(admit(&mut s, &n, &mut q)),
        vec![
            (3, granted(false, Some(3))),
            (4, Err(LockError::Corrupt)),
            (5, granted(true, None)),
        ],
        "b takes the next token; a read of a plain lock's hash fails \
         (contract §2) without holding up b's re-entry behind it"
    );
    hands_over(&mut s, &n, &mut q, b"b:1", b"2", 6);
}

#[test]
fn a_waiting_non_reentrant_reacquire_is_refused_and_blocks_no_one() {
    let (mut s, n) = setup();
    let first = lock::acquire(&mut s, &n, b"a:1", 10_000, Options::default());
    assert!(matches!(first, Ok(Attempt::Granted(_))));
    let mut q: VecDeque<_> = [
        ticket("a:1", NOREENTRY_LOCK, 1),
        ticket("a:1", LOCK, 2),
        ticket("b:1", NOREENTRY_LOCK, 3),
    ]
    .into();
    assert_eq!(
        grants(admit(&mut s, &n, &mut q)),
        vec![(1, Err(LockError::Reentry)), (2, granted(true, None))],
        "the holder's plain re-entry behind its refused one goes on"
    );
    // One hold added: the refused re-acquire took none.
    hands_over(&mut s, &n, &mut q, b"a:1", b"2", 3);
}

#[test]
fn fenced_waiters_get_strictly_increasing_tokens() {
    let (mut s, n) = setup();
    let owners = ["a:1", "b:1", "c:1"];
    // Each owner waits twice: its acquisition, then its re-entry.
    let mut q: VecDeque<_> = (0..6)
        .map(|i| ticket(owners[i / 2], FENCED_LOCK, i as u32))
        .collect();
    let mut tokens = Vec::new();
    for owner in owners {
        let served = grants(admit(&mut s, &n, &mut q));
        assert_eq!(served.len(), 2, "{owner} and its re-entry");
        for (_, grant) in served {
            tokens.push(grant.expect("granted").token.expect("fenced"));
        }
        free(&mut s, &n, owner.as_bytes());
    }
    assert_eq!(tokens, [1, 2, 3, 4, 5, 6]);
}

#[test]
fn a_plain_lock_holder_may_overtake_in_fair_mode() {
    let (mut s, n) = setup();
    lock::acquire(&mut s, &n, b"a:1", 10_000, Options::default()).expect("taken");
    assert_eq!(may_overtake(&mut s, &n, b"a:1"), Ok(true));
    assert_eq!(may_overtake(&mut s, &n, b"b:1"), Ok(false));
}

#[test]
fn consecutive_readers_at_the_head_are_admitted_together() {
    let (mut s, n) = setup();
    write_lock(&mut s, &n, b"w:1", 10_000, false).expect("write");
    let mut q: VecDeque<_> = [
        ticket("r:1", Mode::Read, 1),
        ticket("r:2", Mode::Read, 2),
        ticket("w:2", Mode::Write, 3),
        ticket("r:3", Mode::Read, 4),
    ]
    .into();
    assert!(
        admit(&mut s, &n, &mut q).is_empty(),
        "the writer still holds it"
    );
    unlock(&mut s, &n, b"w:1", Mode::Write, 1, None).expect("unlock");
    assert_eq!(
        outcomes(admit(&mut s, &n, &mut q)),
        vec![(1, Ok(false)), (2, Ok(false))],
        "readers in, as first holds; the writer and those behind it wait"
    );
    assert_eq!(q.len(), 2);
    unlock(&mut s, &n, b"r:1", Mode::Read, 1, None).expect("r1");
    assert!(admit(&mut s, &n, &mut q).is_empty());
    unlock(&mut s, &n, b"r:2", Mode::Read, 1, None).expect("r2");
    let served = admit(&mut s, &n, &mut q);
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].ticket.owner, b"w:2");
    assert_eq!(served[0].ticket.hold, Hold::Write { fenced: false });
    assert_eq!(
        served[0].outcome,
        Ok(Granted {
            reentry: false,
            token: None
        })
    );
}

#[test]
fn a_holder_served_from_the_queue_is_told_it_re_entered() {
    let (mut s, n) = setup();
    write_lock(&mut s, &n, b"w:1", 10_000, false).expect("write");
    // The write holder's own read, queued behind nobody: a re-entry.
    let mut q: VecDeque<_> = [ticket("w:1", Mode::Read, 5)].into();
    assert_eq!(outcomes(admit(&mut s, &n, &mut q)), vec![(5, Ok(true))]);
}

#[test]
fn a_waiting_writer_gets_the_lock_when_reader_leases_run_out() {
    let (mut s, n) = setup();
    read_lock(&mut s, &n, b"r:1", 500).expect("read");
    let mut q: VecDeque<_> = [ticket("w:1", Mode::Write, 7)].into();
    assert!(admit(&mut s, &n, &mut q).is_empty());
    s.advance(501);
    assert_eq!(outcomes(admit(&mut s, &n, &mut q)), vec![(7, Ok(false))]);
    assert!(q.is_empty());
}

#[test]
fn a_corrupt_lock_fails_waiters_instead_of_blocking_them() {
    let (mut s, n) = setup();
    s.put(b"Q", crate::memstore::Value::Str(b"x".to_vec()), None);
    let mut q: VecDeque<_> = [ticket("r:1", Mode::Read, 1), ticket("w:1", Mode::Write, 2)].into();
    assert_eq!(
        outcomes(admit(&mut s, &n, &mut q)),
        vec![
            (1, Err(LockError::WrongType)),
            (2, Err(LockError::WrongType))
        ]
    );
}

#[test]
fn only_current_holders_may_overtake_in_fair_mode() {
    let (mut s, n) = setup();
    assert_eq!(may_overtake(&mut s, &n, b"r:1"), Ok(false));
    read_lock(&mut s, &n, b"r:1", 10_000).expect("read");
    write_lock(&mut s, &n, b"w:1", 10_000, false).expect("refused, but no change");
    assert_eq!(may_overtake(&mut s, &n, b"r:1"), Ok(true));
    assert_eq!(may_overtake(&mut s, &n, b"r:2"), Ok(false));
    let (mut s, n) = setup();
    write_lock(&mut s, &n, b"w:1", 10_000, false).expect("write");
    assert_eq!(may_overtake(&mut s, &n, b"w:1"), Ok(true));
}

/// One acquisition with `REQUEST id ttl` as the command runs it: the
/// latch first, then the attempt. `Err(token)`: a replay.
fn once(
    s: &mut MemStore,
    n: &LockNames,
    owner: &str,
    hold: Hold,
    (id, ttl): (&[u8], i64),
) -> Result<Result<Attempt, i64>, LockError> {
    use ::rwlock::engine::hold::{grant_latch, Granting, Request};
    match grant_latch(s, n, Some(Request { id, ttl }))? {
        Granting::Replay(token) => Ok(Err(token)),
        Granting::Run(latch) => {
            attempt_latched(s, n, owner.as_bytes(), hold, 10_000, latch.as_ref()).map(Ok)
        }
    }
}

fn granted_once(reentry: bool, token: Option<i64>) -> Result<Result<Attempt, i64>, LockError> {
    Ok(Ok(Attempt::Granted(Granted { reentry, token })))
}

const LATCH: &[u8] = b"redisson_lock_request_latch:{Q}:r1";

fn latch_of(s: &mut MemStore) -> Option<(crate::memstore::Value, Option<i64>)> {
    s.dump()
        .into_iter()
        .find(|(k, _, _)| k == LATCH)
        .map(|(_, v, at)| (v, at))
}

fn str_value(v: &str) -> crate::memstore::Value {
    crate::memstore::Value::Str(v.as_bytes().to_vec())
}

#[test]
fn a_first_request_acts_as_without_it_and_records_its_grant() {
    for hold in [
        Hold::Read,
        Hold::Write { fenced: false },
        LOCK,
        NOREENTRY_LOCK,
    ] {
        let (mut s, n) = setup();
        assert_eq!(
            once(&mut s, &n, "a:1", hold, (b"r1", 5_000)),
            granted_once(false, None)
        );
        assert_eq!(
            latch_of(&mut s),
            Some((str_value("0"), Some(6_000))),
            "{hold:?}"
        );
        let events: Vec<_> = s
            .take_events()
            .into_iter()
            .filter(|(_, k)| k == LATCH)
            .collect();
        assert_eq!(
            events,
            vec![("set", LATCH.to_vec()), ("expire", LATCH.to_vec())]
        );
        // The same hold without REQUEST, on a fresh store: the same data
        // but the latch.
        let (mut plain, _) = setup();
        attempt(&mut plain, &n, b"a:1", hold, 10_000).expect("granted");
        let mut with = s.dump();
        with.retain(|(k, _, _)| k != LATCH);
        assert_eq!(with, plain.dump(), "{hold:?}");
    }
}

#[test]
fn a_replay_replies_the_grant_and_changes_nothing() {
    for hold in [
        Hold::Read,
        Hold::Write { fenced: false },
        LOCK,
        NOREENTRY_LOCK,
    ] {
        let (mut s, n) = setup();
        let first = once(&mut s, &n, "a:1", hold, (b"r1", 5_000));
        assert_eq!(first, granted_once(false, None), "{hold:?}");
        let before = s.dump();
        s.take_events();
        s.advance(100);
        // A NOREENTRY re-entry would be an error: the replay never runs it.
        assert_eq!(
            once(&mut s, &n, "a:1", hold, (b"r1", 5_000)),
            Ok(Err(0)),
            "{hold:?}"
        );
        assert_eq!(s.dump(), before, "{hold:?}");
        assert_eq!(s.take_events(), vec![], "{hold:?}");
    }
}

#[test]
fn a_fenced_replay_replies_the_same_token() {
    for hold in [FENCED_WRITE, FENCED_LOCK] {
        let (mut s, n) = setup();
        assert_eq!(
            once(&mut s, &n, "a:1", hold, (b"r1", 5_000)),
            granted_once(false, Some(1))
        );
        assert_eq!(latch_of(&mut s), Some((str_value("1"), Some(6_000))));
        let before = s.dump();
        assert_eq!(once(&mut s, &n, "a:1", hold, (b"r1", 5_000)), Ok(Err(1)));
        assert_eq!(s.dump(), before);
        // Another request is a new acquisition: the next token.
        assert_eq!(
            once(&mut s, &n, "a:1", hold, (b"r2", 5_000)),
            granted_once(true, Some(2))
        );
    }
}

#[test]
fn a_refused_request_records_nothing_and_its_retry_acquires() {
    let (mut s, n) = setup();
    attempt(&mut s, &n, b"b:1", LOCK, 10_000).expect("held by b");
    let before = s.dump();
    assert_eq!(
        once(&mut s, &n, "a:1", LOCK, (b"r1", 5_000)),
        Ok(Ok(Attempt::Refused { pttl: 10_000 }))
    );
    assert_eq!(s.dump(), before);
    ::rwlock::engine::lock::unlock(&mut s, &n, b"b:1", 10_000, None).expect("unlock");
    assert_eq!(
        once(&mut s, &n, "a:1", LOCK, (b"r1", 5_000)),
        granted_once(false, None)
    );
    assert_eq!(latch_of(&mut s), Some((str_value("0"), Some(6_000))));
    // A NOREENTRY re-entry's error records nothing either.
    let before = s.dump();
    assert_eq!(
        once(&mut s, &n, "a:1", NOREENTRY_LOCK, (b"r9", 5_000)),
        Err(LockError::Reentry)
    );
    assert_eq!(s.dump(), before);
}

#[test]
fn an_expired_latch_lets_the_id_acquire_again() {
    let (mut s, n) = setup();
    assert_eq!(
        once(&mut s, &n, "a:1", LOCK, (b"r1", 50)),
        granted_once(false, None)
    );
    s.advance(50);
    assert_eq!(once(&mut s, &n, "a:1", LOCK, (b"r1", 50)), Ok(Err(0)));
    s.advance(1);
    assert_eq!(latch_of(&mut s), None);
    assert_eq!(
        once(&mut s, &n, "a:1", LOCK, (b"r1", 50)),
        granted_once(true, None)
    );
    assert_eq!(s.hget(b"Q", b"a:1"), Some(b"2".to_vec()));
}

#[test]
fn a_bad_latch_fails_before_any_write() {
    use crate::memstore::Value;
    let (mut s, n) = setup();
    s.put(LATCH, Value::Str(b"x".to_vec()), None);
    let before = s.dump();
    assert_eq!(
        once(&mut s, &n, "a:1", LOCK, (b"r1", 50)),
        Err(LockError::BadLatch)
    );
    s.put(LATCH, Value::hash(&[(b"f", b"1")]), None);
    assert_eq!(
        once(&mut s, &n, "a:1", LOCK, (b"r1", 50)),
        Err(LockError::WrongType)
    );
    s.put(LATCH, Value::Str(b"x".to_vec()), None);
    assert_eq!(s.dump(), before);
}

#[test]
fn no_request_looks_up_no_latch() {
    use ::rwlock::engine::hold::{grant_latch, Granting};
    let (mut s, n) = setup();
    assert_eq!(grant_latch(&mut s, &n, None), Ok(Granting::Run(None)));
    assert_eq!(s.dump(), vec![]);
    assert_eq!(s.take_events(), vec![]);
}

#[test]
fn a_served_waiter_records_its_latch_when_served() {
    let (mut s, n) = setup();
    attempt(&mut s, &n, b"b:1", FENCED_LOCK, 10_000).expect("held by b");
    let latch = GrantLatch {
        key: LATCH.to_vec(),
        ttl: 5_000,
    };
    let mut q: VecDeque<_> = [Ticket {
        request: Some(latch),
        ..ticket("a:1", FENCED_LOCK, 7)
    }]
    .into();
    assert_eq!(admit(&mut s, &n, &mut q).len(), 0);
    assert_eq!(latch_of(&mut s), None);
    s.advance(3_000);
    ::rwlock::engine::lock::unlock(&mut s, &n, b"b:1", 10_000, None).expect("unlock");
    let served = admit(&mut s, &n, &mut q);
    assert_eq!(
        served[0].outcome,
        Ok(Granted {
            reentry: false,
            token: Some(2)
        })
    );
    // The deadline counts from the grant, not from the park.
    assert_eq!(latch_of(&mut s), Some((str_value("2"), Some(9_000))));
    assert_eq!(
        once(&mut s, &n, "a:1", FENCED_LOCK, (b"r1", 5_000)),
        Ok(Err(2))
    );
}

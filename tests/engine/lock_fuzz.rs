//! Fuzz test of the plain lock machine (proptest): whatever the lock key,
//! its fencing token counter and an unlock latch hold before (nothing, a
//! plain or read-write lock's hash with good or corrupt counts, an integer or
//! any other string, another type; with a deadline or without, or one already
//! past), and a clock near the end of its range or not, every operation of
//! the plain machine either succeeds or fails with no effect at all:
//!
//! - an error, and any reply that says nothing happened (a refusal, a nil
//!   unlock, a replayed latch, a renewal or forced unlock of nothing, `INFO`,
//!   a queue whose waiters all failed), leaves every key, value and deadline
//!   as it was, raises no event and publishes nothing;
//! - a reply that says something happened left what it says: the owner
//!   holding a good count for exactly its lease (and the token it was given
//!   in the counter), or the lock gone with one message;
//! - nothing panics (the store panics on a write the machine must never
//!   make: an increment of a non-integer, a hash field into another type).

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::fuzz::{any_value, bytes_from, count, lease, names, owner, LOCKS, OWNERS, REQUESTS, T0};
use crate::fuzz_cases::cases;
use crate::memstore::{MemStore, Value};
use ::rwlock::engine::hold::{parse_count, Attempt, Granted, Release, Request, Unlocked};
use ::rwlock::engine::lock::{self, Options};
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::{admit, Hold, Ticket};
use ::rwlock::engine::store::Store;

#[derive(Debug, Clone)]
enum Op {
    Acquire(usize, i64, Options),
    /// Owner, lease, and `REQUEST id ttl`.
    Unlock(usize, i64, Option<(usize, i64)>),
    Renew(usize, i64),
    Force,
    Info,
    /// Waiters on the lock: owner, lease, options.
    Admit(Vec<(usize, i64, Options)>),
    Advance(i64),
}

/// A key's value before the operations, with its deadline as an offset from
/// the clock; `None` for a missing key.
type Contents = Option<(Value, Option<i64>)>;

fn options() -> impl Strategy<Value = Options> {
    (any::<bool>(), any::<bool>()).prop_map(|(fenced, non_reentrant)| Options {
        fenced,
        non_reentrant,
    })
}

/// A plain lock's hash: owners with counts, now and then a bad one.
fn plain_hash() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(bytes_from(&["u:1", "u:2", "{o}"]), count(), 0..3)
        .prop_map(Value::Hash)
}

/// What a token counter or a latch holds, the largest token included.
fn integer() -> impl Strategy<Value = Value> {
    prop::sample::select(&[0, 1, 41, -3, i64::MAX - 1, i64::MAX, i64::MIN][..])
        .prop_map(|n| Value::Str(n.to_string().into_bytes()))
}

fn contents(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Contents> {
    prop::option::of((value, prop::option::of(-5i64..100_000)))
}

fn op() -> impl Strategy<Value = Op> {
    let request = prop::option::of((0..REQUESTS.len(), lease()));
    prop_oneof![
        4 => (owner(), lease(), options()).prop_map(|(o, x, p)| Op::Acquire(o, x, p)),
        4 => (owner(), lease(), request).prop_map(|(o, x, r)| Op::Unlock(o, x, r)),
        2 => (owner(), lease()).prop_map(|(o, x)| Op::Renew(o, x)),
        1 => Just(Op::Force),
        1 => Just(Op::Info),
        2 => prop::collection::vec((owner(), lease(), options()), 0..4).prop_map(Op::Admit),
        1 => prop::sample::select(&[0i64, 1, 2, 49, 1_000][..]).prop_map(Op::Advance),
    ]
}

/// What an operation did, as far as its reply tells.
#[derive(Debug)]
enum Effect {
    /// An error, or a reply that says nothing happened: shown for the report.
    Nothing(String),
    /// A change, checked against the reply: `Err` says how it is not what
    /// the reply claims.
    Changed(Result<(), String>),
}

/// After an acquisition, an unlock that leaves a hold or a renewal: the
/// owner holds a good count for exactly `lease`.
fn holds(s: &mut MemStore, n: &LockNames, owner: &[u8], lease: i64) -> Result<(), String> {
    let count = s.hget(n.hash(), owner).map(|v| parse_count(&v));
    let pttl = s.pttl(n.hash());
    match count {
        Some(Ok(_)) if pttl == lease => Ok(()),
        _ => Err(format!("holds {count:?} for {pttl} ms, not {lease}")),
    }
}

/// After a release or a forced unlock: the lock is gone and said so once.
fn gone(s: &mut MemStore, n: &LockNames) -> Result<(), String> {
    let message = vec![(n.lock_channel().to_vec(), b"0".to_vec())];
    if s.pttl(n.hash()) == -2 && s.published == message {
        Ok(())
    } else {
        Err(format!("the lock is left, or published {:?}", s.published))
    }
}

fn run(s: &mut MemStore, n: &LockNames, op: &Op) -> Effect {
    let owner = |o: usize| OWNERS[o].as_bytes();
    let nothing = |reply: &dyn std::fmt::Debug| Effect::Nothing(format!("{reply:?}"));
    match *op {
        Op::Acquire(o, lease, options) => match lock::acquire(s, n, owner(o), lease, options) {
            Ok(Attempt::Granted(Granted { token, .. })) => {
                // A fenced acquisition left its token in the counter.
                let counter = s.get(&n.token_key());
                let token = match token {
                    Some(t) if counter != Some(t.to_string().into_bytes()) => {
                        Err(format!("token {t}, counter {counter:?}"))
                    }
                    _ => Ok(()),
                };
                Effect::Changed(holds(s, n, owner(o), lease).and(token))
            }
            other => nothing(&other),
        },
        Op::Unlock(o, lease, request) => {
            let request = request.map(|(r, ttl)| Request {
                id: REQUESTS[r].as_bytes(),
                ttl,
            });
            match lock::unlock(s, n, owner(o), lease, request) {
                Ok(Unlocked::Ran(Release::StillHeld)) => {
                    Effect::Changed(holds(s, n, owner(o), lease))
                }
                Ok(Unlocked::Ran(Release::Released)) => Effect::Changed(gone(s, n)),
                other => nothing(&other),
            }
        }
        Op::Renew(o, lease) => match lock::renew(s, n, owner(o), lease) {
            Ok(true) => Effect::Changed(holds(s, n, owner(o), lease)),
            other => nothing(&other),
        },
        Op::Force => match lock::force_unlock(s, n) {
            Ok(true) => Effect::Changed(gone(s, n)),
            other => nothing(&other),
        },
        Op::Info => nothing(&lock::info(s, n)),
        Op::Admit(ref waiting) => {
            let mut queue = VecDeque::new();
            for (i, &(o, lease, options)) in waiting.iter().enumerate() {
                queue.push_back(Ticket {
                    owner: owner(o).to_vec(),
                    hold: Hold::Lock(options),
                    lease,
                    token: i,
                    multi: false,
                    request: None,
                });
            }
            let served = admit(s, n, &mut queue);
            let order: Vec<usize> = served.iter().map(|w| w.ticket.token).collect();
            let outcomes: Vec<_> = served.iter().map(|w| w.outcome).collect();
            if order != (0..served.len()).collect::<Vec<_>>() {
                Effect::Changed(Err(format!("served out of order: {order:?}")))
            } else if outcomes.iter().all(Result::is_err) {
                nothing(&outcomes)
            } else {
                Effect::Changed(Ok(()))
            }
        }
        Op::Advance(ms) => {
            s.advance(ms);
            Effect::Changed(Ok(()))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(5000)))]

    #[test]
    fn any_plain_lock_operation_succeeds_or_fails_without_effect(
        lock in 0..LOCKS.len(),
        // Near the end of the clock's range, most leases overflow.
        clock in prop_oneof![Just(T0), Just(i64::MAX - 100_000)],
        hash in contents(prop_oneof![plain_hash(), any_value()]),
        token in contents(prop_oneof![integer(), any_value()]),
        latch in contents(prop_oneof![integer(), any_value()]),
        ops in prop::collection::vec(op(), 1..8),
    ) {
        let n = names(lock);
        let mut s = MemStore::new(clock);
        let keys = [
            (n.hash().to_vec(), hash),
            (n.token_key().to_vec(), token),
            (n.latch_key(REQUESTS[0].as_bytes()), latch),
        ];
        for (key, contents) in keys {
            if let Some((value, at)) = contents {
                s.put(&key, value, at.map(|offset| clock + offset));
            }
        }
        for (step, op) in ops.iter().enumerate() {
            let before = s.dump();
            s.events.clear();
            s.published.clear();
            match run(&mut s, &n, op) {
                Effect::Nothing(reply) => {
                    prop_assert_eq!(&s.dump(), &before, "step {} {:?} gave {} but changed the store", step, op, reply);
                    prop_assert!(s.events.is_empty(), "step {step} {op:?} gave {reply} but raised {:?}", s.events);
                    prop_assert!(s.published.is_empty(), "step {step} {op:?} gave {reply} but published");
                }
                Effect::Changed(Err(why)) => prop_assert!(false, "step {step} {op:?}: {why}"),
                Effect::Changed(Ok(())) => {}
            }
        }
    }
}

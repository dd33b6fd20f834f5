//! The semaphore machine (`engine::semaphore`, contract §15) against a
//! reference model: Redisson 4.7's seven `RSemaphore` scripts transcribed
//! onto one count and its deadline. Random sequences of every operation
//! (acquire, release with and without `IFEXISTS`, try-set with and without
//! a TTL, add of any sign, drain, available, time passing) must give the
//! model's reply, count, deadline, keyspace events and messages after every
//! step; then the queue's admission of permit waiters, idempotent releases
//! and the errors, which change nothing.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::memstore::{MemStore, Value};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, Release, Request, Unlocked};
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::{admit, Hold, Ticket};
use ::rwlock::engine::semaphore::{acquire, add, available, drain, release, try_set};
use ::rwlock::engine::store::Store;

const T0: i64 = 1_700_000_000_000;
const KEY: &[u8] = b"S";
const CHANNEL: &[u8] = b"redisson_sc:{S}";

fn names() -> LockNames<'static> {
    LockNames::new(KEY).expect("name")
}

#[derive(Debug, Clone)]
enum Op {
    Acquire(i64),
    Release(i64, bool),
    TrySet(i64, Option<i64>),
    Add(i64),
    Drain,
    Available,
    Advance(i64),
}

/// What a call replied: the scripts' replies as integers, nil for the
/// scripts that return nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Int(i64),
    Nil,
}

/// The scripts on one count: `semaphore_*.lua` read as they run.
#[derive(Debug, Default)]
struct Model {
    now: i64,
    count: Option<i64>,
    deadline: Option<i64>,
    events: Vec<&'static str>,
    published: Vec<i64>,
}

impl Model {
    /// `GET`: Redis drops a key once the clock is past its deadline.
    fn get(&mut self) -> Option<i64> {
        if self.deadline.is_some_and(|at| self.now > at) {
            self.count = None;
            self.deadline = None;
        }
        self.count
    }

    /// `SET key value` (with `PX ms`: the deadline, and `expire` too).
    fn set(&mut self, value: i64, px: Option<i64>) {
        self.count = Some(value);
        self.deadline = px.map(|ms| self.now + ms);
        self.events.push("set");
        if px.is_some() {
            self.events.push("expire");
        }
    }

    /// `INCRBY`/`DECRBY`: the TTL stays; Redis raises `incrby` for both.
    fn incr(&mut self, by: i64) -> i64 {
        let next = self.get().unwrap_or(0) + by;
        self.count = Some(next);
        self.events.push("incrby");
        next
    }

    fn run(&mut self, op: &Op) -> Reply {
        match *op {
            Op::Acquire(n) => match self.get() {
                Some(v) if v >= n => {
                    self.incr(-n);
                    Reply::Int(1)
                }
                _ => Reply::Int(0),
            },
            Op::Release(n, if_exists) => {
                if if_exists && self.get().is_none() {
                    return Reply::Int(0);
                }
                let value = self.incr(n);
                self.published.push(value);
                if if_exists {
                    Reply::Int(1)
                } else {
                    Reply::Nil
                }
            }
            Op::TrySet(n, ttl) => {
                if self.get().is_some() {
                    return Reply::Int(0);
                }
                self.set(n, ttl);
                self.published.push(n);
                Reply::Int(1)
            }
            Op::Add(n) => {
                let value = self.get().unwrap_or(0) + n;
                self.set(value, None);
                self.published.push(value);
                Reply::Nil
            }
            Op::Drain => match self.get() {
                None => Reply::Int(0),
                Some(v) => {
                    self.set(0, None);
                    Reply::Int(v)
                }
            },
            Op::Available => Reply::Int(self.get().unwrap_or(0)),
            Op::Advance(ms) => {
                self.now += ms;
                Reply::Nil
            }
        }
    }
}

/// The machine's call for `op`, its reply as the command gives it.
fn machine(s: &mut MemStore, op: &Op) -> Result<Reply, LockError> {
    let n = names();
    Ok(match *op {
        Op::Acquire(p) => {
            let granted = matches!(acquire(s, &n, p)?, Attempt::Granted(_));
            Reply::Int(granted.into())
        }
        Op::Release(p, if_exists) => match release(s, &n, p, if_exists, None)? {
            Unlocked::Ran(Release::Released) if if_exists => Reply::Int(1),
            Unlocked::Ran(Release::Released) => Reply::Nil,
            other => Reply::Int(other.reply().unwrap_or(0)),
        },
        Op::TrySet(p, ttl) => Reply::Int(try_set(s, &n, p, ttl)?.into()),
        Op::Add(p) => {
            add(s, &n, p)?;
            Reply::Nil
        }
        Op::Drain => Reply::Int(drain(s, &n)?),
        Op::Available => Reply::Int(available(s, &n)?),
        Op::Advance(ms) => {
            s.advance(ms);
            Reply::Nil
        }
    })
}

/// The store's count and deadline, as the model keeps them.
fn state(s: &mut MemStore) -> (Option<i64>, Option<i64>) {
    match s.dump().as_slice() {
        [] => (None, None),
        [(key, Value::Str(v), at)] if key == KEY => {
            let text = std::str::from_utf8(v).expect("utf-8");
            (Some(text.parse().expect("an integer count")), *at)
        }
        other => panic!("unexpected keys {other:?}"),
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1i64..6).prop_map(Op::Acquire),
        3 => ((1i64..6), any::<bool>()).prop_map(|(n, e)| Op::Release(n, e)),
        2 => ((-3i64..8), prop::option::of(1i64..400)).prop_map(|(n, t)| Op::TrySet(n, t)),
        2 => (-6i64..6).prop_map(Op::Add),
        1 => Just(Op::Drain),
        1 => Just(Op::Available),
        2 => (0i64..300).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_machine_does_what_redissons_scripts_do(ops in prop::collection::vec(op(), 1..40)) {
        let mut s = MemStore::new(T0);
        let mut m = Model { now: T0, ..Model::default() };
        for (i, op) in ops.iter().enumerate() {
            let want = m.run(op);
            let got = machine(&mut s, op).expect("no error on good data");
            prop_assert_eq!(got, want, "step {} {:?}", i, op);
            prop_assert_eq!(state(&mut s), (m.get(), m.deadline), "step {} {:?}", i, op);
            let events: Vec<&str> = s.take_events().iter().map(|(e, k)| {
                assert_eq!(k, KEY);
                *e
            }).collect();
            prop_assert_eq!(events, std::mem::take(&mut m.events), "step {} {:?}", i, op);
            let published: Vec<i64> = std::mem::take(&mut s.published).into_iter().map(|(c, v)| {
                assert_eq!(c, CHANNEL);
                std::str::from_utf8(&v).expect("utf-8").parse().expect("an integer")
            }).collect();
            prop_assert_eq!(published, std::mem::take(&mut m.published), "step {} {:?}", i, op);
        }
    }
}

fn waiter(permits: i64, token: u32) -> Ticket<u32> {
    Ticket {
        owner: Vec::new(),
        hold: Hold::Semaphore { permits },
        lease: 0,
        token,
        multi: false,
        request: None,
    }
}

#[test]
fn waiters_are_served_in_arrival_order_as_far_as_permits_go() {
    let (mut s, n) = (MemStore::new(T0), names());
    assert!(try_set(&mut s, &n, 2, None).expect("set"));
    // A waiter for 3 heads the queue: the two free permits stay free for it,
    // the waiters for 1 behind it wait too.
    let mut queue: VecDeque<_> = [waiter(3, 1), waiter(1, 2), waiter(1, 3)].into();
    assert!(admit(&mut s, &n, &mut queue).is_empty());
    assert_eq!(available(&mut s, &n).expect("count"), 2);
    // Two more: the head takes 3, the next 1, the last waits for more.
    release(&mut s, &n, 2, false, None).expect("release");
    let served: Vec<u32> = admit(&mut s, &n, &mut queue)
        .into_iter()
        .map(|w| {
            assert!(w.outcome.is_ok());
            w.ticket.token
        })
        .collect();
    assert_eq!(served, [1, 2]);
    assert_eq!(available(&mut s, &n).expect("count"), 0);
    assert_eq!(queue.len(), 1);
}

#[test]
fn a_waiter_on_a_retyped_key_leaves_with_the_error() {
    let (mut s, n) = (MemStore::new(T0), names());
    s.put(KEY, Value::Str(b"many".to_vec()), None);
    let mut queue: VecDeque<_> = [waiter(1, 1), waiter(1, 2)].into();
    let served = admit(&mut s, &n, &mut queue);
    assert_eq!(served.len(), 2);
    assert!(served.iter().all(|w| w.outcome == Err(LockError::BadCount)));
}

#[test]
fn a_retried_release_gives_nothing_back_twice() {
    let (mut s, n) = (MemStore::new(T0), names());
    let request = Some(Request {
        id: b"r1",
        ttl: 1_000,
    });
    let first = release(&mut s, &n, 2, false, request).expect("release");
    assert_eq!(first, Unlocked::Ran(Release::Released));
    let again = release(&mut s, &n, 2, false, request).expect("retry");
    assert_eq!(again, Unlocked::Replayed(1));
    assert_eq!(available(&mut s, &n).expect("count"), 2);
    assert_eq!(s.published.len(), 1, "one message");
    // The latch is the unlock latch's key, with its TTL.
    let latch = n.latch_key(b"r1");
    assert_eq!(s.pttl(&latch), 1_000);
    // IFEXISTS on no count remembers nothing: a retry once it exists runs.
    let request = Some(Request {
        id: b"r2",
        ttl: 1_000,
    });
    let n2 = LockNames::new(b"T").expect("name");
    let none = release(&mut s, &n2, 1, true, request).expect("release");
    assert_eq!(none, Unlocked::Ran(Release::NotHeld));
    assert_eq!(
        s.kind(&n2.latch_key(b"r2")),
        ::rwlock::engine::store::KeyKind::Missing
    );
}

#[test]
fn bad_data_and_overflow_change_nothing() {
    let n = names();
    let cases: [(Value, LockError); 3] = [
        (Value::Str(b"1.5".to_vec()), LockError::BadCount),
        (Value::hash(&[(b"a", b"1")]), LockError::WrongType),
        (Value::List, LockError::WrongType),
    ];
    for (value, error) in cases {
        let mut s = MemStore::new(T0);
        s.put(KEY, value, Some(T0 + 500));
        let before = s.dump();
        assert_eq!(acquire(&mut s, &n, 1), Err(error));
        assert_eq!(release(&mut s, &n, 1, false, None), Err(error));
        assert_eq!(add(&mut s, &n, 1), Err(error));
        assert_eq!(drain(&mut s, &n), Err(error));
        assert_eq!(available(&mut s, &n), Err(error));
        if error == LockError::WrongType {
            assert_eq!(try_set(&mut s, &n, 1, None), Err(error));
        } else {
            // The script's GET finds a count: try-set is refused, not failed.
            assert_eq!(try_set(&mut s, &n, 1, None), Ok(false));
        }
        assert_eq!(s.dump(), before);
        assert!(s.take_events().is_empty() && s.published.is_empty());
    }
    let mut s = MemStore::new(T0);
    s.put(KEY, Value::Str(i64::MAX.to_string().into_bytes()), None);
    assert_eq!(
        release(&mut s, &n, 1, false, None),
        Err(LockError::PermitsOverflow)
    );
    assert_eq!(add(&mut s, &n, 1), Err(LockError::PermitsOverflow));
    s.put(KEY, Value::Str(i64::MIN.to_string().into_bytes()), None);
    assert_eq!(add(&mut s, &n, -1), Err(LockError::PermitsOverflow));
    // The most negative count is still a count: nothing to take.
    assert_eq!(acquire(&mut s, &n, 1), Ok(Attempt::Refused { pttl: -1 }));
    assert!(s.take_events().is_empty() && s.published.is_empty());
}

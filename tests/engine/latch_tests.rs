//! The count-down latch's machine (`engine::latch`, contract §16) against a
//! reference model: Redisson 4.7's three `RCountDownLatch` scripts
//! (`tests/oracle/redisson.toml`, set `latch`) transcribed onto a tiny
//! Redis of strings, with the events and messages each command of theirs
//! raises. Random sequences of every operation, from every starting value
//! (none, a count, zero, a negative count, a non-integer, another type),
//! must leave the same keys, values, deadlines, events and messages after
//! every step and reply what the script replies; an error changes nothing.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::memstore::{MemStore, Value};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, Granted};
use ::rwlock::engine::latch;
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::{admit, Hold, Ticket};

const T0: i64 = 1_700_000_000_000;
const NAME: &[u8] = b"job:7";
const CHANNEL: &[u8] = b"redisson_countdownlatch__channel__{job:7}";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Missing,
    Count(Vec<u8>),
    /// A key of another type (a hash): the scripts' `EXISTS` and `DEL` see it.
    Other,
}

/// Redisson's scripts on one key, with what the server would announce.
#[derive(Debug, Clone)]
struct Model {
    slot: Slot,
    events: Vec<(&'static str, Vec<u8>)>,
    published: Vec<(Vec<u8>, Vec<u8>)>,
}

/// What a script replies: an integer, nil, or the error a `DECR` or `GET`
/// raises on the value (the command's error differs in words, not in effect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Int(i64),
    Nil,
    Error,
}

impl Model {
    fn event(&mut self, e: &'static str) {
        self.events.push((e, NAME.to_vec()));
    }

    fn publish(&mut self, message: &[u8]) {
        self.published.push((CHANNEL.to_vec(), message.to_vec()));
    }

    fn int(&self) -> Option<Option<i64>> {
        match &self.slot {
            Slot::Missing => Some(None),
            // Redis's string2ll: no sign but a minus, no leading zero, no -0.
            Slot::Count(v) => std::str::from_utf8(v)
                .ok()
                .filter(|t| {
                    let digits = t.strip_prefix('-').unwrap_or(t);
                    !(digits.starts_with('+') || (digits.starts_with('0') && *t != "0"))
                })
                .and_then(|t| t.parse::<i64>().ok())
                .map(Some),
            Slot::Other => None,
        }
    }

    /// `if exists(K) == 0 then set(K, count); publish(C, 1); return 1 else return 0`.
    fn try_set_count(&mut self, count: i64) -> Reply {
        if self.slot != Slot::Missing {
            return Reply::Int(0);
        }
        self.slot = Slot::Count(count.to_string().into_bytes());
        self.event("set");
        self.publish(b"1");
        Reply::Int(1)
    }

    /// `local v = decr(K); if v <= 0 then del(K) end; if v == 0 then publish(C, 0) end`.
    fn count_down(&mut self) -> Reply {
        let Some(Some(v)) = self.int().map(|c| c.unwrap_or(0).checked_sub(1)) else {
            return Reply::Error;
        };
        self.slot = Slot::Count(v.to_string().into_bytes());
        self.event("incrby");
        if v <= 0 {
            self.slot = Slot::Missing;
            self.event("del");
        }
        if v == 0 {
            self.publish(b"0");
        }
        Reply::Nil
    }

    /// `GET` read as a long, 0 when missing.
    fn count(&self) -> Reply {
        match self.int() {
            Some(c) => Reply::Int(c.unwrap_or(0)),
            None => Reply::Error,
        }
    }

    /// `if del(K) == 1 then publish(C, 1); return 1 else return 0`; the
    /// commands refuse another type instead (contract §16.7).
    fn delete(&mut self) -> Reply {
        match self.slot {
            Slot::Missing => Reply::Int(0),
            Slot::Other => Reply::Error,
            Slot::Count(_) => {
                self.slot = Slot::Missing;
                self.event("del");
                self.publish(b"1");
                Reply::Int(1)
            }
        }
    }

    /// `await`'s answer: the count is zero or below, or the latch is gone.
    fn reached(&self) -> Option<bool> {
        self.int().map(|c| c.is_none_or(|c| c <= 0))
    }
}

#[derive(Debug, Clone)]
enum Op {
    TrySet(i64),
    CountDown,
    Count,
    Delete,
    Await,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0i64..4).prop_map(Op::TrySet),
        Just(Op::TrySet(i64::MAX)),
        Just(Op::CountDown),
        Just(Op::CountDown),
        Just(Op::Count),
        Just(Op::Delete),
        Just(Op::Await),
    ]
}

fn start() -> impl Strategy<Value = Slot> {
    prop_oneof![
        Just(Slot::Missing),
        (-3i64..5).prop_map(|n| Slot::Count(n.to_string().into_bytes())),
        Just(Slot::Count(i64::MIN.to_string().into_bytes())),
        Just(Slot::Count(b"x".to_vec())),
        Just(Slot::Count(b"07".to_vec())),
        Just(Slot::Other),
    ]
}

fn names() -> LockNames<'static> {
    latch::names(NAME).expect("a latch name")
}

fn store_with(slot: &Slot) -> MemStore {
    let mut s = MemStore::new(T0);
    match slot {
        Slot::Missing => {}
        Slot::Count(v) => s.put(NAME, Value::Str(v.clone()), None),
        Slot::Other => s.put(NAME, Value::hash(&[(b"f", b"1")]), None),
    }
    s
}

/// The store's key as the model's slot.
fn slot_of(s: &mut MemStore) -> Slot {
    match s.dump().into_iter().find(|(k, _, _)| k == NAME) {
        None => Slot::Missing,
        Some((_, Value::Str(v), None)) => Slot::Count(v),
        Some((_, Value::Hash(_), None)) => Slot::Other,
        Some(other) => panic!("the latch wrote {other:?}"),
    }
}

fn run(s: &mut MemStore, op: &Op) -> Reply {
    let n = names();
    let int = |r: Result<i64, LockError>| r.map_or(Reply::Error, Reply::Int);
    match op {
        Op::TrySet(count) => Reply::Int(latch::try_set_count(s, &n, *count).into()),
        Op::CountDown => latch::count_down(s, &n).map_or(Reply::Error, |_| Reply::Nil),
        Op::Count => int(latch::count(s, &n)),
        Op::Delete => int(latch::delete(s, &n).map(i64::from)),
        Op::Await => match latch::reached(s, &n) {
            Ok(Attempt::Granted(_)) => Reply::Int(1),
            Ok(Attempt::Refused { .. }) => Reply::Int(0),
            Err(_) => Reply::Error,
        },
    }
}

fn model_run(m: &mut Model, op: &Op) -> Reply {
    match op {
        Op::TrySet(count) => m.try_set_count(*count),
        Op::CountDown => m.count_down(),
        Op::Count => m.count(),
        Op::Delete => m.delete(),
        Op::Await => m.reached().map_or(Reply::Error, |r| Reply::Int(r.into())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Every step: the same reply, key, value, events and messages as the
    /// scripts; an error leaves all of it as it was.
    #[test]
    fn the_machine_does_what_redisson_s_scripts_do(from in start(), ops in prop::collection::vec(op(), 1..12)) {
        let mut s = store_with(&from);
        let mut m = Model { slot: from, events: Vec::new(), published: Vec::new() };
        for op in &ops {
            let before = (slot_of(&mut s), s.events.len(), s.published.len());
            let (got, want) = (run(&mut s, op), model_run(&mut m, op));
            prop_assert_eq!(got, want, "{:?}", op);
            if got == Reply::Error {
                prop_assert_eq!((slot_of(&mut s), s.events.len(), s.published.len()), before);
            }
            prop_assert_eq!(slot_of(&mut s), m.slot.clone(), "{:?}", op);
            prop_assert_eq!(&s.events, &m.events, "{:?}", op);
            prop_assert_eq!(&s.published, &m.published, "{:?}", op);
        }
    }
}

#[test]
fn the_channel_wraps_the_name_in_braces_and_names_with_braces_are_refused() {
    assert_eq!(latch::channel(&names()), CHANNEL);
    for bad in [&b""[..], b"{t}:a", b"a{b", b"a}b", b"{}"] {
        assert_eq!(
            latch::names(bad).map(|_| ()),
            Err(LockError::LatchName),
            "{bad:?}"
        );
    }
}

#[test]
fn a_count_down_past_the_smallest_count_is_refused_with_nothing_changed() {
    let mut s = store_with(&Slot::Count(i64::MIN.to_string().into_bytes()));
    assert_eq!(
        latch::count_down(&mut s, &names()),
        Err(LockError::Overflow)
    );
    assert!(s.events.is_empty() && s.published.is_empty());
}

#[test]
fn a_waiting_latch_is_refused_with_the_key_s_pttl() {
    let mut s = MemStore::new(T0);
    s.put(NAME, Value::Str(b"2".to_vec()), Some(T0 + 500));
    assert_eq!(
        latch::reached(&mut s, &names()),
        Ok(Attempt::Refused { pttl: 500 })
    );
    s.advance(501);
    assert!(matches!(
        latch::reached(&mut s, &names()),
        Ok(Attempt::Granted(_))
    ));
}

fn ticket(owner: &[u8], hold: Hold) -> Ticket<u32> {
    Ticket {
        owner: owner.to_vec(),
        hold,
        lease: 0,
        token: 0,
        multi: false,
        request: None,
    }
}

/// The queue's admission serves every waiter of a latch at zero in one go
/// (they own nothing), and none while the count is above zero.
#[test]
fn the_queue_admits_every_latch_waiter_at_once_at_zero() {
    let mut s = MemStore::new(T0);
    let n = names();
    assert!(latch::try_set_count(&mut s, &n, 1));
    let mut queue: VecDeque<_> = (0..3).map(|_| ticket(b"", Hold::Latch)).collect();
    assert!(admit(&mut s, &n, &mut queue).is_empty());
    assert_eq!(queue.len(), 3);
    latch::count_down(&mut s, &n).expect("counted down");
    let served = admit(&mut s, &n, &mut queue);
    assert!(queue.is_empty());
    assert_eq!(served.len(), 3);
    let granted = Granted {
        reentry: false,
        token: None,
    };
    assert!(served.iter().all(|w| w.outcome == Ok(granted)));
}

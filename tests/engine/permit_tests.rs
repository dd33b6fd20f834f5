//! The permit-expirable semaphore's machine (`engine::permit`, contract
//! §17) against a reference model: Redisson 4.7's eleven
//! `RPermitExpirableSemaphore` scripts transcribed onto a count, a sorted
//! set of permit ids and their deadlines. Random sequences of every
//! operation (acquire with a lease or none, both releases, lease updates
//! and reads, try-set, set, add of any sign, the three counts, a TTL given
//! to the count by someone else, time passing so that leases run out
//! between steps) must give the model's reply, keys, deadlines, keyspace
//! events and messages after every step; then the queue's admission of
//! permit waiters, the ids' rules and the errors, which change nothing.

use std::collections::{BTreeMap, VecDeque};

use proptest::prelude::*;

use crate::memstore::{MemStore, Value};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::Attempt;
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::permit::{
    acquire, acquired, add, available, hex, ids, lease_time, next_expiry, parse_id, permits,
    release, release_one, request_seed, set_permits, update_lease, NEVER, NO_EXPIRY,
};
use ::rwlock::engine::queue::{admit, Hold, Ticket};
use ::rwlock::engine::semaphore;
use ::rwlock::engine::store::Store;

const T0: i64 = 1_700_000_000_000;
const KEY: &[u8] = b"S";
const SET: &[u8] = b"{S}:timeout";
const CHANNEL: &[u8] = b"redisson_sc:{S}";

fn names() -> LockNames<'static> {
    LockNames::new(KEY).expect("name")
}

/// Step `i`'s seed: the model and the machine make the same ids from it.
fn seed(i: usize) -> [u64; 2] {
    [i as u64, 7]
}

#[derive(Debug, Clone)]
enum Op {
    /// permits, lease (-1: never)
    Acquire(i64, i64),
    /// Releases of ids picked among those taken so far (by index, wrapping)
    /// or never taken (`None`).
    Release(Vec<Option<usize>>),
    ReleaseOne(Option<usize>),
    UpdateLease(Option<usize>, i64),
    LeaseTime(Option<usize>),
    TrySet(i64),
    Set(i64),
    Add(i64),
    Available,
    Permits,
    Acquired,
    /// Another client's PEXPIRE on the count.
    CountTtl(i64),
    Advance(i64),
}

/// The scripts' state, as they read it.
#[derive(Debug, Default)]
struct Model {
    now: i64,
    count: Option<i64>,
    count_until: Option<i64>,
    set: BTreeMap<Vec<u8>, i64>,
    set_until: Option<i64>,
    events: Vec<(&'static str, &'static [u8])>,
    published: Vec<i64>,
}

impl Model {
    /// Redis drops a key once the clock is past its deadline.
    fn expire(&mut self) {
        if self.count_until.is_some_and(|at| self.now > at) {
            self.count = None;
            self.count_until = None;
        }
        if self.set_until.is_some_and(|at| self.now > at) {
            self.set.clear();
            self.set_until = None;
        }
    }

    fn incrby(&mut self, by: i64) -> i64 {
        let next = self.count.unwrap_or(0) + by;
        self.count = Some(next);
        self.events.push(("incrby", KEY));
        next
    }

    fn set_count(&mut self, value: i64) {
        self.count = Some(value);
        self.count_until = None;
        self.events.push(("set", KEY));
    }

    fn zrem(&mut self, members: &[Vec<u8>]) -> i64 {
        let removed = members
            .iter()
            .filter(|m| self.set.remove(*m).is_some())
            .count();
        if removed > 0 {
            self.events.push(("zrem", SET));
            if self.set.is_empty() {
                self.set_until = None;
                self.events.push(("del", SET));
            }
        }
        removed as i64
    }

    fn zadd(&mut self, score: i64, member: &[u8]) {
        if self.set.is_empty() {
            self.set_until = None;
        }
        self.set.insert(member.to_vec(), score);
        self.events.push(("zadd", SET));
    }

    fn zcount(&self) -> i64 {
        self.set.values().filter(|at| **at >= 0).count() as i64
    }

    /// `zrangebyscore 0 now limit`, `zrem`, `incrby`, publish above 0.
    fn reclaim(&mut self, limit: usize) {
        let mut expired: Vec<(i64, Vec<u8>)> = self
            .set
            .iter()
            .filter(|(_, at)| (0..=self.now).contains(*at))
            .map(|(m, at)| (*at, m.clone()))
            .collect();
        expired.sort();
        let expired: Vec<Vec<u8>> = expired.into_iter().take(limit).map(|(_, m)| m).collect();
        if expired.is_empty() {
            return;
        }
        self.zrem(&expired);
        let value = self.incrby(expired.len() as i64);
        if value > 0 {
            self.published.push(value);
        }
    }

    fn run(&mut self, i: usize, op: &Op, taken: &[Vec<u8>]) -> Reply {
        self.expire();
        let pick = |p: &Option<usize>| pick(taken, *p);
        match op {
            Op::Acquire(n, lease) => {
                let n = *n;
                let until = if *lease < 0 { NEVER } else { self.now + lease };
                self.reclaim(n as usize);
                if self.count.is_some_and(|v| v >= n) {
                    self.incrby(-n);
                    let ids: Vec<_> = ids(seed(i), n).collect();
                    for id in &ids {
                        self.zadd(until, id);
                    }
                    if let Some(at) = self.count_until.filter(|at| *at > self.now) {
                        self.set_until = Some(at);
                        self.events.push(("expire", SET));
                    }
                    return Reply::Ids(ids.iter().map(|id| id.to_vec()).collect());
                }
                match self.set.iter().map(|(m, at)| (*at, m)).min() {
                    Some((at, _)) if at != NEVER => Reply::Int(at),
                    _ => Reply::Nil,
                }
            }
            Op::Release(which) => {
                let ids: Vec<Vec<u8>> = which.iter().map(pick).collect();
                for id in &ids {
                    match self.set.get(id) {
                        Some(at) if *at > self.now => {}
                        _ => return Reply::Int(0),
                    }
                }
                self.reclaim(usize::MAX);
                let removed = self.zrem(&ids);
                self.incrby(removed);
                self.published.push(removed);
                Reply::Int(removed)
            }
            Op::ReleaseOne(which) => {
                let id = pick(which);
                let Some(at) = self.set.get(&id).copied() else {
                    return Reply::Int(0);
                };
                self.zrem(&[id]);
                let value = self.incrby(1);
                self.published.push(value);
                Reply::Int(i64::from(at > self.now))
            }
            Op::UpdateLease(which, lease) => {
                let id = pick(which);
                let until = if *lease < 0 { NEVER } else { self.now + lease };
                self.reclaim(usize::MAX);
                if !self.set.contains_key(&id) {
                    return Reply::Int(0);
                }
                self.zadd(until, &id);
                Reply::Int(1)
            }
            Op::LeaseTime(which) => {
                let id = pick(which);
                self.reclaim(usize::MAX);
                Reply::Int(match self.set.get(&id) {
                    None => 0,
                    Some(&NEVER) => -1,
                    Some(at) => at - self.now,
                })
            }
            Op::TrySet(n) => {
                if self.count.is_some() {
                    return Reply::Int(0);
                }
                self.set_count(*n);
                self.published.push(*n);
                Reply::Int(1)
            }
            Op::Set(n) => {
                let Some(free) = self.count else {
                    self.set_count(*n);
                    self.published.push(*n);
                    return Reply::Nil;
                };
                let total = free + self.zcount();
                if total != *n {
                    self.incrby(n - total);
                    self.published.push(*n);
                }
                Reply::Nil
            }
            Op::Add(n) => {
                let value = self.count.unwrap_or(0) + n;
                self.set_count(value);
                if *n > 0 {
                    self.published.push(*n);
                }
                Reply::Nil
            }
            Op::Available => {
                self.reclaim(usize::MAX);
                Reply::Int(self.count.unwrap_or(0))
            }
            Op::Permits => {
                self.reclaim(usize::MAX);
                Reply::Int(self.count.map_or(0, |free| free + self.zcount()))
            }
            Op::Acquired => {
                self.reclaim(usize::MAX);
                Reply::Int(self.zcount())
            }
            Op::CountTtl(ms) => {
                if self.count.is_some() {
                    self.count_until = Some(self.now + ms);
                }
                Reply::Nil
            }
            Op::Advance(ms) => {
                self.now += ms;
                Reply::Nil
            }
        }
    }
}

/// The id an op names: one taken before (by index, wrapping), or one never
/// taken.
fn pick(taken: &[Vec<u8>], which: Option<usize>) -> Vec<u8> {
    match which {
        Some(i) if !taken.is_empty() => taken[i % taken.len()].clone(),
        _ => vec![0xee; 16],
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Int(i64),
    Ids(Vec<Vec<u8>>),
    Nil,
}

/// The machine's call for `op`, its reply as the command gives it.
fn machine(s: &mut MemStore, i: usize, op: &Op, taken: &[Vec<u8>]) -> Result<Reply, LockError> {
    let n = names();
    let pick = |p: &Option<usize>| pick(taken, *p);
    Ok(match op {
        Op::Acquire(p, lease) => match acquire(s, &n, *p, *lease, seed(i))? {
            Attempt::Granted(_) => Reply::Ids(ids(seed(i), *p).map(|id| id.to_vec()).collect()),
            Attempt::Refused { pttl: NO_EXPIRY } => Reply::Nil,
            Attempt::Refused { pttl } => Reply::Int(pttl),
        },
        Op::Release(which) => {
            let ids: Vec<Vec<u8>> = which.iter().map(pick).collect();
            Reply::Int(release(s, &n, &ids)?)
        }
        Op::ReleaseOne(which) => {
            Reply::Int(release_one(s, &n, &pick(which))?.unwrap_or(false).into())
        }
        Op::UpdateLease(which, lease) => {
            Reply::Int(update_lease(s, &n, &pick(which), *lease)?.into())
        }
        Op::LeaseTime(which) => Reply::Int(lease_time(s, &n, &pick(which))?),
        Op::TrySet(p) => Reply::Int(semaphore::try_set(s, &n, *p, None)?.into()),
        Op::Set(p) => {
            set_permits(s, &n, *p)?;
            Reply::Nil
        }
        Op::Add(p) => {
            add(s, &n, *p)?;
            Reply::Nil
        }
        Op::Available => Reply::Int(available(s, &n)?),
        Op::Permits => Reply::Int(permits(s, &n)?),
        Op::Acquired => Reply::Int(acquired(s, &n)?),
        Op::CountTtl(ms) => {
            if let Some(value) = s.get(KEY) {
                let at = s.now + ms;
                s.put(KEY, Value::Str(value), Some(at));
            }
            Reply::Nil
        }
        Op::Advance(ms) => {
            s.advance(*ms);
            Reply::Nil
        }
    })
}

/// The store's keys as the model keeps them.
type State = (
    Option<i64>,
    Option<i64>,
    BTreeMap<Vec<u8>, i64>,
    Option<i64>,
);

fn state(s: &mut MemStore) -> State {
    let mut out: State = (None, None, BTreeMap::new(), None);
    for (key, value, at) in s.dump() {
        match (key.as_slice(), value) {
            (KEY, Value::Str(v)) => {
                let text = std::str::from_utf8(&v).expect("utf-8");
                out.0 = Some(text.parse().expect("an integer count"));
                out.1 = at;
            }
            (SET, Value::Zset(z)) => {
                out.2 = z;
                out.3 = at;
            }
            (other, v) => panic!("unexpected key {other:?}: {v:?}"),
        }
    }
    out
}

fn model_state(m: &mut Model) -> State {
    m.expire();
    (m.count, m.count_until, m.set.clone(), m.set_until)
}

fn lease() -> impl Strategy<Value = i64> {
    prop_oneof![1 => Just(-1i64), 4 => 1i64..400]
}

fn id_pick() -> impl Strategy<Value = Option<usize>> {
    prop::option::weighted(0.85, 0usize..8)
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => ((1i64..4), lease()).prop_map(|(n, l)| Op::Acquire(n, l)),
        3 => prop::collection::vec(id_pick(), 1..4).prop_map(Op::Release),
        2 => id_pick().prop_map(Op::ReleaseOne),
        2 => (id_pick(), lease()).prop_map(|(p, l)| Op::UpdateLease(p, l)),
        1 => id_pick().prop_map(Op::LeaseTime),
        2 => (-2i64..6).prop_map(Op::TrySet),
        1 => (-2i64..8).prop_map(Op::Set),
        2 => (-4i64..5).prop_map(Op::Add),
        1 => Just(Op::Available),
        1 => Just(Op::Permits),
        1 => Just(Op::Acquired),
        1 => (1i64..500).prop_map(Op::CountTtl),
        3 => (0i64..300).prop_map(Op::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_machine_does_what_redissons_scripts_do(ops in prop::collection::vec(op(), 1..40)) {
        let mut s = MemStore::new(T0);
        let mut m = Model { now: T0, ..Model::default() };
        let mut taken: Vec<Vec<u8>> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let want = m.run(i, op, &taken);
            let got = machine(&mut s, i, op, &taken).expect("no error on good data");
            prop_assert_eq!(&got, &want, "step {} {:?}", i, op);
            if let Reply::Ids(ids) = got {
                taken.extend(ids);
            }
            prop_assert_eq!(state(&mut s), model_state(&mut m), "step {} {:?}", i, op);
            let events: Vec<(&str, Vec<u8>)> = s.take_events();
            let want_events: Vec<(&str, Vec<u8>)> =
                m.events.drain(..).map(|(e, k)| (e, k.to_vec())).collect();
            prop_assert_eq!(events, want_events, "step {} {:?}", i, op);
            let published: Vec<i64> = std::mem::take(&mut s.published).into_iter().map(|(c, v)| {
                assert_eq!(c, CHANNEL);
                std::str::from_utf8(&v).expect("utf-8").parse().expect("an integer")
            }).collect();
            prop_assert_eq!(published, std::mem::take(&mut m.published), "step {} {:?}", i, op);
        }
    }
}

fn waiter(permits: i64, lease: i64, token: u32) -> Ticket<u32> {
    Ticket {
        owner: Vec::new(),
        hold: Hold::Permit {
            permits,
            seed: seed(token as usize),
        },
        lease,
        token,
        multi: false,
        request: None,
    }
}

#[test]
fn waiters_are_served_in_order_and_when_a_permit_expires() {
    let (mut s, n) = (MemStore::new(T0), names());
    assert!(semaphore::try_set(&mut s, &n, 2, None).expect("set"));
    let held = acquire(&mut s, &n, 2, 100, seed(0)).expect("acquire");
    assert!(matches!(held, Attempt::Granted(_)));
    assert_eq!(next_expiry(&mut s, &n), Some(T0 + 100));
    // A waiter for 2 heads the queue: the one permit given back stays free
    // for it, and the waiter for 1 behind it waits too.
    let mut queue = VecDeque::from([waiter(2, 50, 1), waiter(1, -1, 2)]);
    let first: Vec<u8> = ids(seed(0), 2).next().expect("an id").to_vec();
    assert_eq!(release(&mut s, &n, &[first]).expect("release"), 1);
    assert!(admit(&mut s, &n, &mut queue).is_empty());
    // The other permit's lease runs out: the waiters' look reclaims it and
    // serves both in order, as the agenda's look at the expiry does.
    s.advance(100);
    let served: Vec<u32> = admit(&mut s, &n, &mut queue)
        .iter()
        .map(|w| w.ticket.token)
        .collect();
    assert_eq!(served, vec![1]);
    assert_eq!(available(&mut s, &n).expect("available"), 0);
    assert_eq!(next_expiry(&mut s, &n), Some(T0 + 150));
    s.advance(51);
    let served: Vec<u32> = admit(&mut s, &n, &mut queue)
        .iter()
        .map(|w| w.ticket.token)
        .collect();
    assert_eq!(served, vec![2]);
    // Its acquisition reclaimed one expired permit, as many as it took
    // (the script's LIMIT): the other is still there until a read.
    assert_eq!(next_expiry(&mut s, &n), Some(T0 + 150));
    assert_eq!(available(&mut s, &n).expect("available"), 1);
    assert_eq!(
        next_expiry(&mut s, &n),
        None,
        "only a permit that never expires"
    );
    assert!(matches!(
        acquire(&mut s, &n, 2, 10, seed(9)).expect("acquire"),
        Attempt::Refused { pttl: NO_EXPIRY }
    ));
}

#[test]
fn the_waiters_next_look_passes_over_scores_no_reclaim_clears() {
    let (mut s, n) = (MemStore::new(T0), names());
    let set = BTreeMap::from([
        (vec![1; 16], -5),
        (vec![2; 16], T0 + 40),
        (vec![3; 16], NEVER),
    ]);
    s.put(SET, Value::Zset(set), None);
    s.put(KEY, Value::Str(b"0".to_vec()), None);
    assert_eq!(next_expiry(&mut s, &n), Some(T0 + 40));
    // The refusal's reply is the script's: the lowest score of all.
    assert_eq!(
        acquire(&mut s, &n, 1, 10, seed(0)),
        Ok(Attempt::Refused { pttl: -5 })
    );
    s.advance(40);
    assert!(matches!(
        acquire(&mut s, &n, 1, 10, seed(1)),
        Ok(Attempt::Granted(_))
    ));
    assert_eq!(next_expiry(&mut s, &n), Some(T0 + 50));
}

#[test]
fn ids_are_hex_of_sixteen_bytes_and_a_request_makes_the_same_ones() {
    let a: Vec<_> = ids(request_seed(b"req-1"), 3).collect();
    let b: Vec<_> = ids(request_seed(b"req-1"), 3).collect();
    let c: Vec<_> = ids(request_seed(b"req-2"), 3).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a[0] != a[1] && a[1] != a[2] && a[0] != a[2]);
    let text = hex(&a[0]);
    assert_eq!(text.len(), 32);
    assert!(text
        .iter()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(parse_id(&text).as_deref(), Some(&a[0][..]));
    assert_eq!(parse_id(b"ABcd").as_deref(), Some(&[0xab, 0xcd][..]));
    for bad in [&b""[..], b"abc", b"zz", b"0g"] {
        assert_eq!(parse_id(bad), None, "{bad:?}");
    }
}

#[test]
fn errors_change_nothing() {
    let (mut s, n) = (MemStore::new(T0), names());
    s.put(KEY, Value::Str(b"x".to_vec()), None);
    let id = vec![1; 16];
    assert_eq!(
        acquire(&mut s, &n, 1, 10, seed(0)),
        Err(LockError::BadCount)
    );
    assert_eq!(
        release(&mut s, &n, std::slice::from_ref(&id)),
        Err(LockError::BadCount)
    );
    assert_eq!(available(&mut s, &n), Err(LockError::BadCount));
    assert_eq!(add(&mut s, &n, 1), Err(LockError::BadCount));
    assert_eq!(
        semaphore::try_set(&mut s, &n, 1, None),
        Ok(false),
        "a count exists, as GET sees it"
    );
    s.put(KEY, Value::Str(b"1".to_vec()), None);
    s.put(SET, Value::List, None);
    assert_eq!(
        acquire(&mut s, &n, 1, 10, seed(0)),
        Err(LockError::WrongType)
    );
    assert_eq!(lease_time(&mut s, &n, &id), Err(LockError::WrongType));
    assert_eq!(
        add(&mut s, &n, 1),
        Ok(2),
        "the add script never reads the set"
    );
    assert_eq!(s.published, vec![(CHANNEL.to_vec(), b"1".to_vec())]);
    s.published.clear();
    s.put(SET, Value::Zset(BTreeMap::new()), None);
    s.put(KEY, Value::Str(i64::MAX.to_string().into_bytes()), None);
    s.put(
        SET,
        Value::Zset(BTreeMap::from([(id.clone(), T0 - 1)])),
        None,
    );
    assert_eq!(available(&mut s, &n), Err(LockError::PermitsOverflow));
    assert_eq!(add(&mut s, &n, 1), Err(LockError::PermitsOverflow));
    assert_eq!(
        release_one(&mut s, &n, &id),
        Err(LockError::PermitsOverflow)
    );
    s.take_events();
    assert_eq!(s.dump().len(), 2);
    assert!(s.published.is_empty());
}

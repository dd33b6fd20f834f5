//! Model-based test of the plain lock: random operations run on the machine
//! (engine/lock.rs, over the in-memory store) and on a small reference model
//! written straight from Redisson's scripts (`lock.lua`, `fenced_lock.lua`,
//! `nonreentrant_lock.lua`, `unlock.lua`, `renew.lua`, `force_unlock.lua`),
//! comparing each step's reply, keyspace events and messages, and the whole
//! keyspace after it. The model derives its key names from Redisson's own
//! rule, not from names.rs, so a wrong name shows too.

use std::collections::BTreeMap;

use crate::memstore::{MemStore, Value};
use crate::model::{Rng, LOCKS, OWNERS, REQUESTS};
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::hold::{Attempt, Granted, Release, Request, Unlocked};
use ::rwlock::engine::lock::{self, LockInfo, Options};
use ::rwlock::engine::names::LockNames;

/// `<prefix>:{name}`, or `<prefix>:name` when the name has a brace: the
/// scripts' other keys and channel, as Redisson names them.
fn derived(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

fn token_key(name: &str) -> String {
    derived("redisson_lock_token", name)
}

fn latch_key(name: &str, id: &str) -> String {
    format!("{}:{id}", derived("redisson_unlock_latch", name))
}

/// A lock as the scripts see it: the hash's fields (owner → count) and its
/// deadline. Every script that writes the hash sets its TTL.
#[derive(Debug, Clone, Default)]
struct Held {
    counts: BTreeMap<String, i64>,
    deadline: i64,
}

#[derive(Debug, Default)]
struct Model {
    now: i64,
    locks: BTreeMap<String, Held>,
    /// Lock → its fencing token counter (no TTL).
    tokens: BTreeMap<String, i64>,
    /// (lock, request id) → (remembered reply, deadline).
    latches: BTreeMap<(String, String), (i64, i64)>,
    /// `(event, key)`, as `MemStore` records them.
    events: Vec<(&'static str, Vec<u8>)>,
    /// `(channel, message)`.
    published: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Acquire(usize, usize, i64, Options),
    /// Lock, owner, lease, and `REQUEST id ttl`.
    Unlock(usize, usize, i64, Option<(usize, i64)>),
    Renew(usize, usize, i64),
    Force(usize),
    Info(usize),
    Advance(i64),
}

/// What a step replied.
#[derive(Debug, PartialEq)]
enum Reply {
    Taken(Attempt),
    Unlocked(Unlocked),
    /// `LOCK.RENEW`: 1 or 0.
    Renewed(bool),
    /// `LOCK.FORCEUNLOCK`: 1 or 0.
    Forced(bool),
    Info(LockInfo),
    /// The clock moved.
    Waited,
}

impl Model {
    fn at(now: i64) -> Model {
        Model {
            now,
            ..Default::default()
        }
    }

    fn event(&mut self, event: &'static str, key: &str) {
        self.events.push((event, key.as_bytes().to_vec()));
    }

    /// Redis's expiry: a key is gone once the clock is past its deadline.
    fn expire(&mut self) {
        let now = self.now;
        self.locks.retain(|_, l| now <= l.deadline);
        self.latches.retain(|_, (_, deadline)| now <= *deadline);
    }

    fn publish(&mut self, name: &str) {
        let channel = derived("redisson_lock__channel", name);
        self.published.push((channel.into_bytes(), b"0".to_vec()));
    }

    /// `lock.lua`; `fenced_lock.lua` with `fenced` (the token INCR first);
    /// `nonreentrant_lock.lua` with `non_reentrant` (the holder's error).
    fn acquire(
        &mut self,
        name: &str,
        owner: &str,
        lease: i64,
        options: Options,
    ) -> Result<Attempt, LockError> {
        let held = self.locks.get(name).map(|l| l.counts.contains_key(owner));
        match held {
            Some(false) => {
                let pttl = self.locks[name].deadline - self.now;
                return Ok(Attempt::Refused { pttl });
            }
            Some(true) if options.non_reentrant => return Err(LockError::Reentry),
            _ => {}
        }
        let token = options.fenced.then(|| {
            self.event("incrby", &token_key(name));
            let token = self.tokens.entry(name.into()).or_default();
            *token += 1;
            *token
        });
        let l = self.locks.entry(name.into()).or_default();
        *l.counts.entry(owner.into()).or_default() += 1;
        l.deadline = self.now + lease;
        self.event("hincrby", name);
        self.event("expire", name);
        Ok(Attempt::Granted(Granted {
            reentry: held == Some(true),
            token,
        }))
    }

    /// `unlock.lua`.
    fn unlock(
        &mut self,
        name: &str,
        owner: &str,
        lease: i64,
        request: Option<(&str, i64)>,
    ) -> Unlocked {
        if let Some((id, _)) = request {
            if let Some(&(value, _)) = self.latches.get(&(name.into(), id.into())) {
                return Unlocked::Replayed(value);
            }
        }
        let count = self.locks.get(name).and_then(|l| l.counts.get(owner));
        let Some(&count) = count else {
            return Unlocked::Ran(Release::NotHeld);
        };
        self.event("hincrby", name);
        let (release, value) = if count > 1 {
            let l = self.locks.get_mut(name).expect("held");
            l.counts.insert(owner.into(), count - 1);
            l.deadline = self.now + lease;
            self.event("expire", name);
            (Release::StillHeld, 0)
        } else {
            self.locks.remove(name);
            self.event("del", name);
            self.publish(name);
            (Release::Released, 1)
        };
        if let Some((id, ttl)) = request {
            let key = latch_key(name, id);
            self.event("set", &key);
            self.event("expire", &key);
            let until = self.now + ttl;
            self.latches
                .insert((name.into(), id.into()), (value, until));
        }
        Unlocked::Ran(release)
    }

    /// `renew.lua` for one lock.
    fn renew(&mut self, name: &str, owner: &str, lease: i64) -> bool {
        let now = self.now;
        let Some(l) = self.locks.get_mut(name) else {
            return false;
        };
        if !l.counts.contains_key(owner) {
            return false;
        }
        l.deadline = now + lease;
        self.event("expire", name);
        true
    }

    /// `force_unlock.lua`.
    fn force(&mut self, name: &str) -> bool {
        if self.locks.remove(name).is_none() {
            return false;
        }
        self.event("del", name);
        self.publish(name);
        true
    }

    /// What `LOCK.INFO` shows: every field, the PTTL, the counter.
    fn info(&self, name: &str) -> LockInfo {
        let (holders, pttl) = match self.locks.get(name) {
            Some(l) => (
                l.counts
                    .iter()
                    .map(|(owner, count)| (owner.as_bytes().to_vec(), *count))
                    .collect(),
                l.deadline - self.now,
            ),
            None => (Vec::new(), -2),
        };
        LockInfo {
            holders,
            pttl,
            token: self.tokens.get(name).copied(),
        }
    }

    fn run(&mut self, op: Op) -> Result<Reply, LockError> {
        let reply = match op {
            Op::Acquire(l, o, lease, options) => {
                Reply::Taken(self.acquire(LOCKS[l], OWNERS[o], lease, options)?)
            }
            Op::Unlock(l, o, lease, request) => {
                let request = request.map(|(r, ttl)| (REQUESTS[r], ttl));
                Reply::Unlocked(self.unlock(LOCKS[l], OWNERS[o], lease, request))
            }
            Op::Renew(l, o, lease) => Reply::Renewed(self.renew(LOCKS[l], OWNERS[o], lease)),
            Op::Force(l) => Reply::Forced(self.force(LOCKS[l])),
            Op::Info(l) => Reply::Info(self.info(LOCKS[l])),
            Op::Advance(ms) => {
                self.now += ms;
                Reply::Waited
            }
        };
        self.expire();
        Ok(reply)
    }

    /// The keyspace the model implies, in `MemStore::dump` form.
    fn keyspace(&self) -> Vec<(Vec<u8>, Value, Option<i64>)> {
        let decimal = |n: i64| n.to_string().into_bytes();
        let mut keys = Vec::new();
        for (name, l) in &self.locks {
            let fields = l
                .counts
                .iter()
                .map(|(owner, count)| (owner.as_bytes().to_vec(), decimal(*count)))
                .collect();
            keys.push((
                name.clone().into_bytes(),
                Value::Hash(fields),
                Some(l.deadline),
            ));
        }
        for (name, token) in &self.tokens {
            keys.push((
                token_key(name).into_bytes(),
                Value::Str(decimal(*token)),
                None,
            ));
        }
        for ((name, id), (value, deadline)) in &self.latches {
            let key = latch_key(name, id).into_bytes();
            keys.push((key, Value::Str(decimal(*value)), Some(*deadline)));
        }
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        keys
    }
}

fn random_op(rng: &mut Rng) -> Op {
    let (lock, owner, lease) = rng.target();
    match rng.below(16) {
        0..=5 => {
            let options = Options {
                fenced: rng.below(3) == 0,
                non_reentrant: rng.below(4) == 0,
            };
            Op::Acquire(lock, owner, lease, options)
        }
        6..=10 => {
            let request = (rng.below(2) == 0).then(|| (rng.below(REQUESTS.len()), rng.lease()));
            Op::Unlock(lock, owner, lease, request)
        }
        11 => Op::Renew(lock, owner, lease),
        12 => Op::Force(lock),
        13 => Op::Info(lock),
        _ => Op::Advance(rng.pause()),
    }
}

fn run_machine(s: &mut MemStore, op: Op) -> Result<Reply, LockError> {
    let names = |l: usize| LockNames::new(LOCKS[l].as_bytes()).expect("a valid name");
    let owner = |o: usize| OWNERS[o].as_bytes();
    Ok(match op {
        Op::Acquire(l, o, lease, options) => {
            Reply::Taken(lock::acquire(s, &names(l), owner(o), lease, options)?)
        }
        Op::Unlock(l, o, lease, request) => {
            let request = request.map(|(r, ttl)| Request {
                id: REQUESTS[r].as_bytes(),
                ttl,
            });
            Reply::Unlocked(lock::unlock(s, &names(l), owner(o), lease, request)?)
        }
        Op::Renew(l, o, lease) => Reply::Renewed(lock::renew(s, &names(l), owner(o), lease)?),
        Op::Force(l) => Reply::Forced(lock::force_unlock(s, &names(l))?),
        Op::Info(l) => Reply::Info(lock::info(s, &names(l))?),
        Op::Advance(ms) => {
            s.advance(ms);
            Reply::Waited
        }
    })
}

/// How often a run met each case worth meeting, so that a change to the
/// generator cannot quietly stop exercising one.
#[derive(Debug, Default)]
struct Seen {
    acquired: usize,
    reentries: usize,
    tokens: usize,
    refused: usize,
    reentry_errors: usize,
    released: usize,
    replays: usize,
    renewed: usize,
    forced: usize,
}

impl Seen {
    fn count(&mut self, reply: &Result<Reply, LockError>) {
        match reply {
            Ok(Reply::Taken(Attempt::Granted(Granted { reentry, token }))) => {
                self.acquired += 1;
                self.reentries += usize::from(*reentry);
                self.tokens += usize::from(token.is_some());
            }
            Ok(Reply::Taken(Attempt::Refused { .. })) => self.refused += 1,
            Err(LockError::Reentry) => self.reentry_errors += 1,
            Ok(Reply::Unlocked(Unlocked::Ran(Release::Released))) => self.released += 1,
            Ok(Reply::Unlocked(Unlocked::Replayed(_))) => self.replays += 1,
            Ok(Reply::Renewed(true)) => self.renewed += 1,
            Ok(Reply::Forced(true)) => self.forced += 1,
            _ => {}
        }
    }
}

#[test]
fn the_plain_lock_matches_its_reference_model_on_random_operations() {
    const SEEDS: u64 = 32;
    const STEPS: usize = 1_500;
    const START: i64 = 1_000_000;
    let mut seen = Seen::default();
    for seed in 0..SEEDS {
        let mut rng = Rng::new(0x10C4_0000 + seed);
        let ops: Vec<Op> = (0..STEPS).map(|_| random_op(&mut rng)).collect();
        let (mut store, mut model) = (MemStore::new(START), Model::at(START));
        for (step, &op) in ops.iter().enumerate() {
            let got = run_machine(&mut store, op);
            let want = model.run(op);
            // The last few operations, which a failure most likely needs.
            let ctx = || {
                let recent = &ops[step.saturating_sub(7)..=step];
                format!("seed {seed} step {step}: {recent:?}")
            };
            assert_eq!(got, want, "reply, {}", ctx());
            let events = std::mem::take(&mut model.events);
            assert_eq!(store.take_events(), events, "events, {}", ctx());
            let published = std::mem::take(&mut model.published);
            assert_eq!(store.published, published, "messages, {}", ctx());
            store.published.clear();
            assert_eq!(store.dump(), model.keyspace(), "keyspace, {}", ctx());
            seen.count(&got);
        }
    }
    // The mix must exercise every path, not only refusals.
    let steps = SEEDS as usize * STEPS;
    assert!(seen.acquired > steps / 10, "{seen:?}");
    assert!(seen.reentries > seen.acquired / 20, "{seen:?}");
    assert!(seen.tokens > seen.acquired / 5, "{seen:?}");
    for (case, n) in [
        ("refused", seen.refused),
        ("reentry errors", seen.reentry_errors),
        ("released", seen.released),
        ("replays", seen.replays),
        ("renewed", seen.renewed),
        ("forced", seen.forced),
    ] {
        assert!(n > steps / 200, "only {n} {case}: {seen:?}");
    }
}

//! Model-based test of the fair lock: random operations run on the machine
//! (engine/fair.rs, over the in-memory store) and on Redisson's fair-lock
//! scripts transcribed call for call onto a tiny Redis of its own (`Mini`),
//! comparing each step's reply, keyspace events, messages and the whole
//! keyspace. The model names its keys by Redisson's rule, not by names.rs.
//! One deliberate difference is transcribed (docs/design.md §13.5): an
//! unlock of a missing lock replies nil and stores no latch, where
//! `fair_unlock.lua` replies and latches 1.

use std::collections::{BTreeMap, VecDeque};

use crate::memstore::{MemStore, Value};
use crate::model::Rng;
use ::rwlock::engine::error::LockError;
use ::rwlock::engine::fair::{self, FairAttempt, FairOptions};
use ::rwlock::engine::hold::{Granted, Request, Unlocked};
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::store::{Line, Store};

const LOCKS: [&str; 3] = ["fl", "x{t}", "{t}:b"];
const OWNERS: [&str; 4] = ["u:1", "u:2", "v:1", "v:2"];
const REQUESTS: [&str; 2] = ["r1", "r2"];

fn derived(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// A value of the tiny Redis.
#[derive(Debug, Clone)]
enum V {
    Hash(BTreeMap<String, i64>),
    Str(String),
    List(VecDeque<String>),
    Zset(BTreeMap<String, i64>),
}

/// Just the commands the scripts call, with Redis's events and expiry.
#[derive(Debug, Default)]
struct Mini {
    now: i64,
    keys: BTreeMap<String, (V, Option<i64>)>,
    events: Vec<(&'static str, Vec<u8>)>,
    published: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Mini {
    fn ev(&mut self, name: &'static str, key: &str) {
        self.events.push((name, key.as_bytes().to_vec()));
    }
    fn get(&mut self, key: &str) -> Option<&mut V> {
        let now = self.now;
        if matches!(self.keys.get(key), Some((_, Some(at))) if now > *at) {
            self.keys.remove(key);
        }
        self.keys.get_mut(key).map(|(v, _)| v)
    }
    fn exists(&mut self, key: &str) -> bool {
        self.get(key).is_some()
    }
    fn list(&mut self, key: &str) -> VecDeque<String> {
        match self.get(key) {
            Some(V::List(l)) => l.clone(),
            _ => VecDeque::new(),
        }
    }
    fn zset(&mut self, key: &str) -> BTreeMap<String, i64> {
        match self.get(key) {
            Some(V::Zset(z)) => z.clone(),
            _ => BTreeMap::new(),
        }
    }
    fn hash(&mut self, key: &str) -> BTreeMap<String, i64> {
        match self.get(key) {
            Some(V::Hash(h)) => h.clone(),
            _ => BTreeMap::new(),
        }
    }
    /// Writes back a collection, deleting it (event `del`) when empty.
    fn put_list(&mut self, key: &str, l: VecDeque<String>) {
        if l.is_empty() {
            self.keys.remove(key);
            self.ev("del", key);
        } else {
            self.keys.insert(key.into(), (V::List(l), None));
        }
    }
    fn put_zset(&mut self, key: &str, z: BTreeMap<String, i64>) {
        if z.is_empty() {
            self.keys.remove(key);
            self.ev("del", key);
        } else {
            self.keys.insert(key.into(), (V::Zset(z), None));
        }
    }
    fn lindex(&mut self, key: &str, i: i64) -> Option<String> {
        let l = self.list(key);
        let at = if i < 0 { l.len() as i64 + i } else { i };
        usize::try_from(at).ok().and_then(|at| l.get(at).cloned())
    }
    fn lpop(&mut self, key: &str) {
        let mut l = self.list(key);
        if l.pop_front().is_some() {
            self.ev("lpop", key);
            self.put_list(key, l);
        }
    }
    fn rpush(&mut self, key: &str, v: &str) {
        let mut l = self.list(key);
        l.push_back(v.into());
        self.keys.insert(key.into(), (V::List(l), None));
        self.ev("rpush", key);
    }
    fn lrem(&mut self, key: &str, v: &str) {
        let mut l = self.list(key);
        let n = l.len();
        l.retain(|x| x != v);
        if l.len() != n {
            self.ev("lrem", key);
            self.put_list(key, l);
        }
    }
    fn zscore(&mut self, key: &str, m: &str) -> Option<i64> {
        self.zset(key).get(m).copied()
    }
    fn zrem(&mut self, key: &str, m: &str) {
        let mut z = self.zset(key);
        if z.remove(m).is_some() {
            self.ev("zrem", key);
            self.put_zset(key, z);
        }
    }
    fn zadd(&mut self, key: &str, score: i64, m: &str) -> bool {
        let mut z = self.zset(key);
        let added = z.insert(m.into(), score).is_none();
        self.keys.insert(key.into(), (V::Zset(z), None));
        self.ev("zadd", key);
        added
    }
    fn zincrby(&mut self, key: &str, d: i64, m: &str) {
        let mut z = self.zset(key);
        *z.entry(m.into()).or_insert(0) += d;
        self.keys.insert(key.into(), (V::Zset(z), None));
        self.ev("zincr", key);
    }
    fn zrange(&mut self, key: &str) -> Vec<String> {
        let mut all: Vec<(i64, String)> = self.zset(key).into_iter().map(|(m, s)| (s, m)).collect();
        all.sort();
        all.into_iter().map(|(_, m)| m).collect()
    }
    fn hexists(&mut self, key: &str, f: &str) -> bool {
        self.hash(key).contains_key(f)
    }
    fn hset(&mut self, key: &str, f: &str, v: i64) {
        let at = self.keys.get(key).and_then(|(_, at)| *at);
        let mut h = self.hash(key);
        h.insert(f.into(), v);
        self.keys.insert(key.into(), (V::Hash(h), at));
        self.ev("hset", key);
    }
    fn hincrby(&mut self, key: &str, f: &str, d: i64) -> i64 {
        let at = self.keys.get(key).and_then(|(_, at)| *at);
        let mut h = self.hash(key);
        let n = h.get(f).copied().unwrap_or(0) + d;
        h.insert(f.into(), n);
        self.keys.insert(key.into(), (V::Hash(h), at));
        self.ev("hincrby", key);
        n
    }
    fn pexpire(&mut self, key: &str, ms: i64) {
        let now = self.now;
        if !self.exists(key) {
            return;
        }
        if ms <= 0 {
            self.keys.remove(key);
            self.ev("del", key);
        } else {
            self.keys.get_mut(key).expect("exists").1 = Some(now + ms);
            self.ev("expire", key);
        }
    }
    fn pttl(&mut self, key: &str) -> i64 {
        let now = self.now;
        if !self.exists(key) {
            return -2;
        }
        match self.keys[key].1 {
            None => -1,
            Some(at) => (at - now).max(0),
        }
    }
    fn del(&mut self, key: &str) -> bool {
        let existed = self.exists(key);
        if existed {
            self.keys.remove(key);
            self.ev("del", key);
        }
        existed
    }
    fn set_px(&mut self, key: &str, v: i64, ms: i64) {
        let now = self.now;
        self.keys
            .insert(key.into(), (V::Str(v.to_string()), Some(now + ms)));
        self.ev("set", key);
        self.ev("expire", key);
    }
    fn getstr(&mut self, key: &str) -> Option<i64> {
        match self.get(key) {
            Some(V::Str(s)) => s.parse().ok(),
            _ => None,
        }
    }
    fn publish(&mut self, channel: String, msg: &str) {
        self.published
            .push((channel.into_bytes(), msg.as_bytes().to_vec()));
    }

    /// The keyspace as `MemStore::dump` shows it.
    fn dump(&mut self) -> Vec<(Vec<u8>, Value, Option<i64>)> {
        let now = self.now;
        self.keys.retain(|_, (_, at)| at.is_none_or(|at| now <= at));
        self.keys
            .iter()
            .map(|(k, (v, at))| {
                let v = match v {
                    V::Hash(h) => Value::Hash(
                        h.iter()
                            .map(|(f, n)| (f.as_bytes().to_vec(), n.to_string().into_bytes()))
                            .collect(),
                    ),
                    V::Str(s) => Value::Str(s.as_bytes().to_vec()),
                    V::List(l) => Value::Queue(l.iter().map(|w| w.as_bytes().to_vec()).collect()),
                    V::Zset(z) => {
                        Value::Zset(z.iter().map(|(m, s)| (m.as_bytes().to_vec(), *s)).collect())
                    }
                };
                (k.as_bytes().to_vec(), v, *at)
            })
            .collect()
    }
}

/// The scripts, transcribed; `now` is the clock the machine reads.
struct Scripts<'a> {
    r: &'a mut Mini,
    name: &'a str,
}

impl Scripts<'_> {
    fn queue(&self) -> String {
        derived("redisson_lock_queue", self.name)
    }
    fn timeout(&self) -> String {
        derived("redisson_lock_timeout", self.name)
    }
    fn channel(&self, owner: &str) -> String {
        format!("{}:{owner}", derived("redisson_lock__channel", self.name))
    }
    fn purge(&mut self, now: i64) {
        let (q, t) = (self.queue(), self.timeout());
        while let Some(first) = self.r.lindex(&q, 0) {
            match self.r.zscore(&t, &first) {
                Some(at) if at <= now => {
                    self.r.zrem(&t, &first);
                    self.r.lpop(&q);
                }
                _ => break,
            }
        }
    }
    /// fair_lock.lua / fair_trylock.lua and the non-reentrant two.
    fn lock(&mut self, lease: i64, owner: &str, o: FairOptions) -> Result<Option<i64>, LockError> {
        let now = self.r.now;
        let (q, t, h) = (self.queue(), self.timeout(), self.name.to_string());
        self.purge(now);
        if !self.r.exists(&h)
            && (!self.r.exists(&q) || self.r.lindex(&q, 0).as_deref() == Some(owner))
        {
            self.r.lpop(&q);
            self.r.zrem(&t, owner);
            for k in self.r.zrange(&t) {
                self.r.zincrby(&t, -o.wait, &k);
            }
            self.r.hset(&h, owner, 1);
            self.r.pexpire(&h, lease);
            return Ok(None);
        }
        if self.r.hexists(&h, owner) {
            if o.non_reentrant {
                return Err(LockError::Reentry);
            }
            self.r.hincrby(&h, owner, 1);
            self.r.pexpire(&h, lease);
            return Ok(None);
        }
        if o.no_queue {
            return Ok(Some(1));
        }
        if self.r.zscore(&t, owner).is_some() {
            return Ok(Some(self.r.pttl(&h).max(0)));
        }
        let last = self.r.lindex(&q, -1);
        let ttl = match last {
            Some(l) if l != owner && self.r.zscore(&t, &l).is_some() => {
                self.r.zscore(&t, &l).expect("checked") - now
            }
            _ => self.r.pttl(&h),
        };
        if self.r.zadd(&t, ttl + o.wait + now, owner) {
            self.r.rpush(&q, owner);
        }
        Ok(Some(ttl))
    }
    /// fair_acquire_failed.lua (and whether the owner was in the line).
    fn cancel(&mut self, owner: &str, wait: i64) -> bool {
        let (q, t) = (self.queue(), self.timeout());
        let line: Vec<String> = self.r.list(&q).into_iter().collect();
        let mut i = 0;
        while i < line.len() && line[i] != owner {
            i += 1;
        }
        for w in line.iter().skip(i + 1) {
            self.r.zincrby(&t, -wait, w);
        }
        let was = self.r.zscore(&t, owner).is_some() || line.iter().any(|w| w == owner);
        self.r.zrem(&t, owner);
        self.r.lrem(&q, owner);
        was
    }
    /// fair_unlock.lua, but for a missing lock (§13.5).
    fn unlock(&mut self, lease: i64, owner: &str, req: Option<(&str, i64)>) -> Option<i64> {
        let now = self.r.now;
        let latch = req.map(|(id, ttl)| {
            (
                format!("{}:{id}", derived("redisson_unlock_latch", self.name)),
                ttl,
            )
        });
        if let Some((key, _)) = &latch {
            if let Some(v) = self.r.getstr(key) {
                return Some(v);
            }
        }
        self.purge(now);
        let (q, h) = (self.queue(), self.name.to_string());
        let set_latch = |r: &mut Mini, v: i64| {
            if let Some((key, ttl)) = &latch {
                r.set_px(key, v, *ttl);
            }
        };
        if !self.r.exists(&h) {
            if let Some(next) = self.r.lindex(&q, 0) {
                let c = self.channel(&next);
                self.r.publish(c, "0");
            }
            // The script latches and replies 1 here; the module says the
            // caller held nothing, as for a lock held by others.
            return None;
        }
        if !self.r.hexists(&h, owner) {
            return None;
        }
        if self.r.hincrby(&h, owner, -1) > 0 {
            self.r.pexpire(&h, lease);
            set_latch(self.r, 0);
            return Some(0);
        }
        self.r.del(&h);
        set_latch(self.r, 1);
        if let Some(next) = self.r.lindex(&q, 0) {
            let c = self.channel(&next);
            self.r.publish(c, "0");
        }
        Some(1)
    }
    /// fair_force_unlock.lua.
    fn force(&mut self) -> bool {
        let now = self.r.now;
        self.purge(now);
        let h = self.name.to_string();
        if self.r.del(&h) {
            if let Some(next) = self.r.lindex(&self.queue(), 0) {
                let c = self.channel(&next);
                self.r.publish(c, "0");
            }
            return true;
        }
        false
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Acquire(usize, usize, i64, FairOptions),
    Cancel(usize, usize, i64),
    Unlock(usize, usize, i64, Option<(usize, i64)>),
    Force(usize),
    /// Another client deletes the lock's hash.
    Del(usize),
    Advance(i64),
}

fn random_op(rng: &mut Rng) -> Op {
    let l = rng.below(LOCKS.len());
    let o = rng.below(OWNERS.len());
    let lease = *rng.pick(&[5, 20, 100, 400]);
    let wait = *rng.pick(&[1, 10, 50, 300]);
    match rng.below(20) {
        0..=7 => Op::Acquire(
            l,
            o,
            lease,
            FairOptions {
                no_queue: rng.below(5) == 0,
                non_reentrant: rng.below(4) == 0,
                wait,
            },
        ),
        8..=9 => Op::Cancel(l, o, wait),
        10..=13 => {
            let req = (rng.below(3) == 0).then(|| (rng.below(REQUESTS.len()), 30));
            Op::Unlock(l, o, lease, req)
        }
        14 => Op::Force(l),
        15 => Op::Del(l),
        _ => Op::Advance(rng.pause()),
    }
}

/// A step's reply, as the scripts give it.
type Reply = Result<Option<i64>, LockError>;

fn run_machine(s: &mut MemStore, op: Op) -> Reply {
    let names = |l: usize| LockNames::new(LOCKS[l].as_bytes()).expect("a valid name");
    let owner = |o: usize| OWNERS[o].as_bytes();
    Ok(match op {
        Op::Acquire(l, o, lease, opts) => {
            fair::acquire(s, &names(l), owner(o), lease, opts)?.reply()
        }
        Op::Cancel(l, o, wait) => Some(fair::cancel(s, &names(l), owner(o), wait)?.into()),
        Op::Unlock(l, o, lease, req) => {
            let request = req.map(|(r, ttl)| Request {
                id: REQUESTS[r].as_bytes(),
                ttl,
            });
            fair::unlock(s, &names(l), owner(o), lease, request)?.reply()
        }
        Op::Force(l) => Some(fair::force_unlock(s, &names(l))?.into()),
        Op::Del(l) => {
            Store::del(s, LOCKS[l].as_bytes());
            None
        }
        Op::Advance(ms) => {
            s.advance(ms);
            None
        }
    })
}

fn scripts(r: &mut Mini, l: usize) -> Scripts<'_> {
    Scripts { r, name: LOCKS[l] }
}

fn run_model(r: &mut Mini, op: Op) -> Reply {
    Ok(match op {
        Op::Acquire(l, o, lease, opts) => scripts(r, l).lock(lease, OWNERS[o], opts)?,
        Op::Cancel(l, o, wait) => Some(scripts(r, l).cancel(OWNERS[o], wait).into()),
        Op::Unlock(l, o, lease, req) => {
            scripts(r, l).unlock(lease, OWNERS[o], req.map(|(i, ttl)| (REQUESTS[i], ttl)))
        }
        Op::Force(l) => Some(scripts(r, l).force().into()),
        Op::Del(l) => {
            r.del(LOCKS[l]);
            None
        }
        Op::Advance(ms) => {
            r.now += ms;
            None
        }
    })
}

#[test]
fn the_fair_lock_matches_its_scripts_on_random_operations() {
    const SEEDS: u64 = 24;
    const STEPS: usize = 1_500;
    const START: i64 = 1_000_000;
    let (mut queued, mut purged_heads, mut acquired, mut replays) = (0, 0, 0, 0);
    for seed in 0..SEEDS {
        let mut rng = Rng::new(0xFA1E_0000 + seed);
        let ops: Vec<Op> = (0..STEPS).map(|_| random_op(&mut rng)).collect();
        let mut store = MemStore::new(START);
        let mut mini = Mini {
            now: START,
            ..Default::default()
        };
        for (step, &op) in ops.iter().enumerate() {
            let got = run_machine(&mut store, op);
            let want = run_model(&mut mini, op);
            let ctx = || {
                format!(
                    "seed {seed} step {step}: {:?}",
                    &ops[step.saturating_sub(7)..=step]
                )
            };
            assert_eq!(got, want, "reply, {}", ctx());
            let events = std::mem::take(&mut mini.events);
            let got_events = store.take_events();
            purged_heads += got_events.iter().filter(|(e, _)| *e == "lpop").count();
            assert_eq!(got_events, events, "events, {}", ctx());
            assert_eq!(store.published, mini.published, "messages, {}", ctx());
            store.published.clear();
            mini.published.clear();
            assert_eq!(store.dump(), mini.dump(), "keyspace, {}", ctx());
            match (op, got) {
                (Op::Acquire(..), Ok(None)) => acquired += 1,
                (Op::Acquire(_, _, _, o), Ok(Some(_))) if !o.no_queue => queued += 1,
                (Op::Unlock(_, _, _, Some(_)), Ok(_)) => replays += 1,
                _ => {}
            }
        }
    }
    let steps = SEEDS as usize * STEPS;
    for (case, n) in [
        ("acquired", acquired),
        ("queued", queued),
        ("lpops", purged_heads),
        ("latched unlocks", replays),
    ] {
        assert!(n > steps / 100, "only {n} {case}");
    }
}

fn names(name: &str) -> LockNames<'_> {
    LockNames::new(name.as_bytes()).expect("a valid name")
}

const WAIT: FairOptions = FairOptions {
    no_queue: false,
    non_reentrant: false,
    wait: 1_000,
};

#[test]
fn waiters_queue_behind_the_holder_with_the_scripts_deadlines() {
    let mut s = MemStore::new(10_000);
    let n = names("orders");
    let got = fair::acquire(&mut s, &n, b"a:1", 500, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Granted(Granted {
            reentry: false,
            token: None,
        })
    );
    // The first waiter: ttl = the lock's PTTL, deadline = ttl + wait + now.
    let got = fair::acquire(&mut s, &n, b"b:1", 500, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Queued {
            ttl: 500,
            joined: true
        }
    );
    assert_eq!(
        s.zscore(b"redisson_lock_timeout:{orders}", b"b:1"),
        Some(11_500)
    );
    // The second: behind the first's deadline.
    let got = fair::acquire(&mut s, &n, b"c:1", 500, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Queued {
            ttl: 1_500,
            joined: true
        }
    );
    assert_eq!(
        s.zscore(b"redisson_lock_timeout:{orders}", b"c:1"),
        Some(12_500)
    );
    // Asking again while queued: the lock's PTTL, nothing changes.
    let got = fair::acquire(&mut s, &n, b"c:1", 500, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Queued {
            ttl: 500,
            joined: false
        }
    );
    // The unlock tells the head only, on its own channel.
    let out = fair::unlock(&mut s, &n, b"a:1", 500, None).expect("ok");
    assert_eq!(out.reply(), Some(1));
    assert_eq!(
        s.published,
        [(
            b"redisson_lock__channel:{orders}:b:1".to_vec(),
            b"0".to_vec()
        )]
    );
    // c may not overtake b; b takes it and c's deadline moves down by wait.
    let got = fair::acquire(&mut s, &n, b"c:1", 500, WAIT).expect("ok");
    assert!(matches!(got, FairAttempt::Queued { .. }));
    let got = fair::acquire(&mut s, &n, b"b:1", 500, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Granted(Granted {
            reentry: false,
            token: None,
        })
    );
    assert_eq!(
        s.zscore(b"redisson_lock_timeout:{orders}", b"c:1"),
        Some(11_500)
    );
    assert_eq!(s.lrange(b"redisson_lock_queue:{orders}"), [b"c:1".to_vec()]);
}

#[test]
fn a_stale_last_waiter_gives_a_negative_ttl_stored_unclamped() {
    let mut s = MemStore::new(10_000);
    let n = names("orders");
    let (q, t) = (
        b"redisson_lock_queue:{orders}",
        b"redisson_lock_timeout:{orders}",
    );
    fair::acquire(&mut s, &n, b"a:1", 100_000, WAIT).expect("ok");
    // A live head and a stale last waiter: only heads are ever purged.
    s.rpush(q, b"b:1");
    s.zadd(t, 50_000, b"b:1");
    s.rpush(q, b"c:1");
    s.zadd(t, 9_500, b"c:1");
    let got = fair::acquire(&mut s, &n, b"d:1", 100, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Queued {
            ttl: -500,
            joined: true
        }
    );
    assert_eq!(s.zscore(t, b"d:1"), Some(-500 + 1_000 + 10_000));
    // With the lock gone and a last waiter without deadline: PTTL's -2.
    s.remove(b"orders");
    s.rpush(q, b"e:1");
    let got = fair::acquire(&mut s, &n, b"f:1", 100, WAIT).expect("ok");
    assert_eq!(
        got,
        FairAttempt::Queued {
            ttl: -2,
            joined: true
        }
    );
    assert_eq!(s.zscore(t, b"f:1"), Some(-2 + 1_000 + 10_000));
}

#[test]
fn unlocking_a_missing_lock_replies_nil_latches_nothing_and_still_tells_the_head() {
    let mut s = MemStore::new(10_000);
    let n = names("orders");
    s.rpush(b"redisson_lock_queue:{orders}", b"w:1");
    s.zadd(b"redisson_lock_timeout:{orders}", 99_999, b"w:1");
    let request = Request {
        id: b"r1",
        ttl: 5_000,
    };
    let out = fair::unlock(&mut s, &n, b"anyone", 100, Some(request)).expect("ok");
    assert_eq!(
        out,
        Unlocked::Ran(::rwlock::engine::hold::Release::NotLocked)
    );
    assert_eq!(out.reply(), None);
    assert_eq!(s.get(&n.latch_key(b"r1")), None, "no latch");
    assert_eq!(
        s.published,
        [(
            b"redisson_lock__channel:{orders}:w:1".to_vec(),
            b"0".to_vec()
        )]
    );
    // The resend runs again and says the same, telling the head again.
    let again = fair::unlock(&mut s, &n, b"anyone", 100, Some(request)).expect("ok");
    assert_eq!(again.reply(), None);
    assert_eq!(s.published.len(), 2);
}

#[test]
fn bad_keys_are_refused_before_anything_changes() {
    let n = names("orders");
    for key in [
        &b"redisson_lock_queue:{orders}"[..],
        b"redisson_lock_timeout:{orders}",
        b"orders",
    ] {
        let mut s = MemStore::new(10_000);
        s.put(key, Value::Str(b"x".to_vec()), None);
        let before = s.dump();
        assert_eq!(
            fair::acquire(&mut s, &n, b"a:1", 100, WAIT),
            Err(LockError::WrongType)
        );
        assert_eq!(
            fair::unlock(&mut s, &n, b"a:1", 100, None),
            Err(LockError::WrongType)
        );
        assert_eq!(fair::force_unlock(&mut s, &n), Err(LockError::WrongType));
        assert_eq!(s.dump(), before);
        assert!(s.take_events().is_empty());
    }
    // A corrupt count: refused before the purge.
    let mut s = MemStore::new(10_000);
    s.put(b"orders", Value::hash(&[(b"a:1", b"x")]), None);
    s.rpush(b"redisson_lock_queue:{orders}", b"w:1");
    s.zadd(b"redisson_lock_timeout:{orders}", 1, b"w:1");
    s.take_events();
    let before = s.dump();
    assert_eq!(
        fair::acquire(&mut s, &n, b"a:1", 100, WAIT),
        Err(LockError::Corrupt)
    );
    assert_eq!(s.dump(), before);
}

/// The acquisition latch of request `r1` on `orders`.
const REQUEST_LATCH: &[u8] = b"redisson_lock_request_latch:{orders}:r1";

/// `FAIRLOCK.ACQUIRE … REQUEST r1 ttl` as the command runs it: the latch
/// read first (a replay changes nothing), then the acquisition recording
/// its grant. None for a replay.
fn acquire_once(
    s: &mut MemStore,
    n: &LockNames,
    owner: &[u8],
    options: FairOptions,
    ttl: i64,
) -> Result<Option<FairAttempt>, LockError> {
    use ::rwlock::engine::hold::{grant_latch, Granting};
    let request = Request { id: b"r1", ttl };
    match grant_latch(s, n, Some(request))? {
        Granting::Replay(value) => {
            assert_eq!(value, 0, "a fair grant records no token");
            Ok(None)
        }
        Granting::Run(latch) => {
            fair::acquire_latched(s, n, owner, 60_000, options, latch.as_ref()).map(Some)
        }
    }
}

fn request_latch(s: &mut MemStore) -> Option<(Value, Option<i64>)> {
    s.dump()
        .into_iter()
        .find(|(k, _, _)| k == REQUEST_LATCH)
        .map(|(_, v, at)| (v, at))
}

#[test]
fn an_idempotent_acquisition_records_its_grant_and_a_retry_changes_nothing() {
    for options in [
        WAIT,
        FairOptions {
            no_queue: true,
            ..WAIT
        },
        FairOptions {
            non_reentrant: true,
            ..WAIT
        },
    ] {
        let mut s = MemStore::new(10_000);
        let n = names("orders");
        // A Redisson waiter in the line, stale: the first call purges it.
        s.rpush(b"redisson_lock_queue:{orders}", b"x:1");
        s.zadd(b"redisson_lock_timeout:{orders}", 9_000, b"x:1");
        let got = acquire_once(&mut s, &n, b"a:1", options, 5_000);
        assert_eq!(
            got,
            Ok(Some(FairAttempt::Granted(Granted {
                reentry: false,
                token: None,
            })))
        );
        let latch = Some((Value::Str(b"0".to_vec()), Some(15_000)));
        assert_eq!(request_latch(&mut s), latch, "{options:?}");
        s.advance(100);
        s.take_events();
        let before = s.dump();
        // The retry, even by another owner: nil, no hold, no TTL, nothing.
        assert_eq!(acquire_once(&mut s, &n, b"a:1", options, 5_000), Ok(None));
        assert_eq!(acquire_once(&mut s, &n, b"b:1", options, 5_000), Ok(None));
        assert_eq!(s.dump(), before, "{options:?}");
        assert!(s.take_events().is_empty());
        // Once the latch is gone a retry is a new acquisition.
        s.advance(5_000);
        let again = acquire_once(&mut s, &n, b"a:1", options, 5_000);
        if options.non_reentrant {
            assert_eq!(again, Err(LockError::Reentry));
        } else {
            assert_eq!(
                again,
                Ok(Some(FairAttempt::Granted(Granted {
                    reentry: true,
                    token: None,
                })))
            );
        }
    }
}

#[test]
fn a_refused_or_queued_idempotent_acquisition_records_nothing() {
    let mut s = MemStore::new(10_000);
    let n = names("orders");
    fair::acquire(&mut s, &n, b"h:1", 10_000, WAIT).expect("held by h");
    let no_queue = FairOptions {
        no_queue: true,
        ..WAIT
    };
    assert_eq!(
        acquire_once(&mut s, &n, b"a:1", no_queue, 5_000),
        Ok(Some(FairAttempt::Refused))
    );
    assert_eq!(request_latch(&mut s), None);
    let queued = acquire_once(&mut s, &n, b"a:1", WAIT, 5_000);
    assert_eq!(
        queued,
        Ok(Some(FairAttempt::Queued {
            ttl: 10_000,
            joined: true
        }))
    );
    assert_eq!(request_latch(&mut s), None);
    // The retry after the holder left acquires as the head, and records.
    fair::unlock(&mut s, &n, b"h:1", 500, None).expect("unlock");
    s.advance(200);
    assert_eq!(
        acquire_once(&mut s, &n, b"a:1", WAIT, 5_000),
        Ok(Some(FairAttempt::Granted(Granted {
            reentry: false,
            token: None,
        })))
    );
    assert_eq!(
        request_latch(&mut s),
        Some((Value::Str(b"0".to_vec()), Some(15_200)))
    );
    // A latch that is not an integer, or of another type: an error, nothing
    // changed.
    for bad in [Value::Str(b"x".to_vec()), Value::hash(&[(b"f", b"1")])] {
        s.put(REQUEST_LATCH, bad.clone(), None);
        let before = s.dump();
        let got = acquire_once(&mut s, &n, b"b:1", WAIT, 5_000);
        assert!(
            matches!(got, Err(LockError::BadLatch | LockError::WrongType)),
            "{got:?}"
        );
        assert_eq!(s.dump(), before);
    }
}

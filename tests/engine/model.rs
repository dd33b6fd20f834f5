//! Model-based test: random operations run on the lock machine (over the
//! in-memory store) and on a small reference model written straight from the
//! the contract's prose (docs/design.md), comparing replies, messages and the whole keyspace each step.

use std::collections::BTreeMap;

use crate::memstore::{MemStore, Value};
use ::rwlock::engine::hold::Attempt;
use ::rwlock::engine::names::{write_field, LockNames};
use ::rwlock::engine::rwlock::{self, Mode, Request, Unlocked};

/// The tests' seeded generator (the testkit's SplitMix64, so a failing seed
/// replays), with the draws of the model-based tests.
pub struct Rng(testkit::Rng);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(testkit::Rng(seed))
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        self.0.pick(items)
    }
    /// A lease short enough that time passing ends it.
    pub fn lease(&mut self) -> i64 {
        *self.pick(&[1, 2, 5, 20, 100, 1_000])
    }
    /// A random operation's lock and owner (indexes into [`LOCKS`] and
    /// [`OWNERS`]) and lease.
    pub fn target(&mut self) -> (usize, usize, i64) {
        let lock = self.below(LOCKS.len());
        let owner = self.below(OWNERS.len());
        (lock, owner, self.lease())
    }
    /// How far a random step moves the clock.
    pub fn pause(&mut self) -> i64 {
        *self.pick(&[0, 1, 2, 5, 20, 100, 500])
    }
}

#[derive(Debug, Clone, Default)]
struct ModelLock {
    write: bool,
    deadline: Option<i64>,
    readers: BTreeMap<String, i64>,
    writers: BTreeMap<String, i64>,
}

/// The reference: locks as owners and counts, read leases as deadlines.
#[derive(Debug, Default)]
struct Model {
    now: i64,
    locks: BTreeMap<String, ModelLock>,
    /// (lock, owner, n) -> deadline of the n-th read acquisition.
    leases: BTreeMap<(String, String, i64), i64>,
    /// (lock, request id) -> (stored reply, deadline).
    latches: BTreeMap<(String, String), (i64, i64)>,
    published: Vec<(String, &'static str)>,
}

#[derive(Debug, Clone)]
enum Op {
    Read(usize, usize, i64),
    Write(usize, usize, i64),
    Unlock(usize, usize, Mode, i64, Option<usize>),
    Renew(usize, usize, i64),
    Force(usize, Option<Mode>),
    Advance(i64),
}

/// The locks, owners and unlock requests of random operations (the plain
/// lock's model, lock_model.rs, uses them too).
pub(super) const LOCKS: [&str; 2] = ["L", "{t}:a"];
pub(super) const OWNERS: [&str; 3] = ["u1:1", "u1:2", "u2:7"];
pub(super) const REQUESTS: [&str; 2] = ["r1", "r2"];

#[derive(Debug, PartialEq)]
enum Reply {
    Nil,
    Int(i64),
    /// An acquisition's nil, with whether the owner already held the lock.
    Entered {
        reentry: bool,
    },
    /// An idempotent unlock's retry: the remembered reply.
    Replayed(i64),
}

impl Model {
    fn live_lock(&mut self, name: &str) -> Option<&mut ModelLock> {
        let now = self.now;
        if self
            .locks
            .get(name)
            .and_then(|l| l.deadline)
            .is_some_and(|d| now > d)
        {
            self.locks.remove(name);
        }
        self.locks.get_mut(name)
    }

    fn expire(&mut self) {
        let now = self.now;
        for name in LOCKS {
            self.live_lock(name);
        }
        self.leases.retain(|_, d| now <= *d);
        self.latches.retain(|_, (_, d)| now <= *d);
    }

    fn pttl_of(&self, deadline: Option<i64>) -> i64 {
        deadline.map_or(-1, |d| (d - self.now).max(0))
    }

    fn set_deadline(&mut self, name: &str, ms: i64) {
        if ms <= 0 {
            self.locks.remove(name);
        } else if let Some(l) = self.locks.get_mut(name) {
            l.deadline = Some(self.now + ms);
        }
    }

    fn read(&mut self, name: &str, owner: &str, lease: i64) -> Reply {
        let now = self.now;
        let Some(l) = self.live_lock(name) else {
            let mut l = ModelLock {
                deadline: Some(now + lease),
                ..Default::default()
            };
            l.readers.insert(owner.into(), 1);
            self.locks.insert(name.into(), l);
            self.leases
                .insert((name.into(), owner.into(), 1), now + lease);
            return Reply::Entered { reentry: false };
        };
        if l.write && !l.writers.contains_key(owner) {
            let d = l.deadline;
            return Reply::Int(self.pttl_of(d));
        }
        // The owner reads again, or reads under its own write lock.
        let reentry = l.write || l.readers.contains_key(owner);
        let n = *l
            .readers
            .entry(owner.into())
            .and_modify(|c| *c += 1)
            .or_insert(1);
        let d = l.deadline;
        self.leases
            .insert((name.into(), owner.into(), n), now + lease);
        let ms = self.pttl_of(d).max(lease);
        self.set_deadline(name, ms);
        Reply::Entered { reentry }
    }

    fn write(&mut self, name: &str, owner: &str, lease: i64) -> Reply {
        let now = self.now;
        let Some(l) = self.live_lock(name) else {
            let mut l = ModelLock {
                write: true,
                deadline: Some(now + lease),
                ..Default::default()
            };
            l.writers.insert(owner.into(), 1);
            self.locks.insert(name.into(), l);
            return Reply::Entered { reentry: false };
        };
        let d = l.deadline;
        if !(l.write && l.writers.contains_key(owner)) {
            return Reply::Int(self.pttl_of(d));
        }
        *l.writers.get_mut(owner).expect("writer") += 1;
        let ms = self.pttl_of(d) + lease;
        self.set_deadline(name, ms);
        Reply::Entered { reentry: true }
    }

    /// Returns (reply, latch value) as contract §3.3 defines them.
    fn unlock_read(&mut self, name: &str, owner: &str) -> (Reply, Option<i64>) {
        let Some(l) = self.live_lock(name) else {
            self.published.push((name.into(), "0"));
            return (Reply::Nil, None);
        };
        let Some(count) = l.readers.get(owner).copied() else {
            return (Reply::Nil, None);
        };
        if count == 1 {
            l.readers.remove(owner);
        } else {
            l.readers.insert(owner.into(), count - 1);
        }
        let write = l.write;
        let holders_left = !l.readers.is_empty() || !l.writers.is_empty();
        let readers: Vec<(String, i64)> = l.readers.iter().map(|(o, c)| (o.clone(), *c)).collect();
        self.leases.remove(&(name.into(), owner.into(), count));
        if holders_left {
            let longest = readers
                .iter()
                .flat_map(|(o, c)| (1..=*c).map(move |i| (o.clone(), i)))
                .filter_map(|(o, i)| self.leases.get(&(name.into(), o, i)))
                .map(|d| d - self.now)
                .max()
                .unwrap_or(-3);
            if longest > 0 {
                self.set_deadline(name, longest);
                return (Reply::Int(0), Some(0));
            }
            if write {
                return (Reply::Int(0), Some(0));
            }
        }
        self.locks.remove(name);
        self.published.push((name.into(), "0"));
        (Reply::Int(1), Some(1))
    }

    fn unlock_write(&mut self, name: &str, owner: &str, lease: i64) -> (Reply, Option<i64>) {
        let Some(l) = self.live_lock(name) else {
            self.published.push((name.into(), "1"));
            return (Reply::Nil, None);
        };
        let Some(count) = l.writers.get(owner).copied().filter(|_| l.write) else {
            return (Reply::Nil, None);
        };
        if count > 1 {
            l.writers.insert(owner.into(), count - 1);
            self.set_deadline(name, lease);
            return (Reply::Int(0), Some(0));
        }
        l.writers.remove(owner);
        if l.readers.is_empty() && l.writers.is_empty() {
            self.locks.remove(name);
            self.published.push((name.into(), "1"));
        } else {
            l.write = false;
        }
        (Reply::Int(1), Some(1))
    }

    fn unlock(
        &mut self,
        name: &str,
        owner: &str,
        mode: Mode,
        lease: i64,
        req: Option<(&str, i64)>,
    ) -> Reply {
        if let Some((id, _)) = req {
            if let Some((v, _)) = self.latches.get(&(name.into(), id.into())) {
                return Reply::Replayed(*v);
            }
        }
        let (reply, latch) = match mode {
            Mode::Read => self.unlock_read(name, owner),
            Mode::Write => self.unlock_write(name, owner, lease),
        };
        if let (Some((id, ttl)), Some(v)) = (req, latch) {
            self.latches
                .insert((name.into(), id.into()), (v, self.now + ttl));
        }
        reply
    }

    fn renew(&mut self, name: &str, owner: &str, lease: i64) -> Reply {
        let now = self.now;
        let Some(l) = self.live_lock(name) else {
            return Reply::Int(0);
        };
        let reads = l.readers.get(owner).copied();
        if reads.is_none() && !l.writers.contains_key(owner) {
            return Reply::Int(0);
        }
        l.deadline = Some(now + lease);
        for i in 1..=reads.unwrap_or(0) {
            if let Some(d) = self.leases.get_mut(&(name.into(), owner.into(), i)) {
                *d = now + lease;
            }
        }
        Reply::Int(1)
    }

    fn force(&mut self, name: &str, only: Option<Mode>) -> Reply {
        let Some(l) = self.live_lock(name) else {
            return Reply::Int(0);
        };
        let mode = if l.write { Mode::Write } else { Mode::Read };
        if only.is_some_and(|m| m != mode) {
            return Reply::Int(0);
        }
        let l = self.locks.remove(name).expect("live lock");
        for (owner, count) in l.readers {
            for i in 1..=count {
                self.leases.remove(&(name.into(), owner.clone(), i));
            }
        }
        self.published.push((
            name.into(),
            if only == Some(Mode::Read) { "0" } else { "1" },
        ));
        Reply::Int(1)
    }

    /// The keyspace the model implies, in `MemStore::dump` form.
    fn keyspace(&self) -> Vec<(Vec<u8>, Value, Option<i64>)> {
        let mut out = Vec::new();
        for (name, l) in &self.locks {
            let mut h = BTreeMap::new();
            let mode: &[u8] = if l.write { b"write" } else { b"read" };
            h.insert(b"mode".to_vec(), mode.to_vec());
            for (o, c) in &l.readers {
                h.insert(o.as_bytes().to_vec(), c.to_string().into_bytes());
            }
            for (o, c) in &l.writers {
                h.insert(
                    write_field(o.as_bytes()).to_vec(),
                    c.to_string().into_bytes(),
                );
            }
            out.push((name.as_bytes().to_vec(), Value::Hash(h), l.deadline));
        }
        for ((name, owner, i), d) in &self.leases {
            let names = LockNames::new(name.as_bytes()).expect("name");
            out.push((
                names.timeout_key(owner.as_bytes(), *i),
                Value::Str(b"1".to_vec()),
                Some(*d),
            ));
        }
        for ((name, id), (v, d)) in &self.latches {
            let names = LockNames::new(name.as_bytes()).expect("name");
            out.push((
                names.latch_key(id.as_bytes()),
                Value::Str(v.to_string().into_bytes()),
                Some(*d),
            ));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

fn random_op(rng: &mut Rng) -> Op {
    let (lock, owner, lease) = rng.target();
    match rng.below(16) {
        0..=3 => Op::Read(lock, owner, lease),
        4..=6 => Op::Write(lock, owner, lease),
        7..=10 => {
            let mode = if rng.below(2) == 0 {
                Mode::Read
            } else {
                Mode::Write
            };
            let req = (rng.below(3) == 0).then(|| rng.below(REQUESTS.len()));
            Op::Unlock(lock, owner, mode, lease, req)
        }
        11 => Op::Renew(lock, owner, lease),
        12 => Op::Force(
            lock,
            [None, Some(Mode::Read), Some(Mode::Write)][rng.below(3)],
        ),
        _ => Op::Advance(rng.pause()),
    }
}

fn run_machine(s: &mut MemStore, op: &Op) -> Reply {
    let names = |i: usize| LockNames::new(LOCKS[i].as_bytes()).expect("name");
    let acquire = |r: Result<Attempt, _>| match r.expect("no error") {
        Attempt::Granted(granted) => Reply::Entered {
            reentry: granted.reentry,
        },
        Attempt::Refused { pttl } => Reply::Int(pttl),
    };
    match *op {
        Op::Read(l, o, lease) => {
            acquire(rwlock::read_lock(s, &names(l), OWNERS[o].as_bytes(), lease))
        }
        Op::Write(l, o, lease) => acquire(rwlock::write_lock(
            s,
            &names(l),
            OWNERS[o].as_bytes(),
            lease,
            false,
        )),
        Op::Unlock(l, o, mode, lease, req) => {
            let req = req.map(|r| Request {
                id: REQUESTS[r].as_bytes(),
                ttl: lease,
            });
            match rwlock::unlock(s, &names(l), OWNERS[o].as_bytes(), mode, lease, req)
                .expect("no error")
            {
                Unlocked::Replayed(v) => Reply::Replayed(v),
                ran => ran.reply().map_or(Reply::Nil, Reply::Int),
            }
        }
        Op::Renew(l, o, lease) => Reply::Int(
            rwlock::renew(s, &names(l), OWNERS[o].as_bytes(), lease)
                .expect("no error")
                .into(),
        ),
        Op::Force(l, only) => Reply::Int(
            rwlock::force_unlock(s, &names(l), only)
                .expect("no error")
                .into(),
        ),
        Op::Advance(ms) => {
            s.advance(ms);
            Reply::Nil
        }
    }
}

fn run_model(m: &mut Model, op: &Op) -> Reply {
    m.expire();
    match *op {
        Op::Read(l, o, lease) => m.read(LOCKS[l], OWNERS[o], lease),
        Op::Write(l, o, lease) => m.write(LOCKS[l], OWNERS[o], lease),
        Op::Unlock(l, o, mode, lease, req) => m.unlock(
            LOCKS[l],
            OWNERS[o],
            mode,
            lease,
            req.map(|r| (REQUESTS[r], lease)),
        ),
        Op::Renew(l, o, lease) => m.renew(LOCKS[l], OWNERS[o], lease),
        Op::Force(l, only) => m.force(LOCKS[l], only),
        Op::Advance(ms) => {
            m.now += ms;
            Reply::Nil
        }
    }
}

#[test]
fn machine_matches_reference_model_on_random_operations() {
    const SEEDS: u64 = 24;
    const STEPS: usize = 1_000;
    let mut steps = 0;
    let mut acquired = 0;
    let mut reentries = 0;
    let mut replays = 0;
    // Every seed twice: reading every lease key, and with lease indexes kept
    // from the first lease on.
    for (seed, index_from) in (0..SEEDS).flat_map(|s| [(s, None), (s, Some(1))]) {
        let mut rng = Rng::new(seed);
        let mut store = MemStore::new(1_000_000);
        store.index_from = index_from;
        let mut model = Model {
            now: 1_000_000,
            ..Default::default()
        };
        let mut history = Vec::new();
        for step in 0..STEPS {
            let op = random_op(&mut rng);
            history.push(op.clone());
            let got = run_machine(&mut store, &op);
            let want = run_model(&mut model, &op);
            let ctx = || {
                format!(
                    "seed {seed} (index from {index_from:?}) step {step}: {:?}",
                    &history[history.len().saturating_sub(8)..]
                )
            };
            assert_eq!(got, want, "reply, {}", ctx());
            model.expire();
            assert_eq!(store.dump(), model.keyspace(), "keyspace, {}", ctx());
            let published: Vec<(String, &str)> = store
                .published
                .drain(..)
                .map(|(c, m)| {
                    let c = String::from_utf8(c).expect("utf8");
                    let name = c.strip_prefix("redisson_rwlock:").expect("channel prefix");
                    let name = if name.starts_with("{L}") {
                        "L".to_string()
                    } else {
                        name.to_string()
                    };
                    (name, if m == b"0" { "0" } else { "1" })
                })
                .collect();
            assert_eq!(
                published,
                std::mem::take(&mut model.published),
                "messages, {}",
                ctx()
            );
            match got {
                Reply::Entered { reentry } => {
                    acquired += 1;
                    reentries += usize::from(reentry);
                }
                Reply::Replayed(_) => replays += 1,
                Reply::Nil | Reply::Int(_) => {}
            }
            steps += 1;
        }
    }
    assert_eq!(steps, 2 * SEEDS as usize * STEPS);
    // The mix must actually exercise acquisitions, not only refusals.
    assert!(
        acquired > steps / 10,
        "only {acquired} acquisitions in {steps} steps"
    );
    assert!(
        reentries > acquired / 20 && reentries < acquired,
        "{reentries} re-entries in {acquired} acquisitions"
    );
    assert!(
        replays > steps / 200,
        "only {replays} unlock retries replayed"
    );
}

/// A write another client makes to a lock's keys behind the machine's back.
#[derive(Debug, Clone)]
enum Foreign {
    /// DEL of a lease key.
    DropLease(usize, usize, i64),
    /// SET of a lease key with this TTL (`None`: no TTL).
    SetLease(usize, usize, i64, Option<i64>),
    /// HSET of a reader's count, as a script acquiring or releasing does.
    SetCount(usize, usize, i64),
}

fn apply_foreign(s: &mut MemStore, f: &Foreign) {
    let names = |i: usize| LockNames::new(LOCKS[i].as_bytes()).expect("name");
    match *f {
        Foreign::DropLease(l, o, n) => {
            s.remove(&names(l).timeout_key(OWNERS[o].as_bytes(), n));
        }
        Foreign::SetLease(l, o, n, ttl) => {
            let deadline = ttl.map(|ms| s.now + ms);
            let key = names(l).timeout_key(OWNERS[o].as_bytes(), n);
            s.put(&key, Value::Str(b"1".to_vec()), deadline);
        }
        Foreign::SetCount(l, o, n) => {
            let hash = names(l).hash().to_vec();
            let dump = s.dump();
            if let Some((_, Value::Hash(mut h), at)) = dump.into_iter().find(|(k, _, _)| *k == hash)
            {
                h.insert(OWNERS[o].as_bytes().to_vec(), n.to_string().into_bytes());
                s.put(&hash, Value::Hash(h), at);
            }
        }
    }
}

/// Any reply or error of the machine, for comparing two stores.
fn run_any(s: &mut MemStore, op: &Op) -> String {
    let names = |i: usize| LockNames::new(LOCKS[i].as_bytes()).expect("name");
    match *op {
        Op::Read(l, o, lease) => {
            format!(
                "{:?}",
                rwlock::read_lock(s, &names(l), OWNERS[o].as_bytes(), lease)
            )
        }
        Op::Write(l, o, lease) => {
            format!(
                "{:?}",
                rwlock::write_lock(s, &names(l), OWNERS[o].as_bytes(), lease, false)
            )
        }
        Op::Unlock(l, o, mode, lease, req) => {
            let req = req.map(|r| Request {
                id: REQUESTS[r].as_bytes(),
                ttl: lease,
            });
            let names = names(l);
            format!(
                "{:?}",
                rwlock::unlock(s, &names, OWNERS[o].as_bytes(), mode, lease, req)
            )
        }
        Op::Renew(l, o, lease) => {
            format!(
                "{:?}",
                rwlock::renew(s, &names(l), OWNERS[o].as_bytes(), lease)
            )
        }
        Op::Force(l, only) => format!("{:?}", rwlock::force_unlock(s, &names(l), only)),
        Op::Advance(ms) => {
            s.advance(ms);
            String::new()
        }
    }
}

/// Lease indexes change no reply, key, deadline, event or message, also when
/// other clients rewrite the lock's keys between commands (the store forgets
/// its indexes then, as the server's keyspace events make it).
#[test]
fn lease_indexes_change_nothing_even_with_foreign_writes() {
    const SEEDS: u64 = 40;
    const STEPS: usize = 2_000;
    let mut used = 0;
    for seed in 0..SEEDS {
        let mut rng = Rng::new(0x1DE7 + seed);
        let mut plain = MemStore::new(1_000_000);
        let mut indexed = MemStore::new(1_000_000);
        indexed.index_from = Some(1 + rng.below(3));
        for step in 0..STEPS {
            if rng.below(25) == 0 {
                let (l, o) = (rng.below(LOCKS.len()), rng.below(OWNERS.len()));
                let n = 1 + rng.below(3) as i64;
                let f = match rng.below(3) {
                    0 => Foreign::DropLease(l, o, n),
                    1 => Foreign::SetLease(l, o, n, [None, Some(5), Some(5_000)][rng.below(3)]),
                    _ => Foreign::SetCount(l, o, n),
                };
                apply_foreign(&mut plain, &f);
                apply_foreign(&mut indexed, &f);
                continue;
            }
            // Reads and unlocks dominate: indexes need several holds.
            let op = match rng.below(4) {
                0 => Op::Read(rng.below(LOCKS.len()), rng.below(OWNERS.len()), 1_000),
                _ => random_op(&mut rng),
            };
            let want = run_any(&mut plain, &op);
            let got = run_any(&mut indexed, &op);
            let ctx = format!("seed {seed} step {step}: {op:?}");
            assert_eq!(got, want, "reply, {ctx}");
            assert_eq!(indexed.dump(), plain.dump(), "keyspace, {ctx}");
            assert_eq!(indexed.take_events(), plain.take_events(), "events, {ctx}");
            assert_eq!(indexed.published, plain.published, "messages, {ctx}");
            used += usize::from(!indexed.indexes().is_empty());
        }
        assert!(plain.indexes().is_empty());
    }
    assert!(
        used > (SEEDS as usize * STEPS) / 4,
        "an index was kept in only {used} steps"
    );
}

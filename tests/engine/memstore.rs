//! An in-memory [`Store`] with a simulated clock, recording the keyspace
//! events and messages a real server would emit.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use ::rwlock::engine::index::LeaseIndex;
use ::rwlock::engine::permit::Permits;
use ::rwlock::engine::store::{
    Fields, KeyKind, Line, LineKind, Store, PTTL_MISSING, PTTL_PERSISTENT,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Str(Vec<u8>),
    /// A key of a type no machine reads or writes.
    List,
    /// A fair lock's line: waiters in order.
    Queue(VecDeque<Vec<u8>>),
    /// A fair lock's deadlines: member → score.
    Zset(BTreeMap<Vec<u8>, i64>),
}

impl Value {
    /// A hash with these fields: a lock the machine did not make (a corrupt
    /// one, or one without TTL), as a test or another client writes it.
    pub fn hash(fields: &[(&[u8], &[u8])]) -> Value {
        Value::Hash(
            fields
                .iter()
                .map(|&(f, v)| (f.to_vec(), v.to_vec()))
                .collect(),
        )
    }
}

#[derive(Debug, Clone, Default)]
pub struct MemStore {
    pub now: i64,
    entries: HashMap<Vec<u8>, (Value, Option<i64>)>,
    /// `(event, key)` in the order a server would notify them.
    pub events: Vec<(&'static str, Vec<u8>)>,
    /// `(channel, message)` in publishing order.
    pub published: Vec<(Vec<u8>, Vec<u8>)>,
    /// Keeps lease indexes for locks with at least this many leases.
    pub index_from: Option<usize>,
    indexes: HashMap<Vec<u8>, LeaseIndex>,
    /// The token gap after a promotion ([`MemStore::promote`]), and the
    /// counters that issued a token since.
    gap: i64,
    advanced: HashSet<Vec<u8>>,
}

impl MemStore {
    pub fn new(now: i64) -> Self {
        MemStore {
            now,
            ..Default::default()
        }
    }

    /// This store's node was promoted to master: each counter's next token
    /// jumps by `gap`, once.
    pub fn promote(&mut self, gap: i64) {
        self.gap = gap;
        self.advanced.clear();
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
    }

    /// Redis's rule: a key is gone once the clock is past its deadline.
    /// A lock hash expiring takes its index along, as the server's expiry
    /// event does.
    fn live(&mut self, key: &[u8]) -> Option<&mut (Value, Option<i64>)> {
        let now = self.now;
        if matches!(self.entries.get(key), Some((_, Some(at))) if now > *at) {
            self.entries.remove(key);
            self.indexes.remove(key);
        }
        self.entries.get_mut(key)
    }

    fn hash_mut(&mut self, key: &[u8]) -> &mut BTreeMap<Vec<u8>, Vec<u8>> {
        if self.live(key).is_none() {
            self.entries
                .insert(key.to_vec(), (Value::Hash(BTreeMap::new()), None));
        }
        match self.entries.get_mut(key) {
            Some((Value::Hash(h), _)) => h,
            _ => panic!("the lock machine wrote a hash field into a non-hash key"),
        }
    }

    /// Puts a raw value, as a test's setup or another client would: like
    /// the server's keyspace events, it makes every lease index stale.
    pub fn put(&mut self, key: &[u8], value: Value, deadline: Option<i64>) {
        self.indexes.clear();
        self.entries.insert(key.to_vec(), (value, deadline));
    }

    /// Deletes a key as another client would (every lease index forgotten).
    pub fn remove(&mut self, key: &[u8]) {
        self.indexes.clear();
        self.entries.remove(key);
    }

    /// Lease indexes kept now, by lock.
    pub fn indexes(&self) -> &HashMap<Vec<u8>, LeaseIndex> {
        &self.indexes
    }

    /// Every live key with its value and deadline, sorted, for comparisons.
    pub fn dump(&mut self) -> Vec<(Vec<u8>, Value, Option<i64>)> {
        let now = self.now;
        self.entries
            .retain(|_, (_, at)| at.is_none_or(|at| now <= at));
        let mut all: Vec<_> = self
            .entries
            .iter()
            .map(|(k, (v, at))| (k.clone(), v.clone(), *at))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub fn take_events(&mut self) -> Vec<(&'static str, Vec<u8>)> {
        std::mem::take(&mut self.events)
    }

    fn event(&mut self, name: &'static str, key: &[u8]) {
        self.events.push((name, key.to_vec()));
    }
}

impl Store for MemStore {
    fn now_ms(&mut self) -> i64 {
        self.now
    }

    fn kind(&mut self, key: &[u8]) -> KeyKind {
        match self.live(key) {
            None => KeyKind::Missing,
            Some((Value::Hash(_), _)) => KeyKind::Hash,
            Some((Value::Str(_), _)) => KeyKind::String,
            Some((Value::List | Value::Queue(_) | Value::Zset(_), _)) => KeyKind::Other,
        }
    }

    fn hget(&mut self, key: &[u8], field: &[u8]) -> Option<Vec<u8>> {
        match self.live(key) {
            Some((Value::Hash(h), _)) => h.get(field).cloned(),
            _ => None,
        }
    }

    fn hgetall(&mut self, key: &[u8]) -> Fields {
        let mut fields = Fields::default();
        if let Some((Value::Hash(h), _)) = self.live(key) {
            for (f, v) in h.iter() {
                fields.push(f, v);
            }
        }
        fields
    }

    fn hlen(&mut self, key: &[u8]) -> usize {
        match self.live(key) {
            Some((Value::Hash(h), _)) => h.len(),
            _ => 0,
        }
    }

    fn hset(&mut self, key: &[u8], field: &[u8], value: &[u8]) {
        self.hash_mut(key).insert(field.to_vec(), value.to_vec());
        self.event("hset", key);
    }

    fn hincrby(&mut self, key: &[u8], field: &[u8], delta: i64) -> i64 {
        let h = self.hash_mut(key);
        let current: i64 = h
            .get(field)
            .map(|v| String::from_utf8_lossy(v).parse().expect("integer field"))
            .unwrap_or(0);
        let next = current + delta;
        h.insert(field.to_vec(), next.to_string().into_bytes());
        self.event("hincrby", key);
        next
    }

    fn hdel(&mut self, key: &[u8], field: &[u8]) {
        let h = self.hash_mut(key);
        h.remove(field);
        let emptied = h.is_empty();
        self.event("hdel", key);
        if emptied {
            self.entries.remove(key);
            self.event("del", key);
        }
    }

    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        match self.live(key) {
            Some((Value::Str(v), _)) => Some(v.clone()),
            _ => None,
        }
    }

    fn set_until(&mut self, key: &[u8], value: &[u8], deadline: i64) {
        self.entries
            .insert(key.to_vec(), (Value::Str(value.to_vec()), None));
        self.event("set", key);
        self.expire_at(key, deadline);
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.entries
            .insert(key.to_vec(), (Value::Str(value.to_vec()), None));
        self.event("set", key);
    }

    fn incr_by(&mut self, key: &[u8], by: i64) -> i64 {
        let (value, deadline) = match self.live(key) {
            Some((Value::Str(v), at)) => {
                let n = std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.parse::<i64>().ok());
                (n.expect("the machine checked the token") + by, *at)
            }
            _ => (by, None),
        };
        self.advanced.insert(key.to_vec());
        self.entries.insert(
            key.to_vec(),
            (Value::Str(value.to_string().into_bytes()), deadline),
        );
        self.event("incrby", key);
        value
    }

    fn token_gap(&mut self, key: &[u8]) -> i64 {
        if self.advanced.contains(key) {
            0
        } else {
            self.gap
        }
    }

    fn pttl(&mut self, key: &[u8]) -> i64 {
        let now = self.now;
        match self.live(key) {
            None => PTTL_MISSING,
            Some((_, None)) => PTTL_PERSISTENT,
            Some((_, Some(at))) => (*at - now).max(0),
        }
    }

    fn expire_at(&mut self, key: &[u8], deadline: i64) -> bool {
        let now = self.now;
        match self.live(key) {
            None => false,
            Some(_) if deadline <= now => {
                self.entries.remove(key);
                self.event("del", key);
                true
            }
            Some(entry) => {
                entry.1 = Some(deadline);
                self.event("expire", key);
                true
            }
        }
    }

    fn del(&mut self, key: &[u8]) -> bool {
        let existed = self.live(key).is_some();
        if existed {
            self.entries.remove(key);
            self.event("del", key);
        }
        existed
    }

    fn publish(&mut self, channel: &[u8], message: &[u8]) {
        self.published.push((channel.to_vec(), message.to_vec()));
    }

    fn lease_index_from(&mut self) -> Option<usize> {
        self.index_from
    }

    fn with_lease_index<R>(
        &mut self,
        hash: &[u8],
        f: impl FnOnce(&mut LeaseIndex) -> R,
    ) -> Option<R> {
        self.indexes.get_mut(hash).map(f)
    }

    fn keep_lease_index(&mut self, hash: &[u8], index: LeaseIndex) {
        self.indexes.insert(hash.to_vec(), index);
    }

    fn forget_lease_index(&mut self, hash: &[u8]) {
        self.indexes.remove(hash);
    }
}

impl MemStore {
    fn queue_mut(&mut self, key: &[u8]) -> Option<&mut VecDeque<Vec<u8>>> {
        match self.live(key) {
            Some((Value::Queue(q), _)) => Some(q),
            _ => None,
        }
    }

    fn zset_mut(&mut self, key: &[u8]) -> Option<&mut BTreeMap<Vec<u8>, i64>> {
        match self.live(key) {
            Some((Value::Zset(z), _)) => Some(z),
            _ => None,
        }
    }

    /// Deletes a list or zset its last write emptied, as Redis does.
    fn drop_if_empty(&mut self, key: &[u8]) {
        let empty = match self.entries.get(key) {
            Some((Value::Queue(q), _)) => q.is_empty(),
            Some((Value::Zset(z), _)) => z.is_empty(),
            _ => false,
        };
        if empty {
            self.entries.remove(key);
            self.event("del", key);
        }
    }
}

impl Line for MemStore {
    fn line_kind(&mut self, key: &[u8]) -> LineKind {
        match self.live(key) {
            None => LineKind::Missing,
            Some((Value::Queue(_), _)) => LineKind::List,
            Some((Value::Zset(_), _)) => LineKind::Zset,
            Some(_) => LineKind::Other,
        }
    }

    fn lindex(&mut self, key: &[u8], index: i64) -> Option<Vec<u8>> {
        let q = self.queue_mut(key)?;
        let at = if index < 0 {
            q.len().checked_sub(index.unsigned_abs() as usize)?
        } else {
            index as usize
        };
        q.get(at).cloned()
    }

    fn lrange(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        self.queue_mut(key)
            .map(|q| q.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn lpop(&mut self, key: &[u8]) {
        if let Some(q) = self.queue_mut(key) {
            q.pop_front();
            self.event("lpop", key);
            self.drop_if_empty(key);
        }
    }

    fn rpush(&mut self, key: &[u8], value: &[u8]) {
        match self.queue_mut(key) {
            Some(q) => q.push_back(value.to_vec()),
            None => {
                let q = VecDeque::from([value.to_vec()]);
                self.entries.insert(key.to_vec(), (Value::Queue(q), None));
            }
        }
        self.event("rpush", key);
    }

    fn lrem(&mut self, key: &[u8], value: &[u8]) {
        let Some(q) = self.queue_mut(key) else {
            return;
        };
        let before = q.len();
        q.retain(|w| w != value);
        if q.len() != before {
            self.event("lrem", key);
            self.drop_if_empty(key);
        }
    }

    fn zscore(&mut self, key: &[u8], member: &[u8]) -> Option<i64> {
        self.zset_mut(key)?.get(member).copied()
    }

    fn zadd(&mut self, key: &[u8], score: i64, member: &[u8]) -> bool {
        let added = match self.zset_mut(key) {
            Some(z) => z.insert(member.to_vec(), score).is_none(),
            None => {
                let z = BTreeMap::from([(member.to_vec(), score)]);
                self.entries.insert(key.to_vec(), (Value::Zset(z), None));
                true
            }
        };
        self.event("zadd", key);
        added
    }

    fn zincrby(&mut self, key: &[u8], delta: i64, member: &[u8]) {
        match self.zset_mut(key) {
            Some(z) => *z.entry(member.to_vec()).or_insert(0) += delta,
            None => {
                let z = BTreeMap::from([(member.to_vec(), delta)]);
                self.entries.insert(key.to_vec(), (Value::Zset(z), None));
            }
        }
        self.event("zincr", key);
    }

    fn zrem(&mut self, key: &[u8], member: &[u8]) {
        let removed = self
            .zset_mut(key)
            .is_some_and(|z| z.remove(member).is_some());
        if removed {
            self.event("zrem", key);
            self.drop_if_empty(key);
        }
    }

    fn zrange(&mut self, key: &[u8]) -> Vec<Vec<u8>> {
        let Some(z) = self.zset_mut(key) else {
            return Vec::new();
        };
        let mut members: Vec<_> = z.iter().map(|(m, at)| (*at, m.clone())).collect();
        members.sort();
        members.into_iter().map(|(_, m)| m).collect()
    }
}

/// The permit-expirable semaphore's set reads and writes (contract §17).
impl Permits for MemStore {
    fn zrange_by_score(&mut self, key: &[u8], max: i64, limit: Option<usize>) -> Vec<Vec<u8>> {
        let Some(z) = self.zset_mut(key) else {
            return Vec::new();
        };
        let mut found: Vec<_> = z
            .iter()
            .filter(|(_, at)| (0..=max).contains(*at))
            .map(|(m, at)| (*at, m.clone()))
            .collect();
        found.sort();
        let limit = limit.unwrap_or(usize::MAX);
        found.into_iter().take(limit).map(|(_, m)| m).collect()
    }

    fn zrem_all(&mut self, key: &[u8], members: &[Vec<u8>]) -> i64 {
        let removed = match self.zset_mut(key) {
            Some(z) => members.iter().filter(|m| z.remove(*m).is_some()).count(),
            None => 0,
        };
        if removed > 0 {
            self.event("zrem", key);
            self.drop_if_empty(key);
        }
        removed as i64
    }

    fn zcount_from_zero(&mut self, key: &[u8]) -> i64 {
        self.zset_mut(key)
            .map_or(0, |z| z.values().filter(|at| **at >= 0).count() as i64)
    }

    fn zfirst_score(&mut self, key: &[u8], from_zero: bool) -> Option<i64> {
        let z = self.zset_mut(key)?;
        z.values()
            .filter(|at| !from_zero || **at >= 0)
            .min()
            .copied()
    }
}

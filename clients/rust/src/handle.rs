//! What the blocking and the async clients share apart from their I/O: a
//! client's settings, a lock handle (where, what, for whom, with which
//! options) and its builder methods, what an acquisition sends, and a hold
//! (what its guard renews and releases).

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::{Cmd, Pipeline, Value};
use tokio::sync::Notify;

use crate::cluster::{Endpoint, Route};
use crate::command::{self, Kind, Resend, Target, Wait};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::owner;
use crate::pool::Pools;
use crate::sentinel::Place;
use crate::sync::{Answered, Masters, Plan, Trip};
use crate::watchdog::{HoldCount, LostHold, OnLost, Renewal};

/// A client's locks: one client id, where they live, the options.
#[derive(Clone)]
pub(crate) struct Client {
    endpoint: Endpoint,
    client_id: String,
    options: Options,
    /// What its acquisitions learned of the masters' replicas, shared by
    /// its handles.
    masters: Masters,
    /// The holds its guards took and have not released, shared by its
    /// handles.
    holds: Holds,
    /// Its connections to reuse, shared by its handles.
    pools: Pools,
}

impl Client {
    /// A new client id, the default options.
    pub fn new(endpoint: Endpoint) -> Client {
        Client {
            endpoint,
            client_id: owner::new_client_id(),
            options: Options::default(),
            masters: Masters::default(),
            holds: Holds::default(),
            pools: Pools::default(),
        }
    }

    /// The same client (id, options, what it learned of the replicas, its
    /// holds and idle connections) on the server `master`.
    pub fn with_master(mut self, master: redis::Client) -> Client {
        self.endpoint = Endpoint::Server(master);
        self
    }

    pub fn with_options(mut self, options: Options) -> Client {
        self.options = options;
        self
    }

    /// This client id instead of the random one; refused when empty (an
    /// owner `:<id>` would not be Redisson's format).
    pub fn with_client_id(mut self, client_id: &str) -> Result<Client> {
        if client_id.is_empty() {
            return Err(Error::InvalidArgument("a client id cannot be empty"));
        }
        self.client_id = client_id.to_string();
        Ok(self)
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// A handle on `target` whose holds belong to `owner`.
    pub fn handle<O>(&self, target: Target, owner: O) -> Handle<O> {
        Handle {
            endpoint: self.endpoint.clone(),
            client_id: self.client_id.clone(),
            options: self.options.clone(),
            owner,
            target,
            on_lost: None,
            masters: self.masters.clone(),
            holds: self.holds.clone(),
            pools: self.pools.clone(),
        }
    }
}

/// The key of an owner's holds of one lock: the lock's kind and name (its
/// hash, and the field the owner's count is in: `<owner>`, or
/// `<owner>:write` for a write hold), the owner.
type HoldKey = (Kind, String, String);

/// The keys of `owner`'s holds of `target` the client counts: a lock's (a
/// multi-lock's, one per hold); none of a semaphore's permits, which have
/// no owner's count.
pub(crate) fn hold_keys(target: &Target, owner: &str) -> Vec<HoldKey> {
    if target.permits.is_some() {
        return Vec::new();
    }
    target
        .holds
        .iter()
        .map(|(kind, name)| (*kind, name.clone(), owner.to_string()))
        .collect()
}

/// What a client's owners hold, shared by its handles: per lock, kind and
/// owner, the count the server's hash keeps in the owner's field, as far as
/// this client knows (holds the owner took through another client object
/// are not counted: an owner is one client object's); and the semaphores'
/// unlock latches waiting for their next release's `DEL`.
///
/// A lock's acquisition and release send the count they found (`HELD n`),
/// which is how the server tells a resend from a first send, so they take
/// turns per key ([`Turn`]): a count read while another call of the same
/// owner's was answered on the server but not yet here would make a first
/// send look like a resend.
#[derive(Clone, Default)]
pub(crate) struct Holds(Arc<Shared>);

#[derive(Default)]
struct Shared {
    books: Mutex<Books>,
    /// Wakes the blocking callers waiting for a turn.
    freed: Condvar,
    /// Wakes the async callers waiting for a turn.
    notify: Notify,
}

#[derive(Default)]
struct Books {
    /// Only keys held or in a call: an entry goes when its count is 0 and
    /// no call has its turn, so the map does not grow.
    counts: HashMap<HoldKey, Counted>,
    /// Changes of counts so far: each change is stamped with it.
    changes: u64,
    /// Per semaphore name.
    latches: HashMap<String, Latches>,
    /// Per lock name, the acquisitions waiting on the server for it (only
    /// names with one).
    waiting: HashMap<String, usize>,
}

/// One owner's holds of one lock.
#[derive(Default)]
struct Counted {
    count: u64,
    /// A call has the key's turn.
    busy: bool,
    /// [`Books::changes`] when the count last changed (an entry made anew
    /// gets a later one than any before).
    changed: u64,
}

impl Books {
    /// `key`'s count set to what `count` makes of it.
    fn change(&mut self, key: &HoldKey, count: impl FnOnce(u64) -> u64) {
        self.changes += 1;
        let changed = self.changes;
        let counted = self.counts.entry(key.clone()).or_default();
        counted.count = count(counted.count);
        counted.changed = changed;
    }
}

/// The unlock latches of a semaphore's releases sent since the last `DEL`.
struct Latches {
    keys: Vec<String>,
    /// When the last of them was sent: once they have expired on the
    /// server, the entry is dropped.
    released_at: Instant,
}

impl Holds {
    fn books(&self) -> MutexGuard<'_, Books> {
        // A panic elsewhere leaves the books as consistent as before it.
        self.0
            .books
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The turn of `keys` when no call has any of them (taken all at once,
    /// so two calls over several keys cannot each wait for the other).
    fn try_turn(&self, books: &mut Books, keys: &[HoldKey]) -> Option<Turn> {
        if keys
            .iter()
            .any(|k| books.counts.get(k).is_some_and(|c| c.busy))
        {
            return None;
        }
        for key in keys {
            books.counts.entry(key.clone()).or_default().busy = true;
        }
        Some(Turn {
            holds: self.clone(),
            keys: keys.to_vec(),
        })
    }

    /// The turn of `keys`, waiting (blocking the thread) for the calls that
    /// have one of them.
    pub fn turn_blocking(&self, keys: Vec<HoldKey>) -> Turn {
        let mut books = self.books();
        loop {
            if let Some(turn) = self.try_turn(&mut books, &keys) {
                return turn;
            }
            books = self
                .0
                .freed
                .wait(books)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// The turn of `keys`, waiting for the calls that have one of them.
    /// Cancelled, it takes nothing.
    pub async fn turn(&self, keys: Vec<HoldKey>) -> Turn {
        loop {
            // Listening before looking: a turn given back in between wakes
            // it.
            let mut notified = pin!(self.0.notify.notified());
            notified.as_mut().enable();
            if let Some(turn) = self.try_turn(&mut self.books(), &keys) {
                return turn;
            }
            notified.await;
        }
    }

    /// A semaphore's release whose own latch is `latch` about to be sent:
    /// it keeps `latch` for the semaphore's next release's `DEL` (or to
    /// expire) and gets the latches kept before it, whose replies came
    /// (a release is sent once, resent at most once with the same id).
    /// Entries whose latches have expired on the server are dropped.
    fn releasing(&self, name: &str, latch: String) -> Vec<String> {
        let mut books = self.books();
        let now = Instant::now();
        let ttl = Duration::from_millis(command::LATCH_TTL_MS);
        books.latches.retain(|_, l| now - l.released_at < ttl);
        let kept = books.latches.insert(
            name.to_string(),
            Latches {
                keys: vec![latch],
                released_at: now,
            },
        );
        kept.map(|l| l.keys).unwrap_or_default()
    }

    /// Counts an acquisition waiting on the server for `name` until the
    /// returned [`Waiting`] is dropped (answered or cancelled).
    pub fn waiting(&self, name: &str) -> Waiting {
        *self.books().waiting.entry(name.to_string()).or_default() += 1;
        Waiting {
            holds: self.clone(),
            name: name.to_string(),
        }
    }

    /// True while an acquisition of this client waits on the server for
    /// `name`: the lock is most likely taken, so another acquisition that
    /// may wait goes straight to waiting (a try first would cost a round
    /// trip and be refused).
    pub fn has_waiters(&self, name: &str) -> bool {
        self.books().waiting.contains_key(name)
    }

    /// The count of `key` known, for the tests.
    #[cfg(test)]
    fn count(&self, key: &HoldKey) -> u64 {
        self.books().counts.get(key).map_or(0, |c| c.count)
    }
}

/// An acquisition counted as waiting on the server ([`Holds::waiting`])
/// while it lives.
pub(crate) struct Waiting {
    holds: Holds,
    name: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut books = self.holds.books();
        if let Some(n) = books.waiting.get_mut(&self.name) {
            *n -= 1;
            if *n == 0 {
                books.waiting.remove(&self.name);
            }
        }
    }
}

/// The turn of an owner's call on some of its holds (an acquisition or a
/// release): the counts it reads stay what the server has until it is
/// answered, and it changes them by what the server said. Given back when
/// dropped.
pub(crate) struct Turn {
    holds: Holds,
    keys: Vec<HoldKey>,
}

impl Turn {
    /// The owner's count of its (first) hold.
    pub fn count(&self) -> u64 {
        let Some(key) = self.keys.first() else {
            return 0;
        };
        self.holds.books().counts.get(key).map_or(0, |c| c.count)
    }

    /// Every hold taken once more.
    fn taken(&self) {
        let mut books = self.holds.books();
        for key in &self.keys {
            books.change(key, |n| n + 1);
        }
    }

    /// A release answered `reply` (a multi-lock's: one per hold; None: no
    /// reply, or an error): a hold answered nil is not the owner's at all
    /// any more (count 0); any other, released once. Without a reply the
    /// guard is spent too: its level counted released (the server's, if it
    /// is still there, is adopted by the owner's next acquisition, which
    /// finds one more than it says and answers it granted).
    fn released(&self, reply: Option<&Value>) {
        let mut books = self.holds.books();
        for (i, key) in self.keys.iter().enumerate() {
            let answer = match reply {
                Some(Value::Array(items)) => items.get(i),
                other => other,
            };
            books.change(key, |n| match answer {
                Some(Value::Nil) => 0,
                _ => n.saturating_sub(1),
            });
        }
    }
}

/// The client's count of one owner's hold of a single lock, for the
/// watchdog renewing it.
struct Tally {
    holds: Holds,
    key: HoldKey,
}

impl HoldCount for Tally {
    fn mark(&self) -> Option<u64> {
        let books = self.holds.books();
        let counted = books.counts.get(&self.key)?;
        (!counted.busy).then_some(books.changes)
    }

    fn gone(&self, mark: u64) {
        let mut books = self.holds.books();
        let unchanged = books
            .counts
            .get(&self.key)
            .is_some_and(|c| !c.busy && c.changed <= mark);
        if unchanged {
            books.counts.remove(&self.key);
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let mut books = self.holds.books();
        for key in &self.keys {
            if let Some(counted) = books.counts.get_mut(key) {
                counted.busy = false;
                if counted.count == 0 {
                    books.counts.remove(key);
                }
            }
        }
        drop(books);
        self.holds.0.freed.notify_all();
        self.holds.0.notify.notify_waiters();
    }
}

/// What a lock handle is: where, what, for whom (`O`: the blocking client's
/// optional owner, the calling thread's by default; the async client's
/// handle's own), with which options.
#[derive(Clone)]
pub(crate) struct Handle<O> {
    pub endpoint: Endpoint,
    pub client_id: String,
    pub options: Options,
    pub owner: O,
    pub target: Target,
    /// Called by a hold's watchdog when it finds the hold gone.
    pub on_lost: Option<OnLost>,
    /// What the client learned of the masters' replicas.
    pub masters: Masters,
    /// The holds the client's guards took.
    pub holds: Holds,
    /// The client's connections to reuse.
    pub pools: Pools,
}

/// An acquisition about to be sent.
pub(crate) struct Acquisition<'a> {
    pub owner: String,
    pub lease_ms: u64,
    /// The (first) lock's name, which says where it lives.
    pub name: &'a str,
    pub cmd: Cmd,
    /// The wait `cmd` carries.
    pub wait: Wait,
    /// A semaphore's: the request ids it was sent with, the latest last,
    /// whose latches the release deletes. Empty for a lock.
    pub requests: Vec<String>,
    /// A lock's outside a session: the owner's count before it (`HELD n`).
    held: Option<u64>,
    /// It may be sent again after a lost reply.
    resendable: bool,
    /// The owner's turn on what it takes, until it is answered.
    turn: Turn,
    target: &'a Target,
    session: bool,
    started: Instant,
    resent: bool,
}

impl Acquisition<'_> {
    /// True when a lost reply may be sent again: it carries a request id
    /// or `HELD`, or it is a session's single lock (see
    /// [`Acquisition::resend`]).
    pub fn resendable(&self) -> bool {
        self.resendable
    }

    /// The command again, for a new connection after the reply was lost
    /// (a connection error or a timeout: it may or may not have run), with
    /// what is left of the wait. A lock's carries the same `HELD n`: the
    /// server answers a granted first send as granted, taking nothing
    /// more, so the hold is counted once and none is orphaned. A session's
    /// lock carries none: the server gives back what the lost connection
    /// held in its next event-loop turn, so a resend arriving before that
    /// would find the first send's level and be answered granted, binding
    /// nothing; sent plain it re-enters, and the give-back takes the dead
    /// connection's level. A semaphore's carries the same request id (a
    /// session's a new one: the lost connection took what the first send
    /// bound to it).
    pub fn resend(&mut self) -> &Cmd {
        self.wait = self.wait.left(self.started.elapsed());
        self.resent = true;
        if self.session && !self.requests.is_empty() {
            self.requests.push(command::request_id());
        }
        self.cmd = self.target.acquire(
            &self.owner,
            self.lease_ms,
            self.wait,
            self.session,
            self.idempotence(),
        );
        &self.cmd
    }

    /// What makes a resend of it safe: the latest request id, or `HELD`.
    fn idempotence(&self) -> Option<Resend<'_>> {
        match self.requests.last() {
            Some(id) => Some(Resend::Request(id, self.wait.request_ttl())),
            None => self.held.map(Resend::Held),
        }
    }

    /// After a semaphore's resend, a write for the replica check to count:
    /// a replay writes nothing on the new connection, so its `WAIT` would
    /// not cover the grant the first send wrote; the latch's expiry set
    /// again (the latch exists once granted) is one write on it. None
    /// without a resend, and for a lock (the server replicates a write of
    /// its own when it answers a `HELD` resend from the hash).
    pub fn touch(&self) -> Option<Cmd> {
        let id = self.requests.last().filter(|_| self.resent)?;
        let mut cmd = redis::cmd("PEXPIRE");
        cmd.arg(self.target.request_latch(id))
            .arg(self.wait.request_ttl());
        Some(cmd)
    }
}

/// An acquisition's round trip, answered, and the connection it was sent
/// on (`C`: the blocking client's or the async one's).
pub(crate) struct Sent<C> {
    pub conn: C,
    pub answered: Answered,
}

/// What an answered acquisition took: the hold, a session's connection
/// (the server binds the hold to it), and whether the replicas
/// acknowledged it (when they did not, the caller releases it).
pub(crate) struct Granted<C> {
    pub hold: Hold,
    pub session: Option<C>,
    pub synced: Result<()>,
}

impl<O> Handle<O> {
    /// What an acquisition on `master` sends after it (see
    /// [`Masters::plan`]); None until `master`'s `INFO` was learned.
    pub fn plan(&self, master: &str) -> Option<Plan> {
        self.masters
            .plan(master, &self.options.sync, Instant::now())
    }

    /// The plan for `master` once its `INFO` reply `info`, asked at
    /// `asked` (see [`Handle::plan`]), is learned.
    pub fn learned(&self, master: &str, info: &str, asked: Instant) -> Plan {
        self.masters.learn(master, info, asked);
        self.plan(master).unwrap_or_else(Plan::none)
    }

    /// The round trip of the acquisition `cmd` of the lock `name` (after a
    /// resend, with `touch`) to where `route` is, with what `plan` sends
    /// after it; held back when that node may redirect it (the slot's
    /// master is not known yet).
    pub fn trip(
        &self,
        route: &Route,
        name: &str,
        cmd: &Cmd,
        touch: Option<&Cmd>,
        plan: Plan,
    ) -> Trip {
        let deferred = !route.asking && !self.endpoint.knows(name);
        Trip::new(route, deferred, cmd, touch, plan)
    }

    /// What the acquisition of `target` that `sent` answered took.
    /// Whether the replicas acknowledged it is read whether or not it was
    /// granted: it learns of the master. Its replies all came, so its
    /// connection is clean: a session's hold keeps it, another goes to
    /// `give_back`. The refusals as errors ([`Error::NotAcquired`]...).
    pub fn granted<C>(
        &self,
        target: &Target,
        acquisition: Acquisition<'_>,
        sent: Sent<C>,
        give_back: impl FnOnce(&redis::Client, C),
    ) -> Result<Granted<C>> {
        let Sent { conn, answered } = sent;
        let master = self.endpoint.learned_key(&answered.client);
        let synced = answered.plan.read(&answered.after, &self.masters, &master);
        let session = if self.options.session {
            Some(conn)
        } else {
            give_back(&answered.client, conn);
            None
        };
        let (token, ids) = match target.expiry {
            Some(_) => (None, command::permit_ids(answered.reply)?),
            None => (
                target.acquired(answered.reply, acquisition.wait)?,
                Vec::new(),
            ),
        };
        let hold = Hold::new(answered.client, self, target, acquisition, token, ids);
        Ok(Granted {
            hold,
            session,
            synced,
        })
    }

    /// The hold `owner` may have of `target`, released without its guard:
    /// where the release is sent is found by routing it; the hold only
    /// spells it.
    pub fn unguarded(&self, target: &Target, owner: String) -> Hold {
        Hold {
            place: Place::Fixed(self.endpoint.node(target.name())),
            target: target.clone(),
            owner,
            token: None,
            ids: Vec::new(),
            lease_ms: self.options.lease_ms(),
            session: self.options.session,
            response_timeout: self.options.response_timeout,
            on_lost: None,
            requests: Vec::new(),
            holds: self.holds.clone(),
        }
    }

    pub fn fenced(mut self) -> Self {
        self.target.fenced = true;
        self
    }

    /// Granted in arrival order (`FAIRLOCK.*`).
    pub fn fair(mut self) -> Self {
        self.target.fair = true;
        self
    }

    pub fn non_reentrant(mut self) -> Self {
        self.target.non_reentrant = true;
        self
    }

    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.options.lease = Some(lease);
        self
    }

    /// A permit-expirable semaphore's permits never expire (lease -1).
    pub fn never_expiring(mut self) -> Self {
        self.target.expiry = Some(command::Expiry::Never);
        self
    }

    pub fn with_session(mut self) -> Self {
        self.options.session = true;
        self
    }

    pub fn with_owner(mut self, owner: &str) -> Self
    where
        O: From<String>,
    {
        self.owner = O::from(owner.to_string());
        self
    }

    pub fn on_lost(mut self, on_lost: impl Fn(&LostHold) + Send + Sync + 'static) -> Self {
        self.on_lost = Some(Arc::new(on_lost));
        self
    }

    /// True when a watchdog renews what an acquisition of `target` takes:
    /// a lock's hold or a permit-expirable semaphore's leased permits
    /// without a lease or a session; never a semaphore's permits, which
    /// have no lease, nor never-expiring ones.
    pub fn watched(&self, target: &Target) -> bool {
        self.options.watchdog() && target.renewable()
    }

    /// Adds a hold to a multi-lock.
    pub fn hold(mut self, kind: Kind, name: &str) -> Self {
        self.target.holds.push((kind, name.to_string()));
        self
    }

    /// The (first) lock's name.
    pub fn name(&self) -> &str {
        self.target.name()
    }

    /// What a call is about: the whole target (None), or a read-write
    /// lock's hold of `kind`.
    pub fn targeted(&self, kind: Option<Kind>) -> Cow<'_, Target> {
        let Some(kind) = kind else {
            return Cow::Borrowed(&self.target);
        };
        let mut target = self.target.clone();
        if let Some(hold) = target.holds.first_mut() {
            hold.0 = kind;
        }
        Cow::Owned(target)
    }

    /// Refuses what the server would refuse, then builds the acquisition of
    /// `target` for `owner`, who has `turn` on it (see [`Holds`]).
    pub fn acquisition<'a>(
        &self,
        target: &'a Target,
        wait: Wait,
        owner: String,
        turn: Turn,
    ) -> Result<Acquisition<'a>> {
        target.check()?;
        self.options.check()?;
        let session = self.options.session;
        if session && target.fair {
            return Err(Error::InvalidArgument("a fair lock has no session holds"));
        }
        let lease_ms = self.options.lease_ms();
        let requests: Vec<String> = target
            .requests()
            .then(command::request_id)
            .into_iter()
            .collect();
        let lock = target.resendable() && !target.requests();
        let held = (lock && !session)
            .then(|| turn.count())
            .filter(|&n| Resend::held_acquisition(n).is_some());
        let resendable = target.resendable() && (!requests.is_empty() || held.is_some() || session);
        let mut acquisition = Acquisition {
            owner,
            lease_ms,
            name: target.name(),
            cmd: Cmd::new(),
            wait,
            requests,
            held,
            resendable,
            turn,
            target,
            session,
            started: Instant::now(),
            resent: false,
        };
        acquisition.cmd = target.acquire(
            &acquisition.owner,
            lease_ms,
            wait,
            session,
            acquisition.idempotence(),
        );
        Ok(acquisition)
    }
}

impl Handle<Option<String>> {
    /// The owner an acquisition by the calling thread uses.
    pub fn thread_owner(&self) -> String {
        self.owner
            .clone()
            .unwrap_or_else(|| owner::owner(&self.client_id, owner::thread_id()))
    }
}

/// A hold taken: what its guard renews and releases, on the master that
/// granted it (followed through Sentinel: the master of the moment).
#[derive(Clone)]
pub(crate) struct Hold {
    pub place: Place,
    pub target: Target,
    pub owner: String,
    pub token: Option<i64>,
    /// A permit-expirable semaphore's permits: their ids.
    pub ids: Vec<String>,
    pub lease_ms: u64,
    pub session: bool,
    pub response_timeout: Option<Duration>,
    pub on_lost: Option<OnLost>,
    /// A semaphore's: the request ids of its acquisition, whose latches go
    /// with the release (one `DEL`), or expire.
    pub requests: Vec<String>,
    /// The client's holds, this one counted among them (a lock's).
    pub holds: Holds,
}

/// A release about to be sent: its pipeline, and what its reply means.
pub(crate) struct Release {
    pub pipe: Pipeline,
    /// It carries a request id or `HELD`: it may be sent again after a
    /// lost reply.
    pub resendable: bool,
    /// The `n` of the `HELD n` it carries.
    held: Option<u64>,
}

impl Hold {
    /// The hold `handle` took of `target` on the master `client`.
    pub fn new<O>(
        client: redis::Client,
        handle: &Handle<O>,
        target: &Target,
        acquisition: Acquisition<'_>,
        token: Option<i64>,
        ids: Vec<String>,
    ) -> Hold {
        acquisition.turn.taken();
        Hold {
            place: handle.endpoint.place(client),
            target: target.clone(),
            owner: acquisition.owner,
            token,
            ids,
            lease_ms: acquisition.lease_ms,
            session: handle.options.session,
            response_timeout: handle.options.response_timeout,
            on_lost: handle.on_lost.clone(),
            requests: acquisition.requests,
            holds: handle.holds.clone(),
        }
    }

    /// The keys the client counts this hold under (see [`Holds`]).
    pub fn keys(&self) -> Vec<HoldKey> {
        hold_keys(&self.target, &self.owner)
    }

    /// What its watchdog renews.
    pub fn renewal(&self) -> Renewal {
        Renewal {
            target: self.target.clone(),
            owner: self.owner.clone(),
            ids: self.ids.clone(),
            lease_ms: self.lease_ms,
            response_timeout: self.response_timeout,
            on_lost: self.on_lost.clone(),
            count: self.tally(),
        }
    }

    /// A single lock's count, for its watchdog to forget when it finds the
    /// hold gone (a multi-lock's renewal does not say which hold is gone).
    fn tally(&self) -> Option<Arc<dyn HoldCount>> {
        if self.target.multi {
            return None;
        }
        let key = self.keys().into_iter().next()?;
        Some(Arc::new(Tally {
            holds: self.holds.clone(),
            key,
        }))
    }

    /// The release, in one round trip, sent with the owner's `turn` on the
    /// hold. A lock's is one command carrying `HELD <count>` (the owner's
    /// count before it), so that its resend after a lost reply is told from
    /// a first send by the server (see [`Hold::settled`]); none when the
    /// client knows of no hold of the owner's there (it did not take it:
    /// then a lost reply is raised, not sent again). A session's hold
    /// (ended with its connection anyway) and a multi-lock's carry nothing
    /// and are not sent again either. A semaphore's release carries a
    /// request id and pipelines a `DEL` of the latches whose replies came:
    /// the acquisition's request latches and the unlock latches of the
    /// semaphore's releases before it, never its own (left to the next
    /// release's `DEL`, or to expire), so that a resend is always answered
    /// from it with what the first send replied. A permit-expirable
    /// semaphore's permits are released by their ids (`PERMIT.RELEASE`, no
    /// request id: a lost reply is raised), with their acquisition's
    /// latches deleted. The `DEL`'s reply is not looked at: latches it
    /// missed expire.
    pub fn release(&self, turn: &Turn) -> Release {
        if !self.target.requests() {
            let held = if self.session || self.target.multi {
                None
            } else {
                Resend::held_release(turn.count())
            };
            let cmd = self.target.release(&self.owner, self.lease_ms, held);
            return Release {
                pipe: single(&cmd),
                resendable: held.is_some(),
                held: match held {
                    Some(Resend::Held(n)) => Some(n),
                    _ => None,
                },
            };
        }
        let request = (self.target.expiry.is_none() && !self.session).then(|| {
            let id = command::request_id();
            let earlier = self
                .holds
                .releasing(self.target.name(), self.target.latch(&id));
            (id, earlier)
        });
        let cmd = match self.target.expiry {
            Some(_) => command::release_ids(self.target.name(), &self.ids),
            None => self.target.release(
                &self.owner,
                self.lease_ms,
                request
                    .as_ref()
                    .map(|(id, _)| Resend::Request(id, command::LATCH_TTL_MS)),
            ),
        };
        let mut pipe = redis::pipe();
        pipe.ignore_errors().add_command(cmd);
        let forgets = request.as_ref().map(|(_, earlier)| earlier.as_slice());
        if let Some(earlier) = forgets.or(self.target.expiry.map(|_| &[][..])) {
            if !earlier.is_empty() || !self.requests.is_empty() {
                let mut forget = redis::cmd("DEL");
                forget.arg(earlier);
                for id in &self.requests {
                    forget.arg(self.target.request_latch(id));
                }
                pipe.add_command(forget).ignore();
            }
        }
        Release {
            pipe,
            resendable: request.is_some(),
            held: None,
        }
    }

    /// What the release `release` sent with `turn` came to: `sent`, its
    /// replies and whether they are its resend's (after a lost reply), or
    /// its failure. The owner's counts follow what the server said. Ok when
    /// the owner held what it released; [`Error::NotHeld`] when it held
    /// nothing. A lock's resend answered nil is `NotHeld` only when the
    /// owner held more than one (`HELD n`, n >= 2: the server answers a
    /// resend whose first send ran as released, so nil says the holds were
    /// gone); for its last hold nil cannot tell the first send's release
    /// from a hold gone before it: [`Error::ReleaseUnknown`]. Never
    /// inferred released.
    pub fn settled(
        &self,
        turn: &Turn,
        release: &Release,
        sent: Result<(Vec<Value>, bool)>,
    ) -> Result<()> {
        let answered = sent.and_then(|(replies, resent)| Ok((first(replies)?, resent)));
        turn.released(answered.as_ref().ok().map(|(reply, _)| reply));
        let (reply, resent) = answered?;
        match self.target.released(&reply) {
            Err(Error::NotHeld) if resent && release.held == Some(1) => Err(Error::ReleaseUnknown),
            other => other,
        }
    }

    /// A guard's `Debug`.
    pub fn fmt_guard(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("holds", &self.target.holds)
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// A pipeline of the one command `cmd`, whose error reply is a reply.
pub(crate) fn single(cmd: &Cmd) -> Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors().add_command(cmd.clone());
    pipe
}

/// True when an `HEXISTS`'s `replies` say the field is there.
pub(crate) fn exists(replies: Vec<Value>) -> Result<bool> {
    Ok(first(replies)? == Value::Int(1))
}

/// The first of a pipeline's `replies`; an error reply as the error.
pub(crate) fn first(replies: Vec<Value>) -> Result<Value> {
    match replies.into_iter().next() {
        Some(Value::ServerError(e)) => Err(Error::Redis(e.into())),
        Some(reply) => Ok(reply),
        None => Err(Error::UnexpectedReply("no reply".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::args;

    fn key(name: &str) -> HoldKey {
        (Kind::Lock, name.into(), "o:1".into())
    }

    fn hold(holds: &Holds, target: Target, requests: &[&str]) -> Hold {
        Hold {
            place: Place::Fixed(redis::Client::open("redis://127.0.0.1:1/").expect("url")),
            target,
            owner: "o:1".into(),
            token: None,
            ids: Vec::new(),
            lease_ms: 1000,
            session: false,
            response_timeout: None,
            on_lost: None,
            requests: requests.iter().map(|r| r.to_string()).collect(),
            holds: holds.clone(),
        }
    }

    /// `hold`'s release sent with its turn, answered `reply` (by a resend
    /// when `resent`): its commands and outcome.
    fn released(hold: &Hold, reply: Value, resent: bool) -> (Vec<Vec<String>>, Result<()>) {
        let turn = hold.holds.turn_blocking(hold.keys());
        let release = hold.release(&turn);
        let sent: Vec<Vec<String>> = release.pipe.cmd_iter().map(args).collect();
        let outcome = hold.settled(&turn, &release, Ok((vec![reply], resent)));
        (sent, outcome)
    }

    /// `count` holds of `key` taken.
    fn take(holds: &Holds, key: &HoldKey, count: u64) {
        for _ in 0..count {
            holds.turn_blocking(vec![key.clone()]).taken();
        }
    }

    fn words(line: &str) -> Vec<Vec<String>> {
        vec![line.split(' ').map(String::from).collect()]
    }

    #[test]
    fn a_locks_release_is_one_command_saying_the_owners_count() {
        let holds = Holds::default();
        let l = hold(&holds, Target::single(Kind::Lock, "l"), &[]);
        take(&holds, &key("l"), 2);
        let (sent, outcome) = released(&l, Value::Int(0), false);
        assert_eq!(sent, words("LOCK.UNLOCK l o:1 LEASE 1000 HELD 2"));
        assert!(outcome.is_ok());
        assert_eq!(holds.count(&key("l")), 1);
        let (sent, outcome) = released(&l, Value::Int(1), false);
        // A last release: no `HELD 1`, which the server never replays.
        assert_eq!(sent, words("LOCK.UNLOCK l o:1 LEASE 1000"));
        assert!(outcome.is_ok());
        assert!(holds.books().counts.is_empty(), "no entry left at 0");
    }

    #[test]
    fn a_resent_last_release_answered_nil_is_unknown_and_a_reentered_one_not_held() {
        let holds = Holds::default();
        let l = hold(&holds, Target::single(Kind::Lock, "l"), &[]);
        take(&holds, &key("l"), 1);
        let (_, outcome) = released(&l, Value::Nil, true);
        assert!(matches!(outcome, Err(Error::ReleaseUnknown)), "{outcome:?}");
        assert_eq!(holds.count(&key("l")), 0);
        // Its first send answered nil: the owner held nothing.
        take(&holds, &key("l"), 1);
        let (_, outcome) = released(&l, Value::Nil, false);
        assert!(matches!(outcome, Err(Error::NotHeld)));
        // Re-entered: the server answers a resend whose first send ran as
        // released, so nil says the holds were gone; the count is forgotten.
        take(&holds, &key("l"), 3);
        let (_, outcome) = released(&l, Value::Nil, true);
        assert!(matches!(outcome, Err(Error::NotHeld)));
        assert_eq!(holds.count(&key("l")), 0);
        // A resend answered released is released.
        take(&holds, &key("l"), 2);
        let (_, outcome) = released(&l, Value::Int(0), true);
        assert!(outcome.is_ok());
        assert_eq!(holds.count(&key("l")), 1);
    }

    #[test]
    fn a_release_of_a_hold_the_client_did_not_take_says_no_count_and_is_not_resent() {
        let holds = Holds::default();
        let rw = hold(&holds, Target::single(Kind::Write, "w"), &[]);
        let turn = holds.turn_blocking(rw.keys());
        let release = rw.release(&turn);
        assert!(!release.resendable);
        let sent: Vec<Vec<String>> = release.pipe.cmd_iter().map(args).collect();
        assert_eq!(sent, words("RWLOCK.UNLOCK w o:1 WRITE LEASE 1000"));
        drop(turn);
        // A failed send: the guard is spent, its level counted released.
        take(&holds, &(Kind::Write, "w".into(), "o:1".into()), 2);
        let turn = holds.turn_blocking(rw.keys());
        let release = rw.release(&turn);
        assert!(release.resendable);
        let lost = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(rw.settled(&turn, &release, Err(lost.into())).is_err());
        assert_eq!(turn.count(), 1);
    }

    #[test]
    fn a_multi_locks_release_counts_each_hold_by_its_reply() {
        let holds = Holds::default();
        let mut target = Target::multi();
        target.holds = vec![(Kind::Lock, "a".into()), (Kind::Lock, "b".into())];
        let multi = hold(&holds, target, &[]);
        take(&holds, &key("a"), 2);
        take(&holds, &key("b"), 1);
        let (sent, outcome) =
            released(&multi, Value::Array(vec![Value::Int(0), Value::Nil]), false);
        assert_eq!(sent, words("LOCK.UNLOCKALL o:1 HOLDS 2 LOCK a LOCK b"));
        assert!(matches!(outcome, Err(Error::NotHeld)));
        assert_eq!((holds.count(&key("a")), holds.count(&key("b"))), (1, 0));
    }

    #[test]
    fn an_owners_calls_on_one_hold_take_turns() {
        let holds = Holds::default();
        let first = holds.turn_blocking(vec![key("a")]);
        let b = {
            let mut books = holds.books();
            assert!(
                holds.try_turn(&mut books, &[key("b"), key("a")]).is_none(),
                "all the keys or none"
            );
            holds.try_turn(&mut books, &[key("b")])
        };
        assert!(b.is_some(), "another key's turn is free");
        drop(b);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let waiting = tokio::spawn({
                let holds = holds.clone();
                async move { holds.turn(vec![key("a")]).await.count() }
            });
            tokio::task::yield_now().await;
            assert!(!waiting.is_finished(), "waits for the first turn");
            drop(first);
            assert_eq!(waiting.await.expect("turn"), 0);
        });
        let other = holds.turn_blocking(vec![key("a")]);
        let blocked = std::thread::spawn({
            let holds = holds.clone();
            move || holds.turn_blocking(vec![key("a")]).count()
        });
        other.taken();
        drop(other);
        assert_eq!(blocked.join().expect("turn"), 1, "after the first turn's");
    }

    #[test]
    fn a_hold_the_watchdog_found_gone_is_forgotten_unless_a_call_changed_it() {
        let holds = Holds::default();
        let l = hold(&holds, Target::single(Kind::Lock, "l"), &[]);
        let tally = l.tally().expect("a single lock's");
        assert_eq!(tally.mark(), None, "nothing counted");
        take(&holds, &key("l"), 2);
        let mark = tally.mark().expect("counted");
        tally.gone(mark);
        assert_eq!(holds.count(&key("l")), 0, "the server has none");
        // An acquisition answered after the renewal was sent: kept.
        take(&holds, &key("l"), 1);
        let mark = tally.mark().expect("counted");
        take(&holds, &key("l"), 1);
        tally.gone(mark);
        assert_eq!(holds.count(&key("l")), 2);
        // A call under way: nothing marked, and nothing forgotten.
        let turn = holds.turn_blocking(l.keys());
        assert_eq!(tally.mark(), None);
        tally.gone(u64::MAX);
        drop(turn);
        assert_eq!(holds.count(&key("l")), 2);
        let mut multi = Target::multi();
        multi.holds = vec![(Kind::Lock, "l".into())];
        assert!(hold(&holds, multi, &[]).tally().is_none());
    }

    /// The semaphore's release's request id and the `DEL`'s keys, if it
    /// has one.
    fn semaphore_sent(release: &Release) -> (String, Option<Vec<String>>) {
        let cmds: Vec<Vec<String>> = release.pipe.cmd_iter().map(args).collect();
        let at = cmds[0]
            .iter()
            .position(|w| w == "REQUEST")
            .expect("REQUEST");
        let del = cmds.get(1).map(|d| {
            assert_eq!(d[0], "DEL");
            d[1..].to_vec()
        });
        (cmds[0][at + 1].clone(), del)
    }

    #[test]
    fn a_semaphores_release_keeps_its_latch_for_the_next_release() {
        let holds = Holds::default();
        let sem = |requests: &[&str]| {
            let mut h = hold(&holds, Target::semaphore("s"), requests);
            h.owner = String::new();
            h
        };
        let turn = holds.turn_blocking(Vec::new());
        let first = sem(&["a1"]).release(&turn);
        assert!(first.resendable);
        let (first_id, del) = semaphore_sent(&first);
        assert_eq!(
            del,
            Some(vec!["redisson_lock_request_latch:{s}:a1".to_string()]),
            "the acquisition's latch only: the release's own outlives its reply"
        );
        let next = sem(&[]).release(&turn);
        let (next_id, del) = semaphore_sent(&next);
        assert_eq!(
            del,
            Some(vec![format!("redisson_unlock_latch:{{s}}:{first_id}")])
        );
        assert!(holds.books().counts.is_empty(), "permits are not counted");
        // Latches expired on the server are not deleted.
        holds
            .books()
            .latches
            .get_mut("s")
            .expect("kept")
            .released_at = Instant::now() - Duration::from_millis(command::LATCH_TTL_MS + 1);
        let (_, del) = semaphore_sent(&sem(&[]).release(&turn));
        assert_eq!(del, None, "{next_id}'s latch expired");
    }
}

//! What the blocking and the async clients share apart from their I/O: a
//! client's settings, a lock handle (where, what, for whom, with which
//! options) and its builder methods, what an acquisition sends, and a hold
//! (what its guard renews and releases).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::{Cmd, Pipeline, Value};

use crate::cluster::{Endpoint, Route};
use crate::command::{self, Kind, Target, Wait};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::owner;
use crate::pool::Pools;
use crate::sentinel::Place;
use crate::sync::{Answered, Masters, Plan, Trip};
use crate::watchdog::{LostHold, OnLost, Renewal};

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
/// hash, and the field the owner's count is in), the owner. A semaphore's
/// permits have no owner (the empty one): the client's releases of one
/// semaphore share their latches.
type HoldKey = (Kind, String, String);

/// The holds a client's guards took and have not released yet, per lock
/// and owner (only those whose release carries a request id: a single
/// lock's, outside a session), with the unlock latches of the owner's
/// releases waiting for its next release's `DEL` (see [`Hold::release`]).
/// As far as this client knows: holds the owner took through another
/// client object are not counted.
#[derive(Clone, Default)]
pub(crate) struct Holds(Arc<Mutex<HashMap<HoldKey, Counted>>>);

/// One owner's holds of one lock.
#[derive(Default)]
struct Counted {
    count: usize,
    /// The latches of releases sent since the last `DEL`.
    latches: Vec<String>,
    /// When the last of them was sent: once no hold is left and they have
    /// expired on the server, the entry is dropped.
    released_at: Option<Instant>,
}

impl Holds {
    fn map(&self) -> MutexGuard<'_, HashMap<HoldKey, Counted>> {
        // A panic elsewhere leaves the map as consistent as before it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A hold of `key` granted.
    fn taken(&self, key: HoldKey) {
        self.map().entry(key).or_default().count += 1;
    }

    /// A release of one hold of `key`, whose own latch is `latch`, about to
    /// be sent: counted released (a release is sent once, resent at most
    /// once with the same id, and whatever it replies the guard is spent).
    /// It keeps `latch` for the owner's next release's `DEL` (or to expire)
    /// and gets the latches kept before it. Entries whose holds are all
    /// released and whose latches have expired on the server are dropped.
    fn releasing(&self, key: HoldKey, latch: String) -> Vec<String> {
        let mut map = self.map();
        let now = Instant::now();
        let ttl = Duration::from_millis(command::LATCH_TTL_MS);
        map.retain(|_, c| c.count > 0 || c.released_at.is_some_and(|at| now - at < ttl));
        let counted = map.entry(key).or_default();
        let earlier = std::mem::take(&mut counted.latches);
        counted.count = counted.count.saturating_sub(1);
        counted.latches.push(latch);
        counted.released_at = Some(now);
        earlier
    }

    /// The number of holds of `key` known, for the tests.
    #[cfg(test)]
    fn count(&self, key: &HoldKey) -> usize {
        self.map().get(key).map_or(0, |c| c.count)
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
    /// The request ids it was sent with, the latest last: the latches the
    /// hold's release deletes. Empty: it takes none (a multi-lock).
    pub requests: Vec<String>,
    target: &'a Target,
    session: bool,
    started: Instant,
    resent: bool,
}

impl Acquisition<'_> {
    /// True when a lost reply may be sent again: it carries a request id.
    pub fn resendable(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The command again, for a new connection after the reply was lost
    /// (a connection error or a timeout: it may or may not have run), with
    /// the same request id and what is left of the wait: the server answers
    /// a granted first send from its latch, taking nothing more, so the
    /// hold is counted once and none is orphaned. A session's acquisition
    /// gets a new id: the lost connection took what the first send bound
    /// to it, and a replay would answer granted while binding nothing.
    pub fn resend(&mut self) -> &Cmd {
        self.wait = self.wait.left(self.started.elapsed());
        self.resent = true;
        if self.session {
            self.requests.push(command::request_id());
        }
        let request = self
            .requests
            .last()
            .map(|id| (id.as_str(), self.wait.request_ttl()));
        self.cmd =
            self.target
                .acquire(&self.owner, self.lease_ms, self.wait, self.session, request);
        &self.cmd
    }

    /// After a resend, a write for the replica check to count: a replay
    /// writes nothing on the new connection, so its `WAIT` would not cover
    /// the grant the first send wrote; the latch's expiry set again (the
    /// latch exists once granted) is one write on it. None without a resend.
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
    /// `target` for `owner`.
    pub fn acquisition<'a>(
        &self,
        target: &'a Target,
        wait: Wait,
        owner: String,
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
        let request = requests.first().map(|id| (id.as_str(), wait.request_ttl()));
        let cmd = target.acquire(&owner, lease_ms, wait, session, request);
        Ok(Acquisition {
            owner,
            lease_ms,
            name: target.name(),
            cmd,
            wait,
            requests,
            target,
            session,
            started: Instant::now(),
            resent: false,
        })
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
    /// The request ids of its acquisition: their latches go with the
    /// release's (one `DEL`), or expire.
    pub requests: Vec<String>,
    /// The client's holds, this one counted among them when its release
    /// carries a request id.
    pub holds: Holds,
}

/// A release about to be sent: its pipeline, and what its reply means.
pub(crate) struct Release {
    pub pipe: Pipeline,
    /// It carries a request id: it may be sent again after a lost reply.
    pub resendable: bool,
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
        let hold = Hold {
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
        };
        if let Some(key) = hold.key() {
            hold.holds.taken(key);
        }
        hold
    }

    /// Where the client counts this hold: a single lock's outside a session
    /// (whose release carries a request id); None for the others (a
    /// permit-expirable semaphore's: `PERMIT.RELEASE` takes no request id).
    fn key(&self) -> Option<HoldKey> {
        if self.target.multi || self.session || self.target.expiry.is_some() {
            return None;
        }
        let (kind, name) = self.target.holds.first()?;
        Some((*kind, name.clone(), self.owner.clone()))
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
        }
    }

    /// The release, in one round trip: the release command and, when it
    /// carries a request id, a `DEL` pipelined after it of the latches
    /// whose replies came: the acquisition's request latches (nothing
    /// resends the acquisition), and the unlock latches of the owner's
    /// releases before it. The release's own latch (the reply the server
    /// kept for it) is never in its own `DEL`, even the owner's last
    /// release's: it is left to the owner's next release's `DEL` (or to
    /// expire), so that a resend after a lost reply is always answered from
    /// it with what the first send replied, never inferred (a hold already
    /// gone before the first send is not held, not released). A session's
    /// hold (ended with its connection anyway) and a multi-lock's take no
    /// request id. A permit-expirable semaphore's permits are released by
    /// their ids (`PERMIT.RELEASE`, no request id: a lost reply is raised),
    /// with their acquisition's latches deleted. The `DEL`'s reply is not
    /// looked at: latches it missed expire.
    pub fn release(&self) -> Release {
        let request = self.key().map(|key| {
            let id = command::request_id();
            let earlier = self.holds.releasing(key, self.target.latch(&id));
            (id, earlier)
        });
        let cmd = match self.target.expiry {
            Some(_) => command::release_ids(self.target.name(), &self.ids),
            None => self.target.release(
                &self.owner,
                self.lease_ms,
                request.as_ref().map(|(id, _)| id.as_str()),
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
        }
    }

    /// Ok when the release's reply (the first of `replies`, the first
    /// send's or its resend's, answered from its latch) says the owner held
    /// what it released.
    pub fn released(&self, replies: Vec<Value>) -> Result<()> {
        self.target.released(&first(replies)?)
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

    fn hold(holds: &Holds, requests: &[&str]) -> Hold {
        Hold {
            place: Place::Fixed(redis::Client::open("redis://127.0.0.1:1/").expect("url")),
            target: Target::single(Kind::Lock, "l"),
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

    /// The release's request id and the `DEL`'s keys, if it has one.
    fn sent(release: &Release) -> (String, Option<Vec<String>>) {
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
    fn a_release_keeps_its_latch_for_the_owners_next_release() {
        let holds = Holds::default();
        let key: HoldKey = (Kind::Lock, "l".into(), "o:1".into());
        holds.taken(key.clone());
        holds.taken(key.clone());
        let first = hold(&holds, &["a1"]).release();
        assert!(first.resendable);
        let (first_id, del) = sent(&first);
        assert_eq!(
            del,
            Some(vec!["redisson_lock_request_latch:{l}:a1".to_string()]),
            "the acquisition's latch only: the release's own outlives its reply"
        );
        assert_eq!(holds.count(&key), 1);
        let last = hold(&holds, &["a2"]).release();
        assert!(last.resendable);
        let (last_id, del) = sent(&last);
        assert_eq!(
            del,
            Some(vec![
                format!("redisson_unlock_latch:{{l}}:{first_id}"),
                "redisson_lock_request_latch:{l}:a2".to_string(),
            ]),
            "the last release's own latch is not in its DEL either"
        );
        assert_eq!(holds.count(&key), 0);
        // The next cycle's release deletes it.
        holds.taken(key.clone());
        let next = hold(&holds, &[]).release();
        assert_eq!(
            sent(&next).1,
            Some(vec![format!("redisson_unlock_latch:{{l}}:{last_id}")])
        );
    }

    #[test]
    fn a_release_with_nothing_to_delete_sends_no_del() {
        let holds = Holds::default();
        let key: HoldKey = (Kind::Lock, "l".into(), "o:1".into());
        holds.taken(key);
        let release = hold(&holds, &[]).release();
        assert_eq!(sent(&release).1, None);
    }

    #[test]
    fn a_release_unknown_to_the_client_keeps_its_latch_too() {
        let holds = Holds::default();
        let key: HoldKey = (Kind::Lock, "l".into(), "o:1".into());
        let release = hold(&holds, &[]).release();
        let (id, del) = sent(&release);
        assert_eq!(del, None);
        assert_eq!(
            holds.map().get(&key).map(|c| c.latches.clone()),
            Some(vec![format!("redisson_unlock_latch:{{l}}:{id}")])
        );
    }

    #[test]
    fn expired_latches_of_released_holds_are_dropped() {
        let holds = Holds::default();
        let gone: HoldKey = (Kind::Lock, "gone".into(), "o:1".into());
        let held: HoldKey = (Kind::Lock, "held".into(), "o:1".into());
        holds.taken(held.clone());
        holds.map().insert(
            gone.clone(),
            Counted {
                count: 0,
                latches: vec!["redisson_unlock_latch:{gone}:x".into()],
                released_at: Some(
                    Instant::now() - Duration::from_millis(command::LATCH_TTL_MS + 1),
                ),
            },
        );
        hold(&holds, &[]).release();
        let map = holds.map();
        assert!(!map.contains_key(&gone), "its latch expired on the server");
        assert!(map.contains_key(&held), "still held");
    }

    #[test]
    fn not_held_is_not_held_however_the_reply_came() {
        let holds = Holds::default();
        holds.taken((Kind::Lock, "l".into(), "o:1".into()));
        let h = hold(&holds, &[]);
        h.release();
        assert!(matches!(h.released(vec![Value::Nil]), Err(Error::NotHeld)));
        assert!(h.released(vec![Value::Int(1)]).is_ok());
    }
}

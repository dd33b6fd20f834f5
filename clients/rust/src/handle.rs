//! What the blocking and the async clients share apart from their I/O: a
//! client's settings, a lock handle (where, what, for whom, with which
//! options) and its builder methods, what an acquisition sends, and a hold
//! (what its guard renews and releases).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Pipeline, Value};

use crate::cluster::Endpoint;
use crate::command::{self, Kind, Target, Wait};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::owner;
use crate::sync::{Masters, Plan};
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
}

impl Client {
    /// A new client id, the default options.
    pub fn new(endpoint: Endpoint) -> Client {
        Client {
            endpoint,
            client_id: owner::new_client_id(),
            options: Options::default(),
            masters: Masters::default(),
        }
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
        }
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

impl<O> Handle<O> {
    /// What an acquisition on `master` sends after it (see
    /// [`Masters::plan`]); None until `master`'s `INFO` was learned.
    pub fn plan(&self, master: &str) -> Option<Plan> {
        self.masters
            .plan(master, &self.options.sync, Instant::now())
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

    /// Adds a hold to a multi-lock.
    pub fn hold(mut self, kind: Kind, name: &str) -> Self {
        self.target.holds.push((kind, name.to_string()));
        self
    }

    /// The (first) lock's name.
    pub fn name(&self) -> &str {
        self.target.name()
    }

    /// The read-write lock's target for a hold of `kind`.
    pub fn of_kind(&self, kind: Kind) -> Target {
        let mut target = self.target.clone();
        if let Some(hold) = target.holds.first_mut() {
            hold.0 = kind;
        }
        target
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
/// granted it.
#[derive(Clone)]
pub(crate) struct Hold {
    pub client: redis::Client,
    pub target: Target,
    pub owner: String,
    pub token: Option<i64>,
    pub lease_ms: u64,
    pub session: bool,
    pub response_timeout: Option<Duration>,
    pub on_lost: Option<OnLost>,
    /// The request ids of its acquisition: their latches go with the
    /// release's (one `DEL`), or expire.
    pub requests: Vec<String>,
}

impl Hold {
    /// The hold `handle` took of `target` on the master `client`.
    pub fn new<O>(
        client: redis::Client,
        handle: &Handle<O>,
        target: &Target,
        acquisition: Acquisition<'_>,
        token: Option<i64>,
    ) -> Hold {
        Hold {
            client,
            target: target.clone(),
            owner: acquisition.owner,
            token,
            lease_ms: acquisition.lease_ms,
            session: handle.options.session,
            response_timeout: handle.options.response_timeout,
            on_lost: handle.on_lost.clone(),
            requests: acquisition.requests,
        }
    }

    /// What its watchdog renews.
    pub fn renewal(&self) -> Renewal {
        Renewal {
            target: self.target.clone(),
            owner: self.owner.clone(),
            lease_ms: self.lease_ms,
            response_timeout: self.response_timeout,
            on_lost: self.on_lost.clone(),
        }
    }

    /// The release, in one round trip: the release command and, when it
    /// carries a request id, the `DEL` of the reply the server kept for it
    /// and of the acquisition's request latches, pipelined (Redisson deletes
    /// them once it has the reply; nothing resends the acquisition). True
    /// when the pipeline may be sent again after a lost reply: the request
    /// id gets the first one's reply instead of releasing a second hold.
    /// A session's hold (ended with its connection anyway) and a
    /// multi-lock's take none.
    ///
    /// Were the reply lost after both commands ran, the resend finds no
    /// latch and releases again: a single hold answers `NotHeld`, a hold
    /// the owner re-entered loses one more level. That needs the connection
    /// to fail in the instant between the server's reply and its delivery.
    pub fn release(&self) -> (Pipeline, bool) {
        let request = (!self.target.multi && !self.session).then(command::request_id);
        let cmd = self
            .target
            .release(&self.owner, self.lease_ms, request.as_deref());
        let mut pipe = redis::pipe();
        pipe.ignore_errors().add_command(cmd);
        if let Some(request) = &request {
            let mut forget = redis::cmd("DEL");
            forget.arg(self.target.latch(request));
            for id in &self.requests {
                forget.arg(self.target.request_latch(id));
            }
            pipe.add_command(forget).ignore();
        }
        (pipe, request.is_some())
    }

    /// Ok when the release's reply (the first of `replies`) says the owner
    /// held what it released.
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

/// The first of a pipeline's `replies`; an error reply as the error.
pub(crate) fn first(replies: Vec<Value>) -> Result<Value> {
    match replies.into_iter().next() {
        Some(Value::ServerError(e)) => Err(Error::Redis(e.into())),
        Some(reply) => Ok(reply),
        None => Err(Error::UnexpectedReply("no reply".into())),
    }
}

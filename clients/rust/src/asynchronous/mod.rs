//! The async client, on tokio: the same locks as the blocking one, whose
//! acquisitions are futures, whose watchdog is a tokio task, and whose
//! guards release on drop by spawning the release on the runtime (or, to
//! see its outcome, with [`Guard::release`]).
//!
//! An async task moves between threads, so an async lock's owner is not
//! the thread's: each handle ([`Locks::lock`] and the like) gets its own,
//! `<client id>:<number>`, shared by its clones. The holds of one handle
//! re-enter each other; two handles of the same name are two owners.

mod redlock;

pub use redlock::{RedLock, RedLockGuard};

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};

use crate::cluster::{Endpoint, MAX_REDIRECTS};
use crate::command::{self, is_io, Kind, Target, Wait};
use crate::error::Result;
use crate::options::Options;
use crate::owner;
use crate::sync;
use crate::watchdog::{AsyncWatchdog, Renewal};

/// The async locks of one client: a client id and the options, as
/// [`crate::Locks`].
#[derive(Clone)]
pub struct Locks {
    endpoint: Endpoint,
    client_id: String,
    options: Options,
}

impl Locks {
    /// Locks on the server `client` connects to, with the default options.
    pub fn new(client: redis::Client) -> Locks {
        Locks {
            endpoint: Endpoint::Server(client),
            client_id: owner::new_client_id(),
            options: Options::default(),
        }
    }

    /// Locks in the Redis Cluster `seed` is a node of, as
    /// [`crate::Locks::cluster`].
    pub fn cluster(seed: redis::Client) -> Locks {
        Locks {
            endpoint: Endpoint::cluster(seed),
            client_id: owner::new_client_id(),
            options: Options::default(),
        }
    }

    /// The same locks with these options.
    pub fn with_options(mut self, options: Options) -> Locks {
        self.options = options;
        self
    }

    /// This client's id, the first part of its owners.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The plain lock `name`.
    pub fn lock(&self, name: &str) -> Lock {
        Lock(self.handle(Target::single(Kind::Lock, name)))
    }

    /// The fenced lock `name`: every acquisition returns the next token.
    pub fn fenced_lock(&self, name: &str) -> Lock {
        self.lock(name).fenced()
    }

    /// The read-write lock `name`.
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock(self.handle(Target::single(Kind::Read, name)))
    }

    /// Several holds taken at once (`LOCK.ACQUIREALL`), see
    /// [`crate::MultiLock`].
    pub fn multi_lock(&self) -> MultiLock {
        let mut target = Target::single(Kind::Lock, "");
        target.holds.clear();
        target.multi = true;
        MultiLock(self.handle(target))
    }

    fn handle(&self, target: Target) -> Handle {
        Handle {
            endpoint: self.endpoint.clone(),
            options: self.options.clone(),
            owner: owner::owner(&self.client_id, owner::fresh_id()),
            target,
        }
    }
}

#[derive(Clone)]
struct Handle {
    endpoint: Endpoint,
    options: Options,
    owner: String,
    target: Target,
}

/// A connection made within `connect_timeout` whose calls time out after
/// `timeout` (None: never).
async fn connect(
    client: &redis::Client,
    connect_timeout: Option<Duration>,
    timeout: Option<Duration>,
) -> Result<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_response_timeout(timeout)
        .set_connection_timeout(connect_timeout);
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

impl Handle {
    async fn acquire(&self, target: &Target, wait: Wait) -> Result<Guard> {
        target.check()?;
        self.options.check()?;
        let options = &self.options;
        let lease_ms = options.lease_ms();
        // Its own connection, whose response timeout covers the wait on the
        // server; a session hold lives as long as it.
        let name = target.holds.first().map_or("", |(_, n)| n.as_str());
        let cmd = target.acquire(&self.owner, lease_ms, wait, options.session);
        let mut client = self.endpoint.node(name);
        let mut asking = false;
        let mut redirects = 0;
        let (mut conn, reply) = loop {
            let mut conn = connect(
                &client,
                options.response_timeout,
                wait.timeout(options.response_timeout),
            )
            .await?;
            if asking {
                let _: Value = redis::cmd("ASKING").query_async(&mut conn).await?;
            }
            match cmd.query_async::<Value>(&mut conn).await {
                Ok(reply) => break (conn, reply),
                Err(e) => match self.endpoint.redirect(name, &e)? {
                    Some(to) if redirects < MAX_REDIRECTS => {
                        (client, asking) = (to.client, to.asking);
                        redirects += 1;
                    }
                    _ => return Err(e.into()),
                },
            }
        };
        let token = target.acquired(reply)?;
        if let Some(t) = options.response_timeout {
            conn.set_response_timeout(t);
        }
        let mut guard = Guard {
            client: client.clone(),
            target: target.clone(),
            owner: self.owner.clone(),
            token,
            lease_ms,
            conn: Some(conn),
            session: options.session,
            response_timeout: options.response_timeout,
            watchdog: None,
        };
        if let Err(e) = guard.check_replicas(options).await {
            let _ = guard.release_now().await;
            return Err(e);
        }
        if options.watchdog() {
            let renewal = Renewal {
                target: target.clone(),
                owner: guard.owner.clone(),
                lease_ms,
                response_timeout: options.response_timeout,
            };
            guard.watchdog = Some(AsyncWatchdog::start(client, renewal));
        }
        Ok(guard)
    }
}

/// The plain lock, as [`crate::Lock`].
#[derive(Clone)]
pub struct Lock(Handle);

impl Lock {
    /// Every acquisition takes the next fencing token.
    pub fn fenced(mut self) -> Lock {
        self.0.target.fenced = true;
        self
    }

    /// Taking it again is an error instead of a re-entry (`NOREENTRY`).
    pub fn non_reentrant(mut self) -> Lock {
        self.0.target.non_reentrant = true;
        self
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(mut self, lease: Duration) -> Lock {
        self.0.options.lease = Some(lease);
        self
    }

    /// Holds bound to their connection (`SESSION`).
    pub fn with_session(mut self) -> Lock {
        self.0.options.session = true;
        self
    }

    /// This owner instead of the handle's own.
    pub fn with_owner(mut self, owner: &str) -> Lock {
        self.0.owner = owner.to_string();
        self
    }

    /// The owner this handle's holds belong to.
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    /// The lock, waiting on the server as long as it takes.
    pub async fn acquire(&self) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::Forever).await
    }

    /// The lock, waiting on the server at most `wait` (zero: one attempt).
    pub async fn try_acquire(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::of(wait)).await
    }
}

/// The read-write lock, as [`crate::ReadWriteLock`].
#[derive(Clone)]
pub struct ReadWriteLock(Handle);

impl ReadWriteLock {
    /// Write holds take the next fencing token.
    pub fn fenced(mut self) -> ReadWriteLock {
        self.0.target.fenced = true;
        self
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(mut self, lease: Duration) -> ReadWriteLock {
        self.0.options.lease = Some(lease);
        self
    }

    /// Holds bound to their connection (`SESSION`).
    pub fn with_session(mut self) -> ReadWriteLock {
        self.0.options.session = true;
        self
    }

    /// This owner instead of the handle's own.
    pub fn with_owner(mut self, owner: &str) -> ReadWriteLock {
        self.0.owner = owner.to_string();
        self
    }

    fn target(&self, kind: Kind) -> Target {
        let mut target = self.0.target.clone();
        if let Some(hold) = target.holds.first_mut() {
            hold.0 = kind;
        }
        target
    }

    /// A read hold, waiting as long as it takes.
    pub async fn read(&self) -> Result<Guard> {
        self.0
            .acquire(&self.target(Kind::Read), Wait::Forever)
            .await
    }

    /// A read hold, waiting at most `wait` (zero: one attempt).
    pub async fn try_read(&self, wait: Duration) -> Result<Guard> {
        self.0
            .acquire(&self.target(Kind::Read), Wait::of(wait))
            .await
    }

    /// The write hold, waiting as long as it takes.
    pub async fn write(&self) -> Result<Guard> {
        self.0
            .acquire(&self.target(Kind::Write), Wait::Forever)
            .await
    }

    /// The write hold, waiting at most `wait` (zero: one attempt).
    pub async fn try_write(&self, wait: Duration) -> Result<Guard> {
        self.0
            .acquire(&self.target(Kind::Write), Wait::of(wait))
            .await
    }
}

/// Several holds taken at once, as [`crate::MultiLock`].
#[derive(Clone)]
pub struct MultiLock(Handle);

impl MultiLock {
    /// Adds the plain lock `name`.
    pub fn lock(self, name: &str) -> MultiLock {
        self.hold(Kind::Lock, name)
    }

    /// Adds a read hold of the read-write lock `name`.
    pub fn read(self, name: &str) -> MultiLock {
        self.hold(Kind::Read, name)
    }

    /// Adds the write hold of the read-write lock `name`.
    pub fn write(self, name: &str) -> MultiLock {
        self.hold(Kind::Write, name)
    }

    /// Adds a hold of this kind.
    pub fn hold(mut self, kind: Kind, name: &str) -> MultiLock {
        self.0.target.holds.push((kind, name.to_string()));
        self
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(mut self, lease: Duration) -> MultiLock {
        self.0.options.lease = Some(lease);
        self
    }

    /// Holds bound to their connection (`SESSION`).
    pub fn with_session(mut self) -> MultiLock {
        self.0.options.session = true;
        self
    }

    /// Every hold, waiting as long as it takes.
    pub async fn acquire(&self) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::Forever).await
    }

    /// Every hold, waiting at most `wait` (zero: one attempt).
    pub async fn try_acquire(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::of(wait)).await
    }
}

/// A hold. Dropped inside a tokio runtime, it is released by a task spawned
/// on it; [`Guard::release`] releases it and tells the outcome.
pub struct Guard {
    client: redis::Client,
    target: Target,
    owner: String,
    token: Option<i64>,
    lease_ms: u64,
    conn: Option<MultiplexedConnection>,
    session: bool,
    response_timeout: Option<Duration>,
    watchdog: Option<AsyncWatchdog>,
}

impl Guard {
    /// The fencing token a fenced acquisition took.
    pub fn token(&self) -> Option<i64> {
        self.token
    }

    /// The owner holding it.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// True once the watchdog found the hold gone.
    pub fn is_lost(&self) -> bool {
        self.watchdog.as_ref().is_some_and(AsyncWatchdog::is_lost)
    }

    /// Releases the hold now. `Ok(false)`: the owner no longer held it.
    pub async fn release(mut self) -> Result<bool> {
        self.release_now().await
    }

    async fn check_replicas(&mut self, options: &Options) -> Result<()> {
        let sync_options = &options.sync;
        if !sync_options.enabled {
            return Ok(());
        }
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        let role: Value = sync::role().query_async(conn).await?;
        let replicas = sync::replicas(&role);
        if replicas == 0 {
            return Ok(());
        }
        // WAIT counts the acknowledgements of this connection's own
        // writes, so it is sent on it, with a response timeout covering it.
        if let Some(t) = sync::timeout(options.response_timeout, sync_options.timeout) {
            conn.set_response_timeout(t);
        }
        let mut reply = None;
        if sync_options.aof {
            match sync::wait_aof(replicas, sync_options)
                .query_async::<Value>(conn)
                .await
            {
                Ok(v) => reply = Some(v),
                Err(e) if sync::lacks_wait_aof(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let reply = match reply {
            Some(v) => v,
            None => sync::wait(replicas, sync_options).query_async(conn).await?,
        };
        if let Some(t) = options.response_timeout {
            conn.set_response_timeout(t);
        }
        sync::verdict(sync::acknowledged(&reply)?, replicas, sync_options.timeout)
    }

    fn release_of(&self) -> Release {
        Release {
            client: self.client.clone(),
            target: self.target.clone(),
            owner: self.owner.clone(),
            lease_ms: self.lease_ms,
            session: self.session,
            response_timeout: self.response_timeout,
        }
    }

    async fn release_now(&mut self) -> Result<bool> {
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        let Some(conn) = self.conn.take() else {
            return Ok(false);
        };
        self.release_of().send(conn).await
    }
}

/// What a release needs, apart from the guard.
#[derive(Clone)]
struct Release {
    client: redis::Client,
    target: Target,
    owner: String,
    lease_ms: u64,
    session: bool,
    response_timeout: Option<Duration>,
}

impl Release {
    async fn send(self, mut conn: MultiplexedConnection) -> Result<bool> {
        let Release {
            client,
            target,
            owner,
            lease_ms,
            session,
            response_timeout,
        } = self;
        if target.multi || session {
            let reply: Value = target
                .release(&owner, lease_ms, None)
                .query_async(&mut conn)
                .await?;
            return target.released(&reply);
        }
        let request = command::request_id();
        let cmd = target.release(&owner, lease_ms, Some(&request));
        let reply: Value = match cmd.query_async(&mut conn).await {
            Ok(v) => v,
            Err(e) if is_io(&e) => {
                conn = connect(&client, response_timeout, response_timeout).await?;
                cmd.query_async(&mut conn).await?
            }
            Err(e) => return Err(e.into()),
        };
        let _: Value = redis::cmd("DEL")
            .arg(target.latch(&request))
            .query_async(&mut conn)
            .await?;
        target.released(&reply)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        let Some(conn) = self.conn.take() else {
            return;
        };
        // Outside a runtime nothing can be sent: the lease (or, for a
        // session, the connection closing) ends the hold.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let release = self.release_of();
            runtime.spawn(async move {
                let _ = release.send(conn).await;
            });
        }
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("holds", &self.target.holds)
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

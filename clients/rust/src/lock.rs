//! The blocking client: `Locks` (one client id, the options), the plain
//! lock and the guard every acquisition returns.

use std::time::Duration;

use redis::{Connection, Value};

use crate::cluster::{Endpoint, MAX_REDIRECTS};
use crate::command::{self, is_io, Kind, Target, Wait};
use crate::error::Result;
use crate::multi::MultiLock;
use crate::options::Options;
use crate::owner;
use crate::rwlock::ReadWriteLock;
use crate::sync;
use crate::watchdog::{Renewal, Watchdog};

/// The locks of one client, as a `RedissonClient` gives them: all share a
/// client id (a random UUID; owners are `<client id>:<thread id>`) and the
/// options.
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

    /// Locks in the Redis Cluster `seed` is a node of: each lock is taken
    /// on the master of its hash slot, found by following the cluster's
    /// redirections, and the replica check waits for that master's
    /// replicas. A multi-lock's names must share a hash tag.
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

    /// The plain lock `name` (Redisson's `getLock`).
    pub fn lock(&self, name: &str) -> Lock {
        Lock(self.handle(Target::single(Kind::Lock, name)))
    }

    /// The fenced lock `name` (Redisson's `getFencedLock`): every
    /// acquisition returns the next fencing token.
    pub fn fenced_lock(&self, name: &str) -> Lock {
        self.lock(name).fenced()
    }

    /// The read-write lock `name` (Redisson's `getReadWriteLock`).
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock::new(self.handle(Target::single(Kind::Read, name)))
    }

    /// A lock over several locks and read or write holds, taken and
    /// released all at once (`LOCK.ACQUIREALL`); add them with its builder.
    pub fn multi_lock(&self) -> MultiLock {
        let mut target = Target::single(Kind::Lock, "");
        target.holds.clear();
        target.multi = true;
        MultiLock::new(self.handle(target))
    }

    fn handle(&self, target: Target) -> Handle {
        Handle {
            endpoint: self.endpoint.clone(),
            client_id: self.client_id.clone(),
            options: self.options.clone(),
            owner: None,
            target,
        }
    }
}

/// A connection made within `timeout` whose replies are awaited as long
/// (None: no limit).
pub(crate) fn connect(client: &redis::Client, timeout: Option<Duration>) -> Result<Connection> {
    let conn = match timeout {
        Some(t) => client.get_connection_with_timeout(t)?,
        None => client.get_connection()?,
    };
    conn.set_read_timeout(timeout)?;
    Ok(conn)
}

/// What a lock handle is: where, what, for whom, with which options.
#[derive(Clone)]
pub(crate) struct Handle {
    pub endpoint: Endpoint,
    pub client_id: String,
    pub options: Options,
    pub owner: Option<String>,
    pub target: Target,
}

impl Handle {
    /// The owner an acquisition by the calling thread uses.
    pub fn owner(&self) -> String {
        self.owner
            .clone()
            .unwrap_or_else(|| owner::owner(&self.client_id, owner::thread_id()))
    }

    /// Takes the hold `target` for this thread's owner.
    pub fn acquire(&self, target: &Target, wait: Wait) -> Result<Guard> {
        target.check()?;
        self.options.check()?;
        let owner = self.owner();
        let options = &self.options;
        let lease_ms = options.lease_ms();
        // Each acquisition has a connection of its own: a BLOCK parks it,
        // and a session hold lives as long as it.
        let name = target.holds.first().map_or("", |(_, n)| n.as_str());
        let cmd = target.acquire(&owner, lease_ms, wait, options.session);
        let mut client = self.endpoint.node(name);
        let mut asking = false;
        let mut redirects = 0;
        let (conn, reply) = loop {
            let mut conn = connect(&client, options.response_timeout)?;
            if asking {
                let _: Value = redis::cmd("ASKING").query(&mut conn)?;
            }
            conn.set_read_timeout(wait.timeout(options.response_timeout))?;
            match cmd.query::<Value>(&mut conn) {
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
        conn.set_read_timeout(options.response_timeout)?;
        let mut guard = Guard {
            client: client.clone(),
            target: target.clone(),
            owner,
            token,
            lease_ms,
            conn: Some(conn),
            session: options.session,
            response_timeout: options.response_timeout,
            watchdog: None,
        };
        if let Err(e) = guard.check_replicas(options) {
            // Not acknowledged: released rather than held on a master that
            // could lose it.
            let _ = guard.release_now();
            return Err(e);
        }
        if options.watchdog() {
            let renewal = Renewal {
                target: target.clone(),
                owner: guard.owner.clone(),
                lease_ms,
                response_timeout: options.response_timeout,
            };
            guard.watchdog = Some(Watchdog::start(client, renewal));
        }
        Ok(guard)
    }
}

/// Redisson's `RLock` (`RFencedLock` with [`Lock::fenced`]): one holder at a
/// time, re-entrant per owner.
#[derive(Clone)]
pub struct Lock(pub(crate) Handle);

impl Lock {
    /// Every acquisition takes the next fencing token ([`Guard::token`]).
    pub fn fenced(mut self) -> Lock {
        self.0.target.fenced = true;
        self
    }

    /// The holder taking the lock again is an error instead of a re-entry
    /// (`NOREENTRY`).
    pub fn non_reentrant(mut self) -> Lock {
        self.0.target.non_reentrant = true;
        self
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(mut self, lease: Duration) -> Lock {
        self.0.options.lease = Some(lease);
        self
    }

    /// Holds bound to their connection, which the guard keeps open: the
    /// server renews them and releases them when it closes (`SESSION`).
    pub fn with_session(mut self) -> Lock {
        self.0.options.session = true;
        self
    }

    /// This owner instead of `<client id>:<thread id>`.
    pub fn with_owner(mut self, owner: &str) -> Lock {
        self.0.owner = Some(owner.to_string());
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.target.holds.first().map_or("", |(_, n)| n.as_str())
    }

    /// The lock, waiting on the server as long as it takes.
    pub fn acquire(&self) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::Forever)
    }

    /// The lock, waiting on the server at most `wait` (zero: one attempt).
    /// [`crate::Error::NotAcquired`] if it is still held then.
    pub fn try_acquire(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::of(wait))
    }
}

/// A hold, released when dropped (or by [`Guard::release`]). While it
/// lives, its watchdog (if any) renews it.
pub struct Guard {
    client: redis::Client,
    target: Target,
    owner: String,
    token: Option<i64>,
    lease_ms: u64,
    conn: Option<Connection>,
    session: bool,
    response_timeout: Option<Duration>,
    watchdog: Option<Watchdog>,
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

    /// True once the watchdog found the hold gone (its lease ran out, or it
    /// was forced open or deleted): whatever it protected is no longer
    /// protected. Always false without a watchdog.
    pub fn is_lost(&self) -> bool {
        self.watchdog.as_ref().is_some_and(Watchdog::is_lost)
    }

    /// Releases the hold now. `Ok(false)`: the owner no longer held it.
    pub fn release(mut self) -> Result<bool> {
        self.release_now()
    }

    fn check_replicas(&mut self, options: &Options) -> Result<()> {
        let sync_options = &options.sync;
        let Some(conn) = self.conn.as_mut().filter(|_| sync_options.enabled) else {
            return Ok(());
        };
        let role: Value = sync::role().query(conn)?;
        let replicas = sync::replicas(&role);
        if replicas == 0 {
            return Ok(());
        }
        conn.set_read_timeout(sync::timeout(
            options.response_timeout,
            sync_options.timeout,
        ))?;
        let mut reply = None;
        if sync_options.aof {
            match sync::wait_aof(replicas, sync_options).query::<Value>(conn) {
                Ok(v) => reply = Some(v),
                Err(e) if sync::lacks_wait_aof(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let reply = match reply {
            Some(v) => v,
            None => sync::wait(replicas, sync_options).query(conn)?,
        };
        conn.set_read_timeout(options.response_timeout)?;
        sync::verdict(sync::acknowledged(&reply)?, replicas, sync_options.timeout)
    }

    fn release_now(&mut self) -> Result<bool> {
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        let Some(mut conn) = self.conn.take() else {
            return Ok(false);
        };
        if self.target.multi || self.session {
            // A session's hold ends with its connection anyway; a
            // multi-lock's release takes no request id to retry with.
            let reply: Value = self
                .target
                .release(&self.owner, self.lease_ms, None)
                .query(&mut conn)?;
            return self.target.released(&reply);
        }
        // With a request id, a release sent again after a lost reply gets
        // the first one's reply instead of releasing a second hold.
        let request = command::request_id();
        let cmd = self
            .target
            .release(&self.owner, self.lease_ms, Some(&request));
        let reply: Value = match cmd.query(&mut conn) {
            Ok(v) => v,
            Err(e) if is_io(&e) => {
                conn = connect(&self.client, self.response_timeout)?;
                cmd.query(&mut conn)?
            }
            Err(e) => return Err(e.into()),
        };
        let _: Value = redis::cmd("DEL")
            .arg(self.target.latch(&request))
            .query(&mut conn)?;
        self.target.released(&reply)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Nothing to do if it fails: the lease ends the hold anyway.
        let _ = self.release_now();
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

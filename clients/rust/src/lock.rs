//! The blocking client: `Locks` (one client id, the options), the plain
//! lock and the guard every acquisition returns.

use std::time::Duration;

use redis::{Connection, Value};

use crate::cluster::{Endpoint, Route};
use crate::command::{is_io, Kind, Target, Wait};
use crate::error::Result;
use crate::handle::{self, Hold};
use crate::multi::MultiLock;
use crate::options::Options;
use crate::rwlock::ReadWriteLock;
use crate::sync;
use crate::watchdog::Watchdog;

/// The locks of one client, as a `RedissonClient` gives them: all share a
/// client id (a random UUID; owners are `<client id>:<thread id>`) and the
/// options.
#[derive(Clone)]
pub struct Locks(handle::Client);

impl Locks {
    /// Locks on the server `client` connects to, with the default options.
    pub fn new(client: redis::Client) -> Locks {
        Locks(handle::Client::new(Endpoint::Server(client)))
    }

    /// Locks in the Redis Cluster `seed` is a node of: each lock is taken
    /// on the master of its hash slot, found by following the cluster's
    /// redirections, and the replica check waits for that master's
    /// replicas. A multi-lock's names must share a hash tag.
    pub fn cluster(seed: redis::Client) -> Locks {
        Locks(handle::Client::new(Endpoint::cluster(seed)))
    }

    /// The same locks with these options.
    pub fn with_options(self, options: Options) -> Locks {
        Locks(self.0.with_options(options))
    }

    /// This client's id, the first part of its owners.
    pub fn client_id(&self) -> &str {
        self.0.client_id()
    }

    /// The plain lock `name` (Redisson's `getLock`).
    pub fn lock(&self, name: &str) -> Lock {
        Lock(self.0.handle(Target::single(Kind::Lock, name), None))
    }

    /// The fenced lock `name` (Redisson's `getFencedLock`): every
    /// acquisition returns the next fencing token.
    pub fn fenced_lock(&self, name: &str) -> Lock {
        self.lock(name).fenced()
    }

    /// The read-write lock `name` (Redisson's `getReadWriteLock`).
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock::new(self.0.handle(Target::single(Kind::Read, name), None))
    }

    /// A lock over several locks and read or write holds, taken and
    /// released all at once (`LOCK.ACQUIREALL`); add them with its builder.
    pub fn multi_lock(&self) -> MultiLock {
        MultiLock::new(self.0.handle(Target::multi(), None))
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

/// A blocking lock handle: its owner, when set, replaces the calling
/// thread's.
pub(crate) type Handle = handle::Handle<Option<String>>;

impl Handle {
    /// Takes the hold `target` for this thread's owner.
    pub fn acquire(&self, target: &Target, wait: Wait) -> Result<Guard> {
        let options = &self.options;
        let acquisition = self.acquisition(target, wait, self.thread_owner())?;
        // Each acquisition has a connection of its own: a BLOCK parks it,
        // and a session hold lives as long as it.
        let name = acquisition.name;
        let mut route = Route::start(&self.endpoint, name);
        let (conn, reply) = loop {
            let mut conn = connect(&route.client, options.response_timeout)?;
            if route.asking {
                let _: Value = redis::cmd("ASKING").query(&mut conn)?;
            }
            conn.set_read_timeout(wait.timeout(options.response_timeout))?;
            match acquisition.cmd.query::<Value>(&mut conn) {
                Ok(reply) => break (conn, reply),
                Err(e) => route.follow(&self.endpoint, name, e)?,
            }
        };
        let token = target.acquired(reply)?;
        conn.set_read_timeout(options.response_timeout)?;
        let mut guard = Guard {
            hold: Hold::new(route.client, target, acquisition, token, options),
            conn: Some(conn),
            watchdog: None,
        };
        if let Err(e) = guard.check_replicas(options) {
            // Not acknowledged: released rather than held on a master that
            // could lose it.
            let _ = guard.release_now();
            return Err(e);
        }
        if options.watchdog() {
            let hold = &guard.hold;
            guard.watchdog = Some(Watchdog::start(hold.client.clone(), hold.renewal()));
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
    pub fn fenced(self) -> Lock {
        Lock(self.0.fenced())
    }

    /// The holder taking the lock again is an error instead of a re-entry
    /// (`NOREENTRY`).
    pub fn non_reentrant(self) -> Lock {
        Lock(self.0.non_reentrant())
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(self, lease: Duration) -> Lock {
        Lock(self.0.with_lease(lease))
    }

    /// Holds bound to their connection, which the guard keeps open: the
    /// server renews them and releases them when it closes (`SESSION`).
    pub fn with_session(self) -> Lock {
        Lock(self.0.with_session())
    }

    /// This owner instead of `<client id>:<thread id>`.
    pub fn with_owner(self, owner: &str) -> Lock {
        Lock(self.0.with_owner(owner))
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
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
    hold: Hold,
    conn: Option<Connection>,
    watchdog: Option<Watchdog>,
}

impl Guard {
    /// The fencing token a fenced acquisition took.
    pub fn token(&self) -> Option<i64> {
        self.hold.token
    }

    /// The owner holding it.
    pub fn owner(&self) -> &str {
        &self.hold.owner
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
        let aof = if sync_options.aof {
            sync::aof_reply(sync::wait_aof(replicas, sync_options).query(conn))?
        } else {
            None
        };
        let reply = match aof {
            Some(v) => v,
            None => sync::wait(replicas, sync_options).query(conn)?,
        };
        conn.set_read_timeout(options.response_timeout)?;
        sync::settled(&reply, replicas, sync_options)
    }

    fn release_now(&mut self) -> Result<bool> {
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        let Some(mut conn) = self.conn.take() else {
            return Ok(false);
        };
        let hold = &self.hold;
        let (cmd, request) = hold.release();
        let reply: Value = match cmd.query(&mut conn) {
            Ok(v) => v,
            Err(e) if is_io(&e) && request.is_some() => {
                conn = connect(&hold.client, hold.response_timeout)?;
                cmd.query(&mut conn)?
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(request) = request {
            let _: Value = hold.forget(&request).query(&mut conn)?;
        }
        hold.target.released(&reply)
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
        self.hold.fmt_guard(f)
    }
}

//! The blocking client: `Locks`, a client's locks (one client id, the
//! options), which makes every kind of lock handle.

use crate::cluster::Endpoint;
use crate::command::{Kind, Target};
use crate::error::Result;
use crate::handle;
use crate::lock::Lock;
use crate::multi::MultiLock;
use crate::options::Options;
use crate::rwlock::ReadWriteLock;
use crate::sentinel::{self, Sentinels};

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

    /// Locks on the master of the deployment `sentinels` watch, with the
    /// default options: the Sentinels are asked for it now (an error when
    /// none names a master that says it is one), and again whenever a call
    /// fails as one to a master that moved does (a lost connection,
    /// `READONLY`, [`crate::Error::NotSynced`]); the calls, renewals and
    /// releases after that go to the master they name. What was learned of
    /// the replicas is the deployment's, as with [`Locks::with_master`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), rwlock_client::Error> {
    /// use rwlock_client::{Locks, Sentinels};
    ///
    /// let sentinels = Sentinels::new(
    ///     ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/"],
    ///     "mymaster",
    /// )?;
    /// let locks = Locks::sentinel(sentinels)?;
    /// let _held = locks.lock("orders").acquire()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn sentinel(sentinels: Sentinels) -> Result<Locks> {
        let master = sentinel::find_blocking(&sentinels)?;
        Ok(Locks(handle::Client::new(Endpoint::sentinel(
            sentinels, master,
        ))))
    }

    /// Locks in the Redis Cluster `seed` is a node of: each lock is taken
    /// on the master of its hash slot, found by following the cluster's
    /// redirections, and the replica check waits for that master's
    /// replicas. A multi-lock's names must share a hash tag.
    pub fn cluster(seed: redis::Client) -> Locks {
        Locks(handle::Client::new(Endpoint::cluster(seed)))
    }

    /// The same locks (client id, options, holds) on another master of the
    /// same replicated set: the one a Sentinel names after a failover. What
    /// was learned of the replicas is the deployment's and carries over, so
    /// a promoted replica's acquisitions wait for as many replicas as the
    /// old master's did ([`crate::Replicas::Auto`] never lowers it), which
    /// a new `Locks` for the new master would learn from a node that may
    /// not have them yet. Holds taken before are renewed and released on
    /// the master that granted them. ([`Locks::sentinel`] does this by
    /// itself; a `Locks` it made stops following once given a master.)
    pub fn with_master(self, master: redis::Client) -> Locks {
        Locks(self.0.with_master(master))
    }

    /// The same locks with these options.
    pub fn with_options(self, options: Options) -> Locks {
        Locks(self.0.with_options(options))
    }

    /// The same locks with this client id (the first part of every owner)
    /// instead of the random UUID each `Locks` gets: for a process that
    /// must keep its owners across restarts. Never share one with another
    /// client or a Redisson instance: their owners would be the same.
    /// [`crate::Error::InvalidArgument`] when empty.
    pub fn with_client_id(self, client_id: &str) -> Result<Locks> {
        Ok(Locks(self.0.with_client_id(client_id)?))
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

    /// The fair lock `name` (Redisson's `getFairLock`, `RFairLock`): holders
    /// in the order they arrived, in one line with Redisson's own waiters
    /// (`FAIRLOCK.*`). A wait waits in the line on the server, which takes
    /// the waiter out of it when the wait runs out; a try (zero wait) never
    /// joins it (`NOQUEUE`); the watchdog renews it (`LOCK.RENEW`).
    /// [`Lock::non_reentrant`] is Redisson's non-reentrant fair lock; a fair
    /// lock has no fencing tokens and no sessions ([`Lock::fenced`] and
    /// [`Lock::with_session`] make its acquisitions fail with
    /// [`crate::Error::InvalidArgument`]).
    pub fn fair_lock(&self, name: &str) -> Lock {
        Lock(self.0.handle(Target::single(Kind::Lock, name), None).fair())
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

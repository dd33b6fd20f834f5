//! The blocking client: `Client`, a client's locks (one client id, the
//! options), which makes every kind of lock handle.

use crate::builders::client_builders;
use crate::cluster::Endpoint;
use crate::command::Target;
use crate::error::Result;
use crate::guard::Handle;
use crate::handle;
use crate::latch::CountDownLatch;
use crate::lock::Lock;
use crate::multi::MultiLock;
use crate::permit::PermitExpirableSemaphore;
use crate::rwlock::ReadWriteLock;
use crate::semaphore::Semaphore;
use crate::sentinel::{self, Sentinels};

/// The locks of one client, as a `RedissonClient` gives them: all share a
/// client id (a random UUID; owners are `<client id>:<thread id>`) and the
/// options.
#[derive(Clone)]
pub struct Client(handle::Client);

impl Client {
    client_builders!(Client);

    /// A client of the master of the deployment `sentinels` watch, with the
    /// default options: the Sentinels are asked for it now (an error when
    /// none names a master that says it is one), and again whenever a call
    /// fails as one to a master that moved does (a lost connection,
    /// `READONLY`, [`crate::Error::NotSynced`]); the calls, renewals and
    /// releases after that go to the master they name. What was learned of
    /// the replicas is the deployment's, as with [`Client::with_master`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), rwlock_client::Error> {
    /// use rwlock_client::{Client, Sentinels};
    ///
    /// let sentinels = Sentinels::new(
    ///     ["redis://10.0.0.1:26379/", "redis://10.0.0.2:26379/"],
    ///     "mymaster",
    /// )?;
    /// let locks = Client::sentinel(sentinels)?;
    /// let _held = locks.lock("orders").acquire()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn sentinel(sentinels: Sentinels) -> Result<Client> {
        let master = sentinel::find_blocking(&sentinels)?;
        Ok(Client(handle::Client::new(Endpoint::sentinel(
            sentinels, master,
        ))))
    }

    /// A handle whose owner is the calling thread's when it acquires.
    fn handle(&self, target: Target) -> Handle {
        self.0.handle(target, None)
    }
}

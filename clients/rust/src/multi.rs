//! Redisson's `RedissonMultiLock` for the blocking client, done by the
//! server in one atomic command: all the holds are taken together or none.

use std::time::Duration;

use crate::command::{Kind, Wait};
use crate::error::Result;
use crate::guard::{Guard, Handle};

/// Several plain locks and read or write holds of read-write locks, taken
/// all at once by `LOCK.ACQUIREALL` (none is taken while any is in the
/// way), renewed together and released together. Unlike Redisson's
/// multi-lock, which takes the locks one by one, no one ever sees part of
/// them taken.
#[derive(Clone)]
pub struct MultiLock(Handle);

impl MultiLock {
    pub(crate) fn new(handle: Handle) -> MultiLock {
        MultiLock(handle)
    }

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
    pub fn hold(self, kind: Kind, name: &str) -> MultiLock {
        MultiLock(self.0.hold(kind, name))
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(self, lease: Duration) -> MultiLock {
        MultiLock(self.0.with_lease(lease))
    }

    /// Holds bound to their connection (`SESSION`), see [`crate::Options::session`].
    pub fn with_session(self) -> MultiLock {
        MultiLock(self.0.with_session())
    }

    /// Calls `on_lost`, on the watchdog's thread, when a watchdog renewing a
    /// hold of this lock finds it gone (its lease ran out, or it was forced
    /// open or deleted): whatever the hold protected is no longer protected.
    /// Only holds with a watchdog (no lease, no session) are watched.
    pub fn on_lost(
        self,
        on_lost: impl Fn(&crate::watchdog::LostHold) + Send + Sync + 'static,
    ) -> MultiLock {
        MultiLock(self.0.on_lost(on_lost))
    }

    /// This owner instead of `<client id>:<thread id>`.
    pub fn with_owner(self, owner: &str) -> MultiLock {
        MultiLock(self.0.with_owner(owner))
    }

    /// The owner an acquisition by the calling thread takes the holds for:
    /// `<client id>:<thread id>`, or the one set with
    /// [`MultiLock::with_owner`].
    pub fn owner(&self) -> String {
        self.0.thread_owner()
    }

    /// True when the calling thread's owner has every hold, as the server
    /// says.
    pub fn is_held(&self) -> Result<bool> {
        self.0.is_held(&self.0.target)
    }

    /// Releases the holds of the calling thread's owner without their
    /// guard, as [`crate::Lock::unlock`]; [`crate::Error::NotHeld`] when
    /// any was not held (those held are released all the same).
    pub fn unlock(&self) -> Result<()> {
        self.0.unlock(&self.0.target)
    }

    /// Every hold, waiting on the server as long as it takes.
    pub fn acquire(&self) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::Forever)
    }

    /// Every hold, waiting at most `wait` (zero: one attempt);
    /// [`crate::Error::NotAcquired`] with the largest PTTL in the way.
    pub fn try_acquire(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.0.target, Wait::of(wait))
    }
}

//! Redisson's `RedissonMultiLock` for the blocking client, done by the
//! server in one atomic command: all the holds are taken together or none.

use std::time::Duration;

use crate::builders::lock_builders;
use crate::command::{Kind, Wait};
use crate::error::Result;
use crate::guard::{Guard, Handle};

/// Several plain locks and read or write holds of read-write locks, taken
/// all at once by `LOCK.ACQUIREALL` (none is taken while any is in the
/// way), renewed together and released together. Unlike Redisson's
/// multi-lock, which takes the locks one by one, no one ever sees part of
/// them taken.
#[derive(Clone)]
pub struct MultiLock(pub(crate) Handle);

impl MultiLock {
    lock_builders!(MultiLock, "the watchdog's thread");

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

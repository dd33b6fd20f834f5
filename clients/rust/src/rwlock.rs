//! Redisson's `RReadWriteLock` for the blocking client.

use std::time::Duration;

use crate::builders::lock_builders;
use crate::command::{Kind, Wait};
use crate::error::Result;
use crate::guard::{Guard, Handle};

/// A read-write lock: many readers or one writer. Re-entrant per owner; the
/// writer may also read, a reader cannot upgrade to write.
#[derive(Clone)]
pub struct ReadWriteLock(pub(crate) Handle);

impl ReadWriteLock {
    lock_builders!(ReadWriteLock, "the watchdog's thread", fenced);

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The owner an acquisition by the calling thread takes holds for (read
    /// and write alike, so the writer may also read): `<client id>:<thread
    /// id>`, or the one set with [`ReadWriteLock::with_owner`].
    pub fn owner(&self) -> String {
        self.0.thread_owner()
    }

    /// True when the calling thread's owner has a read hold, as the server
    /// says (Redisson's `readLock().isHeldByCurrentThread()`).
    pub fn is_read_held(&self) -> Result<bool> {
        self.0.is_held(&self.0.of_kind(Kind::Read))
    }

    /// True when the calling thread's owner has the write hold, as the
    /// server says (Redisson's `writeLock().isHeldByCurrentThread()`).
    pub fn is_write_held(&self) -> Result<bool> {
        self.0.is_held(&self.0.of_kind(Kind::Write))
    }

    /// Releases one read hold of the calling thread's owner without its
    /// guard, as [`crate::Lock::unlock`].
    pub fn unlock_read(&self) -> Result<()> {
        self.0.unlock(&self.0.of_kind(Kind::Read))
    }

    /// Releases one write hold of the calling thread's owner without its
    /// guard, as [`crate::Lock::unlock`].
    pub fn unlock_write(&self) -> Result<()> {
        self.0.unlock(&self.0.of_kind(Kind::Write))
    }

    /// A read hold, waiting on the server as long as it takes.
    pub fn read(&self) -> Result<Guard> {
        self.0.acquire(&self.0.of_kind(Kind::Read), Wait::Forever)
    }

    /// A read hold, waiting at most `wait` (zero: one attempt).
    pub fn try_read(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.0.of_kind(Kind::Read), Wait::of(wait))
    }

    /// The write hold, waiting on the server as long as it takes.
    pub fn write(&self) -> Result<Guard> {
        self.0.acquire(&self.0.of_kind(Kind::Write), Wait::Forever)
    }

    /// The write hold, waiting at most `wait` (zero: one attempt).
    pub fn try_write(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.0.of_kind(Kind::Write), Wait::of(wait))
    }
}

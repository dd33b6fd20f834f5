//! Redisson's `RLock` (and `RFencedLock`) for the blocking client.

use std::time::Duration;

use crate::builders::lock_builders;
use crate::command::Wait;
use crate::error::Result;
use crate::guard::{Guard, Handle};

/// Redisson's `RLock` (`RFencedLock` with [`Lock::fenced`]): one holder at a
/// time, re-entrant per owner.
#[derive(Clone)]
pub struct Lock(pub(crate) Handle);

impl Lock {
    lock_builders!(Lock, "the watchdog's thread", fenced, non_reentrant);

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The owner an acquisition by the calling thread takes the lock for:
    /// `<client id>:<thread id>`, or the one set with [`Lock::with_owner`].
    pub fn owner(&self) -> String {
        self.0.thread_owner()
    }

    /// True when the calling thread's owner holds the lock, as the server
    /// says (Redisson's `isHeldByCurrentThread`): false once its lease ran
    /// out or it was forced open.
    pub fn is_held(&self) -> Result<bool> {
        self.0.is_held(&self.0.target)
    }

    /// Releases one hold of the calling thread's owner without its guard
    /// (Redisson's `unlock()`), for a hold whose guard was forgotten
    /// (`std::mem::forget`) or is out of reach; a guard still alive would
    /// release another hold when dropped. [`crate::Error::NotHeld`] when
    /// the owner held none.
    pub fn unlock(&self) -> Result<()> {
        self.0.unlock(&self.0.target)
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

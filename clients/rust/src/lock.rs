//! Redisson's `RLock` (and `RFencedLock`) for the blocking client.

use crate::builders::{hold_calls, lock_builders};
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

    hold_calls!(
        None => is_held, unlock, acquire, try_acquire:
        "the lock" of "the calling thread's owner"
    );
}

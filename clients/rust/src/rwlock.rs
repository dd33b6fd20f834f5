//! Redisson's `RReadWriteLock` for the blocking client.

use crate::builders::{hold_calls, lock_builders};
use crate::command::Kind;
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

    hold_calls!(
        Some(Kind::Read) => is_read_held, unlock_read, read, try_read:
        "a read hold" of "the calling thread's owner"
    );

    hold_calls!(
        Some(Kind::Write) => is_write_held, unlock_write, write, try_write:
        "the write hold" of "the calling thread's owner"
    );
}

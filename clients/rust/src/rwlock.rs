//! Redisson's `RReadWriteLock` for the blocking client.

use std::time::Duration;

use crate::command::{Kind, Target, Wait};
use crate::error::Result;
use crate::lock::{Guard, Handle};

/// A read-write lock: many readers or one writer. Re-entrant per owner; the
/// writer may also read, a reader cannot upgrade to write.
#[derive(Clone)]
pub struct ReadWriteLock(Handle);

impl ReadWriteLock {
    pub(crate) fn new(handle: Handle) -> ReadWriteLock {
        ReadWriteLock(handle)
    }

    /// Write holds take the next fencing token ([`Guard::token`]).
    pub fn fenced(mut self) -> ReadWriteLock {
        self.0.target.fenced = true;
        self
    }

    /// A fixed lease and no watchdog.
    pub fn with_lease(mut self, lease: Duration) -> ReadWriteLock {
        self.0.options.lease = Some(lease);
        self
    }

    /// Holds bound to their connection (`SESSION`), see [`crate::Options::session`].
    pub fn with_session(mut self) -> ReadWriteLock {
        self.0.options.session = true;
        self
    }

    /// This owner instead of `<client id>:<thread id>`.
    pub fn with_owner(mut self, owner: &str) -> ReadWriteLock {
        self.0.owner = Some(owner.to_string());
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.0.target.holds.first().map_or("", |(_, n)| n.as_str())
    }

    fn target(&self, kind: Kind) -> Target {
        let mut target = self.0.target.clone();
        if let Some(hold) = target.holds.first_mut() {
            hold.0 = kind;
        }
        target
    }

    /// A read hold, waiting on the server as long as it takes.
    pub fn read(&self) -> Result<Guard> {
        self.0.acquire(&self.target(Kind::Read), Wait::Forever)
    }

    /// A read hold, waiting at most `wait` (zero: one attempt).
    pub fn try_read(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.target(Kind::Read), Wait::of(wait))
    }

    /// The write hold, waiting on the server as long as it takes.
    pub fn write(&self) -> Result<Guard> {
        self.0.acquire(&self.target(Kind::Write), Wait::Forever)
    }

    /// The write hold, waiting at most `wait` (zero: one attempt).
    pub fn try_write(&self, wait: Duration) -> Result<Guard> {
        self.0.acquire(&self.target(Kind::Write), Wait::of(wait))
    }
}

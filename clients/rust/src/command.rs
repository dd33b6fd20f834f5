//! What each kind of hold sends and what its replies mean: the commands of
//! an acquisition, a release and a renewal, built and read here once for
//! the blocking and the async clients.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::{Error, Result};

/// How long the server keeps a release's reply for a retry sent with the
/// same request id: Redisson's default.
pub(crate) const LATCH_TTL_MS: u64 = 13_500;

/// One lock a hold covers, by its kind: what `LOCK.ACQUIREALL` calls
/// `LOCK`, `READ` or `WRITE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A plain lock (Redisson's `RLock`).
    Lock,
    /// A read hold of a read-write lock (`RReadWriteLock.readLock()`).
    Read,
    /// The write hold of a read-write lock (`RReadWriteLock.writeLock()`).
    Write,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Lock => "LOCK",
            Kind::Read => "READ",
            Kind::Write => "WRITE",
        }
    }
}

/// What a guard holds: one lock, or (a multi-lock) several taken at once.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub holds: Vec<(Kind, String)>,
    pub multi: bool,
    pub fenced: bool,
    pub non_reentrant: bool,
}

/// How long an acquisition may wait for the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// One attempt: refused at once while held.
    No,
    /// Parked on the server (`BLOCK ms`) at most this long.
    For(Duration),
    /// Parked on the server until the lock is free (`BLOCK 0`).
    Forever,
}

impl Wait {
    pub fn of(wait: Duration) -> Wait {
        if wait.is_zero() {
            Wait::No
        } else {
            Wait::For(wait)
        }
    }

    /// The read timeout a call waiting this long needs when calls that do
    /// not wait get `base` (None: no timeout).
    pub fn timeout(self, base: Option<Duration>) -> Option<Duration> {
        match self {
            Wait::No => base,
            Wait::For(wait) => base.map(|t| t + wait),
            Wait::Forever => None,
        }
    }
}

/// Milliseconds, at least 1 (the commands take no zero lease).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Target {
    pub fn single(kind: Kind, name: &str) -> Target {
        Target {
            holds: vec![(kind, name.to_string())],
            multi: false,
            fenced: false,
            non_reentrant: false,
        }
    }

    /// Refuses what the server would refuse, before sending anything.
    pub fn check(&self) -> Result<()> {
        if self.holds.is_empty() {
            return Err(Error::InvalidArgument(
                "a multi-lock needs at least one lock",
            ));
        }
        if self.holds.iter().any(|(_, name)| name.is_empty()) {
            return Err(Error::InvalidArgument("a lock name cannot be empty"));
        }
        Ok(())
    }

    fn push_holds(&self, cmd: &mut Cmd) {
        cmd.arg("HOLDS").arg(self.holds.len());
        for (kind, name) in &self.holds {
            cmd.arg(kind.word()).arg(name);
        }
    }

    /// The single lock's kind and name (the first of a multi-lock's).
    fn first(&self) -> (Kind, &str) {
        self.holds
            .first()
            .map_or((Kind::Lock, ""), |(k, n)| (*k, n.as_str()))
    }

    pub fn acquire(&self, owner: &str, lease_ms: u64, wait: Wait, session: bool) -> Cmd {
        let block = |cmd: &mut Cmd| match wait {
            Wait::No => {}
            Wait::For(d) => {
                cmd.arg("BLOCK").arg(millis(d));
            }
            Wait::Forever => {
                cmd.arg("BLOCK").arg(0);
            }
        };
        if self.multi {
            let mut cmd = redis::cmd("LOCK.ACQUIREALL");
            cmd.arg(owner).arg(lease_ms);
            block(&mut cmd);
            if session {
                cmd.arg("SESSION");
            }
            self.push_holds(&mut cmd);
            return cmd;
        }
        let (kind, name) = self.first();
        let mut cmd = redis::cmd(match kind {
            Kind::Lock => "LOCK.ACQUIRE",
            Kind::Read => "RWLOCK.READ",
            Kind::Write => "RWLOCK.WRITE",
        });
        cmd.arg(name).arg(owner).arg(lease_ms);
        block(&mut cmd);
        if self.fenced && kind != Kind::Read {
            cmd.arg("FENCED");
        }
        if self.non_reentrant && kind == Kind::Lock {
            cmd.arg("NOREENTRY");
        }
        if session {
            cmd.arg("SESSION");
        }
        cmd
    }

    /// The fencing token when taken with one, nothing when taken without,
    /// `NotAcquired` when refused.
    pub fn acquired(&self, reply: Value) -> Result<Option<i64>> {
        match reply {
            Value::Nil => Ok(None),
            Value::Int(pttl) => Err(Error::NotAcquired { pttl }),
            Value::Array(items) => match items.as_slice() {
                [Value::Int(-1), Value::Int(token)] => Ok(Some(*token)),
                [Value::Int(pttl), Value::Int(-1)] => Err(Error::NotAcquired { pttl: *pttl }),
                _ => Err(Error::UnexpectedReply(format!("{items:?}"))),
            },
            other => Err(Error::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// A release; `request` makes a retry of it idempotent (single locks).
    pub fn release(&self, owner: &str, request: Option<&str>) -> Cmd {
        if self.multi {
            let mut cmd = redis::cmd("LOCK.UNLOCKALL");
            cmd.arg(owner);
            self.push_holds(&mut cmd);
            return cmd;
        }
        let (kind, name) = self.first();
        let mut cmd = match kind {
            Kind::Lock => redis::cmd("LOCK.UNLOCK"),
            Kind::Read | Kind::Write => redis::cmd("RWLOCK.UNLOCK"),
        };
        cmd.arg(name).arg(owner);
        if kind != Kind::Lock {
            cmd.arg(kind.word());
        }
        if let Some(id) = request {
            cmd.arg("REQUEST").arg(id).arg(LATCH_TTL_MS);
        }
        cmd
    }

    /// The key where the server keeps a release's reply for `request`:
    /// Redisson deletes it once it has the reply.
    pub fn latch(&self, request: &str) -> String {
        let (_, name) = self.first();
        if name.contains('{') {
            format!("redisson_unlock_latch:{name}:{request}")
        } else {
            format!("redisson_unlock_latch:{{{name}}}:{request}")
        }
    }

    /// True when the owner held what it released (0 or 1; a multi-lock:
    /// every hold).
    pub fn released(&self, reply: &Value) -> Result<bool> {
        match reply {
            Value::Nil => Ok(false),
            Value::Int(_) => Ok(true),
            Value::Array(items) if self.multi => Ok(items.iter().all(|v| *v != Value::Nil)),
            other => Err(Error::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// The watchdog's call.
    pub fn renew(&self, owner: &str, lease_ms: u64) -> Cmd {
        if self.multi {
            let mut cmd = redis::cmd("LOCK.RENEWALL");
            cmd.arg(owner).arg(lease_ms);
            self.push_holds(&mut cmd);
            return cmd;
        }
        let (kind, name) = self.first();
        let mut cmd = match kind {
            Kind::Lock => redis::cmd("LOCK.RENEW"),
            Kind::Read | Kind::Write => redis::cmd("RWLOCK.RENEW"),
        };
        cmd.arg(name).arg(owner).arg(lease_ms);
        cmd
    }

    /// True while every hold is still the owner's.
    pub fn renewed(reply: &Value) -> Result<bool> {
        match reply {
            Value::Int(n) => Ok(*n == 1),
            Value::Array(items) => Ok(items.iter().all(|v| *v == Value::Int(1))),
            other => Err(Error::UnexpectedReply(format!("{other:?}"))),
        }
    }
}

/// A random request id for a release.
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// True when the error is the connection's (the command may not have run),
/// not the server's refusal.
pub(crate) fn is_io(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

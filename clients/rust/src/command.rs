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

    /// A multi-lock with no holds yet.
    pub fn multi() -> Target {
        Target {
            holds: Vec::new(),
            multi: true,
            fenced: false,
            non_reentrant: false,
        }
    }

    /// The single lock's name (the first of a multi-lock's).
    pub fn name(&self) -> &str {
        self.first().1
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

    /// `LOCK.<verb> <name> <owner>` for a plain lock, `RWLOCK.<verb> …` for
    /// a read-write lock's hold, and the hold's kind.
    fn on_lock(&self, verb: &str, owner: &str) -> (Kind, Cmd) {
        let (kind, name) = self.first();
        let family = if kind == Kind::Lock { "LOCK" } else { "RWLOCK" };
        let mut cmd = redis::cmd(&format!("{family}.{verb}"));
        cmd.arg(name).arg(owner);
        (kind, cmd)
    }

    /// A release; a hold still held after it (a re-entered one) lasts
    /// `lease_ms` again, as Redisson's unlock re-arms it; `request` makes a
    /// retry of it idempotent (single locks).
    pub fn release(&self, owner: &str, lease_ms: u64, request: Option<&str>) -> Cmd {
        if self.multi {
            let mut cmd = redis::cmd("LOCK.UNLOCKALL");
            cmd.arg(owner);
            self.push_holds(&mut cmd);
            return cmd;
        }
        let (kind, mut cmd) = self.on_lock("UNLOCK", owner);
        if kind != Kind::Lock {
            cmd.arg(kind.word());
        }
        cmd.arg("LEASE").arg(lease_ms);
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

    /// Ok when the owner held what it released (0 or 1; a multi-lock:
    /// every hold), [`Error::NotHeld`] when it held nothing (nil; a
    /// multi-lock: any hold).
    pub fn released(&self, reply: &Value) -> Result<()> {
        match reply {
            Value::Nil => Err(Error::NotHeld),
            Value::Int(_) => Ok(()),
            Value::Array(items) if self.multi => {
                if items.iter().all(|v| *v != Value::Nil) {
                    Ok(())
                } else {
                    Err(Error::NotHeld)
                }
            }
            other => Err(Error::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// One `HEXISTS <name> <field>` per hold: whether `owner` holds it, in
    /// the hash the module keeps in Redisson's layout (a plain lock's and a
    /// read hold's field is the owner, a write hold's `<owner>:write`), as
    /// Redisson's `isHeldByThread` asks.
    pub fn held(&self, owner: &str) -> Vec<(String, Cmd)> {
        self.holds
            .iter()
            .map(|(kind, name)| {
                let mut cmd = redis::cmd("HEXISTS");
                cmd.arg(name);
                match kind {
                    Kind::Write => cmd.arg(format!("{owner}:write")),
                    Kind::Lock | Kind::Read => cmd.arg(owner),
                };
                (name.clone(), cmd)
            })
            .collect()
    }

    /// The watchdog's call.
    pub fn renew(&self, owner: &str, lease_ms: u64) -> Cmd {
        if self.multi {
            let mut cmd = redis::cmd("LOCK.RENEWALL");
            cmd.arg(owner).arg(lease_ms);
            self.push_holds(&mut cmd);
            return cmd;
        }
        let (_, mut cmd) = self.on_lock("RENEW", owner);
        cmd.arg(lease_ms);
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

/// An acquisition's failure as the caller should see it: the server's
/// `NON_REENTRANT_REACQUIRE` refusal as [`Error::NotReentrant`].
pub(crate) fn acquire_error(e: Error) -> Error {
    match e {
        Error::Redis(ref r) if r.code() == Some("NON_REENTRANT_REACQUIRE") => Error::NotReentrant,
        other => other,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<other>".to_string(),
            })
            .collect()
    }

    /// A command's words, as `redis-cli` takes them.
    fn words(line: &str) -> Vec<&str> {
        line.split(' ').collect()
    }

    #[test]
    fn acquisitions_are_spelled_as_the_module_takes_them() {
        let mut lock = Target::single(Kind::Lock, "a");
        lock.fenced = true;
        lock.non_reentrant = true;
        let cmd = lock.acquire("o:1", 500, Wait::For(Duration::from_secs(2)), true);
        assert_eq!(
            args(&cmd),
            words("LOCK.ACQUIRE a o:1 500 BLOCK 2000 FENCED NOREENTRY SESSION")
        );
        let read = Target::single(Kind::Read, "r");
        assert_eq!(
            args(&read.acquire("o:1", 9, Wait::Forever, false)),
            words("RWLOCK.READ r o:1 9 BLOCK 0")
        );
        let multi = Target {
            holds: vec![(Kind::Lock, "a".into()), (Kind::Write, "b".into())],
            multi: true,
            fenced: false,
            non_reentrant: false,
        };
        assert_eq!(
            args(&multi.acquire("o:1", 9, Wait::No, true)),
            words("LOCK.ACQUIREALL o:1 9 SESSION HOLDS 2 LOCK a WRITE b")
        );
        assert_eq!(
            args(&multi.renew("o:1", 9)),
            words("LOCK.RENEWALL o:1 9 HOLDS 2 LOCK a WRITE b")
        );
        assert_eq!(
            args(&read.release("o:1", 9, Some("id"))),
            words("RWLOCK.UNLOCK r o:1 READ LEASE 9 REQUEST id 13500")
        );
        let plain = Target::single(Kind::Lock, "a");
        assert_eq!(
            args(&plain.release("o:1", 9, None)),
            words("LOCK.UNLOCK a o:1 LEASE 9")
        );
        assert_eq!(args(&plain.renew("o:1", 9)), words("LOCK.RENEW a o:1 9"));
        assert_eq!(args(&read.renew("o:1", 9)), words("RWLOCK.RENEW r o:1 9"));
        assert_eq!(read.latch("id"), "redisson_unlock_latch:{r}:id");
        assert_eq!(
            Target::single(Kind::Lock, "{x}:1").latch("id"),
            "redisson_unlock_latch:{x}:1:id"
        );
    }

    #[test]
    fn replies_are_read_as_the_module_gives_them() {
        let lock = Target::single(Kind::Lock, "a");
        assert_eq!(lock.acquired(Value::Nil).ok(), Some(None));
        let fenced = Value::Array(vec![Value::Int(-1), Value::Int(7)]);
        assert_eq!(lock.acquired(fenced).ok(), Some(Some(7)));
        let refused = Value::Array(vec![Value::Int(900), Value::Int(-1)]);
        assert!(matches!(
            lock.acquired(refused),
            Err(Error::NotAcquired { pttl: 900 })
        ));
        assert!(matches!(
            lock.acquired(Value::Int(5)),
            Err(Error::NotAcquired { pttl: 5 })
        ));
        assert!(matches!(
            lock.acquired(Value::Okay),
            Err(Error::UnexpectedReply(_))
        ));
        assert_eq!(Target::renewed(&Value::Int(0)).ok(), Some(false));
        let all = Value::Array(vec![Value::Int(1), Value::Int(1)]);
        assert_eq!(Target::renewed(&all).ok(), Some(true));
        let one_gone = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert_eq!(Target::renewed(&one_gone).ok(), Some(false));
        assert!(lock.released(&Value::Int(0)).is_ok(), "still held");
        assert!(lock.released(&Value::Int(1)).is_ok());
        assert!(matches!(lock.released(&Value::Nil), Err(Error::NotHeld)));
        let multi = Target {
            holds: vec![(Kind::Lock, "a".into()), (Kind::Read, "b".into())],
            multi: true,
            fenced: false,
            non_reentrant: false,
        };
        let partly = Value::Array(vec![Value::Int(1), Value::Nil]);
        assert!(matches!(multi.released(&partly), Err(Error::NotHeld)));
    }

    #[test]
    fn is_held_asks_for_each_holds_field() {
        let mut rw = Target::single(Kind::Write, "w");
        assert_eq!(
            rw.held("o:1")
                .iter()
                .map(|(_, c)| args(c))
                .collect::<Vec<_>>(),
            vec![words("HEXISTS w o:1:write")]
        );
        rw.holds.push((Kind::Lock, "p".into()));
        rw.holds.push((Kind::Read, "r".into()));
        let fields: Vec<Vec<String>> = rw.held("o:1").iter().map(|(_, c)| args(c)).collect();
        assert_eq!(fields[1], words("HEXISTS p o:1"));
        assert_eq!(fields[2], words("HEXISTS r o:1"));
    }

    #[test]
    fn a_wait_raises_the_timeout_by_itself() {
        let base = Some(Duration::from_millis(500));
        assert_eq!(Wait::No.timeout(base), base);
        assert_eq!(
            Wait::For(Duration::from_secs(2)).timeout(base),
            Some(Duration::from_millis(2_500))
        );
        assert_eq!(Wait::Forever.timeout(base), None);
        assert_eq!(Wait::of(Duration::ZERO), Wait::No);
    }
}

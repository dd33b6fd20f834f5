//! What each kind of hold sends and what its replies mean: the commands of
//! an acquisition, a release and a renewal, built and read here once for
//! the blocking and the async clients.

use std::time::Duration;

use redis::{Cmd, Value};

use crate::error::{Error, Result};

/// How long the server keeps a release's reply for a retry sent with the
/// same request id: Redisson's default.
pub(crate) const LATCH_TTL_MS: u64 = 13_500;

/// The most holds `HELD n` may say (the module refuses more).
const HELD_MAX: u64 = 100_000;

/// What makes a resend of an acquisition or a release after a lost reply
/// safe (docs/design.md §14.7, §14.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resend<'a> {
    /// `REQUEST id ttl` (a semaphore's, a permit-expirable semaphore's):
    /// the server keeps the first send's reply in a latch for `ttl` ms and
    /// answers a resend with that id from it.
    Request(&'a str, u64),
    /// `HELD n` (a single lock's): the owner held `n` holds of this kind
    /// before the call, so the server tells a resend whose first send ran
    /// (the owner's count one past `n`, or one short for a release) from a
    /// first send, from the lock's hash alone, writing no latch.
    Held(u64),
}

impl Resend<'_> {
    /// `HELD count` for an acquisition made while the owner held `count`,
    /// None past what the module takes (then nothing makes it resendable).
    pub fn held_acquisition(count: u64) -> Option<Resend<'static>> {
        (count <= HELD_MAX).then_some(Resend::Held(count))
    }

    /// `HELD count` for a release made while the owner held `count`; None
    /// for a count the client does not know (0: a hold it did not take, or
    /// one forgotten after `NotHeld`) or past what the module takes: such
    /// a release cannot tell its own resend from a first send.
    pub fn held_release(count: u64) -> Option<Resend<'static>> {
        (1..=HELD_MAX)
            .contains(&count)
            .then_some(Resend::Held(count))
    }

    fn push(self, cmd: &mut Cmd) {
        match self {
            Resend::Request(id, ttl) => cmd.arg("REQUEST").arg(id).arg(ttl),
            Resend::Held(n) => cmd.arg("HELD").arg(n),
        };
    }
}

/// One lock a hold covers, by its kind: what `LOCK.ACQUIREALL` calls
/// `LOCK`, `READ` or `WRITE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// A plain lock taken in arrival order (`FAIRLOCK.*`).
    pub fair: bool,
    /// A semaphore's permits (`SEMAPHORE.*`, Redisson's `RSemaphore`): the
    /// acquisition takes this many and the release gives them back. The
    /// hold is the semaphore's name; permits have no owner and no lease.
    pub permits: Option<u64>,
    /// With `permits`, a permit-expirable semaphore's (`PERMIT.*`,
    /// Redisson's `RPermitExpirableSemaphore`): each permit taken is an id
    /// with a lease of its own, released by id.
    pub expiry: Option<Expiry>,
}

/// How long a permit-expirable semaphore's permits last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// The handle's lease, or without one the watchdog's, renewed by it.
    Leased,
    /// Never (lease -1, Redisson's default): nothing renews them.
    Never,
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

    /// What is left of this wait `elapsed` after it began: one attempt
    /// when it ran out.
    pub fn left(self, elapsed: Duration) -> Wait {
        match self {
            Wait::For(wait) => Wait::of(wait.saturating_sub(elapsed)),
            other => other,
        }
    }

    /// How long the server keeps an acquisition's grant for its resend:
    /// 13.5 s (the release's) plus the wait. A parked call's latch is
    /// stored when it is served, at the earliest when it was sent, and its
    /// lost reply is noticed at the latest the wait (and the response
    /// timeout) after the send; `BLOCK 0`'s lost reply shows only as a
    /// connection error, at once.
    pub fn request_ttl(self) -> u64 {
        match self {
            Wait::For(wait) => LATCH_TTL_MS.saturating_add(millis(wait)),
            Wait::No | Wait::Forever => LATCH_TTL_MS,
        }
    }

    /// Adds the wait to a command that takes `BLOCK ms` (`BLOCK 0`: no
    /// limit); one attempt adds nothing.
    fn block(self, cmd: &mut Cmd) {
        match self {
            Wait::No => {}
            Wait::For(d) => {
                cmd.arg("BLOCK").arg(millis(d));
            }
            Wait::Forever => {
                cmd.arg("BLOCK").arg(0);
            }
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
            fair: false,
            permits: None,
            expiry: None,
        }
    }

    /// The semaphore `name`, one permit at a time until [`Target::taking`]
    /// says how many.
    pub fn semaphore(name: &str) -> Target {
        Target {
            permits: Some(1),
            ..Target::single(Kind::Lock, name)
        }
    }

    /// The permit-expirable semaphore `name`, its permits leased.
    pub fn permit_semaphore(name: &str) -> Target {
        Target {
            expiry: Some(Expiry::Leased),
            ..Target::semaphore(name)
        }
    }

    /// The same semaphore, for an acquisition or a release of `permits`.
    pub fn taking(&self, permits: u64) -> Target {
        Target {
            permits: Some(permits),
            ..self.clone()
        }
    }

    /// True when a watchdog renews what it holds: a lock's hold and a
    /// leased permit of a permit-expirable semaphore do (as the options
    /// say); a semaphore's permits and never-expiring ones have no lease to
    /// renew.
    pub fn renewable(&self) -> bool {
        self.permits.is_none() || self.expiry == Some(Expiry::Leased)
    }

    /// A multi-lock with no holds yet.
    pub fn multi() -> Target {
        Target {
            holds: Vec::new(),
            multi: true,
            fenced: false,
            non_reentrant: false,
            fair: false,
            permits: None,
            expiry: None,
        }
    }

    /// Whether its acquisition can be sent again after a lost reply: a
    /// single lock's (the fair lock's too, with `HELD`) and a semaphore's
    /// (with `REQUEST`) can, `LOCK.ACQUIREALL` cannot.
    pub fn resendable(&self) -> bool {
        !self.multi
    }

    /// Whether its acquisitions and releases carry `REQUEST id ttl`: a
    /// semaphore's and a permit-expirable semaphore's (a lock's carry
    /// `HELD`, a multi-lock's nothing).
    pub fn requests(&self) -> bool {
        self.permits.is_some()
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
        if self.fair && self.fenced {
            return Err(Error::InvalidArgument(
                "a fair lock takes no fencing tokens",
            ));
        }
        if self
            .permits
            .is_some_and(|n| n == 0 || i64::try_from(n).is_err())
        {
            return Err(Error::InvalidArgument(
                "permits are taken and given back from 1 to 2^63 - 1 at a time",
            ));
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

    /// The acquisition; `resend` makes it idempotent: a resend answers a
    /// granted first send as granted and takes nothing more.
    pub fn acquire(
        &self,
        owner: &str,
        lease_ms: u64,
        wait: Wait,
        session: bool,
        resend: Option<Resend<'_>>,
    ) -> Cmd {
        let with_request = |mut cmd: Cmd| {
            if let Some(resend) = resend {
                resend.push(&mut cmd);
            }
            cmd
        };
        if self.fair {
            return with_request(self.fair_acquire(owner, lease_ms, wait));
        }
        let block = |cmd: &mut Cmd| wait.block(cmd);
        if let Some(permits) = self.permits {
            let mut cmd = redis::cmd(&self.family("ACQUIRE"));
            cmd.arg(self.name()).arg(permits);
            match self.expiry {
                Some(Expiry::Leased) => cmd.arg(lease_ms),
                Some(Expiry::Never) => cmd.arg(-1),
                None => &mut cmd,
            };
            block(&mut cmd);
            return with_request(cmd);
        }
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
        with_request(cmd)
    }

    /// A semaphore's command `verb`: `SEMAPHORE.<verb>`, or a
    /// permit-expirable semaphore's `PERMIT.<verb>`.
    pub fn family(&self, verb: &str) -> String {
        let family = if self.expiry.is_some() {
            "PERMIT"
        } else {
            "SEMAPHORE"
        };
        format!("{family}.{verb}")
    }

    /// `FAIRLOCK.ACQUIRE name owner lease` and: one attempt `NOQUEUE`
    /// (Redisson's `tryLock()`, which never joins the line); a wait of W ms
    /// `WAIT W BLOCK W` (Redisson's `tryLock(W)` sends W as the thread wait
    /// time); no limit `BLOCK 0` (the server's `rwlock.fair-wait`, Redisson's
    /// 5 minutes). The server takes a waiter whose wait ran out out of the
    /// line, as Redisson's `acquireFailed` does.
    fn fair_acquire(&self, owner: &str, lease_ms: u64, wait: Wait) -> Cmd {
        let mut cmd = redis::cmd("FAIRLOCK.ACQUIRE");
        cmd.arg(self.name()).arg(owner).arg(lease_ms);
        match wait {
            Wait::No => cmd.arg("NOQUEUE"),
            Wait::For(d) => cmd.arg("WAIT").arg(millis(d)).arg("BLOCK").arg(millis(d)),
            Wait::Forever => cmd.arg("BLOCK").arg(0),
        };
        if self.non_reentrant {
            cmd.arg("NOREENTRY");
        }
        cmd
    }

    /// The fencing token when taken with one, nothing when taken without,
    /// `NotAcquired` when refused (a fair lock's try, whose `NOQUEUE`
    /// refusal replies 1, with a `pttl` of 0: unknown; a semaphore's 0,
    /// with no hold in the way to tell a `pttl` of).
    pub fn acquired(&self, reply: Value, wait: Wait) -> Result<Option<i64>> {
        if self.permits.is_some() {
            return match reply {
                Value::Int(1) => Ok(None),
                Value::Int(0) => Err(Error::NotAcquired { pttl: 0 }),
                other => Err(Error::UnexpectedReply(format!("{other:?}"))),
            };
        }
        match reply {
            Value::Nil => Ok(None),
            Value::Int(_) if self.fair && wait == Wait::No => Err(Error::NotAcquired { pttl: 0 }),
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
        let family = match kind {
            // A fair hold is renewed as a plain one (`LOCK.RENEW`).
            Kind::Lock if self.fair && verb != "RENEW" => "FAIRLOCK",
            Kind::Lock => "LOCK",
            Kind::Read | Kind::Write => "RWLOCK",
        };
        let mut cmd = redis::cmd(&format!("{family}.{verb}"));
        cmd.arg(name).arg(owner);
        (kind, cmd)
    }

    /// A release; a hold still held after it (a re-entered one) lasts
    /// `lease_ms` again, as Redisson's unlock re-arms it; `resend` makes a
    /// retry of it idempotent (single locks, semaphores).
    pub fn release(&self, owner: &str, lease_ms: u64, resend: Option<Resend<'_>>) -> Cmd {
        if let Some(permits) = self.permits {
            let mut cmd = redis::cmd("SEMAPHORE.RELEASE");
            cmd.arg(self.name()).arg(permits);
            if let Some(resend) = resend {
                resend.push(&mut cmd);
            }
            return cmd;
        }
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
        match resend {
            // A last release is never replayed (design §14.8): `HELD 1`
            // would run as without it, two arguments longer. The caller
            // still resends it as one.
            Some(Resend::Held(1)) | None => {}
            Some(resend) => resend.push(&mut cmd),
        }
        cmd
    }

    /// The key where the server keeps a release's reply for `request`:
    /// Redisson deletes it once it has the reply.
    pub fn latch(&self, request: &str) -> String {
        format!("redisson_unlock_latch:{}:{request}", self.prefixed())
    }

    /// The key where the server keeps an acquisition's grant for `request`,
    /// in the lock's hash slot.
    pub fn request_latch(&self, request: &str) -> String {
        format!("redisson_lock_request_latch:{}:{request}", self.prefixed())
    }

    /// The name as Redisson's `prefixName` puts it in derived keys: in
    /// braces, unless it has a `{` already.
    fn prefixed(&self) -> String {
        let (_, name) = self.first();
        if name.contains('{') {
            name.to_string()
        } else {
            format!("{{{name}}}")
        }
    }

    /// Ok when the owner held what it released (0 or 1; a multi-lock:
    /// every hold; a semaphore's nil: anyone may give permits back; a
    /// permit-expirable semaphore's count of the ids released, not 0),
    /// [`Error::NotHeld`] when it held nothing (nil; a multi-lock: any
    /// hold).
    pub fn released(&self, reply: &Value) -> Result<()> {
        match reply {
            // `PERMIT.RELEASE`'s all or none: none was released.
            Value::Int(0) if self.expiry.is_some() => Err(Error::NotHeld),
            Value::Nil if self.permits.is_some() => Ok(()),
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
            // A multi-lock's reply, or the replies of a pipeline of
            // renewals (a permit-expirable semaphore's, one per id).
            Value::Array(items) => {
                for item in items {
                    if !Target::renewed(item)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            other => Err(Error::UnexpectedReply(format!("{other:?}"))),
        }
    }
}

/// `PERMIT.RELEASE name id [id ...]`: all of them or none.
pub(crate) fn release_ids(name: &str, ids: &[String]) -> Cmd {
    let mut cmd = redis::cmd("PERMIT.RELEASE");
    cmd.arg(name).arg(ids);
    cmd
}

/// `PERMIT.UPDATELEASE name id lease`: a permit's new lease from now, `None`
/// never expiring (-1).
pub(crate) fn update_lease(name: &str, id: &str, lease: Option<Duration>) -> Cmd {
    let mut cmd = redis::cmd("PERMIT.UPDATELEASE");
    cmd.arg(name).arg(id);
    match lease {
        Some(lease) => cmd.arg(millis(lease)),
        None => cmd.arg(-1),
    };
    cmd
}

/// `<command> name id`: `PERMIT.TRYRELEASE`, `PERMIT.LEASETIME`.
pub(crate) fn on_id(command: &str, name: &str, id: &str) -> Cmd {
    let mut cmd = on(command, name);
    cmd.arg(id);
    cmd
}

/// The ids a granted `PERMIT.ACQUIRE` replied: one (a string) or several
/// (an array); refused, [`Error::NotAcquired`] (its reply, the nearest
/// expiry as absolute server time or nil, is no PTTL: 0, unknown).
pub(crate) fn permit_ids(reply: Value) -> Result<Vec<String>> {
    let id = |v: Value| match v {
        Value::BulkString(b) => {
            String::from_utf8(b).map_err(|e| Error::UnexpectedReply(e.to_string()))
        }
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    };
    match reply {
        Value::Nil | Value::Int(_) => Err(Error::NotAcquired { pttl: 0 }),
        Value::Array(items) => items.into_iter().map(id).collect(),
        one => Ok(vec![id(one)?]),
    }
}

/// `<family>.TRYSETPERMITS name permits [TTL ms]` (`target`'s family):
/// sets the count when there is none (Redisson's `trySetPermits`), for
/// `ttl` when given (`SEMAPHORE.*` only).
pub(crate) fn try_set_permits(target: &Target, permits: i64, ttl: Option<Duration>) -> Cmd {
    let mut cmd = redis::cmd(&target.family("TRYSETPERMITS"));
    cmd.arg(target.name()).arg(permits);
    if let Some(ttl) = ttl {
        cmd.arg("TTL").arg(millis(ttl));
    }
    cmd
}

/// `<family>.<verb> name permits` (`target`'s family): `ADDPERMITS`
/// (negative: takes them away), `SETPERMITS`.
pub(crate) fn with_permits(target: &Target, verb: &str, permits: i64) -> Cmd {
    let mut cmd = redis::cmd(&target.family(verb));
    cmd.arg(target.name()).arg(permits);
    cmd
}

/// `LATCH.TRYSETCOUNT name count`: sets the count when there is no latch.
pub(crate) fn try_set_count(name: &str, count: u64) -> Cmd {
    let mut cmd = redis::cmd("LATCH.TRYSETCOUNT");
    cmd.arg(name).arg(count);
    cmd
}

/// `<command> name`: a semaphore's `DRAIN` and `AVAILABLE`, a latch's
/// `COUNTDOWN`, `COUNT` and `DELETE`.
pub(crate) fn on(command: &str, name: &str) -> Cmd {
    let mut cmd = redis::cmd(command);
    cmd.arg(name);
    cmd
}

/// `LATCH.AWAIT name [BLOCK ms]`: one look without a wait, else parked on
/// the server until the count reaches zero (or the wait runs out).
pub(crate) fn await_zero(name: &str, wait: Wait) -> Cmd {
    let mut cmd = on("LATCH.AWAIT", name);
    wait.block(&mut cmd);
    cmd
}

/// An integer reply (a count).
pub(crate) fn integer(reply: Value) -> Result<i64> {
    match reply {
        Value::Int(n) => Ok(n),
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

/// A reply of 1 (done) or 0 (not).
pub(crate) fn flag(reply: Value) -> Result<bool> {
    match reply {
        Value::Int(n @ (0 | 1)) => Ok(n == 1),
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

/// The nil reply of a command that replies nothing else.
pub(crate) fn nil(reply: Value) -> Result<()> {
    match reply {
        Value::Nil => Ok(()),
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
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

/// A random request id for a release or an acquisition.
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// True when the error is the connection's (the command may not have run),
/// not the server's refusal.
pub(crate) fn is_io(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// A command's words, for the unit tests to compare with what the module
/// takes.
#[cfg(test)]
pub(crate) fn args(cmd: &Cmd) -> Vec<String> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => "<other>".to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command's words, as `redis-cli` takes them.
    fn words(line: &str) -> Vec<&str> {
        line.split(' ').collect()
    }

    #[test]
    fn acquisitions_are_spelled_as_the_module_takes_them() {
        let mut lock = Target::single(Kind::Lock, "a");
        lock.fenced = true;
        lock.non_reentrant = true;
        let two_s = Wait::For(Duration::from_secs(2));
        let cmd = lock.acquire("o:1", 500, two_s, true, None);
        assert_eq!(
            args(&cmd),
            words("LOCK.ACQUIRE a o:1 500 BLOCK 2000 FENCED NOREENTRY SESSION")
        );
        let cmd = lock.acquire("o:1", 500, Wait::No, false, Some(Resend::Held(0)));
        assert_eq!(
            args(&cmd),
            words("LOCK.ACQUIRE a o:1 500 FENCED NOREENTRY HELD 0")
        );
        let read = Target::single(Kind::Read, "r");
        assert_eq!(
            args(&read.acquire("o:1", 9, Wait::Forever, false, None)),
            words("RWLOCK.READ r o:1 9 BLOCK 0")
        );
        let mut multi = Target::multi();
        multi.holds = vec![(Kind::Lock, "a".into()), (Kind::Write, "b".into())];
        assert!(
            !multi.resendable(),
            "LOCK.ACQUIREALL takes nothing to resend it"
        );
        assert!(read.resendable() && !read.requests(), "a lock takes HELD");
        assert_eq!(
            args(&multi.acquire("o:1", 9, Wait::No, true, None)),
            words("LOCK.ACQUIREALL o:1 9 SESSION HOLDS 2 LOCK a WRITE b")
        );
        assert_eq!(
            args(&multi.renew("o:1", 9)),
            words("LOCK.RENEWALL o:1 9 HOLDS 2 LOCK a WRITE b")
        );
        assert_eq!(
            args(&read.release("o:1", 9, Some(Resend::Held(2)))),
            words("RWLOCK.UNLOCK r o:1 READ LEASE 9 HELD 2")
        );
        assert_eq!(
            args(&read.release("o:1", 9, Some(Resend::Held(1)))),
            words("RWLOCK.UNLOCK r o:1 READ LEASE 9"),
            "a last release is never replayed: no HELD 1"
        );
        assert_eq!(Resend::held_acquisition(0), Some(Resend::Held(0)));
        assert_eq!(Resend::held_acquisition(100_001), None);
        assert_eq!(
            Resend::held_release(0),
            None,
            "a count the client does not know"
        );
        assert_eq!(Resend::held_release(100_000), Some(Resend::Held(100_000)));
        assert_eq!(Resend::held_release(100_001), None);
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
        assert_eq!(
            read.request_latch("id"),
            "redisson_lock_request_latch:{r}:id"
        );
        assert_eq!(
            Target::single(Kind::Lock, "{x}:1").request_latch("id"),
            "redisson_lock_request_latch:{x}:1:id"
        );
    }

    #[test]
    fn fair_locks_are_spelled_as_the_module_takes_them() {
        let mut fair = Target::single(Kind::Lock, "f");
        fair.fair = true;
        assert!(fair.resendable(), "FAIRLOCK.ACQUIRE takes HELD");
        assert_eq!(
            args(&fair.acquire("o:1", 9, Wait::No, false, None)),
            words("FAIRLOCK.ACQUIRE f o:1 9 NOQUEUE")
        );
        let wait = Wait::For(Duration::from_millis(700));
        assert_eq!(
            args(&fair.acquire("o:1", 9, wait, false, Some(Resend::Held(1)))),
            words("FAIRLOCK.ACQUIRE f o:1 9 WAIT 700 BLOCK 700 HELD 1")
        );
        fair.non_reentrant = true;
        assert_eq!(
            args(&fair.acquire("o:1", 9, Wait::Forever, false, None)),
            words("FAIRLOCK.ACQUIRE f o:1 9 BLOCK 0 NOREENTRY")
        );
        assert_eq!(
            args(&fair.release("o:1", 9, Some(Resend::Held(1)))),
            words("FAIRLOCK.UNLOCK f o:1 LEASE 9")
        );
        assert_eq!(args(&fair.renew("o:1", 9)), words("LOCK.RENEW f o:1 9"));
        assert!(matches!(
            fair.acquired(Value::Int(1), Wait::No),
            Err(Error::NotAcquired { pttl: 0 })
        ));
        assert!(matches!(
            fair.acquired(Value::Int(800), wait),
            Err(Error::NotAcquired { pttl: 800 })
        ));
        fair.fenced = true;
        assert!(matches!(fair.check(), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn semaphores_and_latches_are_spelled_as_the_module_takes_them() {
        let sem = Target::semaphore("s").taking(3);
        assert!(sem.requests() && sem.resendable() && !sem.renewable());
        let wait = Wait::For(Duration::from_millis(700));
        let request = Some(Resend::Request("id", wait.request_ttl()));
        assert_eq!(
            args(&sem.acquire("", 9, wait, false, request)),
            words("SEMAPHORE.ACQUIRE s 3 BLOCK 700 REQUEST id 14200")
        );
        assert_eq!(
            args(&sem.acquire("", 9, Wait::No, false, None)),
            words("SEMAPHORE.ACQUIRE s 3")
        );
        assert_eq!(
            args(&sem.release("", 9, Some(Resend::Request("id", LATCH_TTL_MS)))),
            words("SEMAPHORE.RELEASE s 3 REQUEST id 13500")
        );
        assert_eq!(sem.latch("id"), "redisson_unlock_latch:{s}:id");
        assert_eq!(
            sem.request_latch("id"),
            "redisson_lock_request_latch:{s}:id"
        );
        assert_eq!(sem.acquired(Value::Int(1), wait).ok(), Some(None));
        assert!(matches!(
            sem.acquired(Value::Int(0), wait),
            Err(Error::NotAcquired { pttl: 0 })
        ));
        assert!(sem.released(&Value::Nil).is_ok(), "a release replies nil");
        assert!(matches!(
            Target::semaphore("s").taking(0).check(),
            Err(Error::InvalidArgument(_))
        ));
        assert!(Target::semaphore("s").taking(1 << 63).check().is_err());
        assert_eq!(
            args(&try_set_permits(&sem, 2, Some(Duration::from_secs(5)))),
            words("SEMAPHORE.TRYSETPERMITS s 2 TTL 5000")
        );
        assert_eq!(
            args(&with_permits(&sem, "ADDPERMITS", -4)),
            words("SEMAPHORE.ADDPERMITS s -4")
        );
        assert_eq!(args(&try_set_count("l", 2)), words("LATCH.TRYSETCOUNT l 2"));
        assert_eq!(args(&await_zero("l", Wait::No)), words("LATCH.AWAIT l"));
        assert_eq!(
            args(&await_zero("l", Wait::Forever)),
            words("LATCH.AWAIT l BLOCK 0")
        );
        assert_eq!(
            args(&await_zero("l", wait)),
            words("LATCH.AWAIT l BLOCK 700")
        );
        assert_eq!(flag(Value::Int(1)).ok(), Some(true));
        assert!(flag(Value::Int(2)).is_err());
        assert_eq!(integer(Value::Int(-1)).ok(), Some(-1));
        assert!(nil(Value::Int(0)).is_err());
    }

    #[test]
    fn permit_semaphores_are_spelled_as_the_module_takes_them() {
        let leased = Target::permit_semaphore("p").taking(2);
        assert!(leased.requests() && leased.renewable());
        let wait = Wait::For(Duration::from_millis(700));
        let request = Some(Resend::Request("id", wait.request_ttl()));
        assert_eq!(
            args(&leased.acquire("", 900, wait, false, request)),
            words("PERMIT.ACQUIRE p 2 900 BLOCK 700 REQUEST id 14200")
        );
        let never = Target {
            expiry: Some(Expiry::Never),
            ..leased.clone()
        };
        assert!(
            !never.renewable(),
            "a permit that never expires is not renewed"
        );
        assert_eq!(
            args(&never.acquire("", 900, Wait::No, false, None)),
            words("PERMIT.ACQUIRE p 2 -1")
        );
        assert_eq!(
            args(&release_ids("p", &["a".into(), "b".into()])),
            words("PERMIT.RELEASE p a b")
        );
        assert_eq!(
            args(&update_lease("p", "a", Some(Duration::from_secs(3)))),
            words("PERMIT.UPDATELEASE p a 3000")
        );
        assert_eq!(
            args(&update_lease("p", "a", None)),
            words("PERMIT.UPDATELEASE p a -1")
        );
        assert_eq!(
            args(&on_id("PERMIT.LEASETIME", "p", "a")),
            words("PERMIT.LEASETIME p a")
        );
        assert_eq!(
            args(&try_set_permits(&leased, 3, None)),
            words("PERMIT.TRYSETPERMITS p 3")
        );
        assert_eq!(
            args(&with_permits(&leased, "SETPERMITS", 4)),
            words("PERMIT.SETPERMITS p 4")
        );
        assert_eq!(
            leased.request_latch("id"),
            "redisson_lock_request_latch:{p}:id"
        );
        let id = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(permit_ids(id("a")).ok(), Some(vec!["a".to_string()]));
        assert_eq!(
            permit_ids(Value::Array(vec![id("a"), id("b")])).ok(),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert!(matches!(
            permit_ids(Value::Int(1_700_000_000_000)),
            Err(Error::NotAcquired { pttl: 0 })
        ));
        assert!(matches!(
            permit_ids(Value::Nil),
            Err(Error::NotAcquired { .. })
        ));
        assert!(leased.released(&Value::Int(2)).is_ok());
        assert!(matches!(
            leased.released(&Value::Int(0)),
            Err(Error::NotHeld)
        ));
        let nested = Value::Array(vec![Value::Array(vec![Value::Int(1), Value::Int(0)])]);
        assert_eq!(Target::renewed(&nested).ok(), Some(false));
    }

    #[test]
    fn what_is_left_of_a_wait() {
        let wait = Wait::For(Duration::from_secs(2));
        assert_eq!(
            wait.left(Duration::from_millis(500)),
            Wait::For(Duration::from_millis(1500))
        );
        assert_eq!(wait.left(Duration::from_secs(3)), Wait::No);
        assert_eq!(Wait::Forever.left(Duration::from_secs(3)), Wait::Forever);
        assert_eq!(Wait::No.request_ttl(), LATCH_TTL_MS);
        assert_eq!(wait.request_ttl(), LATCH_TTL_MS + 2000);
    }

    #[test]
    fn replies_are_read_as_the_module_gives_them() {
        let lock = Target::single(Kind::Lock, "a");
        assert_eq!(lock.acquired(Value::Nil, Wait::No).ok(), Some(None));
        let fenced = Value::Array(vec![Value::Int(-1), Value::Int(7)]);
        assert_eq!(lock.acquired(fenced, Wait::No).ok(), Some(Some(7)));
        let refused = Value::Array(vec![Value::Int(900), Value::Int(-1)]);
        assert!(matches!(
            lock.acquired(refused, Wait::No),
            Err(Error::NotAcquired { pttl: 900 })
        ));
        assert!(matches!(
            lock.acquired(Value::Int(5), Wait::No),
            Err(Error::NotAcquired { pttl: 5 })
        ));
        assert!(matches!(
            lock.acquired(Value::Okay, Wait::No),
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
        let mut multi = Target::multi();
        multi.holds = vec![(Kind::Lock, "a".into()), (Kind::Read, "b".into())];
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

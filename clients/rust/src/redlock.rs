//! RedLock over several independent masters, for the blocking client.
//!
//! See [`RedLock`].

use std::time::{Duration, Instant};

use redis::{Cmd, Connection, Value};

use crate::builders::redlock_builders;
use crate::command::{millis, Kind, Target, Wait};
use crate::error::{Error, Result};
use crate::owner;

/// The default lease of a RedLock: a RedLock has no watchdog, its validity
/// is computed from the lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The masters that must grant the lock: a majority.
fn quorum(masters: usize) -> usize {
    masters / 2 + 1
}

/// The clock drift allowed for a lease: 1% plus 2 ms, as the Redlock
/// algorithm's reference implementations allow.
fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// How long a lock taken in a round that took `elapsed` stays valid, if at
/// all.
fn validity(lease: Duration, elapsed: Duration) -> Option<Duration> {
    lease
        .checked_sub(elapsed)
        .and_then(|left| left.checked_sub(drift(lease)))
        .filter(|left| !left.is_zero())
}

/// How long one master may keep the caller waiting in a round: its share
/// of the wait, and no longer than what is left of it.
fn share(wait: Duration, masters: usize, left: Duration) -> Wait {
    let per = wait / u32::try_from(masters.max(1)).unwrap_or(u32::MAX);
    Wait::of(per.min(left))
}

/// A random pause before the next round, under `cap`.
fn pause(cap: Duration) -> Duration {
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    let span = millis(cap.min(Duration::from_millis(100)));
    Duration::from_millis(random % span)
}

/// A RedLock, blocking or async, apart from its I/O: the masters, the lock,
/// the lease, the time a master has to answer, and what is sent to each.
#[derive(Clone)]
pub(crate) struct Spec {
    pub masters: Vec<redis::Client>,
    target: Target,
    pub lease: Duration,
    pub timeout: Duration,
}

impl Spec {
    pub fn new(masters: Vec<redis::Client>, name: &str) -> Spec {
        Spec {
            masters,
            target: Target::single(Kind::Lock, name),
            lease: DEFAULT_LEASE,
            timeout: Duration::from_millis(500),
        }
    }

    /// Refuses what cannot be taken, before sending anything.
    pub fn check(&self) -> Result<()> {
        self.target.check()?;
        if self.masters.is_empty() || self.lease.is_zero() {
            return Err(Error::InvalidArgument(
                "a RedLock needs masters and a lease of at least 1 ms",
            ));
        }
        Ok(())
    }

    fn quorum(&self) -> usize {
        quorum(self.masters.len())
    }

    /// One master's acquisition, waiting there as long as `wait`.
    pub fn acquire(&self, owner: &str, wait: Wait) -> Cmd {
        // No request id: a master's attempt is not resent (a master that
        // did not answer counts as refused, and every master is released).
        self.target
            .acquire(owner, millis(self.lease), wait, false, None)
    }

    /// Ok when the master granted it.
    pub fn granted(&self, reply: Value) -> Result<()> {
        self.target.acquired(reply, Wait::No).map(|_| ())
    }

    pub fn release(&self, owner: &str) -> Cmd {
        self.target.release(owner, millis(self.lease), None)
    }

    /// Until when the lock is held after a round begun at `start` in which
    /// `acquired` masters granted it: None without a majority or time left.
    pub fn held_until(&self, start: Instant, acquired: usize) -> Option<Instant> {
        let valid = validity(self.lease, start.elapsed())?;
        (acquired >= self.quorum()).then_some(start + valid)
    }

    /// After a round that did not hold it: the pause before the next one
    /// while the wait lasts (until `deadline`), else `NoQuorum`.
    pub fn retry_after(&self, deadline: Instant, acquired: usize) -> Result<Duration> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::NoQuorum {
                acquired,
                quorum: self.quorum(),
            });
        }
        Ok(pause(left))
    }
}

/// The lock `name` on several independent masters.
///
/// # The algorithm
///
/// The lock is taken with `LOCK.ACQUIRE` on each of N independent masters
/// (no replication between them) in turn, each waiting on its server
/// (`BLOCK`) for its share of the wait. It is held when a majority
/// (N/2 + 1) granted it and time is left: its *validity* is the lease minus
/// the time the round took minus the clock drift allowed (1% of the lease
/// plus 2 ms). Otherwise it is released on every master and, while the wait
/// lasts, tried again after a short random pause (so that two clients
/// splitting the masters between them do not do it again). It is always
/// released on every master, those that did not reply included.
///
/// # Why Redisson deprecated it, and what to use instead
///
/// Redisson deprecated `RedissonRedLock` in 3.12.5 ("RLock operations now
/// propagated to all Redis slaves"): a plain lock on one master whose
/// acquisition waits for the replicas (`WAIT`, here [`crate::SyncOptions`])
/// survives a failover as RedLock meant to, at the cost of one master
/// instead of N. And RedLock's safety
/// rests on timing: it assumes bounded clock drift, network delay and
/// process pauses. A holder that pauses (GC, swapping, a stopped VM) past
/// its validity, or a master whose clock jumps, or one that restarts
/// without having persisted the lock (`appendfsync always` is needed), lets
/// a second client take the lock while the first still believes it holds
/// it (Martin Kleppmann, "How to do distributed locking", 2016). No lock
/// service alone prevents that: the resource has to refuse the stale
/// holder. A *fencing token* does: take the lock fenced
/// ([`crate::Client::fenced_lock`]), send the token with every write, and
/// have the storage reject a token lower than the highest it has seen (see
/// the project's docs/redisson.md). Use RedLock only where its timing
/// assumptions are acceptable, and never as the only guard of data.
pub struct RedLock {
    spec: Spec,
    client_id: String,
}

impl RedLock {
    /// The lock `name` on the masters `masters` connect to (an odd number,
    /// 3 or 5, independent of each other), with [`DEFAULT_LEASE`].
    pub fn new(masters: Vec<redis::Client>, name: &str) -> RedLock {
        RedLock {
            spec: Spec::new(masters, name),
            client_id: owner::new_client_id(),
        }
    }

    redlock_builders!(RedLock);

    /// The lock if a majority grants it within `wait` (zero: one round).
    pub fn try_acquire(&self, wait: Duration) -> Result<RedLockGuard<'_>> {
        self.spec.check()?;
        let owner = owner::owner(&self.client_id, owner::thread_id());
        let deadline = Instant::now() + wait;
        let masters = &self.spec.masters;
        loop {
            let start = Instant::now();
            let mut acquired = 0;
            for master in masters {
                let left = deadline.saturating_duration_since(Instant::now());
                let share = share(wait, masters.len(), left);
                if self.take(master, &owner, share).is_ok() {
                    acquired += 1;
                }
            }
            if let Some(valid_until) = self.spec.held_until(start, acquired) {
                return Ok(RedLockGuard {
                    lock: self,
                    owner,
                    valid_until,
                });
            }
            self.release_all(&owner);
            std::thread::sleep(self.spec.retry_after(deadline, acquired)?);
        }
    }

    fn connect(&self, master: &redis::Client, wait: Wait) -> Result<Connection> {
        let timeout = self.spec.timeout;
        let conn = master.get_connection_with_timeout(timeout)?;
        conn.set_read_timeout(wait.timeout(Some(timeout)))?;
        conn.set_write_timeout(Some(timeout))?;
        Ok(conn)
    }

    fn take(&self, master: &redis::Client, owner: &str, wait: Wait) -> Result<()> {
        let mut conn = self.connect(master, wait)?;
        let reply: Value = self.spec.acquire(owner, wait).query(&mut conn)?;
        self.spec.granted(reply)
    }

    /// Releases on every master, whether it granted the lock or not (a
    /// grant whose reply was lost is a hold too).
    fn release_all(&self, owner: &str) {
        for master in &self.spec.masters {
            if let Ok(mut conn) = self.connect(master, Wait::No) {
                let _: redis::RedisResult<Value> = self.spec.release(owner).query(&mut conn);
            }
        }
    }
}

/// A RedLock held on a majority, released on every master when dropped.
pub struct RedLockGuard<'a> {
    lock: &'a RedLock,
    owner: String,
    valid_until: Instant,
}

impl RedLockGuard<'_> {
    /// How long the lock is still valid: past it, another client may hold
    /// it. Do no protected work without checking it (or better, a fencing
    /// token).
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// The owner holding it.
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

impl std::fmt::Debug for RedLockGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("owner", &self.owner)
            .field("validity", &self.validity())
            .finish_non_exhaustive()
    }
}

impl Drop for RedLockGuard<'_> {
    fn drop(&mut self) {
        self.lock.release_all(&self.owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_and_validity() {
        assert_eq!((quorum(3), quorum(5), quorum(4)), (2, 3, 3));
        let lease = Duration::from_secs(10);
        assert_eq!(drift(lease), Duration::from_millis(102));
        assert_eq!(
            validity(lease, Duration::from_millis(898)),
            Some(Duration::from_secs(9))
        );
        assert_eq!(validity(lease, Duration::from_millis(9_898)), None);
        assert_eq!(validity(lease, Duration::from_secs(11)), None);
        assert!(pause(Duration::from_millis(5)) < Duration::from_millis(5));
    }
}

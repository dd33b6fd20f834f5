//! RedLock for the async client: the algorithm, and why fencing tokens are
//! the safer answer, are in [`crate::RedLock`]. Here the masters are asked
//! at the same time rather than in turn.

use std::time::{Duration, Instant};

use redis::Value;

use crate::builders::redlock_builders;
use crate::command::Wait;
use crate::error::Result;
use crate::owner;
use crate::redlock::Spec;

/// The lock `name` on several independent masters.
#[derive(Clone)]
pub struct RedLock {
    spec: Spec,
    owner: String,
}

impl RedLock {
    /// The lock `name` on the masters `masters` connect to, with
    /// [`crate::DEFAULT_LEASE`]; the handle is its owner, as an async lock's.
    pub fn new(masters: Vec<redis::Client>, name: &str) -> RedLock {
        RedLock {
            spec: Spec::new(masters, name),
            owner: owner::owner(&owner::new_client_id(), owner::fresh_id()),
        }
    }

    redlock_builders!(RedLock);

    /// The lock if a majority grants it within `wait` (zero: one round).
    pub async fn try_acquire(&self, wait: Duration) -> Result<RedLockGuard> {
        self.spec.check()?;
        let deadline = Instant::now() + wait;
        loop {
            let start = Instant::now();
            // All the masters at once, each waiting on its server for what
            // is left of the wait.
            let share = Wait::of(deadline.saturating_duration_since(start));
            let attempts: Vec<_> = self
                .spec
                .masters
                .iter()
                .map(|m| tokio::spawn(self.clone().take(m.clone(), share)))
                .collect();
            let mut acquired = 0;
            for attempt in attempts {
                if matches!(attempt.await, Ok(Ok(()))) {
                    acquired += 1;
                }
            }
            if let Some(valid_until) = self.spec.held_until(start, acquired) {
                return Ok(RedLockGuard {
                    lock: self.clone(),
                    valid_until,
                    released: false,
                });
            }
            self.release_all().await;
            tokio::time::sleep(self.spec.retry_after(deadline, acquired)?).await;
        }
    }

    async fn connect(
        &self,
        master: &redis::Client,
        wait: Wait,
    ) -> Result<redis::aio::MultiplexedConnection> {
        let timeout = self.spec.timeout;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(wait.timeout(Some(timeout)));
        Ok(master
            .get_multiplexed_async_connection_with_config(&config)
            .await?)
    }

    async fn take(self, master: redis::Client, wait: Wait) -> Result<()> {
        let mut conn = self.connect(&master, wait).await?;
        let reply: Value = self
            .spec
            .acquire(&self.owner, wait)
            .query_async(&mut conn)
            .await?;
        self.spec.granted(reply)
    }

    /// Releases on every master, whether it granted the lock or not.
    async fn release_all(&self) {
        for master in &self.spec.masters {
            if let Ok(mut conn) = self.connect(master, Wait::No).await {
                let _: redis::RedisResult<Value> =
                    self.spec.release(&self.owner).query_async(&mut conn).await;
            }
        }
    }
}

/// A RedLock held on a majority. [`RedLockGuard::release`] releases it on
/// every master; dropped inside a tokio runtime, a task spawned on it does.
pub struct RedLockGuard {
    lock: RedLock,
    valid_until: Instant,
    released: bool,
}

impl RedLockGuard {
    /// How long the lock is still valid.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// The owner holding it.
    pub fn owner(&self) -> &str {
        &self.lock.owner
    }

    /// Releases it on every master.
    pub async fn release(mut self) {
        self.released = true;
        self.lock.release_all().await;
    }
}

impl std::fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("owner", &self.lock.owner)
            .field("validity", &self.validity())
            .finish_non_exhaustive()
    }
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let lock = self.lock.clone();
            runtime.spawn(async move { lock.release_all().await });
        }
    }
}

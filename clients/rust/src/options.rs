//! What every lock of a client shares: the lease or the watchdog, sessions,
//! the replica check and the response timeout.

use std::time::Duration;

/// How an acquisition is checked against the master's replicas and its
/// append-only file.
///
/// A lock lives on the master; if the master fails before a replica has the
/// lock, the replica promoted in its place does not know it and grants it
/// again. Redisson checks this by default (`checkLockSyncedSlaves`,
/// `slavesSyncTimeout` 1 s): after each acquisition it waits for the
/// replicas to acknowledge it and, when not all did, releases the lock and
/// fails. This does the same, in the acquisition's own round trip: the
/// acquisition, then `WAIT <expected> <timeout>` when replicas are expected
/// and `WAITAOF 1 0 <timeout>` when the master writes an AOF, pipelined on
/// one connection.
///
/// How many replicas are expected is never read from the node just written
/// to alone: a master that was paused past its failover and has not been
/// demoted yet says it has none. With [`Replicas::Auto`] the client learns
/// it from `INFO replication persistence` (once before the first
/// acquisition on a master, then at most every 5 s inside an acquisition's
/// pipeline) and keeps the highest number it ever saw for that master: a
/// master saying fewer replicas later does not lower it, so its
/// acquisitions fail ([`crate::Error::NotSynced`]) instead of being
/// acknowledged by nobody. Lowering it takes a new `Client` (or
/// [`Replicas::Exactly`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOptions {
    /// Wait after an acquisition (default true).
    pub enabled: bool,
    /// How long to wait for every replica, and for the AOF (default 1 s).
    pub timeout: Duration,
    /// How many replicas must acknowledge each acquisition (default
    /// [`Replicas::Auto`]).
    pub replicas: Replicas,
    /// Whether the master's fsync to its append-only file is waited for
    /// (default [`Aof::Auto`]).
    pub aof: Aof,
}

/// How many replicas must acknowledge an acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// The highest number of replicas the master was ever seen with by this
    /// client (`connected_slaves`): it only rises.
    Auto,
    /// Exactly this many, whatever the master says (0: never wait for
    /// replicas).
    Exactly(usize),
}

/// Whether an acquisition waits for the master's fsync to its AOF
/// (`WAITAOF 1 0 <timeout>`, Redis 7.2+), so that a restart from the AOF
/// keeps the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aof {
    /// Where the master says it writes one (`aof_enabled:1`) and has
    /// `WAITAOF`; before Redis 7.2, `WAIT` alone is the check.
    Auto,
    /// Always: an acquisition on a master that writes no AOF, or has no
    /// `WAITAOF`, fails with [`crate::Error::NotSynced`].
    Required,
    /// Never.
    Off,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            enabled: true,
            timeout: Duration::from_secs(1),
            replicas: Replicas::Auto,
            aof: Aof::Auto,
        }
    }
}

/// The settings a lock handle is made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// A fixed lease: the hold ends this long after its acquisition unless
    /// released before, and no watchdog runs. `None` (the default): the
    /// lease is `watchdog_timeout` and a watchdog renews it every third of
    /// it while the guard lives, as Redisson's `lock()` does.
    pub lease: Option<Duration>,
    /// The watchdog's lease (Redisson's `lockWatchdogTimeout`, 30 s).
    pub watchdog_timeout: Duration,
    /// Bind the hold to its connection (`SESSION`): the server keeps it as
    /// long as the connection is open and releases it when the connection
    /// closes, so no watchdog runs. The guard owns that connection.
    pub session: bool,
    /// The replica check after each acquisition.
    pub sync: SyncOptions,
    /// How long a call that does not wait may take to reply (Redisson's
    /// `timeout`, 3 s); `None`: no limit. A call that waits for a lock
    /// (`BLOCK`) is given its wait on top of it, on its own connection.
    pub response_timeout: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lease: None,
            watchdog_timeout: Duration::from_secs(30),
            session: false,
            sync: SyncOptions::default(),
            response_timeout: Some(Duration::from_secs(3)),
        }
    }
}

impl Options {
    /// The lease sent with an acquisition, in milliseconds.
    pub(crate) fn lease_ms(&self) -> u64 {
        crate::command::millis(self.lease.unwrap_or(self.watchdog_timeout))
    }

    /// True when a watchdog renews the hold.
    pub(crate) fn watchdog(&self) -> bool {
        self.lease.is_none() && !self.session
    }

    /// Refuses settings the commands cannot take.
    pub(crate) fn check(&self) -> crate::error::Result<()> {
        use crate::error::Error::InvalidArgument;
        if self.lease.is_some_and(|l| l.is_zero()) {
            return Err(InvalidArgument("the lease must be at least 1 ms"));
        }
        if self.lease.is_none() && self.watchdog_timeout < Duration::from_millis(3) {
            return Err(InvalidArgument(
                "the watchdog timeout must be at least 3 ms",
            ));
        }
        if self.sync.enabled && self.sync.timeout.is_zero() {
            // WAIT 0 would wait without limit.
            return Err(InvalidArgument("the sync timeout must be at least 1 ms"));
        }
        Ok(())
    }
}

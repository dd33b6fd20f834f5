//! The one error type of every lock operation.

use std::fmt;
use std::time::Duration;

/// Why a lock was not acquired, or a call failed.
#[derive(Debug)]
pub enum Error {
    /// The lock was held by others (or, waiting, still was when the wait ran
    /// out): `pttl` is the milliseconds their lease has left, as the server
    /// replied.
    NotAcquired {
        /// The remaining lease of the hold in the way, in milliseconds.
        pttl: i64,
    },
    /// A release found nothing of the owner's to release: it never held
    /// the lock, released it already, or lost it (its lease ran out, or it
    /// was forced open: [`crate::Guard::is_lost`]).
    NotHeld,
    /// A last release (the owner's only hold of the lock) whose reply was
    /// lost and whose resend found the owner holding nothing: the first
    /// send freed it, or the hold was gone before it (its lease ran out, a
    /// failover lost it, its key was deleted); nobody can tell which. The
    /// owner holds nothing either way. Not [`Error::NotHeld`], which says
    /// the owner held nothing when it released.
    ReleaseUnknown,
    /// A non-reentrant lock ([`crate::Lock::non_reentrant`]) asked for
    /// again by its holder (the server's `NON_REENTRANT_REACQUIRE`): nothing
    /// changed, the first hold stays.
    NotReentrant,
    /// The lock was taken but not all of the `replicas` expected
    /// acknowledged it (`WAIT`), or the master did not fsync it to its AOF
    /// (`WAITAOF`), within the sync timeout, so it was released again: a
    /// failover (or a restart) now could hand it to someone else. Also when
    /// the master refused the write for want of replicas (`NOREPLICAS`, its
    /// `min-replicas-to-write`): then nothing was written.
    NotSynced {
        /// Replicas expected to acknowledge it.
        replicas: usize,
        /// How long the acknowledgement was waited for.
        waited: Duration,
        /// What the server replied (`WAIT replied 0`, `WAITAOF replied [0,
        /// 0]`, the `NOREPLICAS` error).
        replied: String,
    },
    /// A RedLock reached fewer masters than its quorum within the wait (or
    /// its validity was used up), and released what it took.
    NoQuorum {
        /// Masters that granted the lock in the last round.
        acquired: usize,
        /// The majority needed.
        quorum: usize,
    },
    /// An argument the commands cannot take (an empty name, a lease of
    /// zero, a multi-lock without locks, ...). Nothing was sent.
    InvalidArgument(&'static str),
    /// The server replied something the client does not understand (a
    /// module older than the command).
    UnexpectedReply(String),
    /// The connection or the server failed, or the server refused the
    /// command (its error reply is kept).
    Redis(redis::RedisError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotAcquired { pttl } => write!(f, "lock held by others for {pttl} ms more"),
            Error::NotHeld => write!(f, "the lock is not held by this owner"),
            Error::ReleaseUnknown => write!(
                f,
                "the release's reply was lost and the owner no longer holds the lock: this release freed it or the hold was gone before it"
            ),
            Error::NotReentrant => write!(f, "the holder asked again for a non-reentrant lock"),
            Error::NotSynced {
                replicas,
                waited,
                replied,
            } => write!(
                f,
                "the lock was not acknowledged by {replicas} replicas (or fsynced to the AOF) within {waited:?} ({replied}); released"
            ),
            Error::NoQuorum { acquired, quorum } => write!(
                f,
                "RedLock granted by {acquired} masters, {quorum} needed; released"
            ),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::UnexpectedReply(reply) => write!(f, "unexpected reply: {reply}"),
            Error::Redis(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

/// The result of every lock operation.
pub type Result<T> = std::result::Result<T, Error>;

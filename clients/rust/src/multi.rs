//! Redisson's `RedissonMultiLock` for the blocking client, done by the
//! server in one atomic command: all the holds are taken together or none.

use crate::builders::{hold_calls, lock_builders, multi_builders};
use crate::guard::{Guard, Handle};

/// Several plain locks and read or write holds of read-write locks, taken
/// all at once by `LOCK.ACQUIREALL` (none is taken while any is in the
/// way), renewed together and released together. Unlike Redisson's
/// multi-lock, which takes the locks one by one, no one ever sees part of
/// them taken.
#[derive(Clone)]
pub struct MultiLock(pub(crate) Handle);

impl MultiLock {
    lock_builders!(MultiLock, "the watchdog's thread");

    multi_builders!(MultiLock);

    /// The owner an acquisition by the calling thread takes the holds for:
    /// `<client id>:<thread id>`, or the one set with
    /// [`MultiLock::with_owner`].
    pub fn owner(&self) -> String {
        self.0.thread_owner()
    }

    hold_calls!(
        None => is_held, unlock, acquire, try_acquire:
        "every hold" of "the calling thread's owner"
    );
}

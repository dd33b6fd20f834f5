//! Every way a lock command can fail, with the exact error reply.

/// Largest lease, wait or latch TTL accepted: ten years in milliseconds.
pub const MAX_MILLIS: i64 = 10 * 365 * 24 * 3600 * 1000;

pub const ERR_LEASE: &str =
    "ERR lease must be an integer number of milliseconds from 1 to 315360000000";
pub const ERR_TIMEOUT: &str =
    "ERR BLOCK timeout must be an integer number of milliseconds from 0 to 315360000000";
/// FAIRLOCK.ACQUIRE: BLOCK waits in the line, NOQUEUE never joins it.
pub const ERR_BLOCK_NOQUEUE: &str = "ERR BLOCK and NOQUEUE cannot be combined";
pub const ERR_WAIT: &str =
    "ERR WAIT must be an integer number of milliseconds from 0 to 315360000000";
pub const ERR_TTL: &str =
    "ERR request ttl must be an integer number of milliseconds from 1 to 315360000000";
pub const ERR_OWNER: &str = "ERR owner must be non-empty, not 'mode', and not end in ':write'";
pub const ERR_REQUEST_ID: &str = "ERR request id must be non-empty";
/// `HELD n` (docs/design.md §14.8): an owner's count before an acquisition,
/// or before a release (which needs a hold to release).
pub const ERR_HELD_ACQUIRE: &str = "ERR HELD must be an integer from 0 to 100000";
pub const ERR_HELD_RELEASE: &str = "ERR HELD must be an integer from 1 to 100000";
pub const ERR_SPREAD_NAME: &str =
    "ERR lock name must be non-empty with balanced braces: its derived keys would leave its hash slot";
pub const ERR_WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const ERR_CORRUPT: &str =
    "ERR corrupt lock: the hash's mode is not read or write, or a hold count is not an integer from 1 to 100000";
pub const ERR_LATCH: &str = "ERR corrupt unlock latch: its value is not an integer";
pub const ERR_TOKEN: &str = "ERR corrupt fencing token: its value is not an integer";
pub const ERR_REENTRY: &str =
    "NON_REENTRANT_REACQUIRE the owner already holds this non-reentrant lock";
pub const ERR_OVERFLOW: &str =
    "ERR overflow: the hold count would pass 100000, the deadline the clock's range, or the fencing token its largest value";
pub const ERR_SYNTAX: &str = "ERR syntax error";
/// Most holds one multi-hold command lists.
pub const MAX_HOLDS_LISTED: i64 = 100;
pub const ERR_HOLDS: &str =
    "ERR HOLDS must give a count from 1 to 100 and then exactly that many kind and name pairs";
pub const ERR_KIND: &str = "ERR hold kind must be LOCK, READ or WRITE";
pub const ERR_DUPLICATE: &str =
    "ERR a lock name is listed twice: one multi-hold takes one hold of each lock";
pub const ERR_SESSION: &str =
    "ERR SESSION binds holds to a client connection: scripts and module calls have none";
/// SEMAPHORE.ACQUIRE and SEMAPHORE.RELEASE: how many permits (contract §15).
pub const ERR_PERMITS: &str = "ERR permits must be an integer from 1 to 9223372036854775807";
/// SEMAPHORE.TRYSETPERMITS and SEMAPHORE.ADDPERMITS: a count, which may be negative.
pub const ERR_PERMITS_COUNT: &str = "ERR permits must be an integer";
pub const ERR_SEMAPHORE_TTL: &str =
    "ERR TTL must be an integer number of milliseconds from 1 to 315360000000";
pub const ERR_SEMAPHORE: &str = "ERR corrupt semaphore: its count is not an integer";
pub const ERR_PERMITS_OVERFLOW: &str =
    "ERR overflow: the semaphore's count would leave the 64-bit integer range";
/// PERMIT.ACQUIRE: how many permits, each an id in the reply (contract §17).
pub const ERR_PERMIT_COUNT: &str = "ERR permits must be an integer from 1 to 100000";
pub const ERR_PERMIT_LEASE: &str =
    "ERR lease must be -1 (never expires) or an integer number of milliseconds from 1 to 315360000000";
pub const ERR_PERMIT_ID: &str = "ERR permit id must be hex digits, an even number of them";
/// A latch's channel, `redisson_countdownlatch__channel__{<name>}`, wraps
/// the name in braces whatever it holds: a name with braces would put it in
/// another hash slot than the latch (contract §16.1).
pub const ERR_LATCH_NAME: &str =
    "ERR latch name must be non-empty without braces: Redisson's channel for it would leave its hash slot";
pub const ERR_LATCH_COUNT: &str = "ERR corrupt latch count: its value is not an integer";
pub const ERR_COUNT_ARG: &str = "ERR count must be an integer from 0 to 9223372036854775807";
pub const ERR_REPLICA: &str =
    "READONLY this node became a replica while the client waited for the lock";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockError {
    SpreadName,
    BadOwner,
    WrongType,
    Corrupt,
    BadLatch,
    BadToken,
    Overflow,
    /// A non-reentrant lock taken again by its holder.
    Reentry,
    /// A semaphore's count that is not an integer.
    BadCount,
    /// A semaphore's count pushed past the 64-bit range.
    PermitsOverflow,
    /// A hold kind a multi-hold cannot list (a latch's wait holds nothing).
    NotAHold,
    LatchName,
    /// A count-down latch's value that is not an integer.
    LatchCount,
}

impl LockError {
    pub fn message(self) -> &'static str {
        match self {
            LockError::SpreadName => ERR_SPREAD_NAME,
            LockError::BadOwner => ERR_OWNER,
            LockError::WrongType => ERR_WRONGTYPE,
            LockError::Corrupt => ERR_CORRUPT,
            LockError::BadLatch => ERR_LATCH,
            LockError::BadToken => ERR_TOKEN,
            LockError::Reentry => ERR_REENTRY,
            LockError::Overflow => ERR_OVERFLOW,
            LockError::BadCount => ERR_SEMAPHORE,
            LockError::PermitsOverflow => ERR_PERMITS_OVERFLOW,
            LockError::NotAHold => ERR_KIND,
            LockError::LatchName => ERR_LATCH_NAME,
            LockError::LatchCount => ERR_LATCH_COUNT,
        }
    }
}

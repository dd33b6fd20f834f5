//! Redisson's `RPermitExpirableSemaphore` for the blocking client, and its
//! guard of leased permits.

use crate::builders::permit_calls;
use crate::guard::{Guard, Handle};

/// A permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`,
/// `PERMIT.*`): a count of free permits and the permits taken, each an id
/// with a lease of its own, shared with Redisson's clients. Permits are
/// taken n at a time in arrival order (a wait waits on the server, and a
/// permit whose lease runs out serves it then) and released by id. Taken
/// permits are a [`LeasedPermits`] guard, which releases them when dropped.
#[derive(Clone)]
pub struct PermitExpirableSemaphore(pub(crate) Handle);

permit_calls!(Guard, "the watchdog's thread");

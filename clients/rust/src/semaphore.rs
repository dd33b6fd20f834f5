//! Redisson's `RSemaphore` for the blocking client, and its guard of
//! permits.

use crate::builders::semaphore_calls;
use crate::guard::{Guard, Handle};

/// A semaphore (Redisson's `RSemaphore`, `SEMAPHORE.*`): a count of free
/// permits, shared with Redisson's clients, taken n at a time in arrival
/// order (a wait waits on the server) and given back by anyone. Taken
/// permits are a [`Permits`] guard, which gives them back when dropped.
#[derive(Clone)]
pub struct Semaphore(pub(crate) Handle);

semaphore_calls!(Guard);

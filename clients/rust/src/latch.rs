//! Redisson's `RCountDownLatch` for the blocking client.

use crate::builders::latch_calls;
use crate::guard::Handle;

/// A count-down latch (Redisson's `RCountDownLatch`, `LATCH.*`): a count,
/// shared with Redisson's clients, that anyone counts down; a wait for zero
/// waits on the server (`LATCH.AWAIT … BLOCK`), and every waiter is
/// answered when the count reaches zero or the latch is deleted.
#[derive(Clone)]
pub struct CountDownLatch(pub(crate) Handle);

impl CountDownLatch {
    latch_calls!();
}

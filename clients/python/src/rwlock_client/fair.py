"""`FairLock`: Redisson's RFairLock (`FAIRLOCK.*`): holders in arrival
order, in one line with Redisson's own waiters."""

from __future__ import annotations

from ._base import FairLockCommon
from ._link import Link
from .lock import LockBase, LostCallback
from .watchdog import Watchdog


class FairLock(FairLockCommon[Link, Watchdog, LostCallback], LockBase):
    """Redisson's `RFairLock` on the `FAIRLOCK.*` commands: one owner at a
    time, re-entrant, granted in the order the waiters arrived (a Redisson
    client's waiters and this package's share one line).

    `acquire(wait)` waits in the line on the server (`BLOCK`); when the wait
    runs out the server takes the waiter out of the line, so nobody behind
    it waits for it. `acquire(wait=0)` never joins the line (`NOQUEUE`). A
    hold without a lease is renewed by the watchdog (`LOCK.RENEW`);
    `reentrant=False` is Redisson's non-reentrant fair lock. No sessions,
    no fencing tokens (the fair commands have neither).

    ::

        lock = FairLock(redis.Redis(port=6399), "queue:jobs")
        with lock.hold(wait=5):
            ...
    """

"""`Semaphore`: Redisson's RSemaphore (`SEMAPHORE.*`), sync."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional, Type

from ._link import converse
from ._semaphore import SemaphoreCommon


class Semaphore(SemaphoreCommon):
    """Redisson's `RSemaphore`: at most the count's permits taken at once,
    across threads, processes and Redisson clients. Permits have no owner
    (anyone may release them) and no lease: a holder that dies keeps them.

    A wait is on the server (`BLOCK`), in arrival order with the module's
    other waiters: a wait for 3 permits is not passed by takers of 1.
    Each acquisition waits for the master's replicas (`sync`, as a lock's:
    `NotSynced`, the permits given back).

    ::

        sem = Semaphore(redis.Redis(port=6399), "backend:slots")
        sem.try_set_permits(3)
        with sem.hold(wait=5):       # one permit; NotAcquired after 5 s
            ...
    """

    def acquire(self, permits: int = 1, wait: Optional[float] = None) -> bool:
        """Takes `permits` (1 or more) at once or none; True when taken,
        False when the wait ran out first. `wait`: seconds on the server,
        any longer than the socket timeout; None (the default) without
        limit (Redisson's `acquire`), 0 one try (`tryAcquire`)."""
        return converse(self.client, self.name, self._acquiring(self._attempt(permits, wait))).acquired

    def release(self, permits: int = 1) -> None:
        """Gives `permits` back (a missing count starts at 0), serving the
        waiters they cover."""
        converse(self.client, self.name, self._releasing(permits))

    def try_set_permits(self, permits: int, ttl: Optional[float] = None) -> bool:
        """Sets the count when there is none (True), else changes nothing
        (False); `ttl`: the semaphore's lifetime in seconds."""
        return converse(self.client, self.name, self._trying_to_set(permits, ttl))

    def add_permits(self, permits: int) -> None:
        """Adds `permits` to the count; a negative number takes away (the
        count may go below 0)."""
        converse(self.client, self.name, self._adding(permits))

    def drain_permits(self) -> int:
        """Takes every free permit; how many there were."""
        return converse(self.client, self.name, self._draining())

    def available_permits(self) -> int:
        """The free permits (0 without a semaphore)."""
        return converse(self.client, self.name, self._reading())

    @contextmanager
    def hold(self, permits: int = 1, wait: Optional[float] = None) -> Iterator[None]:
        """`with sem.hold(2, wait=5):` holds 2 permits in the block, given
        back after; raises `NotAcquired` when the wait runs out."""
        self._check_acquired(self.acquire(permits, wait))
        try:
            yield
        finally:
            self.release(permits)

    def __enter__(self) -> "Semaphore":
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

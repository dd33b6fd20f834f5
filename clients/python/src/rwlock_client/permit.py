"""`PermitExpirableSemaphore`: Redisson's RPermitExpirableSemaphore
(`PERMIT.*`), sync."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional, Tuple

from ._link import converse
from ._permit import NEVER as NEVER, PermitSemaphoreCommon, Watched
from .errors import NotAcquired
from .watchdog import SCHEDULER, Watchdog

#: Called from the watchdog's thread with the semaphore and the ids of
#: permits found gone.
LostPermits = Callable[[Any, Tuple[str, ...]], None]


class PermitExpirableSemaphore(PermitSemaphoreCommon[Watchdog, LostPermits]):
    """Redisson's `RPermitExpirableSemaphore`: permits taken as ids, each
    with its own lease, released by id, across threads, processes and
    Redisson clients. A holder that dies loses its permits at their
    lease's end, and the server serves the waiters then.

    `lease`: seconds; `NEVER` never expires (Redisson's default); None
    (the default here) the watchdog's (`watchdog_timeout`, 30 s), renewed
    every third of it until released. A wait is on the server (`BLOCK`),
    in arrival order; each acquisition waits for the master's replicas
    (`sync`, as a lock's: `NotSynced`, the permits given back).

    ::

        sem = PermitExpirableSemaphore(redis.Redis(port=6399), "backend:slots")
        sem.try_set_permits(3)
        with sem.hold(wait=5) as permit_id:    # NotAcquired after 5 s
            ...
    """

    def acquire(self, wait: Optional[float] = None, lease: Optional[float] = None) -> Optional[str]:
        """Takes one permit: its id, or None when the wait ran out first.
        `wait`: seconds on the server, None (the default) without limit
        (Redisson's `acquire`), 0 one try (`tryAcquire`)."""
        ids = self.acquire_many(1, wait, lease)
        return None if ids is None else ids[0]

    def acquire_many(
        self, permits: int, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> Optional[List[str]]:
        """Takes `permits` (1 or more) at once or none: their ids, or None
        when the wait ran out first."""
        outcome = converse(self.client, self.name, self._acquiring(self._attempt(permits, wait, lease)))
        return self._granted(outcome, lease)

    def release(self, *ids: str) -> int:
        """Gives the permits back, all or none: how many. Raises `NotHeld`
        when the server released none (an id not held, or expired)."""
        return converse(self.client, self.name, self._releasing(ids))

    def try_release(self, permit_id: str) -> bool:
        """Gives one permit back: False when it was not held (or had
        expired)."""
        return converse(self.client, self.name, self._trying_to_release(permit_id))

    def update_lease(self, permit_id: str, lease: float) -> bool:
        """A new lease from now (`NEVER`: never expires); False when the
        permit is not held."""
        return converse(self.client, self.name, self._updating_lease(permit_id, lease))

    def lease_left(self, permit_id: str) -> Optional[float]:
        """Seconds the permit has left: None when it never expires, 0 when
        it is not held."""
        return converse(self.client, self.name, self._lease_left(permit_id))

    def try_set_permits(self, permits: int) -> bool:
        """Sets the count when there is none (True), else changes nothing."""
        return converse(self.client, self.name, self._trying_to_set(permits))

    def set_permits(self, permits: int) -> None:
        """Makes the free and taken permits `permits` in all."""
        converse(self.client, self.name, self._setting(permits))

    def add_permits(self, permits: int) -> None:
        """Adds `permits` to the count; a negative number takes away."""
        converse(self.client, self.name, self._adding(permits))

    def available_permits(self) -> int:
        """The free permits (expired ones reclaimed first)."""
        return converse(self.client, self.name, self._reading())

    def acquired_permits(self) -> int:
        """The permits taken now."""
        return converse(self.client, self.name, self._counting("ACQUIRED"))

    def permits(self) -> int:
        """Free and taken permits in all (Redisson's `getPermits`)."""
        return converse(self.client, self.name, self._counting("PERMITS"))

    @contextmanager
    def hold(self, wait: Optional[float] = None, lease: Optional[float] = None) -> Iterator[str]:
        """`with sem.hold(wait=5) as permit_id:` one permit in the block,
        released after; raises `NotAcquired` when the wait runs out."""
        with self.hold_many(1, wait, lease) as ids:
            yield ids[0]

    @contextmanager
    def hold_many(
        self, permits: int, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> Iterator[List[str]]:
        """`with sem.hold_many(2, wait=5) as ids:`; raises `NotAcquired` when
        the wait runs out."""
        ids = self.acquire_many(permits, wait, lease)
        if ids is None:
            raise NotAcquired(self.name, None)
        try:
            yield ids
        finally:
            self.release(*ids)

    # -- the watchdog -----------------------------------------------------------

    def _start_watchdog(self, group: Watched[Watchdog]) -> Watchdog:
        return SCHEDULER.watch(
            self.name,
            group.lease_ms / 1000,
            lambda: converse(self.client, self.name, self._renewing(group)),
            lambda: self._lost_group(group),
        )

    def _stop_watchdog(self, dog: Watchdog) -> None:
        dog.stop()

    def _lost_group(self, group: Watched[Watchdog]) -> None:
        ids = self._mark_lost(group)
        if self.on_lost is not None:
            self.on_lost(self, ids)

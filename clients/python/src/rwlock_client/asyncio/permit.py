"""asyncio `PermitExpirableSemaphore`: the sync
`rwlock_client.PermitExpirableSemaphore` with awaits."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, List, Optional, Tuple, Union

from .._permit import NEVER as NEVER, PermitSemaphoreCommon, Watched
from ..errors import NotAcquired
from ._link import converse
from .watchdog import Watchdog

#: Called with the semaphore and the ids of permits found gone; may be a
#: coroutine function.
LostPermits = Callable[[Any, Tuple[str, ...]], Union[None, Awaitable[None]]]


class PermitExpirableSemaphore(PermitSemaphoreCommon[Watchdog, LostPermits]):
    """Redisson's `RPermitExpirableSemaphore` on `redis.asyncio` (see the
    sync `rwlock_client.PermitExpirableSemaphore`); the watchdog renews on
    the event loop's timers. Cancelling a waiting task closes the
    connection it waits on, so the server drops the waiter, and a grant
    that was on its way is released again: nothing is taken.

    ::

        sem = PermitExpirableSemaphore(redis.asyncio.Redis(port=6399), "backend:slots")
        async with sem.hold(wait=5) as permit_id:
            ...
    """

    async def acquire(self, wait: Optional[float] = None, lease: Optional[float] = None) -> Optional[str]:
        ids = await self.acquire_many(1, wait, lease)
        return None if ids is None else ids[0]

    async def acquire_many(
        self, permits: int, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> Optional[List[str]]:
        """As the sync `acquire_many`. Cancelled, it leaves nothing taken: a
        grant the server made as the task was cancelled (its reply unread)
        is found by the request id and released again."""
        attempt = self._attempt(permits, wait, lease)
        try:
            outcome = await converse(self.client, self.name, self._acquiring(attempt))
        except asyncio.CancelledError:
            await asyncio.shield(converse(self.client, self.name, self._giving_back(attempt)))
            raise
        return self._granted(outcome, lease)

    async def release(self, *ids: str) -> int:
        return await converse(self.client, self.name, self._releasing(ids))

    async def try_release(self, permit_id: str) -> bool:
        return await converse(self.client, self.name, self._trying_to_release(permit_id))

    async def update_lease(self, permit_id: str, lease: float) -> bool:
        return await converse(self.client, self.name, self._updating_lease(permit_id, lease))

    async def lease_left(self, permit_id: str) -> Optional[float]:
        return await converse(self.client, self.name, self._lease_left(permit_id))

    async def try_set_permits(self, permits: int) -> bool:
        return await converse(self.client, self.name, self._trying_to_set(permits))

    async def set_permits(self, permits: int) -> None:
        await converse(self.client, self.name, self._setting(permits))

    async def add_permits(self, permits: int) -> None:
        await converse(self.client, self.name, self._adding(permits))

    async def available_permits(self) -> int:
        return await converse(self.client, self.name, self._reading())

    async def acquired_permits(self) -> int:
        return await converse(self.client, self.name, self._counting("ACQUIRED"))

    async def permits(self) -> int:
        return await converse(self.client, self.name, self._counting("PERMITS"))

    @asynccontextmanager
    async def hold(self, wait: Optional[float] = None, lease: Optional[float] = None) -> AsyncIterator[str]:
        """`async with sem.hold(wait=5) as permit_id:`; raises `NotAcquired`
        when the wait runs out."""
        async with self.hold_many(1, wait, lease) as ids:
            yield ids[0]

    @asynccontextmanager
    async def hold_many(
        self, permits: int, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncIterator[List[str]]:
        ids = await self.acquire_many(permits, wait, lease)
        if ids is None:
            raise NotAcquired(self.name, None)
        try:
            yield ids
        finally:
            await self.release(*ids)

    def _start_watchdog(self, group: Watched[Watchdog]) -> Watchdog:
        return Watchdog(
            group.lease_ms / 1000,
            lambda: converse(self.client, self.name, self._renewing(group)),
            lambda: self._lost_group(group),
        )

    def _stop_watchdog(self, dog: Watchdog) -> None:
        dog.stop()

    async def _lost_group(self, group: Watched[Watchdog]) -> None:
        ids = self._mark_lost(group)
        if self.on_lost is not None:
            result = self.on_lost(self, ids)
            if result is not None:
                await result

"""asyncio `Semaphore`: the sync `rwlock_client.Semaphore` with awaits."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator, Optional, Type

from .._semaphore import SemaphoreCommon
from ._link import converse


class Semaphore(SemaphoreCommon):
    """Redisson's `RSemaphore` on `redis.asyncio` (see the sync
    `rwlock_client.Semaphore`). Cancelling a waiting task closes the
    connection it waits on, so the server drops the waiter, and a grant
    that was on its way is released again: nothing is taken.

    ::

        sem = Semaphore(redis.asyncio.Redis(port=6399), "backend:slots")
        async with sem.hold(wait=5):
            ...
    """

    async def acquire(self, permits: int = 1, wait: Optional[float] = None) -> bool:
        """As the sync `acquire`. Cancelled, it leaves nothing taken: a grant
        the server made as the task was cancelled (its reply unread) is
        found by the request id and released again."""
        attempt = self._attempt(permits, wait)
        try:
            return (await converse(self.client, self.name, self._acquiring(attempt))).acquired
        except asyncio.CancelledError:
            await asyncio.shield(converse(self.client, self.name, self._giving_back(attempt)))
            raise

    async def release(self, permits: int = 1) -> None:
        await converse(self.client, self.name, self._releasing(permits))

    async def try_set_permits(self, permits: int, ttl: Optional[float] = None) -> bool:
        return await converse(self.client, self.name, self._trying_to_set(permits, ttl))

    async def add_permits(self, permits: int) -> None:
        await converse(self.client, self.name, self._adding(permits))

    async def drain_permits(self) -> int:
        return await converse(self.client, self.name, self._draining())

    async def available_permits(self) -> int:
        return await converse(self.client, self.name, self._reading())

    @asynccontextmanager
    async def hold(self, permits: int = 1, wait: Optional[float] = None) -> AsyncIterator[None]:
        """`async with sem.hold(2, wait=5):`; raises `NotAcquired` when the
        wait runs out."""
        self._check_acquired(await self.acquire(permits, wait))
        try:
            yield
        finally:
            await self.release(permits)

    async def __aenter__(self) -> "Semaphore":
        await self.acquire()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.release()

"""asyncio `CountDownLatch`: the sync `rwlock_client.CountDownLatch` with
awaits."""

from __future__ import annotations

from typing import Optional

from .._latch import CountDownLatchCommon
from ._link import converse


class CountDownLatch(CountDownLatchCommon):
    """Redisson's `RCountDownLatch` on `redis.asyncio` (see the sync
    `rwlock_client.CountDownLatch`). Cancelling a waiting task closes the
    connection it waits on, so the server drops the waiter.

    ::

        done = CountDownLatch(redis.asyncio.Redis(port=6399), "batch:7")
        if await done.wait(timeout=60):
            ...
    """

    async def try_set_count(self, count: int) -> bool:
        return await converse(self.client, self.name, self._trying_to_set(count))

    async def count_down(self) -> None:
        await converse(self.client, self.name, self._counting_down())

    async def count(self) -> int:
        return await converse(self.client, self.name, self._reading())

    async def delete(self) -> bool:
        return await converse(self.client, self.name, self._deleting())

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """As the sync `wait` (Redisson's `await`)."""
        return await converse(self.client, self.name, self._awaiting(timeout))

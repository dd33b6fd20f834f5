"""asyncio `RedLock` (see `rwlock_client.redlock` for the algorithm, and for
why Redisson deprecated it and fencing tokens are the safer answer). The
nodes are asked concurrently."""

from __future__ import annotations

import asyncio
import time
from typing import Any, List, Optional

import redis.asyncio

from .. import _owner
from .._core import REPLY_MARGIN, Acquisition, to_ms
from ..redlock import NODE_ERRORS, RedLockCommon
from ._link import Link


class RedLock(RedLockCommon):
    """asyncio `rwlock_client.RedLock` over `redis.asyncio.Redis` clients of
    independent masters. Deprecated by Redisson since 3.12.5: prefer a
    fenced `Lock`."""

    @staticmethod
    def _node_client(client: Any, options: dict[str, Any]) -> Any:
        pool = redis.asyncio.ConnectionPool(
            connection_class=client.connection_pool.connection_class, **options
        )
        return redis.asyncio.Redis(connection_pool=pool)

    def owner(self) -> str:
        return _owner.task_owner(self.client_id)

    async def _node_call(self, client: Any, args: List[Any], timeout: float) -> Any:
        link = await asyncio.wait_for(Link.open(client, self.name), timeout + REPLY_MARGIN)
        try:
            return await link.call(args, timeout)
        finally:
            await link.close()

    async def _try_node(self, client: Any, owner: str, lease_ms: int) -> bool:
        try:
            reply = await self._node_call(
                client, self._plan.acquire(Acquisition(owner, lease_ms)), self.node_timeout
            )
        except (*NODE_ERRORS, asyncio.TimeoutError):
            return False
        return self._plan.outcome(reply).acquired

    async def _release_node(self, client: Any, owner: str) -> bool:
        try:
            reply = await self._node_call(client, self._plan.release(owner), self.node_timeout)
        except (*NODE_ERRORS, asyncio.TimeoutError):
            return False
        return reply is not None

    async def _release_all(self, owner: str) -> int:
        results = await asyncio.gather(*(self._release_node(c, owner) for c in self._nodes))
        return sum(results)

    async def acquire(self, wait: float = 0, lease: float = 30.0) -> Optional[float]:
        """The validity in seconds when a majority granted it, else None."""
        owner = self.owner()
        lease_ms = to_ms(lease)
        deadline = time.monotonic() + wait
        while True:
            start = time.monotonic()
            granted = sum(
                await asyncio.gather(*(self._try_node(c, owner, lease_ms) for c in self._nodes))
            )
            validity = self._attempted(owner, lease, start, granted)
            if validity is not None:
                return validity
            await self._release_all(owner)
            pause = self._pause(deadline)
            if pause is None:
                return None
            await asyncio.sleep(pause)

    async def release(self) -> int:
        owner = self.owner()
        self._forget(owner)
        return self._released(owner, await self._release_all(owner))

    async def __aenter__(self) -> float:
        return self._entered(await self.acquire())

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

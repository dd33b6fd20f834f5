"""asyncio `RedLock` (see `rwlock_client.redlock` for the algorithm, and for
why Redisson deprecated it and fencing tokens are the safer answer). The
nodes are asked concurrently."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

import redis.asyncio

from .. import _owner
from .._core import REPLY_MARGIN, PlainPlan, to_ms
from ..errors import LockNotAcquired, LockNotHeld
from ..redlock import NODE_ERRORS, drift, node_options, quorum
from ._link import Link


class RedLock:
    """asyncio `rwlock_client.RedLock` over `redis.asyncio.Redis` clients of
    independent masters. Deprecated by Redisson since 3.12.5: prefer a
    fenced `Lock`."""

    def __init__(
        self,
        clients: Sequence[Any],
        name: str,
        *,
        node_timeout: float = 0.1,
        retry_delay: float = 0.2,
        client_id: Optional[str] = None,
    ) -> None:
        if not clients:
            raise ValueError("a RedLock needs at least one node")
        self.clients = list(clients)
        self._nodes = [
            redis.asyncio.Redis(
                connection_pool=redis.asyncio.ConnectionPool(
                    connection_class=c.connection_pool.connection_class,
                    **node_options(c, node_timeout),
                )
            )
            for c in self.clients
        ]
        self.name = name
        self.node_timeout = node_timeout
        self.retry_delay = retry_delay
        self.client_id = client_id or str(uuid.uuid4())
        self._plan = PlainPlan(name, fenced=False, reentrant=True)
        self._validity: Dict[str, float] = {}

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
                client, self._plan.acquire(owner, lease_ms, None, False), self.node_timeout
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
            validity = lease - (time.monotonic() - start) - drift(lease)
            if granted >= quorum(len(self.clients)) and validity > 0:
                self._validity[owner] = start + validity
                return validity
            await self._release_all(owner)
            pause = random.uniform(0, self.retry_delay)
            if time.monotonic() + pause >= deadline:
                return None
            await asyncio.sleep(pause)

    def validity(self) -> float:
        until = self._validity.get(self.owner())
        return 0.0 if until is None else max(0.0, until - time.monotonic())

    async def release(self) -> int:
        owner = self.owner()
        self._validity.pop(owner, None)
        released = await self._release_all(owner)
        if released == 0:
            raise LockNotHeld(f"{self.name} is not held by {owner} on any node")
        return released

    async def __aenter__(self) -> float:
        validity = await self.acquire()
        if validity is None:
            raise LockNotAcquired(self.name, None)
        return validity

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"RedLock({self.name!r}, {len(self.clients)} nodes)"

"""The asyncio twin of `rwlock_client._link`: one connection checked out of
the pool serving a lock's key."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Optional, Union

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from .._core import Args
from .._link import DEFAULT

#: "Without limit" for a read: redis-py 8 takes math.inf, earlier ones
#: only a number (None falls back to the socket timeout).
FOREVER = 10 * 365 * 24 * 3600.0


class Link:
    def __init__(self, conn: Any, give_back: Callable[[Any], Union[None, Awaitable[None]]]) -> None:
        self._conn, self._give_back = conn, give_back
        self._broken = False

    @classmethod
    async def open(cls, client: Any, key: str) -> "Link":
        if isinstance(client, RedisCluster):
            await client.initialize()
            node = client.get_node_from_key(key)
            if node is None:
                raise LookupError(f"no node serves {key!r}")
            # redis-py 8 has ClusterNode.release; before, the node's free
            # queue takes the connection back.
            give_back = getattr(node, "release", None) or node._free.append
            return cls(node.acquire_connection(), give_back)
        pool = client.connection_pool
        return cls(await pool.get_connection(), pool.release)

    async def call(self, args: Args, timeout: Optional[float] = DEFAULT) -> Any:
        """As the sync `Link.call`: the reply within `timeout` seconds
        (None: without limit), whatever the socket timeout."""
        try:
            await self._conn.send_command(*args)
            if timeout == DEFAULT:
                return await self._conn.read_response()
            return await self._conn.read_response(timeout=FOREVER if timeout is None else timeout)
        except ResponseError:
            raise
        except BaseException:
            self._broken = True
            raise

    async def close(self) -> None:
        if self._broken:
            await self._conn.disconnect()
        result = self._give_back(self._conn)
        if result is not None:
            await result

    async def drop(self) -> None:
        self._broken = True
        await self.close()

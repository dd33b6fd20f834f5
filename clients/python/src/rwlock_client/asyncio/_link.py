"""The asyncio twin of `rwlock_client._link`: one connection checked out of
the pool serving a lock's key."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, Optional, TypeVar, Union

from redis import exceptions
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import MovedError, ResponseError

from .._base import AskMaster, Batch, Conversation, Reconnect, Run, Step
from .._core import DEFAULT, Args, pack
from .._link import Checkout

#: "Without limit" for a read: redis-py 8 takes math.inf, earlier ones
#: only a number (None falls back to the socket timeout).
FOREVER = 10 * 365 * 24 * 3600.0

T = TypeVar("T")


class Link(Checkout):
    def __init__(self, client: Any, key: str) -> None:
        super().__init__(client, key, isinstance(client, RedisCluster))
        self._conn = None
        self._give_back: Callable[[Any], Union[None, Awaitable[None]]] = lambda conn: None

    @classmethod
    async def open(cls, client: Any, key: str) -> "Link":
        link = cls(client, key)
        await link._open()
        return link

    async def _open(self) -> None:
        client = self._client
        if isinstance(client, RedisCluster):
            await client.initialize()
            node = client.get_node_from_key(self._key)
            if node is None:
                raise LookupError(f"no node serves {self._key!r}")
            # redis-py 8 has ClusterNode.release; before, the node's free
            # queue takes the connection back.
            self._give_back = getattr(node, "release", None) or node._free.append
            self._conn = node.acquire_connection()
        else:
            pool = client.connection_pool
            self._give_back = pool.release
            self._conn = await pool.get_connection()

    async def converse(self, conversation: Conversation[T]) -> T:
        """As the sync `Link.converse`, awaiting each step."""
        run = Run(conversation)
        while not run.done:
            try:
                reply = await self.perform(run.step)
            except Exception as e:
                run.fail(e)
            else:
                run.answer(reply)
        return run.result

    async def perform(self, step: Step) -> Any:
        """As the sync `Link.perform`, awaiting the I/O."""
        if isinstance(step, Reconnect):
            await self.reconnect()
            return None
        if isinstance(step, AskMaster):
            return self.learned()
        if isinstance(step, Batch):
            return await self.batch(step.commands, step.timeouts)
        return await self.call(*step)

    async def call(self, args: Args, timeout: Optional[float] = DEFAULT) -> Any:
        """As the sync `Link.call`: the reply within `timeout` seconds
        (None: without limit), whatever the socket timeout; a `MOVED`
        reply followed once."""
        try:
            return await self._call(args, timeout)
        except MovedError:
            if not isinstance(self._client, RedisCluster) or self._moved:
                raise
            self._moved = True
            await self._client.nodes_manager.initialize()
            await self._release()
            await self._open()
            return await self._call(args, timeout)

    async def _call(self, args: Args, timeout: Optional[float]) -> Any:
        with self._breaking():
            await self._conn.send_command(*args)
            return await self._read(timeout)

    async def _read(self, timeout: Optional[float]) -> Any:
        # Without limit on a connection without a socket timeout is the
        # connection's own read, which arms no timer.
        if timeout == DEFAULT or (timeout is None and self._conn.socket_timeout is None):
            return await self._conn.read_response()
        if timeout is None:
            return await self._conn.read_response(timeout=FOREVER)
        # redis.asyncio's read with a timeout of its own replies None when the
        # timeout runs out, as a nil reply reads (a lock's grant): the read is
        # bounded here instead, and raises as the sync read does, so that a
        # reply that did not come is a lost reply (resent once), never a grant.
        try:
            return await asyncio.wait_for(self._conn.read_response(timeout=FOREVER), timeout)
        except asyncio.TimeoutError:
            raise exceptions.TimeoutError(f"no reply within {timeout} s") from None

    async def batch(self, commands: List[Args], timeouts: List[Optional[float]]) -> List[Any]:
        """As the sync `Link.batch`: one pipeline, each reply within its
        timeout, error replies in place; a first `MOVED` followed once."""
        replies = await self._batch(commands, timeouts)
        if isinstance(replies[0], MovedError) and isinstance(self._client, RedisCluster) and not self._moved:
            self._moved = True
            await self._client.nodes_manager.initialize()
            await self._release()
            await self._open()
            replies = await self._batch(commands, timeouts)
        return replies

    async def _batch(self, commands: List[Args], timeouts: List[Optional[float]]) -> List[Any]:
        with self._breaking():
            encoder = self._conn.encoder
            await self._conn.send_packed_command([pack(commands, encoder.encoding, encoder.encoding_errors)])
            replies: List[Any] = []
            for timeout in timeouts:
                try:
                    replies.append(await self._read(timeout))
                except ResponseError as e:
                    replies.append(e)
            return replies

    async def _release(self) -> None:
        """Gives the connection back to its pool, once: a reconnect whose new
        connection failed must not give the old one back again when the
        link is closed (redis.asyncio's pool raises KeyError on that, which
        would hide the failure)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        result = self._give_back(conn)
        if result is not None:
            await result

    async def reconnect(self) -> None:
        """As the sync `Link.reconnect` (the link may have no connection: a
        reconnect before failed to open one)."""
        if self._conn is not None:
            await self._conn.disconnect()
        await self._release()
        self._broken = False
        await self._open()

    async def close(self) -> None:
        if self._broken and self._conn is not None:
            await self._conn.disconnect()
        await self._release()

    async def drop(self) -> None:
        self._broken = True
        await self.close()


async def converse(client: Any, key: str, conversation: Conversation[T]) -> T:
    """As the sync `converse`: on a connection checked out for it."""
    link = await Link.open(client, key)
    try:
        return await link.converse(conversation)
    finally:
        await link.close()

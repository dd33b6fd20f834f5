"""One connection of the pool serving a lock's key, checked out for a few
calls (an acquisition and its WAIT must share a connection) or, for a
session hold, for the hold's whole life."""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, TypeVar

import redis
from redis.cluster import RedisCluster
from redis.connection import Connection
from redis.exceptions import MovedError, ResponseError

from ._base import AskMaster, Batch, Conversation, Reconnect, Run, Step
from ._core import DEFAULT as DEFAULT, Args, Learned, Masters, masters_of, pack

#: redis-py 8 reads one reply with a timeout of its own; before, the
#: socket's timeout is changed for the read.
READ_TIMEOUT_ARGUMENT = "timeout" in inspect.signature(Connection.read_response).parameters

T = TypeVar("T")

#: `is_cluster`'s answers, by the client object's type.
_cluster_types: Dict[type, bool] = {}


def is_cluster(client: Any) -> bool:
    """Whether `client` is a `RedisCluster`. Its class is a typing
    Protocol's, whose `isinstance` runs Python code (as much as a tenth
    of a lock cycle's own work, one per connection checked out); the
    answer depends on the client's type alone, so it is kept by type."""
    kind = type(client)
    found = _cluster_types.get(kind)
    if found is None:
        found = _cluster_types[kind] = isinstance(client, RedisCluster)
    return found


class Checkout:
    """What the sync and asyncio links share, none of it I/O: the client
    and key a link serves, its connection, and whether a call broke it."""

    _conn: Any

    def __init__(self, client: Any, key: str, cluster: bool, masters: Optional[Masters] = None) -> None:
        self._client, self._key = client, key
        self._in_cluster = cluster
        #: The client object's `Masters`, when the caller has it at hand
        #: (a lock object keeps it): finding it by the client object takes
        #: a process-wide lock and a weak reference per acquisition.
        self._masters = masters
        self._moved = False
        self._broken = False

    @contextmanager
    def _breaking(self) -> Iterator[None]:
        """Around a call's send and read: whatever ends it but an error
        reply (a timeout, a lost connection, a cancellation) may leave a
        reply unread on the connection, so it is marked to be disconnected
        rather than given back as it is."""
        try:
            yield
        except ResponseError:
            raise
        except BaseException:
            self._broken = True
            raise

    def learned(self) -> Learned:
        """What the client object learned of this connection's server.
        Outside a cluster every master it meets is one deployment's
        (Sentinel promotes a replica), so they share one state: a new
        master first met while a replica restarts reports one replica
        fewer, and a count learned afresh from it acknowledges grants a
        second failover loses (docs/safety.md). In a cluster each master is
        its own shard's."""
        masters = self._masters if self._masters is not None else masters_of(self._client)
        return masters.of(address_of(self._conn) if self._in_cluster else "")


class Link(Checkout):
    def __init__(self, client: Any, key: str, masters: Optional[Masters] = None) -> None:
        self._cluster: Any = client if is_cluster(client) else None
        super().__init__(client, key, self._cluster is not None, masters)
        self._open(client)

    def _open(self, client: Any) -> None:
        pool: Any
        if self._cluster is not None:
            node_client: redis.Redis = client.get_redis_connection(client.get_node_from_key(self._key))
            pool = node_client.connection_pool
        else:
            pool = client.connection_pool
        self._pool = pool
        self._conn: Any = pool.get_connection()

    def converse(self, conversation: Conversation[T]) -> T:
        """Carries a conversation (`_base`): does each step it yields
        (`perform`), gives it the reply or the error, returns its result."""
        run = Run(conversation)
        while not run.done:
            try:
                reply = self.perform(run.step)
            except Exception as e:
                run.fail(e)
            else:
                run.answer(reply)
        return run.result

    def perform(self, step: Step) -> Any:
        """Does what a conversation's step asks (`_base`): reconnects, tells
        what was learned of the master, or sends a batch or a command; the
        reply is the step's."""
        if isinstance(step, Batch):
            return self.batch(step.commands, step.timeouts)
        if isinstance(step, Reconnect):
            self.reconnect()
            return None
        if isinstance(step, AskMaster):
            return self.learned()
        return self.call(*step)

    def call(self, args: Args, timeout: Optional[float] = DEFAULT) -> Any:
        """Sends one command and reads its reply within `timeout` seconds
        (None: without limit), however short the socket timeout is: a
        `BLOCK` wait's reply comes when the wait ends. A reply that did not
        come in time leaves the connection unusable: it is closed, which
        also ends the server's wait. In a cluster, a `MOVED` reply (the
        slot was resharded) re-reads the slot map and sends the command to
        the slot's new master, once."""
        try:
            return self._call(args, timeout)
        except MovedError:
            if self._cluster is None or self._moved:
                raise
            self._moved = True
            self._cluster.nodes_manager.initialize()
            self._pool.release(self._conn)
            self._open(self._cluster)
            return self._call(args, timeout)

    def _call(self, args: Args, timeout: Optional[float]) -> Any:
        # `_breaking`'s rule, written out: a context manager per call
        # costs a generator and two resumptions of it.
        try:
            self._conn.send_command(*args)
            return self._read(timeout)
        except ResponseError:
            raise
        except BaseException:
            self._broken = True
            raise

    def _read(self, timeout: Optional[float]) -> Any:
        # Without limit on a connection without a socket timeout is the
        # connection's own read: a read with a timeout of its own sets the
        # socket's before and after (two system calls per reply).
        if timeout == DEFAULT or (timeout is None and self._conn.socket_timeout is None):
            return self._conn.read_response()
        if READ_TIMEOUT_ARGUMENT:
            return self._conn.read_response(timeout=timeout)
        return self._read_with_socket_timeout(timeout)

    def batch(self, commands: List[Args], timeouts: List[Optional[float]]) -> List[Any]:
        """Sends the commands at once (a pipeline, one round trip) and reads
        their replies, each within its timeout (as `call`'s); an error
        reply is returned in its place as the `ResponseError` it is. A
        `MOVED` reply to the first command is followed as `call` follows
        one: the whole batch goes to the slot's new master, once."""
        replies = self._batch(commands, timeouts)
        if isinstance(replies[0], MovedError) and self._cluster is not None and not self._moved:
            self._moved = True
            self._cluster.nodes_manager.initialize()
            self._pool.release(self._conn)
            self._open(self._cluster)
            replies = self._batch(commands, timeouts)
        return replies

    def _batch(self, commands: List[Args], timeouts: List[Optional[float]]) -> List[Any]:
        # `_breaking`'s rule, written out as in `_call`.
        try:
            conn = self._conn
            encoder = conn.encoder
            conn.send_packed_command([pack(commands, encoder.encoding, encoder.encoding_errors)])
            replies: List[Any] = []
            for timeout in timeouts:
                try:
                    replies.append(self._read(timeout))
                except ResponseError as e:
                    replies.append(e)
            return replies
        except ResponseError:
            raise
        except BaseException:
            self._broken = True
            raise

    def _read_with_socket_timeout(self, timeout: Optional[float]) -> Any:
        sock = self._conn._sock
        sock.settimeout(timeout)
        try:
            return self._conn.read_response()
        finally:
            sock.settimeout(self._conn.socket_timeout)

    def reconnect(self) -> None:
        """Replaces the connection by a new one from the same pool: the old
        one failed midway, and is closed first."""
        self._conn.disconnect()
        self._pool.release(self._conn)
        self._broken = False
        self._open(self._client)

    def close(self) -> None:
        """Back to the pool (disconnected first if a call failed midway)."""
        if self._broken:
            self._conn.disconnect()
        self._pool.release(self._conn)

    def drop(self) -> None:
        """Closes the connection itself: the server ends what is bound to it
        (a session's holds)."""
        self._broken = True
        self.close()


def converse(client: Any, key: str, conversation: Conversation[T]) -> T:
    """A conversation on a connection of the pool serving `key`, checked out
    for it and given back after (closed if it broke midway)."""
    link = Link(client, key)
    try:
        return link.converse(conversation)
    finally:
        link.close()


def address_of(conn: Any) -> str:
    """A connection's server, as `host:port` (or a Unix socket's path)."""
    path = getattr(conn, "path", None)
    if path:
        return str(path)
    return f"{conn.host}:{conn.port}"

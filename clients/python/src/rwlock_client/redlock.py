"""`RedLock`: the Redlock algorithm over several independent masters.

Read this before using it. Redisson deprecated its `RedissonRedLock` in
3.12.5: after Martin Kleppmann's analysis ("How to do distributed
locking", 2016), a lease-based lock cannot by itself stop a holder that
paused (GC, swapping, a network delay) past its lease from acting after the
next holder started, and Redlock's safety further rests on bounded clock
drift and pauses across the nodes and the client, which real systems do
not guarantee; a node that restarts without fsync'ed state can also grant
the same lock twice. Redlock adds availability (a minority of nodes may be
down), not correctness. When correctness matters, use one lock with
fencing tokens (`Lock(client, name, fenced=True)`) and have the storage
refuse writes carrying an older token: that holds even when a lease runs
out under a paused holder, and with replicas and `ReplicaSync` a failover
keeps every acknowledged hold.

The algorithm (the Redlock paper's): take the lock on each node in turn
with a short per-node timeout; it is held when a majority (N/2 + 1) said
yes and time is left, its validity being lease - elapsed - drift, with
drift = lease * 1% + 2 ms. Otherwise release on every node and retry after
a random delay until the wait runs out. A release goes to every node."""

from __future__ import annotations

import random
import threading
import time
import uuid
from typing import Any, List, Optional, Sequence

import redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, ResponseError, TimeoutError
from redis.retry import Retry

from . import _owner
from ._core import Acquisition, PlainPlan, to_ms
from ._link import Link
from .errors import NotAcquired, NotHeld

#: Errors that count as "this node did not say yes".
NODE_ERRORS = (ConnectionError, TimeoutError, ResponseError, OSError)


def node_options(client: Any, node_timeout: float) -> dict[str, Any]:
    """The connection options of a node's client, with every wait bounded
    by `node_timeout` and no retry: a node down or slow must not hold up
    the others (redis-py retries a failed connect with backoff by default)."""
    options = dict(client.connection_pool.connection_kwargs)
    options.update(
        socket_connect_timeout=node_timeout,
        socket_timeout=node_timeout,
        retry=Retry(NoBackoff(), 0),
        retry_on_error=[],
        retry_on_timeout=False,
    )
    return options


def quorum(nodes: int) -> int:
    return nodes // 2 + 1


def drift(lease: float) -> float:
    """The Redlock paper's allowance for clock drift between nodes."""
    return lease * 0.01 + 0.002


class RedLockCommon:
    """What the sync and asyncio `RedLock` share, none of it I/O: the
    nodes, the owners' validities, and the algorithm's arithmetic."""

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
        self._nodes = [self._node_client(c, node_options(c, node_timeout)) for c in self.clients]
        self.name = name
        self.node_timeout = node_timeout
        self.retry_delay = retry_delay
        self.client_id = client_id or str(uuid.uuid4())
        self._plan = PlainPlan(name, fenced=False, reentrant=True)
        self._validity: dict[str, float] = {}
        self._guard = threading.Lock()

    @staticmethod
    def _node_client(client: Any, options: dict[str, Any]) -> Any:
        """A client of its own for the node `client` is connected to."""
        raise NotImplementedError

    def owner(self) -> str:
        raise NotImplementedError

    def _attempted(self, owner: str, lease: float, start: float, granted: int) -> Optional[float]:
        """The validity of an attempt started at `start` that `granted`
        nodes said yes to, recorded for `owner`; None when it failed."""
        validity = lease - (time.monotonic() - start) - drift(lease)
        if granted >= quorum(len(self.clients)) and validity > 0:
            with self._guard:
                self._validity[owner] = start + validity
            return validity
        return None

    def _pause(self, deadline: float) -> Optional[float]:
        """The random pause before the next attempt; None when it would end
        after `deadline`."""
        pause = random.uniform(0, self.retry_delay)
        return None if time.monotonic() + pause >= deadline else pause

    def validity(self) -> float:
        """Seconds the calling thread's (or task's) hold has left (0 when
        none)."""
        with self._guard:
            until = self._validity.get(self.owner())
        return 0.0 if until is None else max(0.0, until - time.monotonic())

    def _forget(self, owner: str) -> None:
        with self._guard:
            self._validity.pop(owner, None)

    def _released(self, owner: str, released: int) -> int:
        if released == 0:
            raise NotHeld(f"{self.name} is not held by {owner} on any node")
        return released

    def _entered(self, validity: Optional[float]) -> float:
        if validity is None:
            raise NotAcquired(self.name, None)
        return validity

    def __repr__(self) -> str:
        return f"RedLock({self.name!r}, {len(self.clients)} nodes)"


class RedLock(RedLockCommon):
    """The Redlock algorithm over `clients`, independent masters (not one
    cluster's nodes, nor a master and its replicas), all with the module.
    Deprecated by Redisson since 3.12.5; see this module's docstring for
    why, and prefer a fenced `Lock`.

    `acquire(wait, lease)` returns the validity in seconds (how long the
    hold is safe to use, counted from the acquisition's start) or None.
    There is no watchdog: pick a lease longer than the work, or
    re-acquire. `node_timeout`: seconds each node has to connect and
    answer, small against the lease (the nodes are reached through
    connections of the RedLock's own, with the clients' settings but this
    timeout and no retry). `retry_delay`: the upper bound of the random pause
    between attempts."""

    @staticmethod
    def _node_client(client: Any, options: dict[str, Any]) -> Any:
        pool = redis.ConnectionPool(connection_class=client.connection_pool.connection_class, **options)
        return redis.Redis(connection_pool=pool)

    def owner(self) -> str:
        return _owner.thread_owner(self.client_id)

    def _node_call(self, client: Any, args: List[Any], timeout: float) -> Any:
        link = Link(client, self.name)
        try:
            return link.call(args, timeout)
        finally:
            link.close()

    def _try_node(self, client: Any, owner: str, lease_ms: int) -> bool:
        try:
            reply = self._node_call(
                client, self._plan.acquire(Acquisition(owner, lease_ms)), self.node_timeout
            )
        except NODE_ERRORS:
            return False
        return self._plan.outcome(reply).acquired

    def _release_all(self, owner: str) -> int:
        released = 0
        for client in self._nodes:
            try:
                reply = self._node_call(client, self._plan.release(owner), self.node_timeout)
            except NODE_ERRORS:
                continue
            if reply is not None:
                released += 1
        return released

    def acquire(self, wait: float = 0, lease: float = 30.0) -> Optional[float]:
        """Tries until `wait` seconds have passed (0: one attempt). Returns
        the validity in seconds when a majority granted the lock, else None
        (and nothing is left held on any node)."""
        owner = self.owner()
        lease_ms = to_ms(lease)
        deadline = time.monotonic() + wait
        while True:
            start = time.monotonic()
            granted = sum(self._try_node(c, owner, lease_ms) for c in self._nodes)
            validity = self._attempted(owner, lease, start, granted)
            if validity is not None:
                return validity
            self._release_all(owner)
            pause = self._pause(deadline)
            if pause is None:
                return None
            time.sleep(pause)

    def release(self) -> int:
        """Releases on every node; returns on how many the owner held it.
        Raises `NotHeld` when it held it on none."""
        owner = self.owner()
        self._forget(owner)
        return self._released(owner, self._release_all(owner))

    def __enter__(self) -> float:
        return self._entered(self.acquire())

    def __exit__(self, *exc: object) -> None:
        self.release()

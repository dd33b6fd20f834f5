"""asyncio `Lock` and the machinery every asyncio lock shares: the sync
`rwlock_client.lock` with awaits, each task its own owner."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from types import TracebackType
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Callable, Dict, Optional, Type, Union

from redis.exceptions import ConnectionError, ResponseError

from .. import _owner
from .._core import (
    DEFAULT_WATCHDOG_TIMEOUT,
    REPLY_MARGIN,
    Outcome,
    PlainPlan,
    Plan,
    ReplicaSync,
    parse_info,
    sync_commands,
    synced,
    to_ms,
)
from ..errors import LockNotAcquired, LockNotHeld, NotReentrant, NotSynced
from ..lock import block_of, reply_timeout
from ._link import Link

#: Called with the lock and the owner whose hold the watchdog found gone;
#: may be a coroutine function.
LostCallback = Callable[[Any, str], Union[None, Awaitable[None]]]


@dataclass
class _Held:
    count: int = 0
    token: Optional[int] = None
    lost: bool = False
    link: Optional[Link] = None
    dog: Optional["asyncio.Task[None]"] = None


class LockBase:
    """The asyncio twin of `rwlock_client.LockBase`: each asyncio task is
    an owner (`<client UUID>:task-<n>`), as each thread is in the sync
    client; the watchdog is a task."""

    def __init__(
        self,
        client: Any,
        plan: Plan,
        *,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[LostCallback] = None,
    ) -> None:
        self.client = client
        self.name = plan.key
        self.session = session
        self.watchdog_timeout = watchdog_timeout
        self.sync = sync
        self.client_id = client_id or _owner.client_id(client)
        self.on_lost = on_lost
        self._plan = plan
        self._held: Dict[str, _Held] = {}

    def owner(self) -> str:
        """The calling task's owner."""
        return _owner.task_owner(self.client_id)

    @property
    def held(self) -> bool:
        state = self._held.get(self.owner())
        return state is not None and not state.lost

    @property
    def lost(self) -> bool:
        """True once the watchdog found the calling task's hold gone."""
        state = self._held.get(self.owner())
        return state is not None and state.lost

    @property
    def token(self) -> Optional[int]:
        state = self._held.get(self.owner())
        return None if state is None else state.token

    async def acquire(self, wait: Optional[float] = None, lease: Optional[float] = None) -> bool:
        """As the sync `acquire`: True when taken, False when the wait ran
        out; the wait is on the server."""
        return (await self._acquire(wait, lease)).acquired

    async def _acquire(self, wait: Optional[float], lease: Optional[float]) -> Outcome:
        owner = self.owner()
        lease_s = self.watchdog_timeout if lease is None else lease
        lease_ms = to_ms(lease_s)
        block_ms = block_of(wait)
        state = self._held.get(owner)
        session_link = state.link if state is not None else None
        link = session_link or await Link.open(self.client, self._plan.key)
        keep = False
        try:
            args = self._plan.acquire(owner, lease_ms, block_ms, self.session)
            try:
                reply = await link.call(args, reply_timeout(block_ms))
            except ResponseError as e:
                if str(e).startswith("NON_REENTRANT"):
                    raise NotReentrant(f"{self.name}: {e}") from e
                raise
            outcome = self._plan.outcome(reply)
            if outcome.acquired:
                await self._synchronize(link, owner)
                keep = self.session
        finally:
            if link is not session_link and not keep:
                await link.close()
        if outcome.acquired:
            self._record(owner, outcome, link if keep else None, lease is None, lease_s)
        return outcome

    async def _synchronize(self, link: Link, owner: str) -> None:
        if not self.sync.enabled:
            return
        info = parse_info(await link.call(["INFO", "replication", "persistence"]))
        for command in sync_commands(info, self.sync):
            try:
                reply = await link.call(command, self.sync.timeout + REPLY_MARGIN)
            except ResponseError as e:
                if command[0] == "WAITAOF" and "unknown command" in str(e).lower():
                    continue
                raise
            if not synced(command, reply):
                await link.call(self._plan.release(owner))
                raise NotSynced(
                    f"{self.name}: {command[0]} replied {reply!r} within "
                    f"{self.sync.timeout} s; the hold was released"
                )

    def _record(
        self, owner: str, outcome: Outcome, link: Optional[Link], watched: bool, lease_s: float
    ) -> None:
        state = self._held.setdefault(owner, _Held())
        state.count += 1
        state.token = outcome.token
        state.lost = False
        if link is not None and state.link is None:
            state.link = link
        if watched and not self.session and state.dog is None:
            state.dog = asyncio.create_task(self._watch(owner, state, lease_s))

    async def _watch(self, owner: str, state: _Held, lease_s: float) -> None:
        """Renews every lease/3 until cancelled or the hold is gone."""
        last_renewal = time.monotonic()
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                link = await Link.open(self.client, self._plan.key)
                try:
                    reply = await link.call(self._plan.renew(owner, to_ms(lease_s)))
                finally:
                    await link.close()
                held = self._plan.renewed(reply)
            except Exception:  # the connection: try again next time, within the lease
                if time.monotonic() - last_renewal < lease_s:
                    continue
                held = False
            if not held:
                state.lost = True
                state.dog = None
                if self.on_lost is not None:
                    result = self.on_lost(self, owner)
                    if result is not None:
                        await result
                return
            last_renewal = time.monotonic()

    async def release(self) -> None:
        """As the sync `release`; raises `LockNotHeld` when the server says
        the task held nothing."""
        owner = self.owner()
        state = self._held.get(owner)
        session_link = state.link if state is not None else None
        link = session_link or await Link.open(self.client, self._plan.key)
        try:
            reply = await link.call(self._plan.release(owner))
        except ConnectionError:
            if session_link is None or state is None:
                raise
            # The session's connection is gone, and with it its holds.
            await self._forget(owner, state)
            raise LockNotHeld(f"{self.name}: the session's connection closed") from None
        finally:
            if link is not session_link:
                await link.close()
        released = self._plan.released(reply)
        if state is not None:
            state.count -= 1
            if released is None or released or state.count <= 0:
                await self._forget(owner, state)
        if released is None:
            raise LockNotHeld(f"{self.name} is not held by {owner}")

    async def _forget(self, owner: str, state: _Held) -> None:
        if state.dog is not None:
            state.dog.cancel()
            state.dog = None
        if state.link is not None:
            link, state.link = state.link, None
            await link.close()
        if self._held.get(owner) is state:
            del self._held[owner]

    @asynccontextmanager
    async def hold(
        self, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncIterator[Optional[int]]:
        """`async with lock.hold(wait=5) as token:`; raises
        `LockNotAcquired` when the wait runs out."""
        outcome = await self._acquire(wait, lease)
        if not outcome.acquired:
            raise LockNotAcquired(self.name, outcome.pttl)
        try:
            yield outcome.token
        finally:
            await self.release()

    async def __aenter__(self) -> "LockBase":
        await self._acquire(None, None)
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.release()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Lock(LockBase):
    """asyncio `rwlock_client.Lock` (RLock, fenced, non-reentrant, session)
    on `redis.asyncio.Redis` or `redis.asyncio.cluster.RedisCluster`.

    ::

        lock = Lock(redis.asyncio.Redis(port=6399), "invoice:42", fenced=True)
        async with lock.hold(wait=5) as token:
            ...
    """

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        fenced: bool = False,
        reentrant: bool = True,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[LostCallback] = None,
    ) -> None:
        super().__init__(
            client,
            PlainPlan(name, fenced, reentrant),
            session=session,
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self.fenced, self.reentrant = fenced, reentrant

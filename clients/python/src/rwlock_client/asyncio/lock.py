"""asyncio `Lock` and the machinery every asyncio lock shares: the sync
`rwlock_client.lock` with awaits, each task its own owner."""

from __future__ import annotations

from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Type, Union

from redis.exceptions import ConnectionError

from .. import _owner
from .._base import Held, LockCommon, PlainLockCommon, releasing
from .._core import Outcome
from ._link import Link, converse
from .watchdog import Watchdog

#: Called with the lock and the owner whose hold the watchdog found gone;
#: may be a coroutine function.
LostCallback = Callable[[Any, str], Union[None, Awaitable[None]]]

#: An asyncio hold's watchdog.
Dog = Watchdog

class LockBase(LockCommon[Link, Dog, LostCallback]):
    """The asyncio twin of `rwlock_client.LockBase`: each asyncio task is
    an owner (`<client UUID>:task-<n>`), as each thread is in the sync
    client; the watchdog renews on the event loop's timers."""

    def owner(self) -> str:
        """The calling task's owner."""
        return _owner.task_owner(self.client_id)

    async def acquire(self, wait: Optional[float] = None, lease: Optional[float] = None) -> bool:
        """As the sync `acquire`: True when taken, False when the wait ran
        out; the wait is on the server."""
        return (await self._acquire(wait, lease)).acquired

    async def _acquire(self, wait: Optional[float], lease: Optional[float]) -> Outcome:
        request = self._request(wait, lease)
        _, session_link = self._session_link(request.owner)
        link = session_link or await Link.open(self.client, self._plan.key)
        keep = False
        try:
            with self._answering(request.owner):
                outcome = await link.converse(self._acquiring(request, resend=link is not session_link))
            keep = outcome.acquired and self.session
        finally:
            if link is not session_link and not keep:
                await link.close()
        if outcome.acquired:
            self._record(request, outcome, link if keep else None)
        return outcome

    def _start_watchdog(self, owner: str, state: Held[Link, Dog], lease_s: float) -> Dog:
        return Watchdog(lease_s, lambda: self._renew(owner, lease_s), lambda: self._lost(owner, state))

    def _stop_watchdog(self, dog: Dog) -> None:
        dog.stop()

    async def _renew(self, owner: str, lease_s: float) -> bool:
        return await converse(self.client, self._plan.key, self._renewing(owner, lease_s))

    async def _lost(self, owner: str, state: Held[Link, Dog]) -> None:
        self._mark_lost(state)
        if self.on_lost is not None:
            result = self.on_lost(self, owner)
            if result is not None:
                await result

    async def release(self) -> None:
        """As the sync `release`; raises `NotHeld` when the server says
        the task held nothing."""
        owner = self.owner()
        state, session_link = self._session_link(owner)
        unlock = self._unlock(owner, state, session_link is not None)
        link = session_link or await Link.open(self.client, self._plan.key)
        try:
            reply, resent = await link.converse(releasing(unlock.pipeline))
        except ConnectionError:
            if session_link is None or state is None:
                raise
            await self._close(self._session_gone(owner, state))
            raise self._session_closed() from None
        finally:
            if link is not session_link:
                await link.close()
        done, error = self._settle(owner, state, unlock, reply, resent)
        await self._close(done)
        if error is not None:
            raise error

    @staticmethod
    async def _close(link: Optional[Link]) -> None:
        if link is not None:
            await link.close()

    @asynccontextmanager
    async def hold(
        self, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> AsyncIterator[Optional[int]]:
        """`async with lock.hold(wait=5) as token:`; raises
        `NotAcquired` when the wait runs out."""
        token = self._token_of(await self._acquire(wait, lease), self.name)
        try:
            yield token
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


class Lock(PlainLockCommon[Link, Dog, LostCallback], LockBase):
    """asyncio `rwlock_client.Lock` (RLock, fenced, non-reentrant, session)
    on `redis.asyncio.Redis` or `redis.asyncio.cluster.RedisCluster`.

    ::

        lock = Lock(redis.asyncio.Redis(port=6399), "invoice:42", fenced=True)
        async with lock.hold(wait=5) as token:
            ...
    """

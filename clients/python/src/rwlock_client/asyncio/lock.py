"""asyncio `Lock` and the machinery every asyncio lock shares: the sync
`rwlock_client.lock` with awaits, each task its own owner."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Type, TypeVar, Union, cast

from redis.exceptions import ConnectionError, TimeoutError

from .. import _owner
from .._base import AskMaster, Batch, Conversation, Held, LockCommon, PlainLockCommon, Reconnect
from .._core import Outcome
from ._link import Link

#: Called with the lock and the owner whose hold the watchdog found gone;
#: may be a coroutine function.
LostCallback = Callable[[Any, str], Union[None, Awaitable[None]]]

#: An asyncio hold's watchdog: a task.
Dog = asyncio.Task[None]

T = TypeVar("T")


async def converse(link: Link, conversation: Conversation[T]) -> T:
    """The sync `converse`, awaiting each call."""
    try:
        step = next(conversation)
        while True:
            reply: Any
            try:
                if isinstance(step, Reconnect):
                    await link.reconnect()
                    reply = None
                elif isinstance(step, AskMaster):
                    reply = link.learned()
                elif isinstance(step, Batch):
                    reply = await link.batch(step.commands, step.timeouts)
                else:
                    reply = await link.call(*step)
            except Exception as e:
                step = conversation.throw(e)
            else:
                step = conversation.send(reply)
    except StopIteration as done:
        return cast(T, done.value)


class LockBase(LockCommon[Link, Dog, LostCallback]):
    """The asyncio twin of `rwlock_client.LockBase`: each asyncio task is
    an owner (`<client UUID>:task-<n>`), as each thread is in the sync
    client; the watchdog is a task."""

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
            outcome = await converse(link, self._acquiring(request, resend=link is not session_link))
            keep = outcome.acquired and self.session
        finally:
            if link is not session_link and not keep:
                await link.close()
        if outcome.acquired:
            self._record(request, outcome, link if keep else None)
        return outcome

    def _start_watchdog(self, owner: str, state: Held[Link, Dog], lease_s: float) -> Dog:
        return asyncio.create_task(self._watch(owner, state, lease_s))

    def _stop_watchdog(self, dog: Dog) -> None:
        dog.cancel()

    async def _watch(self, owner: str, state: Held[Link, Dog], lease_s: float) -> None:
        """Renews every lease/3 until cancelled or the hold is gone."""
        last_renewal = time.monotonic()
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                link = await Link.open(self.client, self._plan.key)
                try:
                    held = await converse(link, self._renewing(owner, lease_s))
                finally:
                    await link.close()
            except Exception:  # the connection: try again next time, within the lease
                if time.monotonic() - last_renewal < lease_s:
                    continue
                held = False
            if not held:
                self._mark_lost(state)
                if self.on_lost is not None:
                    result = self.on_lost(self, owner)
                    if result is not None:
                        await result
                return
            last_renewal = time.monotonic()

    async def release(self) -> None:
        """As the sync `release`; raises `NotHeld` when the server says
        the task held nothing."""
        owner = self.owner()
        state, session_link = self._session_link(owner)
        releasing = self._release_commands(owner, state, session_link is not None)
        link = session_link or await Link.open(self.client, self._plan.key)
        resent_last = False
        try:
            try:
                reply = self._release_reply(await link.batch(releasing.commands, releasing.timeouts))
            except (ConnectionError, TimeoutError):
                if not releasing.requested:
                    raise
                # As the sync release: resent, answered from the latch.
                await link.close()
                link = await Link.open(self.client, self._plan.key)
                reply = self._release_reply(await link.batch(releasing.commands, releasing.timeouts))
                resent_last = releasing.own_latch
        except ConnectionError:
            if session_link is None or state is None:
                raise
            # The session's connection is gone, and with it its holds.
            with self._guard:
                gone = self._forget(owner, state)
            await self._close(gone)
            raise self._session_closed() from None
        finally:
            if link is not session_link:
                await link.close()
        released = self._released(state, reply, resent_last)
        await self._close(self._count_release(owner, state, released))
        if released is None:
            raise self._not_held(owner)

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

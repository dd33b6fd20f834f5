"""`Lock`: Redisson's RLock (`LOCK.*`), fenced (RFencedLock) or not,
re-entrant or not; and the machinery every sync lock shares."""

from __future__ import annotations

from contextlib import contextmanager
from types import TracebackType
from typing import Any, Callable, Iterator, Optional, Type

from redis.exceptions import ConnectionError, ResponseError

from . import _owner
from ._base import Held, LockCommon, PlainLockCommon, releasing
from ._core import Outcome
from ._core import block_of as block_of, reply_timeout as reply_timeout
from ._link import Link, converse
from .errors import LockError
from .watchdog import SCHEDULER, Watchdog

#: Called from the watchdog's thread with the lock and the owner whose hold
#: was found gone.
LostCallback = Callable[[Any, str], None]

class LockBase(LockCommon[Link, Watchdog, LostCallback]):
    """Acquire, release, the watchdog, sessions and replica sync, over one
    `Plan` (what the kind of lock sends). Safe to share between threads:
    each thread is its own owner."""

    # -- owners --------------------------------------------------------------

    def owner(self) -> str:
        """The calling thread's owner, `<client UUID>:<thread id>`."""
        return _owner.thread_owner(self.client_id)

    # -- acquire and release --------------------------------------------------

    def acquire(self, wait: Optional[float] = None, lease: Optional[float] = None) -> bool:
        """Takes a hold for the calling thread; True when taken, False when
        the wait ran out first.

        `wait`: seconds to wait on the server (`BLOCK`, never polling), any
        longer than the socket timeout; None (the default) without limit, 0
        not at all. `lease`: seconds the hold lasts; None (the default)
        means the watchdog's lease (`watchdog_timeout`, 30 s), renewed
        every third of it while held. With `session=True` the server keeps
        the hold for as long as the connection lives, and no watchdog runs.
        Raises `NotSynced` when the replicas did not acknowledge it."""
        return self._acquire(wait, lease).acquired

    def _acquire(self, wait: Optional[float], lease: Optional[float]) -> Outcome:
        request = self._request(wait, lease)
        _, session_link = self._session_link(request.owner)
        link = session_link or Link(self.client, self._plan.key, self._masters)
        keep = False
        try:
            # `_answering`'s rule, written out: a context manager per
            # acquisition costs a generator and two resumptions of it.
            try:
                outcome = link.converse(self._acquiring(request, resend=link is not session_link))
            except (LockError, ResponseError):
                raise
            except BaseException:
                self._unanswered(request.owner)
                raise
            keep = outcome.acquired and self.session
        finally:
            if link is not session_link and not keep:
                link.close()
        if outcome.acquired:
            self._record(request, outcome, link if keep else None)
        return outcome

    def _start_watchdog(self, owner: str, state: Held[Link, Watchdog], lease_s: float) -> Watchdog:
        return SCHEDULER.watch(
            self.name,
            lease_s,
            lambda: self._renew(owner, lease_s),
            lambda: self._lost(owner, state),
        )

    def _stop_watchdog(self, dog: Watchdog) -> None:
        dog.stop()

    def _renew(self, owner: str, lease_s: float) -> bool:
        return converse(self.client, self._plan.key, self._renewing(owner, lease_s))

    def _lost(self, owner: str, state: Held[Link, Watchdog]) -> None:
        self._mark_lost(state)
        if self.on_lost is not None:
            self.on_lost(self, owner)

    def release(self) -> None:
        """Releases one of the calling thread's holds (the lock is free once
        every hold is released). Raises `NotHeld` when the server says
        the thread held nothing: never taken, or lost."""
        owner = self.owner()
        state, session_link = self._session_link(owner)
        unlock = self._unlock(owner, state, session_link is not None)
        link = session_link or Link(self.client, self._plan.key, self._masters)
        try:
            reply, resent = link.converse(releasing(unlock.pipeline))
        except ConnectionError:
            if session_link is None or state is None:
                raise
            self._close(self._session_gone(owner, state))
            raise self._session_closed() from None
        finally:
            if link is not session_link:
                link.close()
        done, error = self._settle(owner, state, unlock, reply, resent)
        self._close(done)
        if error is not None:
            raise error

    @staticmethod
    def _close(link: Optional[Link]) -> None:
        if link is not None:
            link.close()

    # -- context managers -----------------------------------------------------

    @contextmanager
    def hold(self, wait: Optional[float] = None, lease: Optional[float] = None) -> Iterator[Optional[int]]:
        """`with lock.hold(wait=5) as token:` holds the lock in the block;
        the token is the fencing token (None unless fenced). Raises
        `NotAcquired` when the wait runs out."""
        token = self._token_of(self._acquire(wait, lease), self.name)
        try:
            yield token
        finally:
            self.release()

    def __enter__(self) -> "LockBase":
        self._acquire(None, None)
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.release()


class Lock(PlainLockCommon[Link, Watchdog, LostCallback], LockBase):
    """Redisson's `RLock` on the `LOCK.*` commands: one owner at a time,
    re-entrant.

    `fenced=True` is `RFencedLock`: every acquisition takes the next fencing
    token (`with lock.hold() as token`, or `lock.token`), for the storage to
    refuse writes of older holders. `reentrant=False` is Redisson's
    non-reentrant lock: the holder taking it again gets an error.
    `session=True` binds the hold to a connection kept for it: the server
    keeps it alive, and frees it when that connection closes.

    ::

        lock = Lock(redis.Redis(port=6399), "invoice:42", fenced=True)
        with lock.hold(wait=5) as token:
            storage.write(data, fence=token)
    """

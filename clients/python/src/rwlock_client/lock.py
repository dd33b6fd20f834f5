"""`Lock`: Redisson's RLock (`LOCK.*`), fenced (RFencedLock) or not,
re-entrant or not; and the machinery every sync lock shares."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, Optional, Type

from redis.exceptions import ConnectionError, ResponseError

from . import _owner
from ._core import (
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
from ._link import DEFAULT, Link
from .errors import LockNotAcquired, LockNotHeld, NotReentrant, NotSynced
from .watchdog import Watchdog

#: Called from the watchdog's thread with the lock and the owner whose hold
#: was found gone.
LostCallback = Callable[[Any, str], None]


@dataclass
class _Held:
    """One owner's holds of one lock, as this process knows them."""

    count: int = 0
    token: Optional[int] = None
    lost: bool = False
    link: Optional[Link] = None  # a session's connection
    dog: Optional[Watchdog] = None


def block_of(wait: Optional[float]) -> Optional[int]:
    """`wait` (None: without limit; 0: not at all) as BLOCK's argument."""
    if wait is None:
        return 0
    return None if wait == 0 else to_ms(wait)


def reply_timeout(block_ms: Optional[int]) -> Optional[float]:
    """How long to read an acquisition's reply: its wait and a margin."""
    if block_ms is None:
        return DEFAULT
    return None if block_ms == 0 else block_ms / 1000 + REPLY_MARGIN


class LockBase:
    """Acquire, release, the watchdog, sessions and replica sync, over one
    `Plan` (what the kind of lock sends). Safe to share between threads:
    each thread is its own owner."""

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
        self._guard = threading.Lock()

    # -- owners --------------------------------------------------------------

    def owner(self) -> str:
        """The calling thread's owner, `<client UUID>:<thread id>`."""
        return _owner.thread_owner(self.client_id)

    @property
    def held(self) -> bool:
        """Whether the calling thread holds this lock (as far as this
        process knows: see `lost`)."""
        with self._guard:
            state = self._held.get(self.owner())
            return state is not None and not state.lost

    @property
    def lost(self) -> bool:
        """True once the watchdog found the calling thread's hold gone: its
        lease ran out or the lock was forced open. `release()` then raises
        `LockNotHeld`."""
        with self._guard:
            state = self._held.get(self.owner())
            return state is not None and state.lost

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the calling thread's latest acquisition (a
        fenced lock; None otherwise)."""
        with self._guard:
            state = self._held.get(self.owner())
            return None if state is None else state.token

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
        owner = self.owner()
        lease_s = self.watchdog_timeout if lease is None else lease
        lease_ms = to_ms(lease_s)
        block_ms = block_of(wait)
        with self._guard:
            state = self._held.get(owner)
            session_link = state.link if state is not None else None
        link = session_link or Link(self.client, self._plan.key)
        keep = False
        try:
            args = self._plan.acquire(owner, lease_ms, block_ms, self.session)
            try:
                reply = link.call(args, reply_timeout(block_ms))
            except ResponseError as e:
                if str(e).startswith("NON_REENTRANT"):
                    raise NotReentrant(f"{self.name}: {e}") from e
                raise
            outcome = self._plan.outcome(reply)
            if outcome.acquired:
                self._synchronize(link, owner)
                keep = self.session
        finally:
            if link is not session_link and not keep:
                link.close()
        if outcome.acquired:
            self._record(owner, outcome, link if keep else None, lease is None, lease_s)
        return outcome

    def _synchronize(self, link: Link, owner: str) -> None:
        """WAIT (and WAITAOF) for the hold just taken; released again and
        NotSynced raised when the replicas did not all acknowledge it."""
        if not self.sync.enabled:
            return
        info = parse_info(link.call(["INFO", "replication", "persistence"]))
        for command in sync_commands(info, self.sync):
            try:
                reply = link.call(command, self.sync.timeout + REPLY_MARGIN)
            except ResponseError as e:
                if command[0] == "WAITAOF" and "unknown command" in str(e).lower():
                    continue  # before Redis 7.2: WAIT alone
                raise
            if not synced(command, reply):
                link.call(self._plan.release(owner))
                raise NotSynced(
                    f"{self.name}: {command[0]} replied {reply!r} within "
                    f"{self.sync.timeout} s; the hold was released"
                )

    def _record(
        self, owner: str, outcome: Outcome, link: Optional[Link], watched: bool, lease_s: float
    ) -> None:
        with self._guard:
            state = self._held.setdefault(owner, _Held())
            state.count += 1
            state.token = outcome.token
            state.lost = False
            if link is not None and state.link is None:
                state.link = link
            if watched and not self.session and state.dog is None:
                state.dog = Watchdog(
                    self.name,
                    lease_s,
                    lambda: self._renew(owner, lease_s),
                    lambda: self._lost(owner, state),
                )
                state.dog.start()

    def _renew(self, owner: str, lease_s: float) -> bool:
        link = Link(self.client, self._plan.key)
        try:
            return self._plan.renewed(link.call(self._plan.renew(owner, to_ms(lease_s))))
        finally:
            link.close()

    def _lost(self, owner: str, state: _Held) -> None:
        with self._guard:
            state.lost = True
            state.dog = None
        if self.on_lost is not None:
            self.on_lost(self, owner)

    def release(self) -> None:
        """Releases one of the calling thread's holds (the lock is free once
        every hold is released). Raises `LockNotHeld` when the server says
        the thread held nothing: never taken, or lost."""
        owner = self.owner()
        with self._guard:
            state = self._held.get(owner)
            session_link = state.link if state is not None else None
        link = session_link or Link(self.client, self._plan.key)
        try:
            reply = link.call(self._plan.release(owner))
        except ConnectionError:
            if session_link is None or state is None:
                raise
            # The session's connection is gone, and with it its holds.
            with self._guard:
                self._forget(owner, state)
            raise LockNotHeld(f"{self.name}: the session's connection closed") from None
        finally:
            if link is not session_link:
                link.close()
        released = self._plan.released(reply)
        with self._guard:
            if state is not None:
                state.count -= 1
                if released is None or released or state.count <= 0:
                    self._forget(owner, state)
        if released is None:
            raise LockNotHeld(f"{self.name} is not held by {owner}")

    def _forget(self, owner: str, state: _Held) -> None:
        """Called under the guard: stops the watchdog, returns a session's
        connection to the pool (nothing is bound to it any more)."""
        if state.dog is not None:
            state.dog.stop()
        if state.link is not None:
            state.link.close()
        if self._held.get(owner) is state:
            del self._held[owner]

    # -- context managers -----------------------------------------------------

    @contextmanager
    def hold(self, wait: Optional[float] = None, lease: Optional[float] = None) -> Iterator[Optional[int]]:
        """`with lock.hold(wait=5) as token:` holds the lock in the block;
        the token is the fencing token (None unless fenced). Raises
        `LockNotAcquired` when the wait runs out."""
        outcome = self._acquire(wait, lease)
        if not outcome.acquired:
            raise LockNotAcquired(self.name, outcome.pttl)
        try:
            yield outcome.token
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

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Lock(LockBase):
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

"""What the sync and asyncio permit semaphores share, none of it I/O: the
`PERMIT.*` commands (docs/design.md §17) as conversations (`_base`), the
ids a semaphore object's watchdog renews, and the request latches it
leaves for its next release."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Generic, List, Optional, Set, Tuple, TypeVar

from ._base import Attempt, Batch, Conversation, Releasing, flag, nothing, one, releasing
from ._core import DEFAULT, DEFAULT_WATCHDOG_TIMEOUT, Args, Outcome, ReplicaSync, to_ms
from ._semaphore import CountingCommon, _permits
from .errors import NotHeld

DogT = TypeVar("DogT")
CallbackT = TypeVar("CallbackT")

#: The lease of a permit that never expires (Redisson's default; the
#: server's -1).
NEVER = math.inf


def lease_ms(lease: float) -> int:
    """A lease in seconds as the server takes it: whole ms, -1 for `NEVER`."""
    return -1 if lease == NEVER else to_ms(lease)


def _ids(reply: Any, block_ms: Optional[int]) -> Outcome:
    """`PERMIT.ACQUIRE` replies the ids taken (an array, for any count);
    refused, the nearest expiry (an integer) or nil."""
    if isinstance(reply, list):
        return Outcome(True, ids=tuple(i.decode() if isinstance(i, bytes) else str(i) for i in reply))
    return Outcome(False)


@dataclass
class Watched(Generic[DogT]):
    """The ids one lease-less acquisition took, as long as any is held
    here: its watchdog renews them together."""

    ids: Set[str]
    lease_ms: int
    dog: Optional[DogT] = None
    lost: bool = False


class PermitSemaphoreCommon(CountingCommon, Generic[DogT, CallbackT]):
    """Redisson's `RPermitExpirableSemaphore` on the `PERMIT.*` commands:
    the count `name` of free permits and the zset `{name}:timeout` of the
    permits taken, each an id with its own expiry. Ids have no owner:
    whoever has one may release it.

    A permit acquired without a lease gets the watchdog's
    (`watchdog_timeout`), renewed every third of it by
    `PERMIT.UPDATELEASE` until released; a renewal answered 0 ends the
    renewals and reports the permits lost (`on_lost`). An acquisition
    carries a request id: a reply lost in flight is sent again once and
    answered the same ids, taking nothing more; its latch is deleted by
    the object's next release (in its pipeline), or expires. A release
    carries none (`PERMIT.RELEASE` takes none): a lost reply is raised,
    never sent again."""

    family = "PERMIT"

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        on_lost: Optional[CallbackT] = None,
    ) -> None:
        super().__init__(client, name, sync=sync)
        self.watchdog_timeout, self.on_lost = watchdog_timeout, on_lost
        self._watched: Dict[str, Watched[DogT]] = {}
        self._lost: Set[str] = set()

    def _start_watchdog(self, group: Watched[DogT]) -> DogT:
        raise NotImplementedError

    def _stop_watchdog(self, dog: DogT) -> None:
        raise NotImplementedError

    def lost(self, permit_id: str) -> bool:
        """True once the watchdog found the permit gone (its lease ran out,
        or it was released elsewhere) until it is released here."""
        with self._guard:
            return permit_id in self._lost

    # -- acquire ----------------------------------------------------------------

    def _attempt(self, permits: int, wait: Optional[float], lease: Optional[float]) -> Attempt:
        """`PERMIT.ACQUIRE name permits lease [BLOCK ms] REQUEST id ttl`,
        with a fresh request id; the lease: the watchdog's when None."""
        name = self.name
        ms = lease_ms(self.watchdog_timeout if lease is None else lease)
        return self._attempt_of(
            ["PERMIT.ACQUIRE", name, _permits(permits), ms],
            wait,
            _ids,
            lambda outcome: ["PERMIT.RELEASE", name, *outcome.ids],
        )

    def _granted(self, outcome: Outcome, lease: Optional[float]) -> Optional[List[str]]:
        """The ids taken (None: the wait ran out); without a lease, their
        watchdog started."""
        if not outcome.acquired:
            return None
        if lease is None:
            group: Watched[DogT] = Watched(set(outcome.ids), lease_ms(self.watchdog_timeout))
            with self._guard:
                for i in outcome.ids:
                    self._watched[i] = group
            dog = self._start_watchdog(group)
            with self._guard:
                # A release from another thread may have come first.
                orphan = not group.ids
                group.dog = None if orphan else dog
            if orphan:
                self._stop_watchdog(dog)
        return list(outcome.ids)

    # -- the watchdog -----------------------------------------------------------

    def _renewing(self, group: Watched[DogT]) -> Conversation[bool]:
        """One renewal of the group's ids still held here, one pipeline:
        whether the server still held every one still held here once the
        replies came (an id released meanwhile is not lost)."""
        with self._guard:
            ids = sorted(group.ids)
        if not ids:
            return True
        commands: List[Args] = [["PERMIT.UPDATELEASE", self.name, i, group.lease_ms] for i in ids]
        replies = yield Batch(commands, [DEFAULT] * len(commands))
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        with self._guard:
            return all(int(r) == 1 for i, r in zip(ids, replies) if i in group.ids)

    def _mark_lost(self, group: Watched[DogT]) -> Tuple[str, ...]:
        """The group's ids, now lost: no more renewals."""
        with self._guard:
            group.dog, group.lost = None, True
            self._lost |= group.ids
            return tuple(sorted(group.ids))

    # -- release ----------------------------------------------------------------

    def _releasing(self, ids: Tuple[str, ...]) -> Conversation[int]:
        """`PERMIT.RELEASE name id...` and the `DEL` of the latches kept,
        one pipeline; the ids' renewals end whatever the reply. Raises
        `NotHeld` when the server released none (all or none: an id was
        not held, or had expired)."""
        if not ids:
            raise ValueError("release takes one permit id or more")
        keys = self._taken_latches()
        commands: List[Args] = [["PERMIT.RELEASE", self.name, *ids]]
        if keys:
            commands.append(["DEL", *keys])
        try:
            reply, _ = yield from releasing(Releasing(commands, False))
            released = int(reply)
        finally:
            self._forget(ids)
        if released == 0:
            raise NotHeld(f"{self.name}: permit {', '.join(ids)} is not held")
        return released

    def _trying_to_release(self, permit_id: str) -> Conversation[bool]:
        """`PERMIT.TRYRELEASE name id`: True when released in its lease."""
        try:
            return (yield from one(["PERMIT.TRYRELEASE", self.name, permit_id], flag))
        finally:
            self._forget((permit_id,))

    def _forget(self, ids: Tuple[str, ...]) -> None:
        """Ends the ids' renewals (a group's watchdog stops with its last id)."""
        stop: List[DogT] = []
        with self._guard:
            for i in ids:
                self._lost.discard(i)
                group = self._watched.pop(i, None)
                if group is None:
                    continue
                group.ids.discard(i)
                if not group.ids and group.dog is not None:
                    stop.append(group.dog)
                    group.dog = None
        for dog in stop:
            self._stop_watchdog(dog)

    # -- leases and counts ------------------------------------------------------

    def _updating_lease(self, permit_id: str, lease: float) -> Conversation[bool]:
        return one(["PERMIT.UPDATELEASE", self.name, permit_id, lease_ms(lease)], flag)

    def _lease_left(self, permit_id: str) -> Conversation[Optional[float]]:
        """Seconds left; None when it never expires, 0 when not held."""
        left = yield from one(["PERMIT.LEASETIME", self.name, permit_id], int)
        return None if left == -1 else left / 1000

    def _setting(self, permits: int) -> Conversation[None]:
        return one(["PERMIT.SETPERMITS", self.name, permits], nothing)

    def _counting(self, what: str) -> Conversation[int]:
        return one([f"PERMIT.{what}", self.name], int)

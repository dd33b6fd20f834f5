"""What the sync and asyncio semaphores share, none of it I/O: the
`SEMAPHORE.*` commands (docs/design.md §15) and the `PERMIT.*` ones they
have in common (§17) as conversations (`_base`), and the request latches
a semaphore object leaves for its next release."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Union

from redis.exceptions import ConnectionError, TimeoutError

from ._base import (
    RECONNECT,
    Attempt,
    Conversation,
    Releasing,
    acquiring,
    flag,
    nothing,
    one,
    releasing,
    undo_of,
)
from ._core import (
    DEFAULT,
    LATCH_TTL_MS,
    AcquireRequest,
    Args,
    Outcome,
    ReplicaSync,
    acquire_latch,
    block_of,
    new_request_id,
    release_latch,
    to_ms,
)
from .errors import NotAcquired


def _permits(permits: int) -> int:
    """An acquisition's or a release's count: one or more, as
    `threading.Semaphore.release(n)` takes (Redisson refuses a negative
    count and sends nothing for 0)."""
    if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
        raise ValueError(f"permits must be an integer of 1 or more, not {permits!r}")
    return permits


def _granted(reply: Any, block_ms: Optional[int]) -> Outcome:
    """`SEMAPHORE.ACQUIRE` replies 1 when the permits were taken, 0 when not."""
    return Outcome(int(reply) == 1)


class CountingCommon:
    """What a semaphore (`SEMAPHORE.*`) and a permit semaphore (`PERMIT.*`,
    `family`) share: the count `name`, the acquisitions through the one
    driver with their request ids, and the latches the next release
    deletes (in its pipeline), or that expire."""

    family = "SEMAPHORE"

    def __init__(self, client: Any, name: str, *, sync: ReplicaSync = ReplicaSync()) -> None:
        self.client, self.name, self.sync = client, name, sync
        # The latches whose replies came: granted acquisitions' (and a
        # semaphore's answered releases'), for the next release's DEL.
        self._latches: List[str] = []
        self._guard = threading.Lock()

    def _attempt_of(
        self,
        args: Args,
        wait: Optional[float],
        outcome: Callable[[Any, Optional[int]], Outcome],
        undo: Union[Args, Callable[[Outcome], Args]],
    ) -> Attempt:
        """An acquisition `args [BLOCK ms] REQUEST id ttl` with a fresh
        request id, for the one driver."""

        def command(block_ms: Optional[int], requested: Optional[AcquireRequest]) -> Args:
            sent = list(args)
            if block_ms is not None:
                sent += ["BLOCK", block_ms]
            if requested is not None:
                sent += ["REQUEST", requested[0], requested[1]]
            return sent

        name = self.name
        return Attempt(
            name,
            self.sync,
            block_of(wait),
            command,
            outcome,
            undo=undo,
            latch=lambda ident: acquire_latch(name, ident),
            request=new_request_id(),
        )

    def _acquiring(self, attempt: Attempt) -> Conversation[Outcome]:
        """The acquisition by the one acquisition driver; a grant's latches
        are kept for the next release. When the driver raises a lost reply
        (its resend's too), what either send may have taken is given back
        (`_giving_back`) before the error is raised."""
        try:
            outcome = yield from acquiring(attempt)
        except (ConnectionError, TimeoutError) as lost:
            # Either send may have taken permits (a semaphore's have no
            # lease to end them). One more look, on a new connection; when
            # the server is out of reach for that too, the first error is
            # the one to raise.
            try:
                yield RECONNECT
                yield from self._giving_back(attempt)
            except (ConnectionError, TimeoutError):
                pass
            raise lost
        if outcome.acquired:
            with self._guard:
                self._latches += [acquire_latch(self.name, r) for r in outcome.requests]
        return outcome

    def _giving_back(self, attempt: Attempt) -> Conversation[None]:
        """After an acquisition cancelled midway (its connection closed, so
        the server dropped it if it still waited): the acquisition again,
        with its request id and no wait. A grant means the first send was
        granted (answered from its latch: a grant in flight that never
        reached the caller) or this one took the permits now; either way
        they are released again."""
        assert attempt.request is not None
        reply = yield attempt.command(None, (attempt.request, LATCH_TTL_MS)), DEFAULT
        outcome = attempt.outcome(reply, None)
        if outcome.acquired:
            yield undo_of(attempt, outcome), DEFAULT

    def _taken_latches(self) -> List[str]:
        """The latches kept so far, for a release's `DEL`."""
        with self._guard:
            keys, self._latches = self._latches, []
        return keys

    def _trying_to_set(self, permits: int, ttl: Optional[float] = None) -> Conversation[bool]:
        args: Args = [f"{self.family}.TRYSETPERMITS", self.name, permits]
        if ttl is not None:
            args += ["TTL", to_ms(ttl)]
        return one(args, flag)

    def _adding(self, permits: int) -> Conversation[None]:
        return one([f"{self.family}.ADDPERMITS", self.name, permits], nothing)

    def _reading(self) -> Conversation[int]:
        return one([f"{self.family}.AVAILABLE", self.name], int)

    def _check_acquired(self, acquired: bool) -> None:
        """`hold()`'s check: a wait that ran out raises `NotAcquired`."""
        if not acquired:
            raise NotAcquired(self.name, None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SemaphoreCommon(CountingCommon):
    """Redisson's `RSemaphore` on the `SEMAPHORE.*` commands, over the
    string `name` holding the count of free permits. Permits have no owner:
    any thread, task or process may release them.

    Every acquisition and release carries a request id, so that a reply
    lost in flight is sent again once, answered from the server's latch,
    never taking or giving permits twice; an acquisition waits on the
    server (`BLOCK`) and for the master's replicas (`sync`) as a lock's
    does. The latches are deleted by the next release's `DEL` (in its
    pipeline), or expire."""

    def _attempt(self, permits: int, wait: Optional[float]) -> Attempt:
        """`SEMAPHORE.ACQUIRE name permits [BLOCK ms] REQUEST id ttl`, with
        a fresh request id."""
        permits = _permits(permits)
        return self._attempt_of(
            ["SEMAPHORE.ACQUIRE", self.name, permits], wait, _granted, ["SEMAPHORE.RELEASE", self.name, permits]
        )

    def _releasing(self, permits: int) -> Conversation[None]:
        """`SEMAPHORE.RELEASE name permits REQUEST id 13500` and the `DEL` of
        the latches kept, one pipeline; resent once after a lost reply
        (`releasing`). Its own latch is kept for the next release (never in
        its own `DEL`: its resend is answered from it)."""
        request = new_request_id()
        args: Args = ["SEMAPHORE.RELEASE", self.name, _permits(permits), "REQUEST", request, LATCH_TTL_MS]
        keys = self._taken_latches()
        commands: List[Args] = [args, ["DEL", *keys]] if keys else [args]
        try:
            yield from releasing(Releasing(commands, True))
        finally:
            with self._guard:
                self._latches.append(release_latch(self.name, request))

    def _draining(self) -> Conversation[int]:
        return one(["SEMAPHORE.DRAIN", self.name], int)

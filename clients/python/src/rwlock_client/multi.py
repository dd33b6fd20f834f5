"""`MultiLock`: several holds taken, renewed and released as one, by one
atomic command (`LOCK.ACQUIREALL`): all or none, never a partial set."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from ._core import DEFAULT_WATCHDOG_TIMEOUT, Hold, MultiPlan, PlainPlan, ReadWritePlan, ReplicaSync
from .lock import LockBase, LostCallback

#: A lock object (`Lock`, a read or write lock) or a `(kind, name)` pair,
#: kind one of LOCK, READ, WRITE.
HoldSpec = Union[LockBase, Tuple[str, str]]


def hold_of(spec: Any) -> Hold:
    """The `(kind, name)` of a pair or of a lock object (sync or asyncio)."""
    if isinstance(spec, tuple):
        return (str(spec[0]).upper(), str(spec[1]))
    plan = getattr(spec, "_plan", None)
    if isinstance(plan, PlainPlan):
        return ("LOCK", plan.key)
    if isinstance(plan, ReadWritePlan):
        return (plan.mode, plan.key)
    raise TypeError(f"a MultiLock cannot hold {spec!r}")


class MultiLock(LockBase):
    """Redisson's `RedissonMultiLock`, on the server: the holds of several
    locks (plain, read, write) for one owner, taken together or not at all
    while waiting on the server (`BLOCK`), so two MultiLocks over the same
    locks in any order never deadlock. Renewed and released together too:
    the watchdog reports the MultiLock lost when any hold is gone, and
    `release()` frees every hold still held, then raises `LockNotHeld` if
    one was not.

    In a cluster every name must be in one hash slot: give them one
    `{tag}`. Only a lock object's kind and name count: a fenced or
    non-reentrant `Lock` is held here as a plain one (no token taken).

    ::

        both = MultiLock(client, [Lock(client, "{acct}:1"), ("WRITE", "{acct}:2")])
        with both.hold(wait=5):
            ...
    """

    def __init__(
        self,
        client: Any,
        holds: Sequence[HoldSpec],
        *,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[LostCallback] = None,
    ) -> None:
        plan = MultiPlan([hold_of(h) for h in holds])
        super().__init__(
            client,
            plan,
            session=session,
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self.holds = list(plan.holds)

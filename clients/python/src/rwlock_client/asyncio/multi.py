"""asyncio `MultiLock`."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from .._core import DEFAULT_WATCHDOG_TIMEOUT, MultiPlan, ReplicaSync
from ..multi import hold_of
from .lock import LockBase, LostCallback


class MultiLock(LockBase):
    """asyncio `rwlock_client.MultiLock`: `holds` are asyncio (or sync) lock
    objects or `(kind, name)` pairs."""

    def __init__(
        self,
        client: Any,
        holds: Sequence[Any],
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

"""asyncio `ReadWriteLock`."""

from __future__ import annotations

from typing import Any, Optional

from .._core import DEFAULT_WATCHDOG_TIMEOUT, ReadWritePlan, ReplicaSync
from .lock import LockBase, LostCallback


class ReadLock(LockBase):
    """The read side of an asyncio `ReadWriteLock`."""


class WriteLock(LockBase):
    """The write side of an asyncio `ReadWriteLock`."""


class ReadWriteLock:
    """asyncio `rwlock_client.ReadWriteLock`.

    ::

        rw = ReadWriteLock(redis.asyncio.Redis(port=6399), "orders")
        async with rw.write_lock().hold(wait=5):
            ...
    """

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        fenced: bool = False,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[LostCallback] = None,
    ) -> None:
        self.client, self.name = client, name
        options: dict[str, Any] = dict(
            session=session,
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self._read = ReadLock(client, ReadWritePlan(name, "READ"), **options)
        self._write = WriteLock(client, ReadWritePlan(name, "WRITE", fenced), **options)

    def read_lock(self) -> ReadLock:
        return self._read

    def write_lock(self) -> WriteLock:
        return self._write

    def __repr__(self) -> str:
        return f"ReadWriteLock({self.name!r})"

"""asyncio `ReadWriteLock`."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from .._base import ReadWriteLockCommon
from .._core import Plan
from .lock import LockBase, LostCallback


class ReadLock(LockBase):
    """The read side of an asyncio `ReadWriteLock`."""


class WriteLock(LockBase):
    """The write side of an asyncio `ReadWriteLock`."""


class ReadWriteLock(ReadWriteLockCommon[ReadLock, WriteLock, LostCallback]):
    """asyncio `rwlock_client.ReadWriteLock`.

    ::

        rw = ReadWriteLock(redis.asyncio.Redis(port=6399), "orders")
        async with rw.write_lock().hold(wait=5):
            ...
    """

    def _sides(
        self, client: Any, read: Plan, write: Plan, options: Dict[str, Any]
    ) -> Tuple[ReadLock, WriteLock]:
        return ReadLock(client, read, **options), WriteLock(client, write, **options)

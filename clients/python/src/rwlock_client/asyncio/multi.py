"""asyncio `MultiLock`."""

from __future__ import annotations

from .._base import MultiLockCommon
from ._link import Link
from .lock import Dog, LockBase, LostCallback


class MultiLock(MultiLockCommon[Link, Dog, LostCallback], LockBase):
    """asyncio `rwlock_client.MultiLock`: `holds` are asyncio (or sync) lock
    objects or `(kind, name)` pairs."""

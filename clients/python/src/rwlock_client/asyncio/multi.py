"""asyncio `MultiLock`."""

from __future__ import annotations

import asyncio

from .._base import MultiLockCommon
from ._link import Link
from .lock import LockBase, LostCallback


class MultiLock(MultiLockCommon[Link, "asyncio.Task[None]", LostCallback], LockBase):
    """asyncio `rwlock_client.MultiLock`: `holds` are asyncio (or sync) lock
    objects or `(kind, name)` pairs."""

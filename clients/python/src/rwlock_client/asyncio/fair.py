"""asyncio `FairLock`."""

from __future__ import annotations

from .._base import FairLockCommon
from ._link import Link
from .lock import Dog, LockBase, LostCallback


class FairLock(FairLockCommon[Link, Dog, LostCallback], LockBase):
    """asyncio `rwlock_client.FairLock` (RFairLock): each task waits in the
    line on the server, in arrival order."""

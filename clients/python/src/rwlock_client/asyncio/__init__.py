"""The asyncio client, on `redis.asyncio`: the same locks as
`rwlock_client`, with `await lock.acquire(...)`, `await lock.release()`
and `async with`. Each asyncio task is its own owner, as each thread is in
the sync client; the watchdog renews on the event loop's timers.

::

    import redis.asyncio
    from rwlock_client.asyncio import ReadWriteLock

    rw = ReadWriteLock(redis.asyncio.Redis(port=6399), "orders")
    async with rw.write_lock().hold(wait=5):
        ...
"""

from .._core import ReplicaSync
from ..errors import LockError, NotAcquired, NotHeld, NotReentrant, NotSynced, ReleaseUnknown
from .client import Client
from .fair import FairLock
from .latch import CountDownLatch
from .lock import Lock, LockBase
from .multi import MultiLock
from .permit import NEVER, PermitExpirableSemaphore
from .redlock import RedLock
from .rwlock import ReadLock, ReadWriteLock, WriteLock
from .semaphore import Semaphore

__all__ = [
    "Client",
    "CountDownLatch",
    "FairLock",
    "Lock",
    "LockBase",
    "LockError",
    "NotAcquired",
    "NotHeld",
    "MultiLock",
    "NotReentrant",
    "NotSynced",
    "NEVER",
    "PermitExpirableSemaphore",
    "ReadLock",
    "ReadWriteLock",
    "RedLock",
    "ReleaseUnknown",
    "ReplicaSync",
    "Semaphore",
    "WriteLock",
]

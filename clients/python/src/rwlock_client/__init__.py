"""Redisson's locks for Python on the rwlock Redis module (redis-py, sync;
`rwlock_client.asyncio` for asyncio).

- `Lock`: RLock (`LOCK.*`); `fenced=True` for RFencedLock's tokens,
  `reentrant=False` for the non-reentrant lock.
- `FairLock`: RFairLock (`FAIRLOCK.*`), holders in arrival order.
- `ReadWriteLock`: RReadWriteLock (`RWLOCK.*`), `read_lock()`/`write_lock()`.
- `MultiLock`: several holds taken atomically (`LOCK.ACQUIREALL`).
- `RedLock`: the Redlock algorithm over independent masters (deprecated by
  Redisson; prefer a fenced `Lock`, see `rwlock_client.redlock`).
- `Semaphore`: RSemaphore (`SEMAPHORE.*`), permits taken and released.
- `PermitExpirableSemaphore`: RPermitExpirableSemaphore (`PERMIT.*`), permits
  taken as ids with leases.
- `CountDownLatch`: RCountDownLatch (`LATCH.*`), a wait for zero.

::

    import redis
    from rwlock_client import Lock

    lock = Lock(redis.Redis(port=6399), "invoice:42")
    with lock.hold(wait=5):
        ...

Owners are Redisson's `<client UUID>:<thread id>`; waits happen on the
server (`BLOCK`); a hold taken without a lease is renewed by a watchdog;
each acquisition waits for the master's replicas (`ReplicaSync`).
"""

from ._core import ReplicaSync
from .errors import LockError, NotAcquired, NotHeld, NotReentrant, NotSynced, ReleaseUnknown
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
    "MultiLock",
    "NotAcquired",
    "NotHeld",
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

__version__ = "0.4.0"

"""`Client`, asyncio: the client object (docs/clients.md)."""

from __future__ import annotations

from .._client import ClientCommon, Kinds
from .fair import FairLock
from .latch import CountDownLatch
from .lock import Lock, LostCallback
from .multi import MultiLock
from .permit import PermitExpirableSemaphore
from .rwlock import ReadWriteLock
from .semaphore import Semaphore

KINDS = Kinds(Lock, FairLock, ReadWriteLock, MultiLock, Semaphore, CountDownLatch, PermitExpirableSemaphore)


class Client(
    ClientCommon[
        Lock, FairLock, ReadWriteLock, MultiLock, Semaphore, CountDownLatch, PermitExpirableSemaphore, LostCallback
    ]
):
    """The locks of one redis client (asyncio): `lock`, `fair_lock`,
    `read_write_lock` and `multi_lock` make them with the client's settings
    (`watchdog_timeout`, `sync`, `client_id`); `semaphore` (with `sync`),
    `permit_expirable_semaphore` (with `watchdog_timeout` and `sync`) and
    `count_down_latch` the synchronizers.

    ::

        from rwlock_client.asyncio import Client

        locks = Client(redis_client, watchdog_timeout=10)
        async with locks.lock("invoice:42").hold(wait=5):
            ...
    """

    def _kinds(
        self,
    ) -> Kinds[Lock, FairLock, ReadWriteLock, MultiLock, Semaphore, CountDownLatch, PermitExpirableSemaphore]:
        return KINDS

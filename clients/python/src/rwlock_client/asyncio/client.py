"""`Client`, asyncio: the client object (docs/clients.md)."""

from __future__ import annotations

from .._client import ClientCommon, Kinds
from .fair import FairLock
from .lock import Lock, LostCallback
from .multi import MultiLock
from .rwlock import ReadWriteLock

KINDS = Kinds(Lock, FairLock, ReadWriteLock, MultiLock)


class Client(ClientCommon[Lock, FairLock, ReadWriteLock, MultiLock, LostCallback]):
    """The locks of one redis client (asyncio): `lock`, `fair_lock`,
    `read_write_lock` and `multi_lock` make them with the client's settings
    (`watchdog_timeout`, `sync`, `client_id`).

    ::

        from rwlock_client.asyncio import Client

        locks = Client(redis_client, watchdog_timeout=10)
        async with locks.lock("invoice:42").hold(wait=5):
            ...
    """

    def _kinds(self) -> Kinds[Lock, FairLock, ReadWriteLock, MultiLock]:
        return KINDS

"""`ReadWriteLock`: Redisson's RReadWriteLock on the `RWLOCK.*` commands."""

from __future__ import annotations

from typing import Any, Optional

from ._core import DEFAULT_WATCHDOG_TIMEOUT, ReadWritePlan, ReplicaSync
from .lock import LockBase, LostCallback


class ReadLock(LockBase):
    """The read side: shared by any number of owners while nobody writes.
    Made by `ReadWriteLock.read_lock()`."""


class WriteLock(LockBase):
    """The write side: one owner, and no reader but that owner. Made by
    `ReadWriteLock.write_lock()`."""


class ReadWriteLock:
    """Redisson's `RReadWriteLock`: `read_lock()` and `write_lock()` give the
    two sides, each a lock with `acquire`/`release`, `hold()` and `with`.

    An owner (`<client UUID>:<thread id>`) re-enters its own holds: read in
    read, write in write, read while writing (releasing the write then
    leaves a reader). A reader cannot upgrade: release the read first.
    `fenced=True` makes the write lock take a fencing token on each
    acquisition. The other options are `Lock`'s.

    ::

        rw = ReadWriteLock(redis.Redis(port=6399), "orders")
        with rw.write_lock().hold(wait=5):
            ...  # no other reader or writer
        with rw.read_lock():
            ...  # other readers may be here too
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

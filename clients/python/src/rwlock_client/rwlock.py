"""`ReadWriteLock`: Redisson's RReadWriteLock on the `RWLOCK.*` commands."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from ._base import ReadWriteLockCommon
from ._core import Plan
from .lock import LockBase, LostCallback


class ReadLock(LockBase):
    """The read side: shared by any number of owners while nobody writes.
    Made by `ReadWriteLock.read_lock()`."""


class WriteLock(LockBase):
    """The write side: one owner, and no reader but that owner. Made by
    `ReadWriteLock.write_lock()`."""


class ReadWriteLock(ReadWriteLockCommon[ReadLock, WriteLock, LostCallback]):
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

    def _sides(
        self, client: Any, read: Plan, write: Plan, options: Dict[str, Any]
    ) -> Tuple[ReadLock, WriteLock]:
        return ReadLock(client, read, **options), WriteLock(client, write, **options)

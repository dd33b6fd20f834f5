"""`MultiLock`: several holds taken, renewed and released as one, by one
atomic command (`LOCK.ACQUIREALL`): all or none, never a partial set."""

from __future__ import annotations

from ._base import HoldSpec as HoldSpec, MultiLockCommon, hold_of as hold_of
from ._link import Link
from .lock import LockBase, LostCallback
from .watchdog import Watchdog


class MultiLock(MultiLockCommon[Link, Watchdog, LostCallback], LockBase):
    """Redisson's `RedissonMultiLock`, on the server: the holds of several
    locks (plain, read, write) for one owner, taken together or not at all
    while waiting on the server (`BLOCK`), so two MultiLocks over the same
    locks in any order never deadlock. Renewed and released together too:
    the watchdog reports the MultiLock lost when any hold is gone, and
    `release()` frees every hold still held, then raises `NotHeld` if
    one was not.

    In a cluster every name must be in one hash slot: give them one
    `{tag}`. Only a lock object's kind and name count: a fenced or
    non-reentrant `Lock` is held here as a plain one (no token taken).

    ::

        both = MultiLock(client, [Lock(client, "{acct}:1"), ("WRITE", "{acct}:2")])
        with both.hold(wait=5):
            ...
    """

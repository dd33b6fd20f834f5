"""The exceptions the locks raise."""

from __future__ import annotations

from typing import Optional


class LockError(Exception):
    """Base of every error of this package."""


class NotAcquired(LockError):
    """The lock was held by others (a semaphore's permits were taken) until
    the wait ran out. `pttl`: how many milliseconds the holds in the way had
    left (None when unknown, and for a semaphore)."""

    def __init__(self, name: str, pttl: Optional[int]) -> None:
        said = f"{name}: the wait ran out" if pttl is None else f"{name} is held by others ({pttl} ms left)"
        super().__init__(said)
        self.name, self.pttl = name, pttl


class NotHeld(LockError):
    """A release or renewal of a hold the owner does not have: never taken
    here, or lost (its lease ran out, or it was forced open)."""


class ReleaseUnknown(LockError):
    """A lock's last release (the owner held one hold) whose reply was
    lost, resent, and answered "not held": the first send released it, or
    the hold was gone before it (its lease ran out, a failover lost it,
    its key was deleted), and nobody can tell which. The owner holds it no
    longer either way: its count is 0 and its watchdog stopped. Not a
    `NotHeld`, which would claim the hold was gone before the release."""


class NotSynced(LockError):
    """The acquisition reached the master but not all of its replicas
    within the sync timeout; the hold was released again, as Redisson's
    `checkLockSyncedSlaves` does."""


class NotReentrant(LockError):
    """A non-reentrant lock (`reentrant=False`) taken again by its holder;
    nothing changed (the server's `NON_REENTRANT_REACQUIRE` error)."""

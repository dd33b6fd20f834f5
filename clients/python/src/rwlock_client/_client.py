"""The client object (docs/clients.md), sync or asyncio: `ClientCommon`
makes every kind of lock with one redis client and one set of settings;
`rwlock_client.Client` and `rwlock_client.asyncio.Client` say which lock
classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

from . import _owner
from ._base import HoldSpec
from ._core import DEFAULT_WATCHDOG_TIMEOUT, ReplicaSync

LockT = TypeVar("LockT")
FairT = TypeVar("FairT")
ReadWriteT = TypeVar("ReadWriteT")
MultiT = TypeVar("MultiT")
SemaphoreT = TypeVar("SemaphoreT")
LatchT = TypeVar("LatchT")
PermitT = TypeVar("PermitT")
CallbackT = TypeVar("CallbackT")


@dataclass(frozen=True)
class Kinds(Generic[LockT, FairT, ReadWriteT, MultiT, SemaphoreT, LatchT, PermitT]):
    """The classes a client makes (their constructors)."""

    lock: Callable[..., LockT]
    fair_lock: Callable[..., FairT]
    read_write_lock: Callable[..., ReadWriteT]
    multi_lock: Callable[..., MultiT]
    semaphore: Callable[..., SemaphoreT]
    count_down_latch: Callable[..., LatchT]
    permit_expirable_semaphore: Callable[..., PermitT]


class ClientCommon(Generic[LockT, FairT, ReadWriteT, MultiT, SemaphoreT, LatchT, PermitT, CallbackT]):
    """The locks of one redis client, as a `RedissonClient` gives them: every
    lock it makes shares the client UUID of its owners (default: the redis
    client's own), the watchdog timeout and the replica acknowledgement;
    the lock classes' constructors take the same arguments one by one. It
    keeps no state of its own: what the locks learn of the replicas and the
    UUID a redis client gets are the redis client's, so a lock it makes and
    one a constructor makes on the same redis client are the same owner."""

    def __init__(
        self,
        redis_client: Any,
        *,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
    ) -> None:
        self.redis = redis_client
        self.watchdog_timeout = watchdog_timeout
        self.sync = sync
        self.client_id = client_id or _owner.client_id(redis_client)

    def _kinds(self) -> Kinds[LockT, FairT, ReadWriteT, MultiT, SemaphoreT, LatchT, PermitT]:
        raise NotImplementedError

    def _make(self, make: Callable[..., Any], target: Any, **options: Any) -> Any:
        return make(
            self.redis,
            target,
            watchdog_timeout=self.watchdog_timeout,
            sync=self.sync,
            client_id=self.client_id,
            **options,
        )

    def lock(
        self,
        name: str,
        *,
        fenced: bool = False,
        reentrant: bool = True,
        session: bool = False,
        on_lost: Optional[CallbackT] = None,
    ) -> LockT:
        """`Lock(redis, name, ...)`: Redisson's RLock; `fenced=True` its
        RFencedLock, `reentrant=False` its non-reentrant lock."""
        made: LockT = self._make(
            self._kinds().lock, name, fenced=fenced, reentrant=reentrant, session=session, on_lost=on_lost
        )
        return made

    def fair_lock(self, name: str, *, reentrant: bool = True, on_lost: Optional[CallbackT] = None) -> FairT:
        """`FairLock(redis, name, ...)`: Redisson's RFairLock."""
        made: FairT = self._make(self._kinds().fair_lock, name, reentrant=reentrant, on_lost=on_lost)
        return made

    def read_write_lock(
        self, name: str, *, fenced: bool = False, session: bool = False, on_lost: Optional[CallbackT] = None
    ) -> ReadWriteT:
        """`ReadWriteLock(redis, name, ...)`: Redisson's RReadWriteLock."""
        made: ReadWriteT = self._make(
            self._kinds().read_write_lock, name, fenced=fenced, session=session, on_lost=on_lost
        )
        return made

    def multi_lock(
        self, holds: Sequence[HoldSpec], *, session: bool = False, on_lost: Optional[CallbackT] = None
    ) -> MultiT:
        """`MultiLock(redis, holds, ...)`: several holds taken at once."""
        made: MultiT = self._make(self._kinds().multi_lock, holds, session=session, on_lost=on_lost)
        return made

    def semaphore(self, name: str) -> SemaphoreT:
        """`Semaphore(redis, name, sync=...)`: Redisson's RSemaphore (no
        owner, so neither the UUID nor the watchdog applies)."""
        made: SemaphoreT = self._kinds().semaphore(self.redis, name, sync=self.sync)
        return made

    def count_down_latch(self, name: str) -> LatchT:
        """`CountDownLatch(redis, name)`: Redisson's RCountDownLatch."""
        made: LatchT = self._kinds().count_down_latch(self.redis, name)
        return made

    def permit_expirable_semaphore(self, name: str, *, on_lost: Optional[Callable[..., Any]] = None) -> PermitT:
        """`PermitExpirableSemaphore(redis, name, ...)`: Redisson's
        RPermitExpirableSemaphore, with the client's watchdog timeout (the
        lease of a permit taken without one) and `sync` (ids have no
        owner: the UUID does not apply)."""
        made: PermitT = self._kinds().permit_expirable_semaphore(
            self.redis, name, watchdog_timeout=self.watchdog_timeout, sync=self.sync, on_lost=on_lost
        )
        return made

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.redis!r}, client_id={self.client_id!r})"

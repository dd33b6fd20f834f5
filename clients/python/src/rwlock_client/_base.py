"""What the sync and asyncio lock objects share, none of it I/O: their
state, their options, and their conversations with the server written
once as generators (sans I/O). A conversation yields each command with its
reply timeout and is sent the reply, or thrown the error the call raised;
the links (`_link.py`, `asyncio/_link.py`) only carry the steps over a
connection, with or without `await`."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, Generic, List, Optional, Sequence, Tuple, TypeVar, Union

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import _owner
from ._core import (
    DEFAULT,
    DEFAULT_WATCHDOG_TIMEOUT,
    REPLY_MARGIN,
    Acquisition,
    Args,
    FairPlan,
    Hold,
    MultiPlan,
    Outcome,
    PlainPlan,
    Plan,
    ReadWritePlan,
    AUTO,
    AcquireRequest,
    Learned,
    ReplicaSync,
    block_of,
    new_request_id,
    parse_info,
    reply_timeout,
    request_ttl,
    synced,
    to_ms,
)
from .errors import NotAcquired, NotHeld, NotReentrant, NotSynced

LinkT = TypeVar("LinkT")
DogT = TypeVar("DogT")
CallbackT = TypeVar("CallbackT")
ReadT = TypeVar("ReadT")
WriteT = TypeVar("WriteT")
T = TypeVar("T")

class Reconnect:
    """The step a conversation yields to have its connection replaced by a
    new one of the same pool (the old one failed midway); it is sent None."""


#: The one `Reconnect` step.
RECONNECT = Reconnect()


class AskMaster:
    """The step a conversation yields for what its client object learned
    of the master its connection goes to; it is sent that `Learned`."""


#: The one `AskMaster` step.
MASTER = AskMaster()


@dataclass(frozen=True)
class Batch:
    """The step that sends several commands at once (a pipeline: one round
    trip) and reads their replies, each within its own timeout (as
    `Link.call`'s). It is sent the list of replies, an error reply in its
    place as the `ResponseError` it is; a connection error is thrown."""

    commands: List[Args]
    timeouts: List[Optional[float]]


#: A command and how long to wait for its reply (`Link.call`'s timeout), a
#: `Batch`, `RECONNECT` or `MASTER`.
Step = Union[Tuple[Args, Optional[float]], Batch, Reconnect, AskMaster]

#: A conversation with the server that ends with a T.
Conversation = Generator[Step, Any, T]

INFO: Args = ["INFO", "replication", "persistence"]


class Run(Generic[T]):
    """A conversation under way, for the sync and asyncio `Link.converse` to
    carry over a connection: `step` is what it asks for next, `answer` and
    `fail` give it what that step got (a reply, or the error raised), and
    once it is `done`, `result` is what it returned. The generator's
    protocol (send, throw, StopIteration) is spoken here, once."""

    step: Step
    result: T

    def __init__(self, conversation: Conversation[T]) -> None:
        self._conversation = conversation
        self.done = False
        self._resume(conversation.send, None)

    def answer(self, reply: Any) -> None:
        self._resume(self._conversation.send, reply)

    def fail(self, error: Exception) -> None:
        self._resume(self._conversation.throw, error)

    def _resume(self, resume: Callable[[Any], Step], value: Any) -> None:
        try:
            self.step = resume(value)
        except StopIteration as finished:
            self.done, self.result = True, finished.value


@dataclass
class Held(Generic[LinkT, DogT]):
    """One owner's holds of one lock, as this process knows them."""

    count: int = 0
    lease_ms: int = 0  # the lease of the latest hold, re-armed by a release
    token: Optional[int] = None
    lost: bool = False
    link: Optional[LinkT] = None  # a session's connection
    dog: Optional[DogT] = None
    # The request ids of acquisitions answered since the last release: their
    # latches go with the next release's latch (one DEL), or expire.
    latches: List[str] = field(default_factory=list)
    # The latches of re-entered releases answered: their DEL waits for the
    # next release (a release's own latch must outlive its reply).
    release_latches: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Releasing:
    """A release's pipeline; `requested`: it carries a request id (it is
    resent once after a lost reply); `kept`: the release's own latch, of
    the owner's last hold here, for the handle's next release to delete
    (never this pipeline's `DEL`: a resend is answered from it)."""

    commands: List[Args]
    requested: bool
    kept: Optional[str]

    @property
    def timeouts(self) -> List[Optional[float]]:
        return [DEFAULT] * len(self.commands)


def releasing(pipeline: Releasing) -> Conversation[Any]:
    """A release's pipeline, and the release's reply (an error reply
    raised; the `DEL`'s is not looked at: latches it missed expire on their
    own). When the reply is lost (a connection error or a read timeout: the
    release may or may not have run), a release with a request id is sent
    again, once, on a new connection: the server answers it from its latch
    as it answered the first send (the release's own latch is in no `DEL`
    of its), instead of releasing a re-entered hold (or permits) twice."""
    batch = Batch(pipeline.commands, pipeline.timeouts)
    try:
        replies = yield batch
    except (ConnectionError, TimeoutError):
        if not pipeline.requested:
            raise
        yield RECONNECT
        replies = yield batch
    if isinstance(replies[0], Exception):
        raise replies[0]
    return replies[0]


@dataclass(frozen=True)
class Request:
    """One acquisition's arguments, checked before a connection is taken."""

    owner: str
    lease_s: float
    lease_ms: int
    block_ms: Optional[int]
    watched: bool  # no lease given: the watchdog renews it


def _remaining(block_ms: Optional[int], started: float) -> Optional[int]:
    """What is left of a wait begun at `started`: None (one attempt) when it
    ran out, 0 (without limit) and None as they were."""
    if not block_ms:
        return block_ms
    left = block_ms - int((time.monotonic() - started) * 1000)
    return left if left > 0 else None


def one(args: Args, read: Callable[[Any], T], timeout: Optional[float] = DEFAULT) -> Conversation[T]:
    """One command, read within `timeout` (`Link.call`'s), and what its
    reply says."""
    return read((yield args, timeout))


def flag(reply: Any) -> bool:
    """A reply of 1 (yes) or 0 (no)."""
    return int(reply) == 1


def nothing(reply: Any) -> None:
    """A reply that says nothing (nil)."""
    return None


@dataclass(frozen=True)
class Attempt:
    """One acquisition of any kind (a lock's hold, a semaphore's permits), as
    `acquiring` drives it: what it sends, how its reply reads, and which
    of the rules it follows."""

    #: What the errors it raises name.
    name: str
    sync: ReplicaSync
    #: The wait (`block_of`: None one attempt, 0 without limit).
    block_ms: Optional[int]
    #: The acquisition with a wait and a request id (`id`, `ttl`; None: none).
    command: Callable[[Optional[int], Optional[AcquireRequest]], Args]
    #: What its reply (sent with that wait) says.
    outcome: Callable[[Any, Optional[int]], Outcome]
    #: What gives a grant back when the replicas did not acknowledge it
    #: (made from the grant when what was taken is known only from it).
    undo: Union[Args, Callable[[Outcome], Args]]
    #: Where the server keeps a granted request id's reply.
    latch: Callable[[str], str]
    #: Whether it carries `REQUEST id ttl` (`LOCK.ACQUIREALL` takes none).
    requests: bool = True
    #: Whether a lost reply is sent again (False: raised).
    resend: bool = True
    #: Whether the resend takes a new request id instead of the first.
    new_id: bool = False
    #: The first request id (None: a fresh one).
    request: Optional[str] = None


def acquiring(a: Attempt) -> Conversation[Outcome]:
    """The one acquisition driver: the acquisition, with the replica sync of
    what it takes in the same pipeline (one round trip).

    It carries a fresh request id (`REQUEST id ttl`). When its reply is
    lost (a connection error or a read timeout: the command may or may not
    have run), it is sent again once, on a new connection, with the same id
    (a wait with what is left of it): the server answers a granted first
    send from its latch, taking nothing more, so what it grants is counted
    once and nothing is left orphaned. A grant the replicas did not
    acknowledge is given back (`undo`) and raises `NotSynced`."""
    block_ms = a.block_ms
    ident = (a.request or new_request_id()) if a.requests else None
    ids = [] if ident is None else [ident]
    started = time.monotonic()
    learned: Optional[Learned] = None
    if a.sync.enabled:
        learned = yield MASTER
        if a.sync.learns and not learned.learned:
            # Nothing is assumed of a master never heard from: one INFO
            # first (once per master and client object).
            learned.learn(parse_info((yield INFO, DEFAULT)), time.monotonic())
    try:
        try:
            batch = acquire_batch(a, block_ms, ident, learned, resent=False)
            replies = yield batch
        except (ConnectionError, TimeoutError):
            if ident is None or not a.resend:
                raise
            yield RECONNECT
            if a.new_id:
                ident = new_request_id()
                ids.append(ident)
            block_ms = _remaining(block_ms, started)
            batch = acquire_batch(a, block_ms, ident, learned, resent=True)
            replies = yield batch
        reply, syncs = _read_batch(batch, replies, learned)
    except ResponseError as e:
        if str(e).startswith("NON_REENTRANT"):
            raise NotReentrant(f"{a.name}: {e}") from e
        if str(e).startswith("NOREPLICAS"):
            raise NotSynced(f"{a.name}: the master refused the write: {e}") from e
        raise
    outcome = dataclasses.replace(a.outcome(reply, block_ms), requests=tuple(ids))
    if outcome.acquired:
        failed = _unsynced(a.sync, syncs, learned)
        if failed is not None:
            yield undo_of(a, outcome), DEFAULT
            raise NotSynced(f"{a.name}: {failed} within {a.sync.timeout} s; what it took was given back")
    return outcome


def undo_of(a: Attempt, outcome: Outcome) -> Args:
    """What gives `outcome`'s grant back."""
    return a.undo(outcome) if callable(a.undo) else a.undo


def acquire_batch(
    a: Attempt,
    block_ms: Optional[int],
    ident: Optional[str],
    learned: Optional[Learned],
    resent: bool,
) -> Batch:
    """The acquisition's pipeline: the acquisition; after a resend, its
    latch's expiry set again (a replay writes nothing on this connection,
    so WAIT would not cover the grant the first send wrote: this write puts
    the connection past it); `WAIT` and `WAITAOF` as learned; the periodic
    INFO when due. The sync commands' replies come after the
    acquisition's: each is read within the sync timeout and a margin."""
    requested = None if ident is None else (ident, request_ttl(block_ms))
    commands = [a.command(block_ms, requested)]
    timeouts = [reply_timeout(block_ms)]
    if learned is None:
        return Batch(commands, timeouts)
    if resent and ident is not None:
        commands.append(["PEXPIRE", a.latch(ident), request_ttl(block_ms)])
        timeouts.append(DEFAULT)
    for command in learned.sync_commands(a.sync):
        commands.append(command)
        timeouts.append(a.sync.timeout + REPLY_MARGIN)
    if a.sync.learns and learned.refresh_due(time.monotonic()):
        commands.append(INFO)
        timeouts.append(DEFAULT)
    return Batch(commands, timeouts)


def _read_batch(batch: Batch, replies: List[Any], learned: Optional[Learned]) -> Tuple[Any, List[Tuple[Args, Any]]]:
    """The acquisition's reply (raised when an error reply) and each sync
    command with its reply; a refreshing INFO's reply is learned (for the
    acquisitions after this one)."""
    if isinstance(replies[0], Exception):
        raise replies[0]
    syncs: List[Tuple[Args, Any]] = []
    for command, reply in zip(batch.commands[1:], replies[1:]):
        if command[0] in ("WAIT", "WAITAOF"):
            syncs.append((command, reply))
        elif command is INFO and learned is not None and not isinstance(reply, Exception):
            learned.learn(parse_info(reply), time.monotonic())
    return replies[0], syncs


def _unsynced(sync: ReplicaSync, syncs: List[Tuple[Args, Any]], learned: Optional[Learned]) -> Optional[str]:
    """What fell short of the sync asked for (None: nothing)."""
    for command, reply in syncs:
        said = " ".join(str(a) for a in command)
        if isinstance(reply, Exception):
            unknown = "unknown command" in str(reply).lower()
            if command[0] == "WAITAOF" and unknown and sync.aof_mode == AUTO:
                if learned is not None:
                    learned.no_waitaof()  # before Redis 7.2: WAIT alone
                continue
            return f"{said} replied the error {reply}"
        if not synced(command, reply):
            return f"{said} replied {reply!r}"
    return None


class LockCommon(Generic[LinkT, DogT, CallbackT]):
    """The state of a lock object over one `Plan` (what the kind of lock
    sends): its options, and each owner's holds as this process knows
    them. Subclasses give the owner, the watchdog and the I/O."""

    def __init__(
        self,
        client: Any,
        plan: Plan,
        *,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[CallbackT] = None,
    ) -> None:
        self.client = client
        self.name = plan.key
        self.session = session
        self.watchdog_timeout = watchdog_timeout
        self.sync = sync
        self.client_id = client_id or _owner.client_id(client)
        self.on_lost = on_lost
        self._plan = plan
        self._held: Dict[str, Held[LinkT, DogT]] = {}
        # The own latches of last releases answered (their owners' holds
        # forgotten): the next release's DEL takes them, or they expire.
        self._spent_latches: List[str] = []
        self._guard = threading.Lock()

    def owner(self) -> str:
        raise NotImplementedError

    def _start_watchdog(self, owner: str, state: Held[LinkT, DogT], lease_s: float) -> DogT:
        raise NotImplementedError

    def _stop_watchdog(self, dog: DogT) -> None:
        raise NotImplementedError

    @property
    def held(self) -> bool:
        """Whether the calling thread (or asyncio task) holds this lock (as
        far as this process knows: see `lost`)."""
        with self._guard:
            state = self._held.get(self.owner())
            return state is not None and not state.lost

    @property
    def lost(self) -> bool:
        """True once the watchdog found the calling thread's (or task's)
        hold gone: its lease ran out or the lock was forced open.
        `release()` then raises `NotHeld`."""
        with self._guard:
            state = self._held.get(self.owner())
            return state is not None and state.lost

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the calling thread's (or task's) latest
        acquisition (a fenced lock; None otherwise)."""
        with self._guard:
            state = self._held.get(self.owner())
            return None if state is None else state.token

    # -- acquire ----------------------------------------------------------------

    def _request(self, wait: Optional[float], lease: Optional[float]) -> Request:
        lease_s = self.watchdog_timeout if lease is None else lease
        return Request(self.owner(), lease_s, to_ms(lease_s), block_of(wait), lease is None)

    def _session_link(self, owner: str) -> Tuple[Optional[Held[LinkT, DogT]], Optional[LinkT]]:
        """The owner's holds and the connection its session holds are bound to."""
        with self._guard:
            state = self._held.get(owner)
            return state, (state.link if state is not None else None)

    def _acquiring(self, request: Request, resend: bool) -> Conversation[Outcome]:
        """The acquisition (`acquiring`, with `_attempt`)."""
        return acquiring(self._attempt(request, resend))

    def _attempt(self, request: Request, resend: bool) -> Attempt:
        """What the acquisition sends. `resend` False (a session's re-entry,
        whose connection was the session's): a lost reply is raised. A
        session acquisition resends with a *new* id: its connection closed,
        the server released what the first send may have bound to it, and a
        replay would answer granted while binding nothing."""
        plan = self._plan
        return Attempt(
            self.name,
            self.sync,
            request.block_ms,
            lambda block_ms, requested: plan.acquire(
                Acquisition(request.owner, request.lease_ms, block_ms, self.session, requested)
            ),
            plan.outcome,
            undo=plan.release(request.owner),
            latch=plan.acquire_latch,
            requests=plan.requests,
            resend=resend,
            new_id=self.session,
        )

    def _record(self, request: Request, outcome: Outcome, link: Optional[LinkT]) -> None:
        """Counts a hold taken (`link`: the session's connection kept for it)."""
        with self._guard:
            state = self._held.setdefault(request.owner, Held())
            state.count += 1
            state.lease_ms = request.lease_ms
            state.token = outcome.token
            state.lost = False
            state.latches.extend(outcome.requests)
            if link is not None and state.link is None:
                state.link = link
            if request.watched and not self.session and state.dog is None:
                state.dog = self._start_watchdog(request.owner, state, request.lease_s)

    @staticmethod
    def _token_of(outcome: Outcome, name: str) -> Optional[int]:
        """A `hold()`'s token; raises `NotAcquired` when the wait ran out."""
        if not outcome.acquired:
            raise NotAcquired(name, outcome.pttl)
        return outcome.token

    # -- the watchdog -----------------------------------------------------------

    def _renewing(self, owner: str, lease_s: float) -> Conversation[bool]:
        """One renewal: whether the owner still held it."""
        return one(self._plan.renew(owner, to_ms(lease_s)), self._plan.renewed)

    def _mark_lost(self, state: Held[LinkT, DogT]) -> None:
        with self._guard:
            state.lost = True
            state.dog = None

    # -- release ----------------------------------------------------------------

    def _count_release(
        self, owner: str, state: Optional[Held[LinkT, DogT]], released: Optional[bool]
    ) -> Optional[LinkT]:
        """Counts a release the server replied `released` to; the session's
        connection to close when nothing of the owner's is left here."""
        with self._guard:
            if state is None:
                return None
            state.count -= 1
            if released is None or released or state.count <= 0:
                return self._forget(owner, state)
            return None

    def _forget(self, owner: str, state: Held[LinkT, DogT]) -> Optional[LinkT]:
        """Called under the guard: stops the watchdog, drops the owner's
        holds, and returns the session's connection, for the caller to
        give back to the pool (nothing is bound to it any more)."""
        if state.dog is not None:
            self._stop_watchdog(state.dog)
            state.dog = None
        link, state.link = state.link, None
        if self._held.get(owner) is state:
            del self._held[owner]
        return link

    def _release_args(
        self, owner: str, state: Optional[Held[LinkT, DogT]], session: bool
    ) -> Tuple[Args, Optional[str]]:
        """A release's command and its request id. A single lock's release
        outside a session carries one (`REQUEST`), as Redisson's does, so
        the release resent after a lost reply is answered from the server's
        latch instead of releasing a re-entered hold twice."""
        lease_ms = state.lease_ms if state is not None and state.lease_ms else to_ms(self.watchdog_timeout)
        single = not isinstance(self._plan, MultiPlan)
        request = new_request_id() if single and not session else None
        return self._plan.release(owner, lease_ms, request), request

    def _release_commands(self, owner: str, state: Optional[Held[LinkT, DogT]], session: bool) -> Releasing:
        """A release's pipeline (one round trip): the release, and a `DEL`
        of the latches whose replies came: the acquisitions' since the last
        release, and those of releases before it (the owner's re-entered
        ones, and any owner's last ones on this handle). The release's own
        latch is never in its `DEL`: it waits for a later release's `DEL`
        (or expires), so that this release, resent after a lost reply, is
        answered from it (what the first send replied) instead of
        releasing a second hold or finding nothing. A release without a
        request id (a session's, a multi-lock's) sends no `DEL`: the
        acquisitions' latches then expire on their own."""
        args, request = self._release_args(owner, state, session)
        ids: List[str] = []
        earlier: List[str] = []
        last = True
        if state is not None:
            with self._guard:
                ids, state.latches = state.latches, []
                earlier, state.release_latches = state.release_latches, []
                last = state.count <= 1
                if request is not None and not last:
                    state.release_latches.append(self._plan.latch(request))
        if request is None:
            return Releasing([args], False, None)
        with self._guard:
            spent, self._spent_latches = self._spent_latches, []
        keys: Args = [*earlier, *spent, *(self._plan.acquire_latch(i) for i in ids)]
        kept = self._plan.latch(request) if last else None
        return Releasing([args, ["DEL", *keys]] if keys else [args], True, kept)

    def _session_gone(self, owner: str, state: Held[LinkT, DogT]) -> Optional[LinkT]:
        """After the session's connection failed, its holds are gone with
        it: forgets them, and returns the connection, to close."""
        with self._guard:
            return self._forget(owner, state)

    def _keep_latch(self, releasing: Releasing) -> None:
        """Once a last release is done with (no resend to come), its latch
        is left for the handle's next release's `DEL`."""
        if releasing.kept is not None:
            with self._guard:
                self._spent_latches.append(releasing.kept)

    def _released(self, state: Optional[Held[LinkT, DogT]], reply: Any) -> Optional[bool]:
        """What a release's reply says (`Plan.released`), a resend's as
        the first send's (answered from its latch); None (not held) too
        when the watchdog found the hold lost, whatever the server replied."""
        released = self._plan.released(reply)
        if state is not None:
            with self._guard:
                if state.lost:
                    return None
        return released

    def _not_held(self, owner: str) -> NotHeld:
        return NotHeld(f"{self.name} is not held by {owner}")

    def _session_closed(self) -> NotHeld:
        return NotHeld(f"{self.name}: the session's connection closed")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class PlainLockCommon(LockCommon[LinkT, DogT, CallbackT]):
    """`Lock`'s constructor, for the sync and asyncio one."""

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        fenced: bool = False,
        reentrant: bool = True,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[CallbackT] = None,
    ) -> None:
        super().__init__(
            client,
            PlainPlan(name, fenced, reentrant),
            session=session,
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self.fenced, self.reentrant = fenced, reentrant


class FairLockCommon(LockCommon[LinkT, DogT, CallbackT]):
    """`FairLock`'s constructor, for the sync and asyncio one."""

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        reentrant: bool = True,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[CallbackT] = None,
    ) -> None:
        super().__init__(
            client,
            FairPlan(name, reentrant),
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self.reentrant = reentrant


#: A lock object (`Lock`, a read or write lock, sync or asyncio) or a
#: `(kind, name)` pair, kind one of LOCK, READ, WRITE.
HoldSpec = Union[LockCommon[Any, Any, Any], Tuple[str, str]]


def hold_of(spec: Any) -> Hold:
    """The `(kind, name)` of a pair or of a lock object (sync or asyncio)."""
    if isinstance(spec, tuple):
        return (str(spec[0]).upper(), str(spec[1]))
    plan = getattr(spec, "_plan", None)
    if isinstance(plan, PlainPlan):
        return ("LOCK", plan.key)
    if isinstance(plan, ReadWritePlan):
        return (plan.mode, plan.key)
    raise TypeError(f"a MultiLock cannot hold {spec!r}")


class MultiLockCommon(LockCommon[LinkT, DogT, CallbackT]):
    """`MultiLock`'s constructor, for the sync and asyncio one."""

    def __init__(
        self,
        client: Any,
        holds: Sequence[HoldSpec],
        *,
        session: bool = False,
        watchdog_timeout: float = DEFAULT_WATCHDOG_TIMEOUT,
        sync: ReplicaSync = ReplicaSync(),
        client_id: Optional[str] = None,
        on_lost: Optional[CallbackT] = None,
    ) -> None:
        plan = MultiPlan([hold_of(h) for h in holds])
        super().__init__(
            client,
            plan,
            session=session,
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self.holds = list(plan.holds)


class ReadWriteLockCommon(Generic[ReadT, WriteT, CallbackT]):
    """`ReadWriteLock`, sync or asyncio: its two sides, made by `_sides`."""

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
        on_lost: Optional[CallbackT] = None,
    ) -> None:
        self.client, self.name = client, name
        options: Dict[str, Any] = dict(
            session=session,
            watchdog_timeout=watchdog_timeout,
            sync=sync,
            client_id=client_id,
            on_lost=on_lost,
        )
        self._read, self._write = self._sides(
            client, ReadWritePlan(name, "READ"), ReadWritePlan(name, "WRITE", fenced), options
        )

    def _sides(
        self, client: Any, read: Plan, write: Plan, options: Dict[str, Any]
    ) -> Tuple[ReadT, WriteT]:
        raise NotImplementedError

    def read_lock(self) -> ReadT:
        return self._read

    def write_lock(self) -> WriteT:
        return self._write

    def __repr__(self) -> str:
        return f"ReadWriteLock({self.name!r})"

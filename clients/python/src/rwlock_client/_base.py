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
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, Generic, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

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
    counts_of,
    masters_of,
    parse_info,
    reply_timeout,
    request_ttl,
    synced,
    to_ms,
)
from .errors import LockError, NotAcquired, NotHeld, NotReentrant, NotSynced, ReleaseUnknown

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


# Not frozen, as the step records of every call here: a frozen dataclass's
# __init__ sets each field through object.__setattr__, about four times the
# cost, and these are made several times a lock cycle (never changed after).
@dataclass
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


@dataclass
class Releasing:
    """A release's pipeline; `resends`: the release is idempotent (a
    semaphore's request id, a lock's `HELD`), so it is resent once after a
    lost reply."""

    commands: List[Args]
    resends: bool

    @property
    def timeouts(self) -> List[Optional[float]]:
        return [DEFAULT] * len(self.commands)


def releasing(pipeline: Releasing) -> Conversation[Tuple[Any, bool]]:
    """A release's pipeline, the release's reply (an error reply raised;
    a semaphore's `DEL`'s is not looked at: latches it missed expire on
    their own), and whether that reply is a resend's. When the reply is
    lost (a connection error or a read timeout: the release may or may not
    have run), an idempotent release is sent again, once, on a new
    connection: the server tells a release the first send already did
    (from a semaphore's latch, or a lock's count below `HELD`) and replies
    as to it, instead of releasing a re-entered hold (or permits) twice."""
    batch = Batch(pipeline.commands, pipeline.timeouts)
    resent = False
    try:
        replies = yield batch
    except (ConnectionError, TimeoutError):
        if not pipeline.resends:
            raise
        yield RECONNECT
        replies, resent = (yield batch), True
    if isinstance(replies[0], Exception):
        raise replies[0]
    return replies[0], resent


@dataclass
class Unlock:
    """A lock's release: its command, and the `HELD n` it carries (None:
    none, and a lost reply is raised, not resent)."""

    args: Args
    held: Optional[int]

    @property
    def pipeline(self) -> Releasing:
        return Releasing([self.args], self.held is not None)


@dataclass
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


@dataclass
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
    #: Where the server keeps a granted request id's reply (with `request`).
    latch: Optional[Callable[[str], str]] = None
    #: Whether a lost reply is sent again (False: raised).
    resend: bool = True
    #: The request id it carries (`REQUEST id ttl`, a semaphore's; None:
    #: none, a lock's, made idempotent by `HELD` in `command` instead).
    request: Optional[str] = None


def acquiring(a: Attempt) -> Conversation[Outcome]:
    """The one acquisition driver: the acquisition, with the replica sync of
    what it takes in the same pipeline (one round trip).

    It is idempotent: a semaphore's carries a request id (`REQUEST id
    ttl`), a lock's the owner's count before it (`HELD n`). When its reply
    is lost (a connection error or a read timeout: the command may or may
    not have run), it is sent again once, on a new connection, as it was
    (a wait with what is left of it): the server tells a granted first
    send (from its latch, or the count at n + 1) and replies the grant
    again, taking nothing more, so what it grants is counted once and
    nothing is left orphaned. A grant the replicas did not acknowledge is
    given back (`undo`) and raises `NotSynced`."""
    block_ms = a.block_ms
    ident = a.request
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
            if not a.resend:
                raise
            yield RECONNECT
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
    outcome = a.outcome(reply, block_ms)
    if ids:
        # Only a semaphore's carry an id: `replace` rebuilds the outcome
        # field by field, which a lock's cycle need not pay.
        outcome = dataclasses.replace(outcome, requests=tuple(ids))
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
    """The acquisition's pipeline: the acquisition; after a resend with a
    request id, its latch's expiry set again (a latch's replay writes
    nothing on this connection, so WAIT would not cover the grant the
    first send wrote: this write puts the connection past it; a `HELD`
    replay writes a no-op itself); `WAIT` and `WAITAOF` as learned; the
    periodic INFO when due. The sync commands' replies come after the
    acquisition's: each is read within the sync timeout and a margin."""
    requested = None if ident is None else (ident, request_ttl(block_ms))
    commands = [a.command(block_ms, requested)]
    timeouts = [reply_timeout(block_ms)]
    if learned is None:
        return Batch(commands, timeouts)
    if resent and ident is not None and a.latch is not None:
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
    sends): its options, and each owner's holds through it as this
    process knows them (their watchdog, session, token); how many the
    owner has of the lock through any lock object of the client object is
    the client object's `Counts`. Subclasses give the owner, the watchdog
    and the I/O."""

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
        self._counts = counts_of(client)
        self._masters = masters_of(client)
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
        """What the acquisition sends: a single lock's carries `HELD n`,
        the owner's count before it, so that its resend after a lost reply
        is answered as granted when the first send was. `resend` False (a
        session's re-entry, whose connection was the session's): a lost
        reply is raised; so is the multi-lock's (`LOCK.ACQUIREALL` has no
        `HELD`: a hold it granted ends at its lease). A session acquisition
        carries no `HELD`, its resend neither: the server gives back what
        the closed connection held only in its next event-loop turn, so the
        resend could find the count at n + 1 before that and be answered
        granted while binding nothing; sent plain it takes a hold of its
        own, and the give-back then takes the closed connection's. Nor
        does one whose count is unsure (`Counts`): it is then not resent
        either (a plain resend could take a second hold)."""
        plan = self._plan
        held = None
        if plan.held and not self.session:
            held = self._counts.acquiring(plan.fields(request.owner)[0])
        return Attempt(
            self.name,
            self.sync,
            request.block_ms,
            lambda block_ms, _: plan.acquire(
                Acquisition(request.owner, request.lease_ms, block_ms, self.session, held)
            ),
            plan.outcome,
            # Made only when a grant is given back: most never are.
            undo=lambda _: plan.release(request.owner),
            resend=resend and plan.held and (held is not None or self.session),
        )

    @contextmanager
    def _answering(self, owner: str) -> Iterator[None]:
        """Around an acquisition's I/O: one that ends without an answer
        (an error but the server's or this package's, a cancellation)
        leaves the owner's count unsure (`Counts`)."""
        try:
            yield
        except (LockError, ResponseError):
            raise
        except BaseException:
            self._unanswered(owner)
            raise

    def _unanswered(self, owner: str) -> None:
        """An acquisition ended without an answer (`_answering`)."""
        self._counts.unsure(self._plan.fields(owner))

    def _record(self, request: Request, outcome: Outcome, link: Optional[LinkT]) -> None:
        """Counts a hold taken (`link`: the session's connection kept for it)."""
        self._counts.add(self._plan.fields(request.owner), 1)
        with self._guard:
            state = self._held.get(request.owner)
            if state is None:
                state = self._held[request.owner] = Held()
            state.count += 1
            state.lease_ms = request.lease_ms
            state.token = outcome.token
            state.lost = False
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
        """One renewal: whether the owner still held it. What it no longer
        held counts 0 from now on (a hold the next acquisition takes is the
        first again)."""
        plan = self._plan
        reply = yield plan.renew(owner, to_ms(lease_s)), DEFAULT
        gone = [f for f, r in zip(plan.fields(owner), plan.each(reply)) if int(r) != 1]
        self._counts.clear(gone)
        return not gone

    def _mark_lost(self, state: Held[LinkT, DogT]) -> None:
        with self._guard:
            state.lost = True
            state.dog = None

    # -- release ----------------------------------------------------------------

    def _count_release(
        self, owner: str, state: Optional[Held[LinkT, DogT]], released: Optional[bool]
    ) -> Optional[LinkT]:
        """Counts a release the server replied `released` to, on this lock
        object; the session's connection to close when nothing of the
        owner's is left here."""
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

    def _unlock(self, owner: str, state: Optional[Held[LinkT, DogT]], session: bool) -> Unlock:
        """A release. A single lock's outside a session carries `HELD n`,
        the owner's count before it, so that its resend after a lost reply
        is answered as done (0, releasing nothing) when the first send
        released a re-entered hold; a last release (n = 1) sends none, the
        server never answering it from the count, but is resent as one.
        With a count of 0 here (nothing held that this client object knows
        of) a lost reply is raised."""
        lease_ms = state.lease_ms if state is not None and state.lease_ms else to_ms(self.watchdog_timeout)
        held = None
        if self._plan.held and not session:
            held = self._counts.held(self._plan.fields(owner)[0]) or None
        return Unlock(self._plan.release(owner, lease_ms, held), held)

    def _settle(
        self, owner: str, state: Optional[Held[LinkT, DogT]], unlock: Unlock, reply: Any, resent: bool
    ) -> Tuple[Optional[LinkT], Optional[LockError]]:
        """Counts a release the server replied `reply` to (`resent`: its
        resend did), client-wide: 1 (released) leaves none of that kind, 0
        (still held) one less, nil (not held) none. Returns the session's connection to
        close when nothing of the owner's is left here, and the error to
        raise: `NotHeld` when not held, or when the watchdog found the hold
        lost whatever the server replied; `ReleaseUnknown` when a resend of
        a last release (a count of 1, which the server never answers as done)
        found nothing: the first send released it, or the hold was gone
        before it, and nobody can tell which. Never "released"."""
        for counted, each in zip(self._plan.fields(owner), self._plan.each(reply)):
            if each is None or int(each) == 1:
                self._counts.clear([counted])
            else:
                self._counts.add([counted], -1)
        lost = False
        if state is not None:
            with self._guard:
                lost = state.lost
        released = None if lost else self._plan.released(reply)
        link = self._count_release(owner, state, released)
        if released is not None:
            return link, None
        if resent and unlock.held == 1 and not lost:
            return link, ReleaseUnknown(
                f"{self.name}: the release's reply was lost and the owner no longer holds the lock: "
                "this release freed it or the hold was gone before it"
            )
        return link, self._not_held(owner)

    def _session_gone(self, owner: str, state: Held[LinkT, DogT]) -> Optional[LinkT]:
        """After the session's connection failed, its holds are gone with
        it: forgets them, and returns the connection, to close."""
        with self._guard:
            count = state.count
        self._counts.add(self._plan.fields(owner), -count)
        with self._guard:
            return self._forget(owner, state)

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

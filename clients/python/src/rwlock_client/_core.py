"""The protocol, shared by the sync and asyncio clients: what each kind of
lock sends and how its replies read. No I/O here; `lock.py` and
`asyncio/` do the talking, with these plans."""

from __future__ import annotations

import itertools
import math
import os
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Set, Tuple, Union

from .errors import LockError

Args = List[Union[str, int]]

#: How long the server keeps a release's reply for a retry sent with the
#: same request id (`REQUEST id ttl`): Redisson's default.
LATCH_TTL_MS = 13_500

#: An acquisition's request id: a fresh one per acquisition, and its ttl.
AcquireRequest = Tuple[str, int]

#: One owner's count of one kind of hold on one lock: the lock's name and
#: the hash field the server counts them in (`<owner>`, or `<owner>:write`).
Field = Tuple[str, str]

#: The largest `HELD n` the server takes.
HELD_MAX = 100_000

#: Redisson's `lockWatchdogTimeout`: the lease a hold taken without one
#: gets, renewed every third of it.
DEFAULT_WATCHDOG_TIMEOUT = 30.0

#: Redisson's `slavesSyncTimeout`: how long an acquisition waits for the
#: master's replicas to acknowledge it.
DEFAULT_SYNC_TIMEOUT = 1.0

#: Added to a blocking call's wait for its reply to arrive.
REPLY_MARGIN = 5.0

#: `timeout` of `Link.call`: the connection's own socket timeout.
DEFAULT = -1.0


def to_ms(seconds: float) -> int:
    """Seconds (a float, as Python's APIs take them) to the module's whole
    milliseconds, rounding up so a short lease never becomes 0."""
    if seconds < 0 or math.isnan(seconds):
        raise ValueError(f"a duration cannot be negative: {seconds!r}")
    return max(1, math.ceil(seconds * 1000))


def block_of(wait: Optional[float]) -> Optional[int]:
    """`wait` (None: without limit; 0: not at all) as BLOCK's argument."""
    if wait is None:
        return 0
    return None if wait == 0 else to_ms(wait)


def reply_timeout(block_ms: Optional[int]) -> Optional[float]:
    """How long to read an acquisition's reply: its wait and a margin."""
    if block_ms is None:
        return DEFAULT
    return None if block_ms == 0 else block_ms / 1000 + REPLY_MARGIN


def request_ttl(block_ms: Optional[int]) -> int:
    """How long the server keeps an acquisition's grant for its resend:
    13.5 s (the release's) plus the wait. A parked call's latch is stored
    when it is served, at the earliest when it is sent, and its lost reply is
    noticed at the latest a wait (and the reply margin) after the send: the
    resend then still finds the latch. `BLOCK 0` waits without limit: its
    lost reply shows only as a connection error, at once."""
    return LATCH_TTL_MS + (block_ms or 0)


class _RequestIds:
    """Request ids, unique without a random draw each: the first 24
    characters of a random UUID (74 random bits), drawn once per process
    (again in a forked child, which would otherwise repeat its parent's
    ids), then a 48-bit counter, in a UUID's shape (Redisson's ids are UUIDs; the server takes any string). A
    `uuid4()` per id cost two of them per lock cycle: a system call for
    the random bytes and the UUID object."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self.prefix = str(uuid.uuid4())[:24]
        self.counter = itertools.count()

    def next(self) -> str:
        # next() of an itertools.count is atomic under the GIL: no lock.
        return f"{self.prefix}{next(self.counter) & 0xFFFFFFFFFFFF:012x}"


_request_ids = _RequestIds()


def new_request_id() -> str:
    """A request id unique to this acquisition or release (`_RequestIds`)."""
    return _request_ids.next()


#: `pack`'s encoded arguments (`$<length>\r\n<bytes>\r\n`), by encoding and
#: argument: a lock's cycle sends the same command names, name, owner,
#: lease and options again and again. Emptied when it reaches `PACKED_MAX`
#: entries (request ids are never sent twice).
_packed: Dict[Tuple[str, str], Dict[Union[str, int], bytes]] = {}
PACKED_MAX = 4096


def pack(commands: Sequence[Args], encoding: str, errors: str) -> bytes:
    """The commands in RESP, as one buffer for one write: what redis-py's
    `pack_commands` makes of them (text in the connection's encoding,
    integers in decimal), at a fraction of its cost for a lock's few
    short arguments, each encoded once (`_packed`)."""
    cache = _packed.get((encoding, errors))
    if cache is None:
        cache = _packed.setdefault((encoding, errors), {})
    out: List[bytes] = []
    for args in commands:
        out.append(b"*%d\r\n" % len(args))
        for arg in args:
            packed = cache.get(arg)
            if packed is None:
                data = arg.encode(encoding, errors) if isinstance(arg, str) else b"%d" % arg
                packed = b"$%d\r\n%s\r\n" % (len(data), data)
                if len(cache) >= PACKED_MAX:
                    cache.clear()
                cache[arg] = packed
            out.append(packed)
    return b"".join(out)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def parse_info(reply: Any) -> dict[str, str]:
    """The `field:value` lines of an INFO reply."""
    fields: dict[str, str] = {}
    for line in text(reply).splitlines():
        name, sep, value = line.partition(":")
        if sep and not name.startswith("#"):
            fields[name.strip()] = value.strip()
    return fields


#: `ReplicaSync.replicas`: learn the count from the master (a high-water
#: mark); `ReplicaSync.aof`: learn whether the master writes an AOF.
AUTO = "auto"
#: `ReplicaSync.aof`: always wait for the master's AOF fsync (`WAITAOF`).
REQUIRED = "required"
#: `ReplicaSync.aof`: never wait for the AOF.
OFF = "off"

#: How often the learned state of a master is refreshed (an `INFO` added to
#: an acquisition's pipeline: no round trip of its own).
REFRESH_INTERVAL = 5.0


@dataclass(frozen=True)
class ReplicaSync:
    """What an acquisition waits for once the master granted it, as
    Redisson's `checkLockSyncedSlaves` (on by default); sent in the
    acquisition's own pipeline, so it costs no round trip.

    `enabled`: off, an acquisition replies as soon as the master has it.
    `timeout`: seconds to wait (`WAIT`, `WAITAOF`); Redisson's
    `slavesSyncTimeout`, 1 s. `replicas`: `AUTO` (the default) waits for the
    highest number of replicas this client object ever learned the master
    to have (from `INFO`, before its first acquisition and every 5 s after):
    a master that later says it has fewer (paused, or cut off and about to
    be demoted) does not lower it, so its acquisitions fail instead of
    going unreplicated; lowering it takes a new client object, or an
    explicit count. An int N waits for exactly N replicas (0: never).
    `aof`: `AUTO` (the default; True is the same) waits for the master's
    fsync (`WAITAOF 1 0`) when its INFO says it writes an AOF and it has
    `WAITAOF` (Redis 7.2+); `REQUIRED` always (a master without an AOF or
    `WAITAOF` then fails every acquisition); `OFF` (False) never.

    When what was asked for did not acknowledge in time, the hold is
    released and the acquisition raises `NotSynced`; so does one the master
    refused with `NOREPLICAS` (its `min-replicas-to-write`)."""

    #: The values of `replicas` and `aof` that are not counts or bools.
    AUTO: ClassVar[str] = AUTO
    REQUIRED: ClassVar[str] = REQUIRED
    OFF: ClassVar[str] = OFF

    enabled: bool = True
    timeout: float = DEFAULT_SYNC_TIMEOUT
    aof: Union[bool, str] = AUTO
    replicas: Union[int, str] = AUTO

    def __post_init__(self) -> None:
        if self.aof not in (True, False, AUTO, REQUIRED, OFF):
            raise ValueError(f"aof: one of AUTO, REQUIRED, OFF (or a bool), not {self.aof!r}")
        replicas = self.replicas
        if replicas != AUTO and (isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0):
            raise ValueError(f"replicas: AUTO or a count >= 0, not {replicas!r}")
        if self.enabled:
            to_ms(self.timeout)

    @property
    def aof_mode(self) -> str:
        """`aof` as AUTO, REQUIRED or OFF."""
        if self.aof is True:
            return AUTO
        if self.aof is False:
            return OFF
        return str(self.aof)

    @property
    def learns(self) -> bool:
        """Whether acquisitions need what the master's INFO says."""
        return self.enabled and (self.replicas == AUTO or self.aof_mode == AUTO)


class Learned:
    """What a client object learned of one master, for its acquisitions'
    replica sync: `expected`, the most replicas the master ever said it had
    (only ever raised: a master paused or cut off says 0 until it is
    demoted, and must not be believed), whether it writes an AOF (the
    latest INFO's word: turning the AOF off is a configuration change, not
    a failure), and whether it has `WAITAOF` (None until tried). Shared by
    the threads (or tasks) of the client object."""

    def __init__(self) -> None:
        self.expected = 0
        self.aof = False
        self.waitaof: Optional[bool] = None
        #: Whether an INFO reply came (until then every acquisition first
        #: asks, in a round trip of its own: nothing is assumed).
        self.learned = False
        #: When an INFO was last sent (monotonic seconds).
        self._asked = 0.0
        self._guard = threading.Lock()

    def learn(self, info: Dict[str, str], now: float) -> None:
        """An INFO replication/persistence reply: raises `expected`, never
        lowers it."""
        replicas = int(info.get("connected_slaves", "0") or 0)
        with self._guard:
            self.expected = max(self.expected, replicas)
            self.aof = info.get("aof_enabled") == "1"
            if not self.learned:
                self.learned, self._asked = True, now

    def refresh_due(self, now: float) -> bool:
        """Whether this acquisition adds an INFO to its pipeline: at most one
        every `REFRESH_INTERVAL`, whichever acquisition sends it."""
        with self._guard:
            if not self.learned or now - self._asked < REFRESH_INTERVAL:
                return False
            self._asked = now
            return True

    def no_waitaof(self) -> None:
        with self._guard:
            self.waitaof = False

    def sync_commands(self, policy: ReplicaSync) -> List[Args]:
        """What follows an acquisition in its pipeline: `WAIT expected
        timeout` when replicas are expected, `WAITAOF 1 0 timeout` when the
        AOF is waited for."""
        if not policy.enabled:
            return []
        commands: List[Args] = []
        expected = self.expected if policy.replicas == AUTO else int(policy.replicas)
        if expected > 0:
            commands.append(["WAIT", expected, to_ms(policy.timeout)])
        mode = policy.aof_mode
        if mode == REQUIRED or (mode == AUTO and self.aof and self.waitaof is not False):
            commands.append(["WAITAOF", 1, 0, to_ms(policy.timeout)])
        return commands


class Masters:
    """The `Learned` state of each master a client object talks to, by
    address."""

    def __init__(self) -> None:
        self._by_address: Dict[str, Learned] = {}
        self._guard = threading.Lock()

    def of(self, address: str) -> Learned:
        # A master met before is found without the lock (a dict read is
        # atomic): the lock only orders the first meeting's insertion.
        found = self._by_address.get(address)
        if found is not None:
            return found
        with self._guard:
            found = self._by_address.get(address)
            if found is None:
                found = self._by_address[address] = Learned()
            return found


class Counts:
    """How many holds each owner has of each lock, by `Field`, as the
    server's hash counts them while no hold is lost: what `HELD n` tells
    the server (docs/design.md). One per client object, so every lock
    object of it on one name that one owner (a thread, a task) uses counts
    together, as the server does. A count is dropped at 0: the map holds
    only what is held.

    A field is `unsure` after an acquisition of it ended without an answer
    (its reply lost twice, a cancellation): it may have been granted, so
    the server may count one more than here, and an acquisition sending
    this count could be answered as granted without taking anything or
    re-arming the lease. Until a release or a renewal finds none left
    (when the count is exact again), its acquisitions send no `HELD`. Its
    releases still do: a count too low is never answered as done."""

    def __init__(self) -> None:
        self._by_field: Dict[Field, int] = {}
        self._unsure: Set[Field] = set()
        self._guard = threading.Lock()

    def acquiring(self, field: Field) -> Optional[int]:
        """What an acquisition's `HELD` sends (`held`); None when unsure."""
        with self._guard:
            if field in self._unsure:
                return None
            return self._capped(field)

    def held(self, field: Field) -> int:
        """The count, as `HELD` sends it: at most `HELD_MAX`. A count
        gets that high only when holds whose lease ran out unseen are
        never released (an owner acquiring with a lease and letting it
        end, over and over); the server's is then far lower, so `HELD_MAX`
        is no replay either."""
        with self._guard:
            return self._capped(field)

    def _capped(self, field: Field) -> int:
        """`held`'s count, read under the guard the caller holds."""
        return min(self._by_field.get(field, 0), HELD_MAX)

    def add(self, fields: Sequence[Field], n: int) -> None:
        """Adds n (negative: takes away, down to 0) to each field's count."""
        with self._guard:
            for field in fields:
                count = self._by_field.get(field, 0) + n
                if count > 0:
                    self._by_field[field] = count
                else:
                    self._by_field.pop(field, None)

    def clear(self, fields: Sequence[Field]) -> None:
        """The server holds none of these any more."""
        with self._guard:
            for field in fields:
                self._by_field.pop(field, None)
                self._unsure.discard(field)

    def unsure(self, fields: Sequence[Field]) -> None:
        """An acquisition of these ended without an answer."""
        with self._guard:
            self._unsure.update(fields)


_per_client: "weakref.WeakKeyDictionary[Any, Tuple[Masters, Counts]]" = weakref.WeakKeyDictionary()
_per_client_guard = threading.Lock()


def _state_of(client: Any) -> Tuple[Masters, Counts]:
    """A redis client object's state: one per client object, so a new
    client object starts afresh."""
    with _per_client_guard:
        found = _per_client.get(client)
        if found is None:
            found = _per_client[client] = (Masters(), Counts())
        return found


def masters_of(client: Any) -> Masters:
    """The learned state of a redis client object's masters."""
    return _state_of(client)[0]


def counts_of(client: Any) -> Counts:
    """The owners' counts of holds of a redis client object's locks."""
    return _state_of(client)[1]


# Not frozen: made every acquisition (see `_base.Batch`).
@dataclass
class Acquisition:
    """One acquisition, as a `Plan` sends it: the owner, its lease, the wait
    (`block_of`: None one attempt, 0 without limit), whether the hold is
    the connection's (`SESSION`), and `held` (`HELD n`: the owner held n
    of this kind before), which makes it idempotent: sent again after the
    first send was granted, the server finds n + 1, replies the grant
    again and takes nothing more."""

    owner: str
    lease_ms: int
    block_ms: Optional[int] = None
    session: bool = False
    held: Optional[int] = None


@dataclass(frozen=True)
class Outcome:
    """An acquisition's reply: taken, or the PTTL of what is in the way."""

    acquired: bool
    pttl: Optional[int] = None
    token: Optional[int] = None
    #: The request ids the acquisition was sent with (their latches: a
    #: semaphore's).
    requests: Tuple[str, ...] = ()
    #: A permit semaphore's grant: the ids of the permits taken.
    ids: Tuple[str, ...] = ()


#: A grant without a token, one object for all (an `Outcome` is frozen).
GRANTED = Outcome(True)


def release_latch(key: str, request: str) -> str:
    """Where the server keeps a release's reply for `request` (Redisson's
    `redisson_unlock_latch:{name}:<id>`; a name with a `{` as is)."""
    return f"redisson_unlock_latch:{_prefixed(key)}:{request}"


def acquire_latch(key: str, request: str) -> str:
    """Where the server keeps an acquisition's grant for `request`:
    `redisson_lock_request_latch:{name}:<id>`, in the name's slot."""
    return f"redisson_lock_request_latch:{_prefixed(key)}:{request}"


def _prefixed(key: str) -> str:
    """The name as Redisson's `prefixName` puts it in derived keys."""
    return key if "{" in key else "{" + key + "}"


class Plan:
    """What one kind of lock sends. `key` routes every command (cluster);
    `fenced`: each acquisition takes a fencing token (`FENCED`)."""

    renew_command = ""

    def __init__(self, key: str, fenced: bool = False) -> None:
        self.key, self.fenced = key, fenced

    #: Whether acquisitions and releases take `HELD n` (a single lock's do;
    #: `LOCK.ACQUIREALL` and `LOCK.UNLOCKALL` have none).
    held = True

    def fields(self, owner: str) -> List[Field]:
        """What the owner's holds of this lock are counted in, one per
        reply of `each`."""
        return [(self.key, owner)]

    def each(self, reply: Any) -> List[Any]:
        """A release's (or renewal's) reply, one per field of `fields`."""
        return [reply]

    def acquire(self, a: Acquisition) -> Args:
        """The acquisition `a`."""
        raise NotImplementedError

    def _acquire(self, command: str, a: Acquisition) -> Args:
        """`command key owner lease [BLOCK ms] [SESSION] [FENCED] [HELD n]`."""
        args: Args = [command, self.key, a.owner, a.lease_ms]
        args += _options(a)
        if self.fenced:
            args.append("FENCED")
        return args + _held(a.held)

    def outcome(self, reply: Any, block_ms: Optional[int] = None) -> Outcome:
        """The acquisition's reply (sent with `block_ms`, as `acquire`)."""
        if self.fenced:
            return _fenced_outcome(reply)
        if reply is None:
            return GRANTED
        return Outcome(False, pttl=int(reply))

    def release(self, owner: str, lease_ms: Optional[int] = None, held: Optional[int] = None) -> Args:
        """The release; a hold still held after it (re-entered) lasts
        `lease_ms` again, as Redisson's unlock re-arms it (None: the
        server's `rwlock.default-lease`); `held` (`HELD n`: the owner held
        n before) makes a resend of it idempotent: when the first send
        released one and n >= 2, the server finds n - 1 and replies 0
        again, releasing nothing more."""
        raise NotImplementedError

    def released(self, reply: Any) -> Optional[bool]:
        """None: the owner held nothing; False: still held (re-entered);
        True: released."""
        return None if reply is None else int(reply) == 1

    def renew(self, owner: str, lease_ms: int) -> Args:
        return [self.renew_command, self.key, owner, lease_ms]


def _options(a: Acquisition) -> Args:
    args: Args = []
    if a.block_ms is not None:
        args += ["BLOCK", a.block_ms]
    if a.session:
        args.append("SESSION")
    return args


def _held(held: Optional[int]) -> Args:
    return [] if held is None else ["HELD", held]


def _release_options(lease_ms: Optional[int], held: Optional[int]) -> Args:
    args: Args = [] if lease_ms is None else ["LEASE", lease_ms]
    # A last release's `HELD 1` is never answered from the count (design
    # §14.8), so the server runs it as without: not sent, two arguments
    # fewer per cycle. Its resend is still told apart by the caller.
    return args + _held(None if held == 1 else held)


def _fenced_outcome(reply: Any) -> Outcome:
    pttl, token = int(reply[0]), int(reply[1])
    if token == -1:
        return Outcome(False, pttl=pttl)
    return Outcome(True, token=token)


class PlainPlan(Plan):
    """`LOCK.*`: Redisson's RLock, RFencedLock and non-reentrant lock."""

    renew_command = "LOCK.RENEW"

    def __init__(self, key: str, fenced: bool, reentrant: bool) -> None:
        super().__init__(key, fenced)
        self.reentrant = reentrant

    def acquire(self, a: Acquisition) -> Args:
        args = self._acquire("LOCK.ACQUIRE", a)
        if not self.reentrant:
            args.append("NOREENTRY")
        return args

    def release(self, owner: str, lease_ms: Optional[int] = None, held: Optional[int] = None) -> Args:
        return ["LOCK.UNLOCK", self.key, owner] + _release_options(lease_ms, held)


class ReadWritePlan(Plan):
    """`RWLOCK.*` in one mode (READ or WRITE): Redisson's RReadWriteLock."""

    renew_command = "RWLOCK.RENEW"

    def __init__(self, key: str, mode: str, fenced: bool = False) -> None:
        super().__init__(key, fenced)
        self.mode = mode

    def fields(self, owner: str) -> List[Field]:
        return [(self.key, _field(self.mode, owner))]

    def acquire(self, a: Acquisition) -> Args:
        return self._acquire("RWLOCK." + self.mode, a)

    def release(self, owner: str, lease_ms: Optional[int] = None, held: Optional[int] = None) -> Args:
        return ["RWLOCK.UNLOCK", self.key, owner, self.mode] + _release_options(lease_ms, held)


class FairPlan(Plan):
    """`FAIRLOCK.*`: Redisson's RFairLock (and its non-reentrant fair lock),
    in one line with Redisson's own waiters (docs/design.md §13). A wait is
    `BLOCK` in the line, the server keeping the waiter's place and taking it
    out of the line when the wait ends (its own timeout path, as Redisson's
    `acquireFailed` would); a try is `NOQUEUE` (Redisson's `tryLock()`),
    which never joins the line. `LOCK.RENEW` renews a fair hold."""

    renew_command = "LOCK.RENEW"

    def __init__(self, key: str, reentrant: bool) -> None:
        super().__init__(key)
        self.reentrant = reentrant

    def acquire(self, a: Acquisition) -> Args:
        """`FAIRLOCK.ACQUIRE key owner lease` and: a try `NOQUEUE`; a wait
        of W ms `WAIT W BLOCK W` (Redisson's `tryLock(W)` sends W as the
        thread wait time); without limit `BLOCK 0` (the server's
        `rwlock.fair-wait`, Redisson's 5 minutes)."""
        if a.session:
            raise LockError("the fair lock has no session holds")
        args: Args = ["FAIRLOCK.ACQUIRE", self.key, a.owner, a.lease_ms]
        if a.block_ms is None:
            args.append("NOQUEUE")
        else:
            if a.block_ms > 0:
                args += ["WAIT", a.block_ms]
            args += ["BLOCK", a.block_ms]
        if not self.reentrant:
            args.append("NOREENTRY")
        return args + _held(a.held)

    def outcome(self, reply: Any, block_ms: Optional[int] = None) -> Outcome:
        """nil: taken. An integer: refused; after a wait the PTTL of the
        hold in the way, after a try (`NOQUEUE`'s 1) unknown."""
        if reply is None:
            return GRANTED
        return Outcome(False, pttl=None if block_ms is None else int(reply))

    def release(self, owner: str, lease_ms: Optional[int] = None, held: Optional[int] = None) -> Args:
        """`FAIRLOCK.UNLOCK`: 1 released, 0 still held, nil not held (by
        others, or the lock no longer exists, where Redisson's
        `fair_unlock.lua` replies 1)."""
        return ["FAIRLOCK.UNLOCK", self.key, owner] + _release_options(lease_ms, held)


Hold = Tuple[str, str]
KINDS = ("LOCK", "READ", "WRITE")


def _field(kind: str, owner: str) -> str:
    """The hash field an owner's holds of `kind` are counted in."""
    return owner + ":write" if kind == "WRITE" else owner


class MultiPlan(Plan):
    """`LOCK.ACQUIREALL`, `LOCK.UNLOCKALL`, `LOCK.RENEWALL`: several holds
    taken, renewed and released as one, atomically. Routed by the first
    name; in a cluster every name must share its hash slot (a `{tag}`)."""

    def __init__(self, holds: Sequence[Hold]) -> None:
        if not holds:
            raise LockError("a MultiLock needs at least one hold")
        for kind, _ in holds:
            if kind not in KINDS:
                raise LockError(f"unknown hold kind {kind!r}: one of {KINDS}")
        super().__init__(holds[0][1])
        self.holds = list(holds)

    def _holds(self) -> Args:
        args: Args = ["HOLDS", len(self.holds)]
        for kind, name in self.holds:
            args += [kind, name]
        return args

    held = False

    def fields(self, owner: str) -> List[Field]:
        return [(name, _field(kind, owner)) for kind, name in self.holds]

    def each(self, reply: Any) -> List[Any]:
        return list(reply)

    def acquire(self, a: Acquisition) -> Args:
        """`LOCK.ACQUIREALL` takes no `REQUEST` or `HELD`: none is sent."""
        args: Args = ["LOCK.ACQUIREALL", a.owner, a.lease_ms]
        return args + _options(a) + self._holds()

    def release(self, owner: str, lease_ms: Optional[int] = None, held: Optional[int] = None) -> Args:
        """`LOCK.UNLOCKALL` has no lease or `HELD`: neither is sent."""
        args: Args = ["LOCK.UNLOCKALL", owner]
        return args + self._holds()

    def released(self, reply: Any) -> Optional[bool]:
        """Each hold is released on its own: one the owner no longer had
        (lost) makes the whole release report not held, after the server
        released the others."""
        replies = list(reply)
        if any(r is None for r in replies):
            return None
        return all(int(r) == 1 for r in replies)

    def renew(self, owner: str, lease_ms: int) -> Args:
        args: Args = ["LOCK.RENEWALL", owner, lease_ms]
        return args + self._holds()


def synced(command: Args, reply: Any) -> bool:
    """Whether WAIT / WAITAOF's reply shows every copy asked for."""
    if command[0] == "WAIT":
        return int(reply) >= int(command[1])
    local, replicas = int(reply[0]), int(reply[1])
    return local >= int(command[1]) and replicas >= int(command[2])

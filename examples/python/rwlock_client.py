"""Redisson-compatible locks for Python, on the rwlock module: the
read-write lock (RReadWriteLock) and the plain lock (RLock, RFencedLock).

    import redis
    from rwlock_client import Lock, ReadWriteLock

    lock = ReadWriteLock(redis.Redis(port=6399), "orders")
    with lock.write(wait_ms=5000):
        ...  # no other reader or writer, in this process or any other
    with lock.read(wait_ms=5000):
        ...  # other readers may be here too, writers are not

    plain = Lock(redis.Redis(port=6399), "invoice:42", fenced=True)
    with plain.hold(wait_ms=5000) as held:
        storage.write(data, token=held.token)  # the storage refuses older tokens

A hold belongs to Redisson's kind of owner, '<client UUID>:<thread id>', so a
thread re-enters its own holds (read in read, write in write, read in write;
the plain lock in itself) and a Java service on Redisson sharing the lock sees
an ordinary holder. While a thread holds the lock, a watchdog thread renews
its holds every lease/3 (RWLOCK.RENEW, LOCK.RENEW), as Redisson's watchdog
does: a long critical section keeps the lock, a crashed process loses it
within one lease. Waiting is done by the server (BLOCK), not by polling.

Run this file against a server with the module to watch it work; it checks
what it shows and exits non-zero if anything is off:

    python3 examples/python/rwlock_client.py --port 6399
"""

import argparse
import sys
import threading
import time
import uuid

import redis


class LockNotAcquired(Exception):
    """The lock was not free (or the wait ran out): `pttl` is its remaining lease."""

    def __init__(self, name, pttl):
        super().__init__(f"{name} is held by others for {pttl} ms more")
        self.pttl = pttl


class _Watchdog(threading.Thread):
    """Renews one owner's holds every lease/3 until stopped or the lock is gone."""

    def __init__(self, lock, owner):
        super().__init__(daemon=True, name=f"rwlock-watchdog {lock.name}")
        self.lock, self.owner = lock, owner
        self.holds = 0
        self.stopped = threading.Event()
        self.lost = threading.Event()

    def run(self):
        period = self.lock.lease_ms / 3000.0
        while not self.stopped.wait(period):
            held = self.lock.client.execute_command(
                self.lock.RENEW, self.lock.name, self.owner, self.lock.lease_ms
            )
            if held == 0:  # the lease ran out or someone forced the lock open
                self.lost.set()
                return


class _Named:
    """What both kinds of lock share: the name, the lease, this client's id,
    and one watchdog per owner while it holds the lock."""

    RENEW = None  # the command the watchdog renews with

    def __init__(self, client, name, lease_ms=30000):
        self.client, self.name, self.lease_ms = client, name, lease_ms
        self.client_id = str(uuid.uuid4())
        self._watchdogs = {}
        self._guard = threading.Lock()

    def owner(self):
        """This thread's owner string, as Redisson builds it."""
        return f"{self.client_id}:{threading.get_ident()}"

    def _try(self, args, wait_ms):
        """Sends an acquisition; `wait_ms` waits on the server (0: without
        limit), None fails at once when the lock is held."""
        if wait_ms is not None:
            args += ["BLOCK", wait_ms]
        return self.client.execute_command(*args)

    def _watch(self, owner):
        with self._guard:
            dog = self._watchdogs.get(owner)
            if dog is None:
                dog = self._watchdogs[owner] = _Watchdog(self, owner)
                dog.start()
            dog.holds += 1
            return dog

    def _unwatch(self, owner):
        with self._guard:
            dog = self._watchdogs[owner]
            dog.holds -= 1
            if dog.holds == 0:
                del self._watchdogs[owner]
                dog.stopped.set()


class ReadWriteLock(_Named):
    RENEW = "RWLOCK.RENEW"

    def read(self, wait_ms=None):
        """A context manager holding a read lock; `wait_ms` waits on the server
        (0: without limit), None fails at once when a writer holds it."""
        return _Hold(self, wait_ms, "READ")

    def write(self, wait_ms=None):
        """A context manager holding the write lock (see `read`)."""
        return _Hold(self, wait_ms, "WRITE")

    def _acquire(self, owner, mode, wait_ms):
        pttl = self._try(["RWLOCK." + mode, self.name, owner, self.lease_ms], wait_ms)
        if pttl is not None:
            raise LockNotAcquired(self.name, pttl)

    def _release(self, owner, mode):
        self.client.execute_command("RWLOCK.UNLOCK", self.name, owner, mode)


# How long the server keeps a release's reply for a retry: Redisson's default.
LATCH_TTL_MS = 13500


class Lock(_Named):
    """Redisson's RLock: one holder at a time, re-entrant. `fenced=True` is
    RFencedLock: every acquisition takes the next fencing token."""

    RENEW = "LOCK.RENEW"

    def __init__(self, client, name, lease_ms=30000, fenced=False):
        super().__init__(client, name, lease_ms)
        self.fenced = fenced

    def hold(self, wait_ms=None):
        """A context manager holding the lock (see ReadWriteLock.read); its
        `token` is the fencing token of a fenced lock."""
        return _Hold(self, wait_ms)

    def _acquire(self, owner, _mode, wait_ms):
        args = ["LOCK.ACQUIRE", self.name, owner, self.lease_ms]
        if not self.fenced:
            pttl = self._try(args, wait_ms)
            if pttl is not None:
                raise LockNotAcquired(self.name, pttl)
            return None
        pttl, token = self._try(args + ["FENCED"], wait_ms)
        if token == -1:
            raise LockNotAcquired(self.name, pttl)
        return token

    def _release(self, owner, _mode):
        # With a request id, an UNLOCK sent again (redis-py retries a command
        # whose connection dropped) replies what the first one did instead
        # of releasing a second hold. Redisson deletes the latch once it has
        # the reply.
        request = uuid.uuid4().hex
        self.client.execute_command(
            "LOCK.UNLOCK", self.name, owner, "REQUEST", request, LATCH_TTL_MS
        )
        prefix = self.name if "{" in self.name else "{%s}" % self.name
        self.client.delete(f"redisson_unlock_latch:{prefix}:{request}")


class _Hold:
    def __init__(self, lock, wait_ms, mode=None):
        self.lock, self.wait_ms, self.mode = lock, wait_ms, mode
        self.owner = lock.owner()
        self.token = None
        self._dog = None

    @property
    def lost(self):
        """True once the watchdog found the hold gone (lease ran out, forced)."""
        return self._dog is not None and self._dog.lost.is_set()

    def __enter__(self):
        self.token = self.lock._acquire(self.owner, self.mode, self.wait_ms)
        self._dog = self.lock._watch(self.owner)
        return self

    def __exit__(self, *exc):
        self.lock._unwatch(self.owner)
        self.lock._release(self.owner, self.mode)
        return False


# --- The demonstration -------------------------------------------------------


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


def racy_increment(client, counter):
    """Read, sleep, write: without a lock, increments get lost."""
    value = int(client.get(counter) or 0)
    time.sleep(0.001)
    client.set(counter, value + 1)


def run_all(threads):
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check(not any(t.is_alive() for t in threads), "every thread finished")


def contention(client, prefix):
    """Writers increment a counter with a read-sleep-write race window, readers
    look in: no increment is lost and no reader ever overlaps a writer."""
    lock = ReadWriteLock(client, f"{prefix}:counter-lock")
    counter = f"{prefix}:counter"
    client.delete(counter)
    writers, rounds = 4, 25
    inside = {"readers": 0, "writers": 0}
    overlaps = []
    state = threading.Lock()

    def enter(kind):
        with state:
            inside[kind] += 1
            if inside["writers"] > 1 or (inside["writers"] and inside["readers"]):
                overlaps.append(dict(inside))

    def leave(kind):
        with state:
            inside[kind] -= 1

    def writer():
        for _ in range(rounds):
            with lock.write(wait_ms=30000):
                enter("writers")
                racy_increment(client, counter)
                leave("writers")

    def reader():
        for _ in range(rounds):
            with lock.read(wait_ms=30000):
                enter("readers")
                time.sleep(0.001)
                leave("readers")

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    run_all(threads)
    total = int(client.get(counter) or 0)
    check(total == writers * rounds, f"{writers} writers x {rounds} increments = {total}, none lost")
    check(not overlaps, "no writer ever shared the lock")


def reentry_and_no_upgrade(client, prefix):
    lock = ReadWriteLock(client, f"{prefix}:reentry")
    with lock.write():
        with lock.read():
            with lock.write():
                info = client.execute_command("RWLOCK.INFO", lock.name)
                owner = info[5][0]
                check(owner[3] == 1 and owner[5] == 2, "write, read, write again: re-entered")
    check(client.exists(lock.name) == 0, "released on leaving the last block")
    with lock.read():
        try:
            with lock.write():
                check(False, "a reader cannot upgrade to write")
        except LockNotAcquired as e:
            check(e.pttl > 0, "a reader cannot upgrade to write (refused)")
        other = ReadWriteLock(client, lock.name)
        with other.read():
            check(True, "another client's reader shares the read lock")


def watchdog(client, prefix):
    """A 1 s lease held for 3.5 s: the watchdog keeps it; without one the
    lease runs out."""
    lease = 1000
    bare = f"{prefix}:no-watchdog"
    client.execute_command("RWLOCK.WRITE", bare, "bare:1", lease)
    time.sleep(1.2)
    check(client.exists(bare) == 0, "without renewal a 1 s lease ends")

    lock = ReadWriteLock(client, f"{prefix}:long-task", lease_ms=lease)
    rival = ReadWriteLock(client, lock.name)
    with lock.write() as hold:
        time.sleep(3.5)
        check(not hold.lost, "the watchdog kept the hold for 3.5 leases")
        try:
            with rival.write():
                check(False, "the lock is still held after 3.5 leases")
        except LockNotAcquired as e:
            check(0 < e.pttl <= lease, f"the lock is still held after 3.5 leases (PTTL {e.pttl})")
    check(client.exists(lock.name) == 0, "released at the end of the block")


def parked_waiters(client):
    return int(client.info("rwlock")["rwlock_waiters"])


def waiting(client, prefix):
    """BLOCK: a waiter is parked on the server and gets the lock when the
    writer releases it, or gives up when its wait runs out."""
    lock = ReadWriteLock(client, f"{prefix}:handoff")
    held, release = threading.Event(), threading.Event()
    seen_waiting = []

    def holder():
        with lock.write():
            held.set()
            release.wait(10)
            deadline = time.monotonic() + 10
            while parked_waiters(client) == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            seen_waiting.append(parked_waiters(client))

    t = threading.Thread(target=holder)
    t.start()
    held.wait(10)
    try:
        with lock.read(wait_ms=50):
            check(False, "a 50 ms wait gives up while the writer holds on")
    except LockNotAcquired:
        check(True, "a 50 ms wait gives up while the writer holds on")
    release.set()
    with lock.read(wait_ms=10000):
        check(seen_waiting == [1], "the reader waited on the server until the writer released")
    t.join(10)


def plain_contention(client, prefix):
    """The fenced plain lock, taken in turn with BLOCK: no increment is lost,
    and each holder's fencing token is larger than the last holder's."""
    lock = Lock(client, f"{prefix}:plain-lock", fenced=True)
    counter = f"{prefix}:plain-counter"
    client.delete(counter)
    workers, rounds = 4, 25
    tokens = []

    def worker():
        for _ in range(rounds):
            with lock.hold(wait_ms=30000) as held:
                tokens.append(held.token)
                racy_increment(client, counter)

    run_all([threading.Thread(target=worker) for _ in range(workers)])
    total = int(client.get(counter) or 0)
    check(
        total == workers * rounds,
        f"{workers} workers x {rounds} increments under the plain lock = {total}, none lost",
    )
    check(
        tokens == sorted(set(tokens)) and len(tokens) == total,
        "each holder's fencing token is larger than the last holder's",
    )


def plain_holds(client, prefix):
    """Re-entry, another owner refused, the watchdog keeping a 1 s lease for
    3.5 s and stopping once the lock is forced open."""
    lock = Lock(client, f"{prefix}:plain-reentry")
    with lock.hold():
        with lock.hold():
            holders = client.execute_command("LOCK.INFO", lock.name)[1]
            check(holders[0][3] == 2, "the plain lock re-entered (count 2)")
        try:
            with Lock(client, lock.name).hold():
                check(False, "another owner is refused the plain lock")
        except LockNotAcquired as e:
            check(e.pttl > 0, "another owner is refused the plain lock")
    latches = client.keys("redisson_unlock_latch:*")
    check(
        client.exists(lock.name) == 0 and not latches,
        "the plain lock released, no unlock latch left",
    )

    lease = 1000
    lock = Lock(client, f"{prefix}:plain-long-task", lease_ms=lease)
    with lock.hold() as held:
        time.sleep(3.5)
        pttl = client.pttl(lock.name)
        check(
            not held.lost and 0 < pttl <= lease,
            f"the watchdog kept the plain lock for 3.5 leases (PTTL {pttl})",
        )
        client.execute_command("LOCK.FORCEUNLOCK", lock.name)
        time.sleep(2 * lease / 3000)
        check(held.lost, "the watchdog stopped when the lock was forced open")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6399)
    parser.add_argument("--prefix", default="example", help="lock name prefix")
    a = parser.parse_args()
    client = redis.Redis(host=a.host, port=a.port, socket_connect_timeout=5)
    client.ping()
    contention(client, a.prefix)
    reentry_and_no_upgrade(client, a.prefix)
    watchdog(client, a.prefix)
    waiting(client, a.prefix)
    plain_contention(client, a.prefix)
    plain_holds(client, a.prefix)
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()

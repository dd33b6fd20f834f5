"""A Redisson-compatible read-write lock for Python, on the rwlock module.

    import redis
    from rwlock_client import ReadWriteLock

    lock = ReadWriteLock(redis.Redis(port=6399), "orders")
    with lock.write(wait_ms=5000):
        ...  # no other reader or writer, in this process or any other
    with lock.read(wait_ms=5000):
        ...  # other readers may be here too, writers are not

A hold belongs to Redisson's kind of owner, '<client UUID>:<thread id>', so a
thread re-enters its own holds (read in read, write in write, read in write)
and a Java service on Redisson sharing the lock sees an ordinary holder.
While a thread holds the lock, a watchdog thread renews its holds every
lease/3 with RWLOCK.RENEW, as Redisson's watchdog does: a long critical
section keeps the lock, a crashed process loses it within one lease. Waiting
is done by the server (BLOCK), not by polling.

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
                "RWLOCK.RENEW", self.lock.name, self.owner, self.lock.lease_ms
            )
            if held == 0:  # the lease ran out or someone forced the lock open
                self.lost.set()
                return


class ReadWriteLock:
    def __init__(self, client, name, lease_ms=30000):
        self.client, self.name, self.lease_ms = client, name, lease_ms
        self.client_id = str(uuid.uuid4())
        self._watchdogs = {}
        self._guard = threading.Lock()

    def owner(self):
        """This thread's owner string, as Redisson builds it."""
        return f"{self.client_id}:{threading.get_ident()}"

    def read(self, wait_ms=None):
        """A context manager holding a read lock; `wait_ms` waits on the server
        (0: without limit), None fails at once when a writer holds it."""
        return _Hold(self, "READ", wait_ms)

    def write(self, wait_ms=None):
        """A context manager holding the write lock (see `read`)."""
        return _Hold(self, "WRITE", wait_ms)

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


class _Hold:
    def __init__(self, lock, mode, wait_ms):
        self.lock, self.mode, self.wait_ms = lock, mode, wait_ms
        self.owner = lock.owner()
        self._dog = None

    @property
    def lost(self):
        """True once the watchdog found the hold gone (lease ran out, forced)."""
        return self._dog is not None and self._dog.lost.is_set()

    def __enter__(self):
        lock = self.lock
        args = ["RWLOCK." + self.mode, lock.name, self.owner, lock.lease_ms]
        if self.wait_ms is not None:
            args += ["BLOCK", self.wait_ms]
        pttl = lock.client.execute_command(*args)
        if pttl is not None:
            raise LockNotAcquired(lock.name, pttl)
        self._dog = lock._watch(self.owner)
        return self

    def __exit__(self, *exc):
        self.lock._unwatch(self.owner)
        self.lock.client.execute_command(
            "RWLOCK.UNLOCK", self.lock.name, self.owner, self.mode
        )
        return False


# --- The demonstration -------------------------------------------------------


def check(ok, what):
    if not ok:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)
    print(f"ok: {what}", flush=True)


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
                value = int(client.get(counter) or 0)
                time.sleep(0.001)
                client.set(counter, value + 1)
                leave("writers")

    def reader():
        for _ in range(rounds):
            with lock.read(wait_ms=30000):
                enter("readers")
                time.sleep(0.001)
                leave("readers")

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    check(not any(t.is_alive() for t in threads), "every thread finished")
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
    print("all checks passed", flush=True)


if __name__ == "__main__":
    main()

"""The rwlock-client package (clients/python) at work: Redisson's
read-write lock and plain lock, fenced, on the rwlock module.

    pip install ./clients/python
    python3 examples/python/rwlock_demo.py --port 6399

It checks what it shows and exits non-zero if anything is off.
"""

import argparse
import sys
import threading
import time

import redis

from rwlock_client import Lock, NotAcquired, NotHeld, ReadWriteLock

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
    rw = ReadWriteLock(client, f"{prefix}:counter-lock")
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
            with rw.write_lock().hold(wait=30):
                enter("writers")
                racy_increment(client, counter)
                leave("writers")

    def reader():
        for _ in range(rounds):
            with rw.read_lock().hold(wait=30):
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
    rw = ReadWriteLock(client, f"{prefix}:reentry")
    with rw.write_lock(), rw.read_lock(), rw.write_lock():
        owner = client.execute_command("RWLOCK.INFO", rw.name)[5][0]
        check(owner[3] == 1 and owner[5] == 2, "write, read, write again: re-entered")
    check(client.exists(rw.name) == 0, "released on leaving the last block")
    with rw.read_lock():
        try:
            with rw.write_lock().hold(wait=0):
                check(False, "a reader cannot upgrade to write")
        except NotAcquired as e:
            check(e.pttl > 0, "a reader cannot upgrade to write (refused)")
        other = ReadWriteLock(redis.Redis(connection_pool=client.connection_pool), rw.name)
        with other.read_lock().hold(wait=0):
            check(True, "another client's reader shares the read lock")


def watchdog(client, prefix):
    """A 1 s lease held for 3.5 s: the watchdog keeps it; without one the
    lease runs out."""
    lease = 1000
    bare = f"{prefix}:no-watchdog"
    client.execute_command("RWLOCK.WRITE", bare, "bare:1", lease)
    time.sleep(1.2)
    check(client.exists(bare) == 0, "without renewal a 1 s lease ends")

    rw = ReadWriteLock(client, f"{prefix}:long-task", watchdog_timeout=lease / 1000)
    rival = ReadWriteLock(client, rw.name, client_id="rival")
    with rw.write_lock():
        time.sleep(3.5)
        check(not rw.write_lock().lost, "the watchdog kept the hold for 3.5 leases")
        try:
            with rival.write_lock().hold(wait=0):
                check(False, "the lock is still held after 3.5 leases")
        except NotAcquired as e:
            check(0 < e.pttl <= lease, f"the lock is still held after 3.5 leases (PTTL {e.pttl})")
    check(client.exists(rw.name) == 0, "released at the end of the block")


def parked_waiters(client):
    return int(client.info("rwlock")["rwlock_waiters"])


def waiting(client, prefix):
    """BLOCK: a waiter is parked on the server and gets the lock when the
    writer releases it, or gives up when its wait runs out."""
    rw = ReadWriteLock(client, f"{prefix}:handoff")
    held, release = threading.Event(), threading.Event()
    seen_waiting = []

    def holder():
        with rw.write_lock():
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
        with rw.read_lock().hold(wait=0.05):
            check(False, "a 50 ms wait gives up while the writer holds on")
    except NotAcquired:
        check(True, "a 50 ms wait gives up while the writer holds on")
    release.set()
    with rw.read_lock().hold(wait=10):
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
            with lock.hold(wait=30) as token:
                tokens.append(token)
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
            with Lock(client, lock.name, client_id="rival").hold(wait=0):
                check(False, "another owner is refused the plain lock")
        except NotAcquired as e:
            check(e.pttl > 0, "another owner is refused the plain lock")
    # Acquisitions and releases carry HELD (the owner's count), no request
    # id: nothing but the lock's hash is ever written.
    latches = client.keys(f"redisson_*{{{lock.name}}}*")
    check(
        client.exists(lock.name) == 0 and not latches,
        "the plain lock released, no latch left",
    )

    lease = 1000
    lock = Lock(client, f"{prefix}:plain-long-task", watchdog_timeout=lease / 1000)
    lock.acquire()  # no lease given: the watchdog renews it
    time.sleep(3.5)
    pttl = client.pttl(lock.name)
    check(
        not lock.lost and 0 < pttl <= lease,
        f"the watchdog kept the plain lock for 3.5 leases (PTTL {pttl})",
    )
    client.execute_command("LOCK.FORCEUNLOCK", lock.name)
    time.sleep(2 * lease / 3000)
    check(lock.lost, "the watchdog stopped when the lock was forced open")
    try:
        lock.release()
        check(False, "the release reports the lost hold")
    except NotHeld:
        check(True, "the release reports the lost hold")


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

#!/usr/bin/env python3
"""One scenario of make bench-clients (benches/clients/run.py) with one library:
this repository's client ("rwlock", from clients/python/src of this checkout),
redis-py's Lock ("redis-py") or python-redis-lock ("python-redis-lock"), each
on one redis.Redis client (one connection pool) per process, workers being
threads. Warms up, prints READY, runs for --seconds once it reads GO, prints
its counts as one JSON line, and releases what it holds once its standard
input closes (after run.py read the server's counters)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "clients" / "python" / "src"))

import redis_lock  # type: ignore[import-untyped]  # noqa: E402  (python-redis-lock: untyped)
import rwlock_client  # noqa: E402

# The peers' lease: the watchdog lease our locks take without one (30 s), so
# that no hold ends on its own during a run.
LEASE_S = 30


class Locker(Protocol):
    def lock(self) -> bool: ...
    def try_lock(self) -> bool: ...
    def unlock(self) -> None: ...


class Ours:
    def __init__(self, lock: Any) -> None:
        self._l = lock

    def lock(self) -> bool:
        return bool(self._l.acquire())

    def try_lock(self) -> bool:
        return bool(self._l.acquire(wait=0))

    def unlock(self) -> None:
        self._l.release()


class Peer:
    """A peer's lock with its defaults but the lease (redis-py's `Lock`: a
    wait polls SET NX every 0.1 s, its `sleep`; python-redis-lock: a wait
    blocks on BLPOP of the lock's signal list, which a release pushes to).
    Both take `acquire(blocking=False)` for a try."""

    def __init__(self, lock: Any) -> None:
        self._l = lock

    def lock(self) -> bool:
        return bool(self._l.acquire())

    def try_lock(self) -> bool:
        return bool(self._l.acquire(blocking=False))

    def unlock(self) -> None:
        self._l.release()


class Handoff:
    """On one contended lock: the time from a holder starting its release to
    the next holder's acquisition returning, when that holder is another
    worker."""

    def __init__(self) -> None:
        self.mu = threading.Lock()
        self.release_at = 0.0
        self.last = -1
        self.samples: list[float] = []
        self.same = 0
        self.changes = 0

    def acquired(self, worker: int) -> None:
        now = time.perf_counter()
        with self.mu:
            if self.last == worker:
                self.same += 1
            elif self.last >= 0:
                self.changes += 1
                self.samples.append((now - self.release_at) * 1e6)
            self.last = worker

    def releasing(self) -> None:
        with self.mu:
            self.release_at = time.perf_counter()


def phase(scenario: str, workers: list[Locker], writer: Optional[Locker], seconds: float) -> dict[str, Any]:
    stop = threading.Event()
    per = [0] * len(workers)
    failed = [0]
    waits: list[float] = []
    handoff = Handoff()
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as e:  # reported by the main thread
                errors.append(e)
                stop.set()

        return run

    def work(i: int, w: Locker) -> None:
        while not stop.is_set():
            if scenario == "try":
                if w.try_lock():
                    raise RuntimeError("a try took a held lock")
                per[i] += 1
                continue
            if not w.lock():
                failed[0] += 1
                continue
            if scenario == "contended":
                handoff.acquired(i)
                handoff.releasing()
            w.unlock()
            per[i] += 1

    def bind(f: Callable[[int, Locker], None], i: int, w: Locker) -> Callable[[], None]:
        return lambda: f(i, w)

    def write(w: Locker) -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            if not w.lock():
                failed[0] += 1
                continue
            waits.append((time.perf_counter() - t0) * 1e6)
            w.unlock()

    threads = [threading.Thread(target=guarded(bind(work, i, w))) for i, w in enumerate(workers)]
    if writer is not None:
        threads.append(threading.Thread(target=guarded(lambda: write(writer))))
    start = time.perf_counter()
    for t in threads:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    result: dict[str, Any] = {
        "cycles": sum(per) + len(waits),
        "failed": failed[0],
        "elapsed_s": time.perf_counter() - start,
        "per_worker": per,
        "writer_wait_us": waits,
    }
    if scenario == "contended":
        result["handoff_us"] = handoff.samples
        if handoff.same + handoff.changes:
            result["same_again"] = handoff.same / (handoff.same + handoff.changes)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--lib", default="rwlock")
    ap.add_argument("--scenario", default="uncontended")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--warmup", type=float, default=0.5)
    args = ap.parse_args()
    # python-redis-lock logs every refused try as a warning, on stderr.
    logging.getLogger("redis_lock").setLevel(logging.ERROR)

    client = redis.Redis(host="127.0.0.1", port=args.port)
    new: Callable[[str], Locker]
    new_rw: Optional[Callable[[str, bool], Locker]] = None
    if args.lib == "rwlock":
        new = lambda name: Ours(rwlock_client.Lock(client, name))  # noqa: E731

        def new_rw(name: str, write: bool) -> Locker:
            rw = rwlock_client.ReadWriteLock(client, name)
            return Ours(rw.write_lock() if write else rw.read_lock())

    elif args.lib == "redis-py":
        new = lambda name: Peer(client.lock(name, timeout=LEASE_S))  # noqa: E731
    elif args.lib == "python-redis-lock":
        new = lambda name: Peer(redis_lock.Lock(client, name, expire=LEASE_S))  # noqa: E731
    else:
        raise SystemExit(f"unknown library {args.lib!r}")

    workers: list[Locker] = []
    writer: Optional[Locker] = None
    holder: Optional[Locker] = None
    if args.scenario == "uncontended":
        workers = [new(f"bench:u:{i}") for i in range(args.workers)]
    elif args.scenario == "contended":
        workers = [new("bench:c") for _ in range(args.workers)]
    elif args.scenario == "try":
        # Held by the main thread: another owner than the workers' threads.
        holder = new("bench:t")
        if not holder.lock():
            raise SystemExit("try: the holder did not get the lock")
        workers = [new("bench:t") for _ in range(args.workers)]
    elif args.scenario == "rw":
        if new_rw is None:
            raise SystemExit(f"{args.lib} has no read-write lock")
        workers = [new_rw("bench:rw", False) for _ in range(args.workers)]
        writer = new_rw("bench:rw", True)
    else:
        raise SystemExit(f"unknown scenario {args.scenario!r}")

    phase(args.scenario, workers, writer, args.warmup)
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        raise SystemExit("expected GO on standard input")
    print(json.dumps(phase(args.scenario, workers, writer, args.seconds)), flush=True)
    sys.stdin.read()  # run.py reads the server's counters, then closes our input
    if holder is not None:
        holder.unlock()
    client.close()


if __name__ == "__main__":
    main()

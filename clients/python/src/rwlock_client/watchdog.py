"""The lease renewer: Redisson's lock watchdog. While a hold taken without a
lease lives, its lease is renewed every third of it; renewing stops when
told to, or when the server says the owner no longer holds the lock (the
lease ran out, or the lock was forced open), which is reported as a loss.

Most holds are released long before their first renewal is due (10 s with
the default 30 s lease), so a hold costs no thread: one scheduler thread
per process keeps every hold's next renewal in a heap of deadlines,
started by the first hold and ending once nothing was scheduled for
`LINGER` seconds. A renewal that comes due runs in a thread of its own, so
a call stuck on one server delays no other hold's renewal and never the
scheduler."""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from typing import Callable, List, Optional, Tuple

#: How long the scheduler thread outlives its last scheduled renewal: a
#: process taking holds now and then keeps one thread instead of starting
#: one per hold.
LINGER = 1.0

#: The scheduler rebuilds its heap once its stopped entries outnumber the
#: live ones by this many: a hold released before its renewal leaves its
#: entry behind (removing it from the middle of a heap costs more than
#: skipping it later), and a busy process would otherwise pile up a lease's
#: worth of them.
COMPACT_SLACK = 64


class Watchdog:
    """The renewals of one hold: `renew` every `lease / 3` seconds (counted
    from the end of the previous renewal) until `stop()`. A renewal
    replying False, or none succeeding for a whole lease (server
    unreachable), calls `on_lost` once and ends the renewals. Made by
    `Scheduler.watch`."""

    def __init__(
        self,
        scheduler: "Scheduler",
        name: str,
        lease: float,
        renew: Callable[[], bool],
        on_lost: Callable[[], None],
    ) -> None:
        self.name, self._lease, self._renew, self._on_lost = name, lease, renew, on_lost
        self._scheduler = scheduler
        self._last_renewal = time.monotonic()
        #: Set once, under the scheduler's lock, by `stop()` (any thread).
        self.stopped = False

    def stop(self) -> None:
        self._scheduler.stop(self)

    def run(self) -> None:
        """One renewal (in a thread of its own): schedules the next one,
        or reports the loss."""
        try:
            held = self._renew()
        except Exception:  # the connection: try again next time, within the lease
            if time.monotonic() - self._last_renewal < self._lease:
                self._scheduler.again(self)
                return
            held = False
        if self.stopped:
            return
        if not held:
            # Reported unless a release stopped the renewals meanwhile.
            if self._scheduler.stop(self):
                self._on_lost()
            return
        self._last_renewal = time.monotonic()
        self._scheduler.again(self)

    @property
    def period(self) -> float:
        return self._lease / 3


class Scheduler:
    """The process's watchdog scheduler: one thread, a heap of each live
    hold's next renewal."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        """A fresh scheduler (also in a forked child, which has none of the
        parent's threads)."""
        self._cond = threading.Condition(threading.Lock())
        self._heap: List[Tuple[float, int, Watchdog]] = []
        self._order = itertools.count()
        self._live = 0
        self._stopped = 0
        self._thread: Optional[threading.Thread] = None
        #: When the scheduler thread wakes up next on its own: a renewal due
        #: later needs no wake-up call.
        self._wakes_at = 0.0

    def watch(self, name: str, lease: float, renew: Callable[[], bool], on_lost: Callable[[], None]) -> Watchdog:
        """Schedules a new hold's renewals; the first is due in `lease / 3`."""
        dog = Watchdog(self, name, lease, renew, on_lost)
        with self._cond:
            self._live += 1
            self._push(dog)
        return dog

    def again(self, dog: Watchdog) -> None:
        """Schedules a hold's next renewal, `lease / 3` from now."""
        with self._cond:
            if not dog.stopped:
                self._push(dog)

    def stop(self, dog: Watchdog) -> bool:
        """Ends a hold's renewals (False: they had ended): its heap entry is
        skipped when it comes due, or dropped by a rebuild once stopped
        entries pile up."""
        with self._cond:
            if dog.stopped:
                return False
            dog.stopped = True
            self._live -= 1
            self._stopped += 1
            if self._stopped > self._live + COMPACT_SLACK:
                self._heap = [entry for entry in self._heap if not entry[2].stopped]
                heapq.heapify(self._heap)
                self._stopped = 0
            return True

    def _push(self, dog: Watchdog) -> None:
        """Called under the condition's lock."""
        due = time.monotonic() + dog.period
        heapq.heappush(self._heap, (due, next(self._order), dog))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rwlock-watchdog", daemon=True)
            self._thread.start()
        elif due < self._wakes_at:
            self._cond.notify()

    def _run(self) -> None:
        idle_since: Optional[float] = None
        while True:
            due: List[Watchdog] = []
            with self._cond:
                now = time.monotonic()
                heap = self._heap
                while heap and (heap[0][2].stopped or heap[0][0] <= now):
                    _, _, dog = heapq.heappop(heap)
                    if dog.stopped:
                        self._stopped -= 1
                    else:
                        due.append(dog)
                if not due:
                    if heap:
                        idle_since = None
                        self._wakes_at = heap[0][0]
                    elif idle_since is None:
                        idle_since = now
                        self._wakes_at = now + LINGER
                    elif now - idle_since >= LINGER:
                        self._thread = None
                        return
                    self._cond.wait(self._wakes_at - now)
                    continue
            idle_since = None
            for dog in due:
                threading.Thread(target=dog.run, name=f"rwlock-watchdog {dog.name}", daemon=True).start()


#: The process's scheduler.
SCHEDULER = Scheduler()

"""The watchdog's scheduling, without a server: one thread renews every
hold (its renewals in threads of their own), the asyncio watchdog on the
loop's timers."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, Dict, List

from conftest import wait_until
from rwlock_client.asyncio.watchdog import Watchdog as AsyncWatchdog
from rwlock_client.watchdog import LINGER, Scheduler

#: A short lease: a renewal every 0.1 s.
LEASE = 0.3


def scheduler_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rwlock-watchdog"]


def test_one_thread_renews_every_hold_and_ends_when_idle() -> None:
    scheduler = Scheduler()
    renewals: Dict[int, int] = {i: 0 for i in range(20)}

    def renewer(i: int) -> Callable[[], bool]:
        def renew() -> bool:
            renewals[i] += 1
            return True

        return renew

    # Other schedulers' threads (the process's, of earlier tests) may end meanwhile.
    before = set(scheduler_threads())
    dogs = [scheduler.watch(f"h{i}", LEASE, renewer(i), lambda: None) for i in range(20)]
    started = set(scheduler_threads()) - before
    assert len(started) == 1
    wait_until("every hold renewed 3 times", lambda: min(renewals.values()) >= 3)
    assert set(scheduler_threads()) - before == started
    for dog in dogs:
        dog.stop()
    stopped = dict(renewals)
    # A renewal already under way when its hold stopped may still end; none starts after.
    time.sleep(5 * LEASE)
    assert all(renewals[i] - stopped[i] <= 1 for i in renewals), (stopped, renewals)
    settled = dict(renewals)
    time.sleep(5 * LEASE)
    assert renewals == settled
    thread = started.pop()
    wait_until("the scheduler's thread to end", lambda: not thread.is_alive(), 15 + LINGER)


def test_a_refused_renewal_reports_the_loss_once() -> None:
    scheduler = Scheduler()
    calls: List[str] = []
    lost: List[str] = []

    def renew() -> bool:
        calls.append("renew")
        return len(calls) < 2

    scheduler.watch("refused", LEASE, renew, lambda: lost.append("lost"))
    wait_until("the loss to be reported", lambda: bool(lost))
    time.sleep(5 * LEASE)
    assert calls == ["renew", "renew"] and lost == ["lost"]


def test_failing_renewals_are_retried_for_a_lease_then_lost() -> None:
    scheduler = Scheduler()
    attempts: List[float] = []
    lost: List[float] = []

    def renew() -> bool:
        attempts.append(time.monotonic())
        raise ConnectionError("unreachable")

    started = time.monotonic()
    scheduler.watch("unreachable", LEASE, renew, lambda: lost.append(time.monotonic()))
    wait_until("the loss to be reported", lambda: bool(lost))
    assert len(attempts) >= 2, attempts
    assert lost[0] - started >= LEASE


def test_a_stuck_renewal_delays_no_other_hold() -> None:
    scheduler = Scheduler()
    release = threading.Event()
    others = [0]

    def stuck() -> bool:
        release.wait(60)
        return True

    def other() -> bool:
        others[0] += 1
        return True

    stuck_dog = scheduler.watch("stuck", LEASE, stuck, lambda: None)
    other_dog = scheduler.watch("other", LEASE, other, lambda: None)
    try:
        wait_until("the other hold renewed 5 times", lambda: others[0] >= 5)
    finally:
        release.set()
        stuck_dog.stop()
        other_dog.stop()


def test_stopped_holds_do_not_pile_up_in_the_heap() -> None:
    scheduler = Scheduler()
    live = scheduler.watch("kept", 30.0, lambda: True, lambda: None)
    for i in range(5000):
        scheduler.watch(f"short{i}", 30.0, lambda: True, lambda: None).stop()
    assert len(scheduler._heap) <= 2 + 2 * 64
    live.stop()


def test_the_asyncio_watchdog_renews_on_the_loops_timers_and_stops() -> None:
    async def test() -> None:
        renewals = [0]
        lost: List[str] = []

        async def renew() -> bool:
            renewals[0] += 1
            return True

        async def on_lost() -> None:
            lost.append("lost")

        tasks = len(asyncio.all_tasks())
        dog = AsyncWatchdog(LEASE, renew, on_lost)
        assert len(asyncio.all_tasks()) == tasks, "no task until a renewal is due"
        while renewals[0] < 3:
            await asyncio.sleep(0.02)
        dog.stop()
        stopped = renewals[0]
        await asyncio.sleep(5 * LEASE)
        assert renewals[0] == stopped and not lost

        async def refuse() -> bool:
            return False

        AsyncWatchdog(LEASE, refuse, on_lost)
        while not lost:
            await asyncio.sleep(0.02)
        await asyncio.sleep(5 * LEASE)
        assert lost == ["lost"]

    asyncio.run(test())

"""`FairLock` (`FAIRLOCK.*`, Redisson's RFairLock): waiters served in
arrival order, a wait that runs out leaves the line (the server's own
timeout path), a try never joins it, the watchdog renews a fair hold, a
lost hold is reported, the non-reentrant fair lock."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

import pytest
import redis

import rwlock_client.asyncio as aio
from conftest import Server, wait_until
from rwlock_client import FairLock, NotAcquired, NotHeld, MultiLock, NotReentrant


def line(client: redis.Redis, name: str) -> List[str]:
    """The owners waiting in the line, in order (FAIRLOCK.INFO)."""
    info = client.execute_command("FAIRLOCK.INFO", name)
    fields = dict(zip(info[::2], info[1::2]))
    return [entry[1].decode() for entry in fields[b"line"]]


def left_behind(client: redis.Redis) -> List[bytes]:
    """The keys left (a fair lock's acquisitions and releases write no
    latch)."""
    return [k if isinstance(k, bytes) else k.encode() for k in client.keys("*")]


def holders(client: redis.Redis, name: str) -> dict[str, int]:
    info = client.execute_command("FAIRLOCK.INFO", name)
    fields = dict(zip(info[::2], info[1::2]))
    return {h[1].decode(): int(h[3]) for h in fields[b"holders"]}


def test_waiters_are_served_in_arrival_order(server: Server) -> None:
    client = server.client()
    holder = FairLock(client, "fair:order", client_id="holder")
    assert holder.acquire(wait=0, lease=30)
    lock = FairLock(client, "fair:order")
    served: List[int] = []
    owners: List[str] = []

    def wait(number: int) -> None:
        owners.append(lock.owner())
        assert lock.acquire(wait=20, lease=30)
        served.append(number)
        time.sleep(0.05)
        lock.release()

    threads = []
    for number in range(4):
        t = threading.Thread(target=wait, args=(number,))
        t.start()
        threads.append(t)
        # Each joins the line before the next starts.
        wait_until(f"waiter {number} in line", lambda: len(line(client, "fair:order")) == number + 1)
    assert line(client, "fair:order") == owners, "the line is in arrival order"
    holder.release()
    for t in threads:
        t.join(30)
    assert served == [0, 1, 2, 3]
    assert left_behind(client) == [], "the lock, its line and its latches are gone"


def test_a_wait_that_runs_out_leaves_the_line(server: Server) -> None:
    client = server.client()
    holder = FairLock(client, "fair:timeout", client_id="holder")
    assert holder.acquire(wait=0, lease=30)
    waiter = FairLock(client, "fair:timeout")
    started = time.monotonic()
    with pytest.raises(NotAcquired) as refused:
        with waiter.hold(wait=0.5):
            pass
    assert 0.4 < time.monotonic() - started < 3
    assert 0 < (refused.value.pttl or 0) <= 30_000
    assert line(client, "fair:timeout") == [], "the server took it out of the line"
    assert not waiter.held
    holder.release()
    assert left_behind(client) == [], "no line, no deadlines, no latch left"


def test_a_try_never_joins_the_line(server: Server) -> None:
    client = server.client()
    holder = FairLock(client, "fair:try", client_id="holder")
    assert holder.acquire(wait=0, lease=30)
    assert FairLock(client, "fair:try").acquire(wait=0) is False
    assert line(client, "fair:try") == []
    holder.release()
    assert left_behind(client) == []


def test_reentry_and_the_non_reentrant_fair_lock(server: Server) -> None:
    client = server.client()
    lock = FairLock(client, "fair:reentry")
    assert lock.acquire(wait=0) and lock.acquire(wait=1)
    assert holders(client, "fair:reentry") == {lock.owner(): 2}
    lock.release()
    assert lock.held and holders(client, "fair:reentry") == {lock.owner(): 1}
    lock.release()
    assert client.exists("fair:reentry") == 0
    once = FairLock(client, "fair:once", reentrant=False)
    assert once.acquire(wait=0)
    with pytest.raises(NotReentrant):
        once.acquire(wait=0)
    assert holders(client, "fair:once") == {once.owner(): 1}
    once.release()
    # FAIRLOCK.UNLOCK replies nil when the lock no longer exists (where
    # Redisson's fair_unlock.lua replies 1): NotHeld, as when another owner
    # holds it.
    with pytest.raises(NotHeld):
        once.release()
    assert FairLock(client, "fair:once", client_id="other").acquire(wait=0)
    with pytest.raises(NotHeld):
        once.release()


def test_the_watchdog_renews_a_fair_hold_and_reports_it_lost(server: Server) -> None:
    client = server.client()
    client.config_resetstat()
    # A 3 s lease held for 4 s: only renewals keep it. (A 1 s lease lapsed
    # at load 10, when the watchdog's thread waited more than a second for
    # the CPU: the release then rightly raised NotHeld.)
    lock = FairLock(client, "fair:watchdog", watchdog_timeout=3.0)
    with lock:
        time.sleep(4.0)
        assert lock.held and not lock.lost
        assert 0 < client.pttl("fair:watchdog") <= 3000
        renewals = int(client.info("commandstats")["cmdstat_lock.renew"]["calls"])
        assert 2 <= renewals <= 12, renewals
    assert client.exists("fair:watchdog") == 0
    seen: List[str] = []
    lost = FairLock(client, "fair:lost", watchdog_timeout=0.6, on_lost=lambda l, o: seen.append(o))
    assert lost.acquire()
    client.execute_command("FAIRLOCK.FORCEUNLOCK", "fair:lost")
    wait_until("the loss to be seen", lambda: lost.lost, 10)
    assert seen == [lost.owner()] and not lost.held
    with pytest.raises(NotHeld):
        lost.release()


def test_a_multi_lock_cannot_hold_a_fair_lock(server: Server) -> None:
    client = server.client()
    with pytest.raises(TypeError):
        MultiLock(client, [FairLock(client, "{f}:a")])


def test_asyncio_fair_lock_serves_tasks_in_order(server: Server) -> None:
    async def run() -> None:
        client: Any = server.async_client()
        direct = server.client()
        holder = aio.FairLock(client, "fair:async", client_id="holder")
        assert await holder.acquire(wait=0, lease=30)
        lock = aio.FairLock(client, "fair:async")
        served: List[int] = []

        async def wait(number: int) -> None:
            assert await lock.acquire(wait=20, lease=30)
            served.append(number)
            await lock.release()

        tasks = []
        for number in range(3):
            tasks.append(asyncio.create_task(wait(number)))
            while len(line(direct, "fair:async")) < number + 1:
                await asyncio.sleep(0.02)
        await holder.release()
        await asyncio.gather(*tasks)
        assert served == [0, 1, 2]
        assert left_behind(direct) == []
        await client.aclose()

    asyncio.run(run())

"""The asyncio client: tasks as owners, exclusion, re-entry, fencing, BLOCK
waits past the socket timeout, the watchdog and a lost hold."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, Awaitable, Callable, List

import pytest

import rwlock_client.asyncio as aio
from conftest import Counters, Server
from rwlock_client import NotAcquired, NotHeld, NotReentrant


def run(server: Server, test: Callable[[Any], Awaitable[None]], **options: Any) -> None:
    async def main() -> None:
        client = server.async_client(**options)
        try:
            await test(client)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_each_task_is_an_owner(server: Server) -> None:
    async def test(client: Any) -> None:
        lock = aio.Lock(client, "a:owners")
        assert await lock.acquire(wait=0)
        assert re.fullmatch(r"[0-9a-f-]{36}:task-\d+", lock.owner())
        assert await lock.acquire(wait=0), "the same task re-enters"

        async def other_task() -> bool:
            return await lock.acquire(wait=0)

        assert await asyncio.create_task(other_task()) is False
        await lock.release()
        await lock.release()
        assert await client.exists("a:owners") == 0
        with pytest.raises(NotHeld):
            await lock.release()

    run(server, test)


def test_exclusion_between_tasks(server: Server) -> None:
    async def test(client: Any) -> None:
        rw = aio.ReadWriteLock(client, "a:counter-lock")
        await client.set("a:counter", 0)

        async def writer() -> None:
            for _ in range(10):
                async with rw.write_lock().hold(wait=30):
                    value = int(await client.get("a:counter"))
                    await asyncio.sleep(0.001)
                    await client.set("a:counter", value + 1)

        async def reader() -> None:
            for _ in range(10):
                async with rw.read_lock().hold(wait=30):
                    await asyncio.sleep(0.001)

        await asyncio.gather(*[writer() for _ in range(4)], *[reader() for _ in range(2)])
        assert int(await client.get("a:counter")) == 40
        assert await client.exists("a:counter-lock") == 0

    run(server, test)


def test_rwlock_reentry_and_fencing(server: Server) -> None:
    async def test(client: Any) -> None:
        rw = aio.ReadWriteLock(client, "a:rw", fenced=True)
        async with rw.write_lock().hold() as first:
            async with rw.read_lock():
                info = await client.execute_command("RWLOCK.INFO", "a:rw")
                assert info[5][0][3:6:2] == [1, 1]
        async with rw.write_lock().hold() as second:
            pass
        assert first is not None and second == first + 1
        plain = aio.Lock(client, "a:fenced", fenced=True, reentrant=False)
        async with plain.hold() as token:
            assert token == 1 and plain.token == 1
            with pytest.raises(NotReentrant):
                await plain.acquire(wait=0)

    run(server, test)


def test_a_wait_past_the_socket_timeout(server: Server) -> None:
    async def test(client: Any) -> None:
        counters = Counters(server.client())
        holder = aio.Lock(client, "a:wait", client_id="holder")
        waiter = aio.Lock(client, "a:wait", client_id="waiter")
        assert await holder.acquire(wait=0, lease=1.5)
        started = time.monotonic()
        assert await waiter.acquire(wait=5.0)
        # Past the 0.5 s socket timeout, served at the lease's end, well before the wait's
        # (a loaded machine's margins both sides).
        assert 1.0 < time.monotonic() - started < 4.0
        await waiter.release()
        assert await holder.acquire(wait=0)
        started = time.monotonic()
        with pytest.raises(NotAcquired):
            async with waiter.hold(wait=1.5):
                pass
        assert time.monotonic() - started >= 1.45
        assert counters["waits_started"] == 2 and counters["waits_timed_out"] == 1
        await holder.release()

    run(server, test, socket_timeout=0.5)


def test_watchdog_keeps_a_1s_lease_for_3_5s_and_detects_loss(server: Server) -> None:
    async def test(client: Any) -> None:
        seen: List[str] = []

        async def lost(lock: Any, owner: str) -> None:
            seen.append(owner)

        lock = aio.Lock(client, "a:long", watchdog_timeout=1.0, on_lost=lost)
        async with lock:
            await asyncio.sleep(3.5)
            assert not lock.lost
            assert 0 < await client.pttl("a:long") <= 1000
        assert await client.exists("a:long") == 0

        assert await lock.acquire()
        await client.execute_command("LOCK.FORCEUNLOCK", "a:long")
        # The next renewal (a third of the 1 s lease away, later on a loaded machine) finds it.
        deadline = time.monotonic() + 10
        while not lock.lost and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert lock.lost and seen == [lock.owner()]
        with pytest.raises(NotHeld):
            await lock.release()

    run(server, test)

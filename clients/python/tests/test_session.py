"""`session=True`: the hold is bound to a connection the lock keeps for it;
the server keeps it alive (no watchdog) and frees it when that connection
closes."""

from __future__ import annotations

import asyncio
import time

import pytest

import rwlock_client.asyncio as aio
from conftest import Counters, Server, no_watchdog_thread, wait_until
from rwlock_client import Lock, NotHeld, MultiLock, ReadWriteLock


def kill_other_connections(server: Server) -> None:
    server.client().execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")


def test_the_server_keeps_a_session_hold_past_its_lease(server: Server) -> None:
    client = server.client()
    counters = Counters(client)
    lock = Lock(client, "s:plain", session=True, watchdog_timeout=1.0)
    # The watchdog's thread of an earlier test's holds ends soon after them.
    wait_until("no watchdog thread", no_watchdog_thread)
    assert lock.acquire(wait=0)
    assert no_watchdog_thread()
    time.sleep(2.5)
    assert client.exists("s:plain") == 1, "held 2.5 leases without a client renewal"
    assert counters["renewals"] == 0
    lock.release()
    assert client.exists("s:plain") == 0


def test_closing_the_connection_frees_the_hold(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "s:closed", session=True)
    rw = ReadWriteLock(client, "s:rw", session=True)
    assert lock.acquire(wait=0) and rw.read_lock().acquire(wait=0)
    kill_other_connections(server)
    wait_until("the holds to be freed", lambda: server.client().exists("s:closed", "s:rw") == 0, 5)
    with pytest.raises(NotHeld):
        lock.release()
    with pytest.raises(NotHeld):
        rw.read_lock().release()


def test_a_session_reentry_uses_the_same_connection(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "s:reentry", session=True)
    assert lock.acquire(wait=0) and lock.acquire(wait=0)
    assert client.hget("s:reentry", lock.owner()) == b"2"
    lock.release()
    lock.release()
    assert client.exists("s:reentry") == 0


def test_session_multilock(server: Server) -> None:
    client = server.client()
    multi = MultiLock(client, [("LOCK", "s:m1"), ("WRITE", "s:m2")], session=True, watchdog_timeout=1.0)
    assert multi.acquire(wait=0)
    time.sleep(1.5)
    assert client.exists("s:m1", "s:m2") == 2
    kill_other_connections(server)
    wait_until("the holds to be freed", lambda: server.client().exists("s:m1", "s:m2") == 0, 5)


def test_asyncio_session(server: Server) -> None:
    async def run() -> None:
        client = server.async_client()
        lock = aio.Lock(client, "s:async", session=True, watchdog_timeout=1.0)
        assert await lock.acquire(wait=0)
        await asyncio.sleep(1.5)
        assert await client.exists("s:async") == 1
        await lock.release()
        assert await client.exists("s:async") == 0
        await client.aclose()

    asyncio.run(run())

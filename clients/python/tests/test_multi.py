"""`MultiLock` (`LOCK.ACQUIREALL`, `LOCK.RENEWALL`, `LOCK.UNLOCKALL`):
several holds of any kind, taken all or none, waited for on the server,
renewed and released together."""

from __future__ import annotations

import asyncio
import time

import pytest

import rwlock_client.asyncio as aio
from conftest import Counters, Server, wait_until
from rwlock_client import Lock, NotHeld, MultiLock, ReadWriteLock


def test_takes_every_kind_of_hold_and_releases_them(server: Server) -> None:
    client = server.client()
    rw = ReadWriteLock(client, "m:rw")
    multi = MultiLock(client, [Lock(client, "m:plain"), rw.write_lock(), ("READ", "m:reads")])
    assert multi.holds == [("LOCK", "m:plain"), ("WRITE", "m:rw"), ("READ", "m:reads")]
    assert multi.acquire(wait=0)
    owner = multi.owner()
    assert client.hget("m:plain", owner) == b"1"
    assert client.hget("m:rw", f"{owner}:write") == b"1"
    assert client.hget("m:reads", owner) == b"1"
    # The same thread is the same owner: its single locks re-enter.
    assert Lock(client, "m:plain").acquire(wait=0)
    Lock(client, "m:plain").release()
    assert Lock(client, "m:plain", client_id="rival").acquire(wait=0) is False
    multi.release()
    assert client.exists("m:plain", "m:rw", "m:reads") == 0
    with pytest.raises(NotHeld):
        multi.release()


def test_all_or_none(server: Server) -> None:
    client = server.client()
    rival = Lock(client, "m:b", client_id="rival")
    assert rival.acquire(wait=0)
    multi = MultiLock(client, [("LOCK", "m:a"), ("LOCK", "m:b"), ("WRITE", "m:c")])
    assert multi.acquire(wait=0) is False
    assert client.exists("m:a", "m:c") == 0, "nothing taken when one is in the way"
    rival.release()
    assert multi.acquire(wait=0)
    multi.release()


def test_waits_on_the_server_past_the_socket_timeout(server: Server) -> None:
    client = server.client(socket_timeout=0.5)
    counters = Counters(client)
    rival = Lock(client, "m:busy", client_id="rival")
    assert rival.acquire(wait=0, lease=1.5)
    multi = MultiLock(client, [("LOCK", "m:free"), ("LOCK", "m:busy")])
    started = time.monotonic()
    assert multi.acquire(wait=5.0)
    # Past the 0.5 s socket timeout, served at the lease's end, well before the wait's (a
    # loaded machine's margins both sides).
    assert 1.0 < time.monotonic() - started < 4.0
    assert counters["waits_started"] == 1
    multi.release()


def test_the_watchdog_renews_every_hold(server: Server) -> None:
    client = server.client()
    multi = MultiLock(client, [("LOCK", "m:x"), ("READ", "m:y")], watchdog_timeout=1.0)
    assert multi.acquire()
    time.sleep(2.5)
    assert not multi.lost
    assert 0 < client.pttl("m:x") <= 1000 and 0 < client.pttl("m:y") <= 1000
    client.delete("m:y")
    # The next renewal (a third of the lease away, later on a loaded machine) finds it.
    wait_until("one hold gone: the MultiLock is lost", lambda: multi.lost, 10)
    with pytest.raises(NotHeld):
        multi.release()
    assert client.exists("m:x") == 0, "the holds still held were released"


def test_asyncio_multilock(server: Server) -> None:
    async def run() -> None:
        client = server.async_client(socket_timeout=0.5)
        multi = aio.MultiLock(client, [aio.Lock(client, "am:a"), ("WRITE", "am:b")])
        async with multi.hold(wait=1):
            assert await client.exists("am:a", "am:b") == 2
            other = aio.MultiLock(client, [("WRITE", "am:b")], client_id="rival")
            started = time.monotonic()
            assert await other.acquire(wait=0.8) is False
            assert time.monotonic() - started >= 0.75
        assert await client.exists("am:a", "am:b") == 0
        await client.aclose()

    asyncio.run(run())

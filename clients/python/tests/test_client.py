"""`Client`, the client object (sync and asyncio): every lock it makes has
its settings, owners are the redis client's as with the constructors, and
the locks it makes take and release their holds."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any, List

import rwlock_client.asyncio as aio
from conftest import Server
from rwlock_client import Client, FairLock, Lock, MultiLock, ReadWriteLock, ReplicaSync


def test_the_locks_it_makes_have_its_settings(server: Server) -> None:
    redis_client = server.client()
    sync = ReplicaSync(timeout=2.0)
    client = Client(redis_client, watchdog_timeout=9.0, sync=sync, client_id="c-1")
    lost: List[str] = []

    def on_lost(lock: Any, owner: str) -> None:
        lost.append(owner)

    plain = client.lock("client:plain", fenced=True, reentrant=False, session=True, on_lost=on_lost)
    fair = client.fair_lock("client:fair", reentrant=False)
    rw = client.read_write_lock("client:rw", fenced=True)
    multi = client.multi_lock([("LOCK", "{client}:a"), ("WRITE", "{client}:b")], session=True)
    assert isinstance(plain, Lock) and isinstance(fair, FairLock)
    assert isinstance(rw, ReadWriteLock) and isinstance(multi, MultiLock)
    for lock in (plain, fair, rw.read_lock(), rw.write_lock(), multi):
        assert lock.client is redis_client
        assert lock.watchdog_timeout == 9.0
        assert lock.sync is sync
        assert lock.client_id == "c-1"
        assert lock.owner() == f"c-1:{threading.get_ident()}"
    assert (plain.fenced, plain.reentrant, plain.session, plain.on_lost) == (True, False, True, on_lost)
    assert fair.reentrant is False
    assert rw.write_lock().session is False
    assert multi.session is True and multi.holds == [("LOCK", "{client}:a"), ("WRITE", "{client}:b")]
    assert lost == []


def test_owners_are_the_redis_clients_as_with_the_constructors(server: Server) -> None:
    redis_client = server.client()
    made = Client(redis_client).lock("client:owner")
    assert made.owner() == Lock(redis_client, "client:owner").owner()
    assert Client(server.client()).lock("client:owner").owner() != made.owner()


def test_its_locks_take_and_release_holds(server: Server) -> None:
    redis_client = server.client()
    client = Client(redis_client)
    with client.lock("client:take", fenced=True).hold(wait=0, lease=10) as token:
        assert isinstance(token, int)
        assert redis_client.exists("client:take") == 1
    assert redis_client.exists("client:take") == 0
    with client.read_write_lock("client:rw2").write_lock().hold(wait=0, lease=10):
        assert redis_client.exists("client:rw2") == 1
    assert redis_client.exists("client:rw2") == 0
    with client.fair_lock("client:fair2").hold(wait=0, lease=10):
        assert redis_client.exists("client:fair2") == 1
    assert redis_client.exists("client:fair2") == 0
    with client.multi_lock([("LOCK", "{m}:1"), ("READ", "{m}:2")]).hold(wait=0, lease=10):
        assert redis_client.exists("{m}:1", "{m}:2") == 2
    assert redis_client.exists("{m}:1", "{m}:2") == 0
    assert repr(client) == f"Client({redis_client!r}, client_id={client.client_id!r})"


def test_the_asyncio_client(server: Server) -> None:
    async def main() -> None:
        redis_client = server.async_client()
        try:
            client = aio.Client(redis_client, watchdog_timeout=9.0, client_id="c-2")
            lock = client.lock("client:async", fenced=True)
            assert isinstance(lock, aio.Lock)
            assert lock.watchdog_timeout == 9.0
            assert re.fullmatch(r"c-2:task-\d+", lock.owner())
            assert isinstance(client.fair_lock("client:async-fair"), aio.FairLock)
            assert isinstance(client.read_write_lock("client:async-rw"), aio.ReadWriteLock)
            assert isinstance(client.multi_lock([("LOCK", "{a}:1")]), aio.MultiLock)
            async with lock.hold(wait=0, lease=10) as token:
                assert isinstance(token, int)
                assert await redis_client.exists("client:async") == 1
            assert await redis_client.exists("client:async") == 0
        finally:
            await redis_client.aclose()

    asyncio.run(main())

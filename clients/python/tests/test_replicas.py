"""Replica sync: each acquisition waits until the master's replicas have
it (WAIT; WAITAOF where the server has it and writes an AOF), and a hold
they did not acknowledge in time is released and reported."""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Tuple

import pytest

import rwlock_client.asyncio as aio
from conftest import Server, wait_until
from rwlock_client import Lock, NotSynced, ReadWriteLock, ReplicaSync


def pair(start_server: Callable[..., Server], *master_args: str) -> Tuple[Server, Server]:
    master = start_server("--repl-diskless-sync-delay", "0", *master_args)
    replica = start_server("--replicaof", "127.0.0.1", str(master.port))
    wait_until(
        "the replica to connect",
        lambda: master.client().info("replication")["connected_slaves"] == 1
        and replica.client().info("replication")["master_link_status"] == "up",
    )
    return master, replica


def not_synced_after(lock: Lock) -> float:
    """Seconds an acquisition took to raise `NotSynced`."""
    started = time.monotonic()
    with pytest.raises(NotSynced):
        lock.acquire(wait=0)
    return time.monotonic() - started


def test_an_acquisition_is_on_the_replica_when_it_returns(start_server: Callable[..., Server]) -> None:
    master, replica = pair(start_server)
    client = master.client()
    lock = Lock(client, "synced")
    rw = ReadWriteLock(client, "synced-rw")
    for _ in range(20):
        assert lock.acquire(wait=0)
        assert replica.client().exists("synced") == 1
        assert rw.write_lock().acquire(wait=0)
        assert replica.client().exists("synced-rw") == 1
        lock.release()
        rw.write_lock().release()


def test_unacknowledged_hold_is_released_and_reported(start_server: Callable[..., Server]) -> None:
    master, replica = pair(start_server)
    client = master.client()
    lock = Lock(client, "unsynced", sync=ReplicaSync(timeout=0.3))
    replica.pause()
    try:
        assert 0.3 <= not_synced_after(lock) < 2.0
        assert client.exists("unsynced") == 0, "released on the master"
        assert not lock.held

        async def run() -> None:
            alock = aio.Lock(master.async_client(), "unsynced", sync=ReplicaSync(timeout=0.3))
            with pytest.raises(NotSynced):
                await alock.acquire(wait=0)
            assert await alock.client.exists("unsynced") == 0

        asyncio.run(run())
        # Sync turned off: the master's word is enough.
        unchecked = Lock(client, "unsynced", sync=ReplicaSync(enabled=False))
        assert unchecked.acquire(wait=0)
        unchecked.release()
    finally:
        replica.resume()


def test_the_default_sync_timeout_is_redissons_one_second(start_server: Callable[..., Server]) -> None:
    master, replica = pair(start_server)
    lock = Lock(master.client(), "default-timeout")
    assert lock.sync.timeout == 1.0
    replica.pause()
    try:
        assert 1.0 <= not_synced_after(lock) < 3.0
    finally:
        replica.resume()


def test_a_master_writing_an_aof(start_server: Callable[..., Server]) -> None:
    master, replica = pair(start_server, "--appendonly", "yes", "--appendfsync", "always")
    lock = Lock(master.client(), "aof")
    assert lock.acquire(wait=0)
    assert replica.client().exists("aof") == 1
    lock.release()

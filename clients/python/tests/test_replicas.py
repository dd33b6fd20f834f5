"""Replica sync: each acquisition waits until the master's replicas have
it (WAIT; WAITAOF where the server has it and writes an AOF), in the
acquisition's own pipeline, for the most replicas the client object ever
learned the master to have; a hold they did not acknowledge in time is
released and reported."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Iterator, List, Tuple

import pytest
import redis

import rwlock_client.asyncio as aio
from conftest import Server, wait_until
from faultproxy import CountingProxy
from rwlock_client import FairLock, Lock, MultiLock, NotSynced, ReadWriteLock, ReplicaSync, Semaphore
from rwlock_client._base import acquire_batch
from rwlock_client._core import AUTO, OFF, REFRESH_INTERVAL, REQUIRED, Learned, masters_of


def pair(start_server: Callable[..., Server], *master_args: str) -> Tuple[Server, Server]:
    master = start_server("--repl-diskless-sync-delay", "0", *master_args)
    replica = start_server("--replicaof", "127.0.0.1", str(master.port))
    wait_until(
        "the replica to connect",
        lambda: master.client().info("replication")["connected_slaves"] == 1
        and replica.client().info("replication")["master_link_status"] == "up"
        and master.acknowledged(),
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
    # A generous timeout: a replica on a busy machine may take more than 1 s.
    generous = ReplicaSync(timeout=5)
    lock = Lock(client, "synced", sync=generous)
    rw = ReadWriteLock(client, "synced-rw", sync=generous)
    for _ in range(20):
        assert lock.acquire(wait=0)
        assert replica.client().exists("synced") == 1
        assert rw.write_lock().acquire(wait=0)
        assert replica.client().exists("synced-rw") == 1
        lock.release()
        rw.write_lock().release()
    # A wait: the WAIT is pipelined behind the blocked acquisition.
    assert client.execute_command("LOCK.ACQUIRE", "synced", "other:1", 10_000) is None
    threading.Timer(0.3, lambda: master.client().execute_command("LOCK.UNLOCK", "synced", "other:1")).start()
    assert lock.acquire(wait=10, lease=10)
    assert replica.client().hget("synced", lock.owner()) == b"1"
    lock.release()


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
    lock = Lock(master.client(), "aof", sync=ReplicaSync(timeout=5))
    assert lock.acquire(wait=0)
    assert replica.client().exists("aof") == 1
    lock.release()


# -- the learned state, no server --------------------------------------------


def learned(**info: str) -> Learned:
    """A state learned just now (no refresh due)."""
    state = Learned()
    state.learn(dict(info), now=time.monotonic())
    return state


def test_info_raises_expected_and_nothing_lowers_it() -> None:
    state = learned(connected_slaves="1")
    assert state.learned and state.expected == 1
    state.learn({"connected_slaves": "2"}, now=200.0)
    assert state.expected == 2
    # A paused (or cut off) master says 0 until it is demoted: not believed.
    state.learn({"connected_slaves": "0"}, now=300.0)
    assert state.expected == 2
    assert state.sync_commands(ReplicaSync()) == [["WAIT", 2, 1000]]


def test_an_explicit_count_overrides_what_was_learned() -> None:
    state = learned(connected_slaves="3")
    assert state.sync_commands(ReplicaSync(replicas=1, timeout=0.25)) == [["WAIT", 1, 250]]
    assert state.sync_commands(ReplicaSync(replicas=0)) == []
    assert learned(connected_slaves="0").sync_commands(ReplicaSync(replicas=2)) == [["WAIT", 2, 1000]]
    assert state.sync_commands(ReplicaSync(enabled=False)) == []


def test_aof_auto_required_off() -> None:
    aof = learned(connected_slaves="0", aof_enabled="1")
    plain = learned(connected_slaves="0", aof_enabled="0")
    waitaof = ["WAITAOF", 1, 0, 1000]
    assert aof.sync_commands(ReplicaSync()) == [waitaof]
    assert aof.sync_commands(ReplicaSync(aof=True)) == [waitaof], "True is AUTO"
    assert plain.sync_commands(ReplicaSync()) == []
    assert plain.sync_commands(ReplicaSync(aof=REQUIRED)) == [waitaof]
    assert aof.sync_commands(ReplicaSync(aof=OFF)) == []
    assert aof.sync_commands(ReplicaSync(aof=False)) == []
    # The AOF turned off is believed (a configuration change, not a failure).
    aof.learn({"connected_slaves": "0", "aof_enabled": "0"}, now=200.0)
    assert aof.sync_commands(ReplicaSync()) == []
    # A server without WAITAOF (before 7.2): AUTO stops sending it.
    aof.learn({"aof_enabled": "1"}, now=300.0)
    aof.no_waitaof()
    assert aof.sync_commands(ReplicaSync()) == []
    assert aof.sync_commands(ReplicaSync(aof=REQUIRED)) == [waitaof]


def test_the_refresh_is_due_every_five_seconds_to_one_acquisition() -> None:
    state = Learned()
    assert not state.refresh_due(0.0), "never learned: the first INFO is a round trip of its own"
    state.learn({}, now=10.0)
    assert not state.refresh_due(10.0 + REFRESH_INTERVAL - 0.1)
    assert state.refresh_due(10.0 + REFRESH_INTERVAL)
    assert not state.refresh_due(10.0 + REFRESH_INTERVAL), "one acquisition carries it"
    assert state.refresh_due(10.0 + 2 * REFRESH_INTERVAL)


def test_bad_policies_are_refused() -> None:
    for bad in (dict(replicas=-1), dict(replicas="some"), dict(replicas=True), dict(aof="always")):
        with pytest.raises(ValueError):
            ReplicaSync(**bad)  # type: ignore[arg-type]
    assert ReplicaSync().replicas == AUTO and ReplicaSync().aof == AUTO


class NoServer:
    """A client object no command is sent to (plans only)."""


def pipeline(lock: Any, state: Learned, resent: bool = False) -> List[Any]:
    """The names of the commands an acquisition of `lock` pipelines."""
    request = lock._request(0, 10.0)
    attempt = lock._attempt(request, resend=True)
    return [c[0] for c in acquire_batch(attempt, request.block_ms, attempt.request, state, resent).commands]


def test_what_each_state_puts_in_the_acquisitions_pipeline() -> None:
    client = NoServer()
    lock = Lock(client, "plan")
    none = learned(connected_slaves="0")
    assert pipeline(lock, none) == ["LOCK.ACQUIRE"]
    assert pipeline(lock, learned(connected_slaves="2")) == ["LOCK.ACQUIRE", "WAIT"]
    assert pipeline(lock, learned(connected_slaves="1", aof_enabled="1")) == ["LOCK.ACQUIRE", "WAIT", "WAITAOF"]
    # After a lost reply's resend: nothing more (no latch: the server's
    # replay writes a no-op of its own, so WAIT counts the first grant).
    assert pipeline(lock, learned(connected_slaves="1"), resent=True) == ["LOCK.ACQUIRE", "WAIT"]
    # The periodic INFO, when due, rides at the end (learned 0 s ago: not yet).
    stale = Learned()
    stale.learn({"connected_slaves": "1"}, now=time.monotonic() - REFRESH_INTERVAL)
    assert pipeline(lock, stale) == ["LOCK.ACQUIRE", "WAIT", "INFO"]
    assert pipeline(lock, stale) == ["LOCK.ACQUIRE", "WAIT"]
    # Explicit count and AOF off: no INFO ever (nothing to learn).
    fixed = Lock(client, "plan", sync=ReplicaSync(replicas=1, aof=OFF))
    assert pipeline(fixed, stale) == ["LOCK.ACQUIRE", "WAIT"]
    assert not fixed.sync.learns
    # Every kind goes the same way.
    rw = ReadWriteLock(client, "plan-rw").write_lock()
    assert pipeline(rw, learned(connected_slaves="1")) == ["RWLOCK.WRITE", "WAIT"]
    assert pipeline(FairLock(client, "plan-f"), learned(connected_slaves="1")) == ["FAIRLOCK.ACQUIRE", "WAIT"]
    multi = MultiLock(client, [("LOCK", "{p}:a"), ("WRITE", "{p}:b")])
    assert pipeline(multi, learned(connected_slaves="1")) == ["LOCK.ACQUIREALL", "WAIT"]


# -- real servers -----------------------------------------------------------------


def calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command.lower()}")
    return int(stats["calls"]) if stats else 0


def test_a_replica_gone_fails_the_acquisition_until_told_otherwise(start_server: Callable[..., Server]) -> None:
    """The paused-master bug in miniature: the master says
    connected_slaves:0 once its replica left, and is not believed."""
    master, replica = pair(start_server)
    client = master.client()
    # A generous timeout while the replica is there (a busy machine), a
    # short one once it is gone: both locks share what the client learned.
    synced = Lock(client, "detached", sync=ReplicaSync(timeout=5))
    assert synced.acquire(wait=0, lease=10)
    assert replica.client().exists("detached") == 1, "on the replica when acquire returned"
    synced.release()
    lock = Lock(client, "detached", sync=ReplicaSync(timeout=0.3))
    replica.client().execute_command("REPLICAOF", "NO", "ONE")
    wait_until("the master to see no replica", lambda: client.info("replication")["connected_slaves"] == 0)
    with pytest.raises(NotSynced, match="WAIT 1 300 replied 0"):
        lock.acquire(wait=0, lease=10)
    assert client.exists("detached") == 0, "released on the master"
    assert not lock.held
    # Another lock object of the same client object knows it too.
    with pytest.raises(NotSynced):
        ReadWriteLock(client, "detached-rw", sync=ReplicaSync(timeout=0.3)).write_lock().acquire(wait=0)
    assert client.exists("detached-rw") == 0

    async def run() -> None:
        aclient = master.async_client()
        alock = aio.Lock(aclient, "detached", sync=ReplicaSync(timeout=0.3))
        # A new client object learns afresh (0 replicas)...
        assert await alock.acquire(wait=0, lease=10)
        await alock.release()
        # ... and keeps its high-water mark the same way.
        # Outside a cluster a client object keeps one state for every master.
        masters_of(aclient).of("").learn({"connected_slaves": "1"}, time.monotonic())
        with pytest.raises(NotSynced):
            await alock.acquire(wait=0, lease=10)
        assert await aclient.exists("detached") == 0
        await aclient.aclose()

    asyncio.run(run())
    # Told there are none: no wait.
    told = Lock(client, "detached", sync=ReplicaSync(replicas=0))
    assert told.acquire(wait=0, lease=10)
    told.release()


def test_noreplicas_is_not_synced_and_writes_nothing(start_server: Callable[..., Server]) -> None:
    master = start_server("--min-replicas-to-write", "1", "--min-replicas-max-lag", "10")
    client = master.client()
    for lock in (Lock(client, "noreplicas"), FairLock(client, "noreplicas")):
        with pytest.raises(NotSynced, match="NOREPLICAS"):
            lock.acquire(wait=0, lease=10)
        assert not lock.held
    assert client.keys("*") == [], "nothing written: no hold, no latch"

    async def run() -> None:
        aclient = master.async_client()
        with pytest.raises(NotSynced, match="NOREPLICAS"):
            await aio.Lock(aclient, "noreplicas").acquire(wait=0)
        await aclient.aclose()

    asyncio.run(run())
    assert client.keys("*") == []


@pytest.fixture
def counting(server: Server) -> Iterator[CountingProxy]:
    proxy = CountingProxy(server.port)
    yield proxy
    proxy.close()


CYCLES = 20


def cycle_of(kind: str, client: redis.Redis) -> Tuple[Callable[[], bool], Callable[[], None]]:
    """An uncontended acquisition and release of a lock, or of a
    semaphore's one permit."""
    if kind == "semaphore":
        sem = Semaphore(client, "cycle")
        assert sem.try_set_permits(1)
        return lambda: sem.acquire(wait=0), sem.release
    lock = Lock(client, "cycle")
    return lambda: lock.acquire(wait=0, lease=10), lock.release


@pytest.mark.parametrize("kind", ["lock", "semaphore"])
def test_an_uncontended_cycle_is_two_round_trips(server: Server, counting: CountingProxy, kind: str) -> None:
    """No replica, no AOF: after the first cycle (the connection's hello,
    the master's first INFO), each acquire+release is two round trips (the
    acquisition; the release, a lock's alone, a semaphore's with its
    latches' DEL), counted by a proxy that sees when the client writes
    after a reply."""
    direct = server.client()
    client = redis.Redis(host="127.0.0.1", port=counting.port, socket_timeout=10)
    acquire, release = cycle_of(kind, client)
    started = time.monotonic()  # before the master's first INFO
    assert acquire()
    release()
    dels = calls(direct, "del")
    turns, infos = counting.turns, calls(direct, "info")
    for _ in range(CYCLES):
        assert acquire()
        release()
    elapsed = time.monotonic() - started
    # The test's own INFO commandstats (the one reading `infos`) counts 1.
    sent_infos = calls(direct, "info") - infos - 1
    assert counting.turns - turns == 2 * CYCLES
    # The periodic INFO rides in an acquisition's pipeline, at most one per
    # 5 s (none if the loop took less); it is no round trip of its own.
    assert sent_infos <= elapsed // REFRESH_INTERVAL
    if kind == "lock":
        assert calls(direct, "del") == dels, "a lock's release is one command"
        assert direct.keys("*") == [], "no latch"
    else:
        assert calls(direct, "del") - dels == CYCLES, "one DEL per release, in its pipeline"
        # Each release's DEL took the previous release's latch: the last one's is left.
        assert len(direct.keys("redisson_*")) == 1 and len(direct.keys("redisson_unlock_latch:*")) == 1
    client.close()


def test_an_asyncio_cycle_is_two_round_trips(server: Server, counting: CountingProxy) -> None:
    async def run() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis(host="127.0.0.1", port=counting.port, socket_timeout=10)
        lock = aio.Lock(client, "acycle")
        assert await lock.acquire(wait=0, lease=10)
        await lock.release()
        turns = counting.turns
        for _ in range(CYCLES):
            assert await lock.acquire(wait=0, lease=10)
            await lock.release()
        assert counting.turns - turns == 2 * CYCLES
        await client.aclose()

    asyncio.run(run())
    assert server.client().keys("*") == [], "no latch"

"""Through `redis.cluster.RedisCluster` (and its asyncio twin): every
command goes to the master owning the lock's slot."""

from __future__ import annotations

import asyncio
import time
from typing import List

import redis.asyncio.cluster
from redis.cluster import RedisCluster

import rwlock_client.asyncio as aio
from conftest import Server
from rwlock_client import CountDownLatch, Lock, MultiLock, ReadWriteLock, Semaphore

NAMES = [f"orders:{i}" for i in range(12)]


def cluster_client(nodes: List[Server], **options: object) -> RedisCluster:
    return RedisCluster(host="127.0.0.1", port=nodes[0].port, **options)  # type: ignore[arg-type]


def owning_node(rc: RedisCluster, nodes: List[Server], name: str) -> Server:
    port = rc.get_node_from_key(name).port
    return next(node for node in nodes if node.port == port)


def test_locks_on_every_master(cluster_nodes: List[Server]) -> None:
    rc = cluster_client(cluster_nodes, socket_timeout=0.5)
    slots = {rc.keyslot(n) for n in NAMES}
    assert len({s * 3 // 16384 for s in slots}) == 3, "the names cover all three masters"
    locks = [Lock(rc, n, fenced=True) for n in NAMES]
    for lock in locks:
        assert lock.acquire(wait=0)
        assert lock.token is not None
    for lock in locks:
        node = owning_node(rc, cluster_nodes, lock.name)
        info = node.client().execute_command("LOCK.INFO", lock.name)
        assert info[1][0][1].decode() == lock.owner()
        assert Lock(rc, lock.name, client_id="rival").acquire(wait=0) is False
        lock.release()
    assert rc.exists(*NAMES[:1]) == 0 and all(rc.exists(n) == 0 for n in NAMES)


def test_read_write_lock_waiting_past_the_socket_timeout(cluster_nodes: List[Server]) -> None:
    rc = cluster_client(cluster_nodes, socket_timeout=0.5)
    rw = ReadWriteLock(rc, "{shop}:stock")
    rival = ReadWriteLock(rc, "{shop}:stock", client_id="rival")
    assert rw.write_lock().acquire(wait=0, lease=1.5)
    started = time.monotonic()
    assert rival.read_lock().acquire(wait=5.0)  # BLOCK, served when the lease ends
    # Past the socket timeout, and at the lease's end, well before the wait's (a loaded
    # machine's margins both sides).
    assert 0.9 < time.monotonic() - started < 4.0
    rival.read_lock().release()


def test_watchdog_through_the_cluster_client(cluster_nodes: List[Server]) -> None:
    rc = cluster_client(cluster_nodes)
    # A 1 s lease renewed every third: a loaded machine may hold a renewal up a few hundred
    # ms (a 0.6 s lease, renewed every 0.2 s, left it too little room).
    lock = Lock(rc, "cluster-long-task", watchdog_timeout=1.0)
    with lock:
        time.sleep(2.5)
        assert not lock.lost
        assert 0 < rc.pttl("cluster-long-task") <= 1000


def test_semaphores_and_latches_on_every_master(cluster_nodes: List[Server]) -> None:
    """Each name's commands, and its latches' DEL, go to the master owning
    its slot: after two cycles only the last release's latch is left,
    beside the count, on that master."""
    rc = cluster_client(cluster_nodes, socket_timeout=0.5)
    for name in NAMES:
        sem = Semaphore(rc, f"sem:{name}")
        assert sem.try_set_permits(1)
        for _ in range(2):
            assert sem.acquire(wait=0) and sem.available_permits() == 0
            sem.release()
        node = owning_node(rc, cluster_nodes, sem.name).client()
        assert node.get(sem.name) == b"1"
        assert len(node.keys(f"redisson_*{{{sem.name}}}*")) == 1, "one latch left"
        assert len(node.keys(f"redisson_unlock_latch:{{{sem.name}}}:*")) == 1, "the last release's"
        latch = CountDownLatch(rc, f"latch:{name}")
        assert latch.try_set_count(1) and latch.count() == 1
        latch.count_down()
        assert latch.wait(timeout=0)
        assert owning_node(rc, cluster_nodes, latch.name).client().exists(latch.name) == 0


def test_asyncio_cluster_client(cluster_nodes: List[Server]) -> None:
    async def run() -> None:
        rc = redis.asyncio.cluster.RedisCluster(
            host="127.0.0.1", port=cluster_nodes[0].port, socket_timeout=0.5
        )
        try:
            locks = [aio.Lock(rc, n) for n in NAMES]
            for lock in locks:
                assert await lock.acquire(wait=0)
            rival = aio.Lock(rc, NAMES[0], client_id="rival")
            assert await rival.acquire(wait=0) is False
            for lock in locks:
                await lock.release()
            assert await rc.exists(*NAMES) == 0
        finally:
            await rc.aclose()

    asyncio.run(run())


def test_multilock_with_hash_tagged_names(cluster_nodes: List[Server]) -> None:
    rc = cluster_client(cluster_nodes)
    names = ["{acct}:1", "{acct}:2", "{acct}:3"]
    both = MultiLock(rc, [Lock(rc, names[0]), ("WRITE", names[1]), ("READ", names[2])])
    assert both.acquire(wait=0)
    node = owning_node(rc, cluster_nodes, names[0])
    assert node.client().exists(*names) == 3
    assert Lock(rc, names[0], client_id="rival").acquire(wait=0) is False
    both.release()
    assert node.client().exists(*names) == 0


def serving_ports(nodes: List[Server], slot: int) -> List[int]:
    """Each node's own view of the port of the master serving `slot`."""
    ports: List[int] = []
    for node in nodes:
        ranges = node.client().execute_command("CLUSTER", "SLOTS")
        ports.extend(int(r[2][1]) for r in ranges if int(r[0]) <= slot <= int(r[1]))
    return ports


def move_slot(nodes: List[Server], slot: int, to: Server) -> None:
    """Hands `slot` (empty: no fenced lock, whose token key stays) to `to`
    as a reshard does: IMPORTING on `to` and MIGRATING on the owner first,
    so that `to`'s SETSLOT NODE raises its config epoch above every other
    node's. A bare SETSLOT NODE on each node in turn can lose a race on a
    busy machine: gossip from a node not yet told still claims the slot
    with a higher epoch and takes it back. Returns once every node says
    `to` serves it."""
    views = serving_ports(nodes, slot)
    if all(port == to.port for port in views):
        return
    source = next(n for n, port in zip(nodes, views) if port == n.port)
    to_id = to.client().execute_command("CLUSTER", "MYID")
    source_id = source.client().execute_command("CLUSTER", "MYID")
    to.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", to_id)
    for node in [to, source] + [n for n in nodes if n is not to and n is not source]:
        node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", to_id)
    deadline = time.monotonic() + 30
    while not all(port == to.port for port in views):
        assert time.monotonic() < deadline, f"the nodes still disagree on slot {slot}: {views}"
        time.sleep(0.05)
        views = serving_ports(nodes, slot)


def test_a_resharded_slot_is_followed(cluster_nodes: List[Server]) -> None:
    rc = cluster_client(cluster_nodes)
    name = "resharded"
    slot = rc.keyslot(name)
    source = owning_node(rc, cluster_nodes, name)
    target = next(n for n in cluster_nodes if n is not source)
    move_slot(cluster_nodes, slot, target)
    try:
        # The client's slot map still names the old master: it answers MOVED.
        assert rc.get_node_from_key(name).port == source.port
        lock = Lock(rc, name)
        assert lock.acquire(wait=0)
        assert target.client().hexists(name, lock.owner())
        lock.release()
        assert rc.get_node_from_key(name).port == target.port

        async def run() -> None:
            arc = redis.asyncio.cluster.RedisCluster(host="127.0.0.1", port=cluster_nodes[0].port)
            await arc.initialize()
            node = arc.get_node_from_key(name)
            assert node is not None and node.port == target.port
            # The release left nothing (no latch), so the slot can move back.
            assert target.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
            move_slot(cluster_nodes, slot, source)  # and back
            alock = aio.Lock(arc, name)
            assert await alock.acquire(wait=0)
            assert source.client().hexists(name, alock.owner())
            await alock.release()
            await arc.aclose()

        asyncio.run(run())
        assert source.client().exists(name) == 0
    finally:
        move_slot(cluster_nodes, slot, source)

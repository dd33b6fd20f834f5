"""`RedLock` over five independent masters: a majority is enough, a
minority is refused and leaves nothing held."""

from __future__ import annotations

import asyncio
import time
from typing import Callable, List

import pytest

import rwlock_client.asyncio as aio
from conftest import Server
from rwlock_client import NotHeld, RedLock
from rwlock_client.redlock import drift, quorum


def five(start_server: Callable[..., Server]) -> List[Server]:
    return [start_server() for _ in range(5)]


def held_on(nodes: List[Server], name: str) -> int:
    return sum(n.client().exists(name) for n in nodes if n.process is not None)


def test_quorum_and_drift() -> None:
    assert [quorum(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert drift(10.0) == pytest.approx(0.102)


def test_all_five_up(start_server: Callable[..., Server]) -> None:
    nodes = five(start_server)
    red = RedLock([n.client() for n in nodes], "red")
    began = time.monotonic()
    validity = red.acquire(lease=10)
    # The lease less the drift and the time the attempt took, however long a loaded machine
    # made it (a fixed 0.2 s was too little for five round trips there).
    least = 10 - drift(10) - (time.monotonic() - began)
    assert validity is not None and least <= validity <= 10 - drift(10), (validity, least)
    assert held_on(nodes, "red") == 5
    rival = RedLock([n.client() for n in nodes], "red")
    assert rival.acquire(wait=0.3) is None
    assert held_on(nodes, "red") == 5, "the rival left the holder's locks alone"
    assert red.release() == 5
    assert held_on(nodes, "red") == 0


def test_two_stopped_acquires_three_stopped_refuses(start_server: Callable[..., Server]) -> None:
    nodes = five(start_server)
    clients = [n.client(socket_connect_timeout=0.2) for n in nodes]
    red = RedLock(clients, "red")
    nodes[0].stop()
    nodes[1].stop()
    validity = red.acquire(lease=5)
    assert validity is not None and 0 < validity < 5
    assert held_on(nodes, "red") == 3
    assert red.release() == 3
    assert held_on(nodes, "red") == 0

    nodes[2].stop()
    started = time.monotonic()
    assert red.acquire(wait=0.5, lease=5) is None
    # Refused at the end of its 0.5 s wait (a stopped node refuses connections at once), not
    # after retries past it; 4 s leave a loaded machine room.
    assert time.monotonic() - started < 4.0
    assert held_on(nodes, "red") == 0, "a refused RedLock leaves nothing held"
    with pytest.raises(NotHeld):
        red.release()


def test_a_node_held_by_another_owner_counts_against_the_majority(
    start_server: Callable[..., Server],
) -> None:
    nodes = five(start_server)
    for n in nodes[:3]:
        assert n.client().execute_command("LOCK.ACQUIRE", "red", "java:1", 30000) is None
    red = RedLock([n.client() for n in nodes], "red")
    assert red.acquire(wait=0) is None
    assert held_on(nodes, "red") == 3  # only the other owner's holds remain
    assert nodes[3].client().exists("red") == 0


def test_asyncio_redlock(start_server: Callable[..., Server]) -> None:
    nodes = five(start_server)
    nodes[0].stop()
    nodes[1].stop()

    async def run() -> None:
        clients = [n.async_client(socket_connect_timeout=0.2) for n in nodes]
        red = aio.RedLock(clients, "ared")
        validity = await red.acquire(lease=5)
        assert validity is not None and 0 < validity < 5
        assert held_on(nodes, "ared") == 3
        assert await red.release() == 3
        nodes[2].stop()
        assert await red.acquire(wait=0.3, lease=5) is None
        assert held_on(nodes, "ared") == 0

    asyncio.run(run())

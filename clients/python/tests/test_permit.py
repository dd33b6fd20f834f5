"""`PermitExpirableSemaphore` (Redisson's RPermitExpirableSemaphore, sync
and asyncio): ids with their own leases, a waiter served by another
connection's release and by a crashed holder's expiry with no other call,
the watchdog renewing a lease-less permit until its release (and reporting
one found gone), a lost acquisition reply answered the same ids once, and
a cancelled wait leaving nothing on the server."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any, Awaitable, Callable, List, Optional, Tuple

import pytest
import redis

import rwlock_client.asyncio as aio
from conftest import Counters, Server, no_watchdog_thread, wait_until
from faultproxy import DropReplyProxy
from rwlock_client import NEVER, Client, NotAcquired, NotHeld, NotSynced, PermitExpirableSemaphore, ReplicaSync
from test_asyncio import run
from test_held import calls, latches
from test_semaphore import SOCKET_TIMEOUT, behind_proxy, cancel_a_wait, contend, waiters

ID = re.compile(r"[0-9a-f]{32}")


def held_ids(client: redis.Redis, name: str) -> List[str]:
    """The ids in the semaphore's `{name}:timeout` zset (16 bytes each,
    as Redisson 4.7 stores them; their hex is the id)."""
    members: List[bytes] = client.execute_command("ZRANGE", "{%s}:timeout" % name, 0, -1)
    return sorted(i.hex() for i in members)


def test_the_commands_and_their_replies(server: Server) -> None:
    client = server.client()
    sem = PermitExpirableSemaphore(client, "p:cmds")
    assert sem.available_permits() == 0 and sem.acquire(wait=0, lease=10) is None
    assert sem.try_set_permits(3) is True and sem.try_set_permits(5) is False
    first = sem.acquire(wait=0, lease=10)
    assert first is not None and ID.fullmatch(first)
    pair = sem.acquire_many(2, wait=0, lease=NEVER)
    assert pair is not None and len(pair) == 2 and first not in pair
    assert held_ids(client, "p:cmds") == sorted([first, *pair])
    assert (sem.available_permits(), sem.acquired_permits(), sem.permits()) == (0, 3, 3)
    left = sem.lease_left(first)
    assert left is not None and 7 < left <= 10
    assert sem.lease_left(pair[0]) is None, "never expires"
    assert sem.update_lease(first, 20) is True
    left = sem.lease_left(first)
    assert left is not None and 17 < left <= 20
    with pytest.raises(NotHeld):
        sem.release(first, "0" * 32)
    assert sem.acquired_permits() == 3, "all or none: nothing released"
    assert sem.release(*pair) == 2
    assert sem.try_release(first) is True and sem.try_release(first) is False
    assert sem.lease_left(first) == 0 and sem.update_lease(first, 5) is False
    sem.set_permits(5)
    assert sem.permits() == 5
    sem.add_permits(-2)
    assert sem.available_permits() == 3
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            sem.acquire_many(bad, wait=0)
    with pytest.raises(ValueError):
        sem.release()


def test_the_client_object_makes_one_with_its_settings(server: Server) -> None:
    redis_client = server.client()
    sync = ReplicaSync(timeout=2.0)

    def on_lost(sem: Any, ids: Tuple[str, ...]) -> None:
        raise AssertionError("no renewal runs here")

    sem = Client(redis_client, watchdog_timeout=9.0, sync=sync).permit_expirable_semaphore("p:client", on_lost=on_lost)
    assert isinstance(sem, PermitExpirableSemaphore)
    assert (sem.client, sem.name, sem.watchdog_timeout, sem.sync, sem.on_lost) == (
        redis_client,
        "p:client",
        9.0,
        sync,
        on_lost,
    )


def test_hold_gives_the_ids_back(server: Server) -> None:
    sem = PermitExpirableSemaphore(server.client(), "p:hold")
    sem.try_set_permits(2)
    with sem.hold_many(2, wait=1, lease=NEVER) as ids:
        assert len(ids) == 2 and sem.available_permits() == 0
        with pytest.raises(NotAcquired):
            with sem.hold(wait=0.2, lease=NEVER):
                pass
    with sem.hold(lease=5) as permit_id:
        assert ID.fullmatch(permit_id) and sem.available_permits() == 1
    assert sem.available_permits() == 2 and sem.acquired_permits() == 0


def test_a_waiter_is_served_by_another_connections_release(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    counters = Counters(client)
    sem = PermitExpirableSemaphore(client, "p:served")
    sem.try_set_permits(1)
    holder = sem.acquire(wait=0, lease=NEVER)
    other = server.client()
    threading.Timer(1.2, lambda: other.execute_command("PERMIT.RELEASE", "p:served", holder)).start()
    started = time.monotonic()
    permit_id = sem.acquire(wait=10, lease=NEVER)
    took = time.monotonic() - started
    # Past the socket timeout twice over, served at the release, well before the wait's end.
    assert permit_id is not None and 1.0 < took < 8.0, took
    assert counters["waits_started"] == 1 and counters["waits_served"] == 1, "one parked call"
    assert held_ids(client, "p:served") == [permit_id]
    sem.release(permit_id)


def test_no_more_holders_than_permits_under_contention(server: Server) -> None:
    """Five workers (threads, two redis clients, a semaphore object each)
    take one or two of three permits with watchdog leases and release
    their ids, 20 times each."""
    clients = [server.client(), server.client()]
    PermitExpirableSemaphore(clients[0], "p:guard").try_set_permits(3)
    semaphores = [PermitExpirableSemaphore(clients[i % 2], "p:guard") for i in range(5)]
    contend(3, lambda index, n: semaphores[index].hold_many(n, wait=60))
    assert semaphores[0].available_permits() == 3 and semaphores[0].acquired_permits() == 0
    for c in clients:
        c.close()


def test_a_crashed_holders_permit_serves_a_waiter_at_its_expiry(server: Server) -> None:
    """A holder that never releases (a raw acquisition with a 1 s lease):
    the server returns its permit at the expiry and serves the waiter,
    with no other call on the semaphore."""
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    sem = PermitExpirableSemaphore(client, "p:expiry")
    sem.try_set_permits(1)
    (crashed,) = client.execute_command("PERMIT.ACQUIRE", "p:expiry", 1, 1000)
    client.config_resetstat()
    started = time.monotonic()
    permit_id = sem.acquire(wait=10, lease=5)
    took = time.monotonic() - started
    assert permit_id is not None and permit_id != crashed.decode()
    assert 0.5 < took < 8.0, took
    stats = client.info("commandstats")
    assert [k for k in stats if k.startswith("cmdstat_permit.")] == ["cmdstat_permit.acquire"]
    assert calls(client, "permit.acquire") == 1, "one parked call, served by the expiry"
    assert held_ids(client, "p:expiry") == [permit_id]
    sem.release(permit_id)


def test_the_watchdog_keeps_a_lease_less_permit_and_stops_at_release(server: Server) -> None:
    client = server.client()
    sem = PermitExpirableSemaphore(client, "p:dog", watchdog_timeout=1.0)
    sem.try_set_permits(2)
    client.config_resetstat()
    ids = sem.acquire_many(2, wait=0)
    assert ids is not None
    # Past the 1 s lease twice over: only the renewals keep the permits.
    time.sleep(2.5)
    for permit_id in ids:
        left = sem.lease_left(permit_id)
        assert left is not None and 0 < left <= 1.0
    assert sem.acquired_permits() == 2
    assert calls(client, "permit.updatelease") >= 4, "both ids renewed, at least twice"
    assert sem.release(*ids) == 2
    wait_until("the watchdog thread to end", no_watchdog_thread)
    renewed = calls(client, "permit.updatelease")
    time.sleep(1.0)
    assert calls(client, "permit.updatelease") == renewed, "no renewal after the release"
    assert latches(client, "redisson_lock_request_latch:*") == [], "the release's DEL took the latch"


def test_a_renewal_that_finds_the_permit_gone_reports_it_lost(server: Server) -> None:
    client = server.client()
    reported: List[Tuple[Any, Tuple[str, ...]]] = []
    sem = PermitExpirableSemaphore(
        client, "p:lost", watchdog_timeout=1.0, on_lost=lambda s, ids: reported.append((s, ids))
    )
    sem.try_set_permits(1)
    permit_id = sem.acquire(wait=0)
    assert permit_id is not None and not sem.lost(permit_id)
    assert client.execute_command("PERMIT.RELEASE", "p:lost", permit_id) == 1, "released elsewhere"
    wait_until("the watchdog to find the permit gone", lambda: sem.lost(permit_id))
    assert reported == [(sem, (permit_id,))]
    with pytest.raises(NotHeld):
        sem.release(permit_id)
    assert not sem.lost(permit_id), "forgotten at its release"
    wait_until("the watchdog thread to end", no_watchdog_thread)


def test_a_lost_acquisition_reply_gives_the_same_ids_once(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    direct, proxy, client = behind_proxy(server, proxies, b"PERMIT.ACQUIRE")
    sem = PermitExpirableSemaphore(client, "p:lostreply")
    assert sem.try_set_permits(3)
    ids = sem.acquire_many(2, wait=0, lease=NEVER)
    assert ids is not None
    (swallowed,) = proxy.swallowed
    assert swallowed.startswith(b"*2\r\n") and all(i.encode() in swallowed for i in ids), "the same ids"
    assert calls(direct, "permit.acquire") == 2, "sent twice"
    assert held_ids(direct, "p:lostreply") == sorted(ids), "two permits taken, once"
    (latch,) = latches(direct, "redisson_lock_request_latch:*")
    assert latch.startswith(b"redisson_lock_request_latch:{p:lostreply}:")
    assert sem.release(*ids) == 2 and sem.available_permits() == 3
    assert latches(direct, "redisson_lock_request_latch:*") == [], "the release's DEL took it"
    client.close()


def test_a_resend_whose_reply_is_lost_too_gives_the_permits_back(
    server: Server, proxies: Callable[..., DropReplyProxy]
) -> None:
    """Both replies lost: the acquisition looks once more by its request
    id (answered the ids from the latch), releases them, and raises."""
    direct, proxy, client = behind_proxy(server, proxies, b"PERMIT.ACQUIRE", times=2)
    sem = PermitExpirableSemaphore(client, "p:lost2")
    assert sem.try_set_permits(2)
    with pytest.raises(redis.ConnectionError):
        sem.acquire_many(2, wait=0, lease=NEVER)
    assert len(proxy.swallowed) == 2 and proxy.swallowed[0] == proxy.swallowed[1][: len(proxy.swallowed[0])]
    assert calls(direct, "permit.acquire") == 3, "the first send, the resend, the look"
    assert calls(direct, "permit.release") == 1, "the ids given back"
    assert sem.available_permits() == 2 and sem.acquired_permits() == 0
    client.close()


def test_an_acquisition_the_replicas_did_not_acknowledge_gives_the_ids_back(server: Server) -> None:
    sem = PermitExpirableSemaphore(
        server.client(), "p:unsynced", sync=ReplicaSync(replicas=1, timeout=0.1)
    )
    assert sem.try_set_permits(2)
    with pytest.raises(NotSynced):
        sem.acquire_many(2, wait=0, lease=NEVER)
    assert sem.available_permits() == 2 and sem.acquired_permits() == 0


async def acquired(call: Awaitable[Optional[List[str]]]) -> bool:
    """What `cancel_a_wait` awaits: whether ids came."""
    return await call is not None


def test_a_cancelled_wait_leaves_nothing(server: Server) -> None:
    """asyncio: cancelling the waiting task closes its connection and the
    server drops the waiter (`LOCK.WAITING` empty); permits added after
    stay free."""
    direct = server.client()
    cancel_a_wait(
        server,
        direct,
        lambda client: acquired(aio.PermitExpirableSemaphore(client, "p:cancel").acquire_many(1, lease=NEVER)),
    )
    direct.execute_command("PERMIT.ADDPERMITS", "p:cancel", 1)
    assert waiters(direct) == 0
    assert direct.execute_command("PERMIT.AVAILABLE", "p:cancel") == 1, "the cancelled wait took nothing"


def test_a_grant_on_its_way_when_the_wait_is_cancelled_is_given_back(server: Server) -> None:
    """The permits that serve the waiter and the cancel come in one turn of
    the event loop: the grant's reply is never read. The cancelled
    acquisition looks itself up by its request id and releases the ids."""
    direct = server.client()
    direct.config_resetstat()
    cancel_a_wait(
        server,
        direct,
        lambda client: acquired(aio.PermitExpirableSemaphore(client, "p:inflight").acquire_many(2, lease=NEVER)),
        serve=lambda: direct.execute_command("PERMIT.ADDPERMITS", "p:inflight", 2),
    )
    assert direct.execute_command("PERMIT.AVAILABLE", "p:inflight") == 2, "the grant nobody read was given back"
    assert direct.execute_command("PERMIT.ACQUIRED", "p:inflight") == 0
    assert calls(direct, "permit.release") == 1, "the give-back"


def test_asyncio_permit_semaphore(server: Server) -> None:
    direct = server.client()

    async def test(client: Any) -> None:
        sem = aio.PermitExpirableSemaphore(client, "p:async", watchdog_timeout=1.0)
        assert await sem.try_set_permits(1)
        # The hold's own release finds its id released by another connection.
        with pytest.raises(NotHeld):
            async with sem.hold(wait=0, lease=NEVER) as permit_id:
                assert await sem.available_permits() == 0
                asyncio.get_running_loop().call_later(
                    1.0, lambda: direct.execute_command("PERMIT.RELEASE", "p:async", permit_id)
                )
                # Past the socket timeout, served by another connection's release.
                other = await sem.acquire(wait=10, lease=NEVER)
                assert other is not None and other != permit_id
                assert await sem.release(other) == 1
        assert await sem.available_permits() == 1

    run(server, test, socket_timeout=SOCKET_TIMEOUT)

    async def watched(client: Any) -> None:
        sem = aio.Client(client, watchdog_timeout=1.0).permit_expirable_semaphore("p:async")
        assert isinstance(sem, aio.PermitExpirableSemaphore) and sem.watchdog_timeout == 1.0
        direct.config_resetstat()
        ids = await sem.acquire_many(1, wait=0)
        assert ids is not None
        # Past the 1 s lease twice over: the renewals on the event loop keep it.
        await asyncio.sleep(2.5)
        left = await sem.lease_left(ids[0])
        assert left is not None and 0 < left <= 1.0
        assert calls(direct, "permit.updatelease") >= 2
        assert await sem.release(*ids) == 1
        renewed = calls(direct, "permit.updatelease")
        await asyncio.sleep(1.0)
        assert calls(direct, "permit.updatelease") == renewed, "no renewal after the release"

    run(server, watched, socket_timeout=SOCKET_TIMEOUT)

"""`Semaphore` and `CountDownLatch` (Redisson's RSemaphore and
RCountDownLatch, sync and asyncio): waits on the server served by other
connections, no more holders than permits under contention, a wait that
times out or is cancelled leaves nothing on the server, a lost reply takes
permits once, and a latch wakes every waiter at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, Callable, ContextManager, List, Tuple

import pytest
import redis

import rwlock_client.asyncio as aio
from conftest import Counters, Server, wait_until
from faultproxy import DropReplyProxy
from rwlock_client import Client, CountDownLatch, NotAcquired, NotSynced, ReplicaSync, Semaphore
from test_asyncio import run
from test_held import calls, latches

SOCKET_TIMEOUT = 0.5


def waiters(client: redis.Redis) -> int:
    """How many clients wait on the server (`LOCK.WAITING`), any kind."""
    total = 0
    for entry in client.execute_command("LOCK.WAITING"):
        fields = dict(zip(entry[::2], entry[1::2]))
        total += int(fields[b"waiters"])
    return total


def cancel_a_wait(
    server: Server,
    direct: redis.Redis,
    wait: Callable[[Any], Awaitable[bool]],
    serve: Callable[[], Any] = lambda: None,
) -> None:
    """Starts `wait(asyncio client)` in a task, cancels the task once the
    server shows it waiting, and waits for the server to drop the waiter
    (the cancelled read closed its connection). `serve` runs just before
    the cancel, in the same turn of the event loop: what it makes the
    server reply to the waiter is never read."""

    async def main() -> None:
        client = server.async_client()
        task = asyncio.ensure_future(wait(client))
        while waiters(direct) != 1:
            assert not task.done()
            await asyncio.sleep(0.02)
        serve()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.aclose()

    asyncio.run(main())
    wait_until("the cancelled waiter to leave", lambda: waiters(direct) == 0)


def behind_proxy(
    server: Server, proxies: Callable[..., DropReplyProxy], trigger: bytes, times: int = 1
) -> Tuple[redis.Redis, DropReplyProxy, redis.Redis]:
    """A connection to the server (its command counts reset), a proxy that
    loses the replies to the first `times` commands containing `trigger`,
    and a client going through it."""
    direct = server.client()
    direct.config_resetstat()
    proxy = proxies(trigger, times)
    return direct, proxy, redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)


# -- the semaphore --------------------------------------------------------------


def test_the_commands_and_their_replies(server: Server) -> None:
    client = server.client()
    sem = Client(client).semaphore("s:cmds")
    assert sem.available_permits() == 0
    assert sem.acquire(wait=0) is False
    assert sem.try_set_permits(3, ttl=60) is True
    assert sem.try_set_permits(5) is False
    assert 0 < client.pttl("s:cmds") <= 60_000, "the try-set's TTL"
    assert sem.acquire(2, wait=0) and sem.available_permits() == 1
    sem.release(2)
    sem.add_permits(-4)
    assert sem.available_permits() == -1
    assert sem.drain_permits() == -1
    sem.add_permits(2)
    assert sem.drain_permits() == 2 and sem.available_permits() == 0
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            sem.acquire(bad, wait=0)
        with pytest.raises(ValueError):
            sem.release(bad)


def test_hold_and_with_give_the_permits_back(server: Server) -> None:
    client = server.client()
    sem = Semaphore(client, "s:hold")
    sem.try_set_permits(2)
    with sem.hold(2, wait=1):
        assert sem.available_permits() == 0
        with pytest.raises(NotAcquired):
            with sem.hold(wait=0.2):
                pass
    with sem:
        assert sem.available_permits() == 1
    assert sem.available_permits() == 2


def test_a_wait_past_the_socket_timeout_is_served_by_another_connections_release(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    counters = Counters(client)
    sem = Semaphore(client, "s:served")
    other = server.client()
    threading.Timer(1.2, lambda: other.execute_command("SEMAPHORE.RELEASE", "s:served", 3)).start()
    started = time.monotonic()
    assert sem.acquire(3, wait=10)
    took = time.monotonic() - started
    # Past the socket timeout twice over, served at the release, well before the wait's end.
    assert 1.0 < took < 8.0, took
    assert counters["waits_started"] == 1 and counters["waits_served"] == 1, "one parked call"
    assert sem.available_permits() == 0
    sem.release(3)


def contend(permits: int, hold: Callable[[int, int], ContextManager[Any]], workers: int = 5, rounds: int = 20) -> None:
    """Worker threads `hold(index, n)` one or two of `permits` and give them
    back, `rounds` times each; a guard counter of permits held never
    exceeds `permits`, and the workers did overlap."""
    guard = threading.Lock()
    held = [0]
    most = [0]
    violations = [0]
    failures: List[BaseException] = []

    def work(index: int) -> None:
        n = 1 + index % 2
        try:
            for _ in range(rounds):
                with hold(index, n):
                    with guard:
                        held[0] += n
                        most[0] = max(most[0], held[0])
                        if held[0] > permits:
                            violations[0] += 1
                    time.sleep(0.002)  # stay inside a moment, for the others to contend
                    with guard:
                        held[0] -= n
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    assert not any(t.is_alive() for t in threads)
    assert violations[0] == 0, f"{violations[0]} times more than {permits} permits held"
    assert most[0] >= 2, "the workers did overlap"


def test_no_more_holders_than_permits_under_contention(server: Server) -> None:
    """Five workers (threads, two redis clients, a semaphore object each)
    take one or two of three permits and give them back, 20 times each."""
    clients = [server.client(), server.client()]
    Semaphore(clients[0], "s:guard").try_set_permits(3)
    semaphores = [Semaphore(clients[i % 2], "s:guard") for i in range(5)]
    contend(3, lambda index, n: semaphores[index].hold(n, wait=60))
    assert Semaphore(clients[0], "s:guard").available_permits() == 3
    for c in clients:
        c.close()


def test_a_wait_that_runs_out_leaves_nothing(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    counters = Counters(client)
    sem = Semaphore(client, "s:timeout")
    sem.try_set_permits(1)
    assert sem.acquire(2, wait=1.0) is False
    assert counters["waits_timed_out"] == 1
    assert waiters(client) == 0, "no waiter left on the server"
    assert sem.available_permits() == 1, "nothing taken"
    assert latches(client, "redisson_lock_request_latch:*") == [], "a refusal stores no latch"


def test_a_cancelled_wait_leaves_nothing(server: Server) -> None:
    """asyncio: cancelling the waiting task closes its connection; the
    server drops the waiter, and a release afterwards stays free."""
    direct = server.client()
    cancel_a_wait(server, direct, lambda client: aio.Semaphore(client, "s:cancel").acquire(wait=None))
    direct.execute_command("SEMAPHORE.RELEASE", "s:cancel", 1)
    assert direct.get("s:cancel") == b"1", "the cancelled wait took nothing"


def test_a_grant_on_its_way_when_the_wait_is_cancelled_is_given_back(server: Server) -> None:
    """The release that serves the waiter (a synchronous call: the event
    loop waits for it) and the cancel come in one turn of the loop: the
    grant's reply is never read. Permits have no lease, so the cancelled
    acquisition looks itself up by its request id and releases them."""
    direct = server.client()
    direct.config_resetstat()
    cancel_a_wait(
        server,
        direct,
        lambda client: aio.Semaphore(client, "s:inflight").acquire(2),
        serve=lambda: direct.execute_command("SEMAPHORE.RELEASE", "s:inflight", 2),
    )
    assert direct.get("s:inflight") == b"2", "the grant nobody read was given back"
    assert calls(direct, "semaphore.release") == 2, "the serving release and the give-back"


@pytest.mark.parametrize("wait", [0, 5])
def test_a_lost_acquisition_reply_takes_the_permits_once(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], wait: float
) -> None:
    """A try, and a wait served by another connection's release: the reply
    lost, the resend (the wait's with what is left of it) is answered from
    the latch."""
    direct, proxy, client = behind_proxy(server, proxies, b"SEMAPHORE.ACQUIRE")
    sem = Semaphore(client, "s:lost")
    if wait:
        threading.Timer(0.3, lambda: server.client().execute_command("SEMAPHORE.RELEASE", "s:lost", 3)).start()
    else:
        assert sem.try_set_permits(3)
    assert sem.acquire(2, wait=wait)
    assert proxy.swallowed == [b":1\r\n"], "taken, then the reply lost"
    assert calls(direct, "semaphore.acquire") == 2, "sent twice"
    assert calls(direct, "pexpire") == 1, "the resend's write, for the replica check"
    assert direct.get("s:lost") == b"1", "two permits taken, once"
    (latch,) = latches(direct, "redisson_lock_request_latch:*")
    assert latch.startswith(b"redisson_lock_request_latch:{s:lost}:")
    sem.release(2)
    assert direct.get("s:lost") == b"3"
    assert latches(direct, "redisson_lock_request_latch:*") == [], "the release's DEL took it"
    client.close()


def test_a_resend_whose_reply_is_lost_too_gives_the_permits_back(
    server: Server, proxies: Callable[..., DropReplyProxy]
) -> None:
    """Both replies lost, the first send's and its resend's: the permits
    were taken, and have no lease. The acquisition looks once more by its
    request id (answered 1 from the latch), releases them, and raises."""
    direct, proxy, client = behind_proxy(server, proxies, b"SEMAPHORE.ACQUIRE", times=2)
    sem = Semaphore(client, "s:lost2")
    assert sem.try_set_permits(2)
    with pytest.raises(redis.ConnectionError):
        sem.acquire(2, wait=0)
    # The resend's reply (from the latch) comes first in its pipeline's, before its PEXPIRE's.
    assert len(proxy.swallowed) == 2 and all(r.startswith(b":1\r\n") for r in proxy.swallowed), proxy.swallowed
    assert calls(direct, "semaphore.acquire") == 3, "the first send, the resend, the look"
    assert direct.get("s:lost2") == b"2", "given back"
    client.close()


def test_a_lost_release_reply_gives_the_permits_back_once(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    direct, proxy, client = behind_proxy(server, proxies, b"SEMAPHORE.RELEASE")
    sem = Semaphore(client, "s:lostrel")
    sem.try_set_permits(2)
    assert sem.acquire(2, wait=0)
    sem.release(2)
    assert len(proxy.swallowed) == 1, "the first reply was lost"
    assert calls(direct, "semaphore.release") == 2, "sent twice"
    assert direct.get("s:lostrel") == b"2", "given back once"
    (latch,) = latches(direct, "redisson_*")
    assert latch.startswith(b"redisson_unlock_latch:{s:lostrel}:"), "the release's own latch, for its resend"
    client.close()


def test_an_acquisition_the_replicas_did_not_acknowledge_gives_the_permits_back(server: Server) -> None:
    """A replica asked for and none there: `WAIT 1` replies 0, the permits
    are released again and `NotSynced` raised."""
    client = server.client()
    sem = Semaphore(client, "s:unsynced", sync=ReplicaSync(replicas=1, timeout=0.1))
    assert sem.try_set_permits(2)
    with pytest.raises(NotSynced):
        sem.acquire(2, wait=0)
    assert sem.available_permits() == 2


def test_asyncio_semaphore(server: Server) -> None:
    direct = server.client()

    async def test(client: Any) -> None:
        sem = aio.Client(client).semaphore("s:async")
        assert await sem.try_set_permits(1)
        async with sem.hold(wait=0):
            assert await sem.available_permits() == 0
            asyncio.get_running_loop().call_later(
                1.0, lambda: direct.execute_command("SEMAPHORE.RELEASE", "s:async", 1)
            )
            # Past the socket timeout, served by another connection's release.
            assert await sem.acquire(wait=10)
            await sem.release()
        async with sem:
            assert await sem.available_permits() == 1
        await sem.add_permits(1)
        assert await sem.drain_permits() == 3

    run(server, test, socket_timeout=SOCKET_TIMEOUT)


# -- the count-down latch ----------------------------------------------------------


def test_the_latch_commands(server: Server) -> None:
    client = server.client()
    latch = Client(client).count_down_latch("l:cmds")
    assert latch.count() == 0 and latch.wait(0) is True
    assert latch.try_set_count(2) and not latch.try_set_count(3)
    assert latch.wait(0) is False
    latch.count_down()
    assert latch.count() == 1
    latch.count_down()
    assert latch.count() == 0 and client.exists("l:cmds") == 0
    assert latch.try_set_count(1) and latch.delete() and not latch.delete()
    with pytest.raises(ValueError):
        latch.try_set_count(-1)


def test_a_latch_wakes_every_waiter_at_once(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    latch = CountDownLatch(client, "l:many")
    assert latch.try_set_count(2)
    results: List[Any] = []

    def wait() -> None:
        results.append(CountDownLatch(client, "l:many").wait(timeout=60))

    threads = [threading.Thread(target=wait) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until("four waiters on the server", lambda: waiters(client) == 4)
    latch.count_down()
    assert waiters(client) == 4, "one count-down left: still waiting"
    latch.count_down()
    for t in threads:
        t.join(30)
    assert results == [True] * 4
    assert waiters(client) == 0


def test_a_latch_wait_that_runs_out_or_is_cancelled_leaves_nothing(server: Server) -> None:
    direct = server.client(socket_timeout=SOCKET_TIMEOUT)
    latch = CountDownLatch(direct, "l:gone")
    latch.try_set_count(1)
    started = time.monotonic()
    assert latch.wait(timeout=1.0) is False
    assert time.monotonic() - started >= 0.99
    assert waiters(direct) == 0
    cancel_a_wait(server, direct, lambda client: aio.CountDownLatch(client, "l:gone").wait())
    assert latch.count() == 1


def test_a_lost_count_down_reply_is_raised_not_resent(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    direct, proxy, client = behind_proxy(server, proxies, b"LATCH.COUNTDOWN")
    latch = CountDownLatch(client, "l:lost")
    assert latch.try_set_count(3)
    with pytest.raises(redis.ConnectionError):
        latch.count_down()
    assert calls(direct, "latch.countdown") == 1, "sent once"
    assert direct.get("l:lost") == b"2", "counted down once"
    client.close()


def test_asyncio_latch(server: Server) -> None:
    direct = server.client()

    async def test(client: Any) -> None:
        latch = aio.Client(client).count_down_latch("l:async")
        assert await latch.try_set_count(1)
        assert await latch.count() == 1
        asyncio.get_running_loop().call_later(1.0, lambda: direct.execute_command("LATCH.COUNTDOWN", "l:async"))
        # Past the socket timeout, served by another connection's count-down.
        assert await latch.wait(timeout=10)
        assert await latch.count() == 0 and not await latch.delete()

    run(server, test, socket_timeout=SOCKET_TIMEOUT)

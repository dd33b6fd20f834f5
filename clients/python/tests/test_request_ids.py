"""Request ids on acquisitions (issue 26): every single-lock acquisition
sends `REQUEST <fresh id> <ttl>`, and a reply lost in flight (a real fault:
`faultproxy.DropReplyProxy` forwards the command, reads its reply and closes
the connection instead of delivering it) is resent once on a new connection
with the same id: the server answers from its latch, so the hold is counted
once, with the first grant's fencing token."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import rwlock_client._core as _core
import rwlock_client.asyncio as aio
from conftest import Server
from faultproxy import DropReplyProxy
from rwlock_client import FairLock, Lock, MultiLock, NotHeld, ReadWriteLock
from rwlock_client.lock import LockBase

#: Each kind: the command its acquisition sends, how to make it, and the
#: hash field its owner's count is in.
Make = Callable[[redis.Redis, str], LockBase]
KINDS: Dict[str, Tuple[bytes, Make, str]] = {
    "plain": (b"LOCK.ACQUIRE", lambda c, n: Lock(c, n), "{owner}"),
    "fenced": (b"LOCK.ACQUIRE", lambda c, n: Lock(c, n, fenced=True), "{owner}"),
    "nonreentrant": (b"LOCK.ACQUIRE", lambda c, n: Lock(c, n, reentrant=False), "{owner}"),
    "read": (b"RWLOCK.READ", lambda c, n: ReadWriteLock(c, n).read_lock(), "{owner}"),
    "write": (b"RWLOCK.WRITE", lambda c, n: ReadWriteLock(c, n, fenced=True).write_lock(), "{owner}:write"),
    "fair": (b"FAIRLOCK.ACQUIRE", lambda c, n: FairLock(c, n), "{owner}"),
}


def calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command.lower()}")
    return int(stats["calls"]) if stats else 0


def latches(client: redis.Redis, pattern: str = "redisson_*latch:*") -> List[bytes]:
    return sorted(k if isinstance(k, bytes) else k.encode() for k in client.keys(pattern))


def kept_latch(client: redis.Redis, name: str) -> None:
    """After a handle's last release: the acquisitions' latches are gone
    and only the release's own latch is left (a resend of that release is
    answered from it), expiring within Redisson's 13.5 s unless the
    handle's next release deletes it."""
    (latch,) = latches(client)
    assert latch.startswith(b"redisson_unlock_latch:{%s}:" % name.encode()), latch
    assert 0 < client.pttl(latch) <= 13_500


def fenced_token(reply: bytes) -> int:
    """The token of a swallowed `[-1, token]` reply (RESP2 or RESP3)."""
    lines = reply.split(b"\r\n")
    assert lines[0] in (b"*2",) and lines[1] == b":-1", reply
    return int(lines[2][1:])


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_lost_reply_is_resent_with_its_id_and_holds_once(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], kind: str
) -> None:
    direct = server.client()
    direct.config_resetstat()
    command, make, field = KINDS[kind]
    proxy = proxies(command)
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    name = f"req:{kind}"
    lock = make(client, name)
    assert lock.acquire(wait=0, lease=10)
    assert len(proxy.swallowed) == 1, "the first reply was lost"
    assert proxy.swallowed[0].startswith((b"$-1", b"_", b"*2")), proxy.swallowed[0]
    assert calls(direct, command.decode()) == 2, "sent twice"
    # One write on the new connection, for the replica check's WAIT to
    # cover the grant the first send wrote.
    assert calls(direct, "pexpire") == 1
    owner = lock.owner()
    assert direct.hget(name, field.format(owner=owner)) == b"1", "counted once"
    assert lock.held
    if kind in ("fenced", "write"):
        token = fenced_token(proxy.swallowed[0])
        assert lock.token == token, "the replay's token is the grant's"
        assert int(direct.get("redisson_lock_token:{%s}" % name) or 0) == token, "no second token"
    assert len(latches(direct, "redisson_lock_request_latch:*")) == 1
    lock.release()
    assert direct.exists(name) == 0, "one release frees it: it was held once"
    kept_latch(direct, name)  # the release's DEL took the acquisition's latch
    client.close()


@pytest.mark.parametrize("family", ["LOCK", "FAIRLOCK"])
def test_a_lost_reply_to_a_wait_is_resent_with_what_is_left_of_it(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], family: str
) -> None:
    direct = server.client()
    direct.config_resetstat()
    name = f"req:wait:{family}"
    assert direct.execute_command(f"{family}.ACQUIRE", name, "holder:1", 10_000) is None
    proxy = proxies(f"{family}.ACQUIRE".encode())
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    waiter = Lock(client, name) if family == "LOCK" else FairLock(client, name)
    unlock = [f"{family}.UNLOCK", name, "holder:1"]
    threading.Timer(0.3, lambda: server.client().execute_command(*unlock)).start()
    started = time.monotonic()
    assert waiter.acquire(wait=5, lease=10)
    assert time.monotonic() - started < 4
    assert proxy.swallowed in ([b"$-1\r\n"], [b"_\r\n"]), "served (nil), then the reply lost"
    assert calls(direct, f"{family}.acquire") == 3, "the holder's, the wait, its resend"
    assert direct.hget(name, waiter.owner()) == b"1"
    waiter.release()
    assert direct.exists(name) == 0
    kept_latch(direct, name)
    client.close()


def test_a_session_acquisition_resends_with_a_new_id(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    """The lost reply's connection closed, and with it what the first send
    bound: a replay would answer granted and bind nothing."""
    direct = server.client()
    proxy = proxies(b"LOCK.ACQUIRE")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    lock = Lock(client, "req:session", session=True)
    assert lock.acquire(wait=0)
    assert len(proxy.swallowed) == 1
    info = direct.execute_command("LOCK.INFO", "req:session")
    holders = {h[1].decode(): (int(h[3]), int(h[5])) for h in info[1]}
    assert holders == {lock.owner(): (1, 1)}, "one hold, bound to the live connection"
    assert len(latches(direct, "redisson_lock_request_latch:*")) == 2, "two ids sent"
    lock.release()
    assert direct.exists("req:session") == 0
    client.close()


def test_asyncio_resends_a_lost_reply_with_its_id(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    direct = server.client()
    proxy = proxies(b"LOCK.ACQUIRE")

    async def run() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
        lock = aio.Lock(client, "req:async", fenced=True)
        assert await lock.acquire(wait=0, lease=10)
        assert len(proxy.swallowed) == 1
        assert lock.token == fenced_token(proxy.swallowed[0])
        assert direct.hget("req:async", lock.owner()) == b"1"
        await lock.release()
        assert direct.exists("req:async") == 0
        kept_latch(direct, "req:async")
        await client.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_acquisition_sends_a_request_id(server: Server, kind: str) -> None:
    """Without a fault: the grant's latch is there (REQUEST was sent), for
    13.5 s plus the wait, and goes with the release (whose own latch
    stays, for the next release)."""
    direct = server.client()
    _, make, _ = KINDS[kind]
    name = f"sent:{kind}"
    lock = make(direct, name)
    began = time.monotonic()
    assert lock.acquire(wait=5, lease=10)
    (latch,) = latches(direct)
    assert latch.startswith(b"redisson_lock_request_latch:{%s}:" % name.encode())
    # 13.5 s plus the 5 s wait, less the time gone by since (however long a loaded machine
    # took): above 13.5 s, so the wait was added.
    pttl = direct.pttl(latch)
    least = 18_500 - (time.monotonic() - began) * 1000 - 20
    assert 13_500 < pttl and least <= pttl <= 18_500, (pttl, least)
    lock.release()
    kept_latch(direct, name)


def test_a_multi_lock_sends_no_request_id(server: Server) -> None:
    direct = server.client()
    multi = MultiLock(direct, [("LOCK", "{m}:a"), ("WRITE", "{m}:b")])
    assert multi.acquire(wait=0)
    assert latches(direct) == [], "LOCK.ACQUIREALL takes no REQUEST"
    multi.release()


def test_a_refused_acquisition_leaves_no_latch(server: Server) -> None:
    direct = server.client()
    assert Lock(direct, "req:busy", client_id="holder").acquire(wait=0, lease=10)
    granted = latches(direct)
    assert len(granted) == 1
    assert Lock(direct, "req:busy").acquire(wait=0, lease=10) is False
    assert Lock(direct, "req:busy").acquire(wait=0.2, lease=10) is False
    assert latches(direct) == granted, "the refusals recorded nothing"


@pytest.mark.parametrize("reentered", [False, True])
def test_a_lost_release_reply_is_answered_from_its_latch(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], reentered: bool
) -> None:
    """A release's reply lost: its resend (same id) is answered from the
    latch the first send left, with what it replied: one hold released,
    not two. The last release's own latch was in no DEL of its pipeline."""
    direct = server.client()
    direct.config_resetstat()
    proxy = proxies(b"LOCK.UNLOCK")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    name = f"rel:lost:{reentered}"
    lock = Lock(client, name)
    for _ in range(2 if reentered else 1):
        assert lock.acquire(wait=0, lease=10)
    lock.release()
    assert len(proxy.swallowed) == 1, "the first reply was lost"
    assert proxy.swallowed[0].startswith(b":0" if reentered else b":1"), proxy.swallowed[0]
    assert calls(direct, "lock.unlock") == 2, "sent twice"
    if reentered:
        assert direct.hget(name, lock.owner()) == b"1", "one hold released, not both"
        assert lock.held
        lock.release()
    assert direct.exists(name) == 0 and not lock.held
    kept_latch(direct, name)


def test_a_lost_release_reply_of_a_hold_gone_before_is_not_held(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    """The hold was gone before its release (here its key deleted, as a
    failover or a lease run out would): the first send replied "not held"
    and its reply was lost; the resend is answered "not held" from that
    send's latch, and is `NotHeld`, never taken for "the first send
    released it"."""
    direct = server.client()
    direct.config_resetstat()
    proxy = proxies(b"LOCK.UNLOCK")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    lock = Lock(client, "rel:gone")
    assert lock.acquire(wait=0, lease=10)
    assert direct.delete("rel:gone") == 1
    with pytest.raises(NotHeld):
        lock.release()
    assert proxy.swallowed[0].startswith((b"$-1", b"_")), proxy.swallowed
    assert calls(direct, "lock.unlock") == 2, "sent twice"
    assert not lock.held
    # "Not held" wrote nothing (no latch either); the DEL took the acquisition's.
    assert latches(direct) == []


def test_asyncio_a_lost_release_reply_of_a_hold_gone_before_is_not_held(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    direct = server.client()
    direct.config_resetstat()
    proxy = proxies(b"LOCK.UNLOCK")

    async def run() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
        lock = aio.Lock(client, "rel:agone")
        assert await lock.acquire(wait=0, lease=10)
        assert direct.delete("rel:agone") == 1
        with pytest.raises(NotHeld):
            await lock.release()
        assert proxy.swallowed[0].startswith((b"$-1", b"_")), proxy.swallowed
        assert calls(direct, "lock.unlock") == 2, "sent twice"
        assert not lock.held
        await client.aclose()

    asyncio.run(run())
    assert latches(direct) == []


@pytest.mark.parametrize("kind", ["lock", "semaphore"])
def test_asyncio_a_reply_that_never_comes_is_lost_not_granted(
    start_server: Callable[..., Server], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """redis.asyncio's read with a timeout of its own replies None when the
    timeout runs out, as a nil reply (a lock's grant) reads: a server that
    answers neither a wait within its reply timeout nor the resend's
    connection makes the acquisition raise `TimeoutError`, never return
    taken."""
    monkeypatch.setattr(_core, "REPLY_MARGIN", 0.3)
    paused = start_server()

    async def run() -> None:
        client = paused.async_client(socket_timeout=1, retry=Retry(NoBackoff(), 0))
        taker: Any = aio.Lock(client, "silent") if kind == "lock" else aio.Semaphore(client, "silent")
        if kind == "semaphore":
            assert await taker.try_set_permits(1)
        # Once, for the client object to learn the master (its INFO) while it answers.
        assert await taker.acquire(wait=0)
        await taker.release()
        paused.pause()
        try:
            with pytest.raises(redis.TimeoutError):
                await taker.acquire(wait=0.2)
        finally:
            paused.resume()
        await client.aclose()

    asyncio.run(run())

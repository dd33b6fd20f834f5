"""`HELD n` on a single lock's acquisitions and releases (issue 35): each
carries the owner's count of that kind of hold before it, counted per
client object, instead of a request id, and writes no latch. A reply lost
in flight (a real fault: `faultproxy.DropReplyProxy` forwards the command,
reads its reply and closes the connection instead of delivering it) is
resent once on a new connection with the same `HELD`: the server tells
from the owner's count that the first send was done and replies as to it,
so a hold is counted once and a re-entered one is released once. A last
release's resend that finds nothing is `ReleaseUnknown`."""

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
from conftest import Server, wait_until
from faultproxy import DropReplyProxy
from rwlock_client import FairLock, Lock, LockError, MultiLock, NotHeld, ReadWriteLock, ReleaseUnknown
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

#: A packed command's `HELD 1` (the proxies' trigger for the second of an
#: owner's acquisitions; a last release sends no `HELD`).
HELD_1 = b"$4\r\nHELD\r\n$1\r\n1\r\n"


def calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats").get(f"cmdstat_{command.lower()}")
    return int(stats["calls"]) if stats else 0


def latches(client: redis.Redis, pattern: str = "redisson_*latch:*") -> List[bytes]:
    return sorted(k if isinstance(k, bytes) else k.encode() for k in client.keys(pattern))


def fenced_token(reply: bytes) -> int:
    """The token of a swallowed `[-1, token]` reply (RESP2 or RESP3)."""
    lines = reply.split(b"\r\n")
    assert lines[0] in (b"*2",) and lines[1] == b":-1", reply
    return int(lines[2][1:])


def monitored(server: Server, action: Callable[[], None]) -> List[str]:
    """The commands the server ran while `action` ran, as MONITOR shows
    them (`"NAME arg arg"`), whoever sent them, but the periodic `INFO`
    (one every 5 s rides in an acquisition's pipeline, however slow the
    machine is) and a new connection's handshake (redis-py's `HELLO`,
    `CLIENT SETINFO`)."""
    marker = server.client()
    assert marker.ping()  # connected before MONITOR starts: its hello is not seen
    with server.client().monitor() as seen:
        action()
        marker.execute_command("ECHO", "monitored:end")
        commands: List[str] = []
        while True:
            command = seen.next_command()["command"]
            if command == "ECHO monitored:end":
                return commands
            if not command.startswith(("INFO ", "HELLO ", "CLIENT SETINFO ")):
                commands.append(command)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_lost_reply_is_resent_with_its_held_and_holds_once(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], kind: str
) -> None:
    direct = server.client()
    direct.config_resetstat()
    command, make, field = KINDS[kind]
    proxy = proxies(command)
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    name = f"held:{kind}"
    lock = make(client, name)
    assert lock.acquire(wait=0, lease=10)
    assert len(proxy.swallowed) == 1, "the first reply was lost"
    assert proxy.swallowed[0].startswith((b"$-1", b"_", b"*2")), proxy.swallowed[0]
    assert calls(direct, command.decode()) == 2, "sent twice"
    # The server's replay writes a no-op of its own for the WAIT behind it.
    assert calls(direct, "pexpire") == 0
    owner = lock.owner()
    assert direct.hget(name, field.format(owner=owner)) == b"1", "counted once"
    assert lock.held
    if kind in ("fenced", "write"):
        token = fenced_token(proxy.swallowed[0])
        assert lock.token == token, "the replay's token is the grant's"
        assert int(direct.get("redisson_lock_token:{%s}" % name) or 0) == token, "no second token"
    assert latches(direct) == [], "HELD writes no latch"
    lock.release()
    assert direct.exists(name) == 0, "one release frees it: it was held once"
    assert latches(direct) == []
    client.close()


@pytest.mark.parametrize("kind", ["plain", "read", "write", "fair"])
def test_a_lost_reply_to_a_re_entry_is_resent_and_counts_once(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], kind: str
) -> None:
    """The second acquisition (`HELD 1`) loses its reply: the resend finds
    the count at 2 and replies granted, taking nothing more."""
    direct = server.client()
    direct.config_resetstat()
    command, make, field = KINDS[kind]
    proxy = proxies(HELD_1)
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    name = f"held:again:{kind}"
    lock = make(client, name)
    assert lock.acquire(wait=0, lease=10) and lock.acquire(wait=0, lease=10)
    assert len(proxy.swallowed) == 1, "the re-entry's reply was lost"
    assert calls(direct, command.decode()) == 3, "the first, the re-entry, its resend"
    assert direct.hget(name, field.format(owner=lock.owner())) == b"2", "the re-entry counted once"
    lock.release()
    assert direct.hget(name, field.format(owner=lock.owner())) == b"1"
    lock.release()
    assert direct.exists(name) == 0
    client.close()


@pytest.mark.parametrize("family", ["LOCK", "FAIRLOCK"])
def test_a_lost_reply_to_a_wait_is_resent_with_what_is_left_of_it(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], family: str
) -> None:
    direct = server.client()
    direct.config_resetstat()
    name = f"held:wait:{family}"
    assert direct.execute_command(f"{family}.ACQUIRE", name, "holder:1", 10_000) is None
    proxy = proxies(f"{family}.ACQUIRE".encode())
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    waiter = Lock(client, name) if family == "LOCK" else FairLock(client, name)
    unlock = [f"{family}.UNLOCK", name, "holder:1"]
    threading.Timer(0.3, lambda: server.client().execute_command(*unlock)).start()
    assert waiter.acquire(wait=5, lease=10)
    assert proxy.swallowed in ([b"$-1\r\n"], [b"_\r\n"]), "served (nil), then the reply lost"
    assert calls(direct, f"{family}.acquire") == 3, "the holder's, the wait, its resend"
    assert direct.hget(name, waiter.owner()) == b"1"
    waiter.release()
    assert direct.exists(name) == 0
    assert latches(direct) == []
    client.close()


def test_a_session_acquisition_is_resent_without_held(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    """The lost reply's connection closed, and the server gives back what
    the first send bound to it in its next turn: a `HELD` resend arriving
    before that would be answered granted and bind nothing. Sent plain, it
    takes a hold of its own on the live connection."""
    direct = server.client()
    proxy = proxies(b"LOCK.ACQUIRE")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    lock = Lock(client, "held:session", session=True)
    assert lock.acquire(wait=0)
    assert len(proxy.swallowed) == 1

    def holders() -> Dict[str, Tuple[int, int]]:
        info = direct.execute_command("LOCK.INFO", "held:session")
        return {h[1].decode(): (int(h[3]), int(h[5])) for h in info[1]}

    wait_until("the closed connection's hold given back", lambda: holders() == {lock.owner(): (1, 1)})
    assert latches(direct) == []
    lock.release()
    assert direct.exists("held:session") == 0
    client.close()


def test_asyncio_resends_a_lost_reply_with_its_held(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    direct = server.client()
    proxy = proxies(b"LOCK.ACQUIRE")

    async def run() -> None:
        import redis.asyncio

        client = redis.asyncio.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
        lock = aio.Lock(client, "held:async", fenced=True)
        assert await lock.acquire(wait=0, lease=10)
        assert len(proxy.swallowed) == 1
        assert lock.token == fenced_token(proxy.swallowed[0])
        assert direct.hget("held:async", lock.owner()) == b"1"
        await lock.release()
        assert direct.exists("held:async") == 0
        await client.aclose()

    asyncio.run(run())
    assert latches(direct) == []


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_acquisition_and_release_sends_held(server: Server, kind: str) -> None:
    """What the server sees of a re-entered cycle, once the client object
    knows the master: each command with the owner's count before it, and
    nothing else (no `DEL`, no latch, no `INFO`)."""
    direct = server.client()
    command, make, field = KINDS[kind]
    name = f"sent:{kind}"
    lock = make(direct, name)
    assert lock.acquire(wait=0, lease=10)
    lock.release()
    reentrant = kind != "nonreentrant"

    def cycle() -> None:
        assert lock.acquire(wait=0, lease=10)
        if reentrant:
            assert lock.acquire(wait=5, lease=10)
            lock.release()
        lock.release()

    seen = monitored(server, cycle)
    owner = lock.owner()
    acquire = [command.decode(), name, owner, "10000"]
    fenced = ["FENCED"] if kind in ("fenced", "write") else []
    release = {
        "read": ["RWLOCK.UNLOCK", name, owner, "READ"],
        "write": ["RWLOCK.UNLOCK", name, owner, "WRITE"],
        "fair": ["FAIRLOCK.UNLOCK", name, owner],
    }.get(kind, ["LOCK.UNLOCK", name, owner])
    if kind == "fair":
        first = acquire + ["NOQUEUE", "HELD", "0"]
        again = acquire + ["WAIT", "5000", "BLOCK", "5000", "HELD", "1"]
    else:
        first = acquire + fenced + ["HELD", "0"] + (["NOREENTRY"] if not reentrant else [])
        again = acquire + ["BLOCK", "5000"] + fenced + ["HELD", "1"]
    expected = [first]
    if reentrant:
        expected += [again, release + ["LEASE", "10000", "HELD", "2"]]
    # A last release sends no `HELD 1`: the server never answers it from the count.
    expected.append(release + ["LEASE", "10000"])
    assert [c.split(" ") for c in seen] == expected
    assert direct.exists(name) == 0 and latches(direct) == [], "no latch"


def test_one_uncontended_cycle_is_two_commands(server: Server) -> None:
    """The whole of a plain lock's cycle (default options: the watchdog's
    lease), as MONITOR shows it: one acquisition, one release."""
    direct = server.client()
    lock = Lock(direct, "cycle:monitored")
    assert lock.acquire()
    lock.release()

    def cycle() -> None:
        assert lock.acquire()
        lock.release()

    owner = lock.owner()
    assert monitored(server, cycle) == [
        f"LOCK.ACQUIRE cycle:monitored {owner} 30000 BLOCK 0 HELD 0",
        f"LOCK.UNLOCK cycle:monitored {owner} LEASE 30000",
    ]


def test_a_session_and_a_multi_lock_send_no_held(server: Server) -> None:
    direct = server.client()
    session = Lock(direct, "held:none:s", session=True)
    multi = MultiLock(direct, [("LOCK", "{m}:a"), ("WRITE", "{m}:b")])
    assert session.acquire(wait=0) and multi.acquire(wait=0)

    def cycle() -> None:
        assert session.acquire(wait=0)
        session.release()
        session.release()
        multi.release()

    seen = monitored(server, cycle)
    assert [c.split(" ")[0] for c in seen] == ["LOCK.ACQUIRE", "LOCK.UNLOCK", "LOCK.UNLOCK", "LOCK.UNLOCKALL"]
    assert not [c for c in seen if "HELD" in c.split(" ") or "REQUEST" in c.split(" ")], seen
    assert direct.keys("*") == []


def test_two_lock_objects_of_one_owner_count_together(server: Server) -> None:
    """One thread, one name, two lock objects of one client object: one
    owner, so the server counts their holds in one field, and so do they
    (their `HELD`)."""
    direct = server.client()
    a, b = Lock(direct, "held:shared"), Lock(direct, "held:shared")
    assert a.owner() == b.owner()

    def both() -> None:
        assert a.acquire(wait=0, lease=10) and b.acquire(wait=0, lease=10)

    seen = monitored(server, both)
    assert [c.split(" ")[-2:] for c in seen] == [["HELD", "0"], ["HELD", "1"]]
    assert direct.hget("held:shared", a.owner()) == b"2", "a re-entry"
    b.release()
    assert direct.hget("held:shared", a.owner()) == b"1", "still held"
    assert a.held
    a.release()
    assert direct.exists("held:shared") == 0


def test_two_lock_objects_count_together_across_a_lost_release_reply(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    """B's release (`HELD 2`: A's hold and B's) loses its reply: the resend
    finds 1 and replies done, releasing nothing more; A's hold stays."""
    direct = server.client()
    proxy = proxies(b"LOCK.UNLOCK")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    a, b = Lock(client, "held:shared:lost"), Lock(client, "held:shared:lost")
    assert a.acquire(wait=0, lease=10) and b.acquire(wait=0, lease=10)
    b.release()
    assert proxy.swallowed[0].startswith(b":0"), proxy.swallowed
    assert direct.hget("held:shared:lost", a.owner()) == b"1", "one hold released, not both"
    a.release()
    assert direct.exists("held:shared:lost") == 0
    client.close()


def test_asyncio_two_lock_objects_of_one_task_count_together(server: Server) -> None:
    direct = server.client()

    async def run() -> None:
        client = server.async_client()
        a, b = aio.Lock(client, "held:ashared"), aio.Lock(client, "held:ashared")
        assert await a.acquire(wait=0, lease=10) and await b.acquire(wait=0, lease=10)
        assert direct.hget("held:ashared", a.owner()) == b"2"
        await b.release()
        assert direct.hget("held:ashared", a.owner()) == b"1"
        await a.release()
        assert direct.exists("held:ashared") == 0
        await client.aclose()

    asyncio.run(run())


def test_a_refused_acquisition_writes_nothing(server: Server) -> None:
    direct = server.client()
    assert Lock(direct, "held:busy", client_id="holder").acquire(wait=0, lease=10)
    assert Lock(direct, "held:busy").acquire(wait=0, lease=10) is False
    assert Lock(direct, "held:busy").acquire(wait=0.2, lease=10) is False
    assert direct.keys("*") == [b"held:busy"], "the refusals recorded nothing"


@pytest.mark.parametrize("reentered", [False, True])
def test_a_lost_release_reply(
    server: Server, proxies: Callable[[bytes], DropReplyProxy], reentered: bool
) -> None:
    """A release's reply lost, its resend sent with the same `HELD`. A
    re-entered one's (`HELD 2`): the server finds 1 and replies 0 again,
    one hold released, not two. A last one's (no `HELD`): the first send
    freed the lock and the resend finds nothing, which it cannot tell from
    a hold gone before: `ReleaseUnknown`, the lock free, nothing held."""
    direct = server.client()
    direct.config_resetstat()
    proxy = proxies(b"LOCK.UNLOCK")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    name = f"rel:lost:{reentered}"
    lock = Lock(client, name)
    for _ in range(2 if reentered else 1):
        assert lock.acquire(wait=0, lease=10)
    if reentered:
        lock.release()
    else:
        with pytest.raises(ReleaseUnknown):
            lock.release()
    assert len(proxy.swallowed) == 1, "the first reply was lost"
    assert proxy.swallowed[0].startswith(b":0" if reentered else b":1"), proxy.swallowed[0]
    assert calls(direct, "lock.unlock") == 2, "sent twice"
    if reentered:
        assert direct.hget(name, lock.owner()) == b"1", "one hold released, not both"
        assert lock.held
        lock.release()
    assert direct.exists(name) == 0 and not lock.held
    # Nothing counted any more: the next cycle starts at HELD 0.
    assert lock.acquire(wait=0, lease=10)
    assert direct.hget(name, lock.owner()) == b"1"
    lock.release()
    assert direct.exists(name) == 0 and direct.keys("*") == []
    client.close()


def test_a_lost_release_reply_of_a_hold_gone_before_is_unknown(
    server: Server, proxies: Callable[[bytes], DropReplyProxy]
) -> None:
    """The hold was gone before its release (here its key deleted, as a
    failover or a lease run out would): the first send replied "not held"
    and its reply was lost; the resend finds nothing too, as it would had
    the first send released it: `ReleaseUnknown`, never "released", and
    not `NotHeld` either (that would claim it was gone before)."""
    direct = server.client()
    direct.config_resetstat()
    proxy = proxies(b"LOCK.UNLOCK")
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    lock = Lock(client, "rel:gone")
    assert lock.acquire(wait=0, lease=10)
    assert direct.delete("rel:gone") == 1
    with pytest.raises(ReleaseUnknown) as unknown:
        lock.release()
    assert not isinstance(unknown.value, NotHeld)
    assert "this release freed it or the hold was gone before it" in str(unknown.value)
    assert proxy.swallowed[0].startswith((b"$-1", b"_")), proxy.swallowed
    assert calls(direct, "lock.unlock") == 2, "sent twice"
    assert not lock.held
    assert direct.keys("*") == []


def test_asyncio_a_lost_release_reply_of_a_hold_gone_before_is_unknown(
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
        with pytest.raises(ReleaseUnknown):
            await lock.release()
        assert proxy.swallowed[0].startswith((b"$-1", b"_")), proxy.swallowed
        assert calls(direct, "lock.unlock") == 2, "sent twice"
        assert not lock.held
        await client.aclose()

    asyncio.run(run())
    assert direct.keys("*") == []


def test_an_acquisition_without_an_answer_leaves_the_count_unsure(
    server: Server, proxies: Callable[..., DropReplyProxy]
) -> None:
    """Both sends' replies lost: the first was granted, so the server
    counts one hold the client does not know of. A `HELD 0` now would be
    answered granted without taking anything or re-arming the lease: the
    owner's acquisitions send none, and are not resent, until a release
    finds none left."""
    direct = server.client()
    proxy = proxies(b"LOCK.ACQUIRE", 2)
    client = redis.Redis(host="127.0.0.1", port=proxy.port, socket_timeout=10)
    lock = Lock(client, "held:unsure")
    with pytest.raises(redis.ConnectionError):
        lock.acquire(wait=0, lease=10)
    assert len(proxy.swallowed) == 2 and not lock.held
    assert direct.hget("held:unsure", lock.owner()) == b"1", "granted, unknown to the client"

    def again() -> None:
        assert lock.acquire(wait=0, lease=60)

    assert [c.split(" ")[-1] for c in monitored(server, again)] == ["60000"], "no HELD"
    assert direct.hget("held:unsure", lock.owner()) == b"2"
    assert 10_000 < direct.pttl("held:unsure") <= 60_000, "the lease re-armed"
    lock.release()
    assert direct.hget("held:unsure", lock.owner()) == b"1", "the unknown hold, which its lease ends"
    assert direct.delete("held:unsure") == 1
    assert lock.acquire(wait=0, lease=10)
    lock.release()  # "released": none left, the count exact again
    assert [c.split(" ")[-2:] for c in monitored(server, again)] == [["HELD", "0"]]
    lock.release()
    assert direct.exists("held:unsure") == 0
    client.close()


def test_a_hold_found_lost_counts_0_again(server: Server) -> None:
    """The watchdog finds the hold gone: its count is 0 from then on, so
    the next acquisition is the first again (`HELD 0`) and one release
    frees it (a stale `HELD 2` would be answered as done, freeing
    nothing)."""
    direct = server.client()
    lock = Lock(direct, "held:lost", watchdog_timeout=0.6)
    assert lock.acquire(wait=0)
    assert direct.delete("held:lost") == 1
    wait_until("the watchdog finds it lost", lambda: lock.lost)

    def again() -> None:
        assert lock.acquire(wait=0, lease=10)

    seen = monitored(server, again)
    assert [c.split(" ")[-2:] for c in seen] == [["HELD", "0"]]
    lock.release()
    assert direct.exists("held:lost") == 0


def test_a_bad_held_is_the_servers_error(server: Server) -> None:
    """What the module says of a `HELD` out of range, as a client would
    see it (passed through, never a lock error)."""
    direct = server.client()
    with pytest.raises(redis.ResponseError, match="HELD must be an integer from 0 to 100000"):
        direct.execute_command("LOCK.ACQUIRE", "held:bad", "o:1", 10_000, "HELD", -1)
    with pytest.raises(redis.ResponseError, match="HELD must be an integer from 1 to 100000"):
        direct.execute_command("LOCK.UNLOCK", "held:bad", "o:1", "HELD", 0)


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


def test_counts_go_at_0_and_send_at_most_the_servers_ceiling() -> None:
    counts = _core.Counts()
    field = ("name", "owner:1")
    counts.add([field], 1)
    assert counts.held(field) == 1
    counts.add([field], -1)
    assert counts.held(field) == 0 and counts._by_field == {}, "nothing kept for what is not held"
    counts.add([field], -5)
    assert counts._by_field == {}, "never below 0"
    counts.add([field], _core.HELD_MAX + 5)
    assert counts.held(field) == _core.HELD_MAX
    counts.unsure([field])
    assert counts.acquiring(field) is None and counts.held(field) == _core.HELD_MAX
    counts.clear([field])
    assert counts._by_field == {} and counts.acquiring(field) == 0


def test_release_unknown_is_no_not_held() -> None:
    """The safety suite's drivers take an error they do not know for
    "maybe"; `NotHeld` would claim the hold was gone before the release."""
    assert not issubclass(ReleaseUnknown, NotHeld)
    assert issubclass(ReleaseUnknown, LockError)

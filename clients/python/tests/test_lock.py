"""`Lock`: exclusion, re-entry, owners, fencing tokens, the non-reentrant
lock, context managers and explicit acquire/release."""

from __future__ import annotations

import re
import threading
import time

import pytest
import redis

from conftest import Counters, Server
from rwlock_client import Lock, LockError, NotAcquired, NotHeld


def holders(client: redis.Redis, name: str) -> dict[str, int]:
    info = client.execute_command("LOCK.INFO", name)
    return {h[1].decode(): int(h[3]) for h in info[1]}


def test_owner_is_redissons_client_uuid_and_thread_id(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "owner-format")
    assert lock.acquire(wait=0)
    owner = lock.owner()
    assert re.fullmatch(r"[0-9a-f-]{36}:\d+", owner)
    assert owner.rsplit(":", 1)[1] == str(threading.get_ident())
    assert holders(client, "owner-format") == {owner: 1}
    # Two lock objects on one client in one thread are one owner (re-entry),
    # another client object is another owner, as in Redisson.
    assert Lock(client, "owner-format").owner() == owner
    assert Lock(server.client(), "owner-format").owner() != owner
    lock.release()


def test_mutual_exclusion_across_threads(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "counter-lock")
    client.set("counter", 0)

    def work() -> None:
        for _ in range(20):
            with lock.hold(wait=30):
                value = int(client.get("counter") or 0)
                time.sleep(0.001)
                client.set("counter", value + 1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert int(client.get("counter") or 0) == 80
    assert client.exists("counter-lock") == 0


def test_reentry_explicit_acquire_release_and_refusal(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "reentry")
    assert lock.acquire(wait=0) and lock.acquire(wait=0)
    assert holders(client, "reentry") == {lock.owner(): 2}
    other = Lock(client, "reentry", client_id="another-client")
    assert other.acquire(wait=0) is False
    with pytest.raises(NotAcquired) as refused:
        with other.hold(wait=0):
            pass
    assert 0 < (refused.value.pttl or 0) <= 30000
    lock.release()
    assert lock.held and client.exists("reentry") == 1
    lock.release()
    assert not lock.held and client.exists("reentry") == 0
    with pytest.raises(NotHeld):
        lock.release()


def test_with_statement_waits_and_releases(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "plain-with")
    began = time.monotonic()
    with lock:
        assert lock.held
        # The watchdog's 30 s lease, less the time gone by since (however long a loaded
        # machine took).
        assert client.pttl("plain-with") >= 30_000 - (time.monotonic() - began) * 1000 - 20
    assert client.exists("plain-with") == 0


def test_fenced_tokens_grow_with_every_acquisition(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "fenced", fenced=True)
    tokens = []
    for _ in range(3):
        with lock.hold(wait=1) as token:
            assert token is not None and lock.token == token
            tokens.append(token)
    assert tokens == [1, 2, 3]
    assert lock.acquire() and lock.acquire()  # a re-entry takes a token too
    assert lock.token == 5
    lock.release()
    lock.release()
    assert int(client.get("redisson_lock_token:{fenced}") or 0) == 5


def test_non_reentrant_lock_refuses_its_own_holder(server: Server) -> None:
    client = server.client()
    lock = Lock(client, "nonreentrant", reentrant=False)
    assert lock.acquire(wait=0)
    with pytest.raises(LockError, match="NON_REENTRANT"):
        lock.acquire(wait=0)
    assert holders(client, "nonreentrant") == {lock.owner(): 1}
    lock.release()
    assert client.exists("nonreentrant") == 0


def test_explicit_lease_runs_out_without_a_watchdog(server: Server) -> None:
    client = server.client()
    counters = Counters(client)
    lock = Lock(client, "leased")
    assert lock.acquire(wait=0, lease=0.3)
    assert 0 < client.pttl("leased") <= 300
    time.sleep(0.5)
    assert client.exists("leased") == 0
    assert counters["renewals"] == 0
    with pytest.raises(NotHeld):
        lock.release()

"""Waits happen on the server (`BLOCK`), not by polling, and a wait longer
than the connection's socket timeout still works."""

from __future__ import annotations

import threading
import time

from conftest import Counters, Server, wait_until
from rwlock_client import Lock, ReadWriteLock

SOCKET_TIMEOUT = 0.5


def test_a_wait_longer_than_the_socket_timeout_gets_the_lock(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    counters = Counters(client)
    holder = Lock(client, "long-wait", client_id="holder")
    waiter = Lock(client, "long-wait", client_id="waiter")
    assert holder.acquire(wait=0, lease=1.5)  # frees itself in 1.5 s
    started = time.monotonic()
    assert waiter.acquire(wait=5.0)
    took = time.monotonic() - started
    # Past the socket timeout twice over, and served at the lease's end, well before the
    # wait's: the margins are a loaded machine's (the hold's first moments pass before
    # `started`, the wake-up may come late).
    assert 1.0 < took < 4.0, took
    # One parked call, served: the client did not retry.
    assert counters["waits_started"] == 1
    assert counters["waits_served"] == 1
    assert counters["refused"] == 0
    waiter.release()


def test_a_wait_that_runs_out_past_the_socket_timeout_reports_false(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    counters = Counters(client)
    rw = ReadWriteLock(client, "held-on", client_id="holder")
    assert rw.write_lock().acquire(wait=0)
    other = ReadWriteLock(client, "held-on", client_id="waiter")
    started = time.monotonic()
    assert other.read_lock().acquire(wait=2.0) is False
    # Never before the wait is over; after it, by the time a loaded machine takes to
    # reply, not by another socket timeout's worth of retries.
    assert 1.9 < time.monotonic() - started < 4.0
    assert counters["waits_timed_out"] == 1
    assert counters["waits_started"] == 1
    rw.write_lock().release()


def test_the_waiter_is_parked_on_the_server_until_release(server: Server) -> None:
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    counters = Counters(client)
    holder = Lock(client, "handoff", client_id="holder")
    assert holder.acquire(wait=0)
    got = threading.Event()

    def wait_for_it() -> None:
        waiter = Lock(client, "handoff", client_id="waiter")
        if waiter.acquire():  # without limit: BLOCK 0
            got.set()
            waiter.release()

    t = threading.Thread(target=wait_for_it)
    t.start()
    wait_until("the waiter to park", lambda: counters["waiters"] == 1)
    time.sleep(1.0)  # twice the socket timeout
    assert not got.is_set() and counters["waiters"] == 1
    holder.release()
    t.join(10)
    assert got.is_set()
    assert counters["waits_started"] == 1


def test_long_waits_on_a_redis_py_without_a_read_timeout_argument(
    server: Server, monkeypatch: object
) -> None:
    """Before redis-py 8 a reply's read timeout is set on the socket."""
    import rwlock_client._link as link

    monkeypatch.setattr(link, "READ_TIMEOUT_ARGUMENT", False)  # type: ignore[attr-defined]
    client = server.client(socket_timeout=SOCKET_TIMEOUT)
    holder = Lock(client, "old-redis-py", client_id="holder")
    waiter = Lock(client, "old-redis-py", client_id="waiter")
    assert holder.acquire(wait=0, lease=1.2)
    started = time.monotonic()
    assert waiter.acquire(wait=2.0)
    assert 1.0 < time.monotonic() - started < 2.0
    waiter.release()
    # The pooled connection is back to the client's own socket timeout.
    conn = client.connection_pool.get_connection()
    try:
        sock = conn._sock
        assert sock is not None and sock.gettimeout() == SOCKET_TIMEOUT
    finally:
        client.connection_pool.release(conn)

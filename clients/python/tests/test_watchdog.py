"""The watchdog: a hold taken without a lease is renewed every lease/3,
stops at release, and reports a lost hold."""

from __future__ import annotations

import time
from typing import List

import pytest

from conftest import Counters, Server, no_watchdog_thread, wait_until
from rwlock_client import Lock, NotHeld, ReadWriteLock


def test_a_1s_lease_is_kept_for_3_5s(server: Server) -> None:
    client = server.client()
    counters = Counters(client)
    lock = Lock(client, "long-task", watchdog_timeout=1.0)
    rw = ReadWriteLock(client, "long-rw", watchdog_timeout=1.0)
    with lock, rw.read_lock():
        time.sleep(3.5)
        assert not lock.lost and not rw.read_lock().lost
        assert 0 < client.pttl("long-task") <= 1000
        assert 0 < client.pttl("long-rw") <= 1000
        assert Lock(client, "long-task", client_id="rival").acquire(wait=0) is False
    assert client.exists("long-task", "long-rw") == 0
    renewals = counters["renewals"]
    assert 12 <= renewals <= 24, renewals  # 2 locks x about 10 renewals (every 333 ms)
    time.sleep(0.5)
    assert counters["renewals"] == renewals, "the watchdogs stopped at release"
    # The scheduler's thread outlives its last hold by watchdog.LINGER.
    wait_until("the watchdog thread to end", no_watchdog_thread)


def test_losing_the_lock_is_detected(server: Server) -> None:
    client = server.client()
    counters = Counters(client)
    seen: List[str] = []
    lock = Lock(client, "forced", watchdog_timeout=0.6, on_lost=lambda l, owner: seen.append(owner))
    assert lock.acquire()
    client.execute_command("LOCK.FORCEUNLOCK", "forced")
    # The next renewal (0.2 s away, later on a loaded machine) finds it gone.
    wait_until("the loss to be seen", lambda: lock.lost, 10)
    assert lock.lost and not lock.held
    assert seen == [lock.owner()]
    assert counters["renewals_not_held"] == 1
    with pytest.raises(NotHeld):
        lock.release()
    assert not lock.lost  # forgotten after the release


def test_a_deleted_read_write_lock_is_detected(server: Server) -> None:
    client = server.client()
    rw = ReadWriteLock(client, "deleted", watchdog_timeout=0.6)
    assert rw.write_lock().acquire()
    client.delete("deleted")
    wait_until("the loss to be seen", lambda: rw.write_lock().lost, 10)
    with pytest.raises(NotHeld):
        rw.write_lock().release()

"""`ReadWriteLock`: shared reads, exclusive writes, re-entry, no upgrade,
a fenced write lock."""

from __future__ import annotations

import threading
import time

import pytest

from conftest import Server
from rwlock_client import NotAcquired, ReadWriteLock


def test_readers_share_writers_exclude(server: Server) -> None:
    client = server.client()
    mine = ReadWriteLock(client, "orders")
    theirs = ReadWriteLock(client, "orders", client_id="another-client")
    with mine.read_lock().hold(wait=0):
        with theirs.read_lock().hold(wait=0):
            assert theirs.write_lock().acquire(wait=0) is False
        assert theirs.write_lock().acquire(wait=0) is False
    with theirs.write_lock().hold(wait=0):
        assert mine.read_lock().acquire(wait=0) is False
        assert mine.write_lock().acquire(wait=0) is False
    assert client.exists("orders") == 0


def test_write_then_read_reentry_and_downgrade(server: Server) -> None:
    client = server.client()
    rw = ReadWriteLock(client, "reentry")
    with rw.write_lock():
        with rw.read_lock():
            with rw.write_lock():
                info = client.execute_command("RWLOCK.INFO", "reentry")
                owner = info[5][0]
                assert owner[1].decode() == rw.write_lock().owner()
                assert (owner[3], owner[5]) == (1, 2)
        rw.read_lock().acquire()
    # Releasing the write left a reader: the lock is in read mode.
    info = client.execute_command("RWLOCK.INFO", "reentry")
    assert info[1] == b"read"
    rw.read_lock().release()
    assert client.exists("reentry") == 0


def test_a_reader_cannot_upgrade(server: Server) -> None:
    rw = ReadWriteLock(server.client(), "upgrade")
    with rw.read_lock():
        with pytest.raises(NotAcquired):
            with rw.write_lock().hold(wait=0):
                pass


def test_writers_never_overlap_readers(server: Server) -> None:
    client = server.client()
    rw = ReadWriteLock(client, "rw-counter")
    inside = {"r": 0, "w": 0}
    overlaps = []
    guard = threading.Lock()

    def visit(kind: str, lock: object) -> None:
        for _ in range(15):
            with lock.hold(wait=30):  # type: ignore[attr-defined]
                with guard:
                    inside[kind] += 1
                    if inside["w"] > 1 or (inside["w"] and inside["r"]):
                        overlaps.append(dict(inside))
                time.sleep(0.001)
                with guard:
                    inside[kind] -= 1

    threads = [threading.Thread(target=visit, args=("w", rw.write_lock())) for _ in range(3)]
    threads += [threading.Thread(target=visit, args=("r", rw.read_lock())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert overlaps == []


def test_fenced_write_lock(server: Server) -> None:
    rw = ReadWriteLock(server.client(), "fenced-rw", fenced=True)
    with rw.write_lock().hold() as first:
        pass
    with rw.write_lock().hold() as second:
        pass
    assert first is not None and second == first + 1

"""What goes on the wire, without a server: request ids unique, in a
UUID's shape and fresh in a forked child; commands packed as redis-py
packs them."""

from __future__ import annotations

import os
from typing import List

from redis.connection import Connection

from rwlock_client import _core


def test_request_ids_are_unique_uuid_shaped_and_fresh_after_fork() -> None:
    ids = {_core.new_request_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    sample = next(iter(ids))
    assert [len(part) for part in sample.split("-")] == [8, 4, 4, 4, 12]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, _core.new_request_id().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    assert child[:24] != sample[:24], "a forked child draws its own prefix"


def test_commands_are_packed_as_redis_py_packs_them() -> None:
    conn = Connection()
    commands: List[_core.Args] = [
        ["LOCK.ACQUIRE", "invoice:42", "b5c1:7", 30000, "REQUEST", "id-1", 13500],
        ["WAIT", 1, 1000],
        ["DEL", "redisson_unlock_latch:{ünïcode}:x", ""],
    ]
    assert _core.pack(commands, "utf-8", "strict") == b"".join(conn.pack_commands(commands))

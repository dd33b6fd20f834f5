"""Owners in Redisson's format, `<client UUID>:<thread id>`: the UUID is one
per redis client object (as Redisson has one per `RedissonClient`), so two
threads, two processes, or a Python thread and a Java thread never share an
owner, while one thread re-enters its own holds through any lock object on
the same client."""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
import weakref
from typing import Any, Optional

_ids: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
_ids_guard = threading.Lock()

_task_ids: "weakref.WeakKeyDictionary[asyncio.Task[Any], int]" = weakref.WeakKeyDictionary()
_task_counter = itertools.count(1)


def client_id(client: Any) -> str:
    """The UUID of a redis client object, made on first use."""
    with _ids_guard:
        found = _ids.get(client)
        if found is None:
            found = _ids[client] = str(uuid.uuid4())
        return found


def thread_owner(uuid_: str) -> str:
    """This thread's owner."""
    return f"{uuid_}:{threading.get_ident()}"


def task_owner(uuid_: str) -> str:
    """This asyncio task's owner: tasks play the part of Redisson's threads
    (numbered from 1 per process, never reused while the task lives)."""
    task: Optional[asyncio.Task[Any]] = asyncio.current_task()
    if task is None:
        return thread_owner(uuid_)
    with _ids_guard:
        number = _task_ids.get(task)
        if number is None:
            number = _task_ids[task] = next(_task_counter)
    return f"{uuid_}:task-{number}"

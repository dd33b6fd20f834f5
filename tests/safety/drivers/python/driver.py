"""The safety suite's driver for the Python package (tests/safety, mode
pyclient): locks of every kind with the package's default options, on a
redis-py client that follows the master through Sentinel.

One JSON object a line on stdin, one reply a line on stdout:
  {"op": "acquire", "kind", "lock", "owner", "lease_ms", "wait_ms", "side",
   "locks"} -> granted (token, owner) | refused | notsynced | maybe (detail)
  {"op": "release", "kind", "lock", "owner"} -> released | notheld | maybe
kind: fenced, plain, rw (side read or write), fair, multi (locks), session,
block (fenced with a wait); wait_ms > 0 waits on the server (BLOCK).

Environment (set by the harness): SAFETY_SENTINELS (host:port,...),
SAFETY_MASTER_NAME, SAFETY_NAT (announced host:port=reachable host:port,...:
the harness's proxies), SAFETY_TIMEOUT_MS (the connections' socket timeout).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Tuple

from redis.exceptions import ResponseError
from redis.sentinel import MasterNotFoundError, Sentinel

from rwlock_client import FairLock, Lock, LockBase, MultiLock, NotHeld, NotSynced, ReadWriteLock


def address(text: str) -> Tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


class MappedSentinel(Sentinel):
    """redis-py's Sentinel, with the master's announced address replaced by
    the one this client group reaches it at (its proxy in the harness)."""

    def __init__(self, sentinels: List[Tuple[str, int]], nat: Dict[Tuple[str, int], Tuple[str, int]], **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)  # type: ignore[no-untyped-call]
        self._nat = nat

    def discover_master(self, service_name: str) -> Tuple[str, int]:
        host, port = super().discover_master(service_name)  # type: ignore[no-untyped-call]
        return self._nat.get((host, int(port)), (host, int(port)))


def lock_for(client: Any, request: Dict[str, Any], owner: str) -> LockBase:
    """The package's lock object for the request's kind, whose client id is
    the harness's owner: the read-write lock's write side, the session and
    block kinds fenced, as the harness's command streams are."""
    kind, name = request["kind"], request["lock"]
    if kind == "plain":
        return Lock(client, name, client_id=owner)
    if kind == "rw":
        rw = ReadWriteLock(client, name, fenced=True, client_id=owner)
        return rw.read_lock() if request["side"] == "read" else rw.write_lock()
    if kind == "fair":
        return FairLock(client, name, client_id=owner)
    if kind == "multi":
        return MultiLock(client, [("LOCK", n) for n in request["locks"]], client_id=owner)
    return Lock(client, name, fenced=True, session=kind == "session", client_id=owner)


def main() -> None:
    timeout = int(os.environ["SAFETY_TIMEOUT_MS"]) / 1000
    nat = {}
    for pair in os.environ["SAFETY_NAT"].split(","):
        announced, reachable = pair.split("=")
        nat[address(announced)] = address(reachable)
    sentinel = MappedSentinel(
        [address(s) for s in os.environ["SAFETY_SENTINELS"].split(",")],
        nat,
        socket_timeout=timeout,
        sentinel_kwargs={"socket_timeout": timeout},
    )
    client = sentinel.master_for(os.environ["SAFETY_MASTER_NAME"], socket_timeout=timeout)  # type: ignore[no-untyped-call]
    # One lock object per attempt, whose client id is the harness's owner:
    # every attempt is an owner of its own (a thread would be the same
    # owner each time), and the redis client object, whose learned replica
    # counts the package keeps, is the worker's one client.
    locks: Dict[str, LockBase] = {}
    for line in sys.stdin:
        request = json.loads(line)
        owner = request["owner"]
        reply: Dict[str, Any]
        if request["op"] == "acquire":
            lock = lock_for(client, request, owner)
            try:
                if lock.acquire(wait=request.get("wait_ms", 0) / 1000, lease=request["lease_ms"] / 1000):
                    locks[owner] = lock
                    reply = {"outcome": "granted", "token": lock.token, "owner": lock.owner()}
                else:
                    reply = {"outcome": "refused"}
            except NotSynced as e:
                # Released by the package, unless that release failed too:
                # the worker's release asks the server.
                locks[owner] = lock
                reply = {"outcome": "notsynced", "detail": str(e)}
            except MasterNotFoundError:
                # No Sentinel named a master: nothing was sent.
                reply = {"outcome": "refused", "detail": "no master"}
            except ResponseError as e:
                # The server refused the command (a replica now, loading):
                # nothing was written. The package raises no other error of
                # the server for a well-formed acquisition.
                reply = {"outcome": "refused", "detail": f"{type(e).__name__}: {e}"}
            except Exception as e:  # noqa: BLE001 - an I/O error, a timeout: the outcome is unknown
                # May have been granted: the release below is asked.
                locks[owner] = lock
                reply = {"outcome": "maybe", "detail": f"{type(e).__name__}: {e}"}
        else:
            found = locks.get(owner)
            if found is None:
                reply = {"outcome": "notheld", "detail": "no lock object"}
            else:
                try:
                    found.release()
                    reply = {"outcome": "released"}
                    del locks[owner]
                except NotHeld as e:
                    reply = {"outcome": "notheld", "detail": str(e)}
                    del locks[owner]
                except Exception as e:  # noqa: BLE001 - any other failure leaves the outcome unknown
                    reply = {"outcome": "maybe", "detail": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

"""The shared client contract: every scenario of
`clients/contract/scenarios.json` (or `RWLOCK_SCENARIOS`) run through this
package's public API, as the Rust, Java, Go and Node.js clients run them
(format: clients/contract/README.md). A step or field this runner does not
know fails the scenario."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
import redis

from conftest import REPO, Server
from rwlock_client import (
    CountDownLatch,
    FairLock,
    Lock,
    LockError,
    NotHeld,
    MultiLock,
    NotReentrant,
    NotSynced,
    NEVER,
    PermitExpirableSemaphore,
    ReadWriteLock,
    ReleaseUnknown,
    Semaphore,
)
from rwlock_client.lock import LockBase

SCENARIOS = Path(os.environ.get("RWLOCK_SCENARIOS") or REPO / "clients/contract/scenarios.json")
ERROR_KINDS = {
    "NotHeld": NotHeld,
    "NotReentrant": NotReentrant,
    "NotSynced": NotSynced,
    "ReleaseUnknown": ReleaseUnknown,
}
CLIENT_FIELDS = {"watchdog_timeout_ms", "socket_timeout_ms"}
LOCK_FIELDS = {"client", "kind", "name", "holds", "session"}
COUNT_STEPS = {"try_set_permits", "add_permits", "available"}
SEMAPHORE_STEPS = COUNT_STEPS | {"drain"}
PERMIT_STEPS = {"update_lease", "lease_left", "acquired"}
LATCH_STEPS = {"try_set_count", "count_down", "count", "await", "delete"}


def load() -> List[Dict[str, Any]]:
    document = json.loads(SCENARIOS.read_text())
    assert document["version"] == 1, f"{SCENARIOS}: unknown version {document['version']}"
    scenarios: List[Dict[str, Any]] = document["scenarios"]
    return scenarios


def decoded(reply: Any) -> Any:
    """A raw reply as JSON compares it: bytes as str, lists element-wise."""
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, (list, tuple)):
        return [decoded(r) for r in reply]
    return reply


def as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise AssertionError(f"{value!r} is not an integer")
    return int(value)


def raw_call(client: redis.Redis, args: List[str]) -> Any:
    """The reply as the server sent it: redis-py's reply callbacks (which
    turn `INFO` into a dict, for one) are bypassed by a bare connection."""
    conn = client.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return decoded(conn.read_response())
    except redis.ResponseError as e:
        # redis-py takes the code of the errors it knows off the message
        # (`ERR`, `NOPERM`, ...) and keeps it apart: put back, the error
        # reads as the server sent it.
        code = getattr(e, "status_code", None)
        return {"error": f"{code} {e}" if code else str(e)}
    finally:
        client.connection_pool.release(conn)


class Run:
    """One scenario against the server: its clients, locks and saved values."""

    def __init__(self, server: Server, scenario: Dict[str, Any]) -> None:
        self.server = server
        self.raw = server.client(decode_responses=False)
        self.saved: Dict[str, Any] = {}
        self.later: List[Tuple[threading.Thread, Dict[str, Any], List[Any]]] = []
        self.clients: Dict[str, redis.Redis] = {}
        for key, spec in scenario.get("clients", {}).items():
            unknown = set(spec) - CLIENT_FIELDS
            assert not unknown, f"client {key}: unknown fields {unknown}"
            options: Dict[str, Any] = {}
            if "socket_timeout_ms" in spec:
                options["socket_timeout"] = spec["socket_timeout_ms"] / 1000
            self.clients[key] = server.client(**options)
        self.specs = scenario.get("clients", {})
        self.locks: Dict[str, LockBase] = {}
        self.semaphores: Dict[str, Semaphore] = {}
        self.latches: Dict[str, CountDownLatch] = {}
        self.permits: Dict[str, PermitExpirableSemaphore] = {}
        rwlocks: Dict[Tuple[str, str], ReadWriteLock] = {}
        for key, spec in scenario["locks"].items():
            unknown = set(spec) - LOCK_FIELDS
            assert not unknown, f"lock {key}: unknown fields {unknown}"
            client = self.clients[spec["client"]]
            options = {"session": bool(spec.get("session", False))}
            if "watchdog_timeout_ms" in self.specs[spec["client"]]:
                options["watchdog_timeout"] = self.specs[spec["client"]]["watchdog_timeout_ms"] / 1000
            kind = spec["kind"]
            if kind in ("semaphore", "latch", "permit"):
                assert not options.pop("session"), f"lock {key}: a {kind} has no session holds"
                assert "holds" not in spec, f"lock {key}: a {kind} has no holds"
                if kind == "semaphore":
                    self.semaphores[key] = Semaphore(client, spec["name"])
                elif kind == "permit":
                    self.permits[key] = PermitExpirableSemaphore(client, spec["name"], **options)
                else:
                    self.latches[key] = CountDownLatch(client, spec["name"])
                continue
            if kind in ("plain", "fenced", "nonreentrant"):
                lock: LockBase = Lock(
                    client, spec["name"], fenced=kind == "fenced", reentrant=kind != "nonreentrant", **options
                )
            elif kind in ("read", "write"):
                pair = (spec["client"], spec["name"])
                if pair not in rwlocks:
                    rwlocks[pair] = ReadWriteLock(client, spec["name"], **options)
                lock = rwlocks[pair].read_lock() if kind == "read" else rwlocks[pair].write_lock()
            elif kind == "fair":
                assert not options.pop("session"), f"lock {key}: a fair lock has no session holds"
                lock = FairLock(client, spec["name"], **options)
            elif kind == "multi":
                lock = MultiLock(client, [(k, n) for k, n in spec["holds"]], **options)
            else:
                raise AssertionError(f"lock {key}: unknown kind {kind!r}")
            self.locks[key] = lock

    def args(self, words: List[str]) -> List[str]:
        def one(word: str) -> str:
            word = re.sub(r"\$owner\((\w+)\)", lambda m: self.locks[m.group(1)].owner(), word)
            if word.startswith("$") and word[1:] in self.saved:
                return str(self.saved[word[1:]])
            return word

        return [one(w) for w in words]

    def command(self, words: List[str]) -> Any:
        return raw_call(self.raw, self.args(words))

    def check(self, expect: Any, actual: Any, what: str) -> None:
        if isinstance(expect, dict):
            (form, value), = expect.items()
            if form == "between":
                assert value[0] <= as_int(actual) <= value[1], f"{what}: {actual!r} not in {value}"
            elif form == "match":
                assert isinstance(actual, str) and re.fullmatch(value, actual), f"{what}: {actual!r} !~ {value}"
            elif form == "each_match":
                assert all(re.fullmatch(value, a) for a in actual), f"{what}: {actual!r} !~ {value}"
            elif form == "len":
                assert len(actual) == value, f"{what}: {actual!r} has not {value} elements"
            elif form in ("gt", "eq"):
                saved = as_int(self.saved[value.lstrip("$")])
                ok = as_int(actual) > saved if form == "gt" else as_int(actual) == saved
                assert ok, f"{what}: {actual!r} not {form} {saved}"
            elif form == "error":
                assert isinstance(actual, dict) and str(actual.get("error", "")).startswith(value), (
                    f"{what}: {actual!r} is no error {value}"
                )
            else:
                raise AssertionError(f"{what}: unknown expectation {form!r}")
            return
        assert actual == expect, f"{what}: {actual!r} != {expect!r}"

    def calls(self) -> Dict[str, int]:
        stats = self.raw.info("commandstats")
        return {k[len("cmdstat_"):]: int(v["calls"]) for k, v in stats.items()}

    def step(self, step: Dict[str, Any], what: str) -> None:
        action = next(iter(step))
        fields = set(step)
        if action in {"acquire", "release"} | COUNT_STEPS | PERMIT_STEPS and step[action] in self.permits:
            self.permit_step(action, step, what)
        elif action in ("acquire", "release") and step[action] in self.semaphores:
            self.semaphore_step(action, step, what)
        elif action in SEMAPHORE_STEPS:
            self.semaphore_step(action, step, what)
        elif action in LATCH_STEPS:
            self.latch_step(action, step, what)
        elif action == "acquire":
            assert fields <= {"acquire", "wait_ms", "lease_ms", "expect", "elapsed_ms", "save_token"}, what
            lock = self.locks[step["acquire"]]
            wait = None if step["wait_ms"] is None else step["wait_ms"] / 1000
            lease = None if step["lease_ms"] is None else step["lease_ms"] / 1000
            start = time.monotonic()
            outcome = self.outcome(lambda: "acquired" if lock.acquire(wait=wait, lease=lease) else "refused")
            elapsed = (time.monotonic() - start) * 1000
            assert outcome == step["expect"], f"{what}: {outcome} != {step['expect']}"
            self.elapsed(step, elapsed, what)
            if "save_token" in step:
                self.saved[step["save_token"]] = lock.token
        elif action == "release":
            assert fields == {"release", "expect"}, what
            lock = self.locks[step["release"]]

            def release() -> str:
                lock.release()
                return "ok"

            outcome = self.outcome(release)
            assert outcome == step["expect"], f"{what}: {outcome} != {step['expect']}"
        elif action in ("held", "lost") and "within_ms" in step:
            assert fields == {action, "expect", "within_ms"}, what
            # What the watchdog finds in the background: polled until it is as expected.
            lock = self.locks[step[action]]
            deadline = time.monotonic() + step["within_ms"] / 1000
            while getattr(lock, action) != step["expect"] and time.monotonic() < deadline:
                time.sleep(0.01)
            self.check(step["expect"], getattr(lock, action), f"{what} (within {step['within_ms']} ms)")
        elif action in ("held", "lost", "token"):
            assert fields == {action, "expect"}, what
            self.check(step["expect"], getattr(self.locks[step[action]], action), what)
        elif action == "redis":
            assert fields <= {"redis", "expect", "save"}, what
            reply = self.command(step["redis"])
            self.check(step["expect"], reply, what)
            if "save" in step:
                self.saved[step["save"]] = reply
        elif action == "later":
            assert fields == {"later"} and set(step["later"]) <= {"after_ms", "redis", "expect"}, what
            self.schedule(step["later"])
        elif action == "sleep_ms":
            assert fields == {"sleep_ms"}, what
            time.sleep(step["sleep_ms"] / 1000)
        elif action == "calls":
            assert fields == {"calls"}, what
            counted = self.calls()
            for command, expect in step["calls"].items():
                self.check(expect, counted.get(command, 0), f"{what}: calls of {command}")
        elif action == "reset_calls":
            assert fields == {"reset_calls"}, what
            self.raw.config_resetstat()
        else:
            raise AssertionError(f"{what}: unknown step {action!r}")

    def semaphore_step(self, action: str, step: Dict[str, Any], what: str) -> None:
        """A step of a `semaphore` (clients/contract/README.md)."""
        fields = set(step)
        sem = self.semaphores[step[action]]
        permits = step.get("permits", 1)
        if action == "acquire":
            assert fields <= {"acquire", "permits", "wait_ms", "expect", "elapsed_ms"}, what
            assert {"wait_ms", "expect"} <= fields, what
            wait = None if step["wait_ms"] is None else step["wait_ms"] / 1000
            start = time.monotonic()
            outcome = self.outcome(lambda: "acquired" if sem.acquire(permits, wait=wait) else "refused")
            elapsed = (time.monotonic() - start) * 1000
            assert outcome == step["expect"], f"{what}: {outcome} != {step['expect']}"
            self.elapsed(step, elapsed, what)
        elif action == "release":
            assert fields <= {"release", "permits", "expect"} and "expect" in fields, what

            def release() -> str:
                sem.release(permits)
                return "ok"

            outcome = self.outcome(release)
            assert outcome == step["expect"], f"{what}: {outcome} != {step['expect']}"
        elif action in COUNT_STEPS:
            self.count_step(sem, action, step, what)
        else:
            assert action == "drain" and fields == {action, "expect"}, what
            self.check(step["expect"], sem.drain_permits(), what)

    def count_step(self, sem: Any, action: str, step: Dict[str, Any], what: str) -> None:
        """A step a `semaphore` and a `permit` semaphore share."""
        fields = set(step)
        if action == "try_set_permits":
            assert fields == {action, "permits", "expect"}, what
            self.check(step["expect"], sem.try_set_permits(step["permits"]), what)
        elif action == "add_permits":
            assert fields == {action, "permits"}, what
            sem.add_permits(step["permits"])
        else:
            assert action == "available" and fields == {action, "expect"}, what
            self.check(step["expect"], sem.available_permits(), what)

    def permit_step(self, action: str, step: Dict[str, Any], what: str) -> None:
        """A step of a `permit` semaphore (clients/contract/README.md)."""
        fields = set(step)
        sem = self.permits[step[action]]

        def lease(ms: Any) -> Any:
            return None if ms is None else NEVER if ms == -1 else ms / 1000

        if action == "acquire":
            allowed = {"acquire", "permits", "lease_ms", "wait_ms", "expect", "elapsed_ms", "save_ids"}
            assert fields <= allowed and {"lease_ms", "wait_ms", "expect"} <= fields, what
            wait = None if step["wait_ms"] is None else step["wait_ms"] / 1000
            ids: List[List[str]] = []

            def acquire() -> str:
                got = sem.acquire_many(step.get("permits", 1), wait=wait, lease=lease(step["lease_ms"]))
                ids.extend([got] if got is not None else [])
                return "acquired" if got is not None else "refused"

            start = time.monotonic()
            outcome = self.outcome(acquire)
            elapsed = (time.monotonic() - start) * 1000
            assert outcome == step["expect"], f"{what}: {outcome} != {step['expect']}"
            self.elapsed(step, elapsed, what)
            if "save_ids" in step:
                assert ids, f"{what}: no ids to save"
                assert all(re.fullmatch("[0-9a-f]{32}", i) for i in ids[0]), f"{what}: ids {ids[0]}"
                self.saved[step["save_ids"]] = ids[0]
        elif action == "release":
            assert fields == {"release", "ids", "expect"}, what

            def release() -> str:
                sem.release(*self.saved[step["ids"]])
                return "ok"

            outcome = self.outcome(release)
            assert outcome == step["expect"], f"{what}: {outcome} != {step['expect']}"
        elif action in ("update_lease", "lease_left"):
            (permit_id,) = self.saved[step["ids"]]
            if action == "update_lease":
                assert fields == {action, "ids", "lease_ms", "expect"}, what
                self.check(step["expect"], sem.update_lease(permit_id, lease(step["lease_ms"])), what)
            else:
                assert fields == {action, "ids", "expect"}, what
                left = sem.lease_left(permit_id)
                self.check(step["expect"], -1 if left is None else round(left * 1000), what)
        elif action in COUNT_STEPS:
            self.count_step(sem, action, step, what)
        else:
            assert action == "acquired" and fields == {action, "expect"}, what
            self.check(step["expect"], sem.acquired_permits(), what)

    def latch_step(self, action: str, step: Dict[str, Any], what: str) -> None:
        """A step of a `latch` (clients/contract/README.md)."""
        fields = set(step)
        latch = self.latches[step[action]]
        if action == "try_set_count":
            assert fields == {action, "count", "expect"}, what
            self.check(step["expect"], latch.try_set_count(step["count"]), what)
        elif action == "count_down":
            assert fields == {action}, what
            latch.count_down()
        elif action == "count":
            assert fields == {action, "expect"}, what
            self.check(step["expect"], latch.count(), what)
        elif action == "await":
            assert fields <= {action, "wait_ms", "expect", "elapsed_ms"} and {"wait_ms", "expect"} <= fields, what
            timeout = None if step["wait_ms"] is None else step["wait_ms"] / 1000
            start = time.monotonic()
            reached = latch.wait(timeout)
            self.check(step["expect"], reached, what)
            self.elapsed(step, (time.monotonic() - start) * 1000, what)
        else:
            assert action == "delete" and fields == {action, "expect"}, what
            self.check(step["expect"], latch.delete(), what)

    @staticmethod
    def elapsed(step: Dict[str, Any], elapsed: float, what: str) -> None:
        """The step's optional `elapsed_ms: [lo, hi]`."""
        if "elapsed_ms" in step:
            low, high = step["elapsed_ms"]
            assert low <= elapsed <= high, f"{what}: took {elapsed:.0f} ms, not in {step['elapsed_ms']}"

    @staticmethod
    def outcome(call: Callable[[], str]) -> str:
        try:
            return call()
        except LockError as e:
            for kind, error in ERROR_KINDS.items():
                if isinstance(e, error):
                    return kind
            raise

    def schedule(self, later: Dict[str, Any]) -> None:
        args = self.args(later["redis"])
        result: List[Any] = []
        conn = self.server.client(decode_responses=False)

        def send() -> None:
            time.sleep(later["after_ms"] / 1000)
            try:
                result.append(raw_call(conn, args))
            finally:
                conn.close()

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        self.later.append((thread, later, result))

    def finish(self, name: str) -> None:
        for thread, later, result in self.later:
            thread.join(30)
            assert result, f"{name}: later {later['redis']} did not finish"
            if "expect" in later:
                self.check(later["expect"], result[0], f"{name}: later {later['redis']}")

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.raw.close()


@pytest.mark.parametrize("scenario", load(), ids=lambda s: str(s["name"]))
def test_scenario(server: Server, scenario: Dict[str, Any]) -> None:
    unknown = set(scenario) - {"name", "clients", "locks", "steps"}
    assert not unknown, f"unknown scenario fields {unknown}"
    server.client().config_resetstat()
    run = Run(server, scenario)
    try:
        for index, step in enumerate(scenario["steps"]):
            run.step(step, f"{scenario['name']}: step {index} {json.dumps(step)}")
        run.finish(scenario["name"])
    finally:
        for lock in run.locks.values():
            try:
                while lock.held:
                    lock.release()
            except LockError:
                pass
        run.close()


def test_every_scenario_was_loaded() -> None:
    names = [s["name"] for s in load()]
    assert len(names) >= 18 and len(set(names)) == len(names), names


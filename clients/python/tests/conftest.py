"""Real servers for the tests: redis-server processes with the module
loaded, on free 127.0.0.1 ports, each stopped by its own PID.

RWLOCK_REDIS_SERVER: the server binary (default `redis-server` on PATH).
RWLOCK_MODULE: the module (default the repository's
target/release/librwlock.so). A missing one fails the tests, never skips
them."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest
import redis

from faultproxy import DropReplyProxy

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


def server_binary() -> str:
    found = os.environ.get("RWLOCK_REDIS_SERVER") or shutil.which("redis-server")
    if not found:
        pytest.fail("no redis-server: install it or set RWLOCK_REDIS_SERVER")
    return found


def module_path() -> str:
    path = Path(os.environ.get("RWLOCK_MODULE") or REPO / "target/release/librwlock.so")
    if not path.is_file():
        pytest.fail(f"no module at {path}: cargo build --release, or set RWLOCK_MODULE")
    return str(path)


def free_port(also_free: int = 0) -> int:
    """A port free now (and, with `also_free`, port + also_free too: the
    cluster bus)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + also_free > 65535:
            continue
        if also_free:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + also_free))
                except OSError:
                    continue
        return port
    raise RuntimeError("no free port")


class Server:
    """One redis-server with the module, in its own directory."""

    def __init__(self, *args: str, cluster: bool = False) -> None:
        self.dir = tempfile.mkdtemp(prefix="rwlock-pytest-")
        self.port = free_port(10000 if cluster else 0)
        argv = [
            server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", self.dir,
            "--save", "",
            "--appendonly", "no",
            "--loadmodule", module_path(),
        ]
        if cluster:
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        argv += list(args)
        self.log = open(os.path.join(self.dir, "server.log"), "wb")
        self.process: Optional[subprocess.Popen[bytes]] = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if self.client().ping():
                    break
            except redis.ConnectionError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"redis-server did not start: {self.read_log()}")
            time.sleep(0.02)

    def client(self, **options: object) -> redis.Redis:
        options.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.port, **options)  # type: ignore[arg-type]

    def acknowledged(self) -> bool:
        """Whether a replica acknowledges what this master streams now. A
        replica reports its link up once it has loaded the master's data, but
        after a diskless sync the master streams to it only from its first
        acknowledgement, up to a second later: a WAIT meanwhile lasts that
        long, and an acquisition on a loaded machine fails with NotSynced. The
        probe is a PUBLISH (replicated, writing no key) and WAIT on one
        connection (a pipeline)."""
        with self.client() as client:
            pipe = client.pipeline(transaction=False)
            pipe.publish("__rwlock_test_replica", "probe")
            pipe.execute_command("WAIT", 1, 100)
            _, acked = pipe.execute()
        return int(acked) >= 1

    def async_client(self, **options: object) -> "redis.asyncio.Redis":
        import redis.asyncio

        options.setdefault("socket_timeout", 10)
        return redis.asyncio.Redis(host="127.0.0.1", port=self.port, **options)  # type: ignore[arg-type]

    def read_log(self) -> str:
        with open(os.path.join(self.dir, "server.log"), "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """By PID: SIGCONT (it may be paused), SIGTERM, SIGKILL if it lingers."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_server() -> Iterator[Server]:
    server = Server()
    yield server
    server.stop()


@pytest.fixture
def server(shared_server: Server) -> Server:
    """The shared server, emptied for this test."""
    shared_server.client().flushall()
    return shared_server


@pytest.fixture
def proxies(server: Server) -> Iterator[Callable[..., DropReplyProxy]]:
    """Makes `DropReplyProxy`s (trigger, times=1) in front of the shared
    server, closed when the test ends."""
    made: List[DropReplyProxy] = []

    def make(trigger: bytes, times: int = 1) -> DropReplyProxy:
        proxy = DropReplyProxy(server.port, trigger, times)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Starts servers of the test's own, stopped when it ends."""
    started: List[Server] = []

    def start(*args: str, cluster: bool = False) -> Server:
        s = Server(*args, cluster=cluster)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def no_watchdog_thread() -> bool:
    """Whether no watchdog thread (the scheduler's, a renewal's) runs."""
    return not [t for t in threading.enumerate() if t.name.startswith("rwlock-watchdog")]


SLOTS = 16384


@pytest.fixture(scope="session")
def cluster_nodes() -> Iterator[List[Server]]:
    """Three masters with the module, no replicas, slots split evenly."""
    nodes = [Server(cluster=True) for _ in range(3)]
    try:
        for i, node in enumerate(nodes):
            c = node.client()
            first, last = i * SLOTS // 3, (i + 1) * SLOTS // 3 - 1
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for node in nodes[1:]:
            nodes[0].client().execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)

        def converged() -> bool:
            for node in nodes:
                info = node.client().execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text or "cluster_known_nodes:3" not in text:
                    return False
            return True

        wait_until("the cluster to converge", converged, 30)
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def info_counter(client: redis.Redis, field: str) -> int:
    return int(client.info("rwlock")[f"rwlock_{field}"])


class Counters:
    """INFO rwlock counters since this snapshot (the shared server's
    counters run on across tests)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.start = {k: int(v) for k, v in client.info("rwlock").items()}

    def __getitem__(self, field: str) -> int:
        key = f"rwlock_{field}"
        return int(self.client.info("rwlock")[key]) - self.start.get(key, 0)

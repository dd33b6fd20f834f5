#!/usr/bin/env python3
"""What deadlock detection (docs/design.md, contract §14) costs a request
about to park, measured by the server itself (INFO commandstats, usec per
call of LOCK.ACQUIRE), with rwlock.deadlock-detection yes and no:

    benches/deadlock_cost.py [MODULE.so]     (default target/release/librwlock.so)

- independent: 1,000 waiters parked on 1,000 locks, each behind its own
  holder; each park's reachable graph is one lock and one holder.
- chain: owner i holds lock i and parks on lock i+1, parked from the end of
  the chain down, so the k-th park walks the k waiters parked before it
  (500 on average, 1,000 at most).
- line: 1,000 waiters parked on one lock behind its holder, who waits on
  nothing; the k-th park has k waiters before it in the lock's queue.
- cycle over the chain: the holder of the chain's last lock asks for its
  first lock: the search walks all 1,000 waiters and fails it with
  DEADLOCK (nothing changes, so it is asked 200 times).

Every client is a raw socket; the parked ones are never read. The server
is started with the module on a free port in a temp dir and stopped by its
own PID.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from callgrind import ROOT, connect_own, free_port, resp  # noqa: E402

N = 1000
ASKS = 200


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        return rest

    def call(self, *args):
        self.sock.sendall(resp(*args))
        return self.reply()


def usec_per_call(c, command):
    info = c.call("INFO", "commandstats").decode()
    for line in info.splitlines():
        if line.startswith(f"cmdstat_{command}:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return float(fields["usec_per_call"]), int(fields["calls"])
    raise RuntimeError(f"no stats for {command}")


def wait_parked(c, n):
    deadline = time.time() + 30
    while time.time() < deadline:
        info = c.call("INFO", "rwlock").decode()
        if f"rwlock_waiters:{n}\r" in info:
            return
        time.sleep(0.01)
    raise RuntimeError(f"{n} waiters never parked")


def scenario(port, detection, graph):
    c = Conn(port)
    c.call("FLUSHALL")
    c.call("CONFIG", "SET", "rwlock.deadlock-detection", detection)
    for i in range(N + 1):
        c.call("LOCK.ACQUIRE", f"L{i}", f"o{i}", 600000)
    c.call("CONFIG", "RESETSTAT")
    parked = []
    chain = graph == "chain"
    order = range(N - 1, -1, -1) if chain else range(N)
    for i in order:
        p = Conn(port)
        # chain: o{i} parks on L{i+1}; independent: w{i} parks on L{i};
        # line: w{i} parks on L0.
        if chain:
            p.sock.sendall(resp("LOCK.ACQUIRE", f"L{i + 1}", f"o{i}", 600000, "BLOCK", 0))
        else:
            lock = "L0" if graph == "line" else f"L{i}"
            p.sock.sendall(resp("LOCK.ACQUIRE", lock, f"w{i}", 600000, "BLOCK", 0))
        parked.append(p)
        # One at a time, so each park sees the ones before it.
        wait_parked(c, len(parked))
    park_us, calls = usec_per_call(c, "lock.acquire")
    assert calls == N, calls
    cycle_us = None
    # Without detection the closing request would park for good.
    if chain and detection == "yes":
        c.call("CONFIG", "RESETSTAT")
        for _ in range(ASKS):
            r = c.call("LOCK.ACQUIRE", "L0", f"o{N}", 600000, "BLOCK", 0)
            assert isinstance(r, RuntimeError) and str(r).startswith("DEADLOCK"), r
        cycle_us, _ = usec_per_call(c, "lock.acquire")
    for p in parked:
        p.sock.close()
    c.sock.close()
    return park_us, cycle_us


def main():
    # Absolute: the server's dlopen does not look in its working directory.
    module = str(Path(sys.argv[1]).resolve()) if len(sys.argv) > 1 else str(ROOT / "target/release/librwlock.so")
    server = os.environ.get("RWLOCK_REDIS_SERVER", "redis-server")
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
             "--appendonly", "no", "--maxclients", "4000", "--loadmodule", module],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            connect_own(proc, port)
            rows = []
            for graph in ("independent", "chain", "line"):
                for detection in ("no", "yes"):
                    park_us, cycle_us = scenario(port, detection, graph)
                    rows.append((graph, detection, park_us, cycle_us))
            print(f"{'graph':<12} {'detection':<10} {'park (us/call)':>15} {'cycle of 1,000 (us)':>20}")
            for name, detection, park_us, cycle_us in rows:
                cycle = f"{cycle_us:.1f}" if cycle_us is not None else "-"
                print(f"{name:<12} {detection:<10} {park_us:>15.2f} {cycle:>20}")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The server's cost of one uncontended lock cycle, each library's commands
sent by one and the same client.

`make bench-clients` measures each library through its own client, and a
client that is slower or heavier on the shared cores also moves the
server's CPU per cycle (cache and scheduling effects: on a 2-core machine
the server's CPU per cycle grows as the client's cycle does). Here one
Python connection sends every library's exact cycle, one command at a time
and each reply awaited, as the clients do, so only the commands differ:

- ours with `HELD` (the five clients' cycle since issue 35's second step),
- ours as the clients sent it before `HELD` (`REQUEST` on both, the latches'
  `DEL` pipelined with the release),
- `SET NX PX` and a compare-and-delete script (go-redsync, redis-py's `Lock`,
  rslock: the cheapest peers' cycle),
- Redisson 4.7's `lock.lua` and `unlock.lua` and its latch's `DEL` (when
  `make oracle` extracted them).

Each is run `--rounds` times for `--cycles` cycles, in alternating order,
on one server with the module; it prints the medians of the commands' own
time (`INFO commandstats`) and of the server's CPU (`INFO cpu`) per cycle,
and each over the `SET NX PX` cycle's. It measures and prints; it asserts
nothing.

    python3 benches/clients/server_cost.py --module target/release/librwlock.so
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from pathlib import Path
from typing import Callable

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
# The peers' release script is the one `make profile` counts (callgrind.py).
from callgrind import COMPARE_AND_DELETE  # noqa: E402
from run import Server, diff, snapshot  # noqa: E402
LEASE = "30000"
LATCH_TTL = "13500"

Cycle = Callable[[redis.Redis, int], None]


def ours_held(r: redis.Redis, _: int) -> None:
    r.execute_command("LOCK.ACQUIRE", "cost:ours", "u:1", LEASE, "BLOCK", "0", "HELD", "0")
    # A last release carries no `HELD 1`: the server never replays it.
    r.execute_command("LOCK.UNLOCK", "cost:ours", "u:1", "LEASE", LEASE)


def ours_before(r: redis.Redis, i: int) -> None:
    acquire_id, release_id = f"a{i}", f"r{i}"
    r.execute_command("LOCK.ACQUIRE", "cost:before", "u:1", LEASE, "BLOCK", "0", "REQUEST", acquire_id, LATCH_TTL)
    pipe = r.pipeline(transaction=False)
    pipe.execute_command("LOCK.UNLOCK", "cost:before", "u:1", "LEASE", LEASE, "REQUEST", release_id, LATCH_TTL)
    # The clients deleted this acquisition's latch and the previous
    # release's: two keys, one DEL.
    pipe.execute_command(
        "DEL",
        f"redisson_lock_request_latch:{{cost:before}}:{acquire_id}",
        f"redisson_unlock_latch:{{cost:before}}:r{i - 1}",
    )
    pipe.execute()


def set_nx(sha: str) -> Cycle:
    def cycle(r: redis.Redis, _: int) -> None:
        token = uuid.uuid4().hex
        r.execute_command("SET", "cost:setnx", token, "NX", "PX", LEASE)
        r.execute_command("EVALSHA", sha, "1", "cost:setnx", token)

    return cycle


def redisson(lock_sha: str, unlock_sha: str) -> Cycle:
    channel = "redisson_lock__channel:{cost:redisson}"

    def cycle(r: redis.Redis, i: int) -> None:
        latch = f"redisson_unlock_latch:{{cost:redisson}}:{i}"
        r.execute_command("EVALSHA", lock_sha, "1", "cost:redisson", LEASE, "u:1")
        r.execute_command(
            "EVALSHA", unlock_sha, "3", "cost:redisson", channel, latch, "0", LEASE, "u:1", "PUBLISH", LATCH_TTL
        )
        r.execute_command("DEL", latch)

    return cycle


def measure(server: Server, cycle: Cycle, cycles: int, start: int) -> tuple[float, float]:
    """Commandstats µs and server CPU µs per cycle over `cycles` cycles."""
    r = redis.Redis(port=server.port)
    for i in range(200):  # warm-up: connection, scripts' caches
        cycle(r, start + i)
    before = snapshot(server.client)
    for i in range(cycles):
        cycle(r, start + 200 + i)
    after = snapshot(server.client)
    r.close()
    commands, cpu, _, _ = diff(before, after)
    usec = sum(u for name, (_, u) in commands.items() if name != "info")
    return usec / cycles, cpu * 1e6 / cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", default=str(ROOT / "target/release/librwlock.so"))
    parser.add_argument("--server", default="redis-server")
    parser.add_argument("--cycles", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    server = Server(args.server, str(Path(args.module).resolve()))
    try:
        sha = server.client.script_load(COMPARE_AND_DELETE)
        cycles: dict[str, Cycle] = {
            "ours, HELD (the clients' cycle)": ours_held,
            "ours, REQUEST + DEL (the clients' before HELD)": ours_before,
            "SET NX PX + compare-and-delete (redsync, redis-py, rslock)": set_nx(sha),
        }
        lua = ROOT / "target/redisson-lua/4.7.0"
        if (lua / "lock.lua").is_file():
            lock_sha = server.client.script_load((lua / "lock.lua").read_text())
            unlock_sha = server.client.script_load((lua / "unlock.lua").read_text())
            cycles["Redisson 4.7 lock.lua + unlock.lua + DEL"] = redisson(lock_sha, unlock_sha)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in cycles}
        names = list(cycles)
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else names[::-1]
            for name in order:
                results[name].append(measure(server, cycles[name], args.cycles, round_ * 10 * args.cycles))
        base = names[2]
        med = {n: (statistics.median(u for u, _ in v), statistics.median(c for _, c in v)) for n, v in results.items()}
        print(f"{args.rounds} rounds of {args.cycles} cycles, one connection, medians; {args.server}, module {args.module}")
        print()
        print("| cycle | commands' µs/cycle | server CPU µs/cycle | µs over SET NX PX | CPU over SET NX PX |")
        print("|---|---|---|---|---|")
        for name in names:
            u, c = med[name]
            print(f"| {name} | {u:.1f} | {c:.1f} | {u / med[base][0]:.2f}x | {c / med[base][1]:.2f}x |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

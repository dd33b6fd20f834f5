#!/usr/bin/env python3
"""Instructions the server spends per operation, counted by callgrind: the
same on a quiet machine and a busy one, so before/after comparisons of the
hot path do not depend on the noise of the moment.

    benches/callgrind.py [MODULE.so [FLOOR.so]]     (make profile)

Starts redis-server under valgrind with the module, runs each workload once
to warm up and once counted, and prints instructions per cycle (acquire +
release) for the module, EVALSHA of Redisson's seed scripts, the layout floor
(benches/floor, loaded alone into a server of its own: beside another module
rwlock raises every keyspace event) and HINCRBY, per read unlock among 1,000
readers, and per write handoff to a BLOCK waiter. The module's cycles also
run over 50 locks in turn, as the bench's clients do. The plain lock's
cycles too (Redisson 4.7's scripts): LOCK.ACQUIRE + LOCK.UNLOCK with and without REQUEST, with HELD
(the clients' cycle) and with both latches and their DEL (theirs before HELD), and FENCED, against
lock.lua (fenced_lock.lua) + unlock.lua by EVALSHA, each release with a fresh
unlock latch as Redisson's; the clients' cycle also against the other lock
libraries' SET NX PX + compare-and-delete script. The semaphore's cycle (SEMAPHORE.ACQUIRE 1 +
SEMAPHORE.RELEASE 1) against semaphore_acquire.lua + semaphore_release.lua.
The count-down latch's cycle (try-set 1 + count down) against its two
scripts. The permit-expirable semaphore's (PERMIT.ACQUIRE 1 with a lease +
PERMIT.TRYRELEASE of its id) against permit_acquire.lua + permit_release.lua. Then the targets: every operation at least 3x
cheaper than Redisson's script, and the module's cycles within 1.1x of the
layout floor's. Needs valgrind and Redisson's scripts (`make oracle`
extracts them from its jars; RWLOCK_REDISSON_LUA and RWLOCK_REDISSON_LOCK_LUA
override).
"""

import hashlib
import itertools
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CYCLES = 5000
LOCKS = 50
READERS = 1000
UNLOCKS = 10
HANDOFFS = 300
LINE = 32
# The plain lock's unlock latches live longer than a run under valgrind, so
# that no latch of the warm-up expires (and is reclaimed) while counting;
# Redisson's own lifetime is 13.5 s.
LATCH_TTL = 600000
# The release the most-used lock libraries send after `SET key token NX PX`
# (go-redsync, redis-py's `Lock`, rslock, redlock): one script that reads
# the key, compares the token and deletes it. Their exact scripts differ
# only in what they return.
COMPARE_AND_DELETE = ('if redis.call("GET", KEYS[1]) == ARGV[1] then '
                      'return redis.call("DEL", KEYS[1]) end return 0')


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        # Bytes as they are: a permit id is 16 raw bytes in a script's ARGV.
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        return rest

    def reply_to(self, request):
        self.sock.sendall(request)
        return self.reply()

    def run(self, requests):
        """Sends the requests pipelined in chunks; fails on any error reply."""
        for i in range(0, len(requests), 500):
            chunk = requests[i : i + 500]
            self.sock.sendall(b"".join(chunk))
            for _ in chunk:
                self.reply()


def connect_own(proc, port, tries=300):
    """A connection to the server `proc` started on `port`, once it answers.

    The port may have been taken between free_port() and the bind by another
    process's server (a test suite's, beside us): never run commands on, or
    SHUTDOWN, someone else's server. Its process id must be ours.
    """
    for _ in range(tries):
        if proc.poll() is not None:
            raise RuntimeError(f"the server on port {port} exited at start (port taken?)")
        try:
            conn = Conn(port)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise RuntimeError(f"the server on port {port} did not start")
    info = conn.reply_to(resp("INFO", "server")).decode()
    pid = int(re.search(r"process_id:(\d+)", info).group(1))
    if pid != proc.pid:
        raise RuntimeError(f"port {port} answers process {pid}, not our server {proc.pid}")
    return conn


def handoff_rounds(port):
    """Write handoffs: the holder releases while another client waits with
    BLOCK, which then releases in turn. Counted per round: the waiter's
    parking, the release that hands it the lock, the reply, its release."""
    holder, waiter = Conn(port), Conn(port)
    for _ in range(HANDOFFS):
        holder.run([resp("RWLOCK.WRITE", "H", "holder:1", 30000)])
        waiter.sock.sendall(resp("RWLOCK.WRITE", "H", "waiter:1", 30000, "BLOCK", 10000))
        # Parked by then even under valgrind; `count` checks every round was
        # a handoff (polling INFO here would be counted).
        time.sleep(0.02)
        holder.run([resp("RWLOCK.UNLOCK", "H", "holder:1", "WRITE")])
        if waiter.reply() is not None:
            raise RuntimeError("the waiter was refused the lock")
        waiter.run([resp("RWLOCK.UNLOCK", "H", "waiter:1", "WRITE")])


def line_rounds():
    """Write handoffs along a line of LINE BLOCK waiters, one lock: each
    holder releases and parks again at the back, so the line stays LINE
    long. Counted per round as `handoff_rounds` is: against it, what a
    longer line adds to a handoff (its deadlock check read the whole line
    once per parking, then once per waiter in it). The line forms in the
    warm-up run; the counted run goes on with it."""
    line = {}

    def write(i, *block):
        return resp("RWLOCK.WRITE", "LINE", "o%d:1" % i, 30000, *block)

    def work(port):
        if line.get("port") != port:
            conns = [Conn(port) for _ in range(LINE + 1)]
            conns[0].run([write(0)])
            for i in range(1, LINE + 1):
                conns[i].sock.sendall(write(i, "BLOCK", 30000))
                # Parked in this order, even under valgrind.
                time.sleep(0.02)
            line.update(port=port, conns=conns, holder=0)
        conns, holder = line["conns"], line["holder"]
        for _ in range(HANDOFFS):
            conns[holder].run([resp("RWLOCK.UNLOCK", "LINE", "o%d:1" % holder, "WRITE")])
            conns[holder].sock.sendall(write(holder, "BLOCK", 30000))
            others = [c.sock for i, c in enumerate(conns) if i != holder]
            ready, _, _ = select.select(others, [], [], 60)
            if len(ready) != 1:
                raise RuntimeError(f"{len(ready)} waiters answered one release")
            holder = next(i for i, c in enumerate(conns) if c.sock is ready[0])
            if conns[holder].reply() is not None:
                raise RuntimeError("a waiter was refused the lock")
        line["holder"] = holder

    return work


# The workloads run on a server with the module, or with the floor alone.
MODULE, FLOOR = "module", "floor"


def latched(lock, cycle):
    """Work of CYCLES cycles on `lock` whose releases each take an unlock
    latch of a request id of their own, as Redisson's do: `cycle(id)` gives
    one cycle's requests. Each run has new ids, since the warm-up's latches
    live on and a release that finds its latch replies at once; the lock must
    be free after it (one EXISTS, next to nothing beside the run)."""
    runs = itertools.count()
    conns = []

    def work(port):
        if not conns:
            conns.append(Conn(port))
        run = next(runs)
        conns[0].run([r for c in range(CYCLES) for r in cycle("%08x%024x" % (run, c))])
        if conns[0].reply_to(resp("EXISTS", lock)) != b"0":
            raise RuntimeError(f"{lock} still held: a release did not release")

    return work


def plain_workloads(sha):
    """The plain lock's cycles: the module against Redisson 4.7's scripts."""
    lock, owner = "P", "u-0000-4000-8000-000000000000:1"
    token = "redisson_lock_token:{%s}" % lock
    chan = "redisson_lock__channel:{%s}" % lock

    def release(request):
        return resp("LOCK.UNLOCK", lock, owner, "REQUEST", request, LATCH_TTL)

    def script_release(request):
        latch = "redisson_unlock_latch:{%s}:%s" % (lock, request)
        return resp("EVALSHA", sha["plain_unlock"], 3, lock, chan, latch, 0, 30000, owner,
                    "PUBLISH", LATCH_TTL)

    acquire = resp("LOCK.ACQUIRE", lock, owner, 30000)
    # The clients' `lock()` + `unlock()` (issue 35): a wait without limit
    # stated as `BLOCK 0`, the owner's count before it, and the release's
    # re-arming lease; a last release carries no `HELD 1` (never replayed).
    held_acquire = resp("LOCK.ACQUIRE", lock, owner, 30000, "BLOCK", 0, "HELD", 0)
    held_release = resp("LOCK.UNLOCK", lock, owner, "LEASE", 30000)
    fenced = resp("LOCK.ACQUIRE", lock, owner, 30000, "FENCED")
    by_script = resp("EVALSHA", sha["plain_lock"], 1, lock, 30000, owner)
    fenced_by_script = resp("EVALSHA", sha["fenced_lock"], 2, lock, token, 30000, owner)
    return [
        ("plain lock + unlock, module", CYCLES, MODULE, [],
         [r for _ in range(CYCLES) for r in (acquire, resp("LOCK.UNLOCK", lock, owner))]),
        ("plain lock + unlock REQUEST, module", CYCLES, MODULE, [],
         latched(lock, lambda request: (acquire, release(request)))),
        ("plain lock + unlock, EVALSHA", CYCLES, MODULE, [],
         latched(lock, lambda request: (by_script, script_release(request)))),
        # The clients' cycle since issue 35's HELD (design §14.8), and the one
        # they sent before it: both latches written, then deleted.
        ("plain lock + unlock as the clients send it, module", CYCLES, MODULE, [],
         [r for _ in range(CYCLES) for r in (held_acquire, held_release)]),
        ("plain lock + unlock REQUEST both + DEL (clients before), module", CYCLES, MODULE, [],
         latched(lock, lambda request: (
             resp("LOCK.ACQUIRE", lock, owner, 30000, "REQUEST", "a" + request, LATCH_TTL),
             release(request),
             resp("DEL", "redisson_lock_request_latch:{%s}:a%s" % (lock, request),
                  "redisson_unlock_latch:{%s}:%s" % (lock, request))))),
        # The peers' cycle the clients are measured against (issue 35): the
        # same two requests, each a command.
        ("SET NX PX + compare-and-delete, EVALSHA", CYCLES, MODULE, [],
         [r for _ in range(CYCLES)
          for r in (resp("SET", lock, owner, "NX", "PX", 30000),
                    resp("EVALSHA", sha["compare_and_delete"], 1, lock, owner))]),
        ("fenced lock + unlock REQUEST, module", CYCLES, MODULE, [],
         latched(lock, lambda request: (fenced, release(request)))),
        ("fenced lock + unlock, EVALSHA", CYCLES, MODULE, [],
         latched(lock, lambda request: (fenced_by_script, script_release(request)))),
    ]


def workloads(scripts):
    sha = {k: hashlib.sha1(v.encode()).hexdigest() for k, v in scripts.items()}
    lock, owner = "L", "u-0000-4000-8000-000000000000:1"
    tkey = "{%s}:%s:rwlock_timeout" % (lock, owner)
    chan = "redisson_rwlock:{%s}" % lock
    lease_key = tkey + ":1"
    readers_lock = "R"

    def reader(i):
        return "r%d-0000-4000-8000-000000000000:1" % i

    def cycles(acquire, release):
        return [r for _ in range(CYCLES) for r in (acquire, release)]

    def spread(command, mode):
        """Cycles over LOCKS locks in turn, each with its own owner, as the
        bench's clients run them: names repeat, but not command after command."""
        out = []
        for c in range(CYCLES):
            name = "L%d" % (c % LOCKS)
            holder = "u%04d-0000-4000-8000-000000000000:1" % (c % LOCKS)
            out += [resp(command, name, holder, 30000), resp("RWLOCK.UNLOCK", name, holder, mode)]
        return out

    readers_setup = [resp("RWLOCK.READ", readers_lock, reader(i), 600000) for i in range(READERS)]

    def readers_unlocks(script):
        out = []
        for i in range(UNLOCKS):
            if script:
                out.append(
                    resp("EVALSHA", sha["read_unlock"], 4, readers_lock,
                         "redisson_rwlock:{%s}" % readers_lock,
                         "{%s}:%s:rwlock_timeout" % (readers_lock, reader(i)),
                         "{%s}" % readers_lock, 0, reader(i)))
            else:
                out.append(resp("RWLOCK.UNLOCK", readers_lock, reader(i), "READ"))
            out.append(resp("RWLOCK.READ", readers_lock, reader(i), 600000))
        return out

    return [
        ("read lock + unlock, floor", CYCLES, FLOOR, [],
         cycles(resp("RWLOCK.FLOOR.READ", lock, owner, lease_key, 30000),
                resp("RWLOCK.FLOOR.UNLOCK", lock, chan, owner, lease_key))),
        ("write lock + unlock, floor", CYCLES, FLOOR, [],
         cycles(resp("RWLOCK.FLOOR.WRITE", lock, owner + ":write", 30000),
                resp("RWLOCK.FLOOR.UNLOCK", lock, chan, owner + ":write"))),
        ("read lock + unlock, module", CYCLES, MODULE, [],
         cycles(resp("RWLOCK.READ", lock, owner, 30000), resp("RWLOCK.UNLOCK", lock, owner, "READ"))),
        ("read lock + unlock, EVALSHA", CYCLES, MODULE, [],
         cycles(resp("EVALSHA", sha["read_lock"], 2, lock, tkey, 30000, owner, owner + ":write"),
                resp("EVALSHA", sha["read_unlock"], 4, lock, chan, tkey, "{%s}" % lock, 0, owner))),
        ("write lock + unlock, module", CYCLES, MODULE, [],
         cycles(resp("RWLOCK.WRITE", lock, owner, 30000), resp("RWLOCK.UNLOCK", lock, owner, "WRITE"))),
        ("write lock + unlock, EVALSHA", CYCLES, MODULE, [],
         cycles(resp("EVALSHA", sha["write_lock"], 1, lock, 30000, owner + ":write"),
                resp("EVALSHA", sha["write_unlock"], 2, lock, chan, 1, 30000, owner + ":write"))),
        ("read lock + unlock over %d locks, module" % LOCKS, CYCLES, MODULE, [],
         spread("RWLOCK.READ", "READ")),
        ("write lock + unlock over %d locks, module" % LOCKS, CYCLES, MODULE, [],
         spread("RWLOCK.WRITE", "WRITE")),
        ("HINCRBY +1/-1", CYCLES, MODULE, [],
         cycles(resp("HINCRBY", "H", "f", 1), resp("HINCRBY", "H", "f", -1))),
        ("read unlock among 1000 readers, module", UNLOCKS, MODULE, readers_setup, readers_unlocks(False)),
        ("read unlock among 1000 readers, EVALSHA", UNLOCKS, MODULE, readers_setup, readers_unlocks(True)),
        ("write handoff to a BLOCK waiter, module", HANDOFFS, MODULE, [], handoff_rounds),
        ("write handoff along a line of %d BLOCK waiters, module" % LINE, HANDOFFS, MODULE, [],
         line_rounds()),
    ] + (plain_workloads(sha) if "plain_lock" in scripts else []) + (fair_workloads(sha) if "fair_lock" in scripts else []) + (semaphore_workloads(sha) if "sem_acquire" in scripts else []) + (latch_workloads(sha) if "latch_try_set_count" in scripts else []) + (permit_workloads(sha) if "permit_acquire" in scripts else [])


def count(module, scripts, name, per, setup, work):
    """Instructions per `per` operations of `work`, after `setup` and a warm-up run."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
             "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--loadmodule", str(module)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            conn = connect_own(server, port)
            conn.run([resp("SCRIPT", "LOAD", body) for body in scripts.values()])
            conn.run(setup)
            run = work if callable(work) else lambda _: conn.run(work)
            run(port)
            subprocess.run(["callgrind_control", "-i", "on", str(server.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            run(port)
            subprocess.run(["callgrind_control", "-i", "off", str(server.pid)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if work is handoff_rounds:
                info = conn.reply_to(resp("INFO", "rwlock")).decode()
                served = int(re.search(r"rwlock_waits_served:(\d+)", info).group(1))
                if served != 2 * per:
                    raise RuntimeError(f"{name}: {served} of {2 * per} rounds were handoffs")
            conn.sock.sendall(resp("SHUTDOWN", "NOSAVE"))
            server.wait(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        totals = subprocess.run(["callgrind_annotate", str(out)], capture_output=True, text=True).stdout
        match = re.search(r"^\s*([\d,]+) .*PROGRAM TOTALS", totals, re.M)
        if not match:
            raise RuntimeError(f"no totals for {name}")
        return int(match.group(1).replace(",", "")) / per


# (cheaper, dearer, target): every operation at least 3x cheaper than
# Redisson's script (20x among 1,000 readers, whose unlock scans every lease),
def fair_workloads(sha):
    """The fair lock's cycles, nobody waiting: the module against Redisson
    4.7's fair_lock.lua + fair_unlock.lua (with `now`, the client's clock,
    fixed: an empty line never compares it)."""
    lock, owner = "FL", "u-0000-4000-8000-000000000000:1"
    queue, timeout = "redisson_lock_queue:{%s}" % lock, "redisson_lock_timeout:{%s}" % lock
    chan = "redisson_lock__channel:{%s}" % lock
    now = int(time.time() * 1000)

    def release(request):
        return resp("FAIRLOCK.UNLOCK", lock, owner, "REQUEST", request, LATCH_TTL)

    def script_release(request):
        latch = "redisson_unlock_latch:{%s}:%s" % (lock, request)
        return resp("EVALSHA", sha["fair_unlock"], 5, lock, queue, timeout, chan, latch, 0, 30000,
                    owner, now, "PUBLISH", LATCH_TTL)

    acquire = resp("FAIRLOCK.ACQUIRE", lock, owner, 30000, "WAIT", 300000)
    by_script = resp("EVALSHA", sha["fair_lock"], 3, lock, queue, timeout, 30000, owner, 300000, now)
    return [
        ("fair lock + unlock REQUEST, module", CYCLES, MODULE, [],
         latched(lock, lambda request: (acquire, release(request)))),
        ("fair lock + unlock, EVALSHA", CYCLES, MODULE, [],
         latched(lock, lambda request: (by_script, script_release(request)))),
    ]


def semaphore_workloads(sha):
    """The semaphore's cycle, acquire 1 + release 1 with permits to spare
    and nobody waiting: the module against Redisson 4.7's
    semaphore_acquire.lua + semaphore_release.lua (which publishes the new
    count, as the module's release does)."""
    name = "SEM"
    setup = [resp("SET", name, 1000)]
    module = (resp("SEMAPHORE.ACQUIRE", name, 1), resp("SEMAPHORE.RELEASE", name, 1))
    by_script = (resp("EVALSHA", sha["sem_acquire"], 1, name, 1),
                 resp("EVALSHA", sha["sem_release"], 2, name, "redisson_sc:{%s}" % name, 1, "PUBLISH"))
    return [
        ("semaphore acquire + release, module", CYCLES, MODULE, setup,
         [r for _ in range(CYCLES) for r in module]),
        ("semaphore acquire + release, EVALSHA", CYCLES, MODULE, setup,
         [r for _ in range(CYCLES) for r in by_script]),
    ]


def permit_workloads(sha):
    """The permit-expirable semaphore's cycle, one permit with a lease taken
    and given back by its id, permits to spare and none expired: the module
    (whose ids are its own: each release names the id its acquisition
    replied, one round trip each) against Redisson 4.7's permit_acquire.lua
    + permit_release.lua (`tryAcquire(1, lease)`, `release(id)`), given a
    fresh 16-byte id per cycle as Redisson's client makes them."""
    name = "PS"
    chan, timeouts = "redisson_sc:{%s}" % name, "{%s}:timeout" % name
    setup = [resp("SET", name, 1000)]
    conns = []

    def module(port):
        if not conns:
            conns.append(Conn(port))
        for _ in range(CYCLES):
            (permit,) = conns[0].reply_to(resp("PERMIT.ACQUIRE", name, 1, LATCH_TTL))
            if conns[0].reply_to(resp("PERMIT.TRYRELEASE", name, permit)) != b"1":
                raise RuntimeError("a permit was not given back")

    def by_script():
        now = int(time.time() * 1000)
        out = []
        for _ in range(CYCLES):
            permit = os.urandom(16)
            out.append(resp("EVALSHA", sha["permit_acquire"], 3, name, timeouts, chan, 1,
                            now + LATCH_TTL, now, 922337203685477, "PUBLISH", permit))
            out.append(resp("EVALSHA", sha["permit_release"], 3, name, chan, timeouts, permit, 1,
                            now, "PUBLISH"))
        return out

    return [
        ("permit acquire + release, module", CYCLES, MODULE, setup, module),
        ("permit acquire + release, EVALSHA", CYCLES, MODULE, setup,
         lambda port: Conn(port).run(by_script())),
    ]


def latch_workloads(sha):
    """The count-down latch's cycle: a count of 1 set, then counted down to
    zero (the latch deleted, `0` published), the module against Redisson
    4.7's trySetCount and countDown scripts."""
    latch = "CL"
    chan = "redisson_countdownlatch__channel__{%s}" % latch
    return [
        ("latch try-set 1 + count down, module", CYCLES, MODULE, [],
         [r for _ in range(CYCLES)
          for r in (resp("LATCH.TRYSETCOUNT", latch, 1), resp("LATCH.COUNTDOWN", latch))]),
        ("latch try-set 1 + count down, EVALSHA", CYCLES, MODULE, [],
         [r for _ in range(CYCLES)
          for r in (resp("EVALSHA", sha["latch_try_set_count"], 2, latch, chan, 1, 1, "PUBLISH"),
                    resp("EVALSHA", sha["latch_count_down"], 2, latch, chan, 0, "PUBLISH"))]),
    ]


# the module's cycles within 1.1x of the layout floor's.
TARGETS = [
    ("read lock + unlock, module", "read lock + unlock, EVALSHA", ">=", 3.0),
    ("write lock + unlock, module", "write lock + unlock, EVALSHA", ">=", 3.0),
    ("read unlock among 1000 readers, module", "read unlock among 1000 readers, EVALSHA", ">=", 20.0),
    ("read lock + unlock, floor", "read lock + unlock, module", "<=", 1.1),
    ("write lock + unlock, floor", "write lock + unlock, module", "<=", 1.1),
]
# The plain lock's: Redisson's unlock always takes a latch; the module's
# release is judged with it and without.
PLAIN_TARGETS = [
    ("plain lock + unlock REQUEST, module", "plain lock + unlock, EVALSHA", ">=", 3.0),
    ("plain lock + unlock, module", "plain lock + unlock, EVALSHA", ">=", 3.0),
    # Issue 35: the clients' cycle costs the server no more than the cycle
    # of the libraries they are compared with.
    ("SET NX PX + compare-and-delete, EVALSHA", "plain lock + unlock as the clients send it, module", "<=", 1.0),
    ("fenced lock + unlock REQUEST, module", "fenced lock + unlock, EVALSHA", ">=", 3.0),
    ("fair lock + unlock REQUEST, module", "fair lock + unlock, EVALSHA", ">=", 3.0),
    ("semaphore acquire + release, module", "semaphore acquire + release, EVALSHA", ">=", 3.0),
    ("latch try-set 1 + count down, module", "latch try-set 1 + count down, EVALSHA", ">=", 3.0),
    ("permit acquire + release, module", "permit acquire + release, EVALSHA", ">=", 3.0),
]
# Shown without a target: how each compares with one plain command per request.
REFERENCES = [
    ("HINCRBY +1/-1", "read lock + unlock, module"),
    ("HINCRBY +1/-1", "write lock + unlock, module"),
    ("HINCRBY +1/-1", "read lock + unlock, floor"),
    ("HINCRBY +1/-1", "write lock + unlock, floor"),
    ("HINCRBY +1/-1", "plain lock + unlock, module"),
]


def verdicts(counts):
    """Prints each target's ratio (dearer / cheaper) and verdict; returns
    whether every one was met."""
    print("\nratios (instructions):")
    every = True
    targets = TARGETS + [t for t in PLAIN_TARGETS if t[0] in counts and t[1] in counts]
    for cheaper, dearer, op, target in targets:
        ratio = counts[dearer] / counts[cheaper]
        met = ratio >= target if op == ">=" else ratio <= target
        every &= met
        print(f"  {dearer} / {cheaper}: {ratio:.2f}x  target {op} {target}: {'PASS' if met else 'FAIL'}")
    for base, other in REFERENCES:
        if other not in counts:
            continue
        print(f"  {other} / {base}: {counts[other] / counts[base]:.2f}x")
    return every


def main():
    module = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target/release/librwlock.so")
    floor = Path(sys.argv[2] if len(sys.argv) > 2 else
                 os.environ.get("RWLOCK_FLOOR_MODULE") or ROOT / "target/release/librwlock_floor.so")
    # Redisson's scripts as `make oracle` extracts them from its jars (the
    # variables override).
    lua = os.environ.get("RWLOCK_REDISSON_LUA") or str(ROOT / "target/redisson-lua/3.17.0")
    if not (Path(lua) / "read_lock.lua").is_file():
        sys.exit(f"no Redisson scripts in {lua}: run `make oracle` (or set RWLOCK_REDISSON_LUA)")
    scripts = {k: (Path(lua) / f"{k}.lua").read_text()
               for k in ("read_lock", "read_unlock", "write_lock", "write_unlock")}
    plain = os.environ.get("RWLOCK_REDISSON_LOCK_LUA") or str(ROOT / "target/redisson-lua/4.7.0")
    for key, name in (("plain_lock", "lock"), ("plain_unlock", "unlock"), ("fenced_lock", "fenced_lock"),
                      ("fair_lock", "fair_lock"), ("fair_unlock", "fair_unlock"),
                      ("sem_acquire", "semaphore_acquire"), ("sem_release", "semaphore_release"),
                      ("latch_try_set_count", "latch_try_set_count"),
                      ("latch_count_down", "latch_count_down"),
                      ("permit_acquire", "permit_acquire"), ("permit_release", "permit_release")):
        scripts[key] = (Path(plain) / f"{name}.lua").read_text()
    scripts["compare_and_delete"] = COMPARE_AND_DELETE
    if not floor.is_file():
        sys.exit(f"no layout floor at {floor}: cargo build --release -p rwlock-floor")
    print(f"server instructions per operation (callgrind), module {module}, floor {floor}")
    counts = {}
    for name, per, server, setup, work in workloads(scripts):
        loaded = floor if server == FLOOR else module
        try:
            counts[name] = count(loaded, scripts, name, per, setup, work)
        except RuntimeError as e:
            # An older build (PROFILE_MODULE) lacks a later kind's commands:
            # its rows, and the targets that name them, are left out.
            if "unknown command" not in str(e):
                raise
            print(f"  {name:<46} {'n/a':>12} (this module lacks the command)")
            continue
        unit = "per unlock" if "readers" in name else "per round" if "handoff" in name else "per cycle"
        print(f"  {name:<46} {counts[name]:>12,.0f} {unit}")
    if not verdicts(counts):
        print("targets NOT met (see above)")


if __name__ == "__main__":
    main()

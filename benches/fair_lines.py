#!/usr/bin/env python3
"""The fair lock's operations against the length of its line: server
instructions (callgrind) per operation of the module's FAIRLOCK.* and of
Redisson 4.7's fair-lock scripts by EVALSHA, with N = 10 and N = 1,000
waiters queued (distinct owners; FAIRLOCK.ACQUIRE … WAIT without BLOCK on the
module's side, fair_lock.lua on the scripts').

    benches/fair_lines.py [MODULE.so]   (after `make oracle`; RWLOCK_REDISSON_LOCK_LUA=DIR overrides)

RWLOCK_FAIR_KEEP=DIR keeps each window's callgrind dump there (named
N-side-step), for callgrind_annotate --inclusive=yes.

Each row's operation runs once on each of K locks built alike (a holder and
N waiters), so no operation needs undoing before the next is counted: the
count of a window (instrumentation on, the K requests pipelined, off, dump)
divided by K. One warm-up lock per side goes through every step first,
uncounted. The steps, in order on every lock:

  unlock         the holder's release (FAIRLOCK.UNLOCK … REQUEST vs fair_unlock.lua)
  head acquires  the line's head takes the free lock (FAIRLOCK.ACQUIRE vs
                 fair_lock.lua); every other waiter's deadline moves
  (uncounted: the old holder joins the tail: N waiters again)
  retry refused  the middle waiter asks again and stays queued
  cancel head    the head gives up (FAIRLOCK.CANCEL vs fair_acquire_failed.lua):
                 every waiter behind it moves
  (uncounted: the head joins again at the tail)
  cancel tail    the last waiter gives up: nobody behind it

The server runs with `hz 1`, so that its cron (which counts instructions of
its own, whatever the requests) runs about once a window; an empty window
(one PING) is counted and printed for scale, never subtracted. Every reply is
checked (released, acquired, refused with a TTL, cancelled) and every line's
length after setup, so a miscounted step fails the run.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from callgrind import LATCH_TTL, ROOT, Conn, connect_own, free_port, resp  # noqa: E402

# (N, K): the line's length and how many locks each row's count divides by.
LINES = [(10, 100), (1000, 10)]
LEASE = 600000  # outlives setup under valgrind: no hold expires mid-run
WAIT = 300000   # Redisson's fairLockWaitTimeout default
TARGET = 3.0


def owner(tag, i):
    return "%s%05d-0000-4000-8000-000000000000:1" % (tag, i)


def send(conn, requests):
    """Pipelines the requests (in chunks) and returns every reply; an error reply raises."""
    out = []
    for i in range(0, len(requests), 500):
        chunk = requests[i : i + 500]
        conn.sock.sendall(b"".join(chunk))
        out += [conn.reply() for _ in chunk]
    return out


class Side:
    """One side's requests for lock number `k` of a line of `n`: the module's
    commands, or Redisson's scripts by EVALSHA (`now` is the client's clock
    the scripts take, fixed for the run: no deadline in it falls due)."""

    def __init__(self, script, sha, n, now):
        self.script, self.sha, self.n, self.now = script, sha, n, now

    def lock(self, k):
        return ("FS%d" if self.script else "FM%d") % k

    def keys(self, k):
        name = self.lock(k)
        return ("redisson_lock_queue:{%s}" % name, "redisson_lock_timeout:{%s}" % name,
                "redisson_lock__channel:{%s}" % name)

    def acquire(self, k, who):
        if self.script:
            queue, timeout, _ = self.keys(k)
            return resp("EVALSHA", self.sha["fair_lock"], 3, self.lock(k), queue, timeout, LEASE, who, WAIT,
                        self.now)
        return resp("FAIRLOCK.ACQUIRE", self.lock(k), who, LEASE, "WAIT", WAIT)

    def unlock(self, k, who, request):
        if self.script:
            queue, timeout, chan = self.keys(k)
            latch = "redisson_unlock_latch:{%s}:%s" % (self.lock(k), request)
            return resp("EVALSHA", self.sha["fair_unlock"], 5, self.lock(k), queue, timeout, chan, latch, 0,
                        LEASE, who, self.now, "PUBLISH", LATCH_TTL)
        return resp("FAIRLOCK.UNLOCK", self.lock(k), who, "REQUEST", request, LATCH_TTL)

    def cancel(self, k, who):
        if self.script:
            queue, timeout, _ = self.keys(k)
            return resp("EVALSHA", self.sha["fair_acquire_failed"], 2, queue, timeout, who, WAIT)
        return resp("FAIRLOCK.CANCEL", self.lock(k), who, "WAIT", WAIT)

    def cancelled(self, reply):
        # The module replies 1 (it was queued); the script is EVAL_VOID: nil.
        return reply is None if self.script else reply == b"1"


class Server:
    """redis-server under callgrind, instrumentation off until a window."""

    def __init__(self, module, tmp):
        self.port = free_port()
        self.out = Path(tmp) / "callgrind.out"
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={self.out}",
             "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp, "--hz", "1", "--loadmodule", str(module)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.dumps = 0
        self.conn = connect_own(self.proc, self.port)

    def control(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def window(self, requests, label):
        """The server's instructions while it answers `requests` (pipelined);
        returns (count, replies). Keeps the dump as `label` under RWLOCK_FAIR_KEEP."""
        self.control("-i", "on")
        replies = send(self.conn, requests)
        self.control("-i", "off")
        self.control("-d")
        self.dumps += 1
        dump = Path(f"{self.out}.{self.dumps}")
        keep = os.environ.get("RWLOCK_FAIR_KEEP")
        if keep:
            shutil.copy(dump, Path(keep) / label)
        for line in dump.read_text().splitlines():
            # "totals:" is the dump's count since the last dump (a dump zeroes
            # the counters); "summary:" stays 0 with --instr-atstart=no.
            if line.startswith("totals:"):
                return int(line.split()[1]), replies
        raise RuntimeError(f"no totals in {dump}")

    def stop(self):
        try:
            self.conn.sock.sendall(resp("SHUTDOWN", "NOSAVE"))
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def expect(name, replies, ok):
    bad = [r for r in replies if not ok(r)]
    if bad:
        raise RuntimeError(f"{name}: {len(bad)} of {len(replies)} replies unexpected, e.g. {bad[0]!r}")


def refused(reply):
    # Still queued: the reply is the lock's TTL (an integer), never nil (acquired).
    return reply is not None and not isinstance(reply, list) and int(reply) >= 0


def measure(server, side, n, k):
    """Instructions per operation of each step on a line of `n`, over `k` locks
    (lock 0 is the warm-up's, uncounted)."""
    conn = server.conn
    holder = owner("h", 0)
    waiters = [owner("w", i) for i in range(n)]
    locks = range(k + 1)
    expect("holder", send(conn, [side.acquire(j, holder) for j in locks]), lambda r: r is None)
    expect("queue", send(conn, [side.acquire(j, w) for j in locks for w in waiters]), refused)
    queue_len = send(conn, [resp("LLEN", side.keys(j)[0]) for j in locks])
    expect(f"line of {n}", queue_len, lambda r: int(r) == n)

    def step(name, request, ok):
        expect(name + " (warm-up)", [conn.reply_to(request(0))], ok)
        label = "%d-%s-%s" % (n, "script" if side.script else "module", name.replace(" ", "_"))
        total, replies = server.window([request(j) for j in range(1, k + 1)], label)
        expect(name, replies, ok)
        return total / k

    head, middle = waiters[0], waiters[n // 2]
    out = {}
    out["unlock"] = step("unlock", lambda j: side.unlock(j, holder, "%032x" % j), lambda r: r == b"1")
    out["head acquires"] = step("head acquires", lambda j: side.acquire(j, head), lambda r: r is None)
    expect("holder rejoins", send(conn, [side.acquire(j, holder) for j in locks]), refused)
    out["retry refused"] = step("retry refused", lambda j: side.acquire(j, middle), refused)
    out["cancel head"] = step("cancel head", lambda j: side.cancel(j, waiters[1]), side.cancelled)
    expect("head rejoins", send(conn, [side.acquire(j, waiters[1]) for j in locks]), refused)
    expect(f"line of {n} again", send(conn, [resp("LLEN", side.keys(j)[0]) for j in locks]),
           lambda r: int(r) == n)
    out["cancel tail"] = step("cancel tail", lambda j: side.cancel(j, waiters[1]), side.cancelled)
    return out


# How each operation's cost grows with the line (both sides do the same
# list and zset work; the module moves deadlines on the open key and finds
# the caller with LPOS rather than reading the whole line).
GROWTH = {
    "unlock": "O(1)",
    "head acquires": "O(N): a deadline moved per other waiter",
    "retry refused": "O(1)",
    "cancel head": "O(N): a deadline moved per waiter behind",
    "cancel tail": "O(N): LPOS and LREM scan the line (the script: LRANGE)",
}


def main():
    module = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target/release/librwlock.so")
    # Redisson 4.7's scripts: `make oracle` extracts them from its jar.
    lua = os.environ.get("RWLOCK_REDISSON_LOCK_LUA") or str(ROOT / "target/redisson-lua/4.7.0")
    for name in ("fair_lock", "fair_unlock", "fair_acquire_failed"):
        if not (Path(lua) / f"{name}.lua").is_file():
            sys.exit(f"no {name}.lua in {lua}: run `make oracle` (or set RWLOCK_REDISSON_LOCK_LUA)")
    if not module.is_file():
        sys.exit(f"no module at {module}")
    # A file's script is the file less any '--' comment lines and its final newline (an
    # extracted script has neither; a hand-annotated copy given by the variable may).
    scripts = {}
    for name in ("fair_lock", "fair_unlock", "fair_acquire_failed"):
        text = (Path(lua) / f"{name}.lua").read_text()
        scripts[name] = "\n".join(l for l in text.split("\n") if not l.startswith("--")).rstrip("\n")
    sha = {k: hashlib.sha1(v.encode()).hexdigest() for k, v in scripts.items()}
    print(f"server instructions per operation (callgrind), module {module}")
    rows = []
    every = True
    handoffs_met = True
    for n, k in LINES:
        with tempfile.TemporaryDirectory() as tmp:
            server = Server(module, tmp)
            try:
                server.conn.run([resp("SCRIPT", "LOAD", body) for body in scripts.values()])
                empty, _ = server.window([resp("PING")], "%d-empty" % n)
                now = int(time.time() * 1000)
                mod = measure(server, Side(False, sha, n, now), n, k)
                scr = measure(server, Side(True, sha, n, now), n, k)
            finally:
                server.stop()
        print(f"\nline of N = {n} waiters: each row over {k} locks (+1 warm-up), "
              f"an empty window {empty:,} instructions ({empty / k:,.0f} per operation)")
        print(f"  {'operation':<16} {'module':>12} {'script':>12} {'ratio':>7}  target >= {TARGET}")
        for op in mod:
            ratio = scr[op] / mod[op]
            met = ratio >= TARGET
            every &= met
            rows.append((n, op, mod[op], scr[op], ratio, met))
            print(f"  {op:<16} {mod[op]:>12,.0f} {scr[op]:>12,.0f} {ratio:>6.2f}x  {'PASS' if met else 'FAIL'}")
        hand_m, hand_s = mod["unlock"] + mod["head acquires"], scr["unlock"] + scr["head acquires"]
        handoff = hand_s / hand_m
        # The target is the handoff through the line (and the cycle
        # with nobody waiting, which make profile measures).
        handoffs_met &= handoff >= TARGET
        print(f"  {'handoff (sum)':<16} {hand_m:>12,.0f} {hand_s:>12,.0f} {handoff:>6.2f}x  "
              f"{'PASS' if handoff >= TARGET else 'FAIL'}")
    print("\ngrowth with N (instructions at N = 1000 / at N = 10), module and script:")
    small = {op: (m, s) for n, op, m, s, _, _ in rows if n == LINES[0][0]}
    for n, op, m, s, _, _ in rows:
        if n == LINES[-1][0]:
            print(f"  {op:<16} module {m / small[op][0]:>7.1f}x  script {s / small[op][1]:>7.1f}x  "
                  f"{GROWTH[op]}")
    print(f"handoff through every line >= {TARGET}x: {'met' if handoffs_met else 'NOT met'}; "
          f"every operation >= {TARGET}x: {'met' if every else 'not met (rows marked FAIL)'}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make bench-clients: each client against its language's most-used lock library.

One redis-server with the module (bound to 127.0.0.1 on a free port, stopped by
its PID), then for each language, each comparison and each scenario, every
library runs REPS times, the order of the libraries alternating from one
repetition to the next. A run is one process of the language's bench program
(benches/clients/<language>), which takes its connections and warms up, says
READY, runs the scenario for SECONDS once told GO, and prints its counts as one
JSON line; INFO commandstats and INFO cpu are read around that window only, so
set-up and tear-down are not counted. The medians of the repetitions are
printed, with each figure of ours over the peer's from the same invocation. The
variant "replica" attaches one replica to the server and runs it all again.

This measures and prints; it asserts nothing about timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Scenarios: (name, scenario the program runs, workers).
UNC1 = ("uncontended, 1 worker", "uncontended", 1)
UNC8 = ("uncontended, 8 workers", "uncontended", 8)
CONT8 = ("one lock, 8 workers", "contended", 8)
RW = ("8 readers + 1 writer", "rw", 8)
TRY = ("refused try", "try", 1)


@dataclass
class Comparison:
    title: str
    ours: str
    peers: list[str]
    scenarios: list[tuple[str, str, int]]


@dataclass
class Language:
    name: str
    # The bench program's command line, before its own arguments.
    command: list[str]
    comparisons: list[Comparison]
    # The peer's option for a replica, passed to every run of the variant.
    replica_note: str = ""


def languages() -> dict[str, Language]:
    go_bin = ROOT / "target" / "bench-clients" / "go-bench"
    return {
        "go": Language(
            "Go",
            [str(go_bin)],
            [
                Comparison("Lock vs go-redsync v4 Mutex", "rwlock", ["redsync"], [UNC1, UNC8, CONT8, TRY]),
                Comparison("ReadWriteLock (go-redsync has none)", "rwlock", [], [RW]),
            ],
        ),
        "python": Language(
            "Python",
            [sys.executable, str(HERE / "python" / "bench.py")],
            [
                Comparison(
                    "Lock vs redis-py Lock and python-redis-lock",
                    "rwlock",
                    ["redis-py", "python-redis-lock"],
                    [UNC1, UNC8, CONT8, TRY],
                ),
                Comparison("ReadWriteLock (neither peer has one)", "rwlock", [], [RW]),
            ],
        ),
        "node": Language(
            "Node.js",
            ["node", str(HERE / "node" / "bench.js")],
            [
                Comparison("Lock vs redlock", "rwlock", ["redlock"], [UNC1, UNC8, CONT8, TRY]),
                Comparison("ReadWriteLock (redlock has none)", "rwlock", [], [RW]),
            ],
        ),
        "java": Language(
            "Java",
            # The classpath, written by prepare("java").
            ["java", "@" + str(HERE / "java" / "target" / "bench.args")],
            [
                Comparison("RLock", "rwlock-lock", ["redisson-lock"], [UNC1, UNC8, CONT8, TRY]),
                Comparison("RFairLock", "rwlock-fair", ["redisson-fair"], [UNC1, CONT8, TRY]),
                Comparison("RReadWriteLock", "rwlock-rw", ["redisson-rw"], [UNC1, RW]),
            ],
        ),
        "rust": Language(
            "Rust",
            [str(ROOT / "target" / "bench-clients" / "rust-bench")],
            [
                Comparison("Lock (async) vs rslock", "rwlock", ["rslock"], [UNC1, UNC8, CONT8, TRY]),
                Comparison("ReadWriteLock (async; rslock has none)", "rwlock", [], [RW]),
            ],
        ),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A redis-server with the module, bound to 127.0.0.1, stopped by its PID."""

    def __init__(self, binary: str, module: str, replica_of: Optional[int] = None) -> None:
        self.port = free_port()
        # A replica writes the master's RDB to its directory: a temporary one.
        self.dir = tempfile.TemporaryDirectory(prefix="bench-clients-")
        args = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", self.dir.name, "--loadmodule", module,
        ]
        if replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.client = redis.Redis(port=self.port, decode_responses=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start")
                time.sleep(0.05)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.dir.cleanup()


def wait_replica_online(master: Server) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        info = master.client.info("replication")
        slave = info.get("slave0")
        if info.get("connected_slaves") == 1 and isinstance(slave, dict) and slave.get("state") == "online":
            return
        time.sleep(0.1)
    raise RuntimeError("the replica did not come online")


def snapshot(client: redis.Redis) -> dict[str, Any]:
    # One INFO for the three sections: one command and one socket read of
    # our own between two snapshots.
    info: dict[str, Any] = client.execute_command(  # type: ignore[no-untyped-call]
        "INFO", "commandstats", "cpu", "stats"
    )
    stats = {k[len("cmdstat_"):]: (v["calls"], v["usec"]) for k, v in info.items() if k.startswith("cmdstat_")}
    return {
        "cmd": stats,
        "cpu": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
        "reads": int(info["total_reads_processed"]),
        "connections": int(info["total_connections_received"]),
    }


def diff(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, tuple[int, int]], float, int, int]:
    out: dict[str, tuple[int, int]] = {}
    replconf = 0
    for name, (calls, usec) in after["cmd"].items():
        # A replica's acknowledgements (REPLCONF ACK: once a second, and in
        # answer to each WAIT) are the replication's, not the locks', and so
        # are the socket reads that bring them.
        if name == "replconf":
            replconf = calls - before["cmd"].get(name, (0, 0))[0]
            continue
        c0, u0 = before["cmd"].get(name, (0, 0))
        if calls - c0 > 0:
            out[name] = (calls - c0, usec - u0)
    # The first snapshot's INFO is counted by the second (a command is
    # counted once it ran), as is the socket read that brought it.
    if "info" in out:
        calls, usec = out["info"]
        left = calls - 1
        if left > 0:
            out["info"] = (left, usec * left // calls)
        else:
            del out["info"]
    reads = after["reads"] - before["reads"] - 1 - replconf
    return out, after["cpu"] - before["cpu"], reads, after["connections"] - before["connections"]


def pct(samples: list[float], p: float) -> Optional[float]:
    if not samples:
        return None
    s = sorted(samples)
    i = min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[i]


@dataclass
class Run:
    throughput: float
    cmds_per_cycle: float
    reads_per_cycle: float
    connections_per_cycle: float
    cmd_us_per_cycle: float
    cpu_us_per_cycle: float
    breakdown: dict[str, float]
    handoff: list[Optional[float]] = field(default_factory=list)
    same_again: Optional[float] = None
    fairness: Optional[float] = None
    writer: list[Optional[float]] = field(default_factory=list)
    writer_cycles: Optional[int] = None
    failed: int = 0


def run_once(
    lang: Language,
    lib: str,
    scenario: str,
    workers: int,
    server: Server,
    replica: Optional[Server],
    seconds: float,
    warmup: float,
) -> Run:
    server.client.flushall()
    args = lang.command + [
        "--port", str(server.port), "--lib", lib, "--scenario", scenario,
        "--workers", str(workers), "--seconds", str(seconds), "--warmup", str(warmup),
    ]
    env = dict(os.environ)
    env.pop("BENCH_REPLICA_PORT", None)
    if replica is not None:
        # For the peers that wait for replicas only when told of them (Redisson).
        env["BENCH_REPLICA_PORT"] = str(replica.port)
    # The program's stderr (Redisson's logger, warnings) is shown only when it fails.
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def failed(what: str) -> RuntimeError:
        proc.kill()
        proc.wait()
        log.seek(0)
        return RuntimeError(f"{' '.join(args)}: {what}\n{log.read()[-4000:]}")

    line = proc.stdout.readline().strip()
    if line != "READY":
        raise failed(f"expected READY, got {line!r}")
    before = snapshot(server.client)
    proc.stdin.write("GO\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    after = snapshot(server.client)
    proc.stdin.close()
    rc = proc.wait(timeout=120)
    if not line or rc != 0:
        raise failed(f"exit {rc}, output {line!r}")
    log.close()
    result = json.loads(line)
    cmds, cpu, reads, connections = diff(before, after)
    cycles = max(1, int(result["cycles"]))
    calls = sum(c for c, _ in cmds.values())
    usec = sum(u for _, u in cmds.values())
    run = Run(
        throughput=result["cycles"] / result["elapsed_s"],
        cmds_per_cycle=calls / cycles,
        reads_per_cycle=reads / cycles,
        connections_per_cycle=connections / cycles,
        cmd_us_per_cycle=usec / cycles,
        cpu_us_per_cycle=cpu * 1e6 / cycles,
        breakdown={k: c / cycles for k, (c, _) in sorted(cmds.items())},
        failed=int(result.get("failed", 0)),
    )
    handoff = result.get("handoff_us") or []
    if handoff:
        run.handoff = [pct(handoff, 50), pct(handoff, 99), pct(handoff, 99.9)]
    if "same_again" in result:
        run.same_again = float(result["same_again"])
    per_worker = result.get("per_worker") or []
    if scenario == "contended" and per_worker:
        low = min(per_worker)
        run.fairness = max(per_worker) / low if low else float("inf")
    waits = result.get("writer_wait_us") or []
    if scenario == "rw":
        run.writer = [pct(waits, 50), pct(waits, 99)]
        run.writer_cycles = len(waits)
    return run


def median(values: list[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(v: Optional[float], unit: str = "", digits: int = 0) -> str:
    if v is None:
        return "—"
    if v == float("inf"):
        return "∞"
    if digits == 0 and abs(v) >= 999.5:
        return f"{v:,.0f}{unit}"
    return f"{v:.{digits}f}{unit}"


def fmt_us(v: Optional[float]) -> str:
    if v is None:
        return "—"
    if v >= 10_000:
        return f"{v / 1000:.0f} ms"
    if v >= 1000:
        return f"{v / 1000:.1f} ms"
    return f"{v:.0f} µs"


def ratio(a: Optional[float], b: Optional[float]) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}x"


def summarize(runs: list[Run]) -> dict[str, Any]:
    s: dict[str, Any] = {
        "throughput": median([r.throughput for r in runs]),
        "cmds": median([r.cmds_per_cycle for r in runs]),
        "reads": median([r.reads_per_cycle for r in runs]),
        "connections": median([r.connections_per_cycle for r in runs]),
        "cmd_us": median([r.cmd_us_per_cycle for r in runs]),
        "cpu_us": median([r.cpu_us_per_cycle for r in runs]),
        "failed": median([float(r.failed) for r in runs]),
        "runs": len(runs),
    }
    # The commands of the run whose throughput is the median (a breakdown
    # of medians would not add up).
    mid = sorted(runs, key=lambda r: r.throughput)[len(runs) // 2]
    s["breakdown"] = mid.breakdown
    if any(r.handoff for r in runs):
        s["handoff"] = [median([r.handoff[i] if r.handoff else None for r in runs]) for i in range(3)]
        s["same_again"] = median([r.same_again for r in runs])
        s["fairness"] = median([r.fairness for r in runs])
    if any(r.writer for r in runs):
        s["writer"] = [median([r.writer[i] if r.writer else None for r in runs]) for i in range(2)]
        s["writer_cycles"] = median([float(r.writer_cycles or 0) for r in runs])
    return s


def breakdown_text(b: dict[str, float]) -> str:
    return ", ".join(f"{k.upper()} {v:.2f}" for k, v in b.items() if v >= 0.005)


def table(lang: Language, variant: str, comp: Comparison, results: dict[tuple[str, str], dict[str, Any]]) -> str:
    lines = [f"### {lang.name}: {comp.title} ({variant})", ""]
    lines.append(
        "| scenario | library | cycles/s | socket reads/cycle | new connections/cycle | commands/cycle | server µs/cycle (commandstats) | server CPU µs/cycle "
        "| handoff p50/p99/p99.9 | same worker again | fairness max/min | writer wait p50/p99 (writes) |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, scenario, workers in comp.scenarios:
        for lib in [comp.ours] + comp.peers:
            s = results.get((lib, label))
            if s is None:
                continue
            handoff = "/".join(fmt_us(v) for v in s["handoff"]) if "handoff" in s else "—"
            same = fmt(100 * s["same_again"], "%", 1) if s.get("same_again") is not None else "—"
            fair = fmt(s.get("fairness"), "", 2) if "fairness" in s else "—"
            writer = (
                "/".join(fmt_us(v) for v in s["writer"]) + f" ({fmt(s['writer_cycles'])})" if "writer" in s else "—"
            )
            failed = f" ({fmt(s['failed'])} failed)" if s["failed"] else ""
            lines.append(
                f"| {label} | {lib} | {fmt(s['throughput'])}{failed} | {fmt(s['reads'], '', 2)} | {fmt(s['connections'], '', 2)} | {fmt(s['cmds'], '', 2)} | {fmt(s['cmd_us'], '', 1)} "
                f"| {fmt(s['cpu_us'], '', 1)} | {handoff} | {same} | {fair} | {writer} |"
            )
    lines.append("")
    ratios = []
    for label, scenario, workers in comp.scenarios:
        ours = results.get((comp.ours, label))
        for peer in comp.peers:
            p = results.get((peer, label))
            if ours is None or p is None:
                continue
            text = (
                f"- {label}, {comp.ours} / {peer}: throughput **{ratio(ours['throughput'], p['throughput'])}**, "
                f"server µs per cycle {ratio(ours['cmd_us'], p['cmd_us'])}, "
                f"server CPU per cycle {ratio(ours['cpu_us'], p['cpu_us'])}"
            )
            if "handoff" in ours and "handoff" in p:
                text += f", handoff p99 {ratio(ours['handoff'][1], p['handoff'][1])}"
            ratios.append(text)
    if ratios:
        lines += ratios + [""]
    lines.append("Commands per cycle (the median run):")
    lines.append("")
    for label, scenario, workers in comp.scenarios:
        for lib in [comp.ours] + comp.peers:
            s = results.get((lib, label))
            if s is not None:
                lines.append(f"- {label}, {lib}: {breakdown_text(s['breakdown'])}")
    lines.append("")
    return "\n".join(lines)


def prepare(name: str) -> None:
    """Builds the language's bench program (its dependencies from its registry, once)."""
    out = ROOT / "target" / "bench-clients"
    out.mkdir(parents=True, exist_ok=True)
    if name == "go":
        subprocess.run(["go", "build", "-o", str(out / "go-bench"), "."], cwd=HERE / "go", check=True)
    elif name == "python":
        # python-redis-lock, pinned; redis-py is the project's own dependency.
        if subprocess.run([sys.executable, "-c", "import redis_lock"], capture_output=True).returncode != 0:
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 "python-redis-lock==4.0.0"],
                check=True,
                env={**os.environ, "PIP_ROOT_USER_ACTION": "ignore"},
            )
    elif name == "node":
        # clients/node's npm ci builds its dist/ (its prepare script).
        for folder in (ROOT / "clients" / "node", HERE / "node"):
            subprocess.run(["npm", "ci", "--prefer-offline", "--no-audit", "--no-fund"], cwd=folder, check=True)
    elif name == "java":
        mvn = ["mvn", "-B", "-q", "-ntp", "-Dstyle.color=never"]
        # This checkout's client into ~/.m2, as its README installs it.
        subprocess.run(
            mvn + ["install", "-DskipTests", "-Dmaven.javadoc.skip=true"], cwd=ROOT / "clients" / "java", check=True
        )
        target = HERE / "java" / "target"
        subprocess.run(
            mvn + ["package", "dependency:build-classpath", f"-Dmdep.outputFile={target / 'classpath.txt'}"],
            cwd=HERE / "java",
            check=True,
        )
        classpath = (target / "classpath.txt").read_text().strip()
        jar = target / "rwlock-bench-clients-0.3.0.jar"
        (target / "bench.args").write_text(f"-cp {jar}{os.pathsep}{classpath}\nrwlock.bench.Bench\n")
    elif name == "rust":
        subprocess.run(
            ["cargo", "build", "--release", "--locked", "--manifest-path", str(HERE / "rust" / "Cargo.toml"),
             "--target-dir", str(out / "rust-target")],
            check=True,
        )
        shutil.copy(out / "rust-target" / "release" / "rust-bench", out / "rust-bench")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--langs", default=os.environ.get("BENCH_CLIENTS_LANGS", "go python node java rust"))
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_CLIENTS_REPS", "3")))
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("BENCH_CLIENTS_SECONDS", "3")))
    ap.add_argument("--variants", default=os.environ.get("BENCH_CLIENTS_VARIANTS", "standalone replica"))
    ap.add_argument("--module", default=os.environ.get("RWLOCK_MODULE", str(ROOT / "target/release/librwlock.so")))
    ap.add_argument("--server", default=os.environ.get("RWLOCK_REDIS_SERVER", "redis-server"))
    ap.add_argument("--out", default=str(ROOT / "target" / "bench-clients"))
    ap.add_argument("--warmup", type=float, default=None, help="warm-up seconds (default: 2 for Java, 0.5 else)")
    ap.add_argument("--no-build", action="store_true", help="use the bench programs as built")
    args = ap.parse_args()

    known = languages()
    chosen = args.langs.split()
    for name in chosen:
        if name not in known or not known[name].comparisons:
            print(f"bench-clients: no bench for {name!r} (have: {', '.join(k for k, v in known.items() if v.comparisons)})")
            return 2
    if not args.no_build:
        for name in chosen:
            prepare(name)
    version = subprocess.run([args.server, "--version"], capture_output=True, text=True).stdout.strip()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = [
        f"Server: {version}; module {Path(args.module).name}; {args.reps} runs of {args.seconds:g} s per library and "
        f"scenario, order alternating, medians; {os.cpu_count()} cores.",
        "",
    ]
    print(report[0], flush=True)
    raw: dict[str, Any] = {}
    # Summary rows: (variant, language, lock, scenario, peer, ours/peer throughput, ours/peer server CPU).
    summary: list[tuple[str, str, str, str, str, str, str]] = []
    failures: list[str] = []

    def write() -> None:
        # After every table, so that a run cut short keeps what it measured.
        text = report + [summary_table(summary)] if summary else report
        if failures:
            text = text + ["Not measured (failed):", ""] + [f"- {f}" for f in failures] + [""]
        (out / "results.md").write_text("\n".join(text) + "\n")
        (out / "results.json").write_text(json.dumps(raw, indent=1) + "\n")

    for variant in args.variants.split():
        master = Server(args.server, args.module)
        replica = None
        try:
            if variant == "replica":
                replica = Server(args.server, args.module, replica_of=master.port)
                wait_replica_online(master)
            for name in chosen:
                lang = known[name]
                warmup = args.warmup if args.warmup is not None else (2.0 if name == "java" else 0.5)
                for comp in lang.comparisons:
                    results: dict[tuple[str, str], dict[str, Any]] = {}
                    try:
                        for label, scenario, workers in comp.scenarios:
                            libs = [comp.ours] + comp.peers
                            runs: dict[str, list[Run]] = {lib: [] for lib in libs}
                            for rep in range(args.reps):
                                order = libs if rep % 2 == 0 else list(reversed(libs))
                                for lib in order:
                                    runs[lib].append(
                                        run_once(lang, lib, scenario, workers, master, replica, args.seconds, warmup)
                                    )
                            for lib in libs:
                                results[(lib, label)] = summarize(runs[lib])
                                raw[f"{variant}/{name}/{comp.title}/{lib}/{label}"] = results[(lib, label)]
                    except RuntimeError as e:
                        # One program failing leaves the others to measure.
                        print(f"bench-clients: {lang.name}, {comp.title} ({variant}) failed: {e}", flush=True)
                        failures.append(f"{lang.name}, {comp.title} ({variant}): {str(e).splitlines()[0]}")
                    text = table(lang, variant, comp, results)
                    print(text, flush=True)
                    report.append(text)
                    for label, _, _ in comp.scenarios:
                        ours = results.get((comp.ours, label))
                        for peer in comp.peers:
                            p = results.get((peer, label))
                            if ours is not None and p is not None:
                                summary.append((
                                    variant, lang.name, comp.title, label, peer,
                                    ratio(ours["throughput"], p["throughput"]), ratio(ours["cpu_us"], p["cpu_us"]),
                                ))
                    write()
        finally:
            if replica is not None:
                replica.stop()
            master.stop()
    write()
    if summary:
        print(summary_table(summary), flush=True)
    print(f"bench-clients: written {out / 'results.md'} and {out / 'results.json'}")
    return 1 if failures else 0


def summary_table(rows: list[tuple[str, str, str, str, str, str, str]]) -> str:
    lines = [
        "### Summary: ours over the peer",
        "",
        "| variant | language | lock | scenario | peer | throughput | server CPU per cycle |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

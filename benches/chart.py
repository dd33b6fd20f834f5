#!/usr/bin/env python3
"""Draws the benchmark suite's results (results.csv, ratios.csv in the folder
given as the only argument) as one PNG, results.png, beside them."""

import csv
import sys
from collections import OrderedDict
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def grouped(ax, rows, title, unit, log=False):
    """Bars per case, one colour per variant."""
    cases = list(OrderedDict.fromkeys(r["case"] for r in rows))
    variants = list(OrderedDict.fromkeys(r["variant"] for r in rows))
    width = 0.8 / max(len(variants), 1)
    for i, v in enumerate(variants):
        xs, ys = [], []
        for j, c in enumerate(cases):
            for r in rows:
                if r["case"] == c and r["variant"] == v:
                    xs.append(j + i * width)
                    ys.append(float(r["value"]))
        ax.bar(xs, ys, width, label=v)
    ax.set_xticks([j + width * (len(variants) - 1) / 2 for j in range(len(cases))])
    ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(unit, fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=7)


def readers(ax, rows):
    for variant in OrderedDict.fromkeys(r["variant"] for r in rows):
        pts = [(int(r["case"].split()[0]), float(r["value"])) for r in rows if r["variant"] == variant]
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=variant)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("concurrent readers", fontsize=8)
    ax.set_ylabel("us per read unlock (server)", fontsize=8)
    ax.set_title("read unlock among N readers", fontsize=9)
    ax.legend(fontsize=7)


def ratios(ax, rows):
    rows = [r for r in rows if r["target"]]
    labels = [f'{r["section"]}: {r["case"]}\n{r["ratio"]} (target {r["target"]})' for r in rows]
    values = [float(r["value"]) for r in rows]
    colours = ["tab:green" if r["met"] == "true" else "tab:red" for r in rows]
    ax.barh(range(len(rows)), values, color=colours)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_title("ratios with a target (green: met)", fontsize=9)


TITLES = {
    ("cycles", "cycles/s"): "uncontended cycles, 50 clients (higher is better)",
    ("cycles", "server us/cycle"): "server time per cycle, INFO commandstats (lower is better)",
    ("cycles", "process CPU us/cycle"): "server process CPU per cycle, I/O included (lower is better)",
    ("cycles", "server us/call"): "server time per command, INFO commandstats (lower is better)",
    ("fresh", "server us/op"): "fresh names among 200,000 held locks (lower is better)",
    ("handoff", "us"): "handoff latency (lower is better)",
    ("contended", "sections/s"): "50 clients on one write lock (higher is better)",
    ("memory", "bytes"): "memory (INFO used_memory deltas)",
    ("lock-cycles", "cycles/s"): "plain lock: uncontended cycles, 50 clients (higher is better)",
    ("lock-cycles", "server us/cycle"): "plain lock: server time per cycle, INFO commandstats (lower is better)",
    ("lock-cycles", "process CPU us/cycle"): "plain lock: server process CPU per cycle (lower is better)",
    ("lock-cycles", "server us/call"): "plain lock: server time per command (lower is better)",
    ("lock-handoff", "us"): "plain lock: handoff latency (lower is better)",
    ("lock-contended", "sections/s"): "50 clients on one plain lock (higher is better)",
    ("lock-memory", "bytes"): "plain lock: memory (INFO used_memory deltas)",
    ("multilock", "sections/s"): "multi-lock: 32 clients, random 2-4 of 8 locks (higher is better)",
    ("multilock", "ms"): "multi-lock: p99 wait for all the locks (lower is better)",
}


def main():
    out = Path(sys.argv[1])
    values = load(out / "results.csv")
    # One panel per section and unit: figures of one kind side by side.
    panels = OrderedDict()
    for r in values:
        panels.setdefault((r["section"], r["unit"]), []).append(r)
    names = list(panels) + ["ratios"]
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 4 * len(names)))
    if len(names) == 1:
        axes = [axes]
    for ax, name in zip(axes, names):
        if name == "ratios":
            ratios(ax, load(out / "ratios.csv"))
        elif name[0] == "readers":
            readers(ax, panels[name])
        else:
            title = TITLES.get(name, f"{name[0]} ({name[1]})")
            grouped(ax, panels[name], title, name[1])
    fig.tight_layout()
    fig.savefig(out / "results.png", dpi=110)
    print(f"written: {out / 'results.png'}")


if __name__ == "__main__":
    main()

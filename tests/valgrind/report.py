#!/usr/bin/env python3
"""Summarises the memcheck logs of `make valgrind` (tests/valgrind/server.sh).

Usage: report.py LOG_DIR

Prints, over every server process: the errors memcheck found and the bytes
definitely lost, and separately those whose stack involves the module
(librwlock, its code or its Redis binding). Suppressed records
(server.supp) are not counted; the summary line says how many were. Exits 1 when any invalid access, use of an uninitialised value
or definite leak involves the module, or when no log was written.
"""
import pathlib
import re
import sys

# A frame of the module: its own code, its Redis binding, its entry point,
# or the library itself when a frame has no symbol.
MODULE = re.compile(r"librwlock|\brwlock::|redis_module::|RedisModule_OnLoad")


def records(text):
    """Error and leak records: blocks of ==PID== lines between blank ones."""
    block = []
    for line in text.splitlines():
        m = re.match(r"==\d+== ?(.*)$", line)
        if not m:
            continue
        body = m.group(1)
        if body.strip() == "":
            if block:
                yield block
            block = []
        else:
            block.append(body)
    if block:
        yield block


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    logs = sorted(pathlib.Path(sys.argv[1]).glob("vg-*.log"))
    if not logs:
        print(f"valgrind: no log in {sys.argv[1]}", file=sys.stderr)
        return 1
    totals = dict(processes=0, errors=0, module_errors=0, lost=0, module_lost=0,
                  complete=0, suppressed=0)
    shown = []
    for log in logs:
        text = log.read_text(errors="replace")
        totals["processes"] += 1
        m = re.search(r"ERROR SUMMARY: (\d+) errors.*?suppressed: (\d+) from", text)
        if m:
            totals["complete"] += 1
            totals["errors"] += int(m.group(1))
            totals["suppressed"] += int(m.group(2))
        for rec in records(text):
            head = rec[0]
            in_module = any(MODULE.search(line) for line in rec)
            lost = re.match(r"([\d,]+) (?:\([\d,]+ direct, [\d,]+ indirect\) )?bytes in [\d,]+ blocks are definitely lost", head)
            if lost:
                n = int(lost.group(1).replace(",", ""))
                totals["lost"] += n
                if in_module:
                    totals["module_lost"] += n
                    shown.append((log.name, rec))
                continue
            is_error = (head.startswith("Invalid ") or "uninitialised" in head
                        or head.startswith("Conditional jump") or head.startswith("Mismatched")
                        or head.startswith("Syscall param") or "overlap" in head)
            if is_error and in_module:
                totals["module_errors"] += 1
                shown.append((log.name, rec))
    for name, rec in shown[:5]:
        print(f"---- {name} ----")
        print("\n".join(rec[:16]))
    print(
        "valgrind: {processes} server processes ({complete} ran to the end); "
        "{errors} errors in all, {module_errors} involving the module; "
        "{lost} bytes definitely lost in all, {module_lost} involving the module; "
        "{suppressed} suppressed (server.supp)".format(**totals)
    )
    return 1 if totals["module_errors"] or totals["module_lost"] else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Runs the parts of `make test` side by side: each argument is a make
# target, run as `make <target> PARTS=1` (PARTS=1: its set-up was done
# before, by `make test`) with its output in a log of its own. Most of a
# part's time is spent waiting on servers, so up to PARTS_JOBS of them
# (default 4) run at once; separate servers on free ports keep them apart.
# Each part's log is printed whole when it ends, then a table of every
# part's time; the exit status is 1 when any part failed.
set -uo pipefail
if (( BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1) )); then
  echo "parts: needs bash 5.1 or later (wait -n -p)" >&2
  exit 2
fi

jobs="${PARTS_JOBS:-4}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="${PARTS_LOGS:-$root/target/parts}"
mkdir -p "$logs"

declare -A pid_part=() started=() seconds=() status=()
order=("$@")
queue=("$@")
begin=$(date +%s)

start_next() {
  local part="${queue[0]}"
  queue=("${queue[@]:1}")
  started[$part]=$(date +%s)
  echo "parts: start $part"
  make --no-print-directory -C "$root" "$part" PARTS=1 >"$logs/$part.log" 2>&1 </dev/null &
  pid_part[$!]="$part"
}

finish() {
  local pid="$1" rc="$2" part="${pid_part[$1]}"
  unset "pid_part[$pid]"
  seconds[$part]=$(( $(date +%s) - ${started[$part]} ))
  status[$part]=$rc
  echo
  echo "================ $part: exit $rc after ${seconds[$part]} s ================"
  cat "$logs/$part.log"
  echo "================ end of $part ================"
}

while (( ${#queue[@]} > 0 || ${#pid_part[@]} > 0 )); do
  while (( ${#queue[@]} > 0 && ${#pid_part[@]} < jobs )); do
    start_next
  done
  ended=""
  wait -n -p ended
  rc=$?
  finish "$ended" "$rc"
done

failed=0
echo
echo "parts of make test (PARTS_JOBS=$jobs), seconds:"
for part in "${order[@]}"; do
  verdict=ok
  if [ "${status[$part]}" != 0 ]; then verdict="FAILED (exit ${status[$part]}, log $logs/$part.log)"; failed=1; fi
  printf '  %-18s %5s  %s\n' "$part" "${seconds[$part]}" "$verdict"
done
printf '  %-18s %5s\n' "wall clock" "$(( $(date +%s) - begin ))"
exit $failed

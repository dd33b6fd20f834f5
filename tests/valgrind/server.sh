#!/usr/bin/env bash
# The server under valgrind's memcheck, for `make valgrind`: the tests run
# it as RWLOCK_REDIS_SERVER. RWLOCK_VALGRIND_SERVER is the real binary
# (default redis-server); RWLOCK_VALGRIND_LOGS is the folder that gets one
# log per process (vg-<pid>.log), which report.py then reads.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
: "${RWLOCK_VALGRIND_LOGS:?set RWLOCK_VALGRIND_LOGS to a folder for the logs}"
exec valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect \
  --errors-for-leak-kinds=definite --num-callers=40 \
  --suppressions="$here/server.supp" \
  --log-file="$RWLOCK_VALGRIND_LOGS/vg-%p.log" \
  "${RWLOCK_VALGRIND_SERVER:-redis-server}" "$@"

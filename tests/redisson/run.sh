#!/usr/bin/env bash
# Runs the Redisson suite once per Redisson version given, each in its own
# Maven build directory (target/<version>), and prints every version's
# figures and outcome at the end. Used by `make test-redisson` and
# `make test-redisson-matrix`; RWLOCK_MODULE must name the module.
#   tests/redisson/run.sh 3.52.0 4.7.0
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -gt 0 ] || { echo "usage: $0 REDISSON_VERSION..." >&2; exit 2; }
[ -f "${RWLOCK_MODULE:-}" ] || { echo "test-redisson: no module at '${RWLOCK_MODULE:-}' (set RWLOCK_MODULE)" >&2; exit 1; }
command -v mvn >/dev/null && command -v java >/dev/null || { echo "test-redisson: mvn and java needed" >&2; exit 1; }

failed=()
declare -A took
for version in "$@"; do
  echo "==== Redisson $version (module $RWLOCK_MODULE)"
  rm -f "$here/target/$version/results.txt"
  start=$(date +%s)
  # -ntp, not -q: Surefire's "Tests run: N, Failures: 0" lines are INFO output.
  if ! mvn -B -ntp -f "$here/pom.xml" test -Dredisson.version="$version" ${MVN_ARGS:-}; then
    failed+=("$version")
  fi
  took[$version]=$(( $(date +%s) - start ))
done

echo
echo "==== Redisson suite summary"
for version in "$@"; do
  status=passed
  for f in "${failed[@]+"${failed[@]}"}"; do [ "$f" = "$version" ] && status=FAILED; done
  echo "-- Redisson $version: $status in ${took[$version]} s"
  [ -f "$here/target/$version/results.txt" ] && sed 's/^/   /' "$here/target/$version/results.txt"
done
[ ${#failed[@]} -eq 0 ] || { echo "test-redisson: failed for Redisson ${failed[*]}" >&2; exit 1; }

#!/bin/sh
# Makes a Redis Cluster of the given masters, once:
#
#   cluster-init.sh host:port host:port host:port ...
#
# Waits (bounded) until every node answers, resolves host names to addresses
# (redis-cli --cluster create wants addresses), creates the cluster with no
# replicas unless the first node already belongs to one, and waits until
# every node reports cluster_state:ok. REDIS_CLI overrides the client binary.
set -eu
cli="${REDIS_CLI:-redis-cli}"
tries=300 # 0.1 s apart: 30 s per wait
if [ $# -lt 3 ]; then
  echo "cluster-init: give at least 3 masters as host:port" >&2
  exit 2
fi

# wait_for DESCRIPTION COMMAND...: retries COMMAND until it succeeds.
wait_for() {
  what="$1"
  shift
  i=0
  until "$@" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -ge "$tries" ]; then
      echo "cluster-init: timed out waiting for $what" >&2
      exit 1
    fi
    sleep 0.1
  done
}

state_ok() {
  "$cli" -h "$1" -p "$2" cluster info | grep -q '^cluster_state:ok'
}

nodes=""
for node in "$@"; do
  host="${node%:*}"
  port="${node##*:}"
  wait_for "$node to answer" "$cli" -h "$host" -p "$port" ping
  address="$(getent hosts "$host" | awk '{ print $1; exit }')"
  nodes="$nodes ${address:-$host}:$port"
done

first="${1%:*}"
first_port="${1##*:}"
known="$("$cli" -h "$first" -p "$first_port" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')"
if [ "${known:-1}" -gt 1 ]; then
  echo "cluster-init: $1 already knows $known nodes; nothing to create"
else
  # shellcheck disable=SC2086 # one word per node
  "$cli" --cluster create $nodes --cluster-replicas 0 --cluster-yes
fi
for node in "$@"; do
  wait_for "$node to report cluster_state:ok" state_ok "${node%:*}" "${node##*:}"
done
echo "cluster-init: cluster ready:$nodes"

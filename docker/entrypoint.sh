#!/bin/sh
# Starts redis-server with the rwlock module loaded, its configs taken from
# the environment (unset or empty: the module's default):
#
#   RWLOCK_PUBLISH        rwlock.publish        auto | publish | spublish
#   RWLOCK_FAIRNESS       rwlock.fairness       none | fifo
#   RWLOCK_DEFAULT_LEASE  rwlock.default-lease  milliseconds
#   RWLOCK_LEASE_INDEX_FROM  rwlock.lease-index-from  leases (0: no indexes)
#   RWLOCK_FAIR_WAIT      rwlock.fair-wait      milliseconds
#   RWLOCK_DEADLOCK_DETECTION  rwlock.deadlock-detection  yes | no
#   RWLOCK_TOKEN_GAP      rwlock.token-gap      tokens (0: no jump after a promotion)
#   RWLOCK_MODULE_PATH    the module, default /usr/local/lib/redis/modules/librwlock.so
#   REDIS_SERVER          the server binary, default redis-server
#
# The arguments are redis-server's own (a config file first, if any, then
# --options); the module is loaded after them. A bad value stops the server
# at start, with the reason in its log. In the official Redis image the
# command goes through its docker-entrypoint.sh, which drops root for the
# redis user.
set -eu
set -- "$@" --loadmodule "${RWLOCK_MODULE_PATH:-/usr/local/lib/redis/modules/librwlock.so}"
if [ -n "${RWLOCK_PUBLISH:-}" ]; then set -- "$@" publish "$RWLOCK_PUBLISH"; fi
if [ -n "${RWLOCK_FAIRNESS:-}" ]; then set -- "$@" fairness "$RWLOCK_FAIRNESS"; fi
if [ -n "${RWLOCK_DEFAULT_LEASE:-}" ]; then set -- "$@" default-lease "$RWLOCK_DEFAULT_LEASE"; fi
if [ -n "${RWLOCK_LEASE_INDEX_FROM:-}" ]; then set -- "$@" lease-index-from "$RWLOCK_LEASE_INDEX_FROM"; fi
if [ -n "${RWLOCK_FAIR_WAIT:-}" ]; then set -- "$@" fair-wait "$RWLOCK_FAIR_WAIT"; fi
if [ -n "${RWLOCK_DEADLOCK_DETECTION:-}" ]; then set -- "$@" deadlock-detection "$RWLOCK_DEADLOCK_DETECTION"; fi
if [ -n "${RWLOCK_TOKEN_GAP:-}" ]; then set -- "$@" token-gap "$RWLOCK_TOKEN_GAP"; fi
if [ -z "${REDIS_SERVER:-}" ] && command -v docker-entrypoint.sh >/dev/null 2>&1; then
  exec docker-entrypoint.sh redis-server "$@"
fi
exec "${REDIS_SERVER:-redis-server}" "$@"

#!/usr/bin/env bash
# Builds librwlock.so. The Dockerfile's build stage RUNs this script and
# `make build` (so every `make test`) runs it too: the image is built by the
# recipe the tests use, which cannot rot unnoticed.
#
#   docker/build-module.sh [OUT]    build; then copy the module to OUT
#
# CARGO (default cargo) and CARGO_TARGET_DIR (default <repo>/target) are
# honoured. The build is --locked: it uses exactly the committed Cargo.lock.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
case "$target" in
  /*) ;;
  *) target="$root/$target" ;;
esac
(cd "$root" && "${CARGO:-cargo}" build --release --locked)
built="$target/release/librwlock.so"
if [ ! -f "$built" ]; then
  echo "build-module: the build left no $built" >&2
  exit 1
fi
if [ $# -ge 1 ]; then
  mkdir -p "$(dirname "$1")"
  cp "$built" "$1"
  echo "build-module: $1"
fi

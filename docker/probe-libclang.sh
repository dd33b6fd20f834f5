#!/usr/bin/env bash
# Finds the libclang that the build's bindgen (through clang-sys, runtime
# loading) would load, and the compiler headers it needs to parse
# redismodule.h. Prints the library's path and exits 0 when both are there;
# otherwise says what is missing and exits 1, so `make deps` installs
# libclang-dev.
#
# The search is clang-sys's own (build/common.rs and build/dynamic.rs of
# clang-sys 1.x): only LIBCLANG_PATH when it is set; else `llvm-config
# --prefix`/{bin,lib,lib64}, LD_LIBRARY_PATH, LIBRARY_PATH and the fixed
# directory patterns below; in each, the files libclang.so, libclang-*.so,
# libclang.so.*, libclang-*.so.* except libclang-cpp (a different library
# that Debian installs with LLVM: a glob for libclang* matches it too), and
# only 64-bit ELF files. Clang also needs its own headers (stddef.h), which
# Debian ships in libclang-common-*-dev, not with the library.
#
#   PROBE_ROOT=<dir>   search a fake tree instead of / (tests); llvm-config
#                      is then not run
set -uo pipefail
root="${PROBE_ROOT:-}"
shopt -s nullglob

patterns=(libclang.so 'libclang-*.so' 'libclang.so.*' 'libclang-*.so.*')
fixed=(
  '/usr/local/llvm*/lib*' '/usr/local/lib*/*/*' '/usr/local/lib*/*' '/usr/local/lib*'
  '/usr/lib*/*/*' '/usr/lib*/*' '/usr/lib*'
)

# True when $1 starts with the ELF magic and class 2 (64-bit).
elf64() {
  local head
  head="$(head -c 5 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')"
  [ "$head" = "7f454c4602" ]
}

# Prints every candidate library in directory $1, as clang-sys matches them.
candidates() {
  local dir="$1" pattern file name
  [ -d "$dir" ] || return 0
  for pattern in "${patterns[@]}"; do
    for file in "$dir"/$pattern; do
      name="${file##*/}"
      case "$name" in *-cpp.*) continue ;; esac
      [ -f "$file" ] && elf64 "$file" && printf '%s\n' "$file"
    done
  done
}

# The directories clang-sys searches, in its order.
directories() {
  local path dir prefix
  if [ -n "${LIBCLANG_PATH:-}" ]; then
    path="$root$LIBCLANG_PATH"
    if [ -f "$path" ]; then dirname "$path"; else printf '%s\n' "$path"; fi
    return
  fi
  if [ -z "$root" ]; then
    prefix="$("${LLVM_CONFIG_PATH:-llvm-config}" --prefix 2>/dev/null | head -n 1)"
    [ -n "$prefix" ] && printf '%s\n' "$prefix/bin" "$prefix/lib" "$prefix/lib64"
  fi
  local IFS=:
  for dir in ${LD_LIBRARY_PATH:-} ${LIBRARY_PATH:-}; do
    [ -n "$dir" ] && printf '%s\n' "$root$dir"
  done
  unset IFS
  for pattern in "${fixed[@]}"; do
    for dir in $root$pattern; do
      [ -d "$dir" ] && printf '%s\n' "$dir"
    done
  done
}

# True when clang's own headers are where a libclang at $1 looks for them:
# beside the library (as found, or its real file), or in a distribution's
# fixed resource directory (Debian's clang looks in
# /usr/lib/llvm-<major>/lib/clang/<version>, wherever the library lies).
has_headers() {
  local real found major="*" path
  real="$(readlink -f "$1")"
  for path in "$1" "$real"; do
    if [[ "$path" =~ /llvm-([0-9]+)/ ]] || [[ "${path##*/}" =~ ^libclang-([0-9]+)\. ]]; then
      major="${BASH_REMATCH[1]}"
      break
    fi
  done
  found=(
    "${1%/*}"/clang/*/include/stddef.h "${real%/*}"/clang/*/include/stddef.h
    "$root"/usr/lib/llvm-$major/lib/clang/*/include/stddef.h
    "$root"/usr/lib*/clang/*/include/stddef.h "$root"/usr/local/lib*/clang/*/include/stddef.h
  )
  [ ${#found[@]} -gt 0 ]
}

# clang-sys's version of a library, from its file name, as a key that sorts
# as its Vec<u32> does: libclang.so.13.1 -> 13.1, libclang-14.so.1 -> "14.so"
# (a part that is not a number counts 0), libclang.so -> nothing.
version_key() {
  local name="${1##*/}" version part key=""
  case "$name" in
    libclang.so.*) version="${name#libclang.so.}" ;;
    libclang-*) version="${name#libclang-}"; version="${version%???}" ;;
    *) return 0 ;;
  esac
  local IFS=.
  for part in $version; do
    [[ "$part" =~ ^[0-9]+$ ]] || part=0
    key="$key$(printf '%010d' "$((10#$part))")."
  done
  printf '%s' "$key"
}

# clang-sys loads the highest version it finds, the last found among equals.
best="" best_key=""
while IFS= read -r dir; do
  while IFS= read -r lib; do
    key="$(version_key "$lib")"
    if [ -z "$best" ] || [[ ! "$key" < "$best_key" ]]; then
      best="$lib" best_key="$key"
    fi
  done < <(candidates "$dir")
done < <(directories)

if [ -z "$best" ]; then
  echo "probe-libclang: no libclang.so for bindgen (libclang-cpp does not count)" >&2
  exit 1
fi
if ! has_headers "$best"; then
  echo "probe-libclang: $best has no clang headers (stddef.h) beside it" >&2
  exit 1
fi
printf '%s\n' "$best"

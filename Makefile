# EventKernel developer commands. `make test` is what CI runs (see .ci/run and README.md).
SWIFT ?= swift
# Every SwiftPM call goes through scripts/swiftpm.sh: it retries only when the driver itself dies
# from a signal (an intermittent toolchain crash), never a failing build, test or threshold.
SWIFTPM = env SWIFT=$(SWIFT) bash $(CURDIR)/scripts/swiftpm.sh
# The PostgresLog suites and the scale-out benchmarks need a PostgreSQL server: this starts a
# private one (initdb in a temporary directory, 127.0.0.1 and a Unix socket only; Debian's
# postgresql installed when missing), runs the command with EVENTKERNEL_POSTGRES_URL set, and
# stops it. With EVENTKERNEL_POSTGRES_URL already set, the command runs against that server.
WITH_POSTGRES = bash $(CURDIR)/scripts/postgres.sh run

.PHONY: setup build unit browser test sanitizers fuzz release demo bench bench-smoke bench-thresholds-update bench-thresholds-check example-test loadtest clean \
	check-manifest quickstart docs docs-check man

# Installs the C libraries the package links against when they are missing (Debian/Ubuntu).
setup:
	@bash scripts/setup.sh

build: setup
	$(SWIFTPM) build

# The quick loop: build and run every unit, recovery and reliability test (debug build).
# With the InternalChecks trait: every ordered index and hash table checks its invariants after
# each mutation (Docs/Reliability.md); apps never build with it.
TEST_TRAITS ?= PostgreSQL,InternalChecks,Viewer
# Environment for the test run (sizes of the long sweeps; empty: their default sizes).
UNIT_SIZES ?=
unit: setup
	$(SWIFTPM) build --build-tests --traits $(TEST_TRAITS)
	$(UNIT_SIZES) $(WITH_POSTGRES) $(SWIFTPM) test --skip-build --traits $(TEST_TRAITS)

# The viewer in a real browser (Tests/Browser/viewer_test.py): `eventkernel serve` on fixture
# stores, driven through headless Chromium (Debian's chromium and chromium-driver) with Selenium
# from PyPI, clicking overview -> streams -> entity -> state at a moment -> event; screenshots of
# every step in .build/browser-artifacts (Docs/Auditing.md).
browser: setup
	@WITH_BROWSER=1 bash scripts/setup.sh
	$(SWIFTPM) build --traits $(TEST_TRAITS) --product eventkernel
	python3 Tests/Browser/viewer_test.py --tool .build/debug/eventkernel --artifacts .build/browser-artifacts

# Everything CI runs: the manifest's ranges resolved to the newest versions allowed, the tests,
# the viewer in a browser, the README's programs (Examples/QuickStart), the documentation with
# warnings as errors, the man page, the tests again under ThreadSanitizer and AddressSanitizer, a bounded fuzzing pass, the
# benchmark package's smoke run (Docs/Reliability.md) and the HTTP example's tests (Docs/Services.md).
# Each stage prints its wall time: CI has a time budget (45 minutes on 2 cores).
#
# The long reliability sweeps run a bounded sample here (Docs/Reliability.md, "Sizes"): half
# the snapshot damage cases and 40 SIGKILL trials per crash suite instead of 100; under the
# AddressSanitizer, every 33rd byte of the corruption sweep's files instead of every 16th (an
# odd stride, so that the damaged bit and the field hit vary; the fixed headers whole).
# `make unit` and `make sanitizers` run them at their default sizes, and the table in
# Docs/Reliability.md gives the command for each suite's longest run.
TEST_STAGES = check-manifest unit browser quickstart docs-check man sanitizers fuzz bench-smoke bench-thresholds-check example-test
CI_UNIT_SIZES = EVENTKERNEL_SNAPSHOT_CASES=1250 EVENTKERNEL_CRASH_TRIALS=40
CI_SANITIZER_SIZES = EVENTKERNEL_CORRUPTION_STRIDE=33
test:
	@started=$$(date +%s); \
	for stage in $(TEST_STAGES); do \
		begun=$$(date +%s); \
		case $$stage in \
			unit) $(MAKE) --no-print-directory unit UNIT_SIZES="env $(CI_UNIT_SIZES)" ;; \
			sanitizers) env $(CI_SANITIZER_SIZES) $(MAKE) --no-print-directory sanitizers ;; \
			*) $(MAKE) --no-print-directory $$stage ;; \
		esac || { echo "== make test: $$stage failed after $$(( $$(date +%s) - begun )) s"; exit 1; }; \
		echo "== make test: $$stage took $$(( $$(date +%s) - begun )) s ($$(( $$(date +%s) - started )) s so far)"; \
	done

# The library names every dependency by a `from:` range; this refuses a pin and resolves the
# newest versions the ranges allow, which `make unit` then builds and tests (scripts/check_manifest.sh).
check-manifest: setup
	bash scripts/check_manifest.sh

# Builds every Swift block of README.md (each a program in Examples/QuickStart), runs the quick
# start twice on one store and the runnable blocks once, and checks the README quotes each verbatim.
quickstart: setup
	bash scripts/quickstart.sh

# The DocC catalogues of EventLog, EventKernel and Activities: `make docs` writes the static site to
# DOCS_OUT; `make docs-check` (part of `make test`) only builds them, failing on any warning.
DOCS_OUT ?= .build-docs/site
docs: setup
	bash scripts/docs.sh site $(DOCS_OUT)

docs-check: setup
	bash scripts/docs.sh check

# eventkernel(1), generated from the same help text as `eventkernel --help` (swift-argument-parser's
# generate-manual plugin, on the debug build `make unit` made) and copied to $(MAN_OUT);
# `man -l $(MAN_OUT)/eventkernel.1` reads it. Fails when a subcommand or the examples are missing.
MAN_OUT ?= .build/man
man: setup
	$(SWIFTPM) package --traits $(TEST_TRAITS) generate-manual --configuration debug --date 2026-01-01
	mkdir -p $(MAN_OUT)
	cp .build/plugins/GenerateManual/outputs/EventKernelTool/eventkernel.1 $(MAN_OUT)/eventkernel.1
	@for command in demo import export query replay history verify inspect snapshot repair tail streams backup backups restore delete purge serve; do \
		grep -q "^\.It Em $$command\$$" $(MAN_OUT)/eventkernel.1 || { echo "man: no $$command in eventkernel.1"; exit 1; }; done
	@echo "man: $(MAN_OUT)/eventkernel.1"

# Built without the PostgreSQL trait: no server needed (scripts/sanitizers.sh says why).
sanitizers: setup
	bash scripts/sanitizers.sh

# FUZZ_SECONDS per fuzz target (default 30).
fuzz: setup
	bash scripts/fuzz.sh $${FUZZ_SECONDS:-30}

release: setup
	$(SWIFTPM) build -c release

# Generates 1M activities into ./eventkernel-store (replacing it) and prints the summary (Docs/CLI.md).
demo: setup
	$(SWIFTPM) run -c release eventkernel demo --reset

clean:
	rm -rf .build .build-docs Benchmarks/.build Examples/ActivityService/.build Examples/QuickStart/.build

# The HTTP example (Examples/ActivityService: its own package, Hummingbird, GRDB, Prometheus;
# GRDB needs libsqlite3-dev): build it and run its tests (Docs/Services.md).
example-test:
	@WITH_SQLITE=1 bash scripts/setup.sh
	cd Examples/ActivityService && $(SWIFTPM) build --build-tests && $(SWIFTPM) test --skip-build

# The example under load with wrk, EventKernel against GRDB behind the same service
# (scripts/loadtest.sh; Docs/Benchmarks.md, "The HTTP service under load").
loadtest:
	@WITH_SQLITE=1 WITH_WRK=1 bash scripts/setup.sh
	bash scripts/loadtest.sh

# Benchmarks (Benchmarks/ is its own package; GRDB needs libsqlite3-dev). See Docs/Benchmarks.md.
# `make bench` runs the full suite (N = 1,000,000 activities; fixtures are built once and cached in
# $TMPDIR/eventkernel-bench-fixtures) and prints the comparison table with ratios and targets.
# Pass BENCH_ARGS='--filter Query' to run a subset, BENCH_N=100000 to scale the fixtures.
BENCH_OUT ?= .build/bench-results
BENCH_N ?= 1000000
BENCH_ARGS ?=

bench:
	@WITH_SQLITE=1 bash scripts/setup.sh
	rm -rf Benchmarks/$(BENCH_OUT)
	cd Benchmarks && EVENTKERNEL_BENCH_N=$(BENCH_N) $(WITH_POSTGRES) $(SWIFTPM) package --traits ScaleOut --disable-sandbox benchmark \
		--format influx --path $(BENCH_OUT) $(BENCH_ARGS)
	python3 scripts/bench_table.py Benchmarks/$(BENCH_OUT)/Current_run.influx.csv

# CI smoke pass: builds the benchmark package, runs every benchmark once at N = 10,000. Without
# the ScaleOut trait: a release build of SwiftNIO would add about 5 minutes to CI (Docs/ScaleOut.md).
bench-smoke:
	@WITH_SQLITE=1 bash scripts/setup.sh
	rm -rf Benchmarks/$(BENCH_OUT)-smoke
	cd Benchmarks && EVENTKERNEL_BENCH_N=10000 EVENTKERNEL_BENCH_SMOKE=1 $(SWIFTPM) package --disable-sandbox benchmark \
		--format influx --path $(BENCH_OUT)-smoke $(BENCH_ARGS)
	python3 scripts/bench_table.py Benchmarks/$(BENCH_OUT)-smoke/Current_run.influx.csv

# Allocation-count thresholds (Benchmarks/Thresholds/): record them, or check a run against them.
# Only EventKernel's deterministic benchmarks carry thresholds: single-task appends and queries (the
# 64-task appends, startup, footprint and the peers allocate a varying amount with scheduling).
# The *.MetricsNoBackend twins (EventKernelMetrics installed, no swift-metrics backend) carry
# copies of their plain twin's thresholds with no relative slack: instrumentation must not allocate.
BENCH_THRESHOLD_FILTER ?= --filter 'Append\.Buffered\..*\.EventKernel' --filter 'Append\.Synced\.OneTask\.EventKernel' --filter 'Query\..*\.EventKernel' \
	--filter '.*\.EventKernel\.MetricsNoBackend'

bench-thresholds-update:
	@WITH_SQLITE=1 bash scripts/setup.sh
	cd Benchmarks && EVENTKERNEL_BENCH_N=10000 EVENTKERNEL_BENCH_ALLOCS_ONLY=1 $(SWIFTPM) package --disable-sandbox \
		--allow-writing-to-package-directory benchmark thresholds update $(BENCH_THRESHOLD_FILTER) $(BENCH_ARGS)
	@# A no-backend twin is held to its plain twin's count (within the check's 200 allocations),
	@# not to its own run's: group commit's timing moves a run's count by a few.
	@cd Benchmarks/Thresholds && for twin in *.MetricsNoBackend.p90.json; do \
		cp "$${twin%.MetricsNoBackend.p90.json}.p90.json" "$$twin"; done

bench-thresholds-check:
	@WITH_SQLITE=1 bash scripts/setup.sh
	cd Benchmarks && EVENTKERNEL_BENCH_N=10000 EVENTKERNEL_BENCH_ALLOCS_ONLY=1 $(SWIFTPM) package --disable-sandbox \
		benchmark thresholds check $(BENCH_THRESHOLD_FILTER) $(BENCH_ARGS)
	@# The no-backend twins must keep exactly their plain twin's counts (an update records both).
	@cd Benchmarks/Thresholds && for twin in *.MetricsNoBackend.p90.json; do \
		cmp -s "$$twin" "$${twin%.MetricsNoBackend.p90.json}.p90.json" || \
		{ echo "$$twin differs from its plain twin (the no-backend run is held to the plain run's count): record both with make bench-thresholds-update"; exit 1; }; done

# EventKernel developer commands. `make test` is what CI runs (see .ci/run and README.md).
SWIFT ?= swift

.PHONY: setup build unit test sanitizers fuzz release demo bench bench-smoke clean

# Installs the C libraries the package links against when they are missing (Debian/Ubuntu).
setup:
	@bash scripts/setup.sh

build: setup
	$(SWIFT) build

# The quick loop: build and run every unit, recovery and reliability test (debug build).
unit: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Everything CI runs: the tests, the tests again under ThreadSanitizer and AddressSanitizer,
# a bounded fuzzing pass, and the benchmark package's smoke run (Docs/Reliability.md).
test: unit sanitizers fuzz bench-smoke

sanitizers: setup
	bash scripts/sanitizers.sh

# FUZZ_SECONDS per fuzz target (default 30).
fuzz: setup
	bash scripts/fuzz.sh $${FUZZ_SECONDS:-30}

release: setup
	$(SWIFT) build -c release

# Generates 1M activities into ./eventkernel-store (replacing it) and prints the summary (Docs/CLI.md).
demo: setup
	$(SWIFT) run -c release eventkernel demo --reset

# Placeholder until the benchmark targets land: builds the benchmark package.
bench-smoke: setup
	cd Benchmarks && $(SWIFT) build -c release

clean:
	rm -rf .build Benchmarks/.build

# EventKernel developer commands. `make test` is what CI runs (see .ci/run and README.md).
SWIFT ?= swift

.PHONY: setup build test release demo bench bench-smoke clean

# Installs the C libraries the package links against when they are missing (Debian/Ubuntu).
setup:
	@bash scripts/setup.sh

build: setup
	$(SWIFT) build

test: setup
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

release: setup
	$(SWIFT) build -c release

# Generates 1M activities into ./eventkernel-store (replacing it) and prints the summary (Docs/CLI.md).
demo: setup
	$(SWIFT) run -c release eventkernel demo --reset

clean:
	rm -rf .build Benchmarks/.build

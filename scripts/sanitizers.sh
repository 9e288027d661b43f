#!/usr/bin/env bash
# Runs the test suite under ThreadSanitizer and AddressSanitizer, each in its own build
# directory (.build/tsan, .build/asan), with EVENTKERNEL_TEST_SCALE=small so the heavy tests
# shrink themselves (sanitized code runs 5-20x slower). Prints the wall time of each run.
#
# Built without the PostgreSQL package trait (--disable-default-traits): sanitized builds of
# SwiftNIO and its two copies of BoringSSL cost about 4.5 minutes of CPU each (measured:
# Docs/ScaleOut.md, "Building and testing"), for code these runs would not exercise
# meaningfully; the PostgreSQL cases are skipped with a notice. The store's shared-log path
# still runs here, over a log shared in memory (SharedMemoryLog).
#
# The ThreadSanitizer pass leaves out the CLI's suites (EventKernelToolTests): each of their
# tests runs `eventkernel` (and helpers) as child processes, built with TSan too, and TSan sees a
# race only inside one process, where the CLI runs the library's code that the library suites
# already run under TSan in-process. Those child processes made that pass twice as long as every
# other suite together (12 minutes for the CLI suites alone on 2 cores, against a
# 12-18-minute pass), for no race it could see that the others cannot. The AddressSanitizer pass
# keeps them: a memory error in the CLI's own code is what it finds there (it found one in
# `StoreDirectory.list`, a read past the end of a `dirent`). For the same reason the TSan pass
# leaves out the single-threaded reliability sweeps (CorruptionSweepTests, SnapshotCorruptionTests:
# one thread damaging bytes and reopening) and the SIGKILL suites (*CrashTests, *KillBarTests: child processes);
# the AddressSanitizer pass runs them, and the unit pass at full size.
#
#   scripts/sanitizers.sh                 both sanitizers, all tests (TSan without the CLI suites)
#   scripts/sanitizers.sh thread          only TSan
#   FILTER=EventLogTests scripts/sanitizers.sh address
#   THREAD_SKIP= scripts/sanitizers.sh thread      TSan over every suite, the CLI's included
#
# Environment: FILTER (a `swift test --filter` pattern), THREAD_SKIP (a `swift test --skip`
# pattern for the TSan pass; default the CLI suites, empty for none), EVENTKERNEL_TEST_SCALE
# (default small), JOBS (build jobs).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitizers=("${@:-thread address}")
read -r -a sanitizers <<< "${sanitizers[*]}"
export EVENTKERNEL_TEST_SCALE="${EVENTKERNEL_TEST_SCALE:-small}"
# Stop at the first report rather than printing a flood; keep the whole report.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}"
# scripts/asan.supp: defects in the toolchain's libraries, each with its upstream fix.
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1 detect_leaks=0 suppressions=$PWD/scripts/asan.supp}"

seed_scratch() {
  # Offline machines: reuse the dependency checkouts of the default build directory.
  local scratch=$1
  mkdir -p "$scratch"
  for item in checkouts repositories workspace-state.json; do
    if [[ -e .build/$item && ! -e $scratch/$item ]]; then cp -R ".build/$item" "$scratch/$item"; fi
  done
}

status=0
failed=()
for sanitizer in "${sanitizers[@]}"; do
  case $sanitizer in
    thread) scratch=.build/tsan ;;
    address) scratch=.build/asan ;;
    *) echo "unknown sanitizer $sanitizer (thread|address)" >&2; exit 2 ;;
  esac
  seed_scratch "$scratch"
  args=(--sanitize="$sanitizer" --scratch-path "$scratch" --disable-default-traits)
  [[ -n ${JOBS:-} ]] && args+=(--jobs "$JOBS")
  start=$(date +%s)
  echo "== $sanitizer: building (scratch $scratch)"
  bash scripts/swiftpm.sh build --build-tests "${args[@]}"
  built=$(date +%s)
  skip=""
  [[ $sanitizer == thread ]] && skip=${THREAD_SKIP-EventKernelToolTests\.|CorruptionSweepTests|SnapshotCorruptionTests|CrashTests|KillBarTests}
  echo "== $sanitizer: testing (EVENTKERNEL_TEST_SCALE=$EVENTKERNEL_TEST_SCALE${FILTER:+, filter $FILTER}${skip:+, skipping $skip})"
  # The output is kept in a file as well, so that a failure is named again at the very end:
  # CI shows the tail of a run, and the thread run's failures would be above the address run's.
  log="$scratch/test-output.log"
  if ! bash scripts/swiftpm.sh test --skip-build "${args[@]}" ${FILTER:+--filter "$FILTER"} ${skip:+--skip "$skip"} 2>&1 | tee "$log"; then
    status=1
    failed+=("$sanitizer")
  fi
  end=$(date +%s)
  echo "== $sanitizer: build $((built - start)) s, tests $((end - built)) s, total $((end - start)) s"
done
for sanitizer in "${failed[@]}"; do
  case $sanitizer in thread) scratch=.build/tsan ;; address) scratch=.build/asan ;; esac
  echo "== $sanitizer: FAILED; its failing tests and sanitizer reports ($scratch/test-output.log has the whole output):"
  # Failing tests, then each sanitizer report whole (both stacks and where the memory came
  # from): CI keeps only the tail of the output, and two frames cannot locate a race.
  grep -E -A3 '✘|Fatal error|fatalError' "$scratch/test-output.log" | head -40 || true
  awk '/^(WARNING|ERROR): (ThreadSanitizer|AddressSanitizer)/ { on = 1 } on { print } /^SUMMARY: / { on = 0 }' \
    "$scratch/test-output.log" | head -160 || true
done
exit $status

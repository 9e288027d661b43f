#!/usr/bin/env bash
# Builds the libFuzzer targets under Fuzz/ into .build/fuzz/ and runs each for a bounded time.
#
#   scripts/fuzz.sh            each target 30 s
#   scripts/fuzz.sh 600        each target 10 min
#   TARGETS=BatchDecoderFuzz scripts/fuzz.sh 60
#
# A target is a directory Fuzz/<Name>/ with a main.swift defining LLVMFuzzerTestOneInput; it is
# compiled with the source directories or files listed for it below into one module (internal
# APIs are reachable), with -sanitize=fuzzer,address. An entry "module:Name=dir" is instead
# built first as its own (instrumented, static) module Name that the target imports. Its seed corpus is Fuzz/corpus/<Name>/
# (committed, tiny); new inputs found go to .build/fuzz/corpus/<Name>/, crashes to
# .build/fuzz/artifacts/<Name>/ (reproduce: .build/fuzz/<Name> <crash-file>).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
out=.build/fuzz
mkdir -p "$out"

# target name -> source directories compiled with it (one line per target).
declare -A target_sources=(
  [BatchDecoderFuzz]="module:KernelPrimitives=Sources/KernelPrimitives Sources/EventLog"
  # The CLI's JSON Lines parser and import checks, over the modules they import (each built
  # first as its own instrumented module: "module:Name=dir").
  [ImportFuzz]="module:Logging=.build/checkouts/swift-log/Sources/Logging module:KernelPrimitives=Sources/KernelPrimitives module:EventLog=Sources/EventLog module:EventKernel=Sources/EventKernel module:Activities=Sources/Activities Sources/EventKernelTool/Support/ActivityJSON.swift Sources/EventKernelTool/Support/ActivityJSON+Scan.swift Sources/EventKernelTool/Support/EventMetadata+JSON.swift Sources/EventKernelTool/Support/Dates.swift Sources/EventKernelTool/Support/JSONBuffer.swift Sources/EventKernelTool/Support/JSONTree.swift"
)
targets=${TARGETS:-${!target_sources[*]}}

swiftc_flags=(
  -sanitize=fuzzer,address -parse-as-library -Onone -g
  # The driver runs one frontend job at a time unless told: a module's files on every core.
  -j "$(nproc 2>/dev/null || sysctl -n hw.ncpu)"
  -swift-version 6 -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault
  -I Sources/CLZ4 -llz4
  # KernelPrimitives' CRC-32C calls the CCRC32C C target (compiled below, linked with each target).
  -I Sources/CCRC32C/include
  # The sources use `package` access (helpers shared between the package's modules).
  -package-name fuzz
)

# The C target, instrumented as the Swift code is, by the clang beside swiftc (the toolchain's:
# it has the fuzzer's runtime; it may not be on PATH).
clang=$(dirname "$(readlink -f "$(command -v swiftc)")")/clang
[[ -x $clang ]] || clang=$(command -v clang)
"$clang" -c -fsanitize=fuzzer-no-link,address -g -O1 -I Sources/CCRC32C/include Sources/CCRC32C/crc32c.c -o "$out/crc32c.o"

status=0
for target in $targets; do
  sources=()
  modules=()
  moddir="$out/modules/$target"
  for entry in ${target_sources[$target]}; do
    if [[ $entry == module:* ]]; then
      spec=${entry#module:}; name=${spec%%=*}; dir=${spec#*=}
      msources=()
      while IFS= read -r -d '' f; do msources+=("$f"); done < <(find "$dir" -name '*.swift' -print0)
      mkdir -p "$moddir"
      echo "== $target: building module $name (${#msources[@]} files)"
      swiftc "${swiftc_flags[@]}" -I "$moddir" -module-name "$name" -emit-module -emit-module-path "$moddir/$name.swiftmodule" \
        -emit-library -static -o "$moddir/lib$name.a" "${msources[@]}"
      modules+=("$name")
      continue
    fi
    while IFS= read -r -d '' f; do sources+=("$f"); done < <(find "$entry" -name '*.swift' -print0)
  done
  # Static libraries, so each goes before the ones it depends on (the linker resolves references
  # only to libraries after the one that makes them): the reverse of the build order above.
  links=()
  for (( m = ${#modules[@]} - 1; m >= 0; m-- )); do links+=(-L "$moddir" "-l${modules[m]}"); done
  echo "== $target: building ($(( ${#sources[@]} + 1 )) files)"
  swiftc "${swiftc_flags[@]}" ${modules[@]:+-I "$moddir"} -module-name "${target}Module" "${sources[@]}" "Fuzz/$target/main.swift" \
    "${links[@]}" "$out/crc32c.o" -o "$out/$target"
  corpus="$out/corpus/$target"; artifacts="$out/artifacts/$target/"
  mkdir -p "$corpus" "$artifacts"
  seeds=()
  [[ -d Fuzz/corpus/$target ]] && seeds+=("Fuzz/corpus/$target")
  echo "== $target: fuzzing for $seconds s"
  if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$out/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" "${seeds[@]}"; then
    echo "== $target: FAILED; crash inputs in $artifacts" >&2
    status=1
  fi
done
exit $status

#!/usr/bin/env bash
# Builds the DocC documentation of the library's modules with swift-docc-plugin, warnings as errors.
#
#   scripts/docs.sh check          build every catalogue; fail on any warning (part of `make test`)
#   scripts/docs.sh site [DIR]     write the static site (default .build-docs/site), one folder per module
#
# The plugin is a dependency only while EVENTKERNEL_DOCC is set (Package.swift says why), and the
# build uses its own scratch path so that switching it on does not re-resolve the main build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
modules=(EventLog EventKernel Activities)
swiftpm() { env EVENTKERNEL_DOCC=1 SWIFT=${SWIFT:-swift} bash scripts/swiftpm.sh package --scratch-path .build-docs "$@"; }
case "${1:-check}" in
check)
    args=()
    for module in "${modules[@]}"; do args+=(--target "$module"); done
    swiftpm generate-documentation "${args[@]}" --warnings-as-errors
    echo "docs: ${modules[*]} built with no warnings"
    ;;
site)
    out="${2:-$root/.build-docs/site}"
    mkdir -p "$out"
    out="$(cd "$out" && pwd)"
    for module in "${modules[@]}"; do
        lower=$(tr '[:upper:]' '[:lower:]' <<<"$module")
        swiftpm --allow-writing-to-directory "$out" generate-documentation --target "$module" \
            --warnings-as-errors --transform-for-static-hosting --hosting-base-path "$lower" \
            --output-path "$out/$lower"
    done
    echo "docs: static sites in $out/{$(IFS=,; tr '[:upper:]' '[:lower:]' <<<"${modules[*]}")}; serve $out and open /<module>/documentation/<module>"
    ;;
*)
    echo "usage: scripts/docs.sh check | site [DIR]" >&2
    exit 1
    ;;
esac

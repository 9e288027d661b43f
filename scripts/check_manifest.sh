#!/usr/bin/env bash
# The library's manifest names every dependency by a `from:` range (the lowest version that works),
# so that an app depending on EventKernel can use newer releases of the same packages. This fails
# on an `exact:`, `branch:` or `revision:` requirement in the root Package.swift, then resolves the
# newest versions the ranges allow (`swift package update`) and prints them; `make unit`, which runs
# next, builds and tests against exactly those. (The Benchmarks and Examples packages are
# applications: they may pin.)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if grep -nE '\.package\(.*(exact:|branch:|revision:)' Package.swift; then
    echo "check_manifest: Package.swift pins a dependency; use from: \"lowest working version\"" >&2
    exit 1
fi
env SWIFT=${SWIFT:-swift} bash scripts/swiftpm.sh package update
env SWIFT=${SWIFT:-swift} bash scripts/swiftpm.sh package show-dependencies --format json | python3 -c '
import json, sys
seen = {}
def walk(node):
    for child in node.get("dependencies", []):
        seen[child["identity"]] = child["version"]
        walk(child)
walk(json.load(sys.stdin))
print("resolved: " + ", ".join(f"{name} {version}" for name, version in sorted(seen.items())))
'
echo "check_manifest: every dependency is a range; resolved to the newest versions allowed"

#!/usr/bin/env bash
# Builds Examples/QuickStart (the README's Swift blocks, each a whole program), fails on a warning in
# them, runs the runnable ones in a temporary directory and checks what the quick start prints,
# twice on the same store (the second run reopens it), then checks that README.md quotes every
# program verbatim (scripts/check_readme.py). Part of `make test`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
swiftpm="env SWIFT=${SWIFT:-swift} bash $root/scripts/swiftpm.sh"
python3 "$root/scripts/check_readme.py"
cd "$root/Examples/QuickStart"
log=$(mktemp)
work=$(mktemp -d)
trap 'rm -rf "$log" "$work"' EXIT
$swiftpm build 2>&1 | tee "$log"
if grep -E "^$root/Examples/QuickStart/Sources/.*(warning|error):" "$log"; then
    echo "quickstart: the README's programs must build without warnings" >&2
    exit 1
fi
bin="$($swiftpm build --show-bin-path)"
cd "$work"
for run in 1 2; do
    out=$(timeout 120 "$bin/QuickStart" notes-store)
    echo "$out"
    expected=$((run * 2))
    grep -qx "reopened: $expected notes" <<<"$out" || { echo "quickstart: run $run should reopen $expected notes" >&2; exit 1; }
    grep -q '^observed: ' <<<"$out" || { echo "quickstart: run $run observed nothing" >&2; exit 1; }
done
# The service example listens for signals forever and writes under /var/lib: built, not run.
for program in ReadmeLog ReadmeActivities ReadmeForum; do
    timeout 120 "$bin/$program" >/dev/null
    echo "quickstart: $program ran"
done
echo "quickstart: passed"

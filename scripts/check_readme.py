#!/usr/bin/env python3
"""Fails when a Swift block of README.md is not, byte for byte, a program that `make test` builds.

Every ```swift block must be preceded by a line `<!-- Examples/QuickStart/Sources/NAME/main.swift -->`
naming the file it quotes, and must equal that file. scripts/quickstart.sh builds every such file
(and runs the runnable ones), so a README example cannot drift from the API or stop compiling.
Every main.swift under Examples/QuickStart/Sources must be quoted somewhere, so none goes stale.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text(encoding="utf-8").splitlines(keepends=True)
marker = re.compile(r"^<!-- (Examples/QuickStart/Sources/[A-Za-z]+/main\.swift) -->\s*$")
problems, quoted = [], set()
i = 0
while i < len(readme):
    if readme[i].rstrip("\n") == "```swift":
        start = i + 1
        end = next((j for j in range(start, len(readme)) if readme[j].rstrip("\n") == "```"), None)
        if end is None:
            problems.append(f"README.md:{i + 1}: unterminated ```swift block")
            break
        previous = readme[i - 1] if i > 0 else ""
        match = marker.match(previous)
        if not match:
            problems.append(f"README.md:{i + 1}: a ```swift block without a '<!-- Examples/QuickStart/Sources/NAME/main.swift -->' line before it")
        else:
            path = root / match.group(1)
            quoted.add(match.group(1))
            block = "".join(readme[start:end])
            if not path.exists():
                problems.append(f"README.md:{i}: {match.group(1)} does not exist")
            elif path.read_text(encoding="utf-8") != block:
                problems.append(f"README.md:{i + 1}: the block differs from {match.group(1)} (copy the file into the README verbatim)")
        i = end + 1
        continue
    i += 1
for path in sorted((root / "Examples/QuickStart/Sources").glob("*/main.swift")):
    relative = str(path.relative_to(root))
    if relative not in quoted:
        problems.append(f"{relative}: not quoted in README.md (quote it, or remove it)")
for problem in problems:
    print("check_readme: " + problem, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"check_readme: {len(quoted)} Swift blocks of README.md match the programs in Examples/QuickStart")

#!/usr/bin/env python3
"""Code lines of the non-test Rust code under the given folders (default: core/src routers/src).

Counts what tokei counts as code (no blank line, no comment line) and leaves out test code:
files named `tests.rs` or `*_tests.rs`, files under a `tests/` folder, and every item behind
`#[cfg(test)]` (an inline test module, a test-only function). tokei has no notion of test
code, hence this script.

    python3 scripts/loc.py [folder ...]
"""

import pathlib
import re
import sys


def is_test_file(path: pathlib.Path) -> bool:
    return path.name == "tests.rs" or path.name.endswith("_tests.rs") or "tests" in path.parts


def strip_block_comments(text: str) -> str:
    # Keeps the newlines of a /* */ comment so that line counts stay right.
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def code_lines(text: str) -> int:
    lines = strip_block_comments(text).split("\n")
    count = 0
    skip_depth = None  # brace depth at which a #[cfg(test)] item ends
    pending_test_item = False
    depth = 0
    for line in lines:
        s = line.strip()
        if s.startswith("#[cfg(test)]"):
            pending_test_item = True
            continue
        opens = s.count("{")
        closes = s.count("}")
        if skip_depth is not None:
            depth += opens - closes
            if depth <= skip_depth:
                skip_depth = None
            continue
        if pending_test_item:
            if s.startswith("#[") or s.startswith("//") or not s:
                continue
            pending_test_item = False
            if opens > closes:
                skip_depth = depth
                depth += opens - closes
            # a one-line item (`mod tests;`, `use x;`) ends here
            continue
        depth += opens - closes
        if not s or s.startswith("//"):
            continue
        count += 1
    return count


def main() -> None:
    roots = sys.argv[1:] or ["core/src", "routers/src"]
    total = 0
    for root in roots:
        sub = 0
        for path in sorted(pathlib.Path(root).rglob("*.rs")):
            if is_test_file(path.relative_to(root)) or path.name == "tests.rs":
                continue
            sub += code_lines(path.read_text(encoding="utf-8"))
        print(f"{root}: {sub}")
        total += sub
    print(f"total: {total}")


if __name__ == "__main__":
    main()

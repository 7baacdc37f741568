#!/usr/bin/env python3
"""Counts a crate's public items from its rendered rustdoc.

Usage: python3 scripts/public_items.py [CRATE ...]   (default: routechain-core)

For each crate it removes the crate's old pages (rustdoc leaves the pages of items that are
no longer public), runs `cargo doc -p CRATE --no-deps` and counts, under
$CARGO_TARGET_DIR/doc/<crate> (else target/doc/<crate>):

- one per rendered item page (struct, enum, fn, trait, type alias, constant, macro, static,
  union), skipping the redirect pages rustdoc writes for items re-exported elsewhere;
- on each page, every inherent method (`id="method.` before the trait, auto-trait and
  blanket implementations), enum variant and struct field.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

KINDS = ("struct", "enum", "fn", "trait", "type", "constant", "macro", "static", "union")
IMPLEMENTATIONS = re.compile(r'id="(?:trait|synthetic|blanket)-implementations"')


def count(crate_dir: Path) -> dict:
    counts = {kind: 0 for kind in KINDS}
    counts.update(method=0, variant=0, field=0)
    for page in crate_dir.rglob("*.html"):
        kind = page.name.split(".", 1)[0]
        if kind not in KINDS:
            continue
        html = page.read_text(encoding="utf-8")
        if 'http-equiv="refresh"' in html:
            continue
        counts[kind] += 1
        inherent = IMPLEMENTATIONS.split(html, maxsplit=1)[0]
        counts["method"] += len(re.findall(r'id="method\.', inherent))
        counts["variant"] += len(re.findall(r'id="variant\.', html))
        counts["field"] += len(re.findall(r'id="structfield\.', html))
    return counts


def main() -> None:
    crates = sys.argv[1:] or ["routechain-core"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
    for crate in crates:
        crate_dir = target / "doc" / crate.replace("-", "_")
        shutil.rmtree(crate_dir, ignore_errors=True)
        subprocess.run(
            ["cargo", "doc", "--quiet", "-p", crate, "--no-deps"],
            check=True,
        )
        counts = count(crate_dir)
        detail = ", ".join(f"{kind} {n}" for kind, n in counts.items() if n)
        print(f"{crate}: {sum(counts.values())} public items ({detail})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Counts a crate's public items from its rendered rustdoc.

Usage: cargo doc -p routechain-core --no-deps && python3 scripts/public_items.py [CRATE_DIR]
(CRATE_DIR defaults to $CARGO_TARGET_DIR/doc/routechain_core, else target/doc/routechain_core).

An item is one rendered page (struct, enum, fn, trait, type alias, constant, macro, static,
union) plus, on each page, every inherent method (`id="method.` before the trait
implementations, auto-trait and blanket implementations), enum variant and struct field. Trait implementations and the redirect
pages rustdoc writes for items re-exported from private modules are not counted.
"""

import os
import re
import sys
from pathlib import Path

KINDS = ("struct", "enum", "fn", "trait", "type", "constant", "macro", "static", "union")


def count(crate_dir: Path) -> dict:
    counts = {kind: 0 for kind in KINDS}
    counts.update(method=0, variant=0, field=0)
    for page in crate_dir.rglob("*.html"):
        kind = page.name.split(".", 1)[0]
        if kind not in KINDS:
            continue
        html = page.read_text(encoding="utf-8")
        if 'http-equiv="refresh"' in html:
            continue  # a redirect to the item's page elsewhere (a re-export)
        counts[kind] += 1
        inherent = re.split(r'id="(?:trait|synthetic|blanket)-implementations"', html, maxsplit=1)[0]
        counts["method"] += len(re.findall(r'id="method\.', inherent))
        counts["variant"] += len(re.findall(r'id="variant\.', html))
        counts["field"] += len(re.findall(r'id="structfield\.', html))
    return counts


def main() -> None:
    if len(sys.argv) > 1:
        crate_dir = Path(sys.argv[1])
    else:
        target = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
        crate_dir = target / "doc" / "routechain_core"
    if not crate_dir.is_dir():
        sys.exit(f"{crate_dir}: no rendered docs (run `cargo doc -p routechain-core --no-deps`)")
    counts = count(crate_dir)
    detail = ", ".join(f"{kind} {n}" for kind, n in counts.items() if n)
    print(f"{crate_dir.name}: {sum(counts.values())} public items ({detail})")


if __name__ == "__main__":
    main()

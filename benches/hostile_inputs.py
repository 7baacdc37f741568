#!/usr/bin/env python3
"""Writes the large hostile inputs for the CLI measurements in BENCHMARKS.md
("Hostile input") into the directory given (default: target/hostile):
- p10k.txt: 10,000 providers;
- big.chain.yaml: a tag rule of 725,092 tags of two exact addresses (about 52 MB);
- t5.json: a request with the tag `tag5`;
- mistakes.chain.yaml: one condition line with 10,000 `kI == vI` mistakes (168 KB)."""
import pathlib, sys

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/hostile")
out.mkdir(parents=True, exist_ok=True)
with open(out / "p10k.txt", "w") as f:
    for i in range(10000):
        f.write(f"dubbo://10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}:20880/s"
                f"?region=r{i % 10}&dubbo.tag=t{i % 7}\n")
with open(out / "big.chain.yaml", "w") as f:
    f.write("routers:\n  - type: tag\n    rule:\n      force: false\n      tags:\n")
    for i in range(725092):
        a, b = i % 10000, (i * 7) % 10000
        f.write(f"        - {{name: tag{i}, addresses: [\"10.0.{(a >> 8) & 255}.{a & 255}:20880\", "
                f"\"10.0.{(b >> 8) & 255}.{b & 255}\"]}}\n")
(out / "t5.json").write_text('{"attachments": {"dubbo.tag": "tag5"}}')
terms = " & ".join(f"k{i} == v{i}" for i in range(10000))
(out / "mistakes.chain.yaml").write_text(
    f'routers:\n  - type: condition\n    rule:\n      conditions:\n        - "{terms} => a = b"\n')

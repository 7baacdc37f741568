#!/usr/bin/env python3
"""Regenerates the seed corpus in fuzz/corpus/ from the shipped examples (rules/examples/)
and the Dubbo conformance cases (tests/conformance/dubbo-cases.yaml). Run from the
repository root: python3 fuzz/seed.py. The corpus is committed; libFuzzer adds to it in a
scratch directory (scripts/fuzz.sh), so the committed one stays small."""
import hashlib, json, os, pathlib, yaml

root = pathlib.Path(__file__).resolve().parent.parent
corpus = root / "fuzz" / "corpus"

def put(target, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)

examples = root / "rules" / "examples"
for p in sorted(examples.rglob("*.yaml")):
    put("chain", p.read_bytes())
for p in sorted(examples.rglob("*.json")):
    put("request", p.read_bytes())
for p in sorted(examples.rglob("*.txt")):
    put("provider_url", p.read_bytes())
    for line in p.read_text().splitlines():
        if line and not line.startswith("#"):
            put("provider_url", line)

cases = yaml.safe_load((root / "tests" / "conformance" / "dubbo-cases.yaml").read_text())
def walk(v):
    if isinstance(v, dict):
        yield v
        for x in v.values():
            yield from walk(x)
    elif isinstance(v, list):
        for x in v:
            yield from walk(x)
for node in walk(cases):
    if isinstance(node.get("text"), str):
        put("condition", node["text"])
    if isinstance(node.get("yaml"), str):
        put("chain", node["yaml"])
        for line in node["yaml"].splitlines():
            if "match:" in line:
                put("condition", line.split("match:", 1)[1].strip())
    if isinstance(node.get("request"), dict):
        put("request", json.dumps(node["request"]))
    if "host" in node and "protocol" in node:
        params = "&".join(f"{k}={v}" for k, v in (node.get("params") or {}).items())
        port = f":{node['port']}" if node.get("port") else ""
        put("provider_url", f"{node['protocol']}://{node['host']}{port}/{node.get('path', '')}?{params}")

#!/usr/bin/env python3
"""Dumps a ZooKeeper tree as the Python Dubbo providers leave it (uses kazoo from the venv
made by scripts/python-dubbo.sh).

  $PY tests/python/zk_dump.py --zookeeper 127.0.0.1:2181 [--root /] [--json]

For each node: path, ephemeral or persistent (ephemeralOwner), data; for a node under a
`providers` folder also the name decoded once and twice (urllib.parse.unquote) and the
parameters of the once-decoded URL taken as written (no further decoding, as Dubbo's Java
consumer does).
"""

import argparse
import json
import sys
from urllib.parse import unquote

from kazoo.client import KazooClient


def params_as_written(url: str):
    query = url.split("?", 1)[1] if "?" in url else ""
    out = []
    for pair in query.split("&") if query else []:
        k, _, v = pair.partition("=")
        out.append([k, v])
    return out


def walk(zk, path, rows):
    data, stat = zk.get(path)
    row = {
        "path": path,
        "ephemeral": stat.ephemeralOwner != 0,
        "ephemeralOwner": hex(stat.ephemeralOwner),
        "data": data.decode("utf-8", "replace") if data else "",
    }
    name = path.rsplit("/", 1)[-1]
    if path.rsplit("/", 2)[-2:-1] == ["providers"]:
        once = unquote(name)
        row["name_raw"] = name
        row["name_decoded_once"] = once
        row["name_decoded_twice"] = unquote(once)
        row["params_after_one_decode"] = params_as_written(once)
    rows.append(row)
    for child in sorted(zk.get_children(path)):
        walk(zk, (path.rstrip("/") + "/" + child), rows)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--root", default="/")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    zk = KazooClient(hosts=args.zookeeper)
    zk.start(timeout=10)
    try:
        rows = []
        if zk.exists(args.root):
            walk(zk, args.root, rows)
    finally:
        zk.stop()
        zk.close()
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    for r in rows:
        kind = "EPHEMERAL " + r["ephemeralOwner"] if r["ephemeral"] else "persistent"
        print(f"{r['path']}  [{kind}]  data={r['data']!r}")
        if "name_raw" in r:
            print(f"    raw:         {r['name_raw']}")
            print(f"    decode x1:   {r['name_decoded_once']}")
            print(f"    decode x2:   {r['name_decoded_twice']}")
            print(f"    params (x1): {r['params_after_one_decode']}")


if __name__ == "__main__":
    main()

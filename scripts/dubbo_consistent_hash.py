#!/usr/bin/env python3
"""Reference data for Dubbo's consistent-hash load balancer (tests/data/dubbo-consistent-hash.json).

An independent re-implementation, standard library only, of the ring that Apache Dubbo's
ConsistentHashLoadBalance builds and of the way it picks a provider for a call:

    ring: for each provider address A (URL.getAddress(): "host:port", or "host" when port <= 0),
          for i in 0 .. replicaNumber/4 - 1 (integer division; hash.nodes, default 160):
              d = md5(bytes of A + str(i))          # e.g. "10.0.0.1:20880" + "0" -> "10.0.0.1:208800"
              for h in 0..3: point = d[4h] | d[4h+1] << 8 | d[4h+2] << 16 | d[4h+3] << 24
                             (unsigned 32-bit, i.e. each 4-byte group read little-endian)
                             ring[point] = A       # TreeMap.put: on a collision the later put wins
    key:  hash.arguments (default "0") split on the regex \\s*[,]+\\s*, each part an int index;
          key = concatenation, with NO separator, of String.valueOf(args[i]) for each index in
          the configured order, skipping indices that are < 0 or >= len(args)
    pick: p = point of md5(key) taken from bytes 0..3 (h = 0 above);
          the ring entry with the smallest point >= p, or the first entry when there is none.

Strings are hashed as the bytes of String.getBytes() (the JVM default charset); every string
here is ASCII, so that is the same as UTF-8.

Usage:
    python3 scripts/dubbo_consistent_hash.py            # writes tests/data/dubbo-consistent-hash.json
    python3 scripts/dubbo_consistent_hash.py --verify-java
        # also runs scripts/DubboConsistentHashCheck.java (Dubbo's code copied verbatim; needs
        # `java` 11+) on the same inputs and fails unless every ring point and selection agrees
"""

import argparse
import bisect
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "dubbo-consistent-hash.json")
JAVA_CHECK = os.path.join(ROOT, "scripts", "DubboConsistentHashCheck.java")

SOURCE = {
    "repository": "apache/dubbo",
    "path": "dubbo-cluster/src/main/java/org/apache/dubbo/rpc/cluster/loadbalance/ConsistentHashLoadBalance.java",
    "branch": "3.3",
    "branch_commit": "324c62550ab22ffa53bce15f219bbc1d67b8c4a3",
    "file_last_changed_in": "00812ce41c44be6e5cd5e2b8e5bf602f806bbbca",
    "file_blob": "82421e460febf5d1e147276a6ef509d0d48d1b8a",
    "same_blob_on_branches": ["3.2", "3.3", "3.4"],
    "not_followed": "the 2.7.x branch head's version adds a bounded-load step to selectForKey (skip to the next "
                    "ring entry while the chosen server already took >= 1.5x the average request count), so its "
                    "picks depend on call history; 3.x has no such step and its toKey also tolerates args == null",
    "helpers_read": [
        "dubbo-common/src/main/java/org/apache/dubbo/common/io/Bytes.java (getMD5(String) = MD5 of str.getBytes())",
        "dubbo-common/src/main/java/org/apache/dubbo/common/constants/CommonConstants.java (COMMA_SPLIT_PATTERN = \\s*[,]+\\s*)",
        "dubbo-common/src/main/java/org/apache/dubbo/common/url/component/URLAddress.java (getAddress: port <= 0 ? host : host + ':' + port)",
        "dubbo-rpc/dubbo-rpc-api/src/main/java/org/apache/dubbo/rpc/support/RpcUtils.java (getArguments: for $invoke/$invokeAsync the real arguments are args[2])",
    ],
}

REPLICA_NUMBER = 160  # hash.nodes default
ADDRESSES = ["10.0.0.%d:20880" % n for n in range(1, 11)]
REMOVED = "10.0.0.4:20880"
COMMA_SPLIT = re.compile(r"\s*[,]+\s*")


def md5(s):
    return hashlib.md5(s.encode("utf-8")).digest()


def point(digest, number):
    """Dubbo's hash(digest, number): bytes [4n..4n+3] as an unsigned little-endian 32-bit int."""
    b = digest[number * 4: number * 4 + 4]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)


def build_ring(addresses, replica_number=REPLICA_NUMBER):
    """Returns (sorted points, {point: address}, number of collisions)."""
    ring = {}
    collisions = 0
    for address in addresses:
        for i in range(replica_number // 4):
            digest = md5(address + str(i))
            for h in range(4):
                m = point(digest, h)
                if m in ring:
                    collisions += 1
                ring[m] = address  # TreeMap.put: the later invoker replaces the earlier one
    return sorted(ring), ring, collisions


def java_string(value):
    """String.valueOf(Object) for the argument types used here."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise TypeError("unsupported argument type: %r" % (value,))


def argument_index(hash_arguments):
    return [int(part) for part in COMMA_SPLIT.split(hash_arguments)]


def to_key(args, hash_arguments):
    buf = []
    for i in argument_index(hash_arguments):
        if 0 <= i < len(args):
            buf.append(java_string(args[i]))
    return "".join(buf)


def select(points, ring, key):
    p = point(md5(key), 0)
    idx = bisect.bisect_left(points, p)  # ceilingEntry(p)
    if idx == len(points):
        idx = 0  # firstEntry()
    return p, ring[points[idx]]


def cases():
    out = [(["user-%d" % n], "0") for n in range(200)]
    out += [
        (["user-1", "order-1"], "0,1"),
        (["user-2", "order-9"], "0,1"),
        (["user-3", "order-3", "ignored"], "0,1"),
        (["tenant-a", "user-42"], "0,1"),
        (["user-7"], "0,1"),  # index 1 is past the end: skipped, key "user-7"
        (["user-8", "order-8"], "1,0"),  # order of hash.arguments is the join order: "order-8user-8"
        (["user-9", "order-9"], "0 , 1"),  # spaces around commas are allowed
        (["user-10", 42], "0,1"),  # Integer 42 -> "42"
        (["user-11", None], "0,1"),  # null -> "null"
        (["user-12", "x"], "1"),  # only the second argument
        ([], "0"),  # no arguments: key "" (md5 of the empty string)
        (["wrap-815"], "0"),  # its point is above the ring's last point: wraps to the first entry
    ]
    return out


def compute():
    points, ring, collisions = build_ring(ADDRESSES)
    remaining = [a for a in ADDRESSES if a != REMOVED]
    points_rm, ring_rm, collisions_rm = build_ring(remaining)
    selections, after = [], []
    for args, hash_arguments in cases():
        key = to_key(args, hash_arguments)
        p, address = select(points, ring, key)
        p2, address2 = select(points_rm, ring_rm, key)
        assert p == p2
        selections.append({"args": args, "hash_arguments": hash_arguments, "key": key, "point": p, "address": address})
        after.append({"args": args, "hash_arguments": hash_arguments, "key": key, "point": p, "address": address2})
    return {
        "points": points, "ring": ring, "collisions": collisions,
        "points_rm": points_rm, "ring_rm": ring_rm, "collisions_rm": collisions_rm,
        "selections": selections, "after": after,
    }


DOC = (
    "Reference data for Apache Dubbo's ConsistentHashLoadBalance (source: see 'source'). "
    "Ring: for each provider address A (URL.getAddress(), 'host:port') and i in 0..replica_number/4-1 "
    "(integer division, hash.nodes default 160, so 160 points per address), d = MD5 of the bytes of the "
    "string A + decimal i (e.g. '10.0.0.1:20880' + '0' = '10.0.0.1:208800', no separator); for h in 0..3 "
    "the point is the unsigned 32-bit value d[4h] | d[4h+1]<<8 | d[4h+2]<<16 | d[4h+3]<<24 (each 4-byte "
    "group of the digest read little-endian; Dubbo writes it as (d[3+4h]<<24)|(d[2+4h]<<16)|(d[1+4h]<<8)|d[4h], "
    "masked with 0xFFFFFFFFL); points go into a TreeMap<Long, Invoker> in provider-list order, so on a "
    "collision the later provider wins (there are none in this data). Key: hash.arguments (default '0') is "
    "split on the regex \\s*[,]+\\s* into int indices; the key is the concatenation WITHOUT any separator of "
    "String.valueOf(args[i]) for each index in the configured order, skipping indices < 0 or >= args.length "
    "(null -> 'null', Integer 42 -> '42'). Selection: p = the h=0 point of MD5(key); the provider of the "
    "ceiling entry (smallest point >= p), or of the first entry when p is above every point. "
    "Strings are hashed as String.getBytes() (JVM default charset; all strings here are ASCII). "
    "After a provider is removed Dubbo rebuilds the ring from the remaining providers (the invoker list's "
    "hashCode changes), which here equals the full ring minus the removed provider's points. "
    "Generated by scripts/dubbo_consistent_hash.py (an independent Python implementation) and "
    "cross-checked with scripts/DubboConsistentHashCheck.java, which copies Dubbo's hash(), Bytes.getMD5(String), "
    "toKey(), selectForKey(), the ring-building loop and COMMA_SPLIT_PATTERN verbatim: all ring points of both "
    "rings and every selection below agreed (run the script with --verify-java to repeat the check)."
)


def document(r):
    return {
        "doc": DOC,
        "source": SOURCE,
        "generator": "scripts/dubbo_consistent_hash.py",
        "cross_checked_with": "scripts/DubboConsistentHashCheck.java (java 17; Dubbo's code copied verbatim)",
        "replica_number": REPLICA_NUMBER,
        "points_per_address": (REPLICA_NUMBER // 4) * 4,
        "addresses": ADDRESSES,
        "ring_size": len(r["points"]),
        "ring_collisions": r["collisions"],
        "ring_first_20": [{"point": p, "address": r["ring"][p]} for p in r["points"][:20]],
        "ring_last_5": [{"point": p, "address": r["ring"][p]} for p in r["points"][-5:]],
        "selections": r["selections"],
        "removed_address": REMOVED,
        "ring_size_after_removal": len(r["points_rm"]),
        "ring_first_20_after_removal": [{"point": p, "address": r["ring_rm"][p]} for p in r["points_rm"][:20]],
        "selections_after_removal": r["after"],
        "selections_changed_by_removal": sum(
            1 for a, b in zip(r["selections"], r["after"]) if a["address"] != b["address"]),
    }


def encode_arg(v):
    if v is None:
        return "n:"
    if isinstance(v, bool):
        raise TypeError("bool not used")
    if isinstance(v, int):
        return "i:%d" % v
    assert "\t" not in v and "\n" not in v
    return "s:" + v


def verify_java(r):
    with tempfile.NamedTemporaryFile("w", suffix=".tsv", delete=False) as f:
        for args, hash_arguments in cases():
            f.write("\t".join([hash_arguments] + [encode_arg(a) for a in args]) + "\n")
        case_file = f.name
    try:
        out = subprocess.run(
            ["java", JAVA_CHECK, case_file, REMOVED, str(REPLICA_NUMBER)] + ADDRESSES,
            check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(case_file)
    java = {"R": [], "RR": [], "S": [], "SR": []}
    for line in out.splitlines():
        kind, *rest = line.split("\t")
        java[kind].append(rest)
    mismatches = 0

    def same(what, mine, theirs):
        nonlocal mismatches
        if mine != theirs:
            mismatches += 1
            if mismatches <= 10:
                print("MISMATCH %s: python %r java %r" % (what, mine, theirs), file=sys.stderr)

    same("ring size", len(r["points"]), len(java["R"]))
    for p, (jp, ja) in zip(r["points"], java["R"]):
        same("ring point", (p, r["ring"][p]), (int(jp), ja))
    same("ring size after removal", len(r["points_rm"]), len(java["RR"]))
    for p, (jp, ja) in zip(r["points_rm"], java["RR"]):
        same("ring point after removal", (p, r["ring_rm"][p]), (int(jp), ja))
    for kind, sels in (("S", r["selections"]), ("SR", r["after"])):
        same("selection count", len(sels), len(java[kind]))
        for s, (jk, jp, ja) in zip(sels, java[kind]):
            same("selection " + kind, (s["key"], s["point"], s["address"]), (jk, int(jp), ja))
    if mismatches:
        sys.exit("java cross-check FAILED: %d mismatches" % mismatches)
    print("java cross-check OK: %d + %d ring points, %d + %d selections identical" % (
        len(java["R"]), len(java["RR"]), len(java["S"]), len(java["SR"])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--verify-java", action="store_true")
    a = ap.parse_args()
    r = compute()
    if a.verify_java:
        verify_java(r)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(document(r), f, indent=1)
        f.write("\n")
    print("wrote %s (%d ring points, %d selections, %d changed by removing %s)" % (
        os.path.relpath(a.out), len(r["points"]), len(r["selections"]),
        document(r)["selections_changed_by_removal"], REMOVED))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a provider list for the shipped full chain (rules/examples/full.chain.yaml) at scale.

Usage: python3 benches/providers_file.py N OUT

N providers of org.apache.dubbo.samples.CommentService, one Dubbo URL per line, as a
registry writes them (keys sorted): regions/IDCs as in rules/examples/providers.txt
(beijing mt/zf 40% each, shanghai sh 20%), groups idx_user/idx_order, 5% tagged gray, 1%
degraded, a unique address, pid and timestamp each. About 300 bytes per line. The same N
always gives the same file. Used for the CLI's 1,000,000-provider measurement in
BENCHMARKS.md ("The CLI at 1,000,000 providers").
"""

import sys

SERVICE = "org.apache.dubbo.samples.CommentService"


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    state = 0x9E3779B97F4A7C15

    def below(k):
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return (state >> 33) % k

    with open(out, "w") as f:
        for i in range(n):
            r = below(10)
            region, idc = ("beijing", "mt") if r < 4 else ("beijing", "zf") if r < 8 else ("shanghai", "sh")
            params = {
                "anyhost": "true",
                "application": "comment-provider",
                "dubbo": "2.0.2",
                "group": "idx_user" if below(2) == 0 else "idx_order",
                "idc": idc,
                "interface": SERVICE,
                "methods": "addComment,getComment,listComments",
                "pid": str(1000 + below(60000)),
                "region": region,
                "release": "3.3.0",
                "side": "provider",
                "timeout": "3000",
                "timestamp": str(1_700_000_000_000 + i),
                "version": "1.0.0",
            }
            if below(100) < 5:
                params["dubbo.tag"] = "gray"
            if below(100) == 0:
                params["degraded"] = "true"
            query = "&".join(f"{k}={v}" for k, v in sorted(params.items()))
            host = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            f.write(f"dubbo://{host}:20880/{SERVICE}?{query}\n")


if __name__ == "__main__":
    main()

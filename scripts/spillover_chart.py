#!/usr/bin/env python3
"""Charts traffic share against healthy share for the IDC-weight router's `spillover`.

Every point is a real `routechain simulate` run (the release binary, built when missing):
for each healthy share of a 20-provider IDC from 0% to 100% in steps of 5%, the script
writes a chain file and a provider list (the unhealthy providers carry `degraded=true`),
runs `simulate --calls 20000 --group-by idc --format json`, and reads the IDC's share of
the calls. Three series:

- `{mt: 50, zf: 50}` without spillover: mt keeps 50% until it has no healthy provider;
- the same with `spillover: {overprovisioning: 1.4}`: mt's weight is 50 × min(1, 1.4 × h);
- the local region (beijing, IDC mt) against `cross_region: [shanghai]` with spillover:
  Envoy's priority levels, everything local down to 71.4% healthy, then proportional.

Writes docs/img/spillover.png (matplotlib) and prints the data as a Markdown table.

Usage: python3 scripts/spillover_chart.py [--png PATH] [--calls N]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "routechain")
SIZE = 20

RULES = {
    "no spillover": (
        "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\n",
        "zf",
    ),
    "spillover": (
        "idcs: {beijing: [mt, zf]}\nroute_tables: {beijing: {mt: 50, zf: 50}}\n"
        "spillover: {overprovisioning: 1.4}\n",
        "zf",
    ),
    "region spillover": (
        "idcs: {beijing: [mt], shanghai: [sh]}\ncross_region: [shanghai]\n"
        "spillover: {overprovisioning: 1.4}\n",
        "sh",
    ),
}


def chain_text(rule):
    body = "".join(f"      {line}\n" for line in rule.splitlines())
    return (
        "consumer: consumer://10.9.0.1/svc?region=beijing&idc=mt\n"
        "routers:\n  - type: idc-weight\n    rule:\n" + body
    )


def providers_text(healthy, other):
    region = "beijing" if other == "zf" else "shanghai"
    lines = []
    for i in range(SIZE):
        degraded = "&degraded=true" if i >= healthy else ""
        lines.append(f"dubbo://10.20.0.{i + 1}:1/svc?region=beijing&idc=mt{degraded}")
    for i in range(SIZE):
        lines.append(f"dubbo://10.30.0.{i + 1}:1/svc?region={region}&idc={other}")
    return "\n".join(lines) + "\n"


def simulate(directory, rule, other, healthy, calls):
    chain = os.path.join(directory, "chain.yaml")
    providers = os.path.join(directory, "providers.txt")
    request = os.path.join(directory, "request.json")
    with open(chain, "w") as f:
        f.write(chain_text(rule))
    with open(providers, "w") as f:
        f.write(providers_text(healthy, other))
    with open(request, "w") as f:
        f.write("{}\n")
    out = subprocess.run(
        [BINARY, "simulate", "--chain", chain, "--providers", providers, "--request",
         request, "--calls", str(calls), "--group-by", "idc", "--format", "json"],
        check=True, capture_output=True, text=True,
    )
    groups = {g["value"]: g["share"] for g in json.loads(out.stdout).get("groups", [])}
    return groups.get("mt", 0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--png", default=os.path.join(ROOT, "docs", "img", "spillover.png"))
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    if not os.path.exists(BINARY):
        subprocess.run(["cargo", "build", "--release", "-p", "routechain-cli"], cwd=ROOT,
                       check=True)
    steps = list(range(SIZE, -1, -1))
    data = {}
    with tempfile.TemporaryDirectory() as directory:
        for name, (rule, other) in RULES.items():
            data[name] = [simulate(directory, rule, other, h, args.calls) for h in steps]
    shares = [100 * h / SIZE for h in steps]

    print("| mt healthy | " + " | ".join(f"mt share, {n}" for n in RULES) + " |")
    print("|---:|" + "---:|" * len(RULES))
    for i, share in enumerate(shares):
        print(f"| {share:.0f}% | " + " | ".join(f"{data[n][i]:.2f}%" for n in RULES) + " |")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("matplotlib is needed for the chart: pip install matplotlib")
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    styles = {
        "no spillover": ("#7f7f7f", "--", "{mt: 50, zf: 50}, no spillover: mt's share"),
        "spillover": ("#1f77b4", "-", "{mt: 50, zf: 50}, overprovisioning 1.4: mt's share"),
        "region spillover": ("#ff7f0e", "-", "local region vs cross_region, 1.4: local share"),
    }
    for name, (color, line, label) in styles.items():
        ax.plot(shares, data[name], line, color=color, marker="o", markersize=3, label=label)
    ax.axvline(100 / 1.4, color="#bbbbbb", linewidth=0.8)
    ax.text(100 / 1.4 + 1, 4, "1/1.4 ≈ 71.4%", color="#777777", fontsize=8)
    ax.set_xlabel("healthy share of mt (the local IDC), % — from routechain simulate")
    ax.set_ylabel("share of calls, %")
    ax.set_xlim(100, 0)
    ax.set_ylim(0, 102)
    ax.grid(True, linewidth=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("idc-weight spillover: traffic follows health", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.png), exist_ok=True)
    fig.savefig(args.png)
    print(f"\nwrote {os.path.relpath(args.png, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Turns criterion's output into the tables and the chart of BENCHMARKS.md.

Reads target/criterion/<group>/<id>/new/{benchmark,estimates}.json (written by
`cargo bench -p routechain-benches --bench routing`) and target/criterion/memory.json (written by
`--bench memory`), prints Markdown tables of the medians to standard output, and writes
docs/img/bench_routing.svg: nanoseconds per call against provider count, both axes
logarithmic, one line per routing benchmark. Uses only the Python standard library (the SVG
is written by hand), so it runs anywhere `cargo bench` does.

Usage: python3 scripts/bench_chart.py [--criterion-dir DIR] [--svg PATH]
"""

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Line order and labels of the chart (routing benchmarks only).
SERIES = [
    ("route-naive", "naive Vec chain (baseline)", "#d62728"),
    ("route-full-select", "Cluster::select (chain + pick)", "#e377c2"),
    ("route-full-pick", "full chain + pick", "#1f77b4"),
    ("route-full", "full chain (4 routers)", "#17becf"),
    ("route-condition", "condition alone", "#2ca02c"),
    ("route-tag", "tag alone", "#9467bd"),
    ("route-group", "group alone", "#8c564b"),
    ("route-idc-weight", "idc-weight alone", "#ff7f0e"),
]

TABLE_GROUPS = [
    ("route-tag", "tag alone"),
    ("route-condition", "condition alone"),
    ("route-group", "group alone"),
    ("route-idc-weight", "idc-weight alone"),
    ("route-full", "full chain"),
    ("route-full-pick", "full chain + pick"),
    ("route-full-select", "Cluster::select (full chain + pick)"),
    ("route-naive", "naive baseline"),
    ("update-providers", "prepare: changed provider list"),
    ("update-rule", "prepare: changed rule (parse + compile + prepare)"),
    ("update-parse-urls", "parse provider URLs"),
]


def load(criterion_dir):
    """{group: {parameter: median_ns}} from every benchmark's `new` estimates."""
    results = {}
    if not os.path.isdir(criterion_dir):
        return results
    for group in sorted(os.listdir(criterion_dir)):
        gdir = os.path.join(criterion_dir, group)
        if not os.path.isdir(gdir):
            continue
        for bench in os.listdir(gdir):
            new = os.path.join(gdir, bench, "new")
            try:
                with open(os.path.join(new, "benchmark.json")) as f:
                    meta = json.load(f)
                with open(os.path.join(new, "estimates.json")) as f:
                    est = json.load(f)
            except (OSError, ValueError):
                continue
            param = meta.get("value_str") or meta.get("function_id") or bench
            try:
                param = int(param)
            except (TypeError, ValueError):
                pass
            results.setdefault(meta.get("group_id", group), {})[param] = est["median"][
                "point_estimate"
            ]
    return results


def human(ns):
    if ns is None:
        return "—"
    if ns < 1_000:
        return f"{ns:.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1_000:.2f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1_000_000:.2f} ms"
    return f"{ns / 1_000_000_000:.2f} s"


def tables(results, memory, cpu_rows=None):
    out = []
    sizes = sorted(
        {p for g, _ in TABLE_GROUPS for p in results.get(g, {}) if isinstance(p, int)}
    )
    if sizes:
        out.append("| benchmark (median per call or per update) | " + " | ".join(f"{s:,}" for s in sizes) + " |")
        out.append("|---|" + "---:|" * len(sizes))
        for group, label in TABLE_GROUPS:
            if group not in results:
                continue
            row = [human(results[group].get(s)) for s in sizes]
            out.append(f"| {label} | " + " | ".join(row) + " |")
        full = results.get("route-full", {})
        naive = results.get("route-naive", {})
        ratio = [
            f"{naive[s] / full[s]:,.0f}×" if s in full and s in naive and full[s] > 0 else "—"
            for s in sizes
        ]
        out.append("| **naive ÷ full chain** | " + " | ".join(ratio) + " |")
        per_provider = [
            f"{naive[s] / s:.1f} ns" if s in naive else "—" for s in sizes
        ]
        out.append("| naive cost per provider | " + " | ".join(per_provider) + " |")
    threads = {k: v for k, v in results.get("threads-full-10000", {}).items()}
    if 1 in threads and 2 in threads:
        # One iteration = one call per thread; calls per second = threads / time.
        t1 = 1e9 / threads[1]
        t2 = 2e9 / threads[2]
        out.append("")
        out.append("| threads (full chain, 10,000 providers) | time per iteration | calls per second | speed-up |")
        out.append("|---|---:|---:|---:|")
        out.append(f"| 1 | {human(threads[1])} | {t1:,.0f} | 1.00× |")
        out.append(f"| 2 | {human(threads[2])} (one call on each thread) | {t2:,.0f} | {t2 / t1:.2f}× |")
    if cpu_rows:
        base = next((r for r in cpu_rows if r["threads"] == 1), None)
        out.append("")
        out.append(
            "| threads, 1,000,000 calls each (full chain, 10,000 providers) | calls per second (wall) "
            "| speed-up | CPU time per call | time spent waiting for a core |"
        )
        out.append("|---|---:|---:|---:|---:|")
        for r in cpu_rows:
            speed = r["calls_per_second"] / base["calls_per_second"] if base else float("nan")
            out.append(
                f"| {r['threads']} | {r['calls_per_second']:,.0f} | {speed:.2f}× | "
                f"{r['cpu_ns_per_call']:,.0f} ns | {r['runqueue_wait_ns'] / 1e6:,.0f} ms of "
                f"{r['wall_ns'] / 1e6 * r['threads']:,.0f} ms |"
            )
    if memory:
        out.append("")
        n = memory["providers"]
        out.append(f"| memory at {n:,} providers (bytes still allocated after building) | bytes | bytes per provider |")
        out.append("|---|---:|---:|")
        for row in memory["rows"]:
            out.append(f"| {row['what']} | {row['bytes']:,} | {row['bytes'] / n:,.1f} |")
        out.append(
            f"| **routing state: snapshot + full chain** | "
            f"{round(memory['total_bytes_per_provider'] * n):,} | **{memory['total_bytes_per_provider']:,.1f}** |"
        )
    return "\n".join(out)


def svg(results, path):
    series = [(g, label, color, results[g]) for g, label, color in SERIES if g in results]
    points = [(x, y) for *_, data in series for x, y in data.items() if isinstance(x, int) and y > 0]
    if not points:
        print("no routing results found: run `cargo bench -p routechain-benches --bench routing` first", file=sys.stderr)
        return False
    w, h = 860, 540
    left, right, top, bottom = 80, 250, 40, 60
    xmin, xmax = 2.0, 5.0  # 100 .. 100,000 providers
    ymin = math.floor(math.log10(min(y for _, y in points)))
    ymax = math.ceil(math.log10(max(y for _, y in points)))
    if ymax == ymin:
        ymax += 1

    def px(x):
        return left + (math.log10(x) - xmin) / (xmax - xmin) * (w - left - right)

    def py(y):
        return top + (ymax - math.log10(y)) / (ymax - ymin) * (h - top - bottom)

    def ylabel(e):
        ns = 10**e
        for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3), ("ns", 1)):
            if ns >= scale:
                return f"{ns / scale:g} {unit}"
        return f"{ns:g} ns"

    s = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{(left + w - right) / 2}" y="22" text-anchor="middle" font-size="15">'
        "Time per routed call (median) against provider count</text>",
    ]
    for e in range(int(xmin), int(xmax) + 1):
        x = px(10**e)
        s.append(f'<line x1="{x}" y1="{top}" x2="{x}" y2="{h - bottom}" stroke="#ddd"/>')
        s.append(f'<text x="{x}" y="{h - bottom + 18}" text-anchor="middle">{10**e:,}</text>')
    for e in range(ymin, ymax + 1):
        y = py(10**e)
        s.append(f'<line x1="{left}" y1="{y}" x2="{w - right}" y2="{y}" stroke="#ddd"/>')
        s.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{ylabel(e)}</text>')
    s.append(f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="none" stroke="#444"/>')
    s.append(f'<text x="{(left + w - right) / 2}" y="{h - 15}" text-anchor="middle">providers (log scale)</text>')
    s.append(
        f'<text x="18" y="{(top + h - bottom) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {(top + h - bottom) / 2})">time per call (log scale)</text>'
    )
    for i, (_, label, color, data) in enumerate(series):
        pts = sorted((x, y) for x, y in data.items() if isinstance(x, int) and y > 0)
        path_d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6,4"' if "naive" in label else ""
        s.append(f'<polyline points="{path_d}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for x, y in pts:
            s.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"><title>{label}, {x:,} providers: {human(y)}</title></circle>')
        ly = top + 10 + i * 22
        s.append(f'<line x1="{w - right + 15}" y1="{ly}" x2="{w - right + 45}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/>')
        s.append(f'<text x="{w - right + 52}" y="{ly + 4}">{label}</text>')
    s.append("</svg>")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(s) + "\n")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--criterion-dir", default=os.path.join(ROOT, "target", "criterion"))
    ap.add_argument("--svg", default=os.path.join(ROOT, "docs", "img", "bench_routing.svg"))
    args = ap.parse_args()
    results = load(args.criterion_dir)
    memory = None
    try:
        with open(os.path.join(args.criterion_dir, "memory.json")) as f:
            memory = json.load(f)
    except (OSError, ValueError):
        pass
    cpu_rows = None
    try:
        with open(os.path.join(args.criterion_dir, "threads_cpu.json")) as f:
            cpu_rows = json.load(f)
    except (OSError, ValueError):
        pass
    print(tables(results, memory, cpu_rows))
    if svg(results, args.svg):
        print(f"\nchart written to {os.path.relpath(args.svg, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Runs every benchmark of routechain and regenerates the report's tables and chart:
#   1. routing benchmarks (criterion; ~5 minutes on 2 cores),
#   2. memory at 100,000 providers (counting allocator),
#   3. scripts/bench_chart.py: Markdown tables on stdout (saved to target/criterion/tables.md)
#      and docs/img/bench_routing.svg.
# Extra arguments go to criterion, e.g. `scripts/bench.sh route-full` runs only those.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "machine load before: $(uptime)"
cargo bench -p routechain-benches --bench routing --bench memory -- "$@"
echo "machine load after: $(uptime)"
python3 scripts/bench_chart.py | tee target/criterion/tables.md

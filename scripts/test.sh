#!/usr/bin/env bash
# Runs every test of routechain on a fresh machine: installs what the tests need (ZooKeeper
# and Prometheus, from Debian's packages, when they are missing; the Python Dubbo venv), then runs the whole
# workspace's tests.
# Tests that need ZooKeeper start their own server on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/zookeeper.sh

# Prometheus (Debian's package: prometheus and promtool) for the metrics tests
# (cli/tests/metrics.rs start their own server on a free loopback port). A failure stops
# here with the script's message: those tests are never skipped.
bash .ci/prometheus.sh

# rnacos (the Nacos-compatible server, `cargo install rnacos --locked`, reused when present)
# for the Nacos tests (tests/tests/nacos*.rs, cli/tests/nacos.rs start their own server on
# free loopback ports). A failure stops here with the script's message: never a skip.
bash .ci/rnacos.sh

# The official Python Dubbo implementation (apache-dubbo[zookeeper]==3.0.0b1) and the
# Python Nacos SDK (nacos-sdk-python==2.0.11) in a venv at target/python-dubbo, for the tests
# with real Python providers (tests/tests/live/python.rs) and the Nacos writer (nacos*.rs).
# A failure stops here with the script's message: that test is never skipped.
bash scripts/python-dubbo.sh >/dev/null

# The example chain rules/examples/plugins/canary.chain.yaml loads the canary plugin from
# target/release/ (the plugin tests build their own copies under target/plugin-tests/).
cargo build --release -p router-canary

cargo test --workspace --all-targets --no-fail-fast "$@"
cargo test --workspace --doc

#!/usr/bin/env bash
# Runs every test of routechain on a fresh machine: installs what the tests need (ZooKeeper,
# from Debian's packages, when it is missing), then runs the whole workspace's tests.
# Tests that need ZooKeeper start their own server on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/.."

bash .ci/zookeeper.sh

# The example chain rules/examples/plugins/canary.chain.yaml loads the canary plugin from
# target/release/ (the plugin tests build their own copies under target/plugin-tests/).
cargo build --release -p router-canary

cargo test --workspace --all-targets --no-fail-fast "$@"
cargo test --workspace --doc

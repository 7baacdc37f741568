#!/usr/bin/env bash
# Installs rnacos (the Nacos-compatible server from crates.io, pinned) into ~/.cargo/bin when
# it is missing. Idempotent: a binary already there is reused (the install compiles for
# about 19 minutes on 2 cores). The tests start their own server on free loopback ports
# (testkit/src/nacos.rs); nothing is started here. A failure is a message and exit 1:
# the Nacos tests are never skipped.
set -euo pipefail
VERSION=0.8.8
BIN="${RNACOS:-$HOME/.cargo/bin/rnacos}"
if [ -x "$BIN" ]; then
  exit 0
fi
command -v cargo >/dev/null 2>&1 || { echo "rnacos.sh: cargo is required to install rnacos" >&2; exit 1; }
echo "rnacos.sh: installing rnacos $VERSION (cargo install rnacos --locked, about 19 minutes on 2 cores)" >&2
# Its own target directory, so that the workspace's is not rebuilt.
CARGO_TARGET_DIR="${RNACOS_TARGET_DIR:-${TMPDIR:-/tmp}/rnacos-build}" \
  cargo install rnacos --locked --version "$VERSION" >&2 \
  || { echo "rnacos.sh: cargo install rnacos --locked --version $VERSION failed" >&2; exit 1; }
[ -x "$HOME/.cargo/bin/rnacos" ] || { echo "rnacos.sh: rnacos is not in ~/.cargo/bin after the install" >&2; exit 1; }

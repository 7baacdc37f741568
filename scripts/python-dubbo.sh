#!/usr/bin/env bash
# Creates (idempotently) the virtual environment <repo>/target/python-dubbo holding the
# official Python Dubbo implementation, pinned, for the tests that start real Python
# providers (tests/python/dubbo_provider.py), and the official Python Nacos SDK, pinned (its
# Nacos 2 gRPC client, module `v2.nacos`), the independent writer of the Nacos tests
# (tests/python/nacos_writer.py). Works from any directory. The venv's python
# path is the last line of stdout (progress goes to stderr).
#
#   bash scripts/python-dubbo.sh                          # make sure the venv is there
#   PY=$(bash scripts/python-dubbo.sh | tail -n1)          # ... and get its python
#   PYTHON_DUBBO_EXTRA="grpcio" bash scripts/python-dubbo.sh   # also a plain gRPC client
#
# Environment:
#   PYTHON              interpreter to build the venv from (default: python3 on PATH, else
#                       /usr/bin/python3); apache-dubbo 3.0.0b1 needs Python >= 3.11
#   PYTHON_DUBBO_EXTRA  space-separated extra pip requirements for the venv
#
# A second run with the venv in place does no network access and takes well under a second.
# A failure is a message on stderr and exit 1, never a silent skip.
set -euo pipefail

PIN='apache-dubbo[zookeeper]==3.0.0b1'
PIN_VERSION='3.0.0b1'
NACOS_PIN='nacos-sdk-python==2.0.11'
NACOS_PIN_VERSION='2.0.11'

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/target/python-dubbo"
VPY="$VENV/bin/python"
STAMP="$VENV/.routechain-installed"
EXTRA="${PYTHON_DUBBO_EXTRA:-}"

die() {
  echo "python-dubbo.sh: error: $*" >&2
  exit 1
}

# True when the venv runs and holds the pinned package with its ZooKeeper extra, and every
# extra requirement asked for is recorded in the stamp file as installed by an earlier run.
venv_ready() {
  [ -x "$VPY" ] || return 1
  "$VPY" - "$PIN_VERSION" "$NACOS_PIN_VERSION" >/dev/null 2>&1 <<'PYEOF' || return 1
import sys
from importlib.metadata import version
assert version("apache-dubbo") == sys.argv[1], version("apache-dubbo")
assert version("nacos-sdk-python") == sys.argv[2], version("nacos-sdk-python")
import dubbo, kazoo, h2  # noqa: F401  (the package, its ZooKeeper extra, its HTTP/2 stack)
from v2.nacos import NacosNamingService, NacosConfigService  # noqa: F401  (the gRPC client)
PYEOF
  local req
  for req in $EXTRA; do
    grep -qxF -- "$req" "$STAMP" 2>/dev/null || return 1
  done
  return 0
}

if venv_ready; then
  echo "$VPY"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=/usr/bin/python3
command -v "$PYTHON" >/dev/null 2>&1 \
  || die "no python3 found: install Debian's python3 and python3-venv (apt-get install -y python3-venv)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "$PYTHON is $("$PYTHON" -V 2>&1); apache-dubbo $PIN_VERSION needs Python >= 3.11 (set PYTHON=...)"

make_venv() {
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$1" -m venv "$VENV" >&2 && "$VENV/bin/python" -m pip --version >/dev/null 2>&1
}

if ! { [ -x "$VPY" ] && "$VPY" -m pip --version >/dev/null 2>&1; }; then
  echo "python-dubbo.sh: creating $VENV with $PYTHON ($("$PYTHON" -V 2>&1))" >&2
  if ! make_venv "$PYTHON"; then
    # Debian's python3 ships venv/ensurepip separately, in python3-venv.
    echo "python-dubbo.sh: venv creation failed; installing Debian's python3-venv" >&2
    command -v apt-get >/dev/null 2>&1 \
      || die "venv creation failed and apt-get is not available: install python3-venv"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y python3-venv >&2 \
      || { $SUDO apt-get update >&2 && $SUDO apt-get install -y python3-venv >&2; } \
      || die "apt-get install python3-venv failed"
    # python3-venv completes Debian's own interpreter: fall back to it if $PYTHON still fails.
    if ! make_venv "$PYTHON"; then
      make_venv /usr/bin/python3 \
        || die "cannot create a venv at $VENV even with python3-venv installed"
    fi
  fi
fi

echo "python-dubbo.sh: installing $PIN $NACOS_PIN${EXTRA:+ $EXTRA} into $VENV" >&2
# shellcheck disable=SC2086
"$VPY" -m pip install --disable-pip-version-check -q "$PIN" "$NACOS_PIN" $EXTRA >&2 \
  || die "pip install $PIN $NACOS_PIN${EXTRA:+ $EXTRA} failed (is PyPI reachable? see pip's output above)"

{
  echo "$PIN"
  echo "$NACOS_PIN"
  for req in $EXTRA; do echo "$req"; done
  cat "$STAMP" 2>/dev/null || true
} | sort -u >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"

venv_ready || die "the venv at $VENV was built but does not import dubbo/kazoo/h2 $PIN_VERSION and v2.nacos $NACOS_PIN_VERSION"
echo "$VPY"

#!/usr/bin/env bash
# Installs ZooKeeper (Debian package `zookeeper`) when it is missing. Idempotent.
# The tests start their own server from /usr/share/java/zookeeper.jar on a free loopback
# port (testkit/src/zookeeper.rs); nothing is started here.
set -euo pipefail
if [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "zookeeper is missing and apt-get is not available: install ZooKeeper 3.8 and Java" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y zookeeper || { $SUDO apt-get update && $SUDO apt-get install -y zookeeper; }
test -f /usr/share/java/zookeeper.jar
command -v java >/dev/null

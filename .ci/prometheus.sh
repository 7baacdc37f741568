#!/usr/bin/env bash
# Installs Prometheus (Debian package `prometheus`: /usr/bin/prometheus, /usr/bin/promtool)
# when it is missing. Idempotent.
# The tests start their own server on a free loopback port with their own config and
# storage directory (recipe: docs/notes/prometheus-recipe.md); nothing is started here.
# The package ships a system service (prometheus on :9090, scraping itself): it is stopped
# and disabled here so that it never runs beside the tests' servers.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

quiesce_service() {
  # systemd as init: stop the unit and remove it from multi-user.target.
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
  # sysvinit scripts (containers, or no systemd): stop it (a no-op when it is not running)
  # and turn off its rc links so no later boot starts it.
  if [ -x /etc/init.d/prometheus ]; then
    $SUDO /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    if command -v update-rc.d >/dev/null 2>&1; then
      $SUDO update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
  fi
}

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  quiesce_service
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "prometheus is missing and apt-get is not available: install Prometheus 2.x (prometheus and promtool on PATH)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# --no-install-recommends: the recommended prometheus-node-exporter would bring a second
# service (on :9100) that nothing here needs. The lock timeout waits out another apt run.
APT=($SUDO apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 prometheus)
if ! "${APT[@]}"; then
  $SUDO apt-get -o DPkg::Lock::Timeout=300 update && "${APT[@]}" || {
    echo "could not install the Debian package prometheus with apt-get" >&2
    exit 1
  }
fi
quiesce_service
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  echo "apt-get installed prometheus but prometheus/promtool are not on PATH" >&2
  exit 1
fi

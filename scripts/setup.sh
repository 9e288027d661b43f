#!/usr/bin/env bash
# Installs what EventKernel needs from the system when it is missing:
# liblz4-dev (the log's compression); for the benchmark package and the HTTP example,
# libsqlite3-dev (GRDB, WITH_SQLITE=1); for the load test, wrk (WITH_WRK=1); for the viewer's
# browser suite (WITH_BROWSER=1), Debian's chromium and chromium-driver, and Selenium from PyPI.
# Safe to run repeatedly; uses sudo only when not already root.
set -euo pipefail

need=()
pkg-config --exists liblz4 2>/dev/null || need+=(liblz4-dev)
if [ "${WITH_SQLITE:-0}" = "1" ]; then
  pkg-config --exists sqlite3 2>/dev/null || need+=(libsqlite3-dev)
fi
if [ "${WITH_WRK:-0}" = "1" ]; then
  command -v wrk >/dev/null 2>&1 || need+=(wrk)
fi
if [ "${WITH_BROWSER:-0}" = "1" ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
fi
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)

# Selenium (the browser suite's client) from PyPI, for this user, when Python lacks it.
install_selenium() {
  if [ "${WITH_BROWSER:-0}" = "1" ] && ! python3 -c "import selenium" >/dev/null 2>&1; then
    echo "setup: installing selenium (PyPI)"
    python3 -m pip install --quiet --user "selenium>=4.11" 2>/dev/null || python3 -m pip install --quiet "selenium>=4.11"
  fi
}

if [ ${#need[@]} -eq 0 ]; then
  install_selenium
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing ${need[*]}; install them with your package manager (macOS: brew install lz4 sqlite pkg-config)" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup: installing ${need[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
install_selenium

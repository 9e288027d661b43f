#!/usr/bin/env bash
# A private PostgreSQL server for the PostgresLog suites and benchmarks (Docs/ScaleOut.md):
# initdb into a temporary directory, listening on a Unix socket in that directory and on
# 127.0.0.1 only, trust authentication for one role (eventkernel), one database (eventkernel).
#
#   scripts/postgres.sh run COMMAND...   start a server, run COMMAND with EVENTKERNEL_POSTGRES_URL
#                                         set, stop the server and remove its directory
#   scripts/postgres.sh start DIR        start a server in DIR (created), print its URL
#   scripts/postgres.sh stop DIR         stop it and remove DIR
#
# `run` with EVENTKERNEL_POSTGRES_URL already set (an existing server) starts nothing and runs
# COMMAND against that server. Installs Debian's `postgresql` when no server binaries are found
# (as root, or through sudo). Environment: EVENTKERNEL_POSTGRES_PORT (default: a free port).
set -euo pipefail

bindir() {
  local dir
  for dir in "$(pg_config --bindir 2>/dev/null || true)" /usr/lib/postgresql/*/bin; do
    if [[ -n $dir && -x $dir/initdb && -x $dir/pg_ctl ]]; then echo "$dir"; return 0; fi
  done
  return 1
}

install_server() {
  bindir >/dev/null && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "postgres.sh: no PostgreSQL server found; install it (Debian: postgresql)" >&2; exit 1; }
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "postgres.sh: installing postgresql" >&2
  $sudo apt-get update -qq
  # The package starts a cluster of its own; the suites never use it.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >/dev/null
  bindir >/dev/null || { echo "postgres.sh: postgresql installed but initdb not found" >&2; exit 1; }
}

# Runs a server binary as the directory's owner: PostgreSQL refuses to run as root, so root
# runs it as the `postgres` user the package creates.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local dir=$1 bin port
  install_server
  bin=$(bindir)
  port=${EVENTKERNEL_POSTGRES_PORT:-$(free_port)}
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && { id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres; chown postgres "$dir"; }
  as_owner "$bin/initdb" -D "$dir/data" -U eventkernel -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 300
shared_buffers = 128MB
EOF
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bin/psql" -h "$dir" -p "$port" -U eventkernel -d postgres -qc 'CREATE DATABASE eventkernel' >/dev/null
  echo "postgres://eventkernel@127.0.0.1:$port/eventkernel?sslmode=disable"
}

stop() {
  local dir=$1 bin
  bin=$(bindir) || return 0
  if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true; fi
  rm -rf "$dir"
}

case ${1:-} in
  start) start "$2" ;;
  stop) stop "$2" ;;
  run)
    shift
    if [ -n "${EVENTKERNEL_POSTGRES_URL:-}" ]; then exec "$@"; fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/eventkernel-pg.XXXXXX")
    trap 'stop "$dir"' EXIT
    EVENTKERNEL_POSTGRES_URL=$(start "$dir")
    export EVENTKERNEL_POSTGRES_URL
    echo "postgres.sh: private server at $EVENTKERNEL_POSTGRES_URL" >&2
    status=0
    "$@" || status=$?
    exit $status
    ;;
  *) echo "usage: scripts/postgres.sh run COMMAND... | start DIR | stop DIR" >&2; exit 2 ;;
esac

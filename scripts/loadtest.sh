#!/usr/bin/env bash
# The HTTP example (Examples/ActivityService) under load on loopback, EventKernel against GRDB
# behind the same service, end to end: build it (release), seed each backend with the same
# generated history (once, cached), start the service on a copy, run wrk, stop it with SIGTERM
# (it must exit 0: graceful shutdown), and print requests/s and p99 latency with the ratios.
#
#   GET   /activities?after=<end-7d>&before=<end>&limit=50   the 7-day window, newest first
#   POST  /activities                                       synced: acknowledged once on disk
#
#   scripts/loadtest.sh                    both backends, N = 1,000,000, 64 connections, 20 s each
#   LOADTEST_N=100000 LOADTEST_DURATION=10 scripts/loadtest.sh
#
# Environment: LOADTEST_N (activities seeded), LOADTEST_DURATION (seconds per run),
# LOADTEST_CONNECTIONS (64), LOADTEST_THREADS (wrk threads, 2), LOADTEST_BACKENDS
# ("eventkernel grdb"), LOADTEST_DIR (data, default Examples/ActivityService/.build/loadtest:
# a real disk, as fsync costs must be real), LOADTEST_PORT (18080).
# Needs wrk (`WITH_WRK=1 scripts/setup.sh`) and libsqlite3-dev (`WITH_SQLITE=1`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
n=${LOADTEST_N:-1000000}
duration=${LOADTEST_DURATION:-20}
connections=${LOADTEST_CONNECTIONS:-64}
threads=${LOADTEST_THREADS:-2}
backends=${LOADTEST_BACKENDS:-eventkernel grdb}
data=${LOADTEST_DIR:-$root/Examples/ActivityService/.build/loadtest}
port=${LOADTEST_PORT:-18080}
command -v wrk >/dev/null || { echo "loadtest: wrk is missing (WITH_WRK=1 scripts/setup.sh)" >&2; exit 2; }

echo "== building Examples/ActivityService (release)"
(cd Examples/ActivityService && bash "$root/scripts/swiftpm.sh" build -c release --product ActivityService)
bin="$(cd Examples/ActivityService && swift build -c release --show-bin-path)/ActivityService"
mkdir -p "$data"

# The generator's history ends at 2026-01-01T00:00:00Z (ActivityHistoryGenerator.referenceEnd).
window="/activities?after=2025-12-25T00:00:00Z&before=2026-01-01T00:00:00Z&limit=50"
results=$(mktemp)
server=""
trap '[[ -n $server ]] && kill -TERM $server 2>/dev/null; rm -f "$results"' EXIT

# CPU time (user + system, in clock ticks) the process $1 has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Runs wrk against the service $server and prints "<requests/s> <p99 in ms> <non-2xx count>
# <service CPU µs per request>": the last is what the machine's sharing does not change much.
measure() {
  local output rps p99 errors requests before after cpu
  before=$(cpu_ticks "$server")
  output=$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency "$@")
  after=$(cpu_ticks "$server")
  echo "$output" | sed 's/^/    /' >&2
  rps=$(echo "$output" | awk '/^Requests\/sec:/ {print $2}')
  p99=$(echo "$output" | awk '$1 == "99%" {v = $2; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; print v}')
  errors=$(echo "$output" | awk '/Non-2xx or 3xx responses:/ {print $NF}')
  requests=$(echo "$output" | awk '/requests in/ {print $1}')
  cpu=$(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN {printf "%.0f", t / hz / n * 1e6}')
  echo "$rps $p99 ${errors:-0} $cpu"
}

# Starts the service: serve_on BACKEND DIR [FLAGS...]; sets $server.
serve_on() {
  local backend=$1 dir=$2
  shift 2
  local started
  started=$(date +%s.%N)
  "$bin" serve --backend "$backend" --dir "$dir" --port "$port" --log-level warning "$@" &
  server=$!
  until curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
    kill -0 $server 2>/dev/null || { echo "loadtest: the $backend service exited at start" >&2; exit 1; }
    sleep 0.1
  done
  echo "   ready in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
}

# Stops the service with SIGTERM; fails unless it exits 0 (graceful shutdown).
stop() {
  local status=0
  kill -TERM $server
  wait $server || status=$?
  server=""
  echo "   SIGTERM: the service exited with status $status"
  (( status == 0 )) || { echo "loadtest: the service did not shut down cleanly" >&2; exit 1; }
}

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared: quote the ratios)"
for backend in $backends; do
  seeded="$data/seed-$backend-$n"
  if [[ ! -e $seeded/.complete ]]; then
    echo "== seeding $n activities into $backend"
    rm -rf "$seeded"
    "$bin" seed --backend "$backend" --dir "$seeded" --activities "$n"
    touch "$seeded/.complete"
  fi
  work="$data/run-$backend"
  rm -rf "$work"
  cp -a "$seeded" "$work"
  echo "== $backend: starting the service on port $port"
  serve_on "$backend" "$work"
  curl -fs "http://127.0.0.1:$port$window" | head -c 200 || true; echo
  wrk -t"$threads" -c"$connections" -d3s "http://127.0.0.1:$port$window" >/dev/null   # warm-up
  echo "== $backend: GET the 7-day window, $connections connections, ${duration} s"
  read -r get_rps get_p99 get_errors get_cpu < <(measure "http://127.0.0.1:$port$window")
  echo "== $backend: POST (synced), $connections connections, ${duration} s"
  read -r post_rps post_p99 post_errors post_cpu < <(measure -s "$root/scripts/loadtest-post.lua" "http://127.0.0.1:$port/activities")
  stop
  if (( get_errors + post_errors > 0 )); then
    echo "loadtest: $backend answered $get_errors GET and $post_errors POST errors" >&2
    exit 1
  fi
  echo "$backend $get_rps $get_p99 $get_cpu $post_rps $post_p99 $post_cpu" >> "$results"
done

# The ceiling of this service on this machine, whatever the storage: the HTTP path alone
# (GET /health: no storage, no JSON) and a POST that waits for no disk (EventKernel buffered).
if [[ ${LOADTEST_CEILING:-1} == 1 ]]; then
  work="$data/run-ceiling"
  rm -rf "$work"
  echo "== ceiling: EventKernel, buffered (a POST waits for no fdatasync)"
  serve_on eventkernel "$work" --buffered
  read -r health_rps health_p99 health_errors health_cpu < <(measure "http://127.0.0.1:$port/health")
  read -r post_rps post_p99 post_errors post_cpu < <(measure -s "$root/scripts/loadtest-post.lua" "http://127.0.0.1:$port/activities")
  stop
  echo "ceiling $health_rps $health_p99 $health_cpu $post_rps $post_p99 $post_cpu" >> "$results"
fi

echo
echo "N = $n activities, $connections connections, $threads wrk threads, ${duration} s per run"
echo
echo "| backend | GET 7-day window req/s | GET p99 ms | GET CPU µs/req | POST synced req/s | POST p99 ms | POST CPU µs/req |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
while read -r backend get_rps get_p99 get_cpu post_rps post_p99 post_cpu; do
  case $backend in
    ceiling) echo "| ceiling: GET /health, POST buffered (EventKernel) | $get_rps | $get_p99 | $get_cpu | $post_rps | $post_p99 | $post_cpu |" ;;
    *) echo "| $backend | $get_rps | $get_p99 | $get_cpu | $post_rps | $post_p99 | $post_cpu |" ;;
  esac
done < "$results"
if grep -q '^eventkernel ' "$results" && grep -q '^grdb ' "$results"; then
  awk '$1 == "eventkernel" {eg = $2; ep = $5} $1 == "grdb" {gg = $2; gp = $5}
       END {printf "\nEventKernel / GRDB: GET %.2fx (target 3x), POST %.2fx (target 5x)\n", eg / gg, ep / gp}' "$results"
fi

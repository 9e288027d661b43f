#!/usr/bin/env bash
# The HTTP example (Examples/ActivityService) under load on loopback, EventKernel against GRDB
# behind the same service, end to end: build it (release), seed each backend with the same
# generated history (once, cached), start one service per backend on a copy of its data, run
# wrk against them in alternation, round after round (so each ratio compares runs seconds
# apart on a machine and a disk that others share), stop them with SIGTERM (each must exit 0:
# graceful shutdown), and print requests/s, p99 latency and the service's CPU time per request,
# per round and as medians, with the ratios.
#
#   GET   /activities?after=<end-7d>&before=<end>&limit=50   the 7-day window, newest first
#   POST  /activities                                       synced: acknowledged once on disk
#
# Each round also measures the disk's floor (python3 scripts/fsync_floor.py: pwrite + fdatasync
# of 100 bytes into a preallocated file), which moves by 30x within minutes on a shared disk,
# and the ceiling of the service on this machine whatever the storage (GET /health; POST to
# EventKernel buffered, which waits for no disk).
#
#   scripts/loadtest.sh                    N = 1,000,000, 64 connections, 3 rounds of 10 s runs
#   LOADTEST_N=100000 LOADTEST_ROUNDS=1 scripts/loadtest.sh
#
# Environment: LOADTEST_N (activities seeded), LOADTEST_DURATION (seconds per run, 10),
# LOADTEST_ROUNDS (3), LOADTEST_CONNECTIONS (64), LOADTEST_THREADS (wrk threads, 2),
# LOADTEST_DIR (data, default Examples/ActivityService/.build/loadtest: a real disk, as fsync
# costs must be real), LOADTEST_PORT (18080; the next three ports are used too).
# Needs wrk (`WITH_WRK=1 scripts/setup.sh`) and libsqlite3-dev (`WITH_SQLITE=1`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
n=${LOADTEST_N:-1000000}
duration=${LOADTEST_DURATION:-10}
rounds=${LOADTEST_ROUNDS:-3}
connections=${LOADTEST_CONNECTIONS:-64}
threads=${LOADTEST_THREADS:-2}
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
declare -A pids=() ports=()
cleanup() {
  for name in "${!pids[@]}"; do kill -TERM "${pids[$name]}" 2>/dev/null || true; done
  rm -f "$results"
}
trap cleanup EXIT

# CPU time (user + system, in clock ticks) the process $1 has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure NAME URL [wrk args...]: runs wrk against service NAME and prints "<requests/s>
# <p99 in ms> <service CPU µs per request>"; fails on any non-2xx answer.
measure() {
  local name=$1 output rps p99 errors requests before after
  shift
  before=$(cpu_ticks "${pids[$name]}")
  output=$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency "$@")
  after=$(cpu_ticks "${pids[$name]}")
  echo "$output" | sed 's/^/      /' >&2
  errors=$(echo "$output" | awk '/Non-2xx or 3xx responses:/ {print $NF}')
  if [[ -n $errors ]]; then echo "loadtest: $name answered $errors errors" >&2; exit 1; fi
  rps=$(echo "$output" | awk '/^Requests\/sec:/ {print $2}')
  p99=$(echo "$output" | awk '$1 == "99%" {v = $2; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) {sub(/ms$/, "", v)} else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; print v}')
  requests=$(echo "$output" | awk '/requests in/ {print $1}')
  echo "$rps $p99 $(awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" 'BEGIN {printf "%.0f", t / hz / n * 1e6}')"
}

# start NAME BACKEND DIR PORT [FLAGS...]: starts a service and waits until it answers.
start() {
  local name=$1 backend=$2 dir=$3 port=$4 started
  shift 4
  started=$(date +%s.%N)
  "$bin" serve --backend "$backend" --dir "$dir" --port "$port" --log-level warning "$@" &
  pids[$name]=$!
  ports[$name]=$port
  until curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
    kill -0 "${pids[$name]}" 2>/dev/null || { echo "loadtest: the $name service exited at start" >&2; exit 1; }
    sleep 0.1
  done
  echo "   $name ready on port $port in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
}

# stop NAME: SIGTERM; fails unless the service exits 0 (graceful shutdown: final sync, snapshot).
stop() {
  local name=$1 status=0
  kill -TERM "${pids[$name]}"
  wait "${pids[$name]}" || status=$?
  unset "pids[$name]"
  echo "   $name: SIGTERM, exit status $status"
  (( status == 0 )) || { echo "loadtest: $name did not shut down cleanly" >&2; exit 1; }
}

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
offset=0
for backend in eventkernel grdb; do
  seeded="$data/seed-$backend-$n"
  if [[ ! -e $seeded/.complete ]]; then
    echo "== seeding $n activities into $backend"
    rm -rf "$seeded"
    "$bin" seed --backend "$backend" --dir "$seeded" --activities "$n"
    touch "$seeded/.complete"
  fi
  rm -rf "$data/run-$backend"
  cp -a "$seeded" "$data/run-$backend"
  start "$backend" "$backend" "$data/run-$backend" $((port + offset))
  offset=$((offset + 1))
  curl -fs "http://127.0.0.1:${ports[$backend]}$window" | head -c 160 || true; echo
  wrk -t"$threads" -c"$connections" -d3s "http://127.0.0.1:${ports[$backend]}$window" >/dev/null   # warm-up
done
rm -rf "$data/run-ceiling"
start ceiling eventkernel "$data/run-ceiling" $((port + 2)) --buffered

post=(-s "$root/scripts/loadtest-post.lua")
for ((round = 1; round <= rounds; round++)); do
  floor=$(python3 scripts/fsync_floor.py "$data" 300 100 | awk '/^pwrite\+fdatasync/ {print $2}')
  echo "== round $round of $rounds (disk floor: pwrite + fdatasync $floor µs; load $(cut -d' ' -f1-3 /proc/loadavg))"
  for name in eventkernel grdb; do
    echo "   $name: GET the 7-day window"
    read -r g_rps g_p99 g_cpu < <(measure "$name" "http://127.0.0.1:${ports[$name]}$window")
    echo "   $name: POST (synced)"
    read -r p_rps p_p99 p_cpu < <(measure "$name" "${post[@]}" "http://127.0.0.1:${ports[$name]}/activities")
    echo "$round $name $g_rps $g_p99 $g_cpu $p_rps $p_p99 $p_cpu $floor" >> "$results"
  done
  echo "   ceiling: GET /health, POST buffered"
  read -r g_rps g_p99 g_cpu < <(measure ceiling "http://127.0.0.1:${ports[ceiling]}/health")
  read -r p_rps p_p99 p_cpu < <(measure ceiling "${post[@]}" "http://127.0.0.1:${ports[ceiling]}/activities")
  echo "$round ceiling $g_rps $g_p99 $g_cpu $p_rps $p_p99 $p_cpu $floor" >> "$results"
done
for name in eventkernel grdb ceiling; do stop "$name"; done

echo
echo "N = $n activities, $connections connections, $threads wrk threads, ${duration} s per run, $rounds rounds"
echo
echo "| round | backend | GET 7-day window req/s | GET p99 ms | GET CPU µs/req | POST synced req/s | POST p99 ms | POST CPU µs/req | disk floor µs |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
while read -r round name g_rps g_p99 g_cpu p_rps p_p99 p_cpu floor; do
  [[ $name == ceiling ]] && name="ceiling (GET /health, POST buffered)"
  echo "| $round | $name | $g_rps | $g_p99 | $g_cpu | $p_rps | $p_p99 | $p_cpu | $floor |"
done < "$results"
echo
ratios=$(awk '
  $2 == "eventkernel" {eg[$1] = $3; ep[$1] = $6}
  $2 == "grdb" {gg[$1] = $3; gp[$1] = $6}
  END {for (r in eg) printf "%d %.2f %.2f\n", r, eg[r] / gg[r], ep[r] / gp[r]}' "$results" | sort -n)
echo "$ratios" | awk '{printf "round %d: EventKernel / GRDB: GET %.2fx, POST %.2fx\n", $1, $2, $3}'
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "median of $rounds rounds: GET $(echo "$ratios" | awk '{print $2}' | median)x (target 3x)," \
  "POST $(echo "$ratios" | awk '{print $3}' | median)x (target 5x)"

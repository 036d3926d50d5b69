#!/bin/bash
# Requests per server-CPU-second at 2 shards against 1, with the load beside them (issue 32): the
# cost per request of a second shard on a machine with two CPUs. percore with --shards 1 on CPU 0,
# or --shards 2 on CPUs 0-1; the load generator on CPU 1 in both (beside shard 1 in the second), so
# the server's CPU seconds (utime+stime from /proc) are what each request cost, whatever the rate.
# Workloads: 64 B keep-alive GETs of 100 keys at 64 connections, and durable 16 B PUTs of 10,000
# keys at 64 connections (half of which cross to the other shard at 2 shards: the hop).
# Usage: perf/two_shards.sh [ROUNDS (3)] [SECONDS (3)]   BUILD=build-release  PORT=18081
# Prints one line per measurement and the medians; loopback only.
set -euo pipefail
ROUNDS=${1:-3}; SECONDS_EACH=${2:-3}; PORT=${PORT:-18081}
ROOT=$(cd "$(dirname "$0")/.." && pwd); B=$ROOT/${BUILD:-build-release}
URL=http://127.0.0.1:$PORT
OUT=$(mktemp); trap 'rm -f $OUT' EXIT

measure() {  # SHARDS WORK GEN
  local shards=$1 work=$2 gen=$3 cpus D PID rps t0 t1
  cpus=$([ "$shards" = 1 ] && echo 0 || echo 0-1)
  D=$(mktemp -d /tmp/two-shards.XXXX)
  taskset -c "$cpus" "$B/shards/percore" serve --listen "127.0.0.1:$PORT" --shards "$shards" --data "$D/data" > "$D/log" 2>&1 & PID=$!
  for _ in $(seq 50); do curl -s -o /dev/null "$URL/_health" && break; sleep 0.1; done
  local mix keys size lua
  if [ "$work" = get ]; then mix=get:100; keys=100; size=64; lua=get.lua; else mix=put:100; keys=10000; size=16; lua=put.lua; fi
  [ "$work" = get ] && taskset -c 1 "$B/perf/load/percore-load" --url "$URL" --prepare --duration 0 --keys $keys --size $size --app bench > /dev/null
  t0=$(awk '{print $14+$15}' /proc/$PID/stat)
  if [ "$gen" = wrk ]; then
    rps=$(PERCORE_BENCH_KEYS=$keys PERCORE_BENCH_BYTES=$size taskset -c 1 wrk -t1 -c64 -d"${SECONDS_EACH}s" -s "$ROOT/perf/$lua" "$URL" | awk '/Requests\/sec/{print $2}')
  else
    rps=$(taskset -c 1 "$B/perf/load/percore-load" --url "$URL" --connections 64 --threads 1 --duration "$SECONDS_EACH" \
          --mix $mix --keys $keys --size $size --app bench --json - | python3 -c "import json,sys; print(json.load(sys.stdin)['requests_per_s'])")
  fi
  t1=$(awk '{print $14+$15}' /proc/$PID/stat)
  kill $PID; wait $PID 2> /dev/null || true
  rm -rf "$D"
  python3 -c "import sys; rps, cpu = float(sys.argv[1]), (int(sys.argv[3]) - int(sys.argv[2])) / 100
print(f'{sys.argv[4]} {sys.argv[5]} {sys.argv[6]} {rps * float(sys.argv[7]) / cpu:.0f} {rps:.0f} {cpu:.2f}')" \
    "$rps" "$t0" "$t1" "$work" "$gen" "$shards" "$SECONDS_EACH" | tee -a "$OUT"
}

echo "work generator shards req_per_server_cpu_s req_per_s server_cpu_s"
for r in $(seq "$ROUNDS"); do
  for work in get put; do for gen in load wrk; do
    if [ $((r % 2)) = 1 ]; then measure 1 $work $gen; measure 2 $work $gen; else measure 2 $work $gen; measure 1 $work $gen; fi
  done; done
done
python3 - "$OUT" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for work in ("get", "put"):
    for gen in ("load", "wrk"):
        med = {s: statistics.median(float(r[3]) for r in rows if r[:3] == [work, gen, s]) for s in ("1", "2")}
        print(f"median {work} {gen}: 1 shard {med['1']:,.0f}, 2 shards {med['2']:,.0f} req per server-CPU-s: "
              f"2 / 1 = {med['2'] / med['1']:.2f}x")
PY

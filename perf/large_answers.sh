#!/bin/bash
# Large GETs, percore beside lighttpd or nginx, told apart by counts that repeat on a noisy machine (issue 32):
# system calls per answer and their cost (strace -c), TCP segments per answer (nstat), the server's
# context switches and CPU seconds per answer, and optionally a kernel profile (perf record).
#
# One server at a time on CPU 0 (percore --shards 1, or lighttpd / nginx with perf/peers/*.conf.in),
# 8 keys of SIZE bytes (percore: PUT into app bench; the others: files bench/kN), a 1 s wrk warm-up,
# then 5 s of load on CPU 1 from GEN (wrk with perf/get.lua, or percore-load --mix get:100).
# Usage: perf/large_answers.sh percore|lighttpd|nginx CONNECTIONS [SIZE (1048576)] [strace|perf]
#        GEN=wrk|load  BUILD=build-release  PORT=18080  FOLIOS=1 (the folio sizes of the files served)
# Prints one line of figures, the syscall table with `strace`; with `perf`, leaves
# /tmp/perf-SERVER-C.data for `perf report`. Loopback only.
set -euo pipefail
SERVER=$1; C=$2; SIZE=${3:-1048576}; MODE=${4:-}; GEN=${GEN:-wrk}; PORT=${PORT:-18080}
ROOT=$(cd "$(dirname "$0")/.." && pwd); B=$ROOT/${BUILD:-build-release}
URL=http://127.0.0.1:$PORT
D=$(mktemp -d /tmp/large-answers.XXXX); trap 'rm -rf $D' EXIT
head -c "$SIZE" /dev/urandom > "$D/value"
if [ "$SERVER" = percore ]; then
  taskset -c 0 "$B/shards/percore" serve --listen "127.0.0.1:$PORT" --shards 1 --data "$D/data" > "$D/log" 2>&1 & PID=$!
  for _ in $(seq 50); do curl -s -o /dev/null "$URL/_health" && break; sleep 0.1; done
  for k in 0 1 2 3 4 5 6 7; do curl -s -o /dev/null -X PUT --data-binary "@$D/value" -H 'Content-Type: application/octet-stream' "$URL/bench/k$k"; done
else
  mkdir -p "$D/root/bench"; for k in 0 1 2 3 4 5 6 7; do cp "$D/value" "$D/root/bench/k$k"; done
  USER_LINE=$([ "$(id -u)" = 0 ] && echo "user root;" || true)
  sed -e "s|@PORT@|$PORT|;s|@ROOT@|$D/root|;s|@DIR@|$D|;s|@USER_LINE@|$USER_LINE|" "$ROOT/perf/peers/$SERVER.conf.in" > "$D/$SERVER.conf"
  MASTER=
  if [ "$SERVER" = nginx ]; then
    # master and one worker (the config says daemon off): the figures follow the worker, which serves
    taskset -c 0 nginx -e "$D/error.log" -p "$D" -c "$D/nginx.conf" & MASTER=$!
    for _ in $(seq 50); do PID=$(pgrep -P $MASTER | head -1) && [ -n "$PID" ] && break; sleep 0.1; done
  else
    taskset -c 0 lighttpd -D -f "$D/lighttpd.conf" & PID=$!
  fi
  for _ in $(seq 50); do curl -s -o /dev/null "$URL/bench/k0" && break; sleep 0.1; done
fi
[ "$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "$URL/bench/k1")" = "200 $SIZE" ] || { echo "no $SIZE B answer" >&2; exit 1; }
PERCORE_BENCH_KEYS=8 taskset -c 1 wrk -t1 -c"$C" -d1s -s "$ROOT/perf/get.lua" "$URL" > /dev/null
switches() { cat /proc/$PID/task/*/status | awk '/^(non)?voluntary_ctxt/{n+=$2} END{print n}'; }
cpu_ticks() { awk '{print $14+$15}' /proc/$PID/stat; }
nstat -n > /dev/null; T0=$(cpu_ticks); V0=$(switches)
case "$MODE" in
  strace) strace -c -f -p $PID -o "$D/strace" & SP=$!; sleep 0.5;;
  perf) perf record -e cpu-clock -F 2000 -g -p $PID -o "/tmp/perf-$SERVER-$C.data" 2> /dev/null & SP=$!; sleep 0.5;;
esac
if [ "$GEN" = wrk ]; then
  PERCORE_BENCH_KEYS=8 taskset -c 1 wrk -t1 -c"$C" -d5s -s "$ROOT/perf/get.lua" "$URL" > "$D/wrk"
  RPS=$(awk '/Requests\/sec/{print $2}' "$D/wrk")
else
  taskset -c 1 "$B/perf/load/percore-load" --url "$URL" --connections "$C" --threads 1 --duration 5 --mix get:100 \
      --keys 8 --size "$SIZE" --app bench --json - > "$D/load.json"
  RPS=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['requests_per_s'])" "$D/load.json")
fi
nstat -z TcpOutSegs TcpExtTCPDelivered > "$D/nstat"; T1=$(cpu_ticks); V1=$(switches)
if [ -n "$MODE" ]; then kill -INT $SP; wait $SP 2> /dev/null || true; fi
python3 - "$GEN" "$SERVER" "$C" "$SIZE" "$RPS" "$T0" "$T1" "$V0" "$V1" "$D/nstat" <<'PY'
import sys
gen, server, c, size, rps, t0, t1, v0, v1, nstat = sys.argv[1:]
answers = float(rps) * 5
cpu = (int(t1) - int(t0)) / 100
segs = {l.split()[0]: int(l.split()[1]) for l in open(nstat) if l.startswith("Tcp")}
print(f"{gen} {server} c={c} size={size}: {float(rps):,.0f} req/s, server CPU {cpu:.2f} s, "
      f"{answers / cpu if cpu else 0:,.0f} req per server-CPU-s, {(int(v1) - int(v0)) / answers:.3f} context switches "
      f"an answer, segments an answer: out {segs.get('TcpOutSegs', 0) / answers:.1f}, "
      f"delivered {segs.get('TcpExtTCPDelivered', 0) / answers:.1f}")
PY
if [ "$MODE" = strace ]; then sed -n '1,16p' "$D/strace"; fi
# the page cache's folios under the bytes served (percore: its segment files; lighttpd: the files)
if [ -n "${FOLIOS:-}" ]; then
  if [ "$SERVER" = percore ]; then files=$(find "$D/data" -name '*.seg' -size +1M); else files=$(ls "$D"/root/bench/k*); fi
  for f in $files; do "$ROOT/perf/folios" "$f" | sed "s|$D/||"; done
fi
STOP=${MASTER:-$PID}; kill $STOP; wait $STOP 2> /dev/null || true

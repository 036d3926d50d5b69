#!/bin/bash
# A/B of two percore binaries on 64 B keep-alive GETs: server on CPU 0, load on CPU 1, both generators
run() {
BIN=$1; NAME=$2; GEN=$3
rm -rf /tmp/abd; taskset -c 0 $BIN serve --listen 127.0.0.1:18082 --shards 1 --data /tmp/abd > /dev/null 2>/dev/null &
SP=$!; sleep 0.4
taskset -c 1 /work/main/build-release/perf/load/percore-load --url http://127.0.0.1:18082 --prepare --duration 0 --keys 100 --size 64 --app bench --connections 4 >/dev/null 2>&1
T0=$(awk '{print $14+$15}' /proc/$SP/stat)
if [ $GEN = load ]; then
taskset -c 1 /work/main/build-release/perf/load/percore-load --url http://127.0.0.1:18082 --connections 64 --threads 1 --duration 3 --keys 100 --size 64 --app bench --mix get:100,put:0 --json - > /tmp/abw.out 2>/dev/null
RPS=$(grep -o '"requests_per_s": *[0-9.]*' /tmp/abw.out | grep -o '[0-9.]*$')
else
taskset -c 1 wrk -t1 -c64 -d3s http://127.0.0.1:18082/bench/k0 > /tmp/abw.out 2>&1
RPS=$(grep -o 'Requests/sec: *[0-9.]*' /tmp/abw.out | grep -o '[0-9.]*$')
fi
T1=$(awk '{print $14+$15}' /proc/$SP/stat)
kill $SP; wait $SP 2>/dev/null
echo "$GEN $NAME $RPS $(python3 -c "print(int($RPS*3/max(($T1-$T0)/100,0.01)))")"
}
for i in 1 2 3 4 5; do
  for GEN in load wrk; do
    if [ $((i % 2)) = 1 ]; then run $1 new $GEN; run $2 base $GEN; else run $2 base $GEN; run $1 new $GEN; fi
  done
done

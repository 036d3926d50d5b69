#!/bin/bash
# One-off (issue 31): a primary (--replication MODE, CPU 0) and a loopback follower (CPU 1), percore-load
# with C connections on CPU 1 for 5 s; prints writes/s, p50, the follower's pages per second and changes
# per page (its /_metrics), and both servers' fdatasync histograms (sum, count). Usage: perf/sync_cycle.sh sync|async C
set -e
B=$(cd "$(dirname "$0")/.." && pwd)/build-release
MODE=$1; C=$2
D=$(mktemp -d /tmp/cyc.XXXX); echo "unused-with-auth-off-on-loopback-0000" > $D/tok; chmod 600 $D/tok
taskset -c 0 $B/shards/percore serve --listen 127.0.0.1:18531 --shards 1 --data $D/p --replication $MODE 2>$D/p.log >/dev/null & P=$!
sleep 0.5
taskset -c 1 $B/shards/percore serve --listen 127.0.0.1:18532 --shards 1 --data $D/f --follow http://127.0.0.1:18531 --follow-token-file $D/tok 2>$D/f.log >/dev/null & F=$!
for i in $(seq 50); do curl -s -o /dev/null -w '%{http_code}' -X PUT --data r http://127.0.0.1:18531/bench/ready | grep -q 201 && break; sleep 0.1; done
m() { curl -s http://127.0.0.1:$1/_metrics | grep -E "^$2 " | awk '{print $2}'; }
p0=$(m 18532 percore_follower_pages_total); a0=$(m 18532 percore_follower_applied_changes_total)
taskset -c 1 $B/perf/load/percore-load --url http://127.0.0.1:18531 --connections $C --threads 1 --duration 5 --mix put:100 --size 16 --keys 10000 --app bench --json - > $D/load.json
p1=$(m 18532 percore_follower_pages_total); a1=$(m 18532 percore_follower_applied_changes_total)
python3 -c "import json;r=json.load(open('$D/load.json'));print('$MODE c=$C writes/s %.0f p50 %s us; follower pages %d (%.0f/s), changes applied %d, %.1f changes a page'%(r['requests_per_s'],r['latency_us']['p50'],$p1-$p0,($p1-$p0)/r['duration_s'],$a1-$a0,($a1-$a0)/max(1,$p1-$p0)))"
curl -s http://127.0.0.1:18531/_metrics | grep -E "^percore_sync_(duration_seconds_(sum|count)|acknowledged_total|ack_lag|held)" | head -8
curl -s http://127.0.0.1:18532/_metrics | grep -E "^percore_sync_duration_seconds_(sum|count)" | head -4
kill $F $P; wait $F $P 2>/dev/null || true; rm -rf $D

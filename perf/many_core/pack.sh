#!/usr/bin/env bash
# Packs what the shard sweep needs into one folder that runs on another x86_64 (or, built with
# the cross file, aarch64) Linux machine with python3 and no packages: percore, percore-load,
# this machine's wrk (the second load generator: a goal is met only when met with both; an
# aarch64 pack carries an x86_64 wrk that will not run there: add --generators percore-load, or
# put an aarch64 wrk first in PATH), the libraries they load and the loader itself, and perf/'s
# Python and wrk scripts. Then, on that machine:
#   cd PACK && PATH=$PWD/build/bin:$PATH python3 perf/compare --build build --sweep-only \
#       --shards 1,2,4,8 --load-cpus 8-15 --rounds 3 --duration 5 --out sweep.jsonl --no-report
# and bring sweep.jsonl back: `cp sweep.jsonl perf/results/compare/<its run id>.jsonl && perf/compare --report-only`
# (the run id is in its rows).
# usage: perf/many_core/pack.sh [BUILD_DIR (build-release)] [PACK_DIR (.pack)]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build-release}
pack=${2:-.pack}
cd "$root"
rm -rf "$pack"
wrk=$(command -v wrk) || { echo "pack.sh: wrk is missing (bash .ci/deps wrk)" >&2; exit 1; }
mkdir -p "$pack/build/shards" "$pack/build/perf/load" "$pack/build/bin" "$pack/lib" "$pack/perf"
cp perf/compare perf/*.py perf/*.lua "$pack/perf/"
# (an if, not `grep -q . && echo`: on a clean tree that list's status 1 would stop the script, set -e)
(git rev-parse --short HEAD; if git status --porcelain --untracked-files=no | grep -q .; then echo -dirty; fi) \
    | tr -d "\n" > "$pack/COMMIT"
cp -r perf/peers "$pack/perf/"
loader=""
for bin in shards/percore perf/load/percore-load bin/wrk; do
    src=$build/$bin
    [ "$bin" = bin/wrk ] && src=$wrk
    cp "$src" "$pack/lib/$(basename "$bin").bin"
    while read -r lib; do
        cp -L "$lib" "$pack/lib/"
        case "$lib" in *ld-linux*) loader=$(basename "$lib") ;; esac
    done < <(ldd "$src" | grep -o '/[^ ]*' | sort -u)
    # a wrapper at the path perf/compare expects, running the binary with the carried loader
    cat > "$pack/build/$bin" <<WRAP
#!/bin/sh
here=\$(cd "\$(dirname "\$0")" && pwd)
lib=\$(cd "\$here/$(dirname "$bin" | sed 's|[^/]*|..|g')/../lib" && pwd)
exec "\$lib/$loader" --library-path "\$lib" "\$lib/$(basename "$bin").bin" "\$@"
WRAP
    chmod +x "$pack/build/$bin"
done
echo "packed into $pack ($(du -sh "$pack" | cut -f1)); loader $loader"

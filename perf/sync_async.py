#!/usr/bin/env python3
"""Durable PUTs on a primary with one loopback follower, --replication async vs sync (issue 31,
SPEC §12 goal: sync >= 0.6x async writes/s at 64 connections).

Each measurement on a fresh pair, in fresh data directories:
  primary   taskset -c 0  percore serve --listen 127.0.0.1:P --shards 1 --data DIR/p
                          --replication async|sync   (durability: the default, sync)
  follower  taskset -c 1  percore serve --listen 127.0.0.1:F --shards 1 --data DIR/f
                          --follow http://127.0.0.1:P --follow-token-file DIR/token
  load      taskset -c 1  percore-load --connections C --threads 1 --mix put:100 --size 16
                          --keys 10000 --app bench   or   wrk -t1 -cC --latency -s perf/put.lua
Auth is `auto` (off on loopback), as perf/followers.py runs it: the token file is there because
--follow wants one, and is not checked. The primary is on CPU 0 alone; the follower and the load
share CPU 1 (2 CPUs here). Before each measurement one PUT must answer 201 (a sync primary answers
503 until its follower has asked for a page) and a 1 s warm-up of the same load runs (not counted).

Rounds are rotated: for each round, for each connection count, for each generator: async, then sync
(--order async,sync; the next round starts again with async). Medians over rounds. Rows (JSON
lines with commit, machine and command) go to perf/results/sync_async/<run id>.jsonl; a summary is printed.
--cpus P,F,L moves them (e.g. 0,1,0: the load beside the primary, the follower alone).
Usage: perf/sync_async.py [--rounds 3] [--duration 5] [--connections 16,64]
                          [--generators percore-load,wrk] [--cpus 0,1,1] [--build build-release]"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
from benchlib import HERE, ROOT, commit, free_port, http, machine, new_run_id, parse_wrk, rotate, run_file, wait_port  # noqa: E402

PRIMARY_CPU, FOLLOWER_CPU, LOAD_CPU = "0", "1", "1"
KEYS, SIZE = 10000, 16


def start(binary, cpu, port, data, log, extra=()):
    argv = ["taskset", "-c", cpu, binary, "serve", "--listen", f"127.0.0.1:{port}", "--shards", "1",
            "--data", data, *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)
    wait_port(port, 30)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def status_of(answer):
    return int(answer.split(b" ", 2)[1])


def load_percore(tool, port, connections, duration):
    cmd = ["taskset", "-c", LOAD_CPU, tool, "--url", f"http://127.0.0.1:{port}", "--connections", str(connections),
           "--threads", "1", "--duration", str(duration), "--mix", "put:100", "--size", str(SIZE),
           "--keys", str(KEYS), "--app", "bench", "--json", "-"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()[-300:]}")
    r = json.loads(p.stdout)
    return {"writes_per_s": r["requests_per_s"], "p50_us": r["latency_us"].get("p50"),
            "p99_us": r["latency_us"].get("p99"), "non_2xx": r["answered"] - r["status"]["2xx"],
            "wrong": r["wrong"], "cmd": cmd}


def load_wrk(port, connections, duration):
    cmd = ["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency",
           "-s", os.path.join(HERE, "put.lua"), f"http://127.0.0.1:{port}/"]
    env = dict(os.environ, PERCORE_BENCH_APP="bench", PERCORE_BENCH_KEYS=str(KEYS), PERCORE_BENCH_BYTES=str(SIZE))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()[-300:]}")
    r = parse_wrk(p.stdout)
    return {"writes_per_s": r["requests_per_s"], "p50_us": r["latency_us"].get("p50"),
            "p99_us": r["latency_us"].get("p99"), "non_2xx": r["wrong"], "wrong": r["wrong"], "cmd": cmd}


def measure(args, tmp, n, mode, connections, generator):
    d = os.path.join(tmp, f"{n}")
    os.makedirs(d)
    token = os.path.join(d, "token")
    with open(token, "w") as f:
        f.write("unused-with-auth-off-on-loopback-0000\n")
    os.chmod(token, 0o600)
    pp, fp = free_port(), free_port()
    log = open(os.path.join(d, "servers.log"), "w")
    primary = start(args.binary, PRIMARY_CPU, pp, os.path.join(d, "p"), log, ["--replication", mode])
    follower = None
    try:
        follower = start(args.binary, FOLLOWER_CPU, fp, os.path.join(d, "f"), log,
                         ["--follow", f"http://127.0.0.1:{pp}", "--follow-token-file", token])
        deadline = time.time() + 20
        while status_of(http(pp, "PUT", "/bench/ready", b"r")) != 201:
            if time.time() > deadline:
                raise RuntimeError(f"{mode} primary: no 201 in 20 s")
            time.sleep(0.1)
        run = (lambda s: load_percore(args.load, pp, connections, s)) if generator == "percore-load" \
            else (lambda s: load_wrk(pp, connections, s))
        run(1)   # warm-up: the keys begin to exist, the follower is copying
        r = run(args.duration)
        if primary.poll() is not None or follower.poll() is not None:
            raise RuntimeError("a server exited during the run")
        return r
    finally:
        if follower:
            stop(follower)
        stop(primary)
        log.close()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", default="16,64")
    ap.add_argument("--generators", default="percore-load,wrk")
    ap.add_argument("--order", default="async,sync")
    ap.add_argument("--cpus", default="0,1,1", help="CPUs of the primary, the follower and the load (taskset -c)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-release"))
    ap.add_argument("--out", default=None, help="rows to FILE (default: perf/results/sync_async/<run id>.jsonl, one file per run)")
    args = ap.parse_args()
    global PRIMARY_CPU, FOLLOWER_CPU, LOAD_CPU
    PRIMARY_CPU, FOLLOWER_CPU, LOAD_CPU = args.cpus.split(",")
    args.binary = os.path.join(args.build, "shards", "percore")
    args.load = os.path.join(args.build, "perf", "load", "percore-load")
    conns = [int(c) for c in args.connections.split(",")]
    gens = args.generators.split(",")
    modes = args.order.split(",")
    base = {"run": new_run_id(), "commit": commit(), "machine": machine(),
            "binary": args.binary, "command": " ".join(["perf/sync_async.py"] + sys.argv[1:]),
            "pinning": {"primary": PRIMARY_CPU, "follower": FOLLOWER_CPU, "load": LOAD_CPU}}
    args.out = args.out or run_file("sync_async", base["run"])
    print(f"run {base['run']}: {args.binary} (commit {base['commit']}), {base['machine']}", flush=True)
    results = {}
    tmp = tempfile.mkdtemp(prefix="percore-syncasync-", dir=os.environ.get("PERCORE_BENCH_DIR"))
    n = 0
    try:
        with open(args.out, "a") as out:
            for rnd in range(args.rounds):
                for c in conns:
                    for g in gens:
                        for mode in modes:
                            n += 1
                            r = measure(args, tmp, n, mode, c, g)
                            row = {**base, "round": rnd, "mode": mode, "connections": c, "generator": g,
                                   "load_cmd": " ".join(r.pop("cmd")), "loadavg_1m": os.getloadavg()[0], **r}
                            out.write(json.dumps(row) + "\n")
                            out.flush()
                            results.setdefault((c, g, mode), []).append(r)
                            print(f"round {rnd} c={c:3d} {g:12s} {mode:5s} {r['writes_per_s']:9.0f} writes/s "
                                  f"p50 {r['p50_us'] or 0:8.0f} us p99 {r['p99_us'] or 0:8.0f} us non-2xx {r['non_2xx']} "
                                  f"(load avg {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nmedians over rounds:")
    print(f"{'conns':>5s} {'generator':12s} {'mode':5s} {'writes/s':>9s} {'p50 us':>8s} {'p99 us':>8s}  rounds (writes/s)")
    summary = []
    for c in conns:
        for g in gens:
            med = {}
            for mode in modes:
                rs = results[(c, g, mode)]
                med[mode] = {k: statistics.median([r[k] for r in rs if r[k] is not None] or [0])
                             for k in ("writes_per_s", "p50_us", "p99_us")}
                print(f"{c:5d} {g:12s} {mode:5s} {med[mode]['writes_per_s']:9.0f} {med[mode]['p50_us']:8.0f} "
                      f"{med[mode]['p99_us']:8.0f}  {', '.join('%.0f' % r['writes_per_s'] for r in rs)}")
            if "async" in med and "sync" in med:
                ratio = med["sync"]["writes_per_s"] / med["async"]["writes_per_s"]
                print(f"{c:5d} {g:12s} sync/async {ratio:.2f}")
                summary.append({"connections": c, "generator": g, "ratio": round(ratio, 3), **{m: med[m] for m in med}})
    with open(args.out, "a") as out:
        out.write(json.dumps({**base, "what": "summary", "rounds": args.rounds, "duration_s": args.duration,
                              "medians": summary}) + "\n")
    rotate("sync_async")


if __name__ == "__main__":
    main()

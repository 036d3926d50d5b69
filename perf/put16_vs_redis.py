#!/usr/bin/env python3
"""Durable 16 B writes: percore (--durability sync, one shard) beside redis-server with
appendonly yes + appendfsync always, with 64 and with 8 connections, in one run. Server on one
CPU, load (wrk with perf/put.lua; redis-benchmark -t set) on another, rounds in rotated order,
medians. Also reports percore's writes per fdatasync (from /_metrics). Appends raw rounds to
perf/results/put16_redis.jsonl and prints a markdown table.

usage: perf/put16_vs_redis.py [--percore build-release/shards/percore] [--rounds 3] [--duration 6]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import HERE, ROOT, commit, cpu_seconds, free_port, http, machine, wait_port


def metrics(port):
    text = http(port, "GET", "/_metrics").decode()
    def total(name):
        return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} ([0-9.e+-]+)$", text, re.M))
    return total("percore_write_batch_writes_sum"), total("percore_write_batch_writes_count")


def run_percore(binary, cpu, load_cpu, conns, duration, workdir):
    data = tempfile.mkdtemp(dir=workdir)
    proc = subprocess.Popen(["taskset", "-c", str(cpu), binary, "serve", "--listen", "127.0.0.1:0", "--shards", "1",
                             "--data", data], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(re.search(r":(\d+) shards=", proc.stdout.readline()).group(1))
    try:
        w0, b0 = metrics(port)
        c0 = cpu_seconds(proc.pid)
        out = subprocess.run(["taskset", "-c", str(load_cpu), "wrk", "-t1", f"-c{conns}", f"-d{duration}s",
                              "-s", os.path.join(HERE, "put.lua"), f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, check=True).stdout
        cpu = cpu_seconds(proc.pid) - c0
        w1, b1 = metrics(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    per_sync = (w1 - w0) / (b1 - b0) if b1 > b0 else None
    return {"rps": rps, "server_cpu_s": cpu, "non_2xx": int(bad.group(1)) if bad else 0, "writes_per_sync": per_sync}


def run_redis(cpu, load_cpu, conns, duration, workdir):
    data = tempfile.mkdtemp(dir=workdir)
    port = free_port()
    proc = subprocess.Popen(["taskset", "-c", str(cpu), "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--dir", data, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                             "--io-threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        # redis-benchmark runs a request count, not a duration: size it from a short probe
        out = subprocess.run(["taskset", "-c", str(load_cpu), "redis-benchmark", "-p", str(port), "-t", "set", "-d", "16",
                              "-c", str(conns), "-n", "2000", "-r", "10000", "-q"], capture_output=True, text=True).stdout
        probe = float(re.search(r"([\d.]+) requests per second", out).group(1))
        n = max(2000, int(probe * duration))
        c0 = cpu_seconds(proc.pid)
        t0 = time.time()
        out = subprocess.run(["taskset", "-c", str(load_cpu), "redis-benchmark", "-p", str(port), "-t", "set", "-d", "16",
                              "-c", str(conns), "-n", str(n), "-r", "10000", "-q"], capture_output=True, text=True).stdout
        wall = time.time() - t0
        cpu = cpu_seconds(proc.pid) - c0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(data, ignore_errors=True)
    rps = float(re.search(r"([\d.]+) requests per second", out).group(1))
    return {"rps": rps, "server_cpu_s": cpu, "non_2xx": 0, "writes_per_sync": None, "wall_s": wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--percore", default=os.path.join(ROOT, "build-release", "shards", "percore"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=6)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--connections", default="64,8")
    args = ap.parse_args()
    for tool in ("wrk", "redis-server", "redis-benchmark", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: bash .ci/deps wrk redis-server redis-tools")
    workdir = tempfile.mkdtemp(prefix="percore-perf-", dir=os.environ.get("PERCORE_BENCH_DIR", ROOT))
    at = commit()
    fs = subprocess.run(["df", "-T", workdir], capture_output=True, text=True).stdout.splitlines()[-1].split()[1]
    where = f"{machine()}, data on {fs}"
    command = " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
    rows = []
    log = open(os.path.join(HERE, "results", "put16_redis.jsonl"), "a")
    try:
        for conns in [int(c) for c in args.connections.split(",")]:
            for r in range(args.rounds):
                order = ["percore", "redis"] if r % 2 == 0 else ["redis", "percore"]
                for name in order:
                    if name == "percore":
                        res = run_percore(args.percore, args.server_cpu, args.load_cpu, conns, args.duration, workdir)
                    else:
                        res = run_redis(args.server_cpu, args.load_cpu, conns, args.duration, workdir)
                    res.update({"server": name, "connections": conns, "round": r, "commit": at, "machine": where,
                                "command": command, "workload": "durable PUT 16 B"})
                    rows.append(res)
                    log.write(json.dumps(res) + "\n")
                    print(f"{conns:3d} conns round {r} {name:8s} {res['rps']:9.0f} writes/s cpu {res['server_cpu_s']:.2f} s "
                          f"writes/sync {res['writes_per_sync']}", file=sys.stderr)
    finally:
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ncommit {at}, {where}, `{command}`\n")
    print("| connections | server | writes/s (median) | writes per fdatasync | percore / redis |")
    print("|---:|---|---:|---:|---:|")
    for conns in sorted({r["connections"] for r in rows}, reverse=True):
        med = {}
        for name in ("percore", "redis"):
            sel = [r for r in rows if r["server"] == name and r["connections"] == conns]
            med[name] = statistics.median(r["rps"] for r in sel)
            wps = [r["writes_per_sync"] for r in sel if r["writes_per_sync"]]
            print(f"| {conns} | {name} | {med[name]:,.0f} | {statistics.median(wps):.1f} |" if wps else
                  f"| {conns} | {name} | {med[name]:,.0f} | — |", end="")
            print(f" {med['percore'] / med['redis']:.2f}x |" if name == "redis" else " |")


if __name__ == "__main__":
    main()

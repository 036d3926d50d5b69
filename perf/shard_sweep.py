#!/usr/bin/env python3
"""Throughput against shard count, on a machine with the cores for it: for each shard count N,
percore --shards N pinned to CPUs 0..N-1, and wrk pinned to the load CPUs (--load-cpus), 64 B
keep-alive GETs (and, with --puts, durable 16 B PUTs). Reports requests per second, server
CPU seconds (utime+stime of the process) and the scaling ratio against one shard. Appends JSON
lines to perf/results/shard_sweep.jsonl (or --out) and prints a markdown table.

usage: perf/shard_sweep.py --percore build-release/shards/percore [--wrk wrk] [--shards 1,2,4,8]
                           [--load-cpus 8-15] [--duration 5] [--puts] [--out FILE]
--wrk may be a command line, e.g. "ld.so --library-path libs wrk" for a carried binary.
"""
import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile

from benchlib import HERE, cpu_seconds, http, machine


def cpu_list(spec):
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--percore", required=True)
    ap.add_argument("--wrk", default="wrk")
    ap.add_argument("--shards", default="1,2,4,8")
    ap.add_argument("--load-cpus", default=None)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections-per-shard", type=int, default=64)
    ap.add_argument("--puts", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "shard_sweep.jsonl"))
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    ncpu = os.cpu_count()
    counts = [int(x) for x in args.shards.split(",")]
    load = cpu_list(args.load_cpus) if args.load_cpus else list(range(max(counts), ncpu))
    wrk = shlex.split(args.wrk)
    where = machine()
    rows = []
    lua = os.path.join(HERE, "put.lua")
    workloads = [("GET 64 B", None)] + ([("durable PUT 16 B", lua)] if args.puts else [])
    for name, script in workloads:
        base = None
        for n in counts:
            data = tempfile.mkdtemp(prefix="percore-sweep-")
            proc = subprocess.Popen(["taskset", "-c", f"0-{n - 1}", args.percore, "serve", "--listen", "127.0.0.1:0",
                                     "--shards", str(n), "--data", data], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            port = int(re.search(r":(\d+) shards=", proc.stdout.readline()).group(1))
            http(port, "PUT", "/bench/doc64", b"x" * 64)
            threads = min(len(load), max(1, n))
            conns = args.connections_per_shard * n
            cmd = ["taskset", "-c", ",".join(map(str, load))] + wrk + [f"-t{threads}", f"-c{conns}", f"-d{args.duration}s"]
            url = f"http://127.0.0.1:{port}/bench/doc64" if script is None else f"http://127.0.0.1:{port}/"
            if script:
                cmd += ["-s", script]
            subprocess.run([c if not c.startswith("-d") else "-d1s" for c in cmd] + [url], capture_output=True)  # warm-up
            c0 = cpu_seconds(proc.pid)
            out = subprocess.run(cmd + [url], capture_output=True, text=True).stdout
            cpu = cpu_seconds(proc.pid) - c0
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)
            m = re.search(r"Requests/sec:\s*([\d.]+)", out)
            rps = float(m.group(1)) if m else 0.0
            if base is None:
                base = rps
            row = {"workload": name, "shards": n, "rps": rps, "server_cpu_s": cpu,
                   "per_cpu_s": rps * args.duration / cpu if cpu else None, "scaling": rps / base if base else None,
                   "ideal_fraction": rps / (base * n) if base else None, "wrk_threads": threads, "connections": conns,
                   "load_cpus": len(load), "machine": where, "note": args.note,
                   "command": " ".join(sys.argv)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"\n{where} {args.note}\n")
    print("| workload | shards | req/s | server CPU s | req per server-CPU-s | vs 1 shard | of N x 1 shard |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['shards']} | {r['rps']:,.0f} | {r['server_cpu_s']:.2f} | "
              f"{(r['per_cpu_s'] or 0):,.0f} | {r['scaling']:.2f}x | {r['ideal_fraction']:.2f} |")


if __name__ == "__main__":
    main()

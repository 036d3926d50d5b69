#!/usr/bin/env python3
"""GETs of one document (64 B by default, --size for others), keep-alive, wrk -t1: percore (one
shard) beside h2o (one thread, the same bytes as a static file), in one run. Server on one CPU, wrk on another (taskset), rounds in
rotated order; reports requests per second and requests per server-CPU-second (utime+stime of
the server process from /proc/PID/stat), medians over rounds. Appends raw rounds as JSON lines
to perf/results/get_h2o.jsonl and prints a markdown table.

usage: perf/get_vs_h2o.py --percore build-release/shards/percore [--rounds 5] [--duration 8]
                            [--server-cpu 0] [--load-cpu 1] [--connections 64] [--size 64]
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


class Percore:
    name = "percore"

    def __init__(self, binary, cpu, workdir, body):
        self.binary, self.cpu, self.workdir, self.body = binary, cpu, workdir, body

    def start(self):
        data = tempfile.mkdtemp(dir=self.workdir)
        self.proc = subprocess.Popen(
            ["taskset", "-c", str(self.cpu), self.binary, "serve", "--listen", "127.0.0.1:0", "--shards", "1",
             "--data", data], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        self.port = int(re.search(r":(\d+) shards=", line).group(1))
        reply = http(self.port, "PUT", "/bench/doc", self.body)
        assert reply.startswith(b"HTTP/1.1 201"), reply
        self.path = "/bench/doc"
        return self.proc.pid

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)


class H2o:
    name = "h2o"

    def __init__(self, cpu, workdir, body):
        self.cpu, self.workdir, self.body = cpu, workdir, body

    def start(self):
        root = tempfile.mkdtemp(dir=self.workdir)
        with open(os.path.join(root, "doc"), "wb") as f:
            f.write(self.body)
        self.port = free_port()
        with open(os.path.join(HERE, "peers", "h2o-static.conf.in")) as f:
            conf = f.read()
        conf = (conf.replace("@PORT@", str(self.port)).replace("@ROOT@", root)
                .replace("@LOG@", os.path.join(root, "error.log"))
                .replace("@USER@", os.environ.get("USER", "root") if os.getuid() == 0 else os.environ.get("USER", "nobody")))
        path = os.path.join(root, "h2o.conf")
        with open(path, "w") as f:
            f.write(conf)
        self.proc = subprocess.Popen(["taskset", "-c", str(self.cpu), "h2o", "-c", path],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        reply = http(self.port, "GET", "/doc")
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(self.body), reply[:200]
        self.path = "/doc"
        return self.proc.pid

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def run_wrk(port, path, cpu, connections, duration):
    out = subprocess.run(["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--latency",
                          f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 1, "ms": 1000, "s": 1e6}
    p99_us = float(p99.group(1)) * scale[p99.group(2)] if p99 else None
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p99_us, int(errors.group(1)) if errors else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--percore", default=os.path.join(ROOT, "build-release", "shards", "percore"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args()
    for tool in ("wrk", "h2o", "taskset"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: bash .ci/deps wrk h2o")

    body = bytes((i * 7 + 33) % 94 + 33 for i in range(args.size))
    workdir = tempfile.mkdtemp(prefix="percore-perf-")
    servers = [Percore(args.percore, args.server_cpu, workdir, body), H2o(args.server_cpu, workdir, body)]
    at = commit()
    where = machine()
    command = " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:])
    results = {s.name: [] for s in servers}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    log = open(os.path.join(HERE, "results", "get_h2o.jsonl"), "a")
    try:
        for r in range(args.rounds):
            order = servers[r % len(servers):] + servers[:r % len(servers)]
            for s in order:
                pid = s.start()
                run_wrk(s.port, s.path, args.load_cpu, args.connections, 1)  # warm up
                c0 = cpu_seconds(pid)
                t0 = time.time()
                rps, p99, bad = run_wrk(s.port, s.path, args.load_cpu, args.connections, args.duration)
                wall = time.time() - t0
                cpu = cpu_seconds(pid) - c0
                s.stop()
                requests = rps * args.duration
                row = {"round": r, "server": s.name, "rps": rps, "server_cpu_s": cpu, "wall_s": wall,
                       "per_cpu_s": requests / cpu if cpu > 0 else None, "p99_us": p99, "non_2xx": bad,
                       "commit": at, "machine": where, "command": command,
                       "workload": f"GET {args.size} B keep-alive", "connections": args.connections}
                results[s.name].append(row)
                log.write(json.dumps(row) + "\n")
                print(f"round {r} {s.name:8s} {rps:10.0f} req/s  cpu {cpu:5.2f} s  {row['per_cpu_s']:10.0f} req/cpu-s  p99 {p99} us  non-2xx {bad}",
                      file=sys.stderr)
    finally:
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\ncommit {at}, {where}, `{command}`\n")
    print("| server | req/s (median) | server CPU s per run | req per server-CPU-second (median) | p99 (median) |")
    print("|---|---:|---:|---:|---:|")
    med = {}
    for name, rows in results.items():
        med[name] = statistics.median(x["per_cpu_s"] for x in rows)
        print(f"| {name} | {statistics.median(x['rps'] for x in rows):,.0f} | "
              f"{statistics.median(x['server_cpu_s'] for x in rows):.2f} | {med[name]:,.0f} | "
              f"{statistics.median(x['p99_us'] for x in rows):.0f} µs |")
    print(f"\npercore / h2o per server-CPU-second: {med['percore'] / med['h2o']:.2f}x")


if __name__ == "__main__":
    main()

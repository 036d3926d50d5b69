#!/usr/bin/env python3
"""The change feed's costs (issue 14, SPEC §8), against percore alone, server on CPU 0 (--shards 1
--durability sync), every generator on CPU 1, rounds in rotated order, medians:

  writes    durable 16 B PUTs by 64 connections (percore-load and wrk) with 0, 1 and 100 idle long
            polls open on another app: requests per server-CPU-second; goal: 100 idle long polls
            cost writes less than 5%.
  consumer  one continuous feed (feed=continuous&since=now) read as fast as it comes while 64
            connections write: changes received per second and per server-CPU-second, and whether
            it saw the last write.
  memory    RSS of the server before and after 1,000 idle long polls (each its own connection):
            KiB per long poll.
  instructions
            the server under callgrind (instructions counted, so repeatable on a noisy VM): durable
            writes by 64 connections (percore-load, then wrk) for a fixed time with 0 and 100 idle long polls
            open on another app; instructions per answered write, counted only while the writes run.

Rows (JSON lines with commit, machine and command) go to perf/results/feeds/<run id>.jsonl; the summary is
printed. Usage: perf/feeds.py [--rounds 3] [--duration 3] [--steps writes,consumer,memory,instructions]"""
import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import TICKS, new_run_id, parse_wrk, rotate, run_file  # noqa: E402

BIN = os.path.join(ROOT, "build-release/shards/percore")
LOAD = os.path.join(ROOT, "build-release/perf/load/percore-load")
SERVER_CPU, LOAD_CPU = "0", "1"
WRITERS = 64


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, wrap=(), args=()):
        self.dir = tempfile.mkdtemp(prefix="percore-feeds-")
        self.proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, *wrap, BIN, "serve", "--listen", "127.0.0.1:0", "--shards",
                                      "1", "--durability", "sync", "--data", os.path.join(self.dir, "data"),
                                      "--max-connections", "5000", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        self.port = int(re.search(r":(\d+) shards", line).group(1))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def long_polls(port, n, app="idle"):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /_changes/{app}?feed=longpoll&timeout=300&since=now HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        socks.append(s)
    time.sleep(0.3)
    return socks


def writes(port, generator, duration):
    if generator == "percore-load":
        cmd = ["taskset", "-c", LOAD_CPU, LOAD, "--url", f"http://127.0.0.1:{port}", "--connections", str(WRITERS),
               "--threads", "1", "--duration", str(duration), "--keys", "10000", "--size", "16", "--mix",
               "get:0,put:100", "--app", "bench", "--json", "-"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        return r["answered"], r.get("wrong", 0)
    # "wrk-sequential": the keys in turn, so that no key is written twice within 10,000 writes
    # (every write a change of its own for a feed or delivery); "wrk": keys at random, as percore-load
    env = dict(os.environ, PERCORE_BENCH_KEYS="10000", PERCORE_BENCH_BYTES="16",
               PERCORE_BENCH_SEQUENTIAL="1" if generator == "wrk-sequential" else "0")
    cmd = ["taskset", "-c", LOAD_CPU, "wrk", "-t1", f"-c{WRITERS}", f"-d{duration}s", "--latency", "-s",
           os.path.join(HERE, "put.lua"), f"http://127.0.0.1:{port}/"]
    r = parse_wrk(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout)
    return r["requests_per_s"] * duration, r.get("wrong", 0)


def step_writes(rounds, duration, record):
    for rnd in range(rounds):
        order = [0, 1, 100][rnd % 3:] + [0, 1, 100][:rnd % 3]
        for generator in ("percore-load", "wrk"):
            for feeds in order:
                srv = Server()
                try:
                    socks = long_polls(srv.port, feeds)
                    writes(srv.port, generator, 1)  # warm-up
                    c0, t0 = cpu_s(srv.proc.pid), time.time()
                    answered, wrong = writes(srv.port, generator, duration)
                    cpu = cpu_s(srv.proc.pid) - c0
                    row = {"step": "writes", "round": rnd, "generator": generator, "feeds": feeds,
                           "answered": answered, "wrong": wrong, "server_cpu_s": cpu, "wall_s": time.time() - t0,
                           "per_cpu_s": answered / cpu if cpu else None}
                    record(row)
                    print(f"writes r{rnd} {generator:12s} feeds={feeds:3d}: {answered / duration:9,.0f} req/s "
                          f"{row['per_cpu_s']:9,.0f} per server-CPU-s", flush=True)
                    for s in socks:
                        s.close()
                finally:
                    srv.stop()


def step_consumer(rounds, duration, record):
    for rnd in range(rounds):
        for generator in ("percore-load", "wrk"):
            srv = Server()
            try:
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.sendall(b"GET /_changes/bench?feed=continuous&since=now HTTP/1.1\r\nHost: localhost\r\n\r\n")
                got = {"lines": 0, "stop": False}

                def read():
                    s.settimeout(1)
                    while not got["stop"]:
                        try:
                            piece = s.recv(1 << 20)
                        except socket.timeout:
                            continue
                        if not piece:
                            return
                        got["lines"] += piece.count(b'"cursor"')
                t = threading.Thread(target=read)
                t.start()
                c0 = cpu_s(srv.proc.pid)
                answered, wrong = writes(srv.port, generator, duration)
                time.sleep(0.5)
                cpu = cpu_s(srv.proc.pid) - c0
                got["stop"] = True
                t.join()
                s.close()
                row = {"step": "consumer", "round": rnd, "generator": generator, "writes": answered, "wrong": wrong,
                       "changes_received": got["lines"], "server_cpu_s": cpu,
                       "changes_per_cpu_s": got["lines"] / cpu if cpu else None}
                record(row)
                print(f"consumer r{rnd} {generator:12s}: {answered:,.0f} writes, {got['lines']:,} changes received, "
                      f"{row['changes_per_cpu_s']:,.0f} changes per server-CPU-s", flush=True)
            finally:
                srv.stop()


def step_memory(rounds, record):
    for rnd in range(rounds):
        srv = Server()
        try:
            socks = long_polls(srv.port, 10)
            time.sleep(0.5)
            before = rss_kib(srv.proc.pid)
            more = long_polls(srv.port, 1000)
            time.sleep(1)
            after = rss_kib(srv.proc.pid)
            row = {"step": "memory", "round": rnd, "long_polls": 1000, "rss_before_kib": before,
                   "rss_after_kib": after, "kib_per_long_poll": (after - before) / 1000}
            record(row)
            print(f"memory r{rnd}: RSS {before} -> {after} KiB: {row['kib_per_long_poll']:.2f} KiB per idle long poll",
                  flush=True)
            for x in socks + more:
                x.close()
        finally:
            srv.stop()


def callgrind_total(pid, out_file):
    """Dumps the counts so far (callgrind_control -d) and returns the instructions in that dump."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    time.sleep(1)
    dumps = sorted(f for f in os.listdir(os.path.dirname(out_file)) if f.startswith(os.path.basename(out_file)))
    with open(os.path.join(os.path.dirname(out_file), dumps[-1])) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("no totals in the callgrind dump")


def step_instructions(rounds, duration, record):
    for rnd in range(rounds):
        for generator, feeds in [(g, f) for g in ("percore-load", "wrk") for f in ([0, 100] if rnd % 2 == 0 else [100, 0])]:
            cg_dir = tempfile.mkdtemp(prefix="percore-cg-")
            out_file = os.path.join(cg_dir, "callgrind.out")
            srv = Server(wrap=("valgrind", "--tool=callgrind", "--instr-atstart=no",
                               f"--callgrind-out-file={out_file}"))
            try:
                socks = long_polls(srv.port, feeds)
                writes(srv.port, "percore-load", 2)  # warm-up: the keys exist, buffers have grown
                subprocess.run(["callgrind_control", "-i", "on", str(srv.proc.pid)], check=True, capture_output=True)
                answered, wrong = writes(srv.port, generator, duration)
                instructions = callgrind_total(srv.proc.pid, out_file)
                row = {"step": "instructions", "round": rnd, "generator": generator, "feeds": feeds,
                       "answered": answered, "wrong": wrong, "instructions": instructions,
                       "instructions_per_write": instructions / answered if answered else None}
                record(row)
                print(f"instructions r{rnd} {generator:12s} feeds={feeds:3d}: {answered:,.0f} writes, "
                      f"{row['instructions_per_write']:,.0f} instructions per write", flush=True)
                for s in socks:
                    s.close()
            finally:
                srv.stop()
                shutil.rmtree(cg_dir, ignore_errors=True)


def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))  # 1,010 long polls need their sockets
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--steps", default="writes,consumer,memory,instructions")
    args = ap.parse_args()
    steps = set(args.steps.split(","))
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    run = new_run_id()
    base = {"run": run, "commit": commit, "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
            "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    rows = []
    with open(run_file("feeds", run), "a") as out:
        def record(row):
            row = {**base, **row}
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
        if "writes" in steps:
            step_writes(args.rounds, args.duration, record)
        if "consumer" in steps:
            step_consumer(args.rounds, args.duration, record)
        if "memory" in steps:
            step_memory(args.rounds, record)
        if "instructions" in steps:
            step_instructions(args.rounds, max(args.duration, 5), record)
    rotate("feeds")
    print(f"run {run} at {commit}")
    summarize(rows, steps)


def summarize(rows, steps):
    for generator in ("percore-load", "wrk") if "instructions" in steps else ():
        med = {f: statistics.median(r["instructions_per_write"] for r in rows if r["step"] == "instructions"
                                    and r["generator"] == generator and r["feeds"] == f) for f in (0, 100)}
        print(f"instructions per write (callgrind), {generator}: 0 feeds {med[0]:,.0f}; "
              f"100 idle long polls {med[100]:,.0f} ({med[100] / med[0]:.3f}x)")
    for generator in ("percore-load", "wrk") if "writes" in steps else ():
        med = {f: statistics.median(r["per_cpu_s"] for r in rows if r["step"] == "writes" and r["generator"] == generator
                                    and r["feeds"] == f) for f in (0, 1, 100)}
        print(f"writes per server-CPU-s, {generator}: 0 feeds {med[0]:,.0f}; 1 feed {med[1] / med[0]:.3f}x; "
              f"100 idle long polls {med[100] / med[0]:.3f}x")
    for generator in ("percore-load", "wrk") if "consumer" in steps else ():
        cons = [r for r in rows if r["step"] == "consumer" and r["generator"] == generator]
        print(f"continuous consumer, {generator}: median {statistics.median(r['changes_per_cpu_s'] for r in cons):,.0f} "
              f"changes per server-CPU-s; received/written {statistics.median(r['changes_received'] / max(r['writes'], 1) for r in cons):.3f}")
    if "memory" in steps:
        print(f"memory: median {statistics.median(r['kib_per_long_poll'] for r in rows if r['step'] == 'memory'):.2f} KiB per idle long poll")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write throughput during a backup (issue 18, SPEC §11: "Backups do not stop writes").

One server (--shards 1, --durability sync, --auth off, CPU 0) holding a data directory of
meaningful size: --fill-mib of 64 KiB values, each written once (percore-load --prepare), before
anything is measured. Then, per generator, one long write load — 64 keep-alive connections
writing 16 B values to 10,000 keys: percore-load and, with --wrk, wrk (perf/put.lua, 2 threads) —
cut into windows of --window seconds that come in pairs, in an order that alternates between
rounds:
  without  no backup;
  during   backups one after the other for the whole window: GET /_backup read by curl to
           /dev/null (what the server pays, not what a disk pays to keep the copy), the last one
           cut at the window's end (a client that leaves: the server drops it).
The load generator and curl run on CPU 1 (the machine has 2). A window's writes/s is the
server's own count of acknowledged PUTs (percore_requests_total, 201 and 204) over the window.
Adjacent windows share the machine's moment: the figure is the median over rounds of each pair's
ratio during/without (goal >= 0.8), beside the medians of each. Before the load, one backup of
the idle server is kept, listed by tar and restored with `percore restore`, and its time noted.

Rows (JSON lines with commit, machine, command) go to perf/results/backup/<run id>.jsonl; a summary is
printed. Usage: perf/backup.py [--rounds 6] [--window 5] [--fill-mib 300] [--wrk]
    [--binary build-backup/shards/percore] [--load build-backup/perf/load/percore-load] [--label TEXT]"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import ROOT, commit, cpu_seconds, http, machine, new_run_id, rotate, run_file

SERVER_CPU, LOAD_CPU = "0", "1"
CONNECTIONS = 64
FILL_VALUE_BYTES = 64 * 1024
GOAL = 0.8
WARMUP_S = 1.0
ACKED = re.compile(rb'^percore_requests_total\{shard="\d+",method="PUT",status="20[14]"\} (\d+)$', re.M)


def start_server(binary, data):
    argv = ["taskset", "-c", SERVER_CPU, binary, "serve", "--listen", "127.0.0.1:0", "--shards", "1",
            "--data", data, "--durability", "sync", "--auth", "off"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=open(data + ".stderr", "w"), text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}; see {data}.stderr")
    return proc, int(line.split("127.0.0.1:")[1].split()[0])


def fill(load, port, mib):
    keys = max(1, mib * 1024 * 1024 // FILL_VALUE_BYTES)
    subprocess.run(["taskset", "-c", LOAD_CPU, load, "--url", f"http://127.0.0.1:{port}", "--prepare",
                    "--duration", "0", "--app", "fill", "--keys", str(keys), "--size", str(FILL_VALUE_BYTES),
                    "--connections", "8"], check=True, stdout=subprocess.DEVNULL)
    return keys


def acked_writes(port):
    return sum(int(n) for n in ACKED.findall(http(port, "GET", "/_metrics")))


def curl_backup(port, path, max_time=None):
    """GET /_backup by curl into `path`: (exit code, bytes read, seconds)."""
    cmd = ["taskset", "-c", LOAD_CPU, "curl", "-sS", "-o", path, "-w", "%{size_download} %{http_code}"]
    if max_time:
        cmd += ["--max-time", f"{max_time:.3f}"]
    began = time.monotonic()
    p = subprocess.run(cmd + [f"http://127.0.0.1:{port}/_backup"], capture_output=True, text=True)
    size, _, code = p.stdout.partition(" ")
    if code.strip() != "200":
        raise RuntimeError(f"GET /_backup: {p.stdout!r} {p.stderr.strip()}")
    return p.returncode, int(size), time.monotonic() - began


def check_backup(binary, port, tmp):
    """One backup of the idle server, kept, listed by tar and restored: (seconds, bytes)."""
    path = os.path.join(tmp, "check.tar")
    rc, size, seconds = curl_backup(port, path)
    if rc != 0:
        raise RuntimeError(f"the idle backup: curl exit {rc}")
    listed = subprocess.run(["tar", "-tf", path], capture_output=True, text=True)
    if listed.returncode != 0 or "FORMAT" not in listed.stdout.split():
        raise RuntimeError(f"tar cannot list the backup: {listed.stderr}")
    restored = subprocess.run([binary, "restore", path, os.path.join(tmp, "restored")], capture_output=True, text=True)
    if restored.returncode != 0:
        raise RuntimeError(f"percore restore: {restored.stderr}")
    return seconds, size


def backups_until(port, deadline, out):
    """Backups one after the other until `deadline` (curl exit 0: whole; 28: cut at the deadline)."""
    while (left := deadline - time.monotonic()) > 0.05:
        rc, size, _ = curl_backup(port, os.devnull, left)
        if rc not in (0, 28):
            raise RuntimeError(f"a backup failed: curl exit {rc}")
        out["bytes"] += size
        out["whole"] += rc == 0


def window(port, seconds, with_backup, server_pid, load_pid):
    """One window's figures; the CPU columns are the share of one CPU the server (all its threads)
    and the load generator used: a generator near 1.0 is the bottleneck, and curl beside it on the
    same CPU then costs writes the server would have taken."""
    c0, t0 = acked_writes(port), time.monotonic()
    s0, l0 = cpu_seconds(server_pid), cpu_seconds(load_pid)
    b = {"bytes": 0, "whole": 0}
    if with_backup:
        backups_until(port, t0 + seconds, b)
    else:
        time.sleep(seconds)
    c1, t1 = acked_writes(port), time.monotonic()
    s1, l1 = cpu_seconds(server_pid), cpu_seconds(load_pid)
    row = {"backup": with_backup, "writes_per_s": round((c1 - c0) / (t1 - t0)),
           "server_cpu": round((s1 - s0) / (t1 - t0), 2), "load_cpu": round((l1 - l0) / (t1 - t0), 2)}
    if with_backup:
        row.update({"backups_whole": b["whole"], "backup_mib_per_s": round(b["bytes"] / (t1 - t0) / 2**20, 1)})
    return row


def load_command(args, generator, port, seconds, tmp):
    if generator == "percore-load":
        return ["taskset", "-c", LOAD_CPU, args.load, "--url", f"http://127.0.0.1:{port}", "--connections",
                str(CONNECTIONS), "--mix", "get:0,put:100", "--size", "16", "--keys", "10000", "--app", "bench",
                "--duration", str(seconds), "--json", os.path.join(tmp, "load.json")]
    return ["taskset", "-c", LOAD_CPU, "wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "-s",
            os.path.join(ROOT, "perf", "put.lua"), f"http://127.0.0.1:{port}"]


def measure(args, generator, server_pid, port, tmp, base):
    seconds = int(WARMUP_S + 2 * args.rounds * args.window + 2)
    load = subprocess.Popen(load_command(args, generator, port, seconds, tmp), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    rows = []
    try:
        time.sleep(WARMUP_S)
        for n in range(args.rounds):
            for with_backup in ((False, True) if n % 2 == 0 else (True, False)):
                row = window(port, args.window, with_backup, server_pid, load.pid)
                row.update({"generator": generator, "round": n, **base})
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        _, err = load.communicate(timeout=seconds + 30)
    if load.returncode != 0:
        raise RuntimeError(f"{generator} failed: {err[-500:]}")
    return rows


def summary(rows, generator):
    mine = [r for r in rows if r.get("generator") == generator and not r.get("summary")]
    without = {r["round"]: r["writes_per_s"] for r in mine if not r["backup"]}
    during = {r["round"]: r for r in mine if r["backup"]}
    ratios = [during[n]["writes_per_s"] / without[n] for n in without if without[n]]
    return {"generator": generator, "summary": True, "rounds": len(ratios),
            "writes_per_s_without": statistics.median(without.values()),
            "writes_per_s_during": statistics.median(r["writes_per_s"] for r in during.values()),
            "ratio_median": round(statistics.median(ratios), 3), "ratio_min": round(min(ratios), 3),
            "backup_mib_per_s": statistics.median(r["backup_mib_per_s"] for r in during.values()), "goal": GOAL}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window", type=float, default=5)
    ap.add_argument("--fill-mib", type=int, default=300)
    ap.add_argument("--wrk", action="store_true")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build-backup", "shards", "percore"))
    ap.add_argument("--load", default=os.path.join(ROOT, "build-backup", "perf", "load", "percore-load"))
    ap.add_argument("--out", default=None, help="rows to FILE (default: perf/results/backup/<run id>.jsonl, one file per run)")
    ap.add_argument("--label", default="", help="what the binary is, when not this checkout's (kept in each row)")
    args = ap.parse_args()
    generators = ["percore-load"] + (["wrk"] if args.wrk else [])
    tmp = tempfile.mkdtemp(prefix="percore-backup-perf-")
    run = new_run_id()
    base = {"run": run, "fill_mib": args.fill_mib, "window_s": args.window, "commit": commit(), "machine": machine(),
            "command": " ".join(sys.argv), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if args.label:
        base["label"] = args.label
    rows = []
    server, port = start_server(args.binary, os.path.join(tmp, "data"))
    try:
        keys = fill(args.load, port, args.fill_mib)
        seconds, size = check_backup(args.binary, port, tmp)
        rows.append({"idle_backup": True, "mib": round(size / 2**20, 1), "seconds": round(seconds, 2),
                     "mib_per_s": round(size / seconds / 2**20, 1), **base})
        print(f"filled {keys} values of {FILL_VALUE_BYTES} B; the idle backup: {json.dumps(rows[-1])}", flush=True)
        for generator in generators:
            rows += measure(args, generator, server.pid, port, tmp, base)
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    for generator in generators:
        rows.append({**summary(rows, generator), **base})
        print(json.dumps(rows[-1]), flush=True)
    with open(args.out or run_file("backup", run), "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    rotate("backup")


if __name__ == "__main__":
    main()

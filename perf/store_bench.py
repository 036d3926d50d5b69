#!/usr/bin/env python3
"""Store benchmarks of issue 3, each recorded as JSON lines in perf/results/store/<run id>.jsonl:

  recovery  --documents N   load N small documents, stop, restart: recovery time (from the shards'
                            log lines and until the ready line), RSS per document after recovery
  overwrite --seconds S     steady durable overwrite of --keys keys of --bytes bytes with small
                            segments: disk use of the data directory against live bytes, sampled
  mixed     --seconds S     64 B GETs alone, then while 64 connections write durably (wrk), one
                            shard on --server-cpu, both loads on --load-cpu

usage: perf/store_bench.py recovery --documents 1000000
       perf/store_bench.py overwrite --seconds 300
       perf/store_bench.py mixed --seconds 8
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import HERE, ROOT, commit, http, machine, new_run_id, rotate, run_file


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def dir_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return total


class Server:
    def __init__(self, binary, data, cpu, extra=(), env=None):
        e = dict(os.environ)
        e.update(env or {})
        self.t0 = time.time()
        self.proc = subprocess.Popen(["taskset", "-c", str(cpu), binary, "serve", "--listen", "127.0.0.1:0",
                                      "--shards", "1", "--data", data, *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        line = self.proc.stdout.readline()
        self.ready_s = time.time() - self.t0
        self.port = int(re.search(r":(\d+) shards=", line).group(1))
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()

    def metric(self, name):
        text = http(self.port, "GET", "/_metrics").decode()
        return sum(float(v) for v in re.findall(rf"^{name}{{[^}}]*}} ([0-9.e+-]+)$", text, re.M))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(20)


def wrk_put(port, cpu, conns, seconds, keys, size, extra_env=None):
    env = dict(os.environ, PERCORE_BENCH_KEYS=str(keys), PERCORE_BENCH_BYTES=str(size))
    env.update(extra_env or {})
    out = subprocess.run(["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "-s",
                          os.path.join(HERE, "put.lua"), f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, env=env, check=True).stdout
    return float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1)), out


RUN = new_run_id()   # every benchmark of one invocation goes to one run file


def record(row):
    row.update({"run": RUN, "commit": commit(), "command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M")})
    with open(run_file("store", RUN), "a") as f:
        f.write(json.dumps(row) + "\n")
    rotate("store")
    print(json.dumps(row, indent=1))


def recovery(args, work):
    data = os.path.join(work, "data")
    s = Server(args.percore, data, args.server_cpu, ["--durability", "none"])
    empty_rss = rss_kib(s.proc.pid)
    # load: sequential keys so that every PUT creates a document (put.lua draws them at random otherwise)
    rate, _ = wrk_put(s.port, args.load_cpu, 64, max(5, args.documents // 40000), args.documents, args.bytes,
                      {"PERCORE_BENCH_KEYS": str(args.documents), "PERCORE_BENCH_SEQUENTIAL": "1"})
    docs = int(s.metric("percore_documents"))
    loaded_rss = rss_kib(s.proc.pid)
    s.stop()
    s = Server(args.percore, data, args.server_cpu)
    time.sleep(0.5)
    rec = [l for l in s.log if "recovered" in l]
    seconds = float(re.search(r"in ([\d.]+) s", rec[0]).group(1)) if rec else None
    after_rss = rss_kib(s.proc.pid)
    docs_after = int(s.metric("percore_documents"))
    s.stop()
    record({"benchmark": "recovery", "documents": docs_after, "documents_loaded": docs, "value_bytes": args.bytes,
            "recovery_s": seconds, "ready_s": s.ready_s, "disk_bytes": dir_bytes(data),
            "rss_empty_kib": empty_rss, "rss_loaded_kib": loaded_rss, "rss_recovered_kib": after_rss,
            "rss_bytes_per_document": (after_rss - empty_rss) * 1024 / max(1, docs_after), "load_rate": rate})


def overwrite(args, work):
    data = os.path.join(work, "data")
    s = Server(args.percore, data, args.server_cpu, env={"PERCORE_SEGMENT_BYTES": args.segment})
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.wait(5):
            live = s.metric("percore_live_bytes")
            docs = s.metric("percore_documents")
            disk = dir_bytes(data)
            samples.append({"t": round(time.time() - s.t0, 1), "disk_bytes": disk, "live_value_bytes": live, "documents": docs})

    t = threading.Thread(target=sample)
    t.start()
    rate, _ = wrk_put(s.port, args.load_cpu, 64, args.seconds, args.keys, args.bytes)
    stop.set()
    t.join()
    s.stop()
    key_bytes = len("bench") + 1 + len("k") + 5
    live_records = [x["live_value_bytes"] + x["documents"] * (32 + key_bytes + 0) for x in samples]
    ratio = max(x["disk_bytes"] / max(1, lr) for x, lr in zip(samples[2:], live_records[2:])) if len(samples) > 2 else None
    record({"benchmark": "overwrite", "seconds": args.seconds, "keys": args.keys, "value_bytes": args.bytes,
            "segment_bytes": args.segment, "writes_per_s": rate, "samples": samples,
            "max_disk_over_live_records": ratio, "final_disk_bytes": samples[-1]["disk_bytes"] if samples else None})


def mixed(args, work):
    data = os.path.join(work, "data")
    s = Server(args.percore, data, args.server_cpu)
    http(s.port, "PUT", "/bench/doc64", b"x" * 64)
    def get_load(seconds):
        out = subprocess.run(["taskset", "-c", str(args.load_cpu), "wrk", "-t1", "-c64", f"-d{seconds}s",
                              f"http://127.0.0.1:{s.port}/bench/doc64"], capture_output=True, text=True, check=True).stdout
        return float(re.search(r"Requests/sec:\s*([\d.]+)", out).group(1))
    alone = get_load(args.seconds)
    result = {}
    writer = threading.Thread(target=lambda: result.update(put=wrk_put(s.port, args.load_cpu, 64, args.seconds + 2, 10000, 16)[0]))
    writer.start()
    time.sleep(1)
    together = get_load(args.seconds)
    writer.join()
    s.stop()
    record({"benchmark": "mixed", "get_alone_rps": alone, "get_with_writers_rps": together,
            "ratio": together / alone, "writes_per_s": result.get("put")})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["recovery", "overwrite", "mixed"])
    ap.add_argument("--percore", default=os.path.join(ROOT, "build-release", "shards", "percore"))
    ap.add_argument("--documents", type=int, default=1000000)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--bytes", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--segment", default="4M")
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--load-cpu", type=int, default=1)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="percore-perf-", dir=ROOT)
    try:
        {"recovery": recovery, "overwrite": overwrite, "mixed": mixed}[args.what](args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

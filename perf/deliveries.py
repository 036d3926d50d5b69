#!/usr/bin/env python3
"""What deliveries (SPEC §9, issue 15) cost the write path, against percore alone (no peer on this
machine pushes webhooks), server on CPU 0 (--shards 1 --durability sync), every generator and the
receiver on CPU 1, a fresh server per measurement, the order of the three setups rotated per round:

  writes    durable 16 B PUTs by 64 connections to app `bench` of 10,000 keys (percore-load and wrk
            drawing keys at random; wrk-sequential writing them in turn, so that every write is a
            change of its own to deliver, none coalesced), with no
            delivery, with one delivery of `bench` to a fast receiver (nginx answering 204 at once:
            perf/peers/nginx-receiver.conf.in), and with one to a dead receiver (a port that refuses
            connections): requests per server-CPU-second; goal: both within 5% of none. The fast
            receiver's rows also give the delivery throughput: changes in batches answered 2xx per
            second, from the server's /_metrics (the feed coalesces a rewritten key into its newest
            version, so fewer than the writes).
  instructions
            the same three setups with the server under callgrind, counted only while percore-load
            writes: instructions per write (repeatable on this noisy VM).

Rows (JSON lines with commit, machine and command) go to perf/results/deliveries/<run id>.jsonl; the
summary is printed, with fast/none and dead/none per round (this VM's speed drifts within a run).
Usage: perf/deliveries.py [--rounds 3] [--duration 3] [--steps writes,instructions]
                          [--generators percore-load,wrk,wrk-sequential]"""
import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from benchlib import free_port, new_run_id, rotate, run_file, wait_port  # noqa: E402
from feeds import LOAD_CPU, Server, callgrind_total, cpu_s, writes  # noqa: E402
from peers import fill  # noqa: E402

LOOPBACK_RECEIVERS = ("--deliveries-allow", "127.0.0.0/8,::1/128")  # SPEC §9: the receiver is on loopback

RECEIVER = os.path.join(ROOT, "tests", "integration", "webhook_receiver.py")
SETUPS = ("none", "fast", "dead")


class NginxReceiver:
    """nginx (Debian's) pinned to the load CPU, answering 204 to every batch (perf/peers/
    nginx-receiver.conf.in). The fast receiver of the `writes` step: it takes ~0.5% of the load CPU
    where the recording Python receiver took ~5%, which the generator beside it then lacked in the
    fast setup only. Changes delivered are read from the server's percore_delivery_changes_sent_total."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="percore-perf-nginx-")
        self.port = free_port()
        user = "user root;" if os.getuid() == 0 else ""
        conf = fill("nginx-receiver.conf.in", os.path.join(self.folder, "nginx.conf"), PORT=self.port,
                    DIR=self.folder, USER_LINE=user)
        self.proc = subprocess.Popen(["taskset", "-c", LOAD_CPU, "nginx", "-e", os.path.join(self.folder, "error.log"),
                                      "-p", self.folder, "-c", conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, 10)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


def dead_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: every connect is refused
    return f"http://127.0.0.1:{port}"


def request(port, method, path, body=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
              .encode() + body)
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1])


def changes_sent(port):
    """Changes in batches the receiver answered 2xx, all shards (the server's /_metrics)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /_metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    s.close()
    return sum(float(line.rsplit(b" ", 1)[1]) for line in data.split(b"\n")
               if line.startswith(b"percore_delivery_changes_sent_total{"))


def set_up(srv, setup):
    """The app exists; with a receiver, its delivery too. Returns the receiver to stop (or None)."""
    assert request(srv.port, "PUT", "/bench/_first", b"0") in (201, 204)
    if setup == "none":
        return None
    receiver = NginxReceiver() if setup == "fast" else None
    url = (receiver.url if receiver else dead_url()) + "/hook"
    status = request(srv.port, "PUT", "/_apps/bench/deliveries/hook", json.dumps({"url": url}).encode())
    assert status == 201, status
    return receiver


def step_writes(rounds, duration, record, generators):
    for rnd in range(rounds):
        order = SETUPS[rnd % 3:] + SETUPS[:rnd % 3]
        for generator in generators:
            for setup in order:
                srv = Server(args=LOOPBACK_RECEIVERS)
                receiver = None
                try:
                    receiver = set_up(srv, setup)
                    writes(srv.port, generator, 1)  # warm-up
                    c0, t0 = cpu_s(srv.proc.pid), time.time()
                    sent0 = changes_sent(srv.port) if receiver else 0
                    answered, wrong = writes(srv.port, generator, duration)
                    cpu = cpu_s(srv.proc.pid) - c0
                    wall = time.time() - t0
                    row = {"step": "writes", "round": rnd, "generator": generator, "setup": setup,
                           "answered": answered, "wrong": wrong, "server_cpu_s": cpu, "wall_s": wall,
                           "per_cpu_s": answered / cpu if cpu else None}
                    if receiver:
                        time.sleep(0.5)  # the batch in flight and the one lingering
                        row["changes_received_per_s"] = (changes_sent(srv.port) - sent0) / wall
                    record(row)
                    extra = f", {row['changes_received_per_s']:,.0f} changes/s delivered" if receiver else ""
                    print(f"writes r{rnd} {generator:12s} {setup:5s}: {answered / duration:9,.0f} req/s "
                          f"{row['per_cpu_s']:9,.0f} per server-CPU-s{extra}", flush=True)
                finally:
                    srv.stop()
                    if receiver:
                        receiver.stop()


def hmac_instructions(out_file):
    """Instructions inside the signatures' HMAC-SHA256 in the last callgrind dump. Valgrind runs
    OpenSSL's software SHA-256 (it emulates no SHA instructions): ~29 instructions a byte, where
    this CPU's SHA-NI hashes 1.76 GB/s (openssl speed) — so the summary also gives the counts
    without it, and the hardware cost beside them is a few percent of that."""
    folder = os.path.dirname(out_file)
    dumps = sorted(f for f in os.listdir(folder) if f.startswith(os.path.basename(out_file)))
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", os.path.join(folder, dumps[-1])],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "hmac_sha256_parts(" in line:
            return int(line.split()[0].replace(",", ""))
    return 0


def step_instructions(rounds, duration, record):
    for rnd in range(rounds):
        for setup in SETUPS[rnd % 3:] + SETUPS[:rnd % 3]:
            cg_dir = tempfile.mkdtemp(prefix="percore-cg-")
            out_file = os.path.join(cg_dir, "callgrind.out")
            srv = Server(wrap=("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out_file}"),
                         args=LOOPBACK_RECEIVERS)
            receiver = None
            try:
                receiver = set_up(srv, setup)
                writes(srv.port, "percore-load", 2)
                subprocess.run(["callgrind_control", "-i", "on", str(srv.proc.pid)], check=True, capture_output=True)
                answered, wrong = writes(srv.port, "percore-load", duration)
                instructions = callgrind_total(srv.proc.pid, out_file)
                hmac = hmac_instructions(out_file)
                row = {"step": "instructions", "round": rnd, "generator": "percore-load", "setup": setup,
                       "answered": answered, "wrong": wrong, "instructions": instructions,
                       "instructions_per_write": instructions / answered if answered else None,
                       "hmac_instructions": hmac,
                       "instructions_per_write_without_hmac": (instructions - hmac) / answered if answered else None}
                record(row)
                print(f"instructions r{rnd} {setup:5s}: {answered:,.0f} writes, "
                      f"{row['instructions_per_write']:,.0f} instructions per write "
                      f"({row['instructions_per_write_without_hmac']:,.0f} without the signatures' HMAC)", flush=True)
            finally:
                srv.stop()
                if receiver:
                    receiver.stop()
                shutil.rmtree(cg_dir, ignore_errors=True)


def summarize(rows, steps):
    def med(step, key, **match):
        vals = [r[key] for r in rows if r["step"] == step and all(r.get(k) == v for k, v in match.items())]
        return statistics.median(vals) if vals else float("nan")
    def round_ratios(generator, setup):
        """fast/none or dead/none within each round (minutes apart at most): this VM's speed drifts
        by up to 1.6x across a run, which medians over all rounds fold into the comparison."""
        by_round = {}
        for r in rows:
            if r["step"] == "writes" and r["generator"] == generator:
                by_round.setdefault(r["round"], {})[r["setup"]] = r["per_cpu_s"]
        return [v[setup] / v["none"] for v in by_round.values() if setup in v and v.get("none")]
    for generator in sorted({r["generator"] for r in rows if r["step"] == "writes"}):
        fast, dead = round_ratios(generator, "fast"), round_ratios(generator, "dead")
        print(f"per-round ratios, {generator}: fast receiver {' '.join(f'{x:.3f}' for x in fast)} "
              f"(median {statistics.median(fast):.3f}x); dead receiver {' '.join(f'{x:.3f}' for x in dead)} "
              f"(median {statistics.median(dead):.3f}x)")
        base = med("writes", "per_cpu_s", generator=generator, setup="none")
        print(f"writes per server-CPU-s, {generator}: none {base:,.0f}; "
              f"fast receiver {med('writes', 'per_cpu_s', generator=generator, setup='fast') / base:.3f}x; "
              f"dead receiver {med('writes', 'per_cpu_s', generator=generator, setup='dead') / base:.3f}x; "
              f"delivered {med('writes', 'changes_received_per_s', generator=generator, setup='fast'):,.0f} changes/s")
    if "instructions" in steps:
        base = med("instructions", "instructions_per_write", setup="none")
        print(f"instructions per write: none {base:,.0f}; "
              f"fast {med('instructions', 'instructions_per_write', setup='fast') / base:.3f}x; "
              f"dead {med('instructions', 'instructions_per_write', setup='dead') / base:.3f}x")
        base = med("instructions", "instructions_per_write_without_hmac", setup="none")
        print(f"the same without the HMAC: none {base:,.0f}; "
              f"fast {med('instructions', 'instructions_per_write_without_hmac', setup='fast') / base:.3f}x; "
              f"dead {med('instructions', 'instructions_per_write_without_hmac', setup='dead') / base:.3f}x")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--steps", default="writes,instructions")
    ap.add_argument("--generators", default="percore-load,wrk,wrk-sequential",
                    help="writes step: percore-load and wrk draw keys at random; wrk-sequential writes "
                         "them in turn, so every write is a change of its own to deliver")
    args = ap.parse_args()
    steps = set(args.steps.split(","))
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    run = new_run_id()
    base = {"run": run, "commit": commit, "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
            "command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    rows = []
    with open(run_file("deliveries", run), "a") as out:
        def record(row):
            row = {**base, **row}
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
        if "writes" in steps:
            step_writes(args.rounds, args.duration, record, args.generators.split(","))
        if "instructions" in steps:
            step_instructions(args.rounds, max(args.duration, 5), record)
    rotate("deliveries")
    print(f"run {run} at {commit}")
    summarize(rows, steps)


if __name__ == "__main__":
    main()

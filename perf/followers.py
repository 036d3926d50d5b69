#!/usr/bin/env python3
"""Replication lag of a follower (issue 17, SPEC §10): a primary (--shards 1, durable, CPU 0) and a
follower of it (--shards 1, durable, CPU 1) on loopback, 64 connections writing 16 B values on
the primary (percore-load, CPU 1), and a probe that, every 50 ms, writes one key on the primary
and polls the follower (every 1 ms) until it serves it: the probe's lag is from the primary's
acknowledgement to the follower's first 200. Rounds one after the other; medians over rounds.

Also per round: writes/s the primary acknowledged, the follower's apply rate (changes applied per
second, percore_follower_applied_changes_total) and its largest reported lag in changes.

Then per round, what a primary's death loses (SPEC §10: acknowledged writes not yet copied): the
same 64 writing connections, plus 8 threads writing keys of their own once each and noting which
were acknowledged and when; after 3 s the primary is killed (SIGKILL); once the follower has
applied what it had, the acknowledged keys it lacks are counted, with how long before the kill
the newest and the oldest of them were acknowledged.

Rows (JSON lines with commit, machine and command) go to perf/results/followers/<run id>.jsonl; a summary
is printed. Usage: perf/followers.py [--rounds 3] [--duration 5] [--binary build-release/shards/percore]"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import ROOT, commit, free_port, machine, new_run_id, rotate, run_file, wait_port

PROBE_EVERY_S = 0.05
PROBE_POLL_S = 0.001
PROBE_GIVE_UP_S = 10.0


def start(binary, cpu, port, data, extra=()):
    argv = ["taskset", "-c", str(cpu), binary, "serve", "--listen", f"127.0.0.1:{port}", "--shards", "1",
            "--data", data, *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_port(port)
    return proc


class Client:
    """One kept-alive HTTP/1.1 connection (the probe's; stdlib only, answers framed by Content-Length)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed by the server")
        return data

    def request(self, method, path, body=b""):
        head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\n\r\n"
        self.sock.sendall(head.encode() + body)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.recv()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(rest) < length:
            rest += self.recv()
        self.buf = rest[length:]
        return status, rest[:length]


def metric(port, name):
    _, body = Client(port).request("GET", "/_metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise RuntimeError(f"no {name}")


def probe(primary_port, follower_port, stop, lags, lag_changes, failures):
    """Writes probe keys on the primary and measures when the follower serves each."""
    writer, reader = Client(primary_port), Client(follower_port)
    i = 0
    while not stop.is_set():
        i += 1
        status, _ = writer.request("PUT", f"/probe/p{i}", b"%d" % i)
        acked = time.monotonic()
        if status != 201:
            failures.append(f"probe PUT {status}")
            return
        while True:
            status, _ = reader.request("GET", f"/probe/p{i}")
            if status == 200:
                lags.append((time.monotonic() - acked) * 1000)
                break
            if time.monotonic() - acked > PROBE_GIVE_UP_S:
                failures.append(f"probe p{i} not on the follower after {PROBE_GIVE_UP_S}s")
                return
            time.sleep(PROBE_POLL_S)
        lag_changes.append(metric(follower_port, "percore_follower_lag_changes"))
        time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - acked)))


def acked_writer(port, tag, stop, acked):
    """Writes /loss/{tag}-{n} once each until stopped or refused; notes (key, ack time) of each 201."""
    try:
        c = Client(port)
        n = 0
        while not stop.is_set():
            n += 1
            key = f"{tag}-{n}"
            status, _ = c.request("PUT", f"/loss/{key}", b"v")
            if status != 201:
                return
            acked.append((key, time.monotonic()))
    except OSError:
        return  # the primary was killed


def follower_keys(port, app):
    keys, after = set(), None
    c = Client(port)
    while True:
        status, body = c.request("GET", f"/{app}/?limit=1000" + (f"&after={after}" if after else ""))
        page = json.loads(body)
        keys.update(e["key"] for e in page["keys"])
        after = page["next"]
        if after is None:
            return keys


def loss_round(args, tmp, n):
    pp, fp = free_port(), free_port()
    token = os.path.join(tmp, "token")
    primary = start(args.binary, 0, pp, os.path.join(tmp, f"lp{n}"))
    follower = start(args.binary, 1, fp, os.path.join(tmp, f"lf{n}"),
                     ["--follow", f"http://127.0.0.1:{pp}", "--follow-token-file", token])
    try:
        load = subprocess.Popen(["taskset", "-c", "1", os.path.join(ROOT, "build-release", "perf", "load", "percore-load"),
                                 "--url", f"http://127.0.0.1:{pp}", "--connections", "64", "--mix", "put:100",
                                 "--size", "16", "--keys", "10000", "--app", "bench", "--duration", "10"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stop, acked = threading.Event(), []
        threads = [threading.Thread(target=acked_writer, args=(pp, f"w{i}", stop, acked)) for i in range(8)]
        for t in threads:
            t.start()
        time.sleep(3)
        primary.kill()
        killed = time.monotonic()
        stop.set()
        for t in threads:
            t.join()
        load.kill()
        load.wait()
        time.sleep(1.0)  # the follower applies what it had received
        present = follower_keys(fp, "loss")
        lost = [(k, at) for k, at in acked if k not in present]
        return {"acked": len(acked), "lost": len(lost),
                "lost_newest_ms_before_kill": round((killed - max(at for _, at in lost)) * 1000, 2) if lost else None,
                "lost_oldest_ms_before_kill": round((killed - min(at for _, at in lost)) * 1000, 2) if lost else None}
    finally:
        for p in (follower, primary):
            p.kill()
            p.wait(10)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def one_round(args, tmp, n):
    pp, fp = free_port(), free_port()
    token = os.path.join(tmp, "token")
    with open(token, "w") as f:
        f.write("unused-with-auth-off-on-loopback-0000\n")
    os.chmod(token, 0o600)
    primary = start(args.binary, 0, pp, os.path.join(tmp, f"p{n}"))
    follower = start(args.binary, 1, fp, os.path.join(tmp, f"f{n}"),
                     ["--follow", f"http://127.0.0.1:{pp}", "--follow-token-file", token])
    try:
        Client(pp).request("PUT", "/probe/warm", b"w")
        time.sleep(0.5)
        applied0 = metric(fp, "percore_follower_applied_changes_total")
        stop, lags, lag_changes, failures = threading.Event(), [], [], []
        t = threading.Thread(target=probe, args=(pp, fp, stop, lags, lag_changes, failures))
        load_json = os.path.join(tmp, f"load{n}.json")
        load = [os.path.join(ROOT, "build-release", "perf", "load", "percore-load"), "--url", f"http://127.0.0.1:{pp}",
                "--connections", "64", "--mix", "put:100", "--size", "16", "--keys", "10000", "--app", "bench",
                "--duration", str(args.duration), "--json", load_json]
        began = time.monotonic()
        t.start()
        subprocess.run(["taskset", "-c", "1", *load], check=True, stdout=subprocess.DEVNULL)
        stop.set()
        t.join()
        elapsed = time.monotonic() - began
        applied = metric(fp, "percore_follower_applied_changes_total") - applied0
        with open(load_json) as f:
            writes = json.load(f)
        if failures:
            raise RuntimeError("; ".join(failures))
        return {"probes": len(lags), "lag_p50_ms": round(percentile(lags, 50), 2),
                "lag_p99_ms": round(percentile(lags, 99), 2), "lag_max_ms": round(max(lags), 2),
                "primary_writes_per_s": round(writes.get("requests_per_s", 0)),
                "follower_applied_per_s": round(applied / elapsed),
                "follower_lag_changes_max": max(lag_changes) if lag_changes else 0}
    finally:
        for p in (follower, primary):
            p.terminate()
            p.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build-release", "shards", "percore"))
    ap.add_argument("--out", default=None, help="rows to FILE (default: perf/results/followers/<run id>.jsonl, one file per run)")
    args = ap.parse_args()
    run = new_run_id()
    tmp = tempfile.mkdtemp(prefix="percore-followers-")
    rows = []
    try:
        for n in range(args.rounds):
            row = one_round(args, tmp, n)
            row.update(loss_round(args, tmp, n))
            row.update({"run": run, "round": n, "commit": commit(), "machine": machine(),
                        "command": " ".join(sys.argv), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(args.out or run_file("followers", run), "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    rotate("followers")
    keys = ["lag_p50_ms", "lag_p99_ms", "lag_max_ms", "primary_writes_per_s", "follower_applied_per_s",
            "follower_lag_changes_max", "acked", "lost"]
    print("medians over %d rounds: %s" % (len(rows), {k: statistics.median(r[k] for r in rows) for k in keys}))


if __name__ == "__main__":
    main()

"""What every benchmark script in perf/ shares: server CPU time from /proc, a one-shot HTTP
request over a raw socket, free ports, wrk's report parsed, and the commit and machine a result
is recorded with."""
import os
import platform
import re
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def http(port, method, path, body=b""):
    """One request on its own connection; returns the raw answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    s.sendall(head.encode() + body)
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    s.close()
    return data


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


def commit():
    """The checked-out commit, with -dirty when tracked files differ from it."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head and os.path.exists(os.path.join(ROOT, "COMMIT")):   # a perf/many_core pack
        with open(os.path.join(ROOT, "COMMIT")) as f:
            return f.read().strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head + ("-dirty" if dirty else "")


def machine():
    return f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.release()}"


def parse_wrk(out):
    """wrk's report (run with --latency): requests/s, p50/p90/p99 in µs, and wrong = non-2xx/3xx
    answers plus socket errors (first_wrong names them); answered and duration_s (wrk's own
    run time, which differs from -d when it was stopped early by SIGINT) when it printed them.
    RuntimeError when it printed no rate."""
    m = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if not m:
        raise RuntimeError(f"wrk printed no rate: {out[-300:]}")
    scale = {"us": 1, "ms": 1000, "s": 1e6, "m": 60e6, "h": 3600e6}
    done = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", out, re.M)
    lat = {}
    for pct, key in (("50", "p50"), ("90", "p90"), ("99", "p99")):
        q = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)", out, re.M)
        # 0.00us is no figure: wrk prints it when its coordinated-omission correction moved samples
        # below the smallest one it recorded, out of its percentile's reach (seen when pipelining)
        if q and float(q.group(1)) > 0:
            lat[key] = float(q.group(1)) * scale[q.group(2)]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    wrong = (int(bad.group(1)) if bad else 0) + (sum(int(x) for x in errors.groups()) if errors else 0)
    return {"requests_per_s": float(m.group(1)), "wrong": wrong,
            "first_wrong": (errors.group(0) if errors else bad.group(0) if bad else None), "latency_us": lat,
            "answered": int(done.group(1)) if done else None,
            "duration_s": float(done.group(2)) * scale[done.group(3)] / 1e6 if done else None}

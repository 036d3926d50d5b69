"""What every benchmark script in perf/ shares: server CPU time from /proc, a one-shot HTTP
request over a raw socket, free ports, wrk's report parsed, the commit and machine a result is
recorded with, and where a run's rows go.

Results: one file per run, perf/results/<script>/<run id>.jsonl, written line by line while the run
goes (a run that dies keeps what it measured). A run id starts with its UTC start time, so the
files of a script sort as their runs happened; readers load them in that order. After a run,
rotate() compresses all but the newest PLAIN_RUNS_KEPT of the script's files to <run id>.jsonl.gz
(still read by load_rows), so no tracked file grows and git stores each run once.

`python3 perf/benchlib.py split perf/results/NAME.jsonl [SCRIPT]` moves a results file of the old
kind (every run appended to one file) into per-run files: rows grouped by their `run`, rows
without one (recorded before runs had ids) kept together in <first row's time>-before-run-ids."""
import gzip
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TICKS = os.sysconf("SC_CLK_TCK")
RESULTS = os.path.join(HERE, "results")
# The newest runs of a script left as plain JSON lines: the one just made and the one before it,
# for reading and diffing by hand; older ones are compressed (the rows of one perf/compare run are
# ~180 KiB of JSON and ~12x smaller gzipped).
PLAIN_RUNS_KEPT = 2


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


# A git pathspec: the checkout but its results, which the runs themselves write and rotate()
# compresses (a changed results file says nothing of what was built or run).
NOT_RESULTS = (".", ":(exclude)perf/results")


def commit():
    """The checked-out commit, with -dirty when tracked files (results aside) differ from it."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head and os.path.exists(os.path.join(ROOT, "COMMIT")):   # a perf/many_core pack
        with open(os.path.join(ROOT, "COMMIT")) as f:
            return f.read().strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", *NOT_RESULTS],
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


def new_run_id():
    """A run's id: its UTC start time (sorting as runs happened) and 4 hex digits (two runs in one second)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:4]


def run_file(script, run, results=RESULTS):
    """Where the rows of `script`'s run `run` go (its folder made)."""
    folder = os.path.join(results, script)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{run}.jsonl")


def _run_of(name):
    return name[:-len(".gz")] if name.endswith(".gz") else name


def run_files(script, results=RESULTS):
    """The run files of `script`, plain or compressed, oldest run first."""
    folder = os.path.join(results, script)
    if not os.path.isdir(folder):
        return []
    names = [n for n in os.listdir(folder) if n.endswith(".jsonl") or n.endswith(".jsonl.gz")]
    return [os.path.join(folder, n) for n in sorted(names, key=_run_of)]


def read_rows(path):
    """The rows of one run file, plain or gzipped."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_rows(script, results=RESULTS):
    """Every row `script` recorded, run by run, oldest first."""
    return [row for path in run_files(script, results) for row in read_rows(path)]


def _gzip(path):
    """path -> path.gz, byte for byte the same for the same rows (no name, no time in the header)."""
    with open(path, "rb") as src, open(path + ".gz", "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as dst:
            dst.write(src.read())
    os.remove(path)


def rotate(script, results=RESULTS, keep=PLAIN_RUNS_KEPT):
    """Compresses every plain run file of `script` but the newest `keep`."""
    plain = [p for p in run_files(script, results) if p.endswith(".jsonl")]
    for path in plain[:max(len(plain) - keep, 0)]:
        _gzip(path)


def _stamp(row):
    """A row's recording time as a run id would spell it (20261203T081827), or "" when it has none."""
    when = row.get("time") or row.get("date")
    return re.sub(r"[^0-9T]", "", when.replace(" ", "T"))[:15] if isinstance(when, str) else ""


def split(path, script=None):
    """Moves an old results file (every run appended to it) into per-run files of `script`, each
    line as it was."""
    script = script or os.path.basename(path).rsplit(".", 1)[0]
    results = os.path.dirname(os.path.abspath(path))
    by_run = {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            run = row.get("run")
            if run is None:
                run = by_run.get(None, ((_stamp(row) + "-" if _stamp(row) else "") + "before-run-ids", []))[0]
                by_run.setdefault(None, (run, []))[1].append(line)
            else:
                by_run.setdefault(run, (run, []))[1].append(line)
    for name, lines in by_run.values():
        out = run_file(script, name, results)
        if os.path.exists(out) or os.path.exists(out + ".gz"):
            sys.exit(f"{out}: exists already; not overwritten")
        with open(out, "w") as f:
            f.writelines(lines)
    os.remove(path)
    rotate(script, results)
    print(f"{path}: {sum(len(x) for _, x in by_run.values())} rows in {len(by_run)} run files of {script}/")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or sys.argv[1] != "split":
        sys.exit("usage: python3 perf/benchlib.py split perf/results/NAME.jsonl [SCRIPT]")
    split(*sys.argv[2:])

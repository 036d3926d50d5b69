#!/usr/bin/env python3
"""Instructions per request of percore under valgrind's callgrind: a count, not a time, so that two
builds (e.g. before and after a refactoring) can be compared on this noisy shared VM to well under
2%.

What it measures: the user-space instructions (callgrind's Ir, every thread of the server process:
the shard's loop, its log thread, the main thread) executed while the client sends a FIXED number of
requests, divided by that number. The server is `percore serve --listen 127.0.0.1:0 --shards 1 (--shards N)
--durability sync` in a fresh temporary data directory, auth as its defaults (auto = off on
loopback; were it on, the admin token it writes would be sent), run under

  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=TMP/callgrind.out

One fresh server per workload and round. For each: the documents are written, a warm-up of the same
kind is sent on the connection that will be measured (its buffers have grown, the keys exist, the
code paths have run), then `callgrind_control -i on PID`, the N requests, `callgrind_control -d PID`
(a dump; the total is read from it): instructions per request = total / N. The client is this
script (Python, one connection over 127.0.0.1) and sends without pauses, so instrumentation is on
only around the requests; what else the server does while it is on (its 250 ms tick, one wake-up to
take the control command) is a few thousand instructions in all. Every answer's status is checked
(and a GET's body length): a wrong one fails the run.

Workloads (requests counted by default; warm-up):
  get64        keep-alive GET of a 64 B document (keys k0..k99 in turn), one request at a time
               (5,000; 300)
  pipelined16  the same GETs, 16 written at once, then the 16 answers read; repeated (500 x 16;
               320)
  put16        durable (--durability sync) 16 B PUT replacing one of 1,000 documents (k0..k999 in
               turn; 204), one at a time, each waiting for its answer (2,000; 300)
A round (the three, each on its own server) takes ~10 s here, most of it valgrind's start.

How well it repeats (fd6cfe0, this 2-CPU VM): the GETs to ~0.02% between rounds; put16 to
~0.1-0.3%: how many loop turns, epoll waits and futex waits the hand-off between the shard and its
log thread takes depends on when each fdatasync ends, ~±40 instructions a write. An idle server
costs ~8,000 instructions a second (the tick), a few per request here. docs/perf/instructions.md
has the baseline.

Usage:
  perf/instructions.py --bin BUILD/shards/percore [--rounds 3] [--requests N | NAME=N,...]
                       [--workloads get64,pipelined16,put16] [--label TEXT] [--shards N] [--out FILE.jsonl]
                       [--keep-dumps DIR [--dump-instr]]

With --keep-dumps, perf/instruction_stages.py groups a dump by stage of the hot path (parse,
route, admission, lookup, answer, send, metrics, loop round, store): docs/perf/instructions-budget.md.

Prints one line per round and workload, then a table of the medians with each round and the spread
(max - min over the median); appends one JSON row per round and workload to --out (default
perf/results/instructions/<run id>.jsonl, one file per run) with the commit of the binary's tree (the git checkout holding it;
-dirty when its tracked files differ from that commit, which is then not proof of what was built),
--label, the machine and the valgrind version. The crypto module (only loaded with auth or TLS on)
is taken from beside the binary (BUILD/crypto/percore-crypto.so) through PERCORE_CRYPTO_MODULE.
Temporary directories go under $PERCORE_BENCH_DIR, else the system's (/tmp)."""
import argparse
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True   # no __pycache__ beside benchlib.py and feeds.py
sys.path.insert(0, HERE)
from benchlib import NOT_RESULTS, machine, new_run_id, rotate, run_file  # noqa: E402
from feeds import callgrind_total  # noqa: E402

APP = "bench"
WORKLOADS = {
    # name: (what it is, default requests, warm-up requests)
    "get64": ("keep-alive 64 B GET, one connection, one request at a time", 5000, 300),
    "pipelined16": ("pipelined 64 B GET, one connection, 16 written at once then 16 answers read", 8000, 320),
    "put16": ("durable 16 B PUT (replace, 204), one connection, one at a time", 2000, 300),
}
GET_KEYS, GET_SIZE = 100, 64
PUT_KEYS, PUT_SIZE = 1000, 16
PIPELINE = 16
START_TIMEOUT_S = 120


KEEP_DUMPS = None  # --keep-dumps
SHARDS = 1         # --shards
DUMP_INSTR = False  # --dump-instr


class WrongAnswer(RuntimeError):
    pass


class Server:
    """percore under callgrind (instrumentation off until instrument_on()), one shard, port 0."""

    def __init__(self, binary, workdir):
        self.dir = tempfile.mkdtemp(prefix="percore-instr-", dir=workdir)
        self.data = os.path.join(self.dir, "data")
        self.cg_out = os.path.join(self.dir, "callgrind.out")
        self.log = os.path.join(self.dir, "server.log")
        env = dict(os.environ)
        crypto = os.path.join(os.path.dirname(os.path.dirname(binary)), "crypto", "percore-crypto.so")
        if os.path.exists(crypto):
            env["PERCORE_CRYPTO_MODULE"] = crypto
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={self.cg_out}",
                *(["--dump-instr=yes"] if DUMP_INSTR else []),
                binary, "serve", "--listen", "127.0.0.1:0", "--shards", str(SHARDS), "--durability", "sync",
                "--data", self.data]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env)
        try:
            line = self._first_line()
            m = re.search(rb":(\d+) shards=", line)
            if not m:
                raise RuntimeError(f"percore did not start: {line!r}; {self.tail()}")
            self.port = int(m.group(1))
            token_file = os.path.join(self.data, "admin.token")
            self.token = open(token_file).read().strip() if os.path.exists(token_file) else None
        except BaseException:
            self.stop()
            raise

    def _first_line(self):
        deadline = time.time() + START_TIMEOUT_S
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.time()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"percore printed nothing in {START_TIMEOUT_S} s; {self.tail()}")
            piece = os.read(fd, 4096)
            if not piece:
                break
            line += piece
        return line

    def tail(self):
        try:
            with open(self.log, errors="replace") as f:
                return "server log: " + " | ".join(f.read().splitlines()[-8:])
        except OSError:
            return "no server log"

    def instrument_on(self):
        subprocess.run(["callgrind_control", "-i", "on", str(self.proc.pid)], check=True, capture_output=True)

    def total(self):
        """Dumps the counts since instrument_on() and returns the instructions in the dump."""
        return callgrind_total(self.proc.pid, self.cg_out)

    def keep_dumps(self, folder, name):
        """Copies the callgrind dumps to folder/NAME.N (for callgrind_annotate: where the count goes)."""
        os.makedirs(folder, exist_ok=True)
        for f in sorted(os.listdir(self.dir)):
            if f.startswith("callgrind.out"):
                shutil.copy(os.path.join(self.dir, f), os.path.join(folder, name + f[len("callgrind.out"):]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Client:
    """One keep-alive HTTP/1.1 connection over 127.0.0.1 with Nagle off."""

    def __init__(self, port, token):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = f"Host: 127.0.0.1:{port}\r\n" + (f"Authorization: Bearer {token}\r\n" if token else "")
        self.buf = b""

    def get(self, key):
        return f"GET /{APP}/{key} HTTP/1.1\r\n{self.head}\r\n".encode()

    def put(self, key, body):
        return (f"PUT /{APP}/{key} HTTP/1.1\r\n{self.head}Content-Type: application/octet-stream\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body

    def _more(self):
        piece = self.s.recv(1 << 16)
        if not piece:
            raise WrongAnswer("the server closed the connection")
        self.buf += piece

    def answer(self):
        """(status, body) of the next answer on the connection."""
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._more()
        head = self.buf[:end]
        status = int(head[9:12])
        m = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.I)
        n = int(m.group(1)) if m else 0
        if re.search(rb"\r\nconnection:\s*close", head, re.I):
            raise WrongAnswer(f"the server closes the connection: {head[:200]!r}")
        while len(self.buf) < end + 4 + n:
            self._more()
        body = self.buf[end + 4:end + 4 + n]
        self.buf = self.buf[end + 4 + n:]
        return status, body

    def exchange(self, requests, expect, body_size=None):
        """Sends the requests one at a time, each after the answer to the one before."""
        for req in requests:
            self.s.sendall(req)
            self.check(expect, body_size)

    def pipelined(self, batches, expect, body_size=None):
        """Writes each batch at once, then reads its answers."""
        for batch in batches:
            self.s.sendall(b"".join(batch))
            for _ in batch:
                self.check(expect, body_size)

    def check(self, expect, body_size):
        status, body = self.answer()
        if status not in expect or (body_size is not None and len(body) != body_size):
            raise WrongAnswer(f"status {status} (expected {'/'.join(map(str, expect))}), {len(body)} B body: {body[:120]!r}")

    def close(self):
        self.s.close()


def write_documents(c, keys, size, expect=(201,)):
    c.exchange([c.put(f"k{i}", bytes([97 + i % 26]) * size) for i in range(keys)], expect)


def run_workload(name, binary, workdir, requests, warmup):
    """One fresh server: documents, warm-up, then N requests counted. Returns (instructions, wall_s)."""
    srv = Server(binary, workdir)
    try:
        c = Client(srv.port, srv.token)
        if name in ("get64", "pipelined16"):
            write_documents(c, GET_KEYS, GET_SIZE)
            gets = [c.get(f"k{i % GET_KEYS}") for i in range(max(requests, warmup))]
            if name == "get64":
                c.exchange(gets[:warmup], (200,), GET_SIZE)
                srv.instrument_on()
                t0 = time.time()
                c.exchange(gets[:requests], (200,), GET_SIZE)
            else:
                batches = [gets[i:i + PIPELINE] for i in range(0, len(gets), PIPELINE)]
                c.pipelined(batches[:warmup // PIPELINE], (200,), GET_SIZE)
                srv.instrument_on()
                t0 = time.time()
                c.pipelined(batches[:requests // PIPELINE], (200,), GET_SIZE)
        elif name == "put16":
            write_documents(c, PUT_KEYS, PUT_SIZE)
            warm = [c.put(f"k{i % PUT_KEYS}", b"w%015d" % i) for i in range(warmup)]
            counted = [c.put(f"k{i % PUT_KEYS}", b"v%015d" % i) for i in range(requests)]
            c.exchange(warm, (204,))
            srv.instrument_on()
            t0 = time.time()
            c.exchange(counted, (204,))
        else:
            raise ValueError(name)
        wall = time.time() - t0
        total = srv.total()
        if KEEP_DUMPS:
            srv.keep_dumps(KEEP_DUMPS, name)
        c.close()
        if srv.proc.poll() is not None:
            raise RuntimeError(f"the server exited ({srv.proc.returncode}); {srv.tail()}")
        return total, wall
    finally:
        srv.stop()


def tree_commit(binary):
    """The commit of the git checkout holding the binary, -dirty when its tracked files (results aside) differ."""
    where = os.path.dirname(os.path.realpath(binary))
    git = lambda *a: subprocess.run(["git", "--no-optional-locks", "-C", where, *a], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    top = git("rev-parse", "--show-toplevel")
    return head + ("-dirty" if git("-C", top, "status", "--porcelain", "--untracked-files=no", "--", *NOT_RESULTS) else "")


def parse_requests(text, names):
    counts = {n: WORKLOADS[n][1] for n in names}
    if text is None:
        return counts
    if re.fullmatch(r"\d+", text):
        return {n: int(text) for n in names}
    for part in text.split(","):
        k, _, v = part.partition("=")
        if k not in WORKLOADS or not v.isdigit():
            sys.exit(f"--requests: '{part}' is neither N nor NAME=N (names: {', '.join(WORKLOADS)})")
        counts[k] = int(v)
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the percore binary (BUILD/shards/percore)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", default=None,
                    help="requests counted: N for every workload, or NAME=N,... (default get64=5000, "
                         "pipelined16=8000 (500 x 16), put16=2000); pipelined16 rounds down to a multiple of 16")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up requests (default 300; pipelined16 320)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--keep-dumps", default=None, metavar="DIR",
                    help="copy each workload's callgrind dump to DIR/<workload>.N (the last round's stays)")
    ap.add_argument("--dump-instr", action="store_true",
                    help="counts per machine instruction in the kept dumps (callgrind --dump-instr=yes), for "
                         "reading a hot function against objdump -d; the totals are the same")
    ap.add_argument("--label", default=None, help="recorded in every row (e.g. baseline-fd6cfe0)")
    ap.add_argument("--shards", type=int, default=1,
                    help="the server's --shards (default 1). The one connection lands on one shard; the keys "
                         "are spread over all, so with 2 about half the GETs read another shard's snapshot "
                         "and half the PUTs hop to their owner and back")
    ap.add_argument("--out", default=None, help="rows to FILE (default: perf/results/instructions/<run id>.jsonl, one file per run)")
    args = ap.parse_args()
    global KEEP_DUMPS, SHARDS, DUMP_INSTR
    KEEP_DUMPS = args.keep_dumps
    SHARDS = args.shards
    DUMP_INSTR = args.dump_instr
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary}: not an executable")
    for tool in ("valgrind", "callgrind_control"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing (apt-get install valgrind)")
    names = [n for n in args.workloads.split(",") if n]
    for n in names:
        if n not in WORKLOADS:
            sys.exit(f"unknown workload {n} (known: {', '.join(WORKLOADS)})")
    counts = parse_requests(args.requests, names)
    counts["pipelined16"] = counts.get("pipelined16", 0) // PIPELINE * PIPELINE
    if any(counts[n] <= 0 for n in names):
        sys.exit("--requests: every workload needs at least one request (pipelined16: 16)")
    workdir = os.environ.get("PERCORE_BENCH_DIR") or None

    valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip()
    base = {"run": new_run_id(), "label": args.label, "shards": args.shards, "commit": tree_commit(binary),
            "binary": binary, "machine": machine(), "valgrind": valgrind,
            "command": " ".join(["perf/instructions.py"] + sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print(f"run {base['run']}: {binary} (commit {base['commit']}, label {args.label}), {base['machine']}, {valgrind}",
          flush=True)
    args.out = args.out or run_file("instructions", base["run"])
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    per = {n: [] for n in names}
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for name in names:
                warmup = args.warmup if args.warmup is not None else WORKLOADS[name][2]
                try:
                    total, wall = run_workload(name, binary, workdir, counts[name], warmup)
                except (WrongAnswer, RuntimeError, OSError, subprocess.CalledProcessError) as e:
                    sys.exit(f"round {rnd} {name}: FAILED: {e}")
                row = {**base, "workload": name, "round": rnd, "requests": counts[name], "warmup": warmup,
                       "instructions": total, "per_request": total / counts[name], "counted_wall_s": round(wall, 3)}
                out.write(json.dumps(row) + "\n")
                out.flush()
                per[name].append(row["per_request"])
                print(f"round {rnd} {name:12s} {counts[name]:6d} requests {total:14,d} instructions "
                      f"{row['per_request']:10,.1f} per request ({wall:.1f} s counted)", flush=True)
    print()
    print(f"instructions per request (callgrind Ir, whole server process), {args.rounds} rounds, median:")
    print(f"{'workload':12s} {'requests':>8s} {'median':>10s}   {'rounds':30s} spread")
    for n in names:
        v = per[n]
        med = statistics.median(v)
        spread = (max(v) - min(v)) / med * 100
        print(f"{n:12s} {counts[n]:8d} {med:10,.1f}   {', '.join(f'{x:,.1f}' for x in v):30s} {spread:.3f}%")
    rotate("instructions")
    print(f"rows appended to {args.out}")


if __name__ == "__main__":
    main()

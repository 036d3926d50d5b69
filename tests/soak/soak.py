#!/usr/bin/env python3
"""Soak test for percore: long mixed load with restarts, an exact model of every
acknowledged write, and resource samples (RSS, fds, threads, disk).

usage: tests/soak/soak.py --percore build-release/shards/percore [--minutes 30]
           [--restart-every 4] [--shards 2] [--clients 8] [--keys 2000] [--out FILE]

Not part of CI. Python 3 standard library only; it reuses the raw-socket client
and the server wrapper of tests/integration/percore_client.py.

What it does (design notes in tests/soak/README.md):

* starts `percore serve --listen 127.0.0.1:0 --shards N --data DIR` on its own data
  directory and parses the port from the ready line;
* prefills every key, then runs --clients threads of mixed load on keep-alive
  connections: GET (plain and If-None-Match), PUT (plain, If-Match current ETag,
  If-Match stale ETag, If-None-Match: *, chunked), DELETE (plain, If-Match), list pages;
  small values, 16-64 KiB values and values >= 64 KiB (served with sendfile);
* each key belongs to exactly one client thread, so the model of a key is exact: the
  value/ETag/content type of its last 2xx write, or "absent". A write whose answer never
  came (connection broken, 5xx) is "unknown": the key may hold the old or the new state,
  and the first read in a later server life (or a read that sees the newest candidate)
  settles it. Every answer (status, ETag, body bytes, content type, 412's ETag, list
  pages) is checked against the model; a mismatch is a loss and is printed at once;
* every --restart-every minutes it stops the server under load, alternating SIGTERM
  (must exit 0 within 5 s) and SIGKILL, restarts it on the same data directory (new
  port), pauses the clients and verifies every key (GET), the whole listing and the
  document count of /_stats before load resumes;
* every --sample-every seconds it samples the server's VmRSS, VmHWM, threads, open fds
  (by kind, including fds of deleted files), CPU time, the data directory's disk use,
  /_stats totals, throughput and error counts, as JSON lines in --out;
* at the end it restarts once more (SIGTERM under load), verifies, stops the idle server
  with SIGTERM and prints a markdown summary with a verdict on RSS/fd/disk flatness.

Exit status: 0 when the run was clean (no loss, no crash, every SIGTERM exit 0 within
5 s, no unexpected connection or protocol errors, RSS/fds/disk flat); 1 otherwise; 2 for
bad usage.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import datetime
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import percore_client as pc  # noqa: E402

APP = "soak"
SOCK_TIMEOUT = 30.0          # one request; fsync on a shared disk can be slow, a hang is not
START_TIMEOUT = 60.0         # until the ready line (recovery of the whole data set)
TERM_LIMIT = 5.0             # SPEC section 1
PARK_TIMEOUT = 60.0          # until every client has stopped after a server stop
MIB = 1024 * 1024

ETAG_RE = re.compile(r'^"[^"\s]+"$')
IDENT_RE = re.compile(rb"^soak;(\d+);(\d+);(\d+);")


# --------------------------------------------------------------------------
# values: deterministic from (key index, write sequence, size), so the model keeps no bytes

def value_bytes(idx: int, seq: int, size: int) -> bytes:
    head = b"soak;%d;%d;%d;" % (idx, seq, size)
    if size <= len(head):
        return head[:size]
    fill = hashlib.sha256(head).hexdigest().encode()
    n = size - len(head)
    return head + (fill * (n // len(fill) + 1))[:n]


def describe_body(body: bytes) -> str:
    m = IDENT_RE.match(body)
    if not m:
        return f"{len(body)} unidentified bytes {body[:40]!r}"
    idx, seq, size = (int(g) for g in m.groups())
    intact = len(body) == size and body == value_bytes(idx, seq, size)
    return (f"key#{idx} write seq={seq} size={size} ({len(body)} bytes, "
            f"{'intact' if intact else 'CORRUPT'})")


def pick_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.01:
        return 0
    if r < 0.80:
        return int(2 ** rng.uniform(3, 12))                 # 8 B .. 4 KiB
    if r < 0.93:
        return rng.choice([16384, 65535]) if rng.random() < 0.1 else rng.randint(16384, 65535)
    return 65536 if rng.random() < 0.1 else rng.randint(65536, 262144)   # sendfile path


def pick_ctype(rng: random.Random):
    r = rng.random()
    if r < 0.2:
        return None                                          # server default
    if r < 0.3:
        return "text/plain; charset=utf-8"
    return f"application/x-soak-{rng.randint(0, 4)}"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1024, "M": MIB, "G": 1024 * MIB}[m.group(2)]


def etag_id(etag: str):
    """A compact, exact identity of an ETag for the per-key 'never given before' set."""
    inner = etag[1:-1]
    if re.fullmatch(r"[0-9a-f]{1,16}", inner):
        return int(inner, 16)
    return etag


# --------------------------------------------------------------------------
# the model

class Version:
    __slots__ = ("seq", "size", "ctype", "etag", "why")

    def __init__(self, seq, size, ctype, etag=None):
        self.seq, self.size, self.ctype, self.etag = seq, size, ctype, etag
        self.why = None     # for an unknown write: why ("no answer", "503", ...)

    def __repr__(self):
        return f"seq={self.seq} size={self.size} etag={self.etag or '?'} type={self.ctype!r}"


ABSENT = None      # a candidate state "no document"


def show(c) -> str:
    return "absent" if c is None else repr(c)


class KeyState:
    __slots__ = ("idx", "key", "kbytes", "path", "owner", "cands", "unknown_life", "etags",
                 "history", "next_seq", "poisoned", "absent_why")

    def __init__(self, idx, key, owner):
        self.idx, self.key, self.owner = idx, key, owner
        self.kbytes = key.encode()
        self.path = f"/{APP}/{pc.q(key)}"
        self.cands = [ABSENT]           # possible current states; one = exact
        self.unknown_life = -1          # server life of the newest unknown write
        self.etags = set()              # every ETag acknowledged/seen for this key
        self.history = collections.deque(maxlen=4)   # older ETags, for stale If-Match
        self.next_seq = 1
        self.poisoned = False           # after an unidentifiable mismatch: no more checks
        self.absent_why = None          # why of the newest unknown DELETE

    def exact(self) -> bool:
        return len(self.cands) == 1 and (self.cands[0] is None or self.cands[0].etag is not None)

    def current(self):
        return self.cands[0]

    def set_exact(self, v):
        old = self.cands[0] if len(self.cands) == 1 else None
        if old is not None and old.etag is not None and (v is None or v.etag != old.etag):
            self.history.append(old.etag)
        self.cands = [v]

    def add_unknown(self, v, life, why):
        # a repeated "absent" is kept at both places: a read of "absent" then matches the
        # older one first, and only counts as this write applied when nothing else explains it
        if v is None:
            self.absent_why = why
        else:
            v.why = why
        self.cands.append(v)
        self.unknown_life = life

    def describe(self) -> str:
        return " | ".join(show(c) for c in self.cands)


class Model:
    def __init__(self, nkeys: int, clients: int):
        self.keys = []
        for i in range(nkeys):
            key = f"d{i:05d}" if i % 9 != 4 else f"d{i:05d}/sub ü x"   # '/', space, UTF-8
            self.keys.append(KeyState(i, key, i % clients))
        self.by_key = {ks.key: ks for ks in self.keys}
        self.lock = threading.Lock()
        self.losses = []
        self.loss_kinds = collections.Counter()
        self.problems = collections.Counter()      # non-loss failures by kind
        self.problem_examples = []
        self.stats = collections.Counter()         # unknown writes and how they were settled
        self.sink = None                           # callable(dict) for JSON lines

    # -- reporting
    def loss(self, kind, ks, expected, got, where, life):
        rec = {"type": "loss", "time": time.time(), "life": life, "where": where, "kind": kind,
               "key": ks.key if ks is not None else None, "expected": expected, "got": got}
        with self.lock:
            self.losses.append(rec)
            self.loss_kinds[kind] += 1
            n, first_of_kind = len(self.losses), self.loss_kinds[kind] <= 3
        if n <= 20 or first_of_kind:
            print(f"\n*** LOSS [{kind}] life {life} at {where}: key {rec['key']!r}\n"
                  f"    expected: {expected}\n    got:      {got}", file=sys.stderr, flush=True)
        elif n % 100 == 0:
            print(f"*** {n} losses so far", file=sys.stderr, flush=True)
        if self.sink:
            self.sink(rec)

    def problem(self, kind, detail):
        with self.lock:
            self.problems[kind] += 1
            if self.problems[kind] <= 5:
                self.problem_examples.append(f"{kind}: {detail}")
        if self.problems[kind] <= 3:
            print(f"soak: {kind}: {detail}", file=sys.stderr, flush=True)

    def count(self, name, n=1):
        with self.lock:
            self.stats[name] += n

    # -- resolving candidates
    def _settle(self, ks, i, life, verify):
        """Candidate i was observed. Collapse when that is safe: in a later server life than
        the newest unknown write, or when i is the newest candidate (nothing can follow it)."""
        if len(ks.cands) == 1:
            return
        if verify or life > ks.unknown_life or i == len(ks.cands) - 1:
            newest = ks.cands[-1]
            why = ks.absent_why if newest is None else newest.why
            applied = i == len(ks.cands) - 1
            self.count("unknown_settled_new" if applied else "unknown_settled_old")
            self.count(f"unknown[{why}] {'applied' if applied else 'not applied'}")
            ks.cands = [ks.cands[i]]

    def check_read(self, ks, r, life, where, verify=False) -> str | None:
        """Check a GET answer for ks against the model. Returns 'present'/'absent' or None."""
        if ks.poisoned:
            return None
        if r.status == 404:
            for i, c in enumerate(ks.cands):
                if c is None:
                    self._settle(ks, i, life, verify)
                    return "absent"
            self.loss("read-404", ks, ks.describe(), f"404 {r.body[:80]!r}", where, life)
            ks.cands = [ABSENT]
            return None
        if r.status != 200:
            self.problem("unexpected-status", f"{where} GET {ks.key!r}: {r.status} {r.body[:120]!r}")
            return None
        body, etag, ctype = r.body, r.etag, r.header("content-type")
        for i, c in enumerate(ks.cands):
            if c is None or c.size != len(body) or body != value_bytes(ks.idx, c.seq, c.size):
                continue
            bad, kind = [], None
            if etag is None or not ETAG_RE.match(etag):
                bad.append(f"bad ETag {etag!r}")
                kind = "read-etag"
            elif c.etag is not None and etag != c.etag:
                bad.append(f"ETag {etag} != acknowledged {c.etag}")
                kind = "read-etag"
            elif c.etag is None and etag_id(etag) in ks.etags:
                bad.append(f"ETag {etag} of an unacknowledged write was given to this key before")
                kind = "read-etag"
            if ctype != c.ctype:
                bad.append(f"Content-Type {ctype!r} != {c.ctype!r}")
                kind = kind or "read-content-type"
            if bad:
                self.loss(kind, ks, show(c), "; ".join(bad) + f" (body intact: seq={c.seq})",
                          where, life)
                # follow the server from here on, so one divergence is reported once
                c.ctype = ctype
                if etag and ETAG_RE.match(etag):
                    c.etag = etag
                    ks.etags.add(etag_id(etag))
                ks.cands = [c]
                return None
            if c.etag is None:
                c.etag = etag
                ks.etags.add(etag_id(etag))
            self._settle(ks, i, life, verify)
            return "present"
        got = f"200 {describe_body(body)} etag={etag} type={ctype!r}"
        self.loss("read-value", ks, ks.describe(), got, where, life)
        m = IDENT_RE.match(body)
        if m and int(m.group(1)) == ks.idx and etag and ETAG_RE.match(etag) and \
                body == value_bytes(ks.idx, int(m.group(2)), int(m.group(3))):
            ks.cands = [Version(int(m.group(2)), len(body), ctype, etag)]   # follow the server
        else:
            ks.poisoned = True
        return None

    def new_etag(self, ks, r, life, where) -> str | None:
        """The ETag of a 2xx PUT: well-formed and never given to this key before."""
        etag = r.etag
        if etag is None or not ETAG_RE.match(etag):
            self.loss("write-etag", ks, "a strong quoted ETag", f"{r.status} ETag={etag!r}", where, life)
            return etag
        eid = etag_id(etag)
        if eid in ks.etags:
            self.loss("etag-reused", ks, "an ETag never given to this key before",
                      f"{r.status} ETag={etag} (given before)", where, life)
        ks.etags.add(eid)
        return etag

    def present_keys(self):
        return [ks for ks in self.keys if len(ks.cands) == 1 and ks.cands[0] is not None]


# --------------------------------------------------------------------------
# the server's resources

def proc_sample(pid: int) -> dict | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    out = {}
    for name, key in (("VmRSS", "rss_kib"), ("VmHWM", "hwm_kib"), ("Threads", "threads")):
        m = re.search(rf"^{name}:\s+(\d+)", status, re.M)
        out[key] = int(m.group(1)) if m else None
    fields = stat[stat.rindex(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    out["cpu_s"] = round((int(fields[11]) + int(fields[12])) / tick, 2)
    kinds = collections.Counter()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            kinds["socket"] += 1
        elif target.startswith("anon_inode:") or target.startswith("pipe:"):
            kinds["anon"] += 1
        elif target.endswith(" (deleted)"):
            kinds["deleted"] += 1
        elif target.endswith(".seg"):
            kinds["segment"] += 1
        else:
            kinds["other"] += 1
    out["fds"] = sum(kinds.values())
    out["fd_kinds"] = dict(kinds)
    return out


def disk_usage(path: str) -> dict:
    blocks = apparent = segs = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            blocks += st.st_blocks * 512
            apparent += st.st_size
            segs += name.endswith(".seg")
    return {"disk_bytes": blocks, "apparent_bytes": apparent, "segments": segs}


def server_stats(port: int) -> dict | None:
    try:
        with pc.Conn(port, timeout=10) as c:
            r = c.get("/_stats")
        if r.status != 200:
            return None
        d = r.json()
        sh = d.get("shards", [])
        return {"documents": sum(s.get("documents", 0) for s in sh),
                "live_bytes": sum(s.get("live_bytes", 0) for s in sh),
                "connections": sum(s.get("connections", 0) for s in sh)}
    except (OSError, pc.ConnClosed, ValueError, AssertionError):
        return None


def sample_live_kib(sample: dict) -> float:
    """The live data of a sample in KiB: the server's own figure (/_stats), else the model's."""
    b = sample.get("live_bytes")
    if b is None:
        b = sample.get("live_model_bytes", 0)
    return b / 1024


# --------------------------------------------------------------------------
# clients

CONN_ERRORS = (pc.ConnClosed, OSError, socket.timeout)


class Worker(threading.Thread):
    def __init__(self, soak, wid):
        super().__init__(name=f"client-{wid}", daemon=True)
        self.soak, self.model, self.wid = soak, soak.model, wid
        self.rng = random.Random(soak.args.seed * 1000 + wid)
        self.keys = [ks for ks in self.model.keys if ks.owner == wid]
        self.sorted_keys = sorted(self.keys, key=lambda ks: ks.kbytes)
        self.sorted_kb = [ks.kbytes for ks in self.sorted_keys]
        self.conn = None
        self.conn_life = -1
        self.err_life = None        # life of the last connection error, until parked
        self.sent = False           # whether the last req() sent (part of) its request
        self.err_expected = False
        self.counts = collections.Counter()      # "kind status"
        self.fatal = None

    # -- plumbing
    def drop_conn(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def req(self, method, target, kind, headers=None, body=None, length=None):
        """One request on the keep-alive connection; None when the connection broke."""
        soak = self.soak
        life, port = soak.endpoint
        self.sent = False
        if self.conn is None or self.conn_life != life:
            self.drop_conn()
            try:
                self.conn = pc.Conn(port, timeout=SOCK_TIMEOUT)
                self.conn_life = life
            except CONN_ERRORS as e:
                self.on_conn_error(life, f"connect: {e!r}", sent=False)
                return None
        self.sent = True
        try:
            self.conn.send_request(method, target, headers, body, length=length)
            r = self.conn.read_final(method)
        except CONN_ERRORS as e:
            self.drop_conn()
            self.on_conn_error(life, f"{method} {target[:60]}: {e!r}", sent=True)
            return None
        except AssertionError as e:          # malformed answer
            self.drop_conn()
            self.model.problem("protocol", f"{method} {target[:60]}: {e}")
            self.counts[f"{kind} protocol-error"] += 1
            return None
        self.counts[f"{kind} {r.status}"] += 1
        if r.wants_close:
            self.drop_conn()
        return r

    def on_conn_error(self, life, detail, sent):
        soak = self.soak
        self.err_life = life
        with soak.cond:
            expected = soak.stopping and soak.life == life
        self.err_expected = expected
        if expected:
            soak.count("conn_errors_during_stop")
        else:
            soak.count("conn_errors_unexpected")
            self.model.problem("connection", f"life {life}: {detail}")

    def park(self):
        soak = self.soak
        self.drop_conn()
        with soak.cond:
            soak.parked += 1
            soak.cond.notify_all()
            while not soak.done and (soak.paused or
                                     (self.err_expected and soak.life <= self.err_life)):
                soak.cond.wait(1.0)
            soak.parked -= 1
        self.err_life, self.err_expected = None, False

    def after_op(self):
        if self.err_life is not None:
            if self.err_expected:
                self.park()
            else:
                self.err_life = None
                time.sleep(0.2)

    # -- the loop
    def run(self):
        try:
            self.prefill()
            self.soak.prefill_barrier.wait()
            self.drop_conn()
            while not self.soak.done:
                if self.soak.paused:
                    self.park()
                    continue
                self.one_op()
                self.after_op()
        except threading.BrokenBarrierError:
            pass
        except Exception:
            self.fatal = traceback.format_exc()
            print(f"soak: client {self.wid} died:\n{self.fatal}", file=sys.stderr, flush=True)
            self.soak.count("client_crashes")
            try:
                self.soak.prefill_barrier.abort()
            except Exception:
                pass

    def prefill(self):
        for ks in self.keys:
            while True:
                if self.soak.done:
                    return
                self.put(ks, "prefill")
                if self.err_life is None:
                    break
                self.err_life = None       # the server is not stopped during prefill
                time.sleep(0.5)

    def one_op(self):
        rng = self.rng
        r = rng.random()
        if r < 0.07:
            return self.list_page()
        ks = rng.choice(self.keys)
        if ks.poisoned:
            return
        if not ks.exact():
            # an unknown write is pending: read it back first, or overwrite unconditionally
            if r < 0.6:
                return self.get(ks)
            return self.put(ks, "put") if r < 0.9 else self.delete(ks, "delete")
        cur = ks.current()
        if self.soak.args.plain_writes:
            if r < 0.45:
                return self.get(ks)
            if r < 0.80:
                return self.put(ks, "put")
            if r < 0.83:
                return self.put(ks, "put_chunked")
            return self.delete(ks, "delete")
        if r < 0.40:
            return self.get(ks)
        if r < 0.43 and cur is not None:
            return self.get_inm(ks)
        if r < 0.65:
            return self.put(ks, "put")
        if r < 0.77:
            return self.put(ks, "put_if_match" if cur is not None else "put_inm")
        if r < 0.79:
            return self.put(ks, "put_stale" if ks.history else "put")
        if r < 0.82:
            return self.put(ks, "put_inm")
        if r < 0.84:
            return self.put(ks, "put_chunked")
        if r < 0.97:
            return self.delete(ks, "delete")
        return self.delete(ks, "delete_if_match" if cur is not None else "delete")

    # -- operations
    def get(self, ks):
        life = self.soak.endpoint[0]
        r = self.req("GET", ks.path, "get")
        if r is not None:
            self.model.check_read(ks, r, life, "GET")

    def get_inm(self, ks):
        life = self.soak.endpoint[0]
        cur = ks.current()
        r = self.req("GET", ks.path, "get_inm", headers=[("If-None-Match", cur.etag)])
        if r is None:
            return
        if r.status == 304:
            if r.etag != cur.etag:
                self.model.loss("304-etag", ks, show(cur), f"304 with ETag {r.etag}",
                                "GET If-None-Match", life)
            return
        if r.status == 200 and r.etag == cur.etag:
            self.model.problem("unexpected-status",
                               f"GET If-None-Match {cur.etag} (current) answered 200, not 304")
        self.model.check_read(ks, r, life, "GET If-None-Match")

    def put(self, ks, mode):
        rng, model = self.rng, self.model
        life = self.soak.endpoint[0]
        exact = ks.exact()
        cur = ks.current() if exact else None
        seq = ks.next_seq
        ks.next_seq += 1
        size = pick_size(rng)
        ctype = None if self.soak.args.plain_writes else pick_ctype(rng)
        body = value_bytes(ks.idx, seq, size)
        headers = [] if ctype is None else [("Content-Type", ctype)]
        newv = Version(seq, size, ctype or "application/octet-stream")
        length = None
        if mode == "put_if_match":
            headers.append(("If-Match", cur.etag))
        elif mode == "put_stale":
            stale = ks.history[-1]
            headers.append(("If-Match", stale))
        elif mode == "put_inm" or (mode == "prefill" and not self.soak.args.plain_writes):
            headers.append(("If-None-Match", "*"))
        elif mode == "put_chunked":
            headers.append(("Transfer-Encoding", "chunked"))
            cut = rng.randint(0, len(body))
            body = pc.chunked(body[:cut], body[cut:])
            length = False
        r = self.req("PUT", ks.path, mode, headers=headers, body=body, length=length)
        where = f"PUT {mode} seq={seq}"
        if r is None and not self.sent:
            return                          # never sent: nothing changed
        if r is None or r.status >= 500:
            if r is not None:
                model.problem("5xx", f"life {life} {where} {ks.key!r}: {r.status} {r.body[:100]!r}")
            model.count("unknown_writes")
            ks.add_unknown(newv, life, "no answer" if r is None else str(r.status))
            return
        if r.status in (201, 204):
            if mode == "put_stale":
                model.loss("stale-if-match-succeeded", ks, f"412 (If-Match {stale}, current {show(cur)})",
                           f"{r.status} ETag={r.etag}", where, life)
            elif exact and mode == "put_inm" and cur is not None:
                model.loss("if-none-match-succeeded", ks, f"412 (current {show(cur)})",
                           f"{r.status} ETag={r.etag}", where, life)
            if r.status == 201 and ABSENT not in ks.cands:
                model.loss("write-found-no-document", ks, f"204 (model: {ks.describe()})",
                           "201 Created: the server did not have the document", where, life)
            if r.status == 204 and all(c is None for c in ks.cands):
                model.loss("write-found-document", ks, "201 (model: absent)",
                           "204: the server had a document (resurrection)", where, life)
            newv.etag = model.new_etag(ks, r, life, where)
            ks.set_exact(newv)
            return
        if r.status == 412:
            # a 412 writes nothing: the model stays as it is
            etag = r.etag
            if mode in ("put", "put_chunked"):
                model.loss("412-without-precondition", ks, f"201/204 (model: {ks.describe()})",
                           f"412 current ETag={etag}", where, life)
            elif mode == "put_stale":
                want = cur.etag if cur is not None else None
                if etag != want:
                    model.loss("412-etag", ks, f"412 with ETag {want}", f"412 with ETag {etag}", where, life)
            elif mode in ("put_inm", "prefill") and cur is not None:
                if etag != cur.etag:
                    model.loss("412-etag", ks, f"412 with ETag {cur.etag}", f"412 with ETag {etag}",
                               where, life)
            else:
                model.loss("precondition-failed", ks, f"2xx (model: {show(cur)})",
                           f"412 current ETag={etag}", where, life)
            return
        model.problem("unexpected-status", f"{where} {ks.key!r}: {r.status} {r.body[:120]!r}")
        model.count("unknown_writes")
        ks.add_unknown(newv, life, str(r.status))

    def delete(self, ks, mode):
        model = self.model
        life = self.soak.endpoint[0]
        exact = ks.exact()
        cur = ks.current() if exact else None
        headers = [("If-Match", cur.etag)] if mode == "delete_if_match" else None
        r = self.req("DELETE", ks.path, mode, headers=headers)
        where = f"DELETE {mode}"
        if r is None and not self.sent:
            return
        if r is None or r.status >= 500:
            if r is not None:
                model.problem("5xx", f"life {life} {where} {ks.key!r}: {r.status} {r.body[:100]!r}")
            model.count("unknown_writes")
            ks.add_unknown(ABSENT, life, "no answer" if r is None else str(r.status))
            return
        if r.status == 204:
            if all(c is None for c in ks.cands):
                model.loss("delete-found-document", ks, "404 (model: absent)",
                           "204: the server had a document (resurrection)", where, life)
            ks.set_exact(ABSENT)
            return
        if r.status == 404:
            if ABSENT not in ks.cands:
                model.loss("delete-found-no-document", ks, f"204 (model: {ks.describe()})",
                           "404: the server did not have the document", where, life)
            ks.set_exact(ABSENT)
            return
        if r.status == 412:
            if mode == "delete_if_match":
                model.loss("precondition-failed", ks, f"204 (model: {show(cur)})",
                           f"412 current ETag={r.etag}", where, life)
            else:
                model.loss("412-without-precondition", ks, f"204/404 (model: {ks.describe()})",
                           f"412 current ETag={r.etag}", where, life)
            return
        model.problem("unexpected-status", f"{where} {ks.key!r}: {r.status} {r.body[:120]!r}")
        model.count("unknown_writes")
        ks.add_unknown(ABSENT, life, str(r.status))

    def list_page(self):
        rng, model = self.rng, self.model
        life = self.soak.endpoint[0]
        limit = 20
        after = rng.choice(model.keys).key if rng.random() < 0.8 else None
        prefix = f"d{rng.randrange(len(model.keys)):05d}"[:4] if rng.random() < 0.2 else None
        target = f"/{APP}/?limit={limit}"
        if after is not None:
            target += "&after=" + pc.qv(after)
        if prefix is not None:
            target += "&prefix=" + pc.qv(prefix)
        r = self.req("GET", target, "list")
        if r is None:
            return
        check_page(model, r, limit, after, prefix, self.sorted_keys, self.sorted_kb, life,
                   f"list {target}")


def check_page(model, r, limit, after, prefix, own_sorted, own_kb, life, where):
    """Structure of one list page, and for the keys in own_sorted (not written concurrently)
    that fall inside the page's range: listed exactly when present, with ETag and size.
    Returns (keys, next) or None."""
    if r.status != 200:
        model.problem("unexpected-status", f"{where}: {r.status} {r.body[:120]!r}")
        return None
    try:
        doc = r.json()
        items, nxt = doc["keys"], doc["next"]
        names = [it["key"] for it in items]
    except (ValueError, KeyError, TypeError) as e:
        model.problem("protocol", f"{where}: bad list body ({e}): {r.body[:200]!r}")
        return None
    kb = [n.encode() for n in names]
    bad = []
    if len(items) > limit:
        bad.append(f"{len(items)} keys > limit {limit}")
    if any(a >= b for a, b in zip(kb, kb[1:])):
        bad.append("keys not in strictly increasing byte order")
    if after is not None and kb and kb[0] <= after.encode():
        bad.append(f"first key {names[0]!r} not after {after!r}")
    if prefix is not None and any(not n.startswith(prefix) for n in names):
        bad.append(f"key without prefix {prefix!r}")
    if nxt is not None and (len(items) != limit or nxt != names[-1]):
        bad.append(f"next={nxt!r} with {len(items)} keys (last {names[-1] if names else None!r})")
    if len(items) < limit and nxt is not None:
        bad.append("short page with next")
    if bad:
        model.loss("list-structure", None, "a well-formed page", "; ".join(bad), where, life)
        return None
    listed = {}
    for it in items:
        ks = model.by_key.get(it["key"])
        if ks is None:
            model.loss("list-unknown-key", None, "only keys this run wrote", repr(it)[:200], where, life)
            continue
        listed[it["key"]] = it
    lo = bisect.bisect_right(own_kb, after.encode()) if after is not None else 0
    hi_b = kb[-1] if nxt is not None else None
    for ks in own_sorted[lo:]:
        if hi_b is not None and ks.kbytes > hi_b:
            break
        if prefix is not None and not ks.key.startswith(prefix):
            continue
        if ks.poisoned:
            continue
        it = listed.get(ks.key)
        if it is None:
            if ABSENT not in ks.cands:
                model.loss("list-missing", ks, ks.describe(), "not in the list page", where, life)
            continue
        ok = False
        for c in ks.cands:
            if c is None or c.size != it.get("size"):
                continue
            if c.etag is None or c.etag == it.get("etag"):
                ok = True
                break
        if not ok:
            model.loss("list-entry", ks, ks.describe(),
                       f"listed etag={it.get('etag')} size={it.get('size')}", where, life)
    return names, nxt


# --------------------------------------------------------------------------
# the run

class Soak:
    def __init__(self, args):
        self.args = args
        self.model = Model(args.keys, args.clients)
        self.model.sink = self.emit
        self.cond = threading.Condition()
        self.life = 0
        self.port = None
        self.endpoint = (0, None)    # (life, port), replaced as one for the clients
        self.stopping = False
        self.paused = False
        self.done = False
        self.parked = 0
        self.counters = collections.Counter()
        self.counter_lock = threading.Lock()
        self.prefill_barrier = threading.Barrier(args.clients + 1)
        self.out = open(args.out, "w")
        self.out_lock = threading.Lock()
        base = args.out[:-6] if args.out.endswith(".jsonl") else args.out
        self.server_log = open(base + ".server.log", "w")
        self.srv = None
        self.lives = []          # one dict per server life
        self.samples = []
        self.failures = []       # fatal or non-loss failures (strings)
        self.verify_counts = collections.Counter()
        self.t_start = None
        self.load_seconds = 0.0
        if args.data:
            self.data = os.path.abspath(args.data)
            self.tmp = None
        else:
            self.tmp = tempfile.mkdtemp(prefix="percore-soak-")
            self.data = os.path.join(self.tmp, "data")
        self.workers = []
        self.last_sample = None

    # -- helpers
    def emit(self, rec):
        with self.out_lock:
            self.out.write(json.dumps(rec, default=str) + "\n")
            self.out.flush()

    def count(self, name, n=1):
        with self.counter_lock:
            self.counters[name] += n

    def fail(self, what):
        self.failures.append(what)
        print(f"\n*** FAILURE: {what}", file=sys.stderr, flush=True)
        self.emit({"type": "failure", "time": time.time(), "life": self.life, "what": what})

    def request_counts(self) -> collections.Counter:
        total = collections.Counter()
        for w in self.workers:
            total.update(dict(w.counts))
        return total

    # -- server lives
    def start_server(self):
        env = {}
        if self.args.segment_bytes:
            env["PERCORE_SEGMENT_BYTES"] = str(self.args.segment_bytes)
        t0 = time.monotonic()
        srv = pc.Server(shards=self.args.shards, data=self.data, env=env)
        try:
            srv.wait_ready(timeout=START_TIMEOUT)
        except pc.ServerError as e:
            self.server_log.write(srv.stderr())
            srv.cleanup()
            raise
        ready_s = time.monotonic() - t0
        self.srv = srv
        life = {"life": len(self.lives) + 1, "pid": srv.proc.pid, "port": srv.port,
                "start": time.monotonic(), "ready_s": round(ready_s, 3), "samples": [],
                "end": None, "ended_by": None, "stop_s": None, "rc": None, "verify": None,
                "loaded": False}
        self.lives.append(life)
        self.server_log.write(f"=== life {life['life']} pid {srv.proc.pid}: {srv.ready_line}\n")
        self.server_log.flush()
        self.emit({"type": "start", "time": time.time(), "life": life["life"], "pid": srv.proc.pid,
                   "port": srv.port, "ready_s": life["ready_s"]})
        return life

    def cur_life(self):
        return self.lives[-1]

    def stop_server(self, how):
        """Stop the current server: 'term' (SIGTERM, exit 0 within 5 s), 'kill' (SIGKILL),
        or 'dead' (it already exited on its own). Clients are parked when it returns."""
        srv, life = self.srv, self.cur_life()
        with self.cond:
            self.stopping = True
        t0 = time.monotonic()
        rc = None
        if how == "term":
            srv.proc.send_signal(signal.SIGTERM)
            try:
                rc = srv.proc.wait(timeout=TERM_LIMIT)
            except Exception:
                self.fail(f"life {life['life']}: no exit within {TERM_LIMIT} s of SIGTERM")
                try:
                    rc = srv.proc.wait(timeout=10)
                except Exception:
                    srv.proc.kill()
                    rc = srv.proc.wait()
        elif how == "kill":
            srv.proc.kill()
            rc = srv.proc.wait()
        else:
            rc = srv.proc.wait()
        stop_s = time.monotonic() - t0
        if how == "term" and rc != 0:
            self.fail(f"life {life['life']}: exit status {rc} after SIGTERM (want 0)")
        life.update(end=time.monotonic(), ended_by=how, stop_s=round(stop_s, 3), rc=rc)
        with self.cond:
            self.paused = True
            self.cond.notify_all()
            deadline = time.monotonic() + PARK_TIMEOUT
            while self.parked < self.live_workers() and time.monotonic() < deadline:
                self.cond.wait(0.5)
            parked = self.parked
        if parked < self.live_workers():
            self.fail(f"life {life['life']}: only {parked} of {self.live_workers()} clients stopped "
                      f"within {PARK_TIMEOUT} s of the server's exit")
        if srv._drain:
            srv._drain.join(timeout=2)
        err = srv.stderr()
        self.server_log.write(err)
        self.server_log.write(f"=== life {life['life']} ended by {how}: rc={rc} after {stop_s:.3f} s\n")
        self.server_log.flush()
        srv.cleanup()
        self.srv = None
        self.emit({"type": "stop", "time": time.time(), "life": life["life"], "how": how, "rc": rc,
                   "stop_s": life["stop_s"], "stderr_tail": err[-600:]})
        return rc

    def live_workers(self):
        return sum(1 for w in self.workers if w.is_alive())

    def resume(self):
        with self.cond:
            self.life += 1
            self.port = self.srv.port
            self.endpoint = (self.life, self.port)
            self.stopping = False
            self.paused = False
            self.cond.notify_all()

    # -- verification (clients parked)
    def verify(self, life_rec):
        model, life = self.model, self.life + 1      # the new life (not yet published)
        port = self.srv.port
        t0 = time.monotonic()
        counts = collections.Counter()
        before_unknown = sum(1 for ks in model.keys if len(ks.cands) > 1 or
                             (ks.cands[0] is not None and ks.cands[0].etag is None))
        losses_before = len(model.losses)
        nthreads = max(1, min(4, self.args.clients))
        parts = [model.keys[i::nthreads] for i in range(nthreads)]

        def run(keys):
            conn = None
            for ks in keys:
                for attempt in range(3):
                    try:
                        if conn is None:
                            conn = pc.Conn(port, timeout=SOCK_TIMEOUT)
                        r = conn.get(ks.path)
                        if r.wants_close:
                            conn.close()
                            conn = None
                        break
                    except (CONN_ERRORS + (AssertionError,)) as e:
                        if conn is not None:
                            conn.close()
                        conn = None
                        r = None
                        err = e
                if r is None:
                    model.problem("verify", f"life {life}: could not read {ks.key!r}: {err!r}")
                    counts["unreadable"] += 1
                    continue
                res = model.check_read(ks, r, life, "verify after restart", verify=True)
                counts[res or "mismatch"] += 1
            if conn is not None:
                conn.close()

        threads = [threading.Thread(target=run, args=(p,), daemon=True) for p in parts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.verify_counts["get"] += sum(counts.values())

        # the whole listing against the model
        listed = 0
        after = None
        all_sorted = sorted(model.keys, key=lambda ks: ks.kbytes)
        all_kb = [ks.kbytes for ks in all_sorted]
        try:
            with pc.Conn(port, timeout=SOCK_TIMEOUT) as c:
                while True:
                    target = f"/{APP}/?limit=1000" + ("" if after is None else "&after=" + pc.qv(after))
                    r = c.get(target)
                    self.verify_counts["list"] += 1
                    res = check_page(model, r, 1000, after, None, all_sorted, all_kb, life,
                                     "verify listing")
                    if res is None:
                        break
                    names, nxt = res
                    listed += len(names)
                    if nxt is None:
                        break
                    after = nxt
        except (CONN_ERRORS + (AssertionError,)) as e:
            model.problem("verify", f"life {life}: listing failed: {e!r}")
        present = len(model.present_keys())
        st = server_stats(port)
        docs = st["documents"] if st else None
        if docs is not None and docs != present:
            model.loss("document-count", None, f"{present} documents (model)",
                       f"/_stats documents={docs}", "verify after restart", life)
        after_unknown = sum(1 for ks in model.keys if len(ks.cands) > 1 or
                            (ks.cands[0] is not None and ks.cands[0].etag is None))
        v = {"keys": sum(counts.values()), "present": counts["present"], "absent": counts["absent"],
             "mismatch": counts["mismatch"], "unreadable": counts["unreadable"],
             "unknown_before": before_unknown, "unknown_after": after_unknown,
             "listed": listed, "stats_documents": docs, "model_present": present,
             "losses": len(model.losses) - losses_before,
             "seconds": round(time.monotonic() - t0, 2)}
        life_rec["verify"] = v
        self.emit({"type": "verify", "time": time.time(), "life": life, **v})
        print(f"soak: life {life}: verified {v['keys']} keys ({v['present']} present, "
              f"{v['absent']} deleted, {before_unknown} had unknown writes), listing {listed}, "
              f"/_stats documents {docs}, {v['losses']} losses, {v['seconds']} s", flush=True)

    # -- samples
    def sample(self, final=False):
        life = self.cur_life()
        srv = self.srv
        if srv is None:
            return
        now = time.monotonic()
        p = proc_sample(srv.proc.pid)
        if p is None:
            return
        rec = {"type": "sample", "time": time.time(), "t": round(now - self.t_start, 1),
               "life": life["life"], "age": round(now - life["start"], 1), "final": final, **p}
        rec.update(disk_usage(self.data))
        st = server_stats(srv.port)
        if st:
            rec.update(st)
        counts = self.request_counts()
        total = sum(counts.values())
        with self.counter_lock:
            rec["conn_errors_unexpected"] = self.counters["conn_errors_unexpected"]
            rec["conn_errors_during_stop"] = self.counters["conn_errors_during_stop"]
        rec["requests"] = total
        rec["errors_5xx"] = sum(n for k, n in counts.items() if k.split()[-1].startswith("5"))
        rec["unknown_writes"] = self.model.stats["unknown_writes"]
        rec["losses"] = len(self.model.losses)
        if self.last_sample is not None and self.last_sample[2] == life["life"]:
            dt = now - self.last_sample[0]
            rec["rps"] = round((total - self.last_sample[1]) / dt, 1) if dt > 0 else None
        self.last_sample = (now, total, life["life"])
        rec["live_model_bytes"] = self.live_bytes()
        life["samples"].append(rec)
        self.samples.append(rec)
        self.emit(rec)
        if not final:
            print(f"soak: t={rec['t']:6.0f}s life {life['life']} age {rec['age']:4.0f}s "
                  f"rss {p['rss_kib'] / 1024:6.1f} MiB fds {p['fds']:3d} thr {p['threads']} "
                  f"disk {rec['disk_bytes'] / MIB:6.1f} MiB segs {rec['segments']} rps {rec.get('rps') or 0:6.0f} "
                  f"losses {rec['losses']}", flush=True)

    def live_bytes(self):
        """Bytes of live values in the model (for an uncertain key: its oldest candidate,
        the last state known before the unanswered writes)."""
        return sum(ks.cands[0].size for ks in self.model.keys if ks.cands[0] is not None)

    # -- main
    def run(self):
        a = self.args
        print(f"soak: percore {a.percore}, data {self.data}, {a.minutes} min, restart every "
              f"{a.restart_every} min, {a.shards} shards, {a.clients} clients, {a.keys} keys, "
              f"segments {a.segment_bytes or 'default'}, seed {a.seed}; samples -> {a.out}",
              flush=True)
        self.emit({"type": "config", "time": time.time(), **{k: v for k, v in vars(a).items()},
                   "data": self.data})
        self.start_server()
        self.life = 1
        self.port = self.srv.port
        self.endpoint = (self.life, self.port)
        self.cur_life()["loaded"] = True
        self.workers = [Worker(self, i) for i in range(a.clients)]
        for w in self.workers:
            w.start()
        t_pre = time.monotonic()
        try:
            self.prefill_barrier.wait(timeout=900)
        except threading.BrokenBarrierError:
            self.fail("prefill did not finish (a client died or it took over 15 min)")
            return self.finish(aborted=True)
        print(f"soak: prefilled {a.keys} keys in {time.monotonic() - t_pre:.1f} s", flush=True)
        self.t_start = time.monotonic()
        self.cur_life()["start"] = self.t_start
        end = self.t_start + a.minutes * 60
        period = a.restart_every * 60
        next_restart = self.t_start + period
        next_sample = self.t_start + a.sample_every
        kinds = ["term", "kill"]
        nrestart = 0
        load_start = self.t_start
        aborted = False
        try:
            while True:
                now = time.monotonic()
                if self.srv.proc.poll() is not None:
                    rc = self.srv.proc.returncode
                    self.fail(f"life {self.cur_life()['life']}: the server exited on its own "
                              f"(rc={rc}) under load")
                    self.load_seconds += now - load_start
                    self.stop_server("dead")
                    if not self.restart_and_verify():
                        aborted = True
                        break
                    load_start = time.monotonic()
                    next_sample = load_start + a.sample_every
                    continue
                if any(w.fatal for w in self.workers):
                    self.fail("a client thread died (see stderr)")
                if now >= end or (now >= next_restart and next_restart < end - 5):
                    how = kinds[nrestart % 2]
                    nrestart += 1
                    self.sample(final=True)
                    self.load_seconds += time.monotonic() - load_start
                    print(f"soak: t={now - self.t_start:.0f}s stopping life {self.cur_life()['life']} "
                          f"with {'SIGTERM' if how == 'term' else 'SIGKILL'} under load", flush=True)
                    self.stop_server(how)
                    last = now >= end
                    if not self.restart_and_verify(resume=not last):
                        aborted = True
                        break
                    if last:
                        break
                    load_start = time.monotonic()
                    next_restart = load_start + period
                    next_sample = load_start + a.sample_every
                    continue
                if now >= next_sample:
                    self.sample()
                    next_sample += a.sample_every
                    if next_sample < time.monotonic():
                        next_sample = time.monotonic() + a.sample_every
                time.sleep(0.25)
        except KeyboardInterrupt:
            self.fail("interrupted")
            aborted = True
        return self.finish(aborted)

    def restart_and_verify(self, resume=True) -> bool:
        try:
            life = self.start_server()
        except pc.ServerError as e:
            hung = "no ready line" in str(e)
            self.fail(f"restart on the same data failed" +
                      (f" (the server was still running after {START_TIMEOUT:g} s without its "
                       f"ready line, and was killed)" if hung else "") + f": {e}")
            return False
        self.verify(life)
        if resume:
            life["loaded"] = True
            life["start"] = time.monotonic()
            self.resume()
            self.sample()
        else:
            with self.cond:
                self.life += 1
                self.port = self.srv.port
                self.endpoint = (self.life, self.port)
        return True

    def finish(self, aborted):
        with self.cond:
            self.done = True
            self.paused = True
            self.cond.notify_all()
        for w in self.workers:
            w.join(timeout=SOCK_TIMEOUT + 5)
        if self.srv is not None:
            srv, life = self.srv, self.cur_life()
            t0 = time.monotonic()
            srv.proc.send_signal(signal.SIGTERM)
            try:
                rc = srv.proc.wait(timeout=TERM_LIMIT)
            except Exception:
                srv.proc.kill()
                rc = srv.proc.wait()
                self.fail(f"final idle server: no exit within {TERM_LIMIT} s of SIGTERM")
            stop_s = time.monotonic() - t0
            if rc != 0 and not aborted:
                self.fail(f"final idle server: exit status {rc} after SIGTERM")
            life.update(end=time.monotonic(), ended_by="term (idle, end)", stop_s=round(stop_s, 3), rc=rc)
            self.server_log.write(srv.stderr())
            self.server_log.write(f"=== life {life['life']} ended by SIGTERM at the end: rc={rc}\n")
            srv.cleanup()
            self.srv = None
        for w in self.workers:
            if w.fatal:
                self.failures.append(f"client {w.wid} died: {w.fatal.strip().splitlines()[-1]}")
        summary, verdict_ok = self.summary(aborted)
        print(summary, flush=True)
        self.emit({"type": "summary", "time": time.time(), "markdown": summary})
        self.out.close()
        self.server_log.close()
        clean = verdict_ok and not aborted
        if self.tmp is not None:
            if clean and not self.args.keep_data:
                shutil.rmtree(self.tmp, ignore_errors=True)
            else:
                print(f"soak: data directory kept: {self.data}", file=sys.stderr)
        return 0 if clean else 1

    # -- the report
    def summary(self, aborted):
        a, model = self.args, self.model
        counts = self.request_counts()
        by_kind = collections.Counter()
        by_status = collections.defaultdict(collections.Counter)
        for k, n in counts.items():
            kind, status = k.rsplit(" ", 1)
            by_kind[kind] += n
            by_status[kind][status] += n
        total = sum(by_kind.values())
        load_s = max(self.load_seconds, 1e-9)
        wall_s = (time.monotonic() - self.t_start) if self.t_start else 0
        lives = self.lives
        ended = [l for l in lives if l["ended_by"] in ("term", "kill", "dead")]
        terms = [l for l in ended if l["ended_by"] == "term"]
        kills = [l for l in ended if l["ended_by"] == "kill"]
        crashes = [l for l in ended if l["ended_by"] == "dead"]

        L = []
        L.append(f"## percore soak, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}")
        L.append("")
        L.append(f"`tests/soak/soak.py --minutes {a.minutes:g} --restart-every {a.restart_every:g} "
                 f"--shards {a.shards} --clients {a.clients} --keys {a.keys} --seed {a.seed}"
                 f"{' --plain-writes' if a.plain_writes else ''}` "
                 f"(segments {a.segment_bytes or 'default'}), binary `{a.percore}`"
                 + ("  **(ABORTED)**" if aborted else ""))
        L.append("")
        L.append("| | |")
        L.append("|---|---|")
        L.append(f"| duration | {wall_s / 60:.1f} min wall, {load_s / 60:.1f} min under load "
                 f"(restarts and verification excluded) |")
        L.append(f"| requests | {total} under load ({total / load_s:.0f}/s) + "
                 f"{self.verify_counts['get']} verification GETs, {self.verify_counts['list']} "
                 f"verification list pages |")
        order = ["prefill", "get", "get_inm", "put", "put_if_match", "put_stale", "put_inm",
                 "put_chunked", "delete", "delete_if_match", "list"]
        kinds = [k for k in order if k in by_kind] + sorted(k for k in by_kind if k not in order)
        for k in kinds:
            st = ", ".join(f"{s}: {n}" for s, n in sorted(by_status[k].items()))
            L.append(f"| &nbsp; {k} | {by_kind[k]} ({st}) |")
        with self.counter_lock:
            ce_stop = self.counters["conn_errors_during_stop"]
            ce_unexp = self.counters["conn_errors_unexpected"]
        n5 = sum(n for k, n in counts.items() if k.split()[-1].startswith("5"))
        L.append(f"| errors | {ce_stop} connection errors while a server was being stopped "
                 f"(expected); {ce_unexp} unexpected connection errors; {n5} 5xx answers; "
                 f"other problems: {dict(model.problems) or 'none'} |")
        why = "; ".join(f"{k[len('unknown'):]}: {n}" for k, n in sorted(model.stats.items())
                        if k.startswith("unknown["))
        L.append(f"| unknown writes | {model.stats['unknown_writes']} writes without a 2xx/4xx answer "
                 f"(connection broke, or 5xx); settled by a later read as applied: "
                 f"{model.stats['unknown_settled_new']}, as not applied: "
                 f"{model.stats['unknown_settled_old']}" + (f" ({why})" if why else "") + " |")
        stop_max = max((l["stop_s"] for l in terms), default=None)
        L.append(f"| restarts | {len(ended)}: {len(terms)} SIGTERM under load "
                 f"({sum(1 for l in terms if l['rc'] == 0 and l['stop_s'] <= TERM_LIMIT)} exited 0 "
                 f"within {TERM_LIMIT:g} s, slowest {stop_max if stop_max is not None else '-'} s), "
                 f"{len(kills)} SIGKILL, {len(crashes)} unexpected exits; "
                 f"ready after restart in at most "
                 f"{max((l['ready_s'] for l in lives[1:]), default=0):.2f} s |")
        L.append(f"| losses | **{len(model.losses)}** |")
        L.append("")
        L.append("Per server life (RSS and fds: samples after the warm-up of "
                 f"{self.warmup_s():.0f} s; verify = the check of every key right after that life "
                 "started on the previous life's data):")
        L.append("")
        L.append("| life | ended by | under load | verified at start (present/deleted/unknown before) "
                 "| RSS first / last / max MiB | VmHWM MiB | fds min / max (deleted) | threads "
                 "| disk at end MiB (segments) | live data MiB |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        flat = self.flatness()
        for l in lives:
            v = l["verify"]
            vs = (f"{v['keys']} ({v['present']}/{v['absent']}/{v['unknown_before']}), "
                  f"{v['losses']} losses" if v else "- (fresh)")
            s = self.post_warmup(l)
            if s:
                rss = [x["rss_kib"] / 1024 for x in s]
                fds = [x["fds"] for x in s]
                dele = max(x["fd_kinds"].get("deleted", 0) for x in s)
                rs = f"{rss[0]:.1f} / {rss[-1]:.1f} / {max(rss):.1f}"
                hwm = f"{max(x['hwm_kib'] for x in s) / 1024:.1f}"
                fs = f"{min(fds)} / {max(fds)} ({dele})"
                th = f"{min(x['threads'] for x in s)}-{max(x['threads'] for x in s)}"
            else:
                rs = hwm = fs = th = "-"
            last = l["samples"][-1] if l["samples"] else None
            disk = (f"{last['disk_bytes'] / MIB:.1f} ({last['segments']})" if last else "-")
            live = f"{last['live_model_bytes'] / MIB:.1f}" if last else "-"
            dur = ((l["end"] or time.monotonic()) - l["start"]) if l["loaded"] else 0
            how = l["ended_by"] or "-"
            if l["ended_by"] == "term":
                how = f"SIGTERM: rc {l['rc']} in {l['stop_s']:.2f} s"
            elif l["ended_by"] == "kill":
                how = "SIGKILL"
            elif l["ended_by"] == "dead":
                how = f"**exited on its own rc {l['rc']}**"
            elif l["ended_by"]:
                how = f"{l['ended_by']}: rc {l['rc']} in {l['stop_s']:.2f} s"
            L.append(f"| {l['life']} | {how} | {dur:.0f} s | {vs} | {rs} | {hwm} | {fs} | {th} | "
                     f"{disk} | {live} |")
        L.append("")
        L.append("Verdict (criteria):")
        L.append("")
        for line in flat["lines"]:
            L.append(f"- {line}")
        if model.losses:
            L.append("")
            L.append("Losses by kind (first example of each):")
            L.append("")
            L.append("| kind | count | first: where | expected | got |")
            L.append("|---|---|---|---|---|")
            seen = set()
            for x in model.losses:
                if x["kind"] in seen:
                    continue
                seen.add(x["kind"])
                cell = lambda t: str(t).replace("|", "\\|")[:160]
                L.append(f"| {x['kind']} | {model.loss_kinds[x['kind']]} | life {x['life']} "
                         f"{cell(x['where'])}, key {x['key']!r} | {cell(x['expected'])} | "
                         f"{cell(x['got'])} |")
            L.append("")
            L.append("Losses (first 20):")
            L.append("")
            for x in model.losses[:20]:
                L.append(f"- life {x['life']} {x['where']} [{x['kind']}] key {x['key']!r}: "
                         f"expected {x['expected']}; got {x['got']}")
            if len(model.losses) > 20:
                L.append(f"- ... {len(model.losses) - 20} more in {a.out}")
        if model.problem_examples:
            L.append("")
            L.append("Other problems (first 5 of each kind):")
            L.append("")
            for x in model.problem_examples[:30]:
                L.append(f"- {x}")
        if self.failures:
            L.append("")
            L.append("Failures:")
            L.append("")
            for x in self.failures:
                L.append(f"- {x}")
        ok = (not model.losses and not self.failures and flat["ok"] and ce_unexp == 0
              and not model.problems)
        L.append("")
        L.append(f"**Result: {'PASS' if ok else 'FAIL'}** "
                 f"({len(model.losses)} losses, {len(self.failures)} failures, "
                 f"{sum(model.problems.values())} other problems, flat: {'yes' if flat['ok'] else 'no'})")
        return "\n".join(L), ok

    def warmup_s(self):
        if self.args.warmup is not None:
            return self.args.warmup
        return min(60.0, self.args.restart_every * 60 / 3)

    def post_warmup(self, life):
        if not life["loaded"]:
            return []
        w = self.warmup_s()
        return [s for s in life["samples"] if s["age"] >= w]

    def flatness(self):
        """RSS: in every life, the highest sample of the second half after warm-up is at most
        max(10%, 2 MiB) above the highest of the first half, plus however much the live data's
        own peak rose between the halves (RSS follows the live data, which swings by 3-6 MiB
        within a life under this load, and glibc keeps freed memory: a leak raises the peaks
        whatever the live data does, a swing does not); across lives the per-life maximum does
        not grow monotonically by more than that. fds: in every life, last <= first + 8; across lives the per-life
        maximum stays within first life's + 8; fds of deleted files never more than
        2 per shard. Disk: at the end of every life, disk use <= 2 x live data +
        (2 x shards + 1) segments + 4 MiB."""
        lines, ok = [], True
        a = self.args
        per = [(l, self.post_warmup(l)) for l in self.lives]
        per = [(l, s) for l, s in per if len(s) >= 2]
        if not per:
            return {"ok": True, "lines": ["not enough samples after warm-up to judge flatness "
                                          "(lives too short for the sample interval)"]}
        bad = []
        halves = []
        for l, s in per:
            h1, h2 = s[:len(s) // 2], s[len(s) // 2:]
            peak1, peak2 = max(x["rss_kib"] for x in h1), max(x["rss_kib"] for x in h2)
            live1 = max(sample_live_kib(x) for x in h1)
            live2 = max(sample_live_kib(x) for x in h2)
            allowed = max(peak1 * 0.10, 2048) + max(0.0, live2 - live1)
            halves.append(f"{peak1 / 1024:.1f}->{peak2 / 1024:.1f}")
            if peak2 > peak1 + allowed:
                bad.append(f"life {l['life']}: peak {peak1 / 1024:.1f} -> {peak2 / 1024:.1f} MiB "
                           f"(live data peak {live1 / 1024:.1f} -> {live2 / 1024:.1f} MiB)")
        maxes = [max(x["rss_kib"] for x in s) for _, s in per]
        mono = len(maxes) >= 3 and all(b > a_ for a_, b in zip(maxes, maxes[1:])) and \
            maxes[-1] > maxes[0] + max(maxes[0] * 0.10, 2048)
        rss_ok = not bad and not mono
        ok &= rss_ok
        lines.append(f"RSS flat: **{'yes' if rss_ok else 'NO'}**. Criterion: in each life the highest "
                     f"sample of the second half after warm-up is at most max(10%, 2 MiB) above the "
                     f"highest of the first half, plus the rise of the live data's peak between the "
                     f"halves; and the per-life maximum does not rise in every life by more than "
                     f"max(10%, 2 MiB) in total. Peaks per life, first half -> second half MiB: "
                     f"{', '.join(halves)}. Per-life max "
                     f"MiB: {', '.join(f'{m / 1024:.1f}' for m in maxes)}"
                     + (f". Grew: {'; '.join(bad)}" if bad else "")
                     + (". Monotonic growth across lives." if mono else ""))
        bad = []
        for l, s in per:
            if s[-1]["fds"] > s[0]["fds"] + 8:
                bad.append(f"life {l['life']}: {s[0]['fds']} -> {s[-1]['fds']}")
        fmax = [max(x["fds"] for x in s) for _, s in per]
        across = [m for m in fmax[1:] if m > fmax[0] + 8]
        deleted = max(x["fd_kinds"].get("deleted", 0) for _, s in per for x in s)
        fd_ok = not bad and not across and deleted <= 2 * a.shards
        ok &= fd_ok
        lines.append(f"fds flat: **{'yes' if fd_ok else 'NO'}**. Criterion: in each life the last "
                     f"sample after warm-up has at most 8 more open fds than the first (client "
                     f"sockets and segments come and go), no life's maximum exceeds the first "
                     f"life's by more than 8, and at most 2 per shard are fds of deleted files "
                     f"(segments compacted away but still held). Per-life max: "
                     f"{', '.join(map(str, fmax))}; most deleted-file fds: {deleted}"
                     + (f". Grew: {'; '.join(bad)}" if bad else ""))
        seg = a.segment_bytes or 64 * MIB
        bad = []
        disks = []
        for l in self.lives:
            if not l["samples"] or not l["loaded"]:
                continue
            s = l["samples"][-1]
            bound = 2 * s["live_model_bytes"] + (2 * a.shards + 1) * seg + 4 * MIB
            disks.append(f"{s['disk_bytes'] / MIB:.0f}")
            if s["disk_bytes"] > bound:
                bad.append(f"life {l['life']}: {s['disk_bytes'] / MIB:.1f} MiB > {bound / MIB:.1f} MiB")
        disk_ok = not bad
        ok &= disk_ok
        lines.append(f"disk bounded: **{'yes' if disk_ok else 'NO'}**. Criterion: at the end of "
                     f"each life, disk use <= 2 x live data + (2 x shards + 1) x segment size "
                     f"+ 4 MiB. Disk at the end of each life MiB: {', '.join(disks)}"
                     + (f". Over: {'; '.join(bad)}" if bad else ""))
        return {"ok": ok, "lines": lines}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--percore", required=True, help="the percore binary")
    ap.add_argument("--minutes", type=float, default=30.0, help="load duration (default 30)")
    ap.add_argument("--restart-every", type=float, default=4.0,
                    help="minutes between restarts, alternating SIGTERM and SIGKILL (default 4)")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--out", default="/tmp/percore-soak.jsonl",
                    help="JSON lines of samples and events (default /tmp/percore-soak.jsonl); "
                         "the servers' stderr goes next to it as .server.log")
    ap.add_argument("--sample-every", type=float, default=10.0, help="seconds (default 10)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds of each life not judged for flatness "
                         "(default min(60, a third of --restart-every))")
    ap.add_argument("--segment-bytes", type=parse_size, default=parse_size("8M"),
                    help="PERCORE_SEGMENT_BYTES for the server, so compaction runs during the soak "
                         "(default 8M; 0 = the server's default)")
    ap.add_argument("--data", default=None, help="data directory (default: a fresh temporary one)")
    ap.add_argument("--keep-data", action="store_true", help="keep the temporary data directory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plain-writes", action="store_true",
                    help="PUTs without Content-Type and no conditional requests at all: a control "
                         "run that cannot see header mix-ups between connections, so any other "
                         "loss stands out")
    a = ap.parse_args(argv)
    if not os.access(a.percore, os.X_OK):
        ap.error(f"no executable percore at {a.percore}")
    if a.clients < 1 or a.keys < a.clients or a.shards < 1 or a.minutes <= 0 or a.restart_every <= 0:
        ap.error("need --clients >= 1, --keys >= --clients, --shards >= 1, positive durations")
    os.environ["PERCORE_BIN"] = os.path.abspath(a.percore)
    a.percore = os.path.abspath(a.percore)
    return Soak(a).run()


if __name__ == "__main__":
    sys.exit(main())

"""Hostile load (SPEC §3 "Bad input is answered, not obeyed", §1 --max-connections,
--body-budget, --idle-timeout): slowloris connections, a connection flood (past
--max-connections, and past the process's open-file limit), the body budget exhausted by
concurrent uploads, and garbage on many connections at once. Each test starts its
own server with the options it needs, runs for a bounded time and checks that the server stays
up and keeps serving normal clients correctly.

The machine these tests run on may be small and shared, so latency is only ever compared with a
baseline measured in the same test, and every wait has a deadline.

Run alone as a script with `slowloris PORT COUNT PERIOD LIMIT` it is the slowloris client used
by TestSlowloris (a separate process, so that its work never holds the measuring client's GIL).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from percore_client import (env_shards, percore_bin, run_cli, sanitized_build, start_server, stats_total, unique,
                            wait_until)

MiB = 1 << 20
KiB = 1 << 10


# --------------------------------------------------------------------------------------------
# helpers


def raise_nofile_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit; servers started afterwards inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def proc_limit_nofile(pid: int) -> int:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError(f"no open-file limit in /proc/{pid}/limits")


def p99(samples: list[float]) -> float:
    s = sorted(samples)
    return s[max(0, -(-len(s) * 99 // 100) - 1)]


STATUS_RE = re.compile(rb"^HTTP/1\.[01] (\d{3})")


def parse_responses(data: bytes):
    """Splits bytes a server sent into responses: a list of (status, headers dict (lower-case
    names; last value wins), body). Raises ValueError on anything that is not a complete
    HTTP/1.1 response with a Content-Length (percore's error answers all have one)."""
    out = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            raise ValueError(f"incomplete response head: {data[:200]!r}")
        lines = data[:end].split(b"\r\n")
        m = STATUS_RE.match(lines[0])
        if not m:
            raise ValueError(f"malformed status line: {lines[0][:200]!r}")
        headers = {}
        for line in lines[1:]:
            k, sep, v = line.partition(b":")
            if not sep:
                raise ValueError(f"malformed header line: {line[:200]!r}")
            headers[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
        status = int(m.group(1))
        length = int(headers.get("content-length", "0")) if status not in (204, 304) and status >= 200 else 0
        body = data[end + 4:end + 4 + length]
        if len(body) < length:
            raise ValueError(f"response body cut short: {data[:300]!r}")
        out.append((status, headers, body))
        data = data[end + 4 + length:]
    return out


def closes(headers: dict) -> bool:
    return "close" in [t.strip().lower() for t in headers.get("connection", "").split(",")]


class KeepAliveClient:
    """A lean keep-alive HTTP client for latency measurement and correctness checks."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _read_response(self):
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"server closed the connection; have {self.buf[:200]!r}")
            self.buf += chunk
        end = self.buf.index(b"\r\n\r\n")
        head = self.buf[:end]
        m = STATUS_RE.match(head)
        if not m:
            raise AssertionError(f"malformed status line: {head[:200]!r}")
        status = int(m.group(1))
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if status in (204, 304):
            length = 0
        need = end + 4 + length
        while len(self.buf) < need:
            chunk = self.sock.recv(max(65536, need - len(self.buf)))
            if not chunk:
                raise ConnectionError("server closed the connection inside a body")
            self.buf += chunk
        body = self.buf[end + 4:need]
        self.buf = self.buf[need:]
        return status, head, body

    def get(self, path: str):
        self.sock.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return self._read_response()

    def put(self, path: str, body: bytes):
        self.sock.sendall(b"PUT " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: "
                          + str(len(body)).encode() + b"\r\n\r\n" + body)
        return self._read_response()

    def timed_gets(self, path: str, count: int, want: bytes) -> list[float]:
        """`count` sequential GETs; the latency of each in seconds. Every answer must be 200 `want`."""
        req = b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        out = []
        clock = time.perf_counter
        for _ in range(count):
            t0 = clock()
            self.sock.sendall(req)
            status, _, body = self._read_response()
            out.append(clock() - t0)
            if status != 200 or body != want:
                raise AssertionError(f"GET {path}: {status} {body[:100]!r}")
        return out


class BackgroundClient(threading.Thread):
    """A normal client that keeps writing and reading its own keys on one keep-alive connection
    until stopped; records every wrong answer or error, and the slowest round trip."""

    def __init__(self, port: int, app: str):
        super().__init__(daemon=True)
        self.port, self.app = port, app
        self.stop_event = threading.Event()
        self.served_once = threading.Event()
        self.errors: list[str] = []
        self.rounds = 0
        self.slowest = 0.0

    def run(self):
        try:
            c = KeepAliveClient(self.port)
        except OSError as e:
            self.errors.append(f"connect: {e!r}")
            return
        try:
            while not self.stop_event.is_set():
                key = f"/{self.app}/bg{self.rounds % 16}"
                body = b"round %d " % self.rounds * 8
                t0 = time.monotonic()
                status, _, _ = c.put(key, body)
                if status not in (201, 204):
                    self.errors.append(f"PUT {key}: {status}")
                status, _, got = c.get(key)
                if status != 200 or got != body:
                    self.errors.append(f"GET {key}: {status} {got[:60]!r}")
                self.slowest = max(self.slowest, time.monotonic() - t0)
                self.rounds += 1
                self.served_once.set()
                time.sleep(0.005)   # pacing: a steady normal client beside the attack, not a wait
        except (OSError, AssertionError) as e:
            self.errors.append(f"after {self.rounds} rounds: {e!r}")
        finally:
            c.close()

    def begin(self, test: unittest.TestCase):
        """Starts, and returns once the client has been served (its connection is open)."""
        self.start()
        test.assertTrue(self.served_once.wait(10), f"the normal client was not served: {self.errors}")

    def finish(self, test: unittest.TestCase, what: str):
        self.stop_event.set()
        self.join(30)
        test.assertFalse(self.is_alive(), f"the normal client hung {what}")
        test.assertEqual(self.errors, [], f"the normal client was not served correctly {what}")
        test.assertGreater(self.rounds, 0, f"the normal client was never served {what}")


def shard_stats(client: KeepAliveClient) -> list[dict]:
    status, _, body = client.get("/_stats")
    if status != 200:
        raise AssertionError(f"/_stats: {status} {body[:200]!r}")
    return json.loads(body)["shards"]


def check_normal_client(test: unittest.TestCase, port: int, app: str):
    c = KeepAliveClient(port)
    try:
        body = os.urandom(3000)
        status, _, _ = c.put(f"/{app}/after", body)
        test.assertIn(status, (201, 204))
        status, _, got = c.get(f"/{app}/after")
        test.assertEqual((status, got), (200, body))
        status, _, _ = c.get("/_health")
        test.assertEqual(status, 200)
    finally:
        c.close()


class HostileTestCase(unittest.TestCase):

    def start(self, args):
        srv = start_server(env_shards(), list(args))
        self.addCleanup(srv.cleanup)
        return srv

    def stop(self, srv):
        self.assertIsNone(srv.proc.poll(), f"the server died: {srv.stderr()[-2000:]}")
        srv.stop_and_check(self)


# --------------------------------------------------------------------------------------------
# 1. slowloris


SLOW_PREFIX = b"GET /slow/key HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
TRICKLE_TICK = 0.02


def slowloris_main(port: int, count: int, period: float, limit: float):
    """Holds `count` connections, each sending its head a couple of bytes every `period`
    seconds without ever finishing it, from one thread. Commands on stdin: `status` prints a
    JSON line of counts. Ends when every connection is closed by the server, on `quit`, or
    after `limit` seconds, printing a JSON line with how each connection ended."""
    sel = selectors.DefaultSelector()
    socks, first_byte, closed_at, got, how = [], [], [], [], []
    t_start = time.monotonic()
    for i in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.send(SLOW_PREFIX[:5])
        first_byte.append(time.monotonic())
        socks.append(s)
        closed_at.append(None)
        got.append(b"")
        how.append(None)
        sel.register(s, selectors.EVENT_READ, i)
    sel.register(sys.stdin, selectors.EVENT_READ, -1)
    print(json.dumps({"ready": count, "connect_s": time.monotonic() - t_start}), flush=True)
    sent = [5] * count
    base = time.monotonic()
    rnd = 0          # trickle round
    nxt = 0          # next connection to trickle to within the round
    open_count = count

    def finish(i, why):
        nonlocal open_count
        closed_at[i] = time.monotonic()
        how[i] = why
        sel.unregister(socks[i])
        socks[i].close()
        open_count -= 1

    def counts():
        return {"open": open_count, "closed": count - open_count,
                "t_since_first_byte": time.monotonic() - first_byte[0]}

    while open_count > 0 and time.monotonic() - t_start < limit:
        # trickle: connection i of round r is due at base + (r + 1 + i / count) * period
        now = time.monotonic()
        while now >= base + (rnd + 1 + nxt / count) * period:
            i = nxt
            if closed_at[i] is None:
                piece = SLOW_PREFIX[sent[i]:sent[i] + 3] if sent[i] < len(SLOW_PREFIX) else b"ab"
                try:
                    socks[i].send(piece)
                    sent[i] += len(piece)
                except BlockingIOError:
                    pass
                except OSError as e:
                    finish(i, "send error " + errno.errorcode.get(e.errno, str(e.errno)))
            nxt += 1
            if nxt == count:
                nxt, rnd = 0, rnd + 1
        # sends go out in small batches every TRICKLE_TICK rather than one by one, so that this
        # process wakes up 50 times a second, not 2,000 (on a small machine its own wake-ups
        # would otherwise disturb the client being measured more than the server does)
        wait = base + (rnd + 1 + nxt / count) * period - time.monotonic()
        for key, _ in sel.select(timeout=min(max(wait, TRICKLE_TICK), 0.05)):
            i = key.data
            if i < 0:
                line = sys.stdin.readline().strip()
                if line == "status":
                    print(json.dumps(counts()), flush=True)
                elif line in ("quit", ""):
                    open_count = -1
                    break
                continue
            try:
                chunk = socks[i].recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                finish(i, "reset" if e.errno == errno.ECONNRESET else errno.errorcode.get(e.errno, str(e.errno)))
                continue
            if not chunk:
                finish(i, "eof")
            else:
                got[i] += chunk
    summary = {"open": sum(1 for c in closed_at if c is None), "ends": {}, "answers": {},
               "bad": [], "min_close_s": None, "max_close_s": None, "rounds": rnd}
    delays = []
    for i in range(count):
        if closed_at[i] is None:
            continue
        delays.append(closed_at[i] - first_byte[i])
        summary["ends"][how[i]] = summary["ends"].get(how[i], 0) + 1
        try:
            answers = parse_responses(got[i])
        except ValueError as e:
            summary["bad"].append(str(e))
            continue
        key = ",".join(f"{st}{'+close' if closes(h) else ''}" for st, h, _ in answers) or "none"
        summary["answers"][key] = summary["answers"].get(key, 0) + 1
    if delays:
        summary["min_close_s"], summary["max_close_s"] = min(delays), max(delays)
    print(json.dumps(summary), flush=True)


class SlowlorisProcess:
    def __init__(self, port: int, count: int, period: float, limit: float):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "slowloris", str(port), str(count), str(period), str(limit)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def line(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        try:
            while time.monotonic() < deadline:
                if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    text = fd.readline()
                    if not text:
                        raise AssertionError(f"slowloris client exited: {self.proc.stderr.read()[-2000:]}")
                    return json.loads(text)
        finally:
            sel.close()
        raise AssertionError(f"slowloris client said nothing for {timeout} s")

    def command(self, cmd: str, timeout: float = 10) -> dict:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.line(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()


class TestSlowloris(HostileTestCase):
    CONNECTIONS = 2000
    IDLE_TIMEOUT = 6.0         # a head must arrive in full within this of its first byte
    PERIOD = 1.0               # each slowloris connection sends a few bytes every PERIOD
    BLOCKS, BLOCK = 10, 200    # sequential GETs per latency measurement: BLOCKS x BLOCK, with
    BLOCK_GAP = 0.05           # a pause between blocks so that one spans more than a second
    ATTEMPTS = 4               # baseline + measurement under slowloris, at most this often

    def measure(self, client: KeepAliveClient, path: str, want: bytes) -> list[float]:
        out = []
        for _ in range(self.BLOCKS):
            out += client.timed_gets(path, self.BLOCK, want)
            time.sleep(self.BLOCK_GAP)   # pacing: the measurement spans more than a second
        return out

    def test_slowloris_connections_do_not_slow_a_normal_client_and_get_408_after_the_head_timeout(self):
        nofile = raise_nofile_limit()
        if nofile < self.CONNECTIONS + 200:
            self.skipTest(f"RLIMIT_NOFILE {nofile} is too small for {self.CONNECTIONS} connections")
        srv = self.start(["--max-connections", str(self.CONNECTIONS + 1000),
                          "--idle-timeout", str(self.IDLE_TIMEOUT)])
        app = unique("slow")
        client = KeepAliveClient(srv.port)
        self.addCleanup(client.close)
        doc = os.urandom(1000)
        path = f"/{app}/doc"
        self.assertEqual(client.put(path, doc)[0], 201)
        client.timed_gets(path, 300, doc)                      # warm up

        # The machine may be shared and busy: a noisy moment can spoil one comparison, so the
        # pair (baseline without, measurement with the slowloris connections) is tried again,
        # from scratch, at most ATTEMPTS times. A server that lets slowloris connections delay
        # other clients fails every attempt.
        attempts = []
        for attempt in range(self.ATTEMPTS):
            base = self.measure(client, path, doc)
            loris = SlowlorisProcess(srv.port, self.CONNECTIONS, self.PERIOD, limit=self.IDLE_TIMEOUT + 15)
            self.addCleanup(loris.kill)
            ready = loris.line(timeout=30)
            self.assertEqual(ready.get("ready"), self.CONNECTIONS, ready)
            # pacing, not a poll: the slowloris client's first trickle round begins one PERIOD after
            # it is ready; measure once it is under way, leaving the measurement well inside the
            # head timeout (it must end before the first slow byte is IDLE_TIMEOUT old)
            time.sleep(self.PERIOD * 1.1)
            held = sum(s["connections"] for s in shard_stats(client))
            loaded = self.measure(client, path, doc)
            during = loris.command("status")
            base_p99, loaded_p99 = p99(base), p99(loaded)
            attempts.append((base_p99, loaded_p99))
            print(f"\n  slowloris attempt {attempt + 1}: {self.CONNECTIONS} connections (connected in "
                  f"{ready['connect_s']:.2f} s, server holds {held}); {len(loaded)} GETs: p99 "
                  f"{base_p99 * 1e6:.0f} us without, {loaded_p99 * 1e6:.0f} us with them "
                  f"(x{loaded_p99 / base_p99:.2f}); median {sorted(base)[len(base) // 2] * 1e6:.0f} / "
                  f"{sorted(loaded)[len(loaded) // 2] * 1e6:.0f} us; measured until "
                  f"{during['t_since_first_byte']:.1f} s after the first slow byte", end="", flush=True)
            self.assertGreaterEqual(held, self.CONNECTIONS, "the server does not hold the slowloris connections")
            self.assertEqual(during["open"], self.CONNECTIONS,
                             f"slowloris connections closed before the head timeout: {during}")
            self.assertLess(during["t_since_first_byte"], self.IDLE_TIMEOUT,
                            "the measurement outlasted the head timeout: the slowloris connections "
                            "were not all alive during it")
            if loaded_p99 <= 2 * base_p99:
                break
            # too slow this time: the slowloris connections go away, and the pair is measured again
            loris.kill()
            deadline = time.monotonic() + 10
            while sum(s["connections"] for s in shard_stats(client)) > 1:
                self.assertLess(time.monotonic(), deadline, "the server kept closed slowloris connections")
                time.sleep(0.05)
        print(flush=True)
        self.assertLessEqual(attempts[-1][1], 2 * attempts[-1][0],
                             "GET p99 under slowloris more than twice the p99 without, in every attempt "
                             f"(us): {[(round(b * 1e6), round(l * 1e6)) for b, l in attempts]}")

        # once a head has taken longer than --idle-timeout since its first byte: 408 and close
        final = loris.line(timeout=self.IDLE_TIMEOUT + 20)
        print(f"  slowloris ends: {final['ends']} answers: {final['answers']} closed "
              f"{final['min_close_s']:.2f}..{final['max_close_s']:.2f} s after their first byte",
              flush=True)
        self.assertEqual(final["open"], 0, f"slowloris connections never closed: {final}")
        self.assertEqual(final["bad"], [], final)
        self.assertEqual(set(final["answers"]) - {"408+close", "none"}, set(), final)
        self.assertEqual(set(final["ends"]) - {"eof", "reset"}, set(), final)
        # not before the timeout (minus the clock's granularity), not long after (sweep tick)
        self.assertGreaterEqual(final["min_close_s"], self.IDLE_TIMEOUT - 0.5, final)
        self.assertLessEqual(final["max_close_s"], self.IDLE_TIMEOUT + 5, final)

        self.assertEqual(client.get(path)[0:3:2], (200, doc))
        check_normal_client(self, srv.port, app)
        self.stop(srv)


# --------------------------------------------------------------------------------------------
# 2. connection flood


class TestConnectionFlood(HostileTestCase):
    LIMIT = 50            # --max-connections, per shard
    BEFORE = 8            # clients connected before the flood
    AFTER = 20            # new connections after the flood

    def test_a_flood_past_max_connections_is_refused_with_503_while_earlier_clients_are_served(self):
        shards = env_shards()
        flood_count = 6 * self.LIMIT * shards
        srv = self.start(["--max-connections", str(self.LIMIT)])
        app = unique("flood")
        before = [KeepAliveClient(srv.port) for _ in range(self.BEFORE)]
        for c in before:
            self.addCleanup(c.close)
        for i, c in enumerate(before):
            self.assertEqual(c.put(f"/{app}/b{i}", b"before %d" % i)[0], 201)
        background = BackgroundClient(srv.port, app)
        background.begin(self)

        # the flood: half connect and stay silent, half send a request at once
        flood = []
        t0 = time.monotonic()
        for i in range(flood_count):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            if i % 2:
                s.sendall(b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            flood.append(s)
        connect_s = time.monotonic() - t0
        # earlier clients are served during the flood
        for i, c in enumerate(before):
            status, _, body = c.get(f"/{app}/b{i}")
            self.assertEqual((status, body), (200, b"before %d" % i))

        # collect what each flood connection gets; a refused one gets 503 and EOF at once
        sel = selectors.DefaultSelector()
        got = [b""] * flood_count
        ended = [None] * flood_count
        for i, s in enumerate(flood):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, i)
        quiet_until = time.monotonic() + 1.5
        while time.monotonic() < quiet_until:
            for key, _ in sel.select(timeout=0.1):
                i = key.data
                try:
                    chunk = flood[i].recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    chunk, ended[i] = b"", "reset"
                if chunk:
                    got[i] += chunk
                    quiet_until = max(quiet_until, time.monotonic() + 0.5)
                    continue
                ended[i] = ended[i] or "eof"
                sel.unregister(flood[i])
        sel.close()

        refused, accepted, wrong = [], [], []
        for i in range(flood_count):
            if ended[i] is None:
                accepted.append(i)
                continue
            try:
                answers = parse_responses(got[i])
            except ValueError as e:
                wrong.append((i, ended[i], str(e)))
                continue
            ok = (len(answers) == 1 and answers[0][0] == 503 and closes(answers[0][1])
                  and answers[0][1].get("retry-after", "").isdigit()
                  and b"error" in answers[0][2] and ended[i] == "eof")
            (refused if ok else wrong).append(i if ok else (i, ended[i], got[i][:200]))
        print(f"\n  flood: {flood_count} connections in {connect_s:.2f} s past --max-connections "
              f"{self.LIMIT} x {shards} shards: {len(refused)} refused with 503, "
              f"{len(accepted)} accepted, {len(wrong)} other", flush=True)
        self.assertEqual(wrong, [], "flood connections that got something other than 503 and close")
        capacity = self.LIMIT * shards - self.BEFORE - 1   # the background client holds one too
        self.assertLessEqual(len(accepted), capacity)
        self.assertGreaterEqual(len(refused), flood_count - capacity)
        if shards == 1:
            self.assertEqual(len(accepted), capacity)

        # the accepted ones are real connections: those that asked were answered, and all of
        # them are served now
        for i in accepted:
            if i % 2:
                answers = parse_responses(got[i])
                self.assertEqual([a[0] for a in answers], [200], got[i][:200])
        for i in accepted:
            s = flood[i]
            s.setblocking(True)
            s.settimeout(10)
            s.sendall(b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        for i in accepted:
            data = b""
            while True:
                try:
                    answers = parse_responses(data)
                    if answers:
                        break
                except ValueError:
                    pass
                chunk = flood[i].recv(65536)
                self.assertTrue(chunk, f"accepted flood connection {i} closed: {data!r}")
                data += chunk
            self.assertEqual([a[0] for a in answers], [200], data)
        for i, c in enumerate(before):
            status, _, body = c.get(f"/{app}/b{i}")
            self.assertEqual((status, body), (200, b"before %d" % i))

        # the flood goes away: new connections are accepted again
        for s in flood:
            s.close()
        deadline = time.monotonic() + 10
        served = 0
        while served < self.AFTER:
            c = None
            try:
                c = KeepAliveClient(srv.port)
                status, _, _ = c.get("/_health")
            except OSError:
                status = None
            finally:
                if c:
                    c.close()
            if status == 200:
                served += 1
                continue
            self.assertEqual(status, 503)     # refused while the server has not seen the closes yet
            self.assertLess(time.monotonic(), deadline, "connections not accepted again after the flood")
            time.sleep(0.05)
        # and they can all be open at once
        again = [KeepAliveClient(srv.port) for _ in range(self.AFTER)]
        try:
            for c in again:
                self.assertEqual(c.get("/_health")[0], 200)
        finally:
            for c in again:
                c.close()
        background.finish(self, "during and after the flood")
        refused_by_server = sum(st["connections_refused"] for st in shard_stats(before[0]))
        self.assertGreaterEqual(refused_by_server, len(refused))
        for i, c in enumerate(before):
            self.assertEqual(c.put(f"/{app}/b{i}", b"after %d" % i)[0], 204)
            self.assertEqual(c.get(f"/{app}/b{i}")[0:3:2], (200, b"after %d" % i))
        print(f"  flood: the normal client made {background.rounds} PUT+GET rounds "
              f"(slowest {background.slowest * 1000:.0f} ms)", flush=True)
        self.stop(srv)


class Flood:
    """`count` connections that each send one GET /_health at once; collects what each gets."""

    def __init__(self, port: int, count: int):
        self.socks, self.got, self.answers = [], {}, {}
        self.sel = selectors.DefaultSelector()
        for i in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /_health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            s.setblocking(False)
            self.socks.append(s)
            self.sel.register(s, selectors.EVENT_READ, i)

    def collect(self, seconds: float, close_answered: bool = False):
        """Reads for up to `seconds`; a connection is done at its first complete answer, or
        when it is closed (answers None when it closed without one). close_answered: close
        each connection once it is done, as a client would."""
        t0 = time.monotonic()
        while len(self.answers) < len(self.socks) and time.monotonic() - t0 < seconds:
            for key, _ in self.sel.select(timeout=0.1):
                i = key.data
                try:
                    chunk = self.socks[i].recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    chunk = b""
                self.got[i] = self.got.get(i, b"") + chunk
                try:
                    answers = parse_responses(self.got[i])
                except ValueError:
                    if chunk:
                        continue
                    answers = None
                self.answers[i] = answers
                self.sel.unregister(self.socks[i])
                if close_answered:
                    self.socks[i].close()

    def served(self) -> list[int]:
        return [i for i, a in self.answers.items() if a and [x[0] for x in a] == [200]]

    def refused(self) -> list[int]:
        return [i for i, a in self.answers.items() if a and len(a) == 1 and a[0][0] == 503
                and closes(a[0][1]) and a[0][1].get("retry-after", "").isdigit()]

    def unanswered(self) -> int:
        return len(self.socks) - len(self.answers)

    def other(self) -> list[bytes]:
        ok = set(self.served()) | set(self.refused())
        return [self.got.get(i, b"")[:120] for i in self.answers if i not in ok]

    def close(self):
        self.sel.close()
        for s in self.socks:
            s.close()


class TestDescriptorLimit(HostileTestCase):
    FDS = 512             # the server's open-file limit, soft and hard
    FLOOD = 700
    # every flood connection is answered within this many seconds; sanitizers make each accept and
    # each tick slower (3x, as meson's --timeout-multiplier in .ci/run's stage 2)
    BOUND = 5.0

    def bound(self) -> float:
        # sanitizers, and several shards contending for the one reserve descriptor (a shard whose
        # reserve another took retries on its 250 ms tick), take longer to answer the whole flood
        return self.BOUND * (3 if sanitized_build() or env_shards() > 1 else 1)

    def start_with_descriptor_limit(self, nofile: int):
        """A server (default --max-connections: 10000 per shard) whose open-file limit is
        `nofile`, soft and hard, set by a shell that then execs it."""
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        wrapper = os.path.join(tmp.name, "percore")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\nulimit -n {nofile} || exit 97\nexec '{percore_bin()}' \"$@\"\n")
        os.chmod(wrapper, 0o755)
        saved = os.environ.get("PERCORE_BIN")
        os.environ["PERCORE_BIN"] = wrapper
        try:
            return self.start([])
        finally:
            if saved is None:
                del os.environ["PERCORE_BIN"]
            else:
                os.environ["PERCORE_BIN"] = saved

    def served_again(self, srv, app):
        deadline = time.monotonic() + 10
        while True:
            c = KeepAliveClient(srv.port)
            try:
                status = c.get("/_health")[0]
            except OSError:
                status = None
            finally:
                c.close()
            if status == 200:
                break
            self.assertLess(time.monotonic(), deadline, "connections not served again after the flood")
            time.sleep(0.05)
        check_normal_client(self, srv.port, app)

    def test_a_flood_past_the_open_file_limit_is_refused_with_503_and_never_left_unanswered(self):
        srv = self.start_with_descriptor_limit(self.FDS)
        self.assertEqual(proc_limit_nofile(srv.proc.pid), self.FDS)
        app = unique("fds")
        before = KeepAliveClient(srv.port)
        self.addCleanup(before.close)
        self.assertEqual(before.put(f"/{app}/doc", b"before")[0], 201)
        flood = Flood(srv.port, self.FLOOD)
        try:
            flood.collect(self.bound())
            print(f"\n  open-file limit {self.FDS}, {self.FLOOD} connections: {len(flood.served())} served, "
                  f"{len(flood.refused())} refused with 503, {flood.unanswered()} unanswered after "
                  f"{self.bound()} s; server says: "
                  f"{[l for l in srv.stderr().splitlines() if 'max-connections' in l]}", flush=True)
            self.assertEqual(flood.unanswered(), 0, "connections past the open-file limit left waiting unanswered")
            self.assertEqual(flood.other(), [])
            self.assertGreater(len(flood.refused()), 0)
            self.assertEqual(before.get(f"/{app}/doc")[0:3:2], (200, b"before"))
        finally:
            flood.close()
        self.served_again(srv, app)
        self.stop(srv)

    def test_connections_past_an_open_file_limit_lowered_while_serving_are_refused_or_answered_once_descriptors_free_up(self):
        if sanitized_build():
            # UBSan's vptr check tests memory through a pipe; with no descriptor left it reports the
            # (valid) listener as "invalid vptr" and stops the server. Stage 1 runs this test.
            self.skipTest("a sanitizer runtime cannot run out of file descriptors quietly")
        # the server fitted --max-connections to the limit it started with; a limit lowered
        # later (prlimit) runs it out of descriptors with connections still waiting to be
        # accepted: they are refused with 503 (one descriptor is kept in reserve for that), or,
        # where another shard took the reserve, accepted as soon as descriptors free up
        srv = self.start([])
        app = unique("fds")
        lowered = 200
        soft, hard = resource.prlimit(srv.proc.pid, resource.RLIMIT_NOFILE)
        resource.prlimit(srv.proc.pid, resource.RLIMIT_NOFILE, (lowered, hard))
        flood = Flood(srv.port, 2 * lowered)
        try:
            flood.collect(3.0)
            first = (len(flood.served()), len(flood.refused()), flood.unanswered())
            for i in flood.served():
                flood.socks[i].close()      # descriptors free up on the server
            flood.collect(self.bound(), close_answered=True)
            print(f"\n  open-file limit lowered to {lowered} while serving, {len(flood.socks)} connections: "
                  f"{first[0]} served, {first[1]} refused with 503, {first[2]} unanswered after 3 s; "
                  f"after the served ones closed: {len(flood.served())} served, {len(flood.refused())} "
                  f"refused, {flood.unanswered()} unanswered", flush=True)
            self.assertEqual(flood.other(), [])
            self.assertEqual(flood.unanswered(), 0, "connections left waiting after descriptors freed up")
            self.assertGreater(len(flood.refused()), 0)
            if env_shards() == 1:
                # one shard: the reserve is always its own, nothing waits
                self.assertEqual(first[2], 0, "connections past the descriptor limit left waiting unanswered")
        finally:
            flood.close()
        resource.prlimit(srv.proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
        self.served_again(srv, app)
        self.stop(srv)


# --------------------------------------------------------------------------------------------
# 3. body budget


class TestBodyBudget(HostileTestCase):
    BUDGET = 1 * MiB      # --body-budget, per shard
    PUTS = 48
    BODY = 512 * KiB
    SLICE = 32 * KiB      # each upload sends this much ...
    SLICE_GAP = 0.025     # ... this often (about 0.4 s per upload)
    START_GAP = 0.02      # a new upload starts this often, so that they overlap
    # What the server may grow by over its RSS after a warm-up: the bodies in flight (the budget,
    # per shard), the records of the batch being written (a copy of the same bytes, in a buffer
    # that may be up to twice their size while it grows), and slack for allocator arenas:
    # 3 x shards x budget + SLACK, under half the bytes offered (24 MiB). Measured: +0.5..2.5 MiB
    # with 1 shard, +2..4.6 MiB with 3; without a working budget, +10 MiB with 1 shard.
    SLACK = 2 * MiB

    def test_concurrent_large_puts_past_the_body_budget_get_503_retry_after_and_memory_stays_bounded(self):
        shards = env_shards()
        srv = self.start(["--body-budget", str(self.BUDGET)])
        pid = srv.proc.pid
        app = unique("budget")
        rng = random.Random(7)
        # warm up: a few large PUTs one after the other on several connections (so on every
        # shard), so that what the allocator keeps after them counts in the baseline
        for j in range(4 * shards):
            c = KeepAliveClient(srv.port)
            for k in range(2):
                self.assertEqual(c.put(f"/{app}/warm{j}_{k}", rng.randbytes(self.BODY))[0], 201)
            c.close()
        # the server has let go of the warm-up connections (only the one asking is left)
        wait_until(lambda: stats_total(srv, "connections") <= 1, timeout=5,
                   what="the server to close the warm-up connections")
        rss_before = proc_status_kib(pid, "VmRSS")
        peak = [rss_before]
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                try:
                    peak[0] = max(peak[0], proc_status_kib(pid, "VmRSS"))
                except (OSError, AssertionError):
                    return
                time.sleep(0.005)   # the sampling period of the RSS sampler

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        bodies = [rng.randbytes(self.BODY) for _ in range(self.PUTS)]
        chunked = [i % 6 == 5 for i in range(self.PUTS)]
        wire = []
        for i in range(self.PUTS):
            head = f"PUT /{app}/k{i} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            if chunked[i]:
                pieces = [bodies[i][o:o + self.SLICE] for o in range(0, self.BODY, self.SLICE)]
                payload = [(head + "Transfer-Encoding: chunked\r\n\r\n").encode()]
                payload += [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]
                payload[-1] += b"0\r\n\r\n"
            else:
                payload = [(head + f"Content-Length: {self.BODY}\r\n\r\n").encode()]
                payload += [bodies[i][o:o + self.SLICE] for o in range(0, self.BODY, self.SLICE)]
            wire.append(payload)

        sel = selectors.DefaultSelector()
        socks = [None] * self.PUTS
        nxt_piece = [0] * self.PUTS
        pending_out = [b""] * self.PUTS   # the rest of a piece the socket did not take
        due = [0.0] * self.PUTS
        got = [b""] * self.PUTS
        ended = [None] * self.PUTS
        send_error = [None] * self.PUTS
        answered_at_piece = [None] * self.PUTS
        t0 = time.monotonic()
        started = 0
        deadline = t0 + 15
        while time.monotonic() < deadline:
            now = time.monotonic()
            while started < self.PUTS and now >= t0 + started * self.START_GAP:
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.setblocking(False)
                socks[started] = s
                due[started] = now
                sel.register(s, selectors.EVENT_READ, started)
                started += 1
            for i in range(started):
                if ended[i] or got[i] or send_error[i] or now < due[i]:
                    continue
                if not pending_out[i]:
                    if nxt_piece[i] >= len(wire[i]):
                        continue
                    pending_out[i] = wire[i][nxt_piece[i]]
                    nxt_piece[i] += 1
                try:
                    n = socks[i].send(pending_out[i])
                    pending_out[i] = pending_out[i][n:]
                except BlockingIOError:
                    pass
                except OSError as e:
                    send_error[i] = errno.errorcode.get(e.errno, str(e.errno))
                due[i] = now + (0.002 if pending_out[i] else self.SLICE_GAP)
            if started == self.PUTS and all(ended):
                break
            for key, _ in sel.select(timeout=0.002):
                i = key.data
                try:
                    chunk = socks[i].recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    chunk, ended[i] = b"", "reset"
                if chunk:
                    if not got[i]:
                        answered_at_piece[i] = nxt_piece[i]
                    got[i] += chunk
                    # the connection stays open after a 201: done once the answer is complete
                    try:
                        answers = parse_responses(got[i])
                    except ValueError:
                        continue
                    if answers and answers[-1][0] < 300:
                        ended[i] = "answered"
                        sel.unregister(socks[i])
                    continue
                ended[i] = ended[i] or "eof"
                sel.unregister(socks[i])
        elapsed = time.monotonic() - t0
        sel.close()
        for s in socks:
            if s:
                s.close()
        sampling.set()
        sampler.join(5)
        hwm = proc_status_kib(pid, "VmHWM")
        peak_rss = max(peak[0], hwm, proc_status_kib(pid, "VmRSS"))

        stored, refused, wrong = [], [], []
        for i in range(self.PUTS):
            try:
                answers = parse_responses(got[i])
            except ValueError as e:
                wrong.append((i, ended[i], send_error[i], str(e)))
                continue
            if len(answers) == 1 and answers[0][0] == 201 and ended[i] == "answered":
                stored.append(i)
            elif (len(answers) == 1 and answers[0][0] == 503 and closes(answers[0][1])
                  and answers[0][1].get("retry-after", "").isdigit() and b'"error"' in answers[0][2]
                  and ended[i] == "eof"):
                refused.append(i)
            else:
                wrong.append((i, ended[i], send_error[i], [(a[0], a[2][:80]) for a in answers]))
        offered = self.PUTS * self.BODY
        bound_kib = (3 * shards * self.BUDGET + self.SLACK) // KiB
        print(f"\n  body budget {self.BUDGET // KiB} KiB x {shards} shards, {self.PUTS} PUTs of "
              f"{self.BODY // KiB} KiB ({offered // MiB} MiB offered) in {elapsed:.2f} s: "
              f"{len(stored)} stored, {len(refused)} refused with 503 "
              f"(chunked: {sum(1 for i in refused if chunked[i])} of {sum(chunked)} refused; "
              f"{sum(1 for i in refused if answered_at_piece[i] and answered_at_piece[i] > 1)} "
              f"refused mid-body); server RSS {rss_before} KiB after a warm-up, peak {peak_rss} KiB "
              f"(+{peak_rss - rss_before} KiB; bound +{bound_kib} KiB)", flush=True)
        self.assertEqual(wrong, [], "uploads that got something other than 201, or 503 and close")
        self.assertEqual(len(stored) + len(refused), self.PUTS)
        self.assertGreater(len(refused), 0, "the budget was never exhausted: the uploads did not overlap")
        self.assertGreater(len(stored), 0)
        self.assertLess(bound_kib * KiB, offered // 2)
        if sanitized_build():
            print("  (a sanitizer build: its RSS is not compared with the bound)", flush=True)
        else:
            self.assertLessEqual(peak_rss - rss_before, bound_kib,
                                 f"the server's memory grew by {peak_rss - rss_before} KiB for "
                                 f"{offered // KiB} KiB offered")
        self.assertIsNone(srv.proc.poll(), "the server died")

        # afterwards: the budget is all given back
        c = KeepAliveClient(srv.port)
        try:
            deadline = time.monotonic() + 5
            while any(st["body_bytes_in_flight"] for st in shard_stats(c)):
                self.assertLess(time.monotonic(), deadline,
                                f"body budget not given back: {[st['body_bytes_in_flight'] for st in shard_stats(c)]}")
                time.sleep(0.05)
            # every stored upload reads back whole, no refused one was stored, and normal
            # PUT/GET work
            for i in range(self.PUTS):
                status, _, body = c.get(f"/{app}/k{i}")
                if i in stored:
                    self.assertEqual(status, 200, i)
                    self.assertTrue(body == bodies[i], f"k{i} does not read back as written")
                else:
                    self.assertEqual(status, 404, f"k{i} was refused but is there")
            self.assertEqual(c.put(f"/{app}/k0", bodies[1])[0], 204 if 0 in stored else 201)
            self.assertTrue(c.get(f"/{app}/k0")[2] == bodies[1])
        finally:
            c.close()
        check_normal_client(self, srv.port, app)
        self.stop(srv)


# --------------------------------------------------------------------------------------------
# 4. garbage


class TestGarbage(HostileTestCase):
    CONNECTIONS = 100
    IDLE_TIMEOUT = 2.0
    BOUND = 7.0           # every garbage connection is closed within this many seconds
    SEED = int(os.environ.get("PERCORE_HOSTILE_SEED", "20240917"))

    PREFIXES = [
        b"GET / HTTP/1.1\r\n",
        b"GET /g/k HTTP/1.1\r\nHost: 127.0.0.1\r\n",
        b"PUT /g/k HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ",
        b"PUT /g/k HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /",
        b"G",
        b"HTTP/1.1 200 OK\r\n",
        b"DELETE /g/",
        b"GET /g/k HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ",
        b"\r\n\r\n",
    ]

    def payload(self, rng: random.Random, i: int) -> tuple[str, bytes]:
        kind = i % 11
        n = rng.randint(1, 64 * KiB)
        if kind == 0:
            return "random bytes", rng.randbytes(n)
        if kind == 1:
            return "prefix + random bytes", rng.choice(self.PREFIXES) + rng.randbytes(n)
        if kind == 2:
            return "binary with NULs", bytes(rng.choice((0, 0, 0, rng.randrange(256))) for _ in range(n))
        if kind == 3:
            return "overlong request line", b"GET /" + b"a" * rng.randint(9 * KiB, 64 * KiB) + b" HTTP/1.1\r\n\r\n"
        if kind == 4:
            return "overlong header line", (b"GET /g/k HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: "
                                            + b"b" * rng.randint(17 * KiB, 64 * KiB) + b"\r\n\r\n")
        if kind == 5:
            return "too many header fields", (b"GET /g/k HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                              + b"".join(b"X-F%d: v\r\n" % j for j in range(rng.randint(101, 400)))
                                              + b"\r\n")
        if kind == 6:
            printable = bytes(range(32, 127)) + b"\r\n\t"
            return "random printable lines", bytes(rng.choice(printable) for _ in range(min(n, 8 * KiB)))
        if kind == 7:
            return "valid prefix, never finished", rng.choice(self.PREFIXES[:3]) + b"X-B: c\r\n"
        if kind == 8:
            return "chunked with garbage sizes", (self.PREFIXES[3] + rng.choice((b"zz", b"ffffffffffffffffff", b"-1", b"5\r\nab"))
                                                  + b"\r\n" + rng.randbytes(rng.randint(0, 100)))
        if kind == 9:
            return "prefix + random bytes in short lines", rng.choice(self.PREFIXES) + b"\r\n".join(
                rng.randbytes(rng.randint(1, 60)) for _ in range(rng.randint(1, 200)))
        # complete requests (for documents that do not exist: 404, the connection stays open)
        # pipelined before the garbage
        return "complete requests, then random bytes", b"".join(
            b"GET /g/missing%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % j
            for j in range(rng.randint(1, 5))) + rng.randbytes(n)

    def test_garbage_on_many_connections_gets_4xx_and_close_or_a_close_and_the_server_keeps_serving(self):
        print(f"\n  garbage: seed {self.SEED} (set PERCORE_HOSTILE_SEED to change it)", flush=True)
        rng = random.Random(self.SEED)
        srv = self.start(["--idle-timeout", str(self.IDLE_TIMEOUT)])
        app = unique("garbage")
        background = BackgroundClient(srv.port, app)
        background.begin(self)

        kinds, payloads = [], []
        for i in range(self.CONNECTIONS):
            k, p = self.payload(rng, i)
            kinds.append(k)
            payloads.append(p)
        half_close = [rng.random() < 0.3 for _ in range(self.CONNECTIONS)]

        sel = selectors.DefaultSelector()
        socks = []
        t0 = time.monotonic()
        for i in range(self.CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.setblocking(False)
            socks.append(s)
            sel.register(s, selectors.EVENT_READ, i)
        offset = [0] * self.CONNECTIONS
        got = [b""] * self.CONNECTIONS
        ended = [None] * self.CONNECTIONS
        ended_at = [None] * self.CONNECTIONS
        deadline = t0 + self.BOUND
        while time.monotonic() < deadline and not all(ended):
            for i, s in enumerate(socks):
                if ended[i] or got[i] or offset[i] >= len(payloads[i]):
                    continue
                try:
                    offset[i] += s.send(payloads[i][offset[i]:offset[i] + rng.randint(1, 16 * KiB)])
                except BlockingIOError:
                    pass
                except OSError:
                    offset[i] = len(payloads[i])     # the server is gone from this one; read the rest
                if offset[i] >= len(payloads[i]) and half_close[i]:
                    try:
                        s.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
            for key, _ in sel.select(timeout=0.01):
                i = key.data
                try:
                    chunk = socks[i].recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    chunk, ended[i] = b"", "reset"
                if chunk:
                    got[i] += chunk
                    continue
                ended[i] = ended[i] or "eof"
                ended_at[i] = time.monotonic() - t0
                sel.unregister(socks[i])
        sel.close()
        for s in socks:
            s.close()

        hung = [(i, kinds[i], len(payloads[i]), offset[i], got[i][:100]) for i in range(self.CONNECTIONS)
                if ended[i] is None]
        outcomes, wrong = {}, []
        for i in range(self.CONNECTIONS):
            if ended[i] is None:
                continue
            try:
                answers = parse_responses(got[i])
            except ValueError as e:
                wrong.append((i, kinds[i], ended[i], str(e)))
                continue
            statuses = [a[0] for a in answers]
            # every answer a 4xx (501 and 505 are the framing errors of SPEC §4); the last one
            # closes; or no answer at all and closed
            if answers and (any(not (400 <= st < 500 or st in (501, 505)) for st in statuses)
                            or not closes(answers[-1][1])):
                wrong.append((i, kinds[i], ended[i], statuses, payloads[i][:80]))
                continue
            key = "+".join(map(str, statuses)) or "closed"
            outcomes[key] = outcomes.get(key, 0) + 1
        slowest = max((t for t in ended_at if t is not None), default=0.0)
        print(f"  garbage: {self.CONNECTIONS} connections, outcomes {dict(sorted(outcomes.items()))}, "
              f"{sum(1 for e in ended if e == 'reset')} resets, last closed after {slowest:.2f} s",
              flush=True)
        self.assertEqual(hung, [], f"garbage connections still open after {self.BOUND} s")
        self.assertEqual(wrong, [], "garbage connections with unexpected answers")
        self.assertIsNone(srv.proc.poll(), f"the server died: {srv.stderr()[-2000:]}")
        background.finish(self, "during the garbage")
        # the server let go of every garbage connection (the normal client's is gone too)
        c = KeepAliveClient(srv.port)
        try:
            deadline = time.monotonic() + 5
            while sum(st["connections"] for st in shard_stats(c)) > 1:
                self.assertLess(time.monotonic(), deadline, f"connections left open: {shard_stats(c)}")
                time.sleep(0.05)
        finally:
            c.close()
        print(f"  garbage: the normal client made {background.rounds} PUT+GET rounds "
              f"(slowest {background.slowest * 1000:.0f} ms)", flush=True)
        check_normal_client(self, srv.port, app)
        self.stop(srv)


# --------------------------------------------------------------------------------------------
# 6. clients that hold memory: one that pipelines and never reads, bodies that trickle


class TestNeverReadingClient(HostileTestCase):
    """SPEC §4: memory is bounded per connection whatever the client does. A client with a 4 KiB
    receive buffer that writes pipelined GETs in 100 KB sends and never reads took one shard from
    62 MiB to 1.3-1.75 GiB in five seconds before the bound on unsent answers."""
    SECONDS = 10
    # The server's RSS may grow by this much over its start: one connection's bounded output
    # (1 MiB of answers, 256 at most) and input buffer (28 KiB), plus allocator slack. Measured:
    # +40 KiB with the bound; +11 MiB in 5 s (8.4 MB sent) and climbing without it.
    BOUND_KIB = 4 * 1024
    # Growth allowed in the second half of the run: the bounded server reads nothing then, and its
    # RSS stays within a page or two. Under ASan it rises by 9-11 MiB at the start and then by up to
    # 1.3 MiB (3 shards: every tick's allocations take fresh memory while freed memory waits in the
    # quarantine), against hundreds of MiB for a server that goes on reading.
    FLAT_KIB = 1024
    FLAT_KIB_SANITIZED = 8 * 1024

    def test_rss_stays_bounded_while_a_client_pipelines_and_never_reads(self):
        srv = self.start(["--idle-timeout", "30"])
        pid = srv.proc.pid
        rss_start = proc_status_kib(pid, "VmRSS")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port))
        s.setblocking(False)
        burst = b"GET /app/missing HTTP/1.1\r\nHost: localhost\r\n\r\n" * 2500   # ~100 KB
        sent, peak = 0, rss_start
        started = time.monotonic()
        deadline = started + self.SECONDS
        rss_half = None          # at half time: from then on a bounded server's RSS stays flat
        while time.monotonic() < deadline:
            try:
                sent += s.send(burst)
            except BlockingIOError:
                time.sleep(0.01)   # the server stopped reading: what the bound is for
            rss = proc_status_kib(pid, "VmRSS")
            peak = max(peak, rss)
            if rss_half is None and time.monotonic() - started >= self.SECONDS / 2:
                rss_half, peak_late = rss, rss
            elif rss_half is not None:
                peak_late = max(peak_late, rss)
        s.close()
        print(f"\n  never-reading client: {sent} bytes sent in {self.SECONDS} s; server RSS +{peak - rss_start} KiB "
              f"(+{peak_late - rss_half} KiB in the second half)", flush=True)
        self.assertGreater(sent, 100_000)
        # a server that goes on reading grows all the time (the probe: +1.3 GiB in 5 s); one that
        # stopped is flat once its buffers are full, also under a sanitizer
        self.assertLess(peak_late - rss_half, self.FLAT_KIB_SANITIZED if sanitized_build() else self.FLAT_KIB,
                        f"RSS still growing in the second half: +{peak_late - rss_half} KiB")
        if sanitized_build():
            print("  (a sanitizer build: its RSS is not compared with the bound)", flush=True)
        else:
            self.assertLess(peak - rss_start, self.BOUND_KIB,
                            f"RSS grew {peak - rss_start} KiB while a client sent {sent} bytes and read none")
        # the shard still serves others
        c = KeepAliveClient(srv.port)
        self.assertEqual(c.get("/app/missing")[0], 404)
        c.close()
        self.stop(srv)


class TestTricklingBodies(HostileTestCase):
    """Four connections announce 16 MiB bodies and send a byte now and then: they used to hold the
    whole 64 MiB body budget (charged by the announced length, each byte pushing the deadline), and
    every other PUT got 503. Now the budget is charged by what is buffered, and a body slower than
    the rate floor after its grace period (the idle timeout) gets 408."""
    IDLE = 2.0

    def test_a_normal_put_beside_four_tricklers_gets_201_and_the_tricklers_get_408(self):
        srv = self.start(["--idle-timeout", str(self.IDLE)])
        tricklers = []
        for i in range(4):
            t = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            t.sendall(f"PUT /app/trickle{i} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 16777216\r\n\r\nx".encode())
            tricklers.append(t)
        # the four heads parsed and their bodies admitted: each charged at least the first buffer
        # of a sized body (net/limits.hpp body_first_buffer_bytes, 64 KiB) against the budget
        wait_until(lambda: stats_total(srv, "body_bytes_in_flight") >= 4 * 64 * KiB, timeout=5,
                   what="the four trickling bodies to be admitted (body_bytes_in_flight)")
        c = KeepAliveClient(srv.port)
        status = c.put("/app/normal", b"n" * 65536)[0]
        self.assertEqual(status, 201, "a normal PUT beside four tricklers")
        # keep trickling below the floor but never idle: one byte every IDLE/4 seconds
        answers = {}
        started = time.monotonic()
        while len(answers) < 4 and time.monotonic() - started < 4 * self.IDLE + 5:
            for i, t in enumerate(tricklers):
                if i in answers:
                    continue
                t.setblocking(False)
                try:
                    data = t.recv(4096)
                    answers[i] = data
                    continue
                except BlockingIOError:
                    pass
                try:
                    t.send(b"x")
                except OSError:
                    answers[i] = b""
            time.sleep(self.IDLE / 4)   # pacing: the trickle itself (one byte per IDLE/4)
        for i in range(4):
            self.assertTrue(answers.get(i, b"").startswith(b"HTTP/1.1 408 "), f"trickler {i}: {answers.get(i)!r}")
        elapsed = time.monotonic() - started
        self.assertLess(elapsed, 3 * self.IDLE + 2, "cut by the rate floor, soon after the grace period")
        c.close()   # idle past the idle timeout by now
        c = KeepAliveClient(srv.port)
        self.assertEqual(c.get("/app/normal")[0], 200)
        c.close()
        self.stop(srv)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "slowloris":
        slowloris_main(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        unittest.main()

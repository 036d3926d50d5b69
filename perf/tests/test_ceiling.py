"""Tests of perf/ceiling/percore-ceiling, the fixed-answer server the benchmarks use as their upper
bound (see the contract at the top of perf/ceiling/ceiling.cpp).

percore-ceiling lives next to the server in the build tree: <build>/shards/percore ->
<build>/perf/ceiling/percore-ceiling (and percore-load at <build>/perf/load/percore-load).  Each
class is skipped when its binaries have not been built.  Nothing here depends on the shard count.
"""
import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
import unittest

from percore_client import SOCK_TIMEOUT, START_TIMEOUT, STOP_TIMEOUT, _live, percore_bin

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(percore_bin())))
CEILING_BIN = os.path.join(BUILD, "perf", "ceiling", "percore-ceiling")
LOAD_BIN = os.path.join(BUILD, "perf", "load", "percore-load")


def answer(size: int, close: bool = False, head_only: bool = False) -> bytes:
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n" % size + (b"Connection: close\r\n" if close else b"") + b"\r\n")
    return head if head_only else head + b"x" * size


GET = b"GET /app/k1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Ceiling:
    """A running percore-ceiling; stop() sends SIGTERM and returns the exit code."""

    def __init__(self, *args):
        self.cmd = [CEILING_BIN, "--listen", "127.0.0.1:0", *args]
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        _live.append(self.proc)
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + START_TIMEOUT
        data = b""
        while b"\n" not in data:
            left = deadline - time.monotonic()
            r, _, _ = select.select([fd], [], [], max(left, 0))
            chunk = os.read(fd, 4096) if r else b""
            if not chunk:
                self.proc.kill()
                raise AssertionError(f"no ready line from {self.cmd}: {data!r}")
            data += chunk
        line = data.split(b"\n", 1)[0].decode()
        prefix = "listening on 127.0.0.1:"
        if not line.startswith(prefix):
            self.proc.kill()
            raise AssertionError(f"unexpected ready line {line!r}")
        self.port = int(line[len(prefix):])
        self.ready_line = line

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=SOCK_TIMEOUT)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        if self.proc in _live:
            _live.remove(self.proc)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode


def recv_exact(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {n} bytes: {data[-200:]!r}")
        data += chunk
    return data


def assert_nothing_more(testcase: unittest.TestCase, s: socket.socket, wait_s: float = 0.2):
    r, _, _ = select.select([s], [], [], wait_s)
    if r:
        testcase.fail(f"unexpected bytes: {s.recv(4096)!r}")


@unittest.skipUnless(os.access(CEILING_BIN, os.X_OK), f"percore-ceiling not built at {CEILING_BIN}")
class TestCeiling(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = Ceiling()

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        if rc != 0:
            raise AssertionError(f"percore-ceiling did not exit 0 after SIGTERM (rc={rc})")

    def test_keep_alive_two_answers(self):
        with self.server.connect() as s:
            for _ in range(2):
                s.sendall(GET)
                self.assertEqual(recv_exact(s, len(answer(64))), answer(64))
            assert_nothing_more(self, s)

    def test_head(self):
        with self.server.connect() as s:
            s.sendall(b"HEAD / HTTP/1.1\r\nHost: localhost\r\n\r\n" + GET)
            expected = answer(64, head_only=True) + answer(64)
            self.assertEqual(recv_exact(s, len(expected)), expected)

    def test_pipeline_16_in_one_send(self):
        with self.server.connect() as s:
            s.sendall(GET * 16)
            self.assertEqual(recv_exact(s, 16 * len(answer(64))), answer(64) * 16)
            assert_nothing_more(self, s)

    def test_many_pipelined_slow_reader(self):
        # more answers than the kernel buffers hold: partial sends, EPOLLOUT, reading paused
        n = 20000
        with self.server.connect() as s:
            sender = threading.Thread(target=s.sendall, args=(GET * n,), daemon=True)
            sender.start()
            time.sleep(0.3)
            self.assertEqual(recv_exact(s, n * len(answer(64))), answer(64) * n)
            sender.join(timeout=SOCK_TIMEOUT)
            assert_nothing_more(self, s)

    def test_head_split_over_many_sends(self):
        with self.server.connect() as s:
            for i in range(len(GET)):
                s.sendall(GET[i:i + 1])
                time.sleep(0.001)
            self.assertEqual(recv_exact(s, len(answer(64))), answer(64))

    def test_connection_close(self):
        for value in (b"close", b"CLOSE", b"keep-alive, Close"):
            with self.subTest(value=value), self.server.connect() as s:
                s.sendall(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: " + value + b"\r\n\r\n")
                expected = answer(64, close=True)
                self.assertEqual(recv_exact(s, len(expected)), expected)
                self.assertEqual(s.recv(4096), b"")

    def test_requests_after_close_are_dropped(self):
        with self.server.connect() as s:
            s.sendall(GET + b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n" + GET)
            expected = answer(64) + answer(64, close=True)
            self.assertEqual(recv_exact(s, len(expected)), expected)
            try:
                rest = s.recv(4096)
            except ConnectionResetError:   # the dropped request was unread: RST instead of FIN
                rest = b""
            self.assertEqual(rest, b"")

    def test_other_method_gets_501_and_close(self):
        with self.server.connect() as s:
            s.sendall(b"PUT /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            expected = b"HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            self.assertEqual(recv_exact(s, len(expected)), expected)
            self.assertEqual(s.recv(4096), b"")

    def test_head_longer_than_buffer_closes(self):
        with self.server.connect() as s:
            try:
                s.sendall(b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\n")
                rest = s.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                rest = b""
            self.assertEqual(rest, b"")

    def test_size_1000(self):
        server = Ceiling("--size", "1000")
        try:
            with server.connect() as s:
                s.sendall(GET)
                expected = answer(1000)
                self.assertIn(b"Content-Length: 1000\r\n", expected)
                self.assertEqual(recv_exact(s, len(expected)), expected)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_bad_option(self):
        p = subprocess.run([CEILING_BIN, "--size", "lots"], capture_output=True, timeout=10,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"--size", p.stderr)


@unittest.skipUnless(os.access(CEILING_BIN, os.X_OK) and os.access(LOAD_BIN, os.X_OK),
                     f"percore-ceiling or percore-load not built under {BUILD}")
class TestCeilingUnderLoad(unittest.TestCase):
    """percore-load counts anything but a 200 with --size body bytes as wrong."""

    @classmethod
    def setUpClass(cls):
        cls.server = Ceiling()

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.stop()
        if rc != 0:
            raise AssertionError(f"percore-ceiling did not exit 0 after SIGTERM (rc={rc})")

    def run_load(self, *args):
        cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{self.server.port}", "--keys", "1",
               "--size", "64", "--duration", "1", "--json", "-", *args]
        p = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, f"{cmd}: {p.stderr.decode(errors='replace')}")
        r = json.loads(p.stdout)
        self.assertGreater(r["requests"], 0, r)
        self.assertEqual(r["wrong"], 0, r)
        self.assertEqual(r["status"]["2xx"], r["answered"], r)
        return r

    def test_keep_alive(self):
        self.run_load()

    def test_close_mode(self):
        r = self.run_load("--mode", "close", "--connections", "4")
        self.assertGreaterEqual(r["connects"], r["answered"], r)

    def test_pipeline_16(self):
        self.run_load("--pipeline", "16", "--connections", "4")


if __name__ == "__main__":
    unittest.main()

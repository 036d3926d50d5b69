"""Shared helpers for percore's integration tests.

Standard library only.  Two pieces:

* ``Conn`` -- a raw-socket HTTP/1.1 client that sends exactly the bytes it is
  given and reads exactly one response at a time (status line, headers, body
  by Content-Length or chunked; no body for HEAD, 1xx, 204 and 304).  Every
  socket operation has a deadline, so a hung server fails a test instead of
  hanging the run.
* ``Server`` -- starts the real ``percore serve`` binary on 127.0.0.1:0 with a
  temporary data directory, parses the ready line and stops it with SIGTERM
  (expecting exit code 0 within 5 s).

Also ``wait_until``, the bounded poll every test uses to wait for something
observable instead of sleeping a fixed time.

The binary comes from the environment variable ``PERCORE_BIN`` (set by
run_integration.py from its first argument) or defaults to
``<repo>/build/shards/percore``.  The shard count for the parameterised test
classes comes from ``PERCORE_TEST_SHARDS`` (default 1).
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import select
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse
import uuid

import api_description

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

SOCK_TIMEOUT = 5.0          # every single socket operation
START_TIMEOUT = 15.0        # until the ready line appears
STOP_TIMEOUT = 5.0          # SIGTERM -> exit, per SPEC section 1

READY_RE = re.compile(
    r"^percore listening on http://(?P<host>[^\s:]+):(?P<port>\d+) shards=(?P<shards>\d+)"
    r"(?: https://(?P<tls_host>\[[^\]\s]+\]|[^\s:]+):(?P<tls_port>\d+))?$")


def percore_bin() -> str:
    return os.environ.get("PERCORE_BIN") or os.path.join(REPO, "build", "shards", "percore")


def env_shards() -> int:
    return int(os.environ.get("PERCORE_TEST_SHARDS", "1"))


def server_env(extra: dict | None = None) -> dict:
    """The environment for a server process: ours minus every PERCORE_* variable
    (so a developer's shell cannot change what the tests start), plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERCORE_")}
    if extra:
        env.update(extra)
    return env


# SPEC §9 refuses loopback receivers unless --deliveries-allow admits them: every server that
# delivers to the tests' loopback receivers starts with this.
LOOPBACK_RECEIVERS = ("--deliveries-allow", "127.0.0.0/8,::1/128")


def unique(prefix: str = "t") -> str:
    """A fresh app name: [a-z0-9], starts with a letter, <= 64 bytes."""
    return (prefix + uuid.uuid4().hex[:12]).lower()[:64]


def q(s: str | bytes) -> str:
    """Percent-encode every byte outside unreserved, keeping '/'."""
    return urllib.parse.quote(s, safe="/")


def qv(s: str | bytes) -> str:
    """Percent-encode a query value (also '/', '+', '&', '=')."""
    return urllib.parse.quote(s, safe="")


POLL_INTERVAL_S = 0.02       # wait_until's default pause between two looks


def wait_until(predicate, timeout: float = 10.0, interval: float = POLL_INTERVAL_S, what: str = "condition"):
    """Calls predicate() every `interval` seconds until it returns a true value, and returns that
    value; raises AssertionError naming `what` (and the last value) once `timeout` seconds passed.
    The one way these tests wait for something to happen (a stats field, a file, a log line, an
    answer): never a fixed sleep that hopes it happened meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {value!r})")
        time.sleep(interval)


# --------------------------------------------------------------------------
# Responses


class Response:
    def __init__(self, version: str, status: int, reason: str,
                 headers: list[tuple[str, str]], body: bytes, raw_head: bytes):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.raw_head = raw_head
        self.close_delimited = False

    def header(self, name: str, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has_header(self, name: str) -> bool:
        return self.header(name) is not None

    def connection_tokens(self) -> set[str]:
        toks = set()
        for v in self.header_all("connection"):
            toks.update(t.strip().lower() for t in v.split(",") if t.strip())
        return toks

    @property
    def wants_close(self) -> bool:
        return "close" in self.connection_tokens()

    @property
    def etag(self):
        return self.header("etag")

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        body = self.body if len(self.body) <= 300 else self.body[:300] + b"..."
        return f"<Response {self.status} {self.reason!r} headers={self.headers!r} body={body!r}>"


class ConnClosed(Exception):
    """The peer closed (EOF or reset) before a full response arrived."""


# --------------------------------------------------------------------------
# Connection


class Conn:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = SOCK_TIMEOUT,
                 tls: ssl.SSLContext | None = None):
        self.port = port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.buf = b""
        self.eof = False
        self.reset = False
        # what send_request sent, oldest first: each final answer is checked against the API
        # description (api_description.py) with the request it answers; a raw send() of bytes
        # the client did not frame itself ends the checking on this connection
        self.sent = collections.deque()
        self.checked = True

    # -- context manager
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    # -- sending
    def send(self, data: bytes):
        self.checked = False
        self.sent.clear()
        self._send(data)

    def _send(self, data: bytes):
        self.sock.settimeout(self.timeout)
        self.sock.sendall(data)

    def send_request(self, method: str, target: str, headers=None, body: bytes | None = None,
                     version: str = "HTTP/1.1", host: bool = True, length: bool | None = None):
        if self.checked:
            self.sent.append((method, target))
        self._send(build_request(method, target, headers, body, version, host, length))

    # -- receiving
    def _fill(self, deadline: float) -> bool:
        """Read more bytes into buf. False on EOF/reset."""
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed while waiting for the server")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
            self.eof = True
            self.reset = True
            return False
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _read_until(self, marker: bytes, deadline: float, limit: int = 1 << 20) -> bytes:
        while True:
            i = self.buf.find(marker)
            if i >= 0:
                out = self.buf[:i + len(marker)]
                self.buf = self.buf[i + len(marker):]
                return out
            if len(self.buf) > limit:
                raise AssertionError(f"no {marker!r} within {limit} bytes: {self.buf[:200]!r}")
            if not self._fill(deadline):
                how = "reset (RST)" if self.reset else "closed (EOF)"
                raise ConnClosed(f"connection {how} while waiting for {marker!r}; "
                                 f"have {self.buf[:300]!r}")

    def _read_exact(self, n: int, deadline: float) -> bytes:
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise ConnClosed(f"connection closed after {len(self.buf)} of {n} body bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, method: str = "GET", timeout: float | None = None) -> Response:
        """Read exactly one response (interim 1xx responses are returned too)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        head = self._read_until(b"\r\n\r\n", deadline)
        lines = head[:-4].split(b"\r\n")
        m = re.match(rb"^(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        if not m:
            raise AssertionError(f"malformed status line {lines[0]!r}")
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1")
        headers = []
        for line in lines[1:]:
            if b":" not in line:
                raise AssertionError(f"malformed response header line {line!r}")
            k, v = line.split(b":", 1)
            if k != k.strip() or not k:
                raise AssertionError(f"malformed response header name {k!r}")
            headers.append((k.decode("latin-1"), v.strip(b" \t").decode("latin-1")))
        resp = Response(version, status, reason, headers, b"", head)
        if 100 <= status < 200 or status in (204, 304) or method.upper() == "HEAD":
            return self._checked(resp)
        te = resp.header("transfer-encoding")
        cl = resp.header_all("content-length")
        if te is not None:
            if te.split(",")[-1].strip().lower() != "chunked":
                raise AssertionError(f"response with non-chunked Transfer-Encoding: {te!r}")
            if cl:
                raise AssertionError("response has both Content-Length and Transfer-Encoding")
            resp.body = self._read_chunked(deadline)
        elif cl:
            if len(set(cl)) != 1 or not cl[0].isdigit():
                raise AssertionError(f"bad response Content-Length {cl!r}")
            resp.body = self._read_exact(int(cl[0]), deadline)
        else:
            # close-delimited body
            while self._fill(deadline):
                pass
            resp.body, self.buf = self.buf, b""
            resp.close_delimited = True
        return self._checked(resp)

    def _checked(self, resp: Response) -> Response:
        """A final answer to a request of send_request, checked against the API description."""
        if resp.status >= 200 and self.checked and self.sent:
            method, target = self.sent.popleft()
            api_description.check_answer(method, target, resp.status, resp.header("content-type"), resp.body)
        return resp

    def _read_chunked(self, deadline: float) -> bytes:
        body = b""
        while True:
            line = self._read_until(b"\r\n", deadline)[:-2]
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self._read_until(b"\r\n", deadline) != b"\r\n":
                    pass
                return body
            body += self._read_exact(size, deadline)
            if self._read_exact(2, deadline) != b"\r\n":
                raise AssertionError("chunk not followed by CRLF")

    def read_final(self, method: str = "GET", timeout: float | None = None) -> Response:
        """Read a response, skipping interim 1xx responses."""
        while True:
            r = self.read_response(method, timeout)
            if r.status >= 200:
                return r

    def request(self, method: str, target: str, headers=None, body: bytes | None = None,
                version: str = "HTTP/1.1", host: bool = True, length: bool | None = None,
                timeout: float | None = None) -> Response:
        self.send_request(method, target, headers, body, version, host, length)
        return self.read_final(method, timeout)

    # convenience
    def get(self, target, headers=None):
        return self.request("GET", target, headers)

    def head(self, target, headers=None):
        return self.request("HEAD", target, headers)

    def put(self, target, body: bytes = b"", headers=None):
        return self.request("PUT", target, headers, body)

    def delete(self, target, headers=None):
        return self.request("DELETE", target, headers)

    def closed_by_peer(self, timeout: float = SOCK_TIMEOUT) -> bool:
        """True if the peer closes (EOF or reset) within timeout without sending
        more bytes. Raises AssertionError if unexpected bytes arrive."""
        deadline = time.monotonic() + timeout
        while True:
            if self.buf:
                raise AssertionError(f"unexpected bytes from server: {self.buf[:300]!r}")
            try:
                if not self._fill(deadline):
                    return True
            except (socket.timeout, TimeoutError):
                return False

    def wait_closed_or_data(self, timeout: float) -> tuple[bool, bytes]:
        """Wait until EOF/reset or timeout; return (closed, bytes received)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self._fill(deadline):
                    return True, self.buf
            except (socket.timeout, TimeoutError):
                return False, self.buf


def build_request(method: str, target: str, headers=None, body: bytes | None = None,
                  version: str = "HTTP/1.1", host: bool = True,
                  length: bool | None = None) -> bytes:
    """Build request bytes. headers: list of (name, value) or dict.
    length: add Content-Length (default: when a body is given, or for PUT)."""
    hs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    names = {k.lower() for k, _ in hs}
    out = [f"{method} {target} {version}".encode("latin-1")]
    if host and "host" not in names:
        out.append(b"Host: 127.0.0.1")
    if length is None:
        length = (body is not None or method == "PUT") and \
            "content-length" not in names and "transfer-encoding" not in names
    if length:
        out.append(f"Content-Length: {len(body or b'')}".encode())
    for k, v in hs:
        k = k.encode("latin-1") if isinstance(k, str) else k
        v = v.encode("latin-1") if isinstance(v, str) else v
        out.append(k + b": " + v)
    return b"\r\n".join(out) + b"\r\n\r\n" + (body or b"")


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\n\r\n"


# --------------------------------------------------------------------------
# Server processes

_live = []


@atexit.register
def kill_leftovers():
    for p in list(_live):
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass


class ServerError(AssertionError):
    pass


def tls_mode() -> bool:
    """PERCORE_TEST_TLS=1: the suite's servers also listen for HTTPS and conn() speaks it, so the
    HTTP contract tests run again over TLS."""
    return os.environ.get("PERCORE_TEST_TLS") == "1"


_suite_cert = None


def suite_certificate():
    """A self-signed P-256 certificate for localhost/127.0.0.1, made once per test process."""
    global _suite_cert
    if _suite_cert is None:
        folder = tempfile.mkdtemp(prefix="percore-it-tls-")
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        _suite_cert = (cert, key)
    return _suite_cert


class Server:
    """A running `percore serve`.  Use start_server() or the context manager."""

    def __init__(self, shards: int | None = 1, args=(), data: str | None = None, env=None,
                 listen: bool = True, pass_shards: bool = True):
        self.shards = shards
        self._tmp = None
        if data is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
            data = os.path.join(self._tmp.name, "data")
        self.data = data
        cmd = [percore_bin(), "serve"]
        if listen:
            cmd += ["--listen", "127.0.0.1:0"]
        if pass_shards and shards is not None:
            cmd += ["--shards", str(shards)]
        if data:
            cmd += ["--data", data]
        cmd += list(args)
        self.tls_context = None
        if tls_mode() and listen and "--tls-listen" not in cmd:
            cert, key = suite_certificate()
            cmd += ["--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key]
            self.tls_context = ssl.create_default_context(cafile=cert)
        self.cmd = cmd
        self.stderr_file = tempfile.TemporaryFile(prefix="percore-stderr-")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr_file, env=server_env(env))
        _live.append(self.proc)
        self.stdout_rest = b""
        self.ready_line = None
        self.port = None
        self._drain = None
        self.returncode = None

    def stderr(self) -> str:
        # pread: the server writes through the same open file (its offset shared), so a seek here
        # while it runs (a test polling for a log line) would make its next line overwrite the start
        fd = self.stderr_file.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")

    def wait_ready(self, timeout: float = START_TIMEOUT):
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        data = b""
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ServerError(f"no ready line within {timeout}s; cmd={self.cmd} "
                                  f"stdout={data!r} stderr={self.stderr()[-2000:]!r}")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                rc = self.proc.wait(timeout=5)
                raise ServerError(f"server exited ({rc}) before ready; cmd={self.cmd} "
                                  f"stdout={data!r} stderr={self.stderr()[-2000:]!r}")
            data += chunk
        line, rest = data.split(b"\n", 1)
        self.ready_line = line.decode("utf-8", "replace")
        self.stdout_rest = rest
        m = READY_RE.match(self.ready_line)
        if not m:
            self.kill()
            raise ServerError(f"ready line does not match the SPEC: {self.ready_line!r}")
        self.port = int(m.group("port"))
        self.tls_port = int(m.group("tls_port")) if m.group("tls_port") else None
        self.reported_shards = int(m.group("shards"))
        # keep draining stdout so that the server can never block on it
        self._drain = threading.Thread(target=self._drain_stdout, daemon=True)
        self._drain.start()
        return self

    def _drain_stdout(self):
        try:
            while True:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    return
                self.stdout_rest += chunk
        except OSError:
            return

    def conn(self, timeout: float = SOCK_TIMEOUT) -> Conn:
        """A client connection: over HTTPS in the TLS pass (PERCORE_TEST_TLS=1), else plain."""
        if self.tls_context is not None:
            return Conn(self.tls_port, timeout=timeout, tls=self.tls_context)
        return Conn(self.port, timeout=timeout)

    def send_signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Send sig and wait; returns the exit code (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.returncode = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.returncode = None
        else:
            self.returncode = self.proc.returncode
        if self._drain:
            self._drain.join(timeout=2)
        if self.proc in _live:
            _live.remove(self.proc)
        return self.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc in _live:
            _live.remove(self.proc)

    def cleanup(self):
        self.kill()
        try:
            self.proc.stdout.close()
        except OSError:
            pass
        self.stderr_file.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def stop_and_check(self, testcase: unittest.TestCase | None = None):
        rc = self.stop()
        msg = (f"server did not exit 0 within {STOP_TIMEOUT}s after SIGTERM (rc={rc}); "
               f"stderr tail: {self.stderr()[-1500:]!r}")
        if rc != 0:
            if testcase is not None:
                testcase.fail(msg)
            raise ServerError(msg)


def start_server(shards: int | None = 1, args=(), data=None, env=None) -> Server:
    s = Server(shards=shards, args=args, data=data, env=env)
    try:
        return s.wait_ready()
    except BaseException:
        s.cleanup()
        raise


def bearer(token: str) -> dict:
    """The Authorization field of a bearer token (SPEC 7)."""
    return {"Authorization": f"Bearer {token}"}


def admin_token_of(server) -> str:
    """The server admin token a server with auth on wrote into its data directory (SPEC 7)."""
    with open(os.path.join(server.data, "admin.token")) as f:
        return f.read().strip()


def run_cli(args, env=None, timeout: float = 10.0):
    """Run the binary with args; returns CompletedProcess (kills it on timeout)."""
    try:
        return subprocess.run([percore_bin()] + list(args), stdin=subprocess.DEVNULL,
                              capture_output=True, env=server_env(env), timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"`percore {' '.join(args)}` did not exit within {timeout}s "
                             f"(stdout={e.stdout!r} stderr={e.stderr!r})")


def stats_total(server: Server, field: str, headers=None) -> float:
    """The sum over the shards of one field of GET /_stats (asked on a connection of its own)."""
    with server.conn() as c:
        r = c.get("/_stats", headers)
    if r.status != 200:
        raise AssertionError(f"/_stats: {r}")
    return sum(shard[field] for shard in r.json()["shards"])


def sanitized_build() -> bool:
    """The binary runs under a sanitizer (`percore version` says so): its memory use is not the
    server's own (ASan keeps freed memory in quarantine, TSan shadows every byte), and the
    sanitizer runtimes need file descriptors of their own."""
    return b"sanitizer" in run_cli(["version"]).stdout


# --------------------------------------------------------------------------
# Test base classes


class ServerTestCase(unittest.TestCase):
    """One server per test class, with SHARDS shards and SERVER_ARGS.

    SHARDS None -> PERCORE_TEST_SHARDS (default 1)."""

    SHARDS: int | None = None
    SERVER_ARGS: tuple = ()
    server: Server

    @classmethod
    def shard_count(cls) -> int:
        return cls.SHARDS if cls.SHARDS is not None else env_shards()

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = start_server(cls.shard_count(), cls.SERVER_ARGS)

    @classmethod
    def tearDownClass(cls):
        srv = cls.server
        try:
            srv.stop_and_check()
        finally:
            srv.cleanup()
        super().tearDownClass()

    def setUp(self):
        self._conns = []
        self.app = unique("a")

    def tearDown(self):
        for c in self._conns:
            c.close()

    # helpers
    def conn(self, timeout: float = SOCK_TIMEOUT) -> Conn:
        c = self.server.conn(timeout)
        self._conns.append(c)
        return c

    def path(self, key: str, app: str | None = None) -> str:
        return f"/{app or self.app}/{q(key)}"

    def assert_json_error(self, r: Response, status: int, method: str = "GET"):
        self.assertEqual(r.status, status, r)
        if method == "HEAD" or status in (204, 304):
            self.assertEqual(r.body, b"")
            return
        ct = r.header("content-type", "")
        self.assertTrue(ct.lower().startswith("application/json"),
                        f"error answer Content-Type {ct!r}, want application/json: {r}")
        try:
            doc = r.json()
        except ValueError as e:
            self.fail(f"error body is not JSON ({e}): {r}")
        self.assertIsInstance(doc, dict, r)
        self.assertIn("error", doc, r)
        self.assertIsInstance(doc["error"], str, r)

    def assert_framing_error(self, c: Conn, r: Response, status: int):
        """An error that breaks framing: status, JSON body, Connection: close, closed."""
        self.assert_json_error(r, status)
        self.assertTrue(r.wants_close, f"{status} must carry Connection: close: {r}")
        self.assertTrue(c.closed_by_peer(), f"server did not close after {status}")

    def assert_still_open(self, c: Conn):
        """The connection still answers a request."""
        r = c.get("/_health")
        self.assertEqual(r.status, 200, r)

    def assert_allow(self, r: Response, methods: set[str]):
        allow = r.header("allow")
        self.assertIsNotNone(allow, f"405 without Allow: {r}")
        got = {m.strip().upper() for m in allow.split(",") if m.strip()}
        self.assertEqual(got, methods, f"Allow: {allow!r}")


class AdminTestCase(ServerTestCase):
    """A server with --auth on (and SERVER_ARGS after it); `admin` is its admin token and
    as_admin() sends one request with it on a connection of its own (a refused body may close one)."""

    SERVER_ARGS: tuple = ("--auth", "on")
    admin: str

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.admin = admin_token_of(cls.server)

    def as_admin(self, method: str, target: str, body: bytes | None = None):
        with self.server.conn() as c:
            return c.request(method, target, bearer(self.admin), body)

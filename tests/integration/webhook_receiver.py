#!/usr/bin/env python3
"""A real webhook receiver for the delivery tests (SPEC §9): a separate process, standard library only.

usage: webhook_receiver.py --record FILE [--script FILE] [--events FILE] [--host HOST] [--port PORT]
                           [--cert CERT --key KEY]

* Listens on HOST:PORT (default 127.0.0.1:0) and prints one line first,
  ``webhook_receiver listening on http://127.0.0.1:PORT`` (``https://`` with --cert/--key, served
  with the stdlib ssl module, TLS 1.2 and 1.3), then nothing more on stdout. SIGTERM or SIGINT
  stop it with exit status 0.
* HTTP/1.1 with keep-alive: many requests per connection, one thread per connection. Request bodies
  by Content-Length or chunked; ``Expect: 100-continue`` is answered.
* --record FILE: every request, as one JSON line, appended and flushed as soon as the request is
  read (before it is answered, so a request that is never answered is recorded too)::

      {"seq": 1, "conn": 1, "conn_request": 1, "arrival": 1700000000.123, "method": "POST",
       "path": "/hook", "version": "HTTP/1.1", "headers": [["Host", "..."], ...],
       "body_base64": "...", "peer": "127.0.0.1:40000", "tls": false,
       "step": 0, "action": {...}}

  seq counts requests over the process, conn the connections (in accept order), conn_request the
  requests on that connection (a second request on conn 1 shows keep-alive); arrival is time.time()
  once the whole request was read; step is the index in the script's "steps" that answered it
  (null: "default"); action is what the receiver did. tests/tools/verify_webhook.mjs reads this file.
* --events FILE: connection events as JSON lines, flushed each: {"event": "connect" | "tls_failed" |
  "closed", "conn": N, "time": T, "peer": "...", "error": "..." (tls_failed)}.
* --script FILE: how to answer, reread at every request (write it atomically: a temporary file and
  rename; a missing file answers 200)::

      {"default": ACTION, "steps": [ACTION, ...]}

  The n-th request since the file's content last changed is answered by steps[n-1], and once the
  steps are used up by "default" (itself default {"status": 200}). An ACTION (every field optional):

      status      the answer's status (default 200); a 3xx without a Location header gets
                  "Location: /redirected"
      headers     {name: value} added to the answer
      body        the answer's body, text (default empty)
      delay       seconds to wait before answering (or before the other behaviours below)
      trickle     true: send the whole answer (status line, headers, body) one byte at a time,
                  trickle_interval seconds apart (default 1)
      huge        true: answer the status with a body that never ends, 1 MiB after 1 MiB until the
                  client closes; huge_framing "chunked" (default), "close" (no length, ends at close)
                  or "length" (a Content-Length of 1 TiB)
      hang        true: never answer and never close (until the client closes or the receiver stops)
      close       true: close the connection without answering
      keep_alive  false: answer with "Connection: close" and close (default: keep the connection
                  open unless the client asked to close)

  A script that is no JSON object answers 500 and says why on stderr.

Tests use the ``Receiver`` class below: it starts this file as a subprocess and reads the records.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import threading
import time

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 256 * 1024 * 1024
HUGE_PIECE = b"x" * (1024 * 1024)
REASONS = {200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 301: "Moved Permanently",
           302: "Found", 307: "Temporary Redirect", 400: "Bad Request", 404: "Not Found",
           410: "Gone", 429: "Too Many Requests", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable"}


class Closed(Exception):
    """The client closed the connection (or broke it) while we read."""


class Script:
    """The script file, reread per request; counts the steps since its content last changed."""

    def __init__(self, path: str | None):
        self.path = path
        self.lock = threading.Lock()
        self.digest = None
        self.used = 0

    def next_action(self) -> tuple[int | None, dict]:
        text = b""
        if self.path:
            try:
                with open(self.path, "rb") as f:
                    text = f.read()
            except FileNotFoundError:
                text = b""
        with self.lock:
            digest = hashlib.sha256(text).hexdigest()
            if digest != self.digest:
                self.digest, self.used = digest, 0
            if not text.strip():
                return None, {"status": 200}
            try:
                script = json.loads(text)
                if not isinstance(script, dict):
                    raise ValueError("the script is not a JSON object")
                steps = script.get("steps") or []
                if self.used < len(steps):
                    self.used += 1
                    return self.used - 1, dict(steps[self.used - 1])
                return None, dict(script.get("default") or {"status": 200})
            except (ValueError, TypeError) as e:
                print(f"webhook_receiver: script {self.path}: {e}", file=sys.stderr, flush=True)
                return None, {"status": 500, "body": f"bad receiver script: {e}\n"}


class JsonLines:
    def __init__(self, path: str | None):
        self.file = open(path, "a", encoding="utf-8") if path else None
        self.lock = threading.Lock()

    def write(self, obj: dict):
        if self.file is None:
            return
        with self.lock:
            self.file.write(json.dumps(obj, separators=(",", ":")) + "\n")
            self.file.flush()


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, script: Script, record: JsonLines, events: JsonLines,
                 tls: ssl.SSLContext | None):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6  # --host ::1
        super().__init__(address, Handler)
        self.script, self.record, self.events, self.tls = script, record, events, tls
        self.counter_lock = threading.Lock()
        self.seq = 0
        self.conns = 0

    def next_seq(self) -> int:
        with self.counter_lock:
            self.seq += 1
            return self.seq

    def next_conn(self) -> int:
        with self.counter_lock:
            self.conns += 1
            return self.conns


class Handler(socketserver.BaseRequestHandler):
    server: Server

    def setup(self):
        self.sock = self.request
        self.buf = b""
        self.conn = self.server.next_conn()
        self.peer = "%s:%d" % self.client_address[:2]

    def event(self, kind: str, **more):
        self.server.events.write({"event": kind, "conn": self.conn, "time": time.time(),
                                  "peer": self.peer, **more})

    # --- reading

    def fill(self):
        try:
            data = self.sock.recv(65536)
        except (OSError, ssl.SSLError) as e:
            raise Closed(str(e)) from e
        if not data:
            raise Closed("end of stream")
        self.buf += data

    def read_line(self, limit: int = MAX_HEAD_BYTES) -> bytes:
        while b"\r\n" not in self.buf:
            if len(self.buf) > limit:
                raise ValueError("line too long")
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_request(self):
        line = self.read_line()
        while line == b"":  # stray CRLF between requests (RFC 9112 §2.2)
            line = self.read_line()
        parts = line.decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ValueError(f"bad request line {line[:100]!r}")
        method, path, version = parts
        headers, size = [], 0
        while True:
            h = self.read_line()
            size += len(h) + 2
            if size > MAX_HEAD_BYTES:
                raise ValueError("head too large")
            if h == b"":
                break
            name, sep, value = h.decode("latin-1").partition(":")
            if not sep or not name or name != name.strip():
                raise ValueError(f"bad header line {h[:100]!r}")
            headers.append([name, value.strip()])
        lower = {}
        for name, value in headers:
            lower.setdefault(name.lower(), []).append(value)
        if "100-continue" in (v.lower() for v in lower.get("expect", [])):
            self.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = b""
        if any("chunked" in v.lower() for v in lower.get("transfer-encoding", [])):
            chunks = []
            total = 0
            while True:
                size_line = self.read_line().split(b";", 1)[0].strip()
                n = int(size_line, 16)
                if n == 0:
                    while self.read_line() != b"":  # trailers
                        pass
                    break
                total += n
                if total > MAX_BODY_BYTES:
                    raise ValueError("body too large")
                chunks.append(self.read_exact(n))
                if self.read_exact(2) != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
            body = b"".join(chunks)
        elif "content-length" in lower:
            lengths = set(lower["content-length"])
            if len(lengths) != 1 or not next(iter(lengths)).isdigit():
                raise ValueError(f"bad Content-Length {lower['content-length']}")
            n = int(next(iter(lengths)))
            if n > MAX_BODY_BYTES:
                raise ValueError("body too large")
            body = self.read_exact(n)
        wants_close = (version == "HTTP/1.0" and "keep-alive" not in ",".join(lower.get("connection", [])).lower()) \
            or "close" in ",".join(lower.get("connection", [])).lower()
        return method, path, version, headers, body, wants_close

    # --- writing

    def send_all(self, data: bytes):
        try:
            self.sock.sendall(data)
        except (OSError, ssl.SSLError) as e:
            raise Closed(str(e)) from e

    def wait_for_close(self):
        """Neither answers nor closes: holds the connection until the client closes it."""
        while True:
            readable, _, _ = select.select([self.sock], [], [], 1.0)
            if readable or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
                try:
                    if not self.sock.recv(65536):
                        return
                except (OSError, ssl.SSLError):
                    return

    def answer(self, action: dict, close: bool):
        delay = float(action.get("delay", 0) or 0)
        if delay > 0:
            time.sleep(delay)   # the script's delay: a slow receiver on purpose
        if action.get("close"):
            raise Closed("closed without answering (script)")
        if action.get("hang"):
            self.wait_for_close()
            raise Closed("client closed a hung request")
        status = int(action.get("status", 200))
        reason = REASONS.get(status, "Status")
        headers = dict(action.get("headers") or {})
        if 300 <= status < 400 and not any(k.lower() == "location" for k in headers):
            headers["Location"] = "/redirected"
        if action.get("huge"):
            framing = action.get("huge_framing", "chunked")
            head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/octet-stream\r\n"
            if framing == "chunked":
                head += "Transfer-Encoding: chunked\r\n"
                piece = b"%x\r\n" % len(HUGE_PIECE) + HUGE_PIECE + b"\r\n"
            elif framing == "length":
                head += f"Content-Length: {1 << 40}\r\n"
                piece = HUGE_PIECE
            else:
                head += "Connection: close\r\n"
                piece = HUGE_PIECE
            for k, v in headers.items():
                head += f"{k}: {v}\r\n"
            self.send_all((head + "\r\n").encode("latin-1"))
            while True:
                self.send_all(piece)  # until the client closes: Closed ends it
        body = str(action.get("body", "")).encode("utf-8")
        close = close or action.get("keep_alive", True) is False
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
        if "content-type" not in (k.lower() for k in headers) and body:
            head += "Content-Type: text/plain; charset=utf-8\r\n"
        for k, v in headers.items():
            head += f"{k}: {v}\r\n"
        if close:
            head += "Connection: close\r\n"
        data = (head + "\r\n").encode("latin-1") + body
        if action.get("trickle"):
            interval = float(action.get("trickle_interval", 1.0))
            for i in range(len(data)):
                self.send_all(data[i:i + 1])
                if i + 1 < len(data):
                    time.sleep(interval)   # the script's trickle: a slow receiver on purpose
        else:
            self.send_all(data)
        if close:
            raise Closed("answered with Connection: close")

    def handle(self):
        self.event("connect")
        if self.server.tls is not None:
            try:
                self.sock.settimeout(30)
                self.sock.do_handshake()
                self.sock.settimeout(None)
            except (OSError, ssl.SSLError) as e:
                self.event("tls_failed", error=str(e))
                return
        n = 0
        try:
            while True:
                try:
                    method, path, version, headers, body, wants_close = self.read_request()
                except ValueError as e:
                    self.send_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    print(f"webhook_receiver: conn {self.conn}: {e}", file=sys.stderr, flush=True)
                    return
                n += 1
                step, action = self.server.script.next_action()
                self.server.record.write({
                    "seq": self.server.next_seq(), "conn": self.conn, "conn_request": n,
                    "arrival": time.time(), "method": method, "path": path, "version": version,
                    "headers": headers, "body_base64": base64.b64encode(body).decode("ascii"),
                    "peer": self.peer, "tls": self.server.tls is not None, "step": step,
                    "action": action})
                self.answer(action, wants_close)
        except Closed:
            pass
        finally:
            self.event("closed")

    def finish(self):
        try:
            self.sock.close()
        except OSError:
            pass


def serve(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="a scripted webhook receiver for percore's tests")
    p.add_argument("--record", required=True, help="JSON lines file of received requests")
    p.add_argument("--script", help="JSON file of how to answer, reread per request")
    p.add_argument("--events", help="JSON lines file of connection events")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", help="PEM certificate chain (HTTPS)")
    p.add_argument("--key", help="PEM private key (HTTPS)")
    args = p.parse_args(argv)
    if bool(args.cert) != bool(args.key):
        p.error("--cert and --key go together")
    tls = None
    if args.cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.minimum_version = ssl.TLSVersion.TLSv1_2
        tls.load_cert_chain(args.cert, args.key)
    server = Server((args.host, args.port), Script(args.script), JsonLines(args.record),
                    JsonLines(args.events), tls)
    if tls is not None:
        # the handshake happens in the connection's thread (Handler.handle), so a client that
        # stalls it holds only its own thread
        server.socket = tls.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    host, port = server.server_address[:2]
    host = f"[{host}]" if ":" in host else host
    print(f"webhook_receiver listening on {'https' if tls else 'http'}://{host}:{port}", flush=True)

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


# --------------------------------------------------------------------------------------------------
# For tests: the receiver as a subprocess


class Receiver:
    """Starts webhook_receiver.py as a subprocess on 127.0.0.1:0 in a temporary folder of its own.

        with Receiver() as r:                      # or Receiver(cert=..., key=...) for HTTPS
            r.script(steps=[{"status": 500}], default={"status": 200})
            ... point percore at r.url + "/hook" ...
            requests = r.wait_for(2)               # the records, as dicts
        # leaving the block stops it (SIGTERM) and deletes its folder unless keep_files=True

    r.record_path is the JSON lines file for tests/tools/verify_webhook.mjs; r.events() the
    connection events.
    """

    def __init__(self, cert: str | None = None, key: str | None = None, start_timeout: float = 10.0,
                 keep_files: bool = False, host: str = "127.0.0.1"):
        self.keep_files = keep_files  # else stop() deletes the records with the folder
        self.folder = tempfile.mkdtemp(prefix="percore-receiver-")
        self.record_path = os.path.join(self.folder, "requests.jsonl")
        self.script_path = os.path.join(self.folder, "script.json")
        self.events_path = os.path.join(self.folder, "events.jsonl")
        cmd = [sys.executable, os.path.abspath(__file__), "--record", self.record_path,
               "--script", self.script_path, "--events", self.events_path, "--host", host]
        if cert:
            cmd += ["--cert", cert, "--key", key]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True)
        line = self._first_line(start_timeout)
        prefix = "webhook_receiver listening on "
        if not line.startswith(prefix):
            self.proc.kill()
            raise RuntimeError(f"webhook_receiver did not start: {line!r}")
        self.url = line[len(prefix):].strip()
        self.port = int(self.url.rsplit(":", 1)[1])

    def _first_line(self, timeout: float) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.proc.kill()
            raise RuntimeError(f"webhook_receiver printed nothing within {timeout} s")
        return self.proc.stdout.readline()

    def script(self, default: dict | None = None, steps: list[dict] | None = None):
        """Replaces the script (atomically); its steps count from the next request."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"default": default or {"status": 200}, "steps": steps or [],
                       "written": time.time()}, f)  # "written": a rewrite of the same script restarts its steps
        os.replace(tmp, self.script_path)

    @staticmethod
    def _read_lines(path: str) -> list[dict]:
        try:
            with open(path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def requests(self) -> list[dict]:
        return self._read_lines(self.record_path)

    def events(self) -> list[dict]:
        return self._read_lines(self.events_path)

    def wait_for(self, n: int, timeout: float = 10.0) -> list[dict]:
        """The records once there are at least n; AssertionError after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.requests()
            if len(got) >= n:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"webhook_receiver: {len(got)} requests after {timeout} s, expected {n}")
            time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        if not self.keep_files:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))

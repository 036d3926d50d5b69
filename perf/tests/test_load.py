"""Smoke test of perf/load/percore-load against the real server (1 shard per the suite's setting).

percore-load lives next to the server in the build tree: <build>/shards/percore ->
<build>/perf/load/percore-load.  The test is skipped when it has not been built.

What percore-load counts as expected (see perf/load/http_client_connection.cpp):
GET -> 200 with a body of --size bytes (404 too without --prepare); PUT -> 201/204, and with
--if-match also 412 (a race between connections on one key), counted as precondition_failed.
--path PATH: GET PATH -> 200 with a Content-Length body of any length.
--style etcd: POST /v3/kv/put and /v3/kv/range -> 200 with a Content-Length body of any length;
tested against a small fake etcd JSON gateway (FakeEtcd below), not against percore.
--header 'Name: value' fields go on every request of every style; a fake document server
(FakeDocuments below) records what each request carried, since percore ignores unknown fields.
Everything else is a wrong answer, so every run here must report wrong == 0.
"""
import base64
import http.server
import json
import os
import re
import subprocess
import threading
import unittest

from percore_client import env_shards, percore_bin, start_server, unique

LOAD_BIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(percore_bin()))),
                        "perf", "load", "percore-load")




class FakeEtcd:
    """etcd v3's JSON gateway, as far as percore-load uses it: POST /v3/kv/put and /v3/kv/range
    with {"key": base64, ["value": base64]}. Checks every request against what percore-load must
    send (key = <app>/k<digits> with digits < keys, value = size bytes of 'x'), records the decoded
    keys, and answers 200 with a JSON body and Content-Length (400 with the reason when a check
    fails, so percore-load counts a wrong answer)."""

    def __init__(self, app: str, keys: int, size: int):
        self.key_re = re.compile(re.escape(app) + r"/k([0-9]+)")
        self.keys = keys
        self.value = b"x" * size
        self.lock = threading.Lock()
        self.puts: list[str] = []
        self.ranges: list[str] = []
        self.errors: list[str] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status: int, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                error = fake.check(self.path, self.headers.get("Content-Type"), raw)
                if error:
                    with fake.lock:
                        fake.errors.append(error)
                    self.answer(400, {"error": error})
                else:
                    self.answer(200, {"header": {"revision": "1"}})

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def check(self, path: str, content_type, raw: bytes):
        """None when the request is what percore-load must send (and records it), else why not."""
        if path not in ("/v3/kv/put", "/v3/kv/range"):
            return f"unexpected path {path}"
        if content_type != "application/json":
            return f"unexpected Content-Type {content_type}"
        try:
            doc = json.loads(raw)
            key = base64.b64decode(doc["key"], validate=True).decode()
            value = base64.b64decode(doc["value"], validate=True) if "value" in doc else None
        except (ValueError, KeyError, TypeError) as e:
            return f"bad body {raw[:100]!r}: {e}"
        m = self.key_re.fullmatch(key)
        if not m or int(m.group(1)) >= self.keys:
            return f"unexpected key {key!r}"
        if path == "/v3/kv/put":
            if set(doc) != {"key", "value"} or value != self.value:
                return f"bad put of {key!r}: {sorted(doc)}, value of {len(value or b'')} bytes"
            with self.lock:
                self.puts.append(key)
        else:
            if set(doc) != {"key"}:
                return f"bad range of {key!r}: {sorted(doc)}"
            with self.lock:
                self.ranges.append(key)
        return None

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class FakeDocuments:
    """percore's document API as far as percore-load uses it: GET /APP/kN -> 200 with `size`
    bytes, PUT /APP/kN -> 201, GET of any other path -> 200 with a small body. Records the
    header fields of every request, as (name, value) pairs."""

    def __init__(self, size: int):
        self.body = b"y" * size
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, list]] = []   # (method, path, headers)
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def record(self):
                with fake.lock:
                    fake.seen.append((self.command, self.path, list(self.headers.items())))

            def do_GET(self):
                self.record()
                body = fake.body if re.fullmatch(r"/[a-z0-9_-]+/k[0-9]+", self.path) else b"{}"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.record()
                self.send_response(201)
                self.send_header("ETag", '"1"')
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@unittest.skipUnless(os.access(LOAD_BIN, os.X_OK), f"percore-load not built at {LOAD_BIN}")
class TestLoadGenerator(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = start_server(env_shards())

    @classmethod
    def tearDownClass(cls):
        cls.server.stop_and_check()
        cls.server.cleanup()

    def run_load(self, *args, duration="1", app=None, port=None, keys="200"):
        cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{port or self.server.port}",
               "--duration", duration, "--json", "-", "--app", app or unique("load"),
               "--keys", keys, *args]
        p = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, f"{cmd}: {p.stderr.decode(errors='replace')}")
        r = json.loads(p.stdout)
        self.assertIn(r["style"], ("percore", "etcd"), r)
        self.assertIn("path", r)
        self.assertGreater(r["requests"], 0, r)
        self.assertGreater(r["answered"], 0, r)
        self.assertEqual(r["wrong"], 0, r)
        self.assertEqual(r["connect_errors"], 0, r)
        self.assertEqual(r["io_errors"], 0, r)
        self.assertEqual(r["status"]["5xx"], 0, r)
        self.assertEqual(r["latency_us"]["count"], r["answered"], r)
        lat = r["latency_us"]
        self.assertLessEqual(lat["p50"], lat["p99"])
        self.assertLessEqual(lat["p99"], lat["max"])
        self.assertGreaterEqual(r["cpu"]["user_s"] + r["cpu"]["system_s"], 0.0)
        return r

    def assert_all_2xx(self, r):
        self.assertEqual(r["status"]["2xx"], r["answered"], r)

    def test_keep_alive_get_prepared(self):
        r = self.run_load("--prepare", "--connections", "8")
        self.assert_all_2xx(r)
        self.assertEqual(r["connects"], 8, r)

    def test_close_mode(self):
        r = self.run_load("--prepare", "--mode", "close", "--connections", "4")
        self.assert_all_2xx(r)
        # one connection per request (plus the ones still open at the end)
        self.assertGreaterEqual(r["connects"], r["answered"], r)

    def test_pipeline_8(self):
        r = self.run_load("--prepare", "--pipeline", "8", "--connections", "4", "--threads", "2")
        self.assert_all_2xx(r)

    def test_mix_with_if_match(self):
        r = self.run_load("--prepare", "--mix", "get:50,put:50", "--if-match", "--connections", "8",
                          "--size", "100")
        # 412 is the only non-2xx answer an If-Match PUT may expect; it is counted separately
        self.assertEqual(r["status"]["4xx"], r["precondition_failed"], r)
        self.assertEqual(r["status"]["2xx"] + r["precondition_failed"], r["answered"], r)

    def test_rate(self):
        r = self.run_load("--prepare", "--rate", "2000", "--connections", "16")
        self.assert_all_2xx(r)
        self.assertGreaterEqual(r["requests_per_s"], 2000 * 0.7, r)
        self.assertLessEqual(r["requests_per_s"], 2000 * 1.3, r)

    def test_fixed_rate_on_one_connection_accounts_for_every_intended_send(self):
        # B of perf/compare's apps workload: one connection at a fixed rate. Each intended send
        # is either sent (its latency counted from the intended time) or, when the server kept
        # the connection busy past the end, counted as due_unsent: none is silently dropped.
        r = self.run_load("--prepare", "--rate", "300", "--connections", "1", keys="20")
        self.assert_all_2xx(r)
        self.assertEqual(r["connects"], 1, r)
        self.assertLessEqual(abs(r["requests"] + r["due_unsent"] - 300), 2, r)
        self.assertLessEqual(r["requests_per_s"], 300 * 1.05, r)

    def test_header_on_every_request(self):
        fake = FakeDocuments(64)
        secret = "t0ken-" + unique("s")
        try:
            r = self.run_load("--header", f"Authorization: Bearer {secret}", "--header", "X-Bench:\t a b  ",
                              "--mix", "get:50,put:50", "--connections", "2", "--size", "64",
                              duration="0.3", port=fake.port, keys="10")
            lp = self.run_load("--header", "X-Bench: list", "--path", "/any/?limit=2", "--connections", "1",
                               duration="0.2", port=fake.port)
        finally:
            fake.close()
        self.assert_all_2xx(r)
        self.assertEqual(r["headers"], ["Authorization", "X-Bench"], r)   # names only, never a value
        self.assertNotIn(secret, json.dumps(r))
        seen = [x for x in fake.seen if x[1] != "/any/?limit=2"]
        self.assertEqual(len(seen), r["answered"], r)
        self.assertEqual({m for m, _, _ in seen}, {"GET", "PUT"}, seen[:3])
        for method, path, headers in seen:
            self.assertEqual([v for k, v in headers if k == "Authorization"], [f"Bearer {secret}"], (method, headers))
            self.assertEqual([v for k, v in headers if k == "X-Bench"], ["a b"], (method, headers))
            self.assertEqual(len([k for k, _ in headers if k.lower() == "host"]), 1, headers)
        listed = [h for _, p, h in fake.seen if p == "/any/?limit=2"]
        self.assertEqual(len(listed), lp["answered"], lp)
        self.assertTrue(all(("X-Bench", "list") in h for h in listed), listed[:2])

    def test_refused_headers(self):
        for value in ("NoColon", ": v", "Bad Name: v", "X\u00e9: v", "Host: x", "content-length: 3",
                      "Transfer-Encoding: chunked", "Connection: close", "X: a\r\nY: b", "X: a\nY: b",
                      "X: " + "a" * 8200):
            with self.subTest(value=value):
                cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{self.server.port}", "--duration", "1",
                       "--header", value]
                p = subprocess.run(cmd, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, 2, value)
                err = p.stderr.decode(errors="replace")
                self.assertRegex(err.splitlines()[0], r"^percore-load: --header: ", err)
                self.assertEqual(p.stdout, b"", value)
        many = [a for i in range(33) for a in ("--header", f"X-{i}: v")]
        p = subprocess.run([LOAD_BIN, "--url", f"http://127.0.0.1:{self.server.port}", "--duration", "1", *many],
                           capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"--header: at most 32", p.stderr)

    def test_path_list_page(self):
        app = unique("loadlist")
        prep = self.run_load("--prepare", "--connections", "4", duration="0.2", app=app, keys="50")
        self.assertIsNone(prep["path"], prep)
        self.assertEqual(prep["style"], "percore", prep)
        # a list page: its body length has nothing to do with --size
        path = f"/{app}/?limit=20"
        r = self.run_load("--path", path, "--connections", "4", app=app)
        self.assert_all_2xx(r)
        self.assertEqual(r["path"], path, r)
        self.assertEqual(r["mix"], {"get": 100, "put": 0}, r)

    def test_prepare_with_duration_0_writes_every_key_and_stops(self):
        app = unique("prep")
        cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{self.server.port}", "--prepare", "--duration", "0",
               "--keys", "30", "--app", app, "--json", "-"]
        p = subprocess.run(cmd, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["answered"], 30)   # with duration 0 the report is the prepare phase
        r = self.run_load(app=app, keys="30", duration="0.3")
        self.assertEqual(r["status"]["4xx"], 0, r)   # every key was there: no 404

    def test_refused_combinations(self):
        for args in (["--path", "/x/?limit=20", "--mix", "get:50,put:50"],
                     ["--mix", "get:50,put:50", "--path", "/x/?limit=20"],
                     ["--path", "/x/", "--prepare"],
                     ["--path", "/x/", "--if-match"],
                     ["--path", "/x/", "--style", "etcd"],
                     ["--path", "no-slash"],
                     ["--path", "/" + "a" * 512],
                     ["--path", "/a b"],
                     ["--style", "etcd", "--if-match"],
                     ["--style", "redis"],
                     ["--duration", "0"]):
            with self.subTest(args=args):
                cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{self.server.port}",
                       *(["--duration", "1"] if "--duration" not in args else []), *args]
                p = subprocess.run(cmd, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
                self.assertNotEqual(p.returncode, 0, args)
                err = p.stderr.decode(errors="replace")
                self.assertRegex(err.splitlines()[0], r"^percore-load: --(path|style|if-match|duration): ", err)
                self.assertEqual(p.stdout, b"", args)

    def test_etcd_style(self):
        app, keys, size = unique("etcd"), 40, 100
        fake = FakeEtcd(app, keys, size)
        try:
            r = self.run_load("--style", "etcd", "--prepare", "--mix", "get:50,put:50",
                              "--connections", "3", "--pipeline", "2", "--size", str(size),
                              app=app, port=fake.port, keys=str(keys))
        finally:
            fake.close()
        self.assertEqual(fake.errors[:5], [], r)
        self.assert_all_2xx(r)
        self.assertEqual(r["style"], "etcd", r)
        self.assertIsNone(r["path"], r)
        # --prepare put every key once, then the mixed run put and ranged some more
        self.assertTrue({f"{app}/k{i}" for i in range(keys)} <= set(fake.puts), fake.puts[:5])
        self.assertGreater(len(fake.puts), keys, r)
        self.assertGreater(len(fake.ranges), 0, r)
        self.assertEqual(len(fake.puts) + len(fake.ranges), keys + r["answered"], r)


if __name__ == "__main__":
    unittest.main()

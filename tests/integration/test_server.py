"""SPEC sections 1 and 5: command line, ready line, signals, data directory lock,
and the server's own endpoints (/_health, /_metrics, /_stats)."""

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from percore_client import (READY_RE, ConnClosed, Conn, Server, ServerTestCase, build_request,
                            percore_bin, run_cli, server_env, start_server, env_shards,
                            stats_total, unique, wait_until)

SAMPLE_RE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?$')
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_prometheus(text: str):
    """Returns (families {name: {"help", "type"}}, samples [(name, labels, value)]).
    Raises ValueError on a line that is not valid exposition format."""
    families, samples = {}, []
    for line in text.split("\n"):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                fam = families.setdefault(parts[2], {})
                fam[parts[1].lower()] = parts[3] if len(parts) > 3 else ""
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise ValueError(f"bad sample line {line!r}")
        labels = {}
        raw = m.group("labels")
        if raw:
            pos = 0
            raw = raw.rstrip(",")
            while pos < len(raw):
                lm = LABEL_RE.match(raw, pos)
                if not lm:
                    raise ValueError(f"bad labels in {line!r}")
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        v = m.group("value")
        value = float(v.replace("+Inf", "inf").replace("-Inf", "-inf"))
        samples.append((m.group("name"), labels, value))
    return families, samples


def family_of(name: str, families) -> str | None:
    if name in families:
        return name
    for suffix in ("_total", "_bucket", "_sum", "_count", "_created"):
        if name.endswith(suffix) and name[:-len(suffix)] in families:
            return name[:-len(suffix)]
    return None


class TestEndpoints(ServerTestCase):

    def test_ready_line(self):
        line = self.server.ready_line
        m = READY_RE.match(line)
        self.assertIsNotNone(m, line)
        self.assertEqual(m.group("host"), "127.0.0.1")
        self.assertNotEqual(int(m.group("port")), 0, "the real port, not 0")
        self.assertEqual(int(m.group("shards")), self.shard_count())
        self.assertIsNone(m.group("tls_port"), "no https part without --tls-listen")

    def test_health(self):
        c = self.conn()
        r = c.get("/_health")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.header("content-type", "").startswith("application/json"), r)
        json.loads(r.body)
        self.assertLess(len(r.body), 4096)
        r = c.head("/_health")
        self.assertEqual((r.status, r.body), (200, b""))
        r = c.get("/_health?verbose=1")
        self.assertEqual(r.status, 200, r)

    def test_own_endpoints_get_head_only(self):
        c = self.conn()
        for ep in ("/_health", "/_metrics", "/_stats"):
            for method in ("PUT", "DELETE", "POST"):
                with self.subTest(ep=ep, method=method):
                    r = c.request(method, ep, body=b"" if method == "PUT" else None)
                    self.assert_json_error(r, 405)
                    self.assert_allow(r, {"GET", "HEAD"})
                    if r.wants_close:
                        self.assertTrue(c.closed_by_peer())
                        c = self.conn()
            with self.subTest(ep=ep, method="HEAD"):
                r = c.head(ep)
                self.assertEqual((r.status, r.body), (200, b""))

    def test_unknown_underscore_paths_404(self):
        c = self.conn()
        for p in ("/_anything-unknown", "/_nope/key", "/_health2", "/_", "/"):
            with self.subTest(path=p):
                self.assert_json_error(c.get(p), 404)
        self.assert_still_open(c)

    def test_metrics_format(self):
        c = self.conn()
        c.get("/_health")
        r = c.get("/_metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.header("content-type", "").startswith("text/plain"), r)
        text = r.body.decode("utf-8")
        self.assertIn("# HELP ", text)
        self.assertIn("# TYPE ", text)
        try:
            families, samples = parse_prometheus(text)
        except ValueError as e:
            self.fail(str(e))
        self.assertTrue(samples)
        for name, labels, value in samples:
            fam = family_of(name, families)
            self.assertIsNotNone(fam, f"sample {name} has no # TYPE/# HELP family")
            self.assertIn("type", families[fam], f"{fam} without # TYPE")
            self.assertIn("help", families[fam], f"{fam} without # HELP")
        types = {f["type"] for f in families.values() if "type" in f}
        self.assertLessEqual(types, {"counter", "gauge", "histogram", "summary", "untyped"})
        self.assertIn("histogram", types, "latency histograms are required")
        for fam, f in families.items():
            if f.get("type") == "histogram":
                buckets = [s for s in samples if s[0] == fam + "_bucket"]
                self.assertTrue(any(s[1].get("le") == "+Inf" for s in buckets),
                                f"histogram {fam} without le=\"+Inf\" bucket")
                self.assertTrue(any(s[0] == fam + "_count" for s in samples))
                self.assertTrue(any(s[0] == fam + "_sum" for s in samples))
        # The SPEC lists what must be there; names are free, so look for words.
        names = " ".join(families).lower()
        for word in ("request", "latency|duration|seconds", "batch", "sync",
                     "bytes", "connection", "document", "recover"):
            with self.subTest(word=word):
                self.assertRegex(names, word, f"no metric about {word!r}: {sorted(families)}")

    def request_count(self, samples, method: str, status: str) -> float:
        """Sum of counter samples with a label == method and a label == status."""
        total = 0.0
        for name, labels, value in samples:
            vals = {v.upper() for v in labels.values()}
            if method in vals and status in vals and not name.endswith(("_bucket", "_sum")):
                if name.endswith("_count") or "request" in name.lower():
                    total += value
        return total

    def metrics(self, c):
        r = c.get("/_metrics")
        self.assertEqual(r.status, 200)
        return parse_prometheus(r.body.decode("utf-8"))[1]

    def test_metrics_request_counts_increase(self):
        c = self.conn()
        # make sure the series exist
        c.put(f"/{self.app}/seed", b"x")
        c.get(f"/{self.app}/none")
        before = self.metrics(c)
        n = 5
        for i in range(n):
            self.assertEqual(c.put(f"/{self.app}/m{i}", b"x").status, 201)
            self.assertEqual(c.get(f"/{self.app}/missing{i}").status, 404)
        after = self.metrics(c)
        for method, status in (("PUT", "201"), ("GET", "404")):
            with self.subTest(method=method, status=status):
                b, a = self.request_count(before, method, status), \
                    self.request_count(after, method, status)
                self.assertGreaterEqual(a - b, n,
                                        f"{method} {status} count went {b} -> {a}; samples with "
                                        f"those labels: "
                                        f"{[s for s in after if method in s[1].values()][:10]}")

    # --- the process metrics, the build, the latency histogram by method, and promtool ---

    def metric_values(self, samples, name: str, **labels) -> list[float]:
        return [v for n, l, v in samples
                if n == name and all(l.get(k) == want for k, want in labels.items())]

    def test_metrics_pass_promtool_check(self):
        """The whole /_metrics page, every family present (each method, a 404, a 405), through
        `promtool check metrics`: its parser and its lints (names, units, suffixes)."""
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool is missing: `bash .ci/deps prometheus` installs it "
                                       "(Debian's package prometheus)")
        c = self.conn()
        self.assertEqual(c.put(f"/{self.app}/p", b"x").status, 201)
        self.assertEqual(c.get(f"/{self.app}/p").status, 200)
        self.assertEqual(c.head(f"/{self.app}/p").status, 200)
        self.assertIn(c.delete(f"/{self.app}/p").status, (200, 204))
        self.assertEqual(c.get(f"/{self.app}/p").status, 404)
        r = c.request("POST", f"/{self.app}/p", body=b"x")
        self.assertEqual(r.status, 405, r)
        if r.wants_close:
            c = self.conn()
        r = c.get("/_metrics")
        self.assertEqual(r.status, 200, r)
        p = subprocess.run([promtool, "check", "metrics"], input=r.body, capture_output=True,
                           timeout=30)
        report = (p.stdout + p.stderr).decode("utf-8", "replace")
        self.assertEqual((p.returncode, report.strip()), (0, ""),
                         f"promtool check metrics found problems:\n{report}")

    def test_metrics_process_and_build_info(self):
        samples = self.metrics(self.conn())

        def one(name, **labels):
            vals = self.metric_values(samples, name, **labels)
            self.assertEqual(len(vals), 1, f"{name}: want one process-wide sample, got {vals}")
            return vals[0]

        rss = one("process_resident_memory_bytes")
        vm = one("process_virtual_memory_bytes")
        self.assertGreater(rss, 0)
        self.assertGreaterEqual(vm, rss)
        fds, max_fds = one("process_open_fds"), one("process_max_fds")
        self.assertGreater(fds, 0)
        self.assertGreaterEqual(max_fds, fds)
        self.assertGreaterEqual(one("process_cpu_seconds_total"), 0)
        start = one("process_start_time_seconds")
        now = time.time()
        self.assertLessEqual(start, now + 2, "start time in the future")
        self.assertGreater(start, now - 3600, "start time more than an hour ago")
        build = [(l, v) for n, l, v in samples if n == "percore_build_info"]
        self.assertEqual(len(build), 1, build)
        labels, value = build[0]
        self.assertEqual(value, 1)
        self.assertEqual(set(labels), {"version", "compiler", "buildtype"}, labels)
        version = run_cli(["version"]).stdout.decode()
        self.assertRegex(labels["version"], r"^\d+\.\d+\.\d+$")
        self.assertIn(labels["version"], version, "build_info's version is `percore version`'s")
        self.assertTrue(labels["compiler"] and labels["buildtype"], labels)

    def test_metrics_latency_histogram_by_method_and_shard(self):
        c = self.conn()
        name = "percore_request_duration_seconds"
        before = self.metrics(c)
        for method in ("GET", "HEAD", "PUT", "DELETE", "OTHER"):
            for s in range(self.shard_count()):
                with self.subTest(method=method, shard=s):
                    self.assertEqual(len(self.metric_values(before, name + "_count", method=method,
                                                            shard=str(s))), 1)
                    buckets = [(l["le"], v) for n, l, v in before if n == name + "_bucket"
                               and l.get("method") == method and l.get("shard") == str(s)]
                    self.assertEqual(buckets[-1][0], "+Inf")
                    counts = [v for _, v in buckets]
                    self.assertEqual(counts, sorted(counts), "buckets are cumulative")
                    self.assertEqual(counts[-1], self.metric_values(
                        before, name + "_count", method=method, shard=str(s))[0])
        self.assertEqual(c.get(f"/{self.app}/nothing-here").status, 404)
        after = self.metrics(c)
        for method, grew in (("GET", True), ("PUT", False), ("DELETE", False)):
            with self.subTest(method=method):
                b = sum(self.metric_values(before, name + "_count", method=method))
                a = sum(self.metric_values(after, name + "_count", method=method))
                if grew:
                    # the 404 and the first /_metrics GET, at least
                    self.assertGreaterEqual(a - b, 2, f"GET latency count {b} -> {a}")
                else:
                    self.assertEqual(a, b, f"{method} latency count moved on GETs only")

    def test_metrics_per_shard(self):
        if self.shard_count() < 2:
            self.skipTest("needs several shards")
        samples = self.metrics(self.conn())
        shard_vals = set()
        for name, labels, value in samples:
            for k, v in labels.items():
                if "shard" in k.lower():
                    shard_vals.add(v)
        self.assertGreaterEqual(len(shard_vals), self.shard_count(),
                                "documents/connections per shard need a shard label")

    def stats(self, c):
        r = c.get("/_stats")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.header("content-type", "").startswith("application/json"), r)
        doc = r.json()
        self.assertIsInstance(doc, dict)
        self.assertIsInstance(doc.get("shards"), list, doc)
        self.assertEqual(len(doc["shards"]), self.shard_count(), doc)
        for sh in doc["shards"]:
            self.assertIsInstance(sh, dict)
            for f in ("documents", "connections"):
                self.assertIn(f, sh, sh)
                self.assertIsInstance(sh[f], int, sh)
                self.assertGreaterEqual(sh[f], 0, sh)
        return doc

    def test_stats(self):
        c = self.conn()
        doc = self.stats(c)
        self.assertGreaterEqual(sum(s["connections"] for s in doc["shards"]), 1)
        docs_before = sum(s["documents"] for s in doc["shards"])
        for i in range(10):
            self.assertEqual(c.put(f"/{self.app}/s{i}", b"abc").status, 201)
        docs_after = sum(s["documents"] for s in self.stats(c)["shards"])
        self.assertEqual(docs_after - docs_before, 10)
        c.delete(f"/{self.app}/s0")
        self.assertEqual(sum(s["documents"] for s in self.stats(c)["shards"]), docs_after - 1)
        r = c.head("/_stats")
        self.assertEqual((r.status, r.body), (200, b""))


class TestCommandLine(unittest.TestCase):

    def assert_usage_error(self, args, env=None):
        p = run_cli(args, env=env)
        self.assertEqual(p.returncode, 2, f"`percore {' '.join(args)}` env={env}: rc "
                         f"{p.returncode}, stderr={p.stderr!r}")
        self.assertEqual(p.stdout, b"", f"stdout must stay empty: {p.stdout!r}")
        err = p.stderr.decode("utf-8", "replace")
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, f"want exactly one line on stderr, got {err!r}")
        self.assertTrue(err.endswith("\n"), repr(err))
        self.assertGreater(len(lines[0].strip()), 5, repr(err))
        return lines[0]

    def test_version(self):
        p = run_cli(["version"])
        self.assertEqual(p.returncode, 0, p)
        self.assertIn(b"percore", p.stdout.lower())
        self.assertRegex(p.stdout.decode(), r"\d+\.\d+")

    def test_help(self):
        for args in (["help"], ["help", "serve"]):
            with self.subTest(args=args):
                p = run_cli(args)
                self.assertEqual(p.returncode, 0, p)
                out = p.stdout.decode()
                self.assertIn("serve" if args == ["help"] else "--listen", out)
        p = run_cli(["help", "serve"])
        out = p.stdout.decode()
        for opt in ("--listen", "--shards", "--data", "--durability", "--max-body",
                    "--body-budget", "--max-connections", "--idle-timeout", "--tls-listen",
                    "--tls-cert", "--tls-key"):
            self.assertIn(opt, out)

    def test_option_errors(self):
        tmpdir = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmpdir.cleanup)
        tmp = tmpdir.name
        data = ["--data", os.path.join(tmp, "d"), "--listen", "127.0.0.1:0"]
        cases = [
            ["--bogus"],
            ["--shards", "0"],
            ["--shards", "abc"],
            ["--shards", "-2"],
            ["--shards"],
            ["--max-body", "12Q"],
            ["--max-body", "K"],
            ["--max-body", "-5"],
            ["--body-budget", "1.5.3M"],
            ["--durability", "maybe"],
            ["--idle-timeout", "soon"],
            ["--max-connections", "x"],
            ["--listen", "nonsense"],
            ["--listen", "127.0.0.1:99999"],
        ]
        for extra in cases:
            with self.subTest(args=extra):
                self.assert_usage_error(["serve"] + data + extra)

    def test_option_error_from_environment(self):
        tmpdir = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmpdir.cleanup)
        tmp = tmpdir.name
        for env in ({"PERCORE_SHARDS": "zero"}, {"PERCORE_DURABILITY": "fast"},
                    {"PERCORE_MAX_BODY": "lots"}):
            with self.subTest(env=env):
                self.assert_usage_error(["serve", "--listen", "127.0.0.1:0", "--data",
                                         os.path.join(tmp, "d")], env=env)

    def test_unknown_command(self):
        self.assert_usage_error(["frobnicate"])

    def test_sigterm_exits_zero_promptly(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(sig=sig):
                s = start_server(env_shards())
                try:
                    # an idle keep-alive connection must not hold up shutdown
                    c = s.conn()
                    self.assertEqual(c.get("/_health").status, 200)
                    t = time.monotonic()
                    rc = s.stop(sig)
                    self.assertEqual(rc, 0, f"rc={rc} stderr={s.stderr()[-1000:]!r}")
                    self.assertLess(time.monotonic() - t, 5)
                    self.assertEqual(s.stdout_rest, b"", "only the ready line goes to stdout")
                    c.close()
                finally:
                    s.cleanup()

    def test_sigterm_finishes_request_in_flight(self):
        """A request whose head has arrived is finished after SIGTERM, then exit 0."""
        s = start_server(env_shards())
        try:
            c = s.conn()
            self.assertEqual(c.get("/_health").status, 200)
            c.send(build_request("PUT", "/app/inflight", {"Content-Length": "10"}, None,
                                 length=False) + b"01234")
            wait_until(lambda: stats_total(s, "body_bytes_in_flight") > 0,
                       what="the server to hold the PUT's body (its head parsed)")
            s.send_signal(signal.SIGTERM)

            def refused():
                # every shard closes its listener as it begins to stop (shard::begin_stop)
                try:
                    socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
                    return False
                except ConnectionRefusedError:
                    return True
            wait_until(refused, what="every shard to stop accepting (its shutdown begun)")
            try:
                c.send(b"56789")
                r = c.read_final()
            except (ConnClosed, OSError) as e:
                self.fail(f"request in flight dropped on SIGTERM: {e!r}")
            self.assertEqual(r.status, 201, r)
            self.assertTrue(r.wants_close, "answers during shutdown carry Connection: close")
            rc = s.stop()
            self.assertEqual(rc, 0, s.stderr()[-1000:])
        finally:
            s.cleanup()

    def test_shutdown_finishes_acknowledged_writes(self):
        """Writes acknowledged before SIGTERM are there after a restart."""
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        data = os.path.join(tmp.name, "data")
        s = start_server(env_shards(), data=data)
        try:
            c = s.conn()
            etags = {}
            for i in range(20):
                r = c.put(f"/app/k{i}", b"v%d" % i)
                self.assertEqual(r.status, 201)
                etags[i] = r.etag
            s.stop_and_check(self)
        finally:
            s.cleanup()
        s = start_server(env_shards(), data=data)
        try:
            c = s.conn()
            for i in range(20):
                r = c.get(f"/app/k{i}")
                self.assertEqual((r.status, r.body, r.etag), (200, b"v%d" % i, etags[i]))
            # ETags are never reused across restarts
            r = c.put("/app/k0", b"v0")
            self.assertNotIn(r.etag, etags.values())
            c.delete("/app/k1")
            r = c.put("/app/k1", b"v1")
            self.assertEqual(r.status, 201)
            self.assertNotIn(r.etag, etags.values())
            s.stop_and_check(self)
        finally:
            s.cleanup()
            tmp.cleanup()

    def test_data_dir_created_if_missing(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        data = os.path.join(tmp.name, "a", "b", "c")
        s = start_server(1, data=data)
        try:
            self.assertTrue(os.path.isdir(data))
            s.stop_and_check(self)
        finally:
            s.cleanup()
            tmp.cleanup()

    def test_locked_data_dir(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        data = os.path.join(tmp.name, "data")
        s = start_server(1, data=data)
        try:
            p = subprocess.run([percore_bin(), "serve", "--listen", "127.0.0.1:0", "--shards",
                                "1", "--data", data], stdin=subprocess.DEVNULL,
                               capture_output=True, env=server_env(), timeout=8)
            self.assertEqual(p.returncode, 1, p)
            self.assertEqual(p.stdout, b"", "no ready line for a locked data directory")
            err = p.stderr.decode("utf-8", "replace")
            self.assertTrue(err.strip(), "a clear message on stderr")
            self.assertTrue("lock" in err.lower() or data in err, err)
            # the first server is unharmed
            c = s.conn()
            self.assertEqual(c.get("/_health").status, 200)
            c.close()
            s.stop_and_check(self)
        finally:
            s.cleanup()
            tmp.cleanup()

    def test_unreadable_data_dir(self):
        # a regular file where the directory should be (works even as root)
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        data = os.path.join(tmp.name, "not-a-dir")
        with open(data, "w") as f:
            f.write("x")
        try:
            p = run_cli(["serve", "--listen", "127.0.0.1:0", "--shards", "1", "--data", data])
            self.assertEqual(p.returncode, 1, p)
            self.assertEqual(p.stdout, b"")
            self.assertTrue(p.stderr.strip())
        finally:
            tmp.cleanup()

    def test_environment_variables(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        data = os.path.join(tmp.name, "envdata")
        # data="" -> no --data option; everything comes from the environment
        s = Server(shards=None, args=(), data="", listen=False, pass_shards=False,
                   env={"PERCORE_LISTEN": "127.0.0.1:0", "PERCORE_SHARDS": "2",
                        "PERCORE_DATA": data, "PERCORE_MAX_BODY": "1K",
                        "PERCORE_IDLE_TIMEOUT": "1", "PERCORE_DURABILITY": "none"})
        try:
            s.wait_ready()
            self.assertEqual(s.reported_shards, 2)
            self.assertTrue(os.path.isdir(data), "PERCORE_DATA not used")
            c = s.conn()
            self.assertEqual(c.put("/app/ok", b"x" * 1024).status, 201)
            c.send(build_request("PUT", "/app/big", {"Content-Length": "1025"}, None,
                                 length=False))
            r = c.read_final()
            self.assertEqual(r.status, 413, "PERCORE_MAX_BODY=1K not applied")
            c2 = s.conn()
            self.assertEqual(c2.get("/_health").status, 200)
            closed, _ = c2.wait_closed_or_data(4)
            self.assertTrue(closed, "PERCORE_IDLE_TIMEOUT=1 not applied")
            s.stop_and_check(self)
        finally:
            s.cleanup()
            tmp.cleanup()

    def test_command_line_beats_environment(self):
        s = Server(shards=1, env={"PERCORE_SHARDS": "2", "PERCORE_LISTEN": "127.0.0.1:1"})
        try:
            s.wait_ready()
            self.assertEqual(s.reported_shards, 1)
            self.assertNotEqual(s.port, 1)
            s.stop_and_check(self)
        finally:
            s.cleanup()

    def test_size_suffixes(self):
        for size, limit in (("2K", 2048), ("1M", 1 << 20)):
            with self.subTest(size=size):
                s = start_server(1, args=("--max-body", size, "--durability", "none"))
                try:
                    c = s.conn(timeout=15)
                    r = c.put("/app/at", b"a" * limit)
                    self.assertEqual(r.status, 201, r)
                    c.send(build_request("PUT", "/app/over", {"Content-Length": str(limit + 1)},
                                         None, length=False))
                    r = c.read_final()
                    self.assertEqual(r.status, 413, r)
                    s.stop_and_check(self)
                finally:
                    s.cleanup()
        s = start_server(1, args=("--max-body", "1G", "--body-budget", "2G",
                                  "--durability", "none"))
        try:
            c = s.conn()
            c.send(build_request("PUT", "/app/g", {"Content-Length": str((1 << 30) + 1)}, None,
                                 length=False))
            r = c.read_final()
            self.assertEqual(r.status, 413, r)
            c = s.conn()
            c.send(build_request("PUT", "/app/g", {"Content-Length": str(1 << 30)}, None,
                                 length=False) + b"partial")
            closed, buf = c.wait_closed_or_data(0.5)
            self.assertFalse(buf.startswith(b"HTTP/1.1 413"), "1G body refused by --max-body 1G")
            c.close()
            s.stop_and_check(self)
        finally:
            s.cleanup()

    def test_durability_values(self):
        for mode in ("sync", "none"):
            with self.subTest(durability=mode):
                s = start_server(1, args=("--durability", mode))
                try:
                    c = s.conn()
                    r = c.put("/app/d", b"durable")
                    self.assertEqual(r.status, 201, r)
                    self.assertEqual(c.get("/app/d").body, b"durable")
                    c.close()
                    s.stop_and_check(self)
                finally:
                    s.cleanup()

    def test_shards_auto(self):
        s = start_server(None, args=("--shards", "auto"))
        try:
            want = len(os.sched_getaffinity(0))
            self.assertEqual(s.reported_shards, want)
            c = s.conn()
            r = c.get("/_stats")
            self.assertEqual(len(r.json()["shards"]), want)
            c.close()
            s.stop_and_check(self)
        finally:
            s.cleanup()

    def test_default_shards_is_auto(self):
        s = Server(shards=None, pass_shards=False)
        try:
            s.wait_ready()
            self.assertEqual(s.reported_shards, len(os.sched_getaffinity(0)))
            s.stop_and_check(self)
        finally:
            s.cleanup()


def make_cert(directory: str, name: str, cn: str):
    """Self-signed EC certificate for 127.0.0.1; returns (cert, key) paths."""
    cert, key = os.path.join(directory, name + ".crt"), os.path.join(directory, name + ".key")
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=" + cn,
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       capture_output=True, timeout=20)
    if p.returncode != 0:
        raise unittest.SkipTest(f"openssl cannot make a certificate: {p.stderr[-300:]!r}")
    return cert, key


def der_of(pem_path: str) -> bytes:
    with open(pem_path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


@unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
class TestTls(ServerTestCase):
    """--tls-listen / --tls-cert / --tls-key: same shards, same API over HTTPS;
    the certificate is reloaded on SIGHUP."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="percore-tls-")
        cls.cert, cls.key = make_cert(cls.tmp.name, "live", "first")
        cls.SERVER_ARGS = ("--tls-listen", "127.0.0.1:0", "--tls-cert", cls.cert,
                           "--tls-key", cls.key)
        try:
            super().setUpClass()
        except BaseException:
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.tmp.cleanup()

    def tls_conn(self, cafile=None) -> Conn:
        ctx = ssl.create_default_context(cafile=cafile or self.cert)
        c = Conn(self.server.tls_port, tls=ctx)
        self._conns.append(c)
        return c

    def test_ready_line_has_https(self):
        m = READY_RE.match(self.server.ready_line)
        self.assertIsNotNone(m.group("tls_port"), self.server.ready_line)
        self.assertEqual(m.group("tls_host"), "127.0.0.1")
        self.assertNotEqual(int(m.group("tls_port")), 0)
        self.assertNotEqual(int(m.group("tls_port")), self.server.port)

    def test_same_api_over_https(self):
        t = self.tls_conn()
        self.assertEqual(t.get("/_health").status, 200)
        r = t.put(f"/{self.app}/over-tls", b"secret", {"Content-Type": "text/plain"})
        self.assertEqual(r.status, 201, r)
        p = self.conn()
        g = p.get(f"/{self.app}/over-tls")
        self.assertEqual((g.status, g.body, g.etag), (200, b"secret", r.etag))
        r2 = p.put(f"/{self.app}/over-http", b"plain")
        g = t.get(f"/{self.app}/over-http")
        self.assertEqual((g.status, g.body, g.etag), (200, b"plain", r2.etag))
        doc = t.get(f"/{self.app}/").json()
        self.assertEqual([e["key"] for e in doc["keys"]], ["over-http", "over-tls"])
        self.assert_json_error(t.get(f"/{self.app}/missing"), 404)

    def test_https_keepalive_and_pipelining(self):
        t = self.tls_conn()
        data = b"".join(build_request("PUT", f"/{self.app}/p{i}", None, b"v%d" % i)
                        for i in range(10))
        data += b"".join(build_request("GET", f"/{self.app}/p{i}") for i in range(10))
        t.send(data)
        self.assertEqual([t.read_final().status for _ in range(10)], [201] * 10)
        self.assertEqual([t.read_final().body for _ in range(10)],
                         [b"v%d" % i for i in range(10)])
        big = os.urandom(300_000)
        self.assertEqual(t.put(f"/{self.app}/big", big).status, 201)
        self.assertEqual(t.get(f"/{self.app}/big").body, big)

    def test_https_framing_error(self):
        t = self.tls_conn()
        t.send(b"GET /_health HTTP/2.0\r\nHost: localhost\r\n\r\n")
        self.assert_framing_error(t, t.read_final(), 505)

    def test_plain_http_on_tls_port_gets_a_plaintext_400_then_close(self):
        # SPEC §4: a plaintext request sent to the HTTPS port gets a plaintext 400 saying so
        c = Conn(self.server.tls_port)
        self._conns.append(c)
        c.send(build_request("GET", "/_health"))
        r = c.read_final()
        self.assertEqual(r.status, 400, r)
        self.assertIn(b"HTTPS port", r.body)
        self.assertTrue(c.closed_by_peer())
        self.assertEqual(self.tls_conn().get("/_health").status, 200)
        self.assertEqual(self.conn().get("/_health").status, 200)

    def test_garbage_handshake_is_harmless(self):
        c = Conn(self.server.tls_port)
        self._conns.append(c)
        c.send(b"\x16\x03\x01\x00\x05hello" + os.urandom(200))
        c.wait_closed_or_data(2)
        self.assertEqual(self.tls_conn().get("/_health").status, 200)

    def test_curl_with_the_ca_certificate_reads_and_writes_over_https(self):
        if shutil.which("curl") is None:
            self.skipTest("needs curl")
        base = f"https://127.0.0.1:{self.server.tls_port}/{self.app}/curl"   # the certificate names 127.0.0.1
        p = subprocess.run(["curl", "-sS", "--cacert", self.cert, "-X", "PUT", "--data-binary", "from curl",
                            "-H", "Content-Type: text/plain", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                            base], capture_output=True, text=True, timeout=10)
        self.assertEqual(p.stdout, "201 1.1", p.stderr)
        p = subprocess.run(["curl", "-sS", "--cacert", self.cert, base], capture_output=True, timeout=10)
        self.assertEqual(p.stdout, b"from curl", p.stderr)

    def test_openssl_s_client_negotiates_tls_1_3_and_alpn_http_1_1(self):
        p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.server.tls_port}",
                            "-CAfile", self.cert, "-alpn", "h2,http/1.1", "-verify_return_error", "-ign_eof"],
                           input=b"GET /_health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                           capture_output=True, timeout=10)
        out = (p.stdout + p.stderr).decode(errors="replace")
        self.assertIn("New, TLSv1.3, Cipher is", out)
        self.assertIn("ALPN protocol: http/1.1", out)
        self.assertIn("Verify return code: 0 (ok)", out)
        self.assertIn("HTTP/1.1 200", out)

    def test_tls_1_1_and_tls_1_2_without_aead_are_refused(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        try:
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        except ssl.SSLError:
            pass
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            Conn(self.server.tls_port, tls=ctx).get("/_health")
        ctx = ssl.create_default_context(cafile=self.cert)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("ECDHE-ECDSA-AES128-SHA")   # CBC
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            Conn(self.server.tls_port, tls=ctx).get("/_health")
        self.assertEqual(self.tls_conn().get("/_health").status, 200)

    def test_a_session_ticket_resumes_on_any_shard(self):
        ctx = ssl.create_default_context(cafile=self.cert)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2   # the session is known right after the handshake
        first = Conn(self.server.tls_port, tls=ctx)
        self._conns.append(first)
        self.assertEqual(first.get("/_health").status, 200)
        session = first.sock.session
        resumed = 0
        for _ in range(8):   # with several shards, these land on other shards too
            raw = socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=5)
            s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
            resumed += s.session_reused
            s.close()
        self.assertEqual(resumed, 8)

    def test_a_truncated_handshake_does_not_stall_other_connections(self):
        stalled = []
        for _ in range(20):
            c = Conn(self.server.tls_port)
            self._conns.append(c)
            c.send(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(40))  # a ClientHello cut short
            stalled.append(c)
        start = time.monotonic()
        for _ in range(20):
            self.assertEqual(self.tls_conn().get("/_health").status, 200)
            self.assertEqual(self.conn().get("/_health").status, 200)
        self.assertLess(time.monotonic() - start, 5)

    def test_garbage_records_after_the_handshake_close_the_connection_and_nothing_else(self):
        t = self.tls_conn()
        self.assertEqual(t.get("/_health").status, 200)
        fd = socket.socket(fileno=os.dup(t.sock.fileno()))
        fd.sendall(b"\x17\x03\x03\x00\x20" + os.urandom(32))   # an application record that does not decrypt
        fd.settimeout(3)
        try:
            data = fd.recv(4096)
            while data:
                data = fd.recv(4096)
        except (ConnectionResetError, socket.timeout):
            pass
        fd.close()
        self.assertEqual(self.tls_conn().get("/_health").status, 200)
        self.assertIsNone(self.server.proc.poll())

    def test_sighup_reloads_certificate(self):
        old = self.tls_conn()
        self.assertEqual(old.sock.getpeercert(binary_form=True), der_of(self.cert))
        newdir = os.path.join(self.tmp.name, "new")
        os.makedirs(newdir, exist_ok=True)
        ncert, nkey = make_cert(newdir, "next", "second")
        shutil.copyfile(nkey, self.key)
        shutil.copyfile(ncert, self.cert)
        self.server.send_signal(signal.SIGHUP)
        want = der_of(self.cert)
        deadline = time.monotonic() + 5
        while True:
            try:
                t = self.tls_conn(cafile=self.cert)
                if t.sock.getpeercert(binary_form=True) == want:
                    break
            except ssl.SSLError:
                pass
            self.assertLess(time.monotonic(), deadline, "certificate not reloaded on SIGHUP")
            time.sleep(0.1)
        self.assertEqual(t.get("/_health").status, 200)
        self.assertIsNone(self.server.proc.poll(), "server exited on SIGHUP")
        # a connection made before the reload keeps working
        self.assertEqual(old.get("/_health").status, 200)
        # a broken certificate on reload keeps the current one and the server running
        with open(self.cert, "w") as f:
            f.write("not a certificate\n")
        kept = "SIGHUP: kept the current certificate"
        logged = self.server.stderr().count(kept)
        self.server.send_signal(signal.SIGHUP)
        wait_until(lambda: self.server.stderr().count(kept) > logged or self.server.proc.poll() is not None,
                   what=f"the log line {kept!r} (the reload failed)")
        self.assertIsNone(self.server.proc.poll(), "a bad certificate on SIGHUP killed the server")
        t = self.tls_conn(cafile=ncert)
        self.assertEqual(t.sock.getpeercert(binary_form=True), want)
        self.assertEqual(t.get("/_health").status, 200)
        self.assertEqual(self.conn().get("/_health").status, 200)
        shutil.copyfile(ncert, self.cert)


class TestTlsOptions(unittest.TestCase):

    def test_tls_listen_on_an_ipv6_address_in_brackets_serves_https_there(self):
        """--tls-listen [::1]:PORT (security review: it failed with 'not an IP address')."""
        with tempfile.TemporaryDirectory(prefix="percore-tls6-") as folder:
            cert, key = os.path.join(folder, "c.pem"), os.path.join(folder, "k.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-days", "1", "-subj", "/CN=ip6", "-addext", "subjectAltName=IP:::1", "-keyout", key,
                            "-out", cert], check=True, capture_output=True)
            srv = start_server(1, ["--tls-listen", "[::1]:0", "--tls-cert", cert, "--tls-key", key])
            try:
                m = READY_RE.match(srv.ready_line)
                self.assertEqual(m.group("tls_host"), "[::1]", srv.ready_line)
                with Conn(int(m.group("tls_port")), host="::1", tls=ssl.create_default_context(cafile=cert)) as c:
                    self.assertEqual(c.get("/_health").status, 200)
            finally:
                srv.stop_and_check()
                srv.cleanup()

    def test_tls_listen_needs_cert_and_key(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        base = ["serve", "--listen", "127.0.0.1:0", "--data", os.path.join(tmp.name, "d")]
        for extra in (["--tls-listen", "127.0.0.1:0"],
                      ["--tls-listen", "127.0.0.1:0", "--tls-cert", "/nonexistent.crt"],
                      ["--tls-listen", "bad-address", "--tls-cert", "a", "--tls-key", "b"]):
            with self.subTest(args=extra):
                p = run_cli(base + extra)
                self.assertEqual(p.returncode, 2, p)
                self.assertEqual(p.stdout, b"")
                self.assertEqual(len(p.stderr.decode().splitlines()), 1, p.stderr)

    @unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
    def test_a_missing_crypto_module_is_one_clear_line_and_exit_1(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        cert, key = make_cert(tmp.name, "c", "x")
        p = run_cli(["serve", "--listen", "127.0.0.1:0", "--data", os.path.join(tmp.name, "d"),
                     "--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key],
                    env={"PERCORE_CRYPTO_MODULE": os.path.join(tmp.name, "no-such-module.so")})
        self.assertEqual(p.returncode, 1, p)
        self.assertEqual(p.stdout, b"")
        err = p.stderr.decode()
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("no-such-module.so", err)

    def test_a_server_without_tls_never_maps_openssl(self):
        s = Server(shards=1)
        try:
            s.wait_ready()
            with open(f"/proc/{s.proc.pid}/maps") as f:
                maps = f.read()
            self.assertNotIn("libssl", maps)
            self.assertNotIn("libcrypto", maps)
            self.assertNotIn("percore-crypto", maps)
            s.stop_and_check(self)
        finally:
            s.cleanup()

    @unittest.skipIf(shutil.which("openssl") is None, "needs the openssl command")
    def test_unreadable_certificate_files(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        cert, key = make_cert(tmp.name, "c", "x")
        bad = os.path.join(tmp.name, "garbage.pem")
        with open(bad, "w") as f:
            f.write("garbage\n")
        base = ["serve", "--listen", "127.0.0.1:0", "--data", os.path.join(tmp.name, "d"),
                "--tls-listen", "127.0.0.1:0"]
        for c, k in ((os.path.join(tmp.name, "missing.crt"), key), (bad, key), (cert, bad),
                     (key, cert)):
            with self.subTest(cert=c, key=k):
                p = run_cli(base + ["--tls-cert", c, "--tls-key", k])
                self.assertIn(p.returncode, (1, 2), p)
                self.assertEqual(p.stdout, b"", "no ready line with unusable TLS files")
                self.assertTrue(p.stderr.strip())


if __name__ == "__main__":
    unittest.main()

"""Smoke test of perf/load/percore-load against the real server (1 shard per the suite's setting).

percore-load lives next to the server in the build tree: <build>/shards/percore ->
<build>/perf/load/percore-load.  The test is skipped when it has not been built.

What percore-load counts as expected (see perf/load/http_client_connection.cpp):
GET -> 200 with a body of --size bytes (404 too without --prepare); PUT -> 201/204, and with
--if-match also 412 (a race between connections on one key), counted as precondition_failed.
Everything else is a wrong answer, so every run here must report wrong == 0.
"""
import json
import os
import subprocess
import unittest

from percore_client import env_shards, percore_bin, start_server, unique

LOAD_BIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(percore_bin()))),
                        "perf", "load", "percore-load")


@unittest.skipUnless(os.access(LOAD_BIN, os.X_OK), f"percore-load not built at {LOAD_BIN}")
class TestLoadGenerator(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = start_server(env_shards())

    @classmethod
    def tearDownClass(cls):
        cls.server.stop_and_check()
        cls.server.cleanup()

    def run_load(self, *args, duration="1"):
        cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{self.server.port}", "--duration", duration,
               "--json", "-", "--app", unique("load"), "--keys", "200", *args]
        p = subprocess.run(cmd, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, f"{cmd}: {p.stderr.decode(errors='replace')}")
        r = json.loads(p.stdout)
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


if __name__ == "__main__":
    unittest.main()

"""perf/compare's smoke mode against the real server, so the benchmark suite cannot rot: every
workload runs on percore (its own one-shard server) for a fraction of a second through
percore-load, and each wrk script (perf/*.lua) once through wrk; each must answer with no wrong
answer. Runs once, in the shards=1 pass. wrk is required (CI: bash .ci/deps wrk): without it
these tests fail, not skip, since every goal of the report needs it.
The wrk scripts are also run against test_load's fakes beside percore-load, with the same
parameters: each must send what percore-load sends (methods, paths and keys, header fields,
bodies; etcd.lua etcd's JSON gateway, which percore does not speak).
The apps workload (perf/apps.py) is smoked on its own: its steps that need the apps API must
either measure or fail saying "API missing: ...", never report a figure without it."""
import collections
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

from percore_client import env_shards, percore_bin
from test_load import FakeDocuments, FakeEtcd

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(percore_bin())))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(ROOT, "perf", "compare")
LOAD_BIN = os.path.join(BUILD, "perf", "load", "percore-load")
sys.path.insert(0, os.path.join(ROOT, "perf"))
from workloads import BY_NAME, WORKLOADS  # noqa: E402
from benchlib import parse_wrk  # noqa: E402

# perf/compare as a module: which workloads its smoke mode runs through wrk, and with which script
_loader = importlib.machinery.SourceFileLoader("compare", COMPARE)
compare = importlib.util.module_from_spec(importlib.util.spec_from_loader("compare", _loader))
_loader.exec_module(compare)
SCRIPTS = {"get.lua", "pipeline.lua", "put.lua", "mixed.lua"}   # etcd.lua: against FakeEtcd below


def require_wrk(test):
    test.assertTrue(shutil.which("wrk"), "wrk is missing (bash .ci/deps wrk): perf/compare drives every "
                                         "HTTP workload with it")


@unittest.skipUnless(env_shards() == 1, "runs once, in the shards=1 pass")
@unittest.skipUnless(os.access(LOAD_BIN, os.X_OK), f"percore-load not built at {LOAD_BIN}")
class TestCompareSmoke(unittest.TestCase):

    def test_every_quick_workload_runs_against_percore_without_a_wrong_answer(self):
        require_wrk(self)
        started = time.time()
        p = subprocess.run([sys.executable, COMPARE, "--smoke", "--build", BUILD], capture_output=True, text=True,
                           timeout=150, stdin=subprocess.DEVNULL)
        print(f"\n  perf/compare --smoke: {time.time() - started:.1f} s", file=sys.stderr)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        rows = re.findall(r"^\s+(\S+)\s+r0 percore\s+(percore-load|wrk)\s+([\d,]+) req/s.*wrong (\d+)",
                          p.stderr, re.M)
        seen = {(name, gen) for name, gen, _, _ in rows}
        quick = [w for w in WORKLOADS if w.quick]
        smoke_wrk = compare.smoke_wrk_workloads(quick)
        tls = [w.name for w in quick if w.tls] if shutil.which("openssl") else []
        expected = {(w.name, "percore-load") for w in quick if not w.tls}
        expected |= {(name, "wrk") for name in smoke_wrk + tls}
        self.assertEqual(seen, expected, p.stderr[-3000:])
        for name, gen, rps, wrong in rows:
            self.assertGreater(int(rps.replace(",", "")), 0, (name, gen))
            self.assertEqual(wrong, "0", (name, gen))
        # every script ran, keep-alive and closing, and a fixed path (list20: wrk's URL)
        ran = {compare.wrk_script(BY_NAME[n], "percore", "http")[0] for n in smoke_wrk}
        self.assertTrue(SCRIPTS <= {os.path.basename(x) for x in ran if x}, ran)
        self.assertIn(None, ran)
        self.assertIn("close", {BY_NAME[n].mode for n in smoke_wrk})

    def test_the_apps_workload_measures_or_names_the_missing_api(self):
        p = subprocess.run([sys.executable, COMPARE, "--smoke", "--build", BUILD, "--workloads", "apps"],
                           capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        err = p.stderr[-4000:]
        # isolation and busy need no API beyond documents (auth off: apps come with their first write)
        iso = re.findall(r"^\s+isolation (read|write)\s+r0 A by percore-load\s+(one|two): B p50 .* p99 +([\d,]+) us"
                         r".*wrong (\d+)\)\s+A\s+([\d,]+) req/s \(wrong (\d+)\)", p.stderr, re.M)
        self.assertEqual({(k, s) for k, s, *_ in iso}, {(k, s) for k in ("read", "write") for s in ("one", "two")}, err)
        for kind, setup, p99, b_wrong, a_rps, a_wrong in iso:
            self.assertEqual((b_wrong, a_wrong), ("0", "0"), (kind, setup))
            self.assertGreater(int(a_rps.replace(",", "")), 0, (kind, setup))
        busy = re.findall(r"^\s+busy\s+(read|write)\s+r0 percore-load\s+(one|two): .*\(wrong (\d+) \+ (\d+)\)",
                          p.stderr, re.M)
        self.assertEqual({(k, s) for k, s, *_ in busy}, {(k, s) for k in ("read", "write") for s in ("one", "two")}, err)
        self.assertTrue(all(a == b == "0" for _, _, a, b in busy), busy)
        # idle apps and auth: measured, or failed loudly naming the missing API
        failures = re.findall(r"^perf/compare: failed: (.*)$", p.stderr, re.M)
        for f in failures:
            self.assertRegex(f, r"^apps/(idle|auth): API missing: ", err)
        failed = {re.match(r"apps/(\w+)", f).group(1) for f in failures}
        if "idle" not in failed:
            self.assertRegex(p.stderr, r"(?m)^\s+idle\s+r0: 1000 apps in ", err)
        if "auth" not in failed:
            self.assertEqual(len(re.findall(r"(?m)^\s+auth (on |off) r0 percore-load\s*:.* wrong 0", p.stderr)), 2, err)
        self.assertEqual(p.returncode, 1 if failures else 0, err)


@unittest.skipUnless(env_shards() == 1, "runs once, in the shards=1 pass")
@unittest.skipUnless(os.access(LOAD_BIN, os.X_OK), f"percore-load not built at {LOAD_BIN}")
class TestWrkScripts(unittest.TestCase):
    """perf/compare's wrk scripts against test_load's fakes, beside percore-load with the same
    parameters (2 connections, 10 keys, a fraction of a second each)."""

    KEYS = 10

    def setUp(self):
        require_wrk(self)

    @staticmethod
    def quiet(fake):
        """wrk stopped by SIGINT resets its connections: no traceback from the fake for that."""
        fake.httpd.handle_error = lambda request, client_address: None
        return fake

    def wrk(self, port, script, duration=0.4, **env):
        """wrk with perf/SCRIPT, stopped by SIGINT after `duration` (as perf/compare does); its report."""
        cmd = ["wrk", "-t1", "-c2", "-d1s", "--latency", "-s", os.path.join(ROOT, "perf", script),
               f"http://127.0.0.1:{port}/"]
        env = dict(os.environ, PERCORE_BENCH_KEYS=str(self.KEYS), **{f"PERCORE_BENCH_{k.upper()}": str(v)
                                                                       for k, v in env.items()})
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(duration)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        r = parse_wrk(out)
        self.assertLess(r["duration_s"], 0.9, out)   # SIGINT stopped it before its -d
        return r

    def load(self, port, *args):
        cmd = [LOAD_BIN, "--url", f"http://127.0.0.1:{port}", "--connections", "2", "--duration", "0.3",
               "--keys", str(self.KEYS), "--app", "bench", "--json", "-", *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    @staticmethod
    def shape(seen):
        """What a generator sent, without what varies: {method: set of sorted header fields}, with
        Host's port, and the keys it used."""
        fields, keys = collections.defaultdict(set), set()
        for method, path, headers in seen:
            m = re.fullmatch(r"/bench/k([0-9]+)", path)
            keys.add(int(m.group(1)) if m else path)
            fields[method].add(tuple(sorted((k.lower(), v) for k, v in headers)))
        return dict(fields), keys

    def compare_with_percore_load(self, script, mix, size, **env):
        fake = self.quiet(FakeDocuments(size))
        try:
            r = self.load(fake.port, "--mix", mix, "--size", str(size))
            by_load, fake.seen = fake.seen, []
            w = self.wrk(fake.port, script, bytes=size, **env)
            by_wrk = fake.seen
        finally:
            fake.close()
        self.assertEqual(r["wrong"], 0, r)
        self.assertEqual(w["wrong"], 0, w)
        self.assertGreater(len(by_wrk), 0, w)
        (load_fields, load_keys), (wrk_fields, wrk_keys) = self.shape(by_load), self.shape(by_wrk)
        self.assertEqual(wrk_fields, load_fields)   # same methods, same header fields and values
        self.assertLessEqual(wrk_keys, set(range(self.KEYS)))
        if len(by_wrk) >= 20:
            self.assertGreater(len(wrk_keys), 1, "keys drawn at random, not one key")
        return by_wrk

    def test_get_lua_sends_percore_loads_gets(self):
        self.compare_with_percore_load("get.lua", "get:100,put:0", 64)

    def test_put_lua_sends_percore_loads_puts(self):
        self.compare_with_percore_load("put.lua", "get:0,put:100", 16)

    def test_mixed_lua_sends_percore_loads_mix(self):
        seen = self.compare_with_percore_load("mixed.lua", "get:50,put:50", 64, get_percent=50)
        self.assertEqual({m for m, _, _ in seen}, {"GET", "PUT"})

    def test_pipeline_lua_sends_gets_back_to_back(self):
        fake = self.quiet(FakeDocuments(64))
        try:
            w = self.wrk(fake.port, "pipeline.lua", pipeline=4)
            seen = fake.seen
        finally:
            fake.close()
        self.assertEqual(w["wrong"], 0, w)
        self.assertGreaterEqual(len(seen), 4, w)   # at least one batch of four
        self.assertEqual({m for m, _, _ in seen}, {"GET"})
        self.assertLessEqual(self.shape(seen)[1], set(range(self.KEYS)))

    def test_etcd_lua_sends_what_percore_load_style_etcd_sends(self):
        # FakeEtcd answers 400 to anything percore-load would not send (key, value, JSON, type)
        fake = self.quiet(FakeEtcd("bench", self.KEYS, 16))
        try:
            w = self.wrk(fake.port, "etcd.lua", bytes=16, get_percent=50)
        finally:
            fake.close()
        self.assertEqual(fake.errors, [])
        self.assertEqual(w["wrong"], 0, w)
        self.assertGreater(len(fake.puts), 0, w)
        self.assertGreater(len(fake.ranges), 0, w)


if __name__ == "__main__":
    unittest.main()

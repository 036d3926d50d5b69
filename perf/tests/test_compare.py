"""perf/compare's smoke mode against the real server, so the benchmark suite cannot rot: every
workload runs on percore (its own one-shard server) for a fraction of a second through
percore-load, and each must answer with no wrong answer. Runs once, in the shards=1 pass.
The apps workload (perf/apps.py) is smoked on its own: its steps that need the apps API must
either measure or fail saying "API missing: ...", never report a figure without it."""
import os
import re
import shutil
import subprocess
import sys
import unittest

from percore_client import env_shards, percore_bin

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(percore_bin())))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARE = os.path.join(ROOT, "perf", "compare")
LOAD_BIN = os.path.join(BUILD, "perf", "load", "percore-load")
sys.path.insert(0, os.path.join(ROOT, "perf"))
from workloads import WORKLOADS  # noqa: E402


@unittest.skipUnless(env_shards() == 1, "runs once, in the shards=1 pass")
@unittest.skipUnless(os.access(LOAD_BIN, os.X_OK), f"percore-load not built at {LOAD_BIN}")
class TestCompareSmoke(unittest.TestCase):

    def test_every_quick_workload_runs_against_percore_without_a_wrong_answer(self):
        p = subprocess.run([sys.executable, COMPARE, "--smoke", "--build", BUILD], capture_output=True, text=True,
                           timeout=180, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        rows = re.findall(r"^\s+(\S+)\s+r0 percore\s+([\d,]+) req/s.*wrong (\d+)", p.stderr, re.M)
        seen = {name for name, _, _ in rows}
        have_wrk = shutil.which("wrk") and shutil.which("openssl")
        self.assertEqual(seen, {w.name for w in WORKLOADS if w.quick and (have_wrk or not w.tls)}, p.stderr[-3000:])
        for name, rps, wrong in rows:
            self.assertGreater(int(rps.replace(",", "")), 0, name)
            self.assertEqual(wrong, "0", name)

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


if __name__ == "__main__":
    unittest.main()

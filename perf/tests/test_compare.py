"""perf/compare's smoke mode against the real server, so the benchmark suite cannot rot: every
workload runs on percore (its own one-shard server) for a fraction of a second through
percore-load, and each must answer with no wrong answer. Runs once, in the shards=1 pass."""
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


if __name__ == "__main__":
    unittest.main()

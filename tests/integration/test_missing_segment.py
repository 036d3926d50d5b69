"""A shard whose newest segment is gone is refused, not served from the older ones (issue 35).

The server writes with small segments (PERCORE_SEGMENT_BYTES=4K) until each shard has several,
stops (SIGKILL, or SIGTERM), and the newest segment — or the newest two — of one shard is deleted,
as an operator's mistake or a half-restored copy would. Before, the server started on the older
segments and served an older state as the latest, every write of the lost segments gone without a
line. Now (store/newest_segment.hpp): `serve` exits 1 with one line naming the shard's directory
and the missing segment, `percore check` exits 1 naming it, and `--repair` changes nothing.
"""
from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from percore_client import percore_bin, run_cli, server_env, start_server  # noqa: E402
from test_check import tree_digest  # noqa: E402  (every file's digest but LOCK's)

SHARDS = 3
SEGMENT_ENV = {"PERCORE_SEGMENT_BYTES": "4K"}
KEYS = 90


class TestMissingNewestSegment(unittest.TestCase):
    def written(self, stop: str) -> str:
        """A data directory with KEYS documents over several segments a shard, the server stopped
        by `stop` (kill: SIGKILL, term: SIGTERM)."""
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        data = os.path.join(tmp.name, "data")
        s = start_server(SHARDS, data=data, env=SEGMENT_ENV)
        try:
            c = s.conn()
            for i in range(KEYS):
                r = c.put(f"/seg/k{i}", b"v" * (400 + i))
                self.assertEqual(r.status, 201, r)
            c.close()
            if stop == "kill":
                s.proc.send_signal(signal.SIGKILL)
                s.proc.wait(10)
            else:
                s.stop_and_check()
        finally:
            s.cleanup()
        return data

    def segments(self, data: str, shard: int) -> list:
        return sorted(glob.glob(os.path.join(data, "layout-*", f"shard-{shard:03d}", "*.seg")))

    def assert_refused(self, data: str, missing: str):
        shard_dir = os.path.dirname(missing)
        serve = subprocess.run([percore_bin(), "serve", "--listen", "127.0.0.1:0", "--shards", str(SHARDS),
                                "--data", data], stdin=subprocess.DEVNULL, capture_output=True,
                               env=server_env(), timeout=15)
        err = serve.stderr.decode()
        self.assertEqual(serve.returncode, 1, err)
        self.assertIn(f"segment {missing}", err)
        self.assertIn("is missing", err)
        self.assertIn(shard_dir, err)
        check = run_cli(["check", data])
        out = check.stdout.decode() + check.stderr.decode()
        self.assertEqual(check.returncode, 1, out)
        self.assertIn(f"segment {missing}", out)
        before = tree_digest(data)
        repair = run_cli(["check", "--repair", data])
        self.assertEqual(repair.returncode, 1, repair.stdout + repair.stderr)
        self.assertEqual(tree_digest(data), before, "--repair changed a directory whose newest segment is missing")

    def delete_newest(self, data: str, count: int) -> str:
        segs = self.segments(data, 1)
        self.assertGreaterEqual(len(segs), count + 2, segs)   # one at least stays, beside the first
        for path in segs[-count:]:
            os.remove(path)
        return segs[-1] if count == 1 else segs[-count]

    def test_the_newest_segment_deleted_after_sigkill_is_refused_by_serve_and_check(self):
        data = self.written("kill")
        self.assert_refused(data, self.delete_newest(data, 1))

    def test_the_newest_segment_deleted_after_sigterm_is_refused_by_serve_and_check(self):
        data = self.written("term")
        self.assert_refused(data, self.delete_newest(data, 1))

    def test_the_newest_two_segments_deleted_are_refused_naming_the_first_missing(self):
        data = self.written("kill")
        self.assert_refused(data, self.delete_newest(data, 2))

    def test_a_directory_with_every_segment_still_serves_every_document(self):
        data = self.written("kill")
        s = start_server(SHARDS, data=data, env=SEGMENT_ENV)
        try:
            c = s.conn()
            for i in range(KEYS):
                self.assertEqual(c.get(f"/seg/k{i}").status, 200, i)
            c.close()
            s.stop_and_check()
        finally:
            s.cleanup()


if __name__ == "__main__":
    unittest.main()

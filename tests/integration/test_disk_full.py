"""A full disk: writes get 507, reads go on, nothing acknowledged is lost, and writes work again
once space is freed. Runs on a small tmpfs mounted for the test (needs root; skipped otherwise)."""
import os
import subprocess
import tempfile
import unittest

from percore_client import start_server


def can_mount():
    return os.geteuid() == 0


@unittest.skipUnless(can_mount(), "needs root to mount a small tmpfs")
class TestDiskFull(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(self.tmp.cleanup)
        self.mnt = os.path.join(self.tmp.name, "small")
        os.mkdir(self.mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", self.mnt], capture_output=True)
        if r.returncode != 0:
            self.skipTest("cannot mount tmpfs: " + r.stderr.decode().strip())
        self.addCleanup(lambda: subprocess.run(["umount", "-l", self.mnt], capture_output=True))
        self.ballast = os.path.join(self.mnt, "ballast")
        with open(self.ballast, "wb") as f:
            f.write(b"\0" * (1 << 20))
        self.data = os.path.join(self.mnt, "data")

    def start(self):
        s = start_server(1, data=self.data, env={"PERCORE_SEGMENT_BYTES": "256K"})
        self.addCleanup(s.cleanup)
        return s

    def test_full_disk_answers_507_and_recovers_when_space_is_freed(self):
        s = self.start()
        c = s.conn(timeout=10)
        acked = {}
        full = None
        for i in range(200):
            body = (b"%06d" % i) * 4000  # 24 KB
            r = c.put(f"/full/k{i}", body)
            if r.status == 507:
                full = i
                self.assertIn("error", r.json())
                break
            self.assertEqual(r.status, 201, r)
            acked[i] = (body, r.etag)
        self.assertIsNotNone(full, "the disk never filled up")
        self.assertGreater(len(acked), 5)
        # reads go on, and the connection stays usable
        for i in (0, full - 1):
            r = c.get(f"/full/k{i}")
            self.assertEqual((r.status, r.body, r.etag), (200, acked[i][0], acked[i][1]))
        self.assertEqual(c.put(f"/full/k{full}", b"x" * 30000).status, 507)
        # space comes back: writes work again
        os.remove(self.ballast)
        r = c.put(f"/full/k{full}", b"after")
        self.assertEqual(r.status, 201, r)
        acked[full] = (b"after", r.etag)
        c.close()
        s.stop_and_check(self)
        # nothing acknowledged was lost, nothing refused was kept
        s = self.start()
        c = s.conn(timeout=10)
        for i, (body, etag) in acked.items():
            r = c.get(f"/full/k{i}")
            self.assertEqual((r.status, r.body, r.etag), (200, body, etag), i)
        self.assertEqual(c.get(f"/full/k{full + 1}").status, 404)
        c.close()
        s.stop_and_check(self)


if __name__ == "__main__":
    unittest.main()

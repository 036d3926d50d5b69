"""Large values: stored in the log only and sent from it with sendfile, across restarts,
resharding and compaction (PERCORE_SEGMENT_BYTES makes segments small enough to compact)."""
import os
import tempfile
import unittest

from percore_client import env_shards, start_server


def body(i: int, size: int) -> bytes:
    seed = (f"value {i} ".encode() * (size // 8 + 1))[:size]
    return bytes(seed)


class TestLargeValues(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(self.tmp.cleanup)
        self.data = os.path.join(self.tmp.name, "data")

    def start(self, shards):
        s = start_server(shards, data=self.data, args=("--max-body", "4M"),
                         env={"PERCORE_SEGMENT_BYTES": "1M"})
        self.addCleanup(s.cleanup)
        return s

    def test_large_values_survive_restart_reshard_and_compaction(self):
        first = env_shards()
        s = self.start(first)
        c = s.conn(timeout=20)
        etags = {}
        sizes = [65536, 300000, 1 << 20, 3 << 20]
        for i, size in enumerate(sizes):
            r = c.put(f"/big/v{i}", body(i, size), {"Content-Type": "application/x-test"})
            self.assertEqual(r.status, 201, r)
            etags[i] = r.etag
        # overwrite the small ones many times so that segments fill with garbage and compact
        for round_ in range(12):
            r = c.put("/big/v0", body(100 + round_, 65536))
            self.assertEqual(r.status, 204)
            etags[0] = r.etag
        for i, size in enumerate(sizes):
            r = c.get(f"/big/v{i}")
            want = body(100 + 11, 65536) if i == 0 else body(i, size)
            self.assertEqual((r.status, r.body, r.etag), (200, want, etags[i]), i)
            h = c.head(f"/big/v{i}")
            self.assertEqual(int(h.header("content-length")), size)
        c.close()
        s.stop_and_check(self)

        second = 3 if first == 1 else 1
        s = self.start(second)
        c = s.conn(timeout=20)
        for i, size in enumerate(sizes):
            r = c.get(f"/big/v{i}")
            want = body(100 + 11, 65536) if i == 0 else body(i, size)
            self.assertEqual((r.status, r.body, r.etag, r.header("content-type")),
                             (200, want, etags[i], "application/x-test" if i else "application/octet-stream"), i)
        # pipelined GETs of a large value answer in order
        c.send(b"".join(f"GET /big/v{i} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode() for i in (3, 1, 3)))
        for i in (3, 1, 3):
            r = c.read_response()
            self.assertEqual((r.status, len(r.body)), (200, sizes[i]))
        c.close()
        s.proc.kill()
        s.proc.wait(timeout=5)
        s.cleanup()
        s = self.start(second)
        c = s.conn(timeout=20)
        r = c.get("/big/v3")
        self.assertEqual((r.status, r.body, r.etag), (200, body(3, 3 << 20), etags[3]))
        c.close()
        s.stop_and_check(self)


if __name__ == "__main__":
    unittest.main()

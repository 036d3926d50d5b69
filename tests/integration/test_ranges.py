"""SPEC §4: Range requests (RFC 9110 §14) on documents held in memory (copied and referenced) and in
the log (sendfile), and a download resumed by curl -C -."""
import os
import shutil
import subprocess
import tempfile
import unittest

from percore_client import ServerTestCase

SIZES = {"small": 1000, "referenced": 40_000, "in_log": 300_000}


def body_of(size: int) -> bytes:
    return bytes((i * 7 + i // 251) % 256 for i in range(size))


class TestRanges(ServerTestCase):

    def put_all(self, c):
        etags = {}
        for name, size in SIZES.items():
            r = c.put(self.path(name), body_of(size))
            self.assertEqual(r.status, 201, r)
            etags[name] = r.header("etag")
        return etags

    def test_one_range_is_206_with_exactly_its_bytes_for_every_kind_of_value(self):
        c = self.conn()
        self.put_all(c)
        for name, size in SIZES.items():
            whole = body_of(size)
            for spec, first, last in (("0-9", 0, 9), (f"{size - 10}-", size - 10, size - 1), ("-25", size - 25, size - 1),
                                      ("5-", 5, size - 1), (f"7-{size * 2}", 7, size - 1)):
                r = c.get(self.path(name), {"Range": f"bytes={spec}"})
                self.assertEqual(r.status, 206, (name, spec, r))
                self.assertEqual(r.header("content-range"), f"bytes {first}-{last}/{size}", (name, spec))
                self.assertEqual(r.body, whole[first:last + 1], (name, spec))
                self.assertEqual(r.header("accept-ranges"), "bytes")

    def test_an_unsatisfiable_range_is_416_with_the_length(self):
        c = self.conn()
        self.put_all(c)
        r = c.get(self.path("small"), {"Range": "bytes=1000-"})
        self.assertEqual(r.status, 416, r)
        self.assertEqual(r.header("content-range"), "bytes */1000")
        self.assertEqual(c.get(self.path("small")).status, 200)   # the connection goes on

    def test_several_ranges_or_a_malformed_one_get_the_whole_document(self):
        c = self.conn()
        self.put_all(c)
        for spec in ("bytes=0-1,5-6", "bytes=9-2", "lines=1-2"):
            r = c.get(self.path("small"), {"Range": spec})
            self.assertEqual((r.status, r.body), (200, body_of(1000)), spec)

    def test_if_range_with_the_current_etag_honours_the_range_and_another_does_not(self):
        c = self.conn()
        etags = self.put_all(c)
        r = c.get(self.path("in_log"), {"Range": "bytes=0-99", "If-Range": etags["in_log"]})
        self.assertEqual((r.status, len(r.body)), (206, 100))
        r = c.get(self.path("in_log"), {"Range": "bytes=0-99", "If-Range": '"0000000000000001"'})
        self.assertEqual((r.status, len(r.body)), (200, SIZES["in_log"]))
        r = c.get(self.path("in_log"), {"Range": "bytes=0-99", "If-Range": "Tue, 01 Dec 2026 10:00:00 GMT"})
        self.assertEqual(r.status, 200)

    def test_head_and_whole_gets_say_accept_ranges(self):
        c = self.conn()
        self.put_all(c)
        self.assertEqual(c.get(self.path("small")).header("accept-ranges"), "bytes")
        self.assertEqual(c.head(self.path("in_log")).header("accept-ranges"), "bytes")

    def test_pipelined_ranges_of_a_value_in_the_log_answer_in_order(self):
        c = self.conn()
        self.put_all(c)
        target = self.path("in_log")
        c.send(b"".join(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nRange: bytes={a}-{b}\r\n\r\n".encode()
                        for a, b in ((0, 99), (1000, 299_999), (-1, -1))
                        if a >= 0) + f"GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        whole = body_of(SIZES["in_log"])
        for want in (whole[0:100], whole[1000:], whole):
            r = c.read_final()
            self.assertEqual(r.body, want)

    @unittest.skipUnless(shutil.which("curl"), "curl is installed by .ci/deps")
    def test_curl_resumes_a_download_with_c_minus(self):
        c = self.conn()
        self.put_all(c)
        url = f"http://127.0.0.1:{self.server.port}{self.path('in_log')}"
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "download")
            with open(out, "wb") as f:
                f.write(body_of(SIZES["in_log"])[:123_456])   # an interrupted download
            p = subprocess.run(["curl", "-sS", "-f", "-C", "-", "-o", out, url], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(), body_of(SIZES["in_log"]))


if __name__ == "__main__":
    unittest.main()

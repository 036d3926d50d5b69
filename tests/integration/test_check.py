"""SPEC section 11: `percore check [--repair] DIR` on the real binary.

One data directory of 3 shards is written once, with small segments so that every shard has
several, and stopped; each test works on its own copy of it:
- checked as it is: exit 0, and per shard the documents and value bytes the server reported
  (/_metrics) before it stopped; nothing in the directory changes;
- while a server runs on it: refused, exit 2, naming the server's pid;
- with a torn tail (garbage appended; the last record of a shard cut in half): reported with its
  file, offset and bytes, exit 0; `--repair` cuts exactly that, and `serve` then starts and serves
  every document but the cut one;
- with a flipped byte in an early record: exit 1 naming the file and the record's offset;
  `--repair` changes nothing and exits 1; `serve` refuses to start naming the same file and offset.
"""

import glob
import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
import unittest

from percore_client import percore_bin, run_cli, server_env, start_server

SHARDS = 3
SEGMENT_ENV = {"PERCORE_SEGMENT_BYTES": "4K"}
KEYS = 90
SHARD_LINE = re.compile(r"^shard (\d{3}): (\d+) documents? \((\d+) bytes?\) in (\d+) segments?")
METRIC = re.compile(r'^percore_(documents|live_bytes)\{shard="(\d+)"\} (\d+)$')
SEGMENT_HEADER_BYTES = 32
PUT = 1


def value_of(i: int) -> bytes:
    return b"%03d" % i + b"v" * (150 + i)


def records(path: str):
    """(offset, end, kind, key) of every record of a segment, in order (docs/store-format.md)."""
    with open(path, "rb") as f:
        data = f.read()
    at, out = SEGMENT_HEADER_BYTES, []
    while at + 32 <= len(data):
        body, kind, key_len = struct.unpack_from("<I", data, at + 4)[0], data[at + 8], \
            struct.unpack_from("<H", data, at + 10)[0]
        end = at + 8 + body
        if end > len(data):
            break
        out.append((at, end, kind, data[at + 32:at + 32 + key_len]))
        at = end
    return out


def tree_digest(root: str) -> dict:
    """Every file's digest but LOCK's (where --repair, holding the lock, writes its pid)."""
    digests = {}
    for path in sorted(glob.glob(os.path.join(root, "**"), recursive=True)):
        if os.path.isfile(path) and os.path.basename(path) != "LOCK":
            with open(path, "rb") as f:
                digests[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return digests


class TestCheck(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pristine_tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        cls.pristine = os.path.join(cls.pristine_tmp.name, "data")
        s = start_server(SHARDS, data=cls.pristine, env=SEGMENT_ENV)
        try:
            c = s.conn()
            for i in range(KEYS):
                r = c.put(f"/check/k{i}", value_of(i))
                assert r.status == 201, r
            r = c.get("/_metrics")
            assert r.status == 200, r
            c.close()
            cls.expected = {}
            for line in r.body.decode().splitlines():
                m = METRIC.match(line)
                if m:
                    cls.expected.setdefault(int(m.group(2)), {})[m.group(1)] = int(m.group(3))
            s.stop_and_check()
        finally:
            s.cleanup()

    @classmethod
    def tearDownClass(cls):
        cls.pristine_tmp.cleanup()
        super().tearDownClass()

    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        self.data = os.path.join(tmp.name, "data")
        shutil.copytree(self.pristine, self.data, symlinks=True)

    def check(self, *args):
        r = run_cli(["check", *args, self.data])
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def segments(self, shard: int) -> list:
        return sorted(glob.glob(os.path.join(self.data, "layout-*", f"shard-{shard:03d}", "*.seg")))

    def serve(self):
        """A server on the copy: (started, its stderr); when started, stop it with stop_and_check."""
        try:
            return start_server(SHARDS, data=self.data), ""
        except AssertionError as e:
            return None, str(e)

    # -- clean

    def test_a_stopped_servers_directory_checks_clean_with_each_shards_documents_and_bytes(self):
        before = tree_digest(self.data)
        rc, out, err = self.check()
        self.assertEqual(rc, 0, out + err)
        shards, segments = {}, 0
        for line in out.splitlines():
            m = SHARD_LINE.match(line)
            if m:
                shards[int(m.group(1))] = {"documents": int(m.group(2)), "live_bytes": int(m.group(3))}
                segments += int(m.group(4))
                self.assertTrue(line.endswith("; clean"), line)
        self.assertEqual(shards, self.expected, out)
        self.assertGreater(segments, SHARDS, "small segments: several in some shard; " + out)
        self.assertEqual(sum(s["documents"] for s in shards.values()), KEYS)
        self.assertTrue(out.splitlines()[-1].startswith(f"percore check: clean ({SHARDS} shards, {KEYS} documents)"),
                        out)
        self.assertEqual(tree_digest(self.data), before, "a check without --repair changed the directory")

    def test_a_running_servers_directory_is_refused_with_its_pid(self):
        s = start_server(SHARDS, data=self.data)
        try:
            for args in ((), ("--repair",)):
                rc, out, err = self.check(*args)
                self.assertEqual(rc, 2, out + err)
                self.assertEqual(out, "")
                self.assertIn(f"is in use by a running server (pid {s.proc.pid}): stop it first", err)
        finally:
            s.stop_and_check(self)
            s.cleanup()

    # -- a torn tail

    def test_garbage_after_the_last_record_is_a_torn_tail_that_repair_cuts(self):
        newest = self.segments(1)[-1]
        size = os.path.getsize(newest)
        with open(newest, "ab") as f:
            f.write(bytes((i * 37 + 11) % 256 for i in range(100)))
        rc, out, err = self.check()
        self.assertEqual(rc, 0, out + err)
        self.assertIn(f"shard 001: torn tail: segment {newest} ends in a torn tail of 100 bytes at byte {size}",
                      out)
        rc, out, err = self.check("--repair")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("shard 001: repaired: ", out)
        self.assertEqual(os.path.getsize(newest), size)
        rc, out, err = self.check()
        self.assertEqual((rc, "torn" in out), (0, False), out + err)

    def test_repair_never_cuts_a_file_a_segment_links_to(self):
        """Security review L6: a user who can write the directory plants a link where the newest
        segment was, to another file with a torn-looking tail; repair (often run as root) must not
        truncate through it."""
        newest = self.segments(1)[-1]
        victim = os.path.join(os.path.dirname(self.data), "victim.txt")
        with open(newest, "rb") as f:
            content = f.read() + b"\x00" * 100  # the segment, then what would be a torn tail
        with open(victim, "wb") as f:
            f.write(content)
        os.unlink(newest)
        os.symlink(victim, newest)
        rc, out, err = self.check("--repair")
        self.assertNotEqual(rc, 0, out + err)
        with open(victim, "rb") as f:
            self.assertEqual(f.read(), content, "repair changed the file the link points to")

    def test_a_last_record_cut_in_half_is_cut_by_repair_and_serve_then_serves_every_other_document(self):
        for shard in range(SHARDS):
            newest = self.segments(shard)[-1]
            puts = [r for r in records(newest) if r[2] == PUT]
            if puts:
                break
        else:
            self.fail("no shard's newest segment holds a put")
        offset, end, _, key = puts[-1]
        os.truncate(newest, (offset + end) // 2)   # also drops the commit mark after it
        lost = key.split(b"\0", 1)[1].decode()   # the store's key is "app\0key"
        rc, out, err = self.check()
        self.assertEqual(rc, 0, out + err)
        self.assertIn(f"shard {shard:03d}: torn tail: segment {newest} ends in a torn tail of "
                      f"{(offset + end) // 2 - offset} bytes at byte {offset}", out)
        rc, out, err = self.check("--repair")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(os.path.getsize(newest), offset)
        s, why = self.serve()
        self.assertIsNotNone(s, why)
        try:
            c = s.conn()
            for i in range(KEYS):
                r = c.get(f"/check/k{i}")
                if f"k{i}" == lost:
                    self.assertEqual(r.status, 404)
                else:
                    self.assertEqual((r.status, r.body), (200, value_of(i)), f"k{i}")
            c.close()
            self.assertNotIn("torn tail", s.stderr(), "--repair left a torn tail for the start to cut")
        finally:
            s.stop_and_check(self)
            s.cleanup()

    # -- a damaged middle

    def test_a_flipped_byte_in_an_early_record_is_damage_that_repair_and_serve_refuse_naming_the_same_offset(self):
        oldest = self.segments(1)[0]
        offset, end, _, _ = next(r for r in records(oldest) if r[2] == PUT)
        with open(oldest, "r+b") as f:
            f.seek(end - 3)
            b = f.read(1)
            f.seek(end - 3)
            f.write(bytes([b[0] ^ 0x40]))
        where = f"segment {oldest} has a damaged record at byte {offset}"
        rc, out, err = self.check()
        self.assertEqual(rc, 1, out + err)
        self.assertIn(f"shard 001: damaged: {where}", out)
        self.assertTrue(out.splitlines()[-1].startswith(f"percore check: damaged (1 of {SHARDS} shards)"), out)
        before = tree_digest(self.data)
        rc, out, err = self.check("--repair")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(tree_digest(self.data), before, "--repair changed a damaged directory")
        serve = subprocess.run([percore_bin(), "serve", "--listen", "127.0.0.1:0", "--shards", str(SHARDS),
                                "--data", self.data], stdin=subprocess.DEVNULL, capture_output=True,
                               env=server_env(), timeout=10)
        self.assertEqual(serve.returncode, 1, serve.stderr)
        self.assertIn(where, serve.stderr.decode())


if __name__ == "__main__":
    unittest.main()

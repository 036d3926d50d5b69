"""SPEC section 11: GET /_backup, `percore restore TAR DIR`, and `serve --data DIR` on what it made.

One primary (3 shards, --auth on) for the module:
- a backup of written documents (small and file-backed values, content types, a deleted key),
  restored and served: byte for byte the same documents, ETags and content types, the same admin
  token; the archive is a plain tar (Python's tarfile reads it) without LOCK, admin.token 0600;
- without the admin token 401, with an app's token 403;
- under 64 writing connections, read slowly: every write acknowledged before the backup request was
  sent is in the restore (the same or a later version of its key), every restored value is a
  complete version some writer wrote (each carries its own length and digest), and writes went on
  being acknowledged while the backup streamed;
- a client that leaves mid-backup costs nothing: the next backup is whole;
- `percore restore` refuses a DIR that is not empty, an archive with ../x, and one cut short.
"""

import hashlib
import http.client
import io
import json
import os
import socket
import tarfile
import tempfile
import threading
import time
import unittest

from percore_client import bearer, run_cli, start_server, unique

SHARDS = 3
WRITERS = 64                 # writing connections during the backup (issue 18: 64)
LARGE = 256 * 1024           # file-backed values (>= 64 KiB leave memory: store-format.md)
PRELOAD_VALUES = 24          # ~6 MiB, so that a backup read slowly lasts a while



def versioned_value(key: str, seq: int, size: int) -> bytes:
    """A value that proves itself whole: its key, sequence, length and a digest of it all."""
    body = f"{key}|{seq}|{size}|".encode() + bytes((seq + i) % 251 for i in range(size))
    return body + b"|" + hashlib.sha256(body).hexdigest().encode()


def parse_versioned(value: bytes):
    """(key, seq) of a value versioned_value() made, or None when it is not one whole."""
    body, _, digest = value.rpartition(b"|")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        return None
    key, seq, size, rest = body.split(b"|", 3)
    if len(rest) != int(size):
        return None
    return key.decode(), int(seq)


class Writer(threading.Thread):
    """PUTs new versions of its own keys until told to stop; records what was acknowledged."""

    def __init__(self, port: int, token: str, app: str, n: int):
        super().__init__(daemon=True)
        self.port, self.token, self.app, self.n = port, token, app, n
        self.lock = threading.Lock()
        self.acked = {}        # key -> the last seq acknowledged
        self.count = 0
        self.stop = threading.Event()
        self.error = None

    def acknowledged(self):
        with self.lock:
            return dict(self.acked), self.count

    def run(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            seq = 0
            while not self.stop.is_set():
                seq += 1
                key = f"w{self.n}-{seq % 7}"
                value = versioned_value(key, seq, 100 + (seq * 37) % 3000)
                c.request("PUT", f"/{self.app}/{key}", body=value, headers=bearer(self.token))
                r = c.getresponse()
                r.read()
                if r.status not in (201, 204):
                    raise AssertionError(f"PUT {key} answered {r.status}")
                with self.lock:
                    self.acked[key] = seq
                    self.count += 1
            c.close()
        except Exception as e:  # reported by the test
            self.error = e


class TestBackup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = start_server(SHARDS, ("--auth", "on"))
        with open(os.path.join(cls.server.data, "admin.token")) as f:
            cls.token = f.read().strip()
        cls.tmp = tempfile.TemporaryDirectory(prefix="percore-backup-")
        cls.restored = []

    @classmethod
    def tearDownClass(cls):
        for s in cls.restored:
            s.stop_and_check()
            s.cleanup()
        cls.server.stop_and_check()
        cls.server.cleanup()
        cls.tmp.cleanup()

    def request(self, method, target, body=None, token=None, port=None):
        c = http.client.HTTPConnection("127.0.0.1", port or self.server.port, timeout=10)
        headers = bearer(token or self.token)
        c.request(method, target, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r, data

    def make_app(self) -> str:
        app = unique("b")
        r, _ = self.request("PUT", f"/_apps/{app}", b"{}")
        self.assertIn(r.status, (200, 201), r.status)
        return app

    def backup(self, pace_s: float = 0.0, path=None) -> str:
        """GET /_backup into a file (read in 64 KiB pieces, `pace_s` apart); returns its path. A
        paced client also keeps a small receive window, so the server must wait for it: more than
        the 256 KiB a stream may leave unsent stays behind (net/limits.hpp)."""
        path = path or os.path.join(self.tmp.name, unique("backup") + ".tar")
        c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        if pace_s:
            c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            c.sock.settimeout(10)
            c.sock.connect(("127.0.0.1", self.server.port))
        c.request("GET", "/_backup", headers=bearer(self.token))
        r = c.getresponse()
        if r.status != 200:
            self.fail(f"GET /_backup answered {r.status}: {r.read()!r}")
        self.assertEqual(r.getheader("Content-Type"), "application/x-tar")
        self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
        self.assertRegex(r.getheader("Content-Disposition"),
                         r'^attachment; filename="percore-backup-\d{8}T\d{6}Z\.tar"$')
        with open(path, "wb") as f:
            while True:
                piece = r.read(64 * 1024)   # http.client raises IncompleteRead on a cut body
                if not piece:
                    break
                f.write(piece)
                if pace_s:
                    time.sleep(pace_s)   # pacing: a slow reader on purpose, nothing to wait for
        c.close()
        return path

    def restore_and_serve(self, tar_path: str):
        target = os.path.join(self.tmp.name, unique("restored"))
        p = run_cli(["restore", tar_path, target])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout.decode(), rf"^restored {SHARDS} shards \(\d+ files, \d+ bytes\) into ")
        s = start_server(SHARDS, ("--auth", "on"), data=target)
        self.restored.append(s)
        return s

    def test_a_backup_restores_to_the_same_documents_byte_for_byte(self):
        app = self.make_app()
        docs = {f"k{i}": (os.urandom(50 + i * 13), f"text/x-{i}") for i in range(30)}
        docs["large"] = (os.urandom(LARGE + 7), "application/octet-stream")
        for key, (value, ctype) in docs.items():
            c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
            c.request("PUT", f"/{app}/{key}", body=value, headers={**bearer(self.token), "Content-Type": ctype})
            self.assertIn(c.getresponse().status, (201, 204))
            c.close()
        r, _ = self.request("DELETE", f"/{app}/k0")
        self.assertEqual(r.status, 204)
        del docs["k0"]
        etags = {}
        for key in docs:
            r, _ = self.request("GET", f"/{app}/{key}")
            etags[key] = r.getheader("ETag")

        tar_path = self.backup()
        with tarfile.open(tar_path) as t:
            members = {m.name: m for m in t.getmembers()}
        self.assertIn("FORMAT", members)
        self.assertNotIn("LOCK", members)
        self.assertEqual(members["admin.token"].mode, 0o600)
        self.assertTrue(members["layout-1/shard-002"].isdir())
        # SPEC §6: private as the server keeps them, whatever tool unpacks the tar (review M7)
        for name, m in members.items():
            self.assertEqual(oct(m.mode), oct(0o700 if m.isdir() else 0o600), name)

        s = self.restore_and_serve(tar_path)
        for key, (value, ctype) in docs.items():
            r, body = self.request("GET", f"/{app}/{key}", port=s.port)  # the same admin token
            self.assertEqual(r.status, 200, key)
            self.assertEqual(body, value, key)
            self.assertEqual(r.getheader("ETag"), etags[key], key)
            self.assertEqual(r.getheader("Content-Type"), ctype, key)
        r, _ = self.request("GET", f"/{app}/k0", port=s.port)
        self.assertEqual(r.status, 404)
        r, page = self.request("GET", f"/{app}/?limit=1000", port=s.port)
        self.assertEqual(sorted(k["key"] for k in json.loads(page)["keys"]), sorted(docs))

    def test_a_backup_needs_the_server_admin_token(self):
        c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        c.request("GET", "/_backup")
        r = c.getresponse()
        r.read()
        self.assertEqual(r.status, 401)
        self.assertEqual(r.getheader("WWW-Authenticate"), "Bearer")
        app = self.make_app()
        r, body = self.request("POST", f"/_apps/{app}/tokens", json.dumps({"scope": "admin"}).encode())
        self.assertEqual(r.status, 201, body)
        r, _ = self.request("GET", "/_backup", token=json.loads(body)["token"])
        self.assertEqual(r.status, 403)

    def test_writes_acknowledged_before_the_backup_are_in_it_while_writes_go_on(self):
        app = self.make_app()
        for i in range(PRELOAD_VALUES):
            r, _ = self.request("PUT", f"/{app}/pre{i}", os.urandom(LARGE))
            self.assertIn(r.status, (201, 204))
        writers = [Writer(self.server.port, self.token, app, n) for n in range(WRITERS)]
        for w in writers:
            w.start()
        deadline = time.monotonic() + 10
        while sum(w.acknowledged()[1] for w in writers) < 4 * WRITERS and time.monotonic() < deadline:
            time.sleep(0.01)
        before = {}
        for w in writers:
            before.update(w.acknowledged()[0])
        counts_before = sum(w.acknowledged()[1] for w in writers)
        tar_path = self.backup(pace_s=0.005)   # ~6 MiB in 64 KiB pieces: half a second or more
        counts_after = sum(w.acknowledged()[1] for w in writers)
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join(timeout=10)
            self.assertIsNone(w.error)
        self.assertGreater(counts_after, counts_before, "no write was acknowledged while the backup streamed")

        s = self.restore_and_serve(tar_path)
        for key, seq in before.items():
            r, body = self.request("GET", f"/{app}/{key}", port=s.port)
            self.assertEqual(r.status, 200, f"{key}: acknowledged before the backup, missing from it")
            parsed = parse_versioned(body)
            self.assertIsNotNone(parsed, f"{key}: not a whole version")
            self.assertEqual(parsed[0], key)
            self.assertGreaterEqual(parsed[1], seq, f"{key}: older than what was acknowledged before the backup")
        r, page = self.request("GET", f"/{app}/?prefix=w&limit=1000", port=s.port)
        for k in json.loads(page)["keys"]:
            r, body = self.request("GET", f"/{app}/{k['key']}", port=s.port)
            self.assertIsNotNone(parse_versioned(body), f"{k['key']}: not a whole version")

    def test_a_client_that_leaves_mid_backup_costs_the_next_backup_nothing(self):
        app = self.make_app()
        for i in range(8):
            r, _ = self.request("PUT", f"/{app}/v{i}", os.urandom(LARGE))
            self.assertIn(r.status, (201, 204))
        c = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        c.request("GET", "/_backup", headers=bearer(self.token))
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        r.read(1000)
        c.close()
        with tarfile.open(self.backup()) as t:
            self.assertIn("FORMAT", t.getnames())
        r, _ = self.request("PUT", f"/{app}/after", b"x")
        self.assertEqual(r.status, 201)

    def test_restore_refuses_a_directory_that_is_not_empty(self):
        tar_path = self.backup()
        target = os.path.join(self.tmp.name, unique("full"))
        os.makedirs(target)
        with open(os.path.join(target, "mine"), "w") as f:
            f.write("keep")
        p = run_cli(["restore", tar_path, target])
        self.assertEqual(p.returncode, 1)
        lines = p.stderr.decode().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("is not empty", lines[0])
        self.assertEqual(sorted(os.listdir(target)), ["mine"])

    def test_restore_refuses_an_archive_with_a_parent_path_and_one_cut_short(self):
        evil = os.path.join(self.tmp.name, unique("evil") + ".tar")
        with tarfile.open(evil, "w", format=tarfile.USTAR_FORMAT) as t:
            data = b"owned"
            info = tarfile.TarInfo("../x")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        target = os.path.join(self.tmp.name, unique("evil"))
        p = run_cli(["restore", evil, target])
        self.assertEqual(p.returncode, 1)
        self.assertIn("not a relative path", p.stderr.decode())
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "x")))

        whole = self.backup()
        cut = whole + ".cut"
        with open(whole, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:-1024])   # without its end blocks
        target = os.path.join(self.tmp.name, unique("cut"))
        p = run_cli(["restore", cut, target])
        self.assertEqual(p.returncode, 1)
        self.assertIn("cut short", p.stderr.decode())
        self.assertFalse(os.path.exists(target), "a refused restore left its target behind")

    def a_backup_with_documents(self):
        """A backup whose segments hold records: (tar bytes, the tar's members)."""
        app = self.make_app()
        for i in range(20):
            r, _ = self.request("PUT", f"/{app}/k{i}", os.urandom(300))
            self.assertEqual(r.status, 201)
        path = self.backup()
        with tarfile.open(path) as t:
            members = [m for m in t.getmembers() if m.name.endswith(".seg") and m.size > 1024]
        self.assertTrue(members, "no segment with records in the backup")
        with open(path, "rb") as f:
            return bytearray(f.read()), members

    def refused(self, tar_bytes: bytes, *expected: str) -> str:
        """Restores tar_bytes into a new target: exit 1, one line holding `expected`, no target."""
        tar_path = os.path.join(self.tmp.name, unique("damaged") + ".tar")
        with open(tar_path, "wb") as f:
            f.write(tar_bytes)
        target = os.path.join(self.tmp.name, unique("damaged"))
        p = run_cli(["restore", tar_path, target])
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        for text in expected:
            self.assertIn(text, err)
        self.assertFalse(os.path.exists(target), "a refused restore left its target behind")
        empty = os.path.join(self.tmp.name, unique("empty"))
        os.makedirs(empty)
        p = run_cli(["restore", tar_path, empty])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(os.listdir(empty), [], "a refused restore left files in the empty directory it was given")
        return err

    def test_restore_refuses_a_backup_with_a_flipped_byte_naming_the_file_and_offset(self):
        tar_bytes, members = self.a_backup_with_documents()
        seg = members[0]
        for at in (seg.offset_data + seg.size // 2,   # a record with valid records after it
                   seg.offset_data + seg.size - 8):   # the segment's last record: no torn tail in a backup
            with self.subTest(offset_in_segment=at - seg.offset_data):
                damaged = bytearray(tar_bytes)
                damaged[at] ^= 0x40
                err = self.refused(bytes(damaged), os.path.basename(seg.name))
                self.assertRegex(err, r"at byte \d+")

    def test_restore_refuses_a_backup_cut_inside_a_record(self):
        tar_bytes, members = self.a_backup_with_documents()
        seg = members[0]
        self.refused(bytes(tar_bytes[:seg.offset_data + seg.size // 2]), "cut short")


if __name__ == "__main__":
    unittest.main()

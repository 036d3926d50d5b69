"""SPEC section 6: the data directory is 0700 and every file in it 0600, whatever the umask.

- `serve` under umask 022 makes its data directory 0700 and its files (segments, LOCK, FORMAT,
  admin.token) 0600, and says nothing about modes;
- `serve` on a pre-existing 0755 data directory warns once, naming the directory and its mode, and
  still serves;
- `percore restore` of a backup under umask 022 makes the directory 0700 and its files 0600.
"""

import glob
import http.client
import os
import stat
import tempfile
import unittest

from percore_client import run_cli, start_server, unique


def mode(path: str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes_under(root: str):
    """(path, mode) of root and of everything under it."""
    yield root, mode(root)
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            yield p, mode(p)


class TestDataModes(unittest.TestCase):
    def setUp(self):
        self.old_umask = os.umask(0o022)
        self.tmp = tempfile.TemporaryDirectory(prefix="percore-modes-")

    def tearDown(self):
        os.umask(self.old_umask)
        self.tmp.cleanup()

    def serve_and_write(self, data: str, args=()):
        s = start_server(1, args, data=data)
        try:
            headers = {}
            if "--auth" in args:
                with open(os.path.join(data, "admin.token")) as f:
                    headers = {"Authorization": f"Bearer {f.read().strip()}"}
            with s.conn() as c:
                if headers:
                    self.assertIn(c.request("PUT", "/_apps/m", headers, b"{}").status, (200, 201))
                self.assertEqual(c.put("/m/k", b"x" * 100, headers).status, 201)
        finally:
            s.stop_and_check(self)
        err = s.stderr()
        s.cleanup()
        return err

    def assert_private(self, root: str):
        segments = glob.glob(os.path.join(root, "layout-*", "shard-*", "*.seg"))
        self.assertTrue(segments, "no segment files")
        for p, m in modes_under(root):
            want = 0o700 if os.path.isdir(p) else 0o600
            self.assertEqual(oct(m), oct(want), p)

    def test_serve_makes_a_private_data_directory_under_umask_022(self):
        data = os.path.join(self.tmp.name, "data")
        err = self.serve_and_write(data, ("--auth", "on"))
        self.assert_private(data)
        self.assertNotIn("has mode", err)

    def test_serve_warns_once_about_a_0755_data_directory_and_still_serves(self):
        data = os.path.join(self.tmp.name, "data")
        os.mkdir(data, 0o755)
        os.chmod(data, 0o755)
        err = self.serve_and_write(data)
        lines = [l for l in err.splitlines() if "has mode" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn(f"{data} has mode 0755", lines[0])

    def test_an_admin_token_file_owned_by_another_user_is_refused(self):
        """Security review L4: a token someone else could have planted is not taken. Needs root
        (to give the file away), as CI has: without it the chown fails the test, never skips it."""
        data = os.path.join(self.tmp.name, "data")
        token_file = os.path.join(self.tmp.name, "admin.token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("pca_" + "p" * 43 + "\n")
        os.chown(token_file, 4242, 4242)
        r = run_cli(["serve", "--listen", "127.0.0.1:0", "--data", data, "--auth", "on",
                     "--admin-token-file", token_file])
        self.assertEqual(r.returncode, 1, r)
        self.assertIn(b"owned by uid 4242", r.stderr)
        self.assertNotIn(b"p" * 43, r.stderr)

    def test_restore_makes_a_private_data_directory_under_umask_022(self):
        data = os.path.join(self.tmp.name, "data")
        s = start_server(1, ("--auth", "on"), data=data)
        try:
            with open(os.path.join(data, "admin.token")) as f:
                headers = {"Authorization": f"Bearer {f.read().strip()}"}
            with s.conn() as c:
                self.assertIn(c.request("PUT", "/_apps/m", headers, b"{}").status, (200, 201))
                self.assertEqual(c.put("/m/k", b"x" * 100, headers).status, 201)
            tar_path = os.path.join(self.tmp.name, "b.tar")
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
            c.request("GET", "/_backup", headers=headers)
            r = c.getresponse()
            self.assertEqual(r.status, 200)
            with open(tar_path, "wb") as f:
                f.write(r.read())
            c.close()
        finally:
            s.stop_and_check(self)
            s.cleanup()
        target = os.path.join(self.tmp.name, unique("restored"))
        p = run_cli(["restore", tar_path, target])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_private(target)


if __name__ == "__main__":
    unittest.main()

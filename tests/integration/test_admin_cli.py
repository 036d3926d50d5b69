"""`percore admin` (issue 33) against the real server with auth on, over HTTP and over HTTPS:
every command once (a backup restored with `percore restore`), its output for people and with --json, the refusals it passes on (401, 403,
404, 429, 507: exit 1 with the server's error in one line), a server that is down (exit 1, one
line), and usage errors (exit 2).
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from percore_client import run_cli, start_server, suite_certificate, unique  # noqa: E402


class AdminCliCase(unittest.TestCase):
    """One server (auth on; deliveries may reach loopback) per class; TLS = True adds HTTPS."""
    TLS = False

    @classmethod
    def setUpClass(cls):
        args = ["--auth", "on", "--deliveries-allow", "127.0.0.0/8"]
        if cls.TLS:
            cert, key = suite_certificate()
            args += ["--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key]
            cls.ca_file = cert
        cls.server = start_server(1, args)
        cls.data = cls.server.data

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop_and_check()
        finally:
            cls.server.cleanup()

    def url(self):
        return f"https://127.0.0.1:{self.server.tls_port}" if self.TLS else f"http://127.0.0.1:{self.server.port}"

    def tls(self):
        return ["--ca-file", self.ca_file] if self.TLS else []

    def admin(self, *args, token_file=None, expect=0):
        """Runs `percore admin` with the server, the data directory (its admin token) or a token
        file; checks the exit status; returns (stdout, stderr) as text."""
        if self.TLS:
            base = ["--server", f"https://127.0.0.1:{self.server.tls_port}", "--ca-file", self.ca_file]
        else:
            base = ["--server", f"http://127.0.0.1:{self.server.port}"]
        base += ["--token-file", token_file] if token_file else ["--data", self.data]
        done = run_cli(["admin", *base, *args])
        out, err = done.stdout.decode(), done.stderr.decode()
        self.assertEqual(done.returncode, expect, f"percore admin {' '.join(args)}: {out!r} {err!r}")
        return out, err

    def token_file(self, token: str) -> str:
        f = tempfile.NamedTemporaryFile("w", prefix="percore-admin-token-", delete=False)
        f.write(token + "\n")
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name


class TestCommands(AdminCliCase):
    def test_status_reports_health_role_shards_and_apps(self):
        out, _ = self.admin("status")
        self.assertRegex(out, r"(?m)^status\s+ok$")
        self.assertRegex(out, r"(?m)^role\s+primary$")
        self.assertRegex(out, r"(?m)^shards\s+1$")
        self.assertRegex(out, r"(?m)^apps\s+\d+$")
        doc = json.loads(self.admin("--json", "status")[0])
        self.assertEqual(doc["health"]["status"], "ok")
        self.assertIsInstance(doc["apps"]["apps"], list)

    def test_apps_put_get_list_and_delete(self):
        app = unique("cli")
        self.assertEqual(self.admin("apps", "put", app, "documents=10", "bytes=4096")[0], "created\n")
        self.assertEqual(self.admin("apps", "put", app, "documents=20")[0], "done\n")
        self.assertIn(app, self.admin("apps", "list")[0].split())
        out, _ = self.admin("apps", "get", app)
        self.assertRegex(out, r"(?m)^quota\.documents\s+20$")
        doc = json.loads(self.admin("--json", "apps", "get", app)[0])
        self.assertEqual(doc["quota"], {"documents": 20})
        self.admin("apps", "delete", app)
        self.assertNotIn(app, self.admin("apps", "list")[0].split())

    def test_tokens_create_list_and_revoke(self):
        app = unique("cli")
        self.admin("apps", "put", app)
        out, _ = self.admin("tokens", "create", app, "--scope", "write", "--prefix", "p/", "--ttl", "3600")
        self.assertIn("shown once", out)
        created = json.loads(self.admin("--json", "tokens", "create", app, "--scope", "read")[0])
        self.assertTrue(created["token"].startswith("pct_"))
        table = self.admin("tokens", "list", app)[0].splitlines()
        self.assertEqual(table[0].split(), ["ID", "SCOPE", "PREFIX", "EXPIRES", "LAST_USED"])
        self.assertEqual(len(table), 3)
        self.assertIn(created["id"], self.admin("tokens", "list", app)[0])
        self.admin("tokens", "revoke", app, created["id"])
        self.assertNotIn(created["id"], self.admin("tokens", "list", app)[0])
        self.assertNotIn(created["token"], self.admin("tokens", "list", app)[0])   # never a secret

    def test_deliveries_put_get_list_and_delete(self):
        app = unique("cli")
        self.admin("apps", "put", app)
        out, _ = self.admin("deliveries", "put", app, "hook", "--url", "http://127.0.0.1:9/in", "--prefix", "a/")
        self.assertRegex(out, r"(?m)^signing_secret\s+whsec_")
        self.assertEqual(self.admin("deliveries", "list", app)[0], "hook\n")
        out, _ = self.admin("deliveries", "get", app, "hook")
        self.assertRegex(out, r"(?m)^url\s+http://127\.0\.0\.1:9/in$")
        self.assertRegex(out, r"(?m)^state\s+(active|retrying)$")
        self.assertEqual(json.loads(self.admin("--json", "deliveries", "get", app, "hook")[0])["url"],
                         "http://127.0.0.1:9/in")
        self.admin("deliveries", "delete", app, "hook")
        self.assertEqual(self.admin("deliveries", "list", app)[0], "")

    def test_backup_writes_a_tar_that_restore_unpacks(self):
        app = unique("cli")
        self.admin("apps", "put", app)
        base = ["--server", self.url(), *self.tls(), "--data", self.data]
        done = run_cli(["admin", *base, "backup"], timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertGreater(len(done.stdout), 1024)
        with tempfile.TemporaryDirectory(prefix="percore-admin-backup-") as d:
            tar = os.path.join(d, "backup.tar")
            with open(tar, "wb") as f:
                f.write(done.stdout)
            restored = run_cli(["restore", tar, os.path.join(d, "restored")], timeout=60)
            self.assertEqual(restored.returncode, 0, restored.stderr)

    def test_replication_tokens_create_list_and_revoke(self):
        created = json.loads(self.admin("--json", "replication-tokens", "create", "--ttl", "600")[0])
        self.assertIn(created["id"], self.admin("replication-tokens", "list")[0])
        self.admin("replication-tokens", "revoke", created["id"])
        self.assertNotIn(created["id"], self.admin("replication-tokens", "list")[0])


class TestRefusals(AdminCliCase):
    def test_an_unknown_token_is_401_exit_1_with_the_servers_error(self):
        _, err = self.admin("apps", "list", token_file=self.token_file("pca_not_a_token_of_this_server_at_all"), expect=1)
        self.assertRegex(err, r"^percore admin: GET /_apps/: 401 \S")
        self.assertEqual(len(err.splitlines()), 1)

    def test_an_app_token_outside_its_reach_is_403(self):
        app = unique("cli")
        self.admin("apps", "put", app)
        token = json.loads(self.admin("--json", "tokens", "create", app, "--scope", "read")[0])["token"]
        _, err = self.admin("apps", "list", token_file=self.token_file(token), expect=1)
        self.assertIn(": 403 ", err)

    def test_an_app_that_does_not_exist_is_404(self):
        _, err = self.admin("apps", "get", unique("none"), expect=1)
        self.assertRegex(err, r": 404 no such app$")

    def test_an_app_token_past_its_rate_is_429(self):
        app = unique("cli")
        self.admin("apps", "put", app, "requests_per_second=1")
        token = json.loads(self.admin("--json", "tokens", "create", app, "--scope", "admin")[0])["token"]
        f = self.token_file(token)
        codes = set()
        for _ in range(6):
            done = run_cli(["admin", "--server", self.url(), *self.tls(), "--token-file", f,
                            "tokens", "list", app])
            codes.add(done.returncode)
            if done.returncode == 1:
                self.assertIn(": 429 ", done.stderr.decode())
                break
        self.assertIn(1, codes, "six administration requests a second past a rate of 1 were never refused")

    def test_a_refused_backup_writes_nothing_to_its_output(self):
        done = run_cli(["admin", "--server", self.url(), *self.tls(), "--token-file",
                        self.token_file("pca_not_a_token_of_this_server_at_all"), "backup"])
        self.assertEqual(done.returncode, 1, done)
        self.assertEqual(done.stdout, b"")
        self.assertRegex(done.stderr.decode(), r"^percore admin: GET /_backup: 401 ")

    def test_past_64_deliveries_is_507(self):
        app = unique("cli")
        self.admin("apps", "put", app)
        for i in range(64):
            self.admin("--json", "deliveries", "put", app, f"d{i}", "--url", "http://127.0.0.1:9/in")
        _, err = self.admin("deliveries", "put", app, "d64", "--url", "http://127.0.0.1:9/in", expect=1)
        self.assertRegex(err, r": 507 limit: deliveries$")


class TestOverHttps(TestCommands):
    TLS = True


class TestRefusalsOverHttps(TestRefusals):
    TLS = True


class TestWithoutAServer(unittest.TestCase):
    def test_a_server_that_is_down_is_one_line_and_exit_1(self):
        with socket.socket() as s:   # a port nobody listens on: bound, never listening
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            done = run_cli(["admin", "--server", f"http://127.0.0.1:{port}", "status"])
        self.assertEqual(done.returncode, 1, done)
        err = done.stderr.decode()
        self.assertRegex(err, rf"^percore admin: cannot reach http://127\.0\.0\.1:{port}: .*refused")
        self.assertEqual(len(err.splitlines()), 1)

    def test_usage_errors_exit_2(self):
        for args in (["bogus"], ["apps", "get"], ["--server", "ftp://x", "status"], ["apps", "put", "a", "documents=x"],
                     ["tokens", "create", "a"], ["--nope"]):
            with self.subTest(args=args):
                done = run_cli(["admin", *args])
                self.assertEqual(done.returncode, 2, done)
                self.assertEqual(len(done.stderr.decode().splitlines()), 1, done.stderr)

    def test_help_admin_prints_every_command(self):
        out = run_cli(["help", "admin"]).stdout.decode()
        for command in ("status", "apps list", "tokens create", "deliveries put", "replication-tokens", "backup"):
            self.assertIn(command, out)


if __name__ == "__main__":
    unittest.main()

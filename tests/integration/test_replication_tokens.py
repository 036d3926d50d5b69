"""SPEC sections 7 and 10: replication tokens, the follower's credential (security review H2).

A replication token reads /_changes/_all and nothing else; only the server admin makes, lists and
revokes them. A follower copies with one (never the admin token), verifies an https:// primary
against --follow-ca-file, and refuses http:// to a primary that is not loopback unless
--follow-insecure. Every server here is on 127.0.0.1; the non-loopback URL of the refusal test is
refused while the options are read, before anything is sent anywhere.
"""

import os
import re
import subprocess
import tempfile
import unittest

from percore_client import (AdminTestCase, admin_token_of, bearer, run_cli, start_server,
                            suite_certificate, unique, wait_until)

TOKEN_FORM = re.compile(r"^pct_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$")




def write_secret_file(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    return path


def temp_folder(test: unittest.TestCase) -> str:
    """A folder of the test's own, removed when it ends."""
    folder = tempfile.mkdtemp(prefix="percore-it-follow-")
    test.addCleanup(subprocess.run, ["rm", "-rf", folder])
    return folder


def start_follower(test: unittest.TestCase, url: str, token: str, folder: str, args=(), shards: int = 1):
    """A follower (on loopback) of the primary at `url`, copying with the replication token `token`
    (in a 0600 file of `folder`), its data in folder/data; cleaned up when the test ends. A
    restart with the same folder resumes the same copy."""
    token_file = write_secret_file(folder, "replication.token", token)
    follower = start_server(shards, ["--follow", url, "--follow-token-file", token_file, *args],
                            data=os.path.join(folder, "data"))
    test.addCleanup(follower.cleanup)
    return follower


class ReplicationCase(AdminTestCase):
    def make_replication_token(self, body=b"{}"):
        r = self.as_admin("POST", "/_replication/tokens", body)
        self.assertEqual(r.status, 201, r)
        doc = r.json()
        self.assertEqual(set(doc), {"id", "token"}, doc)
        self.assertRegex(doc["token"], TOKEN_FORM)
        return doc["id"], doc["token"]

    def app_with_document(self):
        app = unique("a")
        self.assertEqual(self.as_admin("PUT", f"/_apps/{app}", b"{}").status, 201)
        self.assertIn(self.as_admin("PUT", f"/{app}/k", b"v").status, (201, 204))
        return app


class TestReplicationTokens(ReplicationCase):
    def test_a_replication_token_reads_the_replication_feed_and_nothing_else(self):
        app = self.app_with_document()
        _, token = self.make_replication_token()
        with self.server.conn() as c:
            r = c.request("GET", "/_changes/_all?since=0&limit=1000", bearer(token))
            self.assertEqual(r.status, 200, r)
            self.assertIn(app.encode(), r.body)
            self.assertEqual(c.request("GET", "/_health", bearer(token)).status, 200)
        for method, target, body in [("GET", f"/{app}/k", None), ("PUT", f"/{app}/k", b"x"),
                                     ("GET", f"/{app}/", None), ("GET", f"/_changes/{app}", None),
                                     ("DELETE", f"/_apps/{app}", None), ("GET", "/_apps/", None),
                                     ("POST", f"/_apps/{app}/tokens", b'{"scope":"admin"}'),
                                     ("GET", "/_backup", None), ("GET", "/_metrics", None),
                                     ("POST", "/_replication/tokens", b"{}"),
                                     ("GET", "/_replication/tokens", None)]:
            with self.server.conn() as c:  # a refused body may close the connection
                r = c.request(method, target, bearer(token), body)
                self.assertEqual(r.status, 403, f"{method} {target}: {r}")
        self.assertEqual(self.as_admin("GET", f"/{app}/k").body, b"v")  # the PUT changed nothing

    def test_only_the_server_admin_makes_lists_and_revokes_replication_tokens(self):
        app = self.app_with_document()
        r = self.as_admin("POST", f"/_apps/{app}/tokens", b'{"scope":"admin"}')
        app_admin = r.json()["token"]
        rid, _ = self.make_replication_token()
        for method, target, body in [("POST", "/_replication/tokens", b"{}"), ("GET", "/_replication/tokens", None),
                                     ("DELETE", f"/_replication/tokens/{rid}", None)]:
            for who, status in ((bearer(app_admin), 403), ({}, 401)):
                with self.server.conn() as c:  # a refused body may close the connection
                    self.assertEqual(c.request(method, target, who, body).status, status, target)

    def test_the_body_takes_a_ttl_only(self):
        self.assertEqual(self.as_admin("POST", "/_replication/tokens", b'{"scope":"admin"}').status, 400)
        self.assertEqual(self.as_admin("POST", "/_replication/tokens", b'{"ttl":0}').status, 400)
        self.assertEqual(self.as_admin("POST", "/_replication/tokens", b"[").status, 400)
        rid, _ = self.make_replication_token(b'{"ttl":3600}')
        listed = {t["id"]: t for t in self.as_admin("GET", "/_replication/tokens").json()["tokens"]}
        self.assertEqual(listed[rid]["scope"], "replicate")
        self.assertIsNotNone(listed[rid]["expires"])

    def test_the_listing_shows_replication_tokens_without_secrets_and_no_app_lists_them(self):
        app = self.app_with_document()
        rid, token = self.make_replication_token()
        r = self.as_admin("GET", "/_replication/tokens")
        self.assertEqual(r.status, 200, r)
        ids = [t["id"] for t in r.json()["tokens"]]
        self.assertIn(rid, ids)
        self.assertNotIn(token.encode(), r.body)
        app_tokens = self.as_admin("GET", f"/_apps/{app}/tokens").json()["tokens"]
        self.assertNotIn(rid, [t["id"] for t in app_tokens])
        self.assertEqual(self.as_admin("DELETE", f"/_apps/{app}/tokens/{rid}").status, 404)

    def test_a_revoked_replication_token_is_refused_at_once_on_every_shard(self):
        rid, token = self.make_replication_token()
        with self.server.conn() as held:  # a connection that has the token cached
            self.assertEqual(held.request("GET", "/_changes/_all?since=0&limit=1", bearer(token)).status, 200)
            self.assertEqual(self.as_admin("DELETE", f"/_replication/tokens/{rid}").status, 204)
            self.assertEqual(held.request("GET", "/_changes/_all?since=0&limit=1", bearer(token)).status, 401)
        for _ in range(2 * self.shard_count()):  # new connections land on every shard
            with self.server.conn() as c:
                self.assertEqual(c.request("GET", "/_changes/_all?since=0&limit=1", bearer(token)).status, 401)
        self.assertEqual(self.as_admin("DELETE", f"/_replication/tokens/{rid}").status, 404)


class TestFollowerCredential(ReplicationCase):
    """A follower of the class's primary (auth on), itself on loopback."""

    def follower_files(self):
        return temp_folder(self)

    def test_a_follower_given_the_admin_token_refuses_to_start(self):
        folder = self.follower_files()
        token_file = write_secret_file(folder, "admin.token", self.admin)
        done = run_cli(["serve", "--listen", "127.0.0.1:0", "--data", os.path.join(folder, "data"),
                        "--follow", f"http://127.0.0.1:{self.server.port}", "--follow-token-file", token_file])
        self.assertEqual(done.returncode, 2, done)
        self.assertIn(b"replication token", done.stderr)
        self.assertNotIn(self.admin.encode(), done.stderr)

    def test_http_to_a_primary_that_is_not_loopback_is_refused_without_follow_insecure(self):
        folder = self.follower_files()
        token_file = write_secret_file(folder, "t", "pct_0123456789abcdef_" + "A" * 43)
        # refused while the options are read: nothing is resolved or sent
        done = run_cli(["serve", "--listen", "127.0.0.1:0", "--data", os.path.join(folder, "data"),
                        "--follow", "http://192.0.2.7:8080", "--follow-token-file", token_file])
        self.assertEqual(done.returncode, 2, done)
        self.assertIn(b"--follow-insecure", done.stderr)
        self.assertEqual(done.stdout, b"")

    def https_primary_holding(self, value: bytes):
        """A primary with auth on serving HTTPS (the suite's certificate for 127.0.0.1) whose app
        shop holds k = value; returns it and a fresh replication token of it."""
        cert, key = suite_certificate()
        primary = start_server(self.shard_count(), ["--auth", "on", "--tls-listen", "127.0.0.1:0",
                                                    "--tls-cert", cert, "--tls-key", key])
        self.addCleanup(primary.cleanup)
        admin = admin_token_of(primary)
        with primary.conn() as c:
            self.assertEqual(c.request("PUT", "/_apps/shop", bearer(admin), b"{}").status, 201)
            self.assertEqual(c.request("PUT", "/shop/k", bearer(admin), value).status, 201)
            token = c.request("POST", "/_replication/tokens", bearer(admin), b"{}").json()["token"]
        return primary, token

    def follower_of(self, primary, token: str, ca_file: str, folder: str):
        return start_follower(self, f"https://127.0.0.1:{primary.tls_port}", token, folder,
                              ["--follow-ca-file", ca_file])

    def test_a_follower_copies_over_https_with_its_ca_file_and_a_replication_token(self):
        primary, token = self.https_primary_holding(b"copied")
        follower = self.follower_of(primary, token, suite_certificate()[0], self.follower_files())

        def copied():
            with follower.conn() as c:
                return c.get("/shop/k").body == b"copied"
        wait_until(copied, timeout=15, what="the follower holds /shop/k, copied over https")
        self.assertNotIn(token, follower.stderr())

    def test_a_follower_does_not_copy_from_a_primary_its_ca_file_does_not_verify(self):
        primary, token = self.https_primary_holding(b"secret")
        folder = self.follower_files()
        other_ca = os.path.join(folder, "other-ca.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", os.path.join(folder, "other-key.pem"), "-out", other_ca],
                       check=True, capture_output=True)
        follower = self.follower_of(primary, token, other_ca, folder)
        wait_until(lambda: "cannot be reached" in follower.stderr() or "verif" in follower.stderr(), timeout=15,
                   what="the follower logs that the primary could not be verified")
        with follower.conn() as c:
            self.assertEqual(c.get("/shop/k").status, 404)

if __name__ == "__main__":
    unittest.main()

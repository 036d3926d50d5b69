"""Issue 30 (security review L8): one log line per administrative change — what changed and by whom
(the server admin, or a token's id), never a secret — and a rate-limited line for authentication
failures, like Redis's ACL LOG.
"""

import json
import unittest

from percore_client import AdminTestCase, bearer, unique, wait_until



class TestAuditLog(AdminTestCase):
    SERVER_ARGS = ("--auth", "on", "--deliveries-allow", "127.0.0.0/8")

    def request(self, method, target, token, body=None):
        with self.server.conn() as c:
            return c.request(method, target, bearer(token), body)

    def wait_logged(self, line):
        wait_until(lambda: line in self.server.stderr(), timeout=5, what=f"the log line {line!r}")

    def test_apps_tokens_and_deliveries_changes_are_logged_with_who_and_no_secret(self):
        app = unique("a")
        self.assertEqual(self.request("PUT", f"/_apps/{app}", self.admin, b"{}").status, 201)
        self.wait_logged(f"percore: admin: app {app} created by the server admin")
        r = self.request("POST", f"/_apps/{app}/tokens", self.admin, b'{"scope":"admin"}')
        app_admin, admin_id = r.json()["token"], r.json()["id"]
        self.wait_logged(f"percore: admin: token {admin_id} of app {app} made by the server admin")
        r = self.request("POST", f"/_apps/{app}/tokens", app_admin, b'{"scope":"read"}')
        reader_id = r.json()["id"]
        self.wait_logged(f"percore: admin: token {reader_id} of app {app} made by token {admin_id}")
        r = self.request("PUT", f"/_apps/{app}/deliveries/hook", app_admin, json.dumps({"url": "http://127.0.0.1:9/"}).encode())
        self.assertEqual(r.status, 201, r)
        secret = r.json()["signing_secret"]
        self.wait_logged(f"percore: admin: delivery {app}/hook created by token {admin_id}")
        self.assertEqual(self.request("DELETE", f"/_apps/{app}/tokens/{reader_id}", app_admin).status, 204)
        self.wait_logged(f"percore: admin: token {reader_id} of app {app} revoked by token {admin_id}")
        self.assertEqual(self.request("DELETE", f"/_apps/{app}/deliveries/hook", self.admin).status, 204)
        self.wait_logged(f"percore: admin: delivery {app}/hook deleted by the server admin")
        r = self.request("POST", "/_replication/tokens", self.admin, b"{}")
        self.wait_logged(f"percore: admin: replication token {r.json()['id']} made by the server admin")
        replication = r.json()["token"]
        self.assertEqual(self.request("DELETE", f"/_apps/{app}", self.admin).status, 204)
        self.wait_logged(f"percore: admin: app {app} deleted by the server admin")
        log = self.server.stderr()
        for secret_text in (self.admin, app_admin, secret, replication):
            self.assertNotIn(secret_text, log)

    def test_authentication_failures_are_logged_at_most_once_a_second_a_shard_with_their_count(self):
        before = self.server.stderr().count("percore: auth: ")
        for _ in range(40):  # well within a second, on any machine
            self.assertEqual(self.request("GET", "/_apps/", "pct_0123456789abcdef_" + "x" * 43).status, 401)
        wait_until(lambda: self.server.stderr().count("percore: auth: ") > before, timeout=5,
                   what="an auth failure line")
        lines = [l for l in self.server.stderr().splitlines() if l.startswith("percore: auth: ")][before:]
        self.assertLessEqual(len(lines), 2 * self.shard_count(), lines)
        self.assertRegex(lines[0], r"^percore: auth: \d+ requests? refused 401 on shard \d+ since the last such line "
                                   r"\(latest: unknown, expired or revoked token\)$")
        self.assertNotIn("x" * 43, self.server.stderr())


if __name__ == "__main__":
    unittest.main()

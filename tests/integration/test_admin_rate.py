"""SPEC section 7 (security review M1): administration requests of an app's tokens count against the
app's requests_per_second, so an app admin cannot flood the shards with token and delivery requests
past its own rate; the server admin is never rate-limited.
"""

import json
import unittest

from percore_client import AdminTestCase, bearer, unique



class TestAdminRate(AdminTestCase):
    def app_with_admin_token(self, rate):
        app = unique("a")
        with self.server.conn() as c:
            body = json.dumps({"quota": {"requests_per_second": rate}}).encode()
            self.assertEqual(c.request("PUT", f"/_apps/{app}", bearer(self.admin), body).status, 201)
            r = c.request("POST", f"/_apps/{app}/tokens", bearer(self.admin), b'{"scope":"admin"}')
            self.assertEqual(r.status, 201, r)
        return app, r.json()["token"]

    def test_an_app_admins_token_requests_are_rate_limited_like_its_documents(self):
        app, token = self.app_with_admin_token(rate=1)
        statuses = []
        for _ in range(5):  # well within one second on any machine: the burst is one second's worth
            with self.server.conn() as c:  # a refused body may close the connection
                r = c.request("POST", f"/_apps/{app}/tokens", bearer(token), b'{"scope":"read"}')
                statuses.append(r.status)
                if r.status == 429:
                    self.assertIsNotNone(r.header("retry-after"), r)
                    self.assertEqual(r.json(), {"error": "quota exceeded: requests_per_second"})
        self.assertIn(429, statuses, statuses)
        self.assertLessEqual(statuses.count(201), 2, statuses)

    def test_listing_tokens_and_deliveries_counts_too(self):
        app, token = self.app_with_admin_token(rate=1)
        with self.server.conn() as c:
            statuses = [c.request("GET", target, bearer(token)).status
                        for target in [f"/_apps/{app}/tokens", f"/_apps/{app}/deliveries/d", f"/_apps/{app}",
                                       f"/_apps/{app}/tokens"]]
        self.assertIn(429, statuses, statuses)

    def test_the_server_admin_is_never_rate_limited(self):
        app, _ = self.app_with_admin_token(rate=1)
        with self.server.conn() as c:
            for _ in range(5):
                r = c.request("POST", f"/_apps/{app}/tokens", bearer(self.admin), b'{"scope":"read"}')
                self.assertEqual(r.status, 201, r)

    def test_the_app_usage_counts_its_admins_requests(self):
        app, token = self.app_with_admin_token(rate=1000)
        with self.server.conn() as c:
            for _ in range(3):
                self.assertEqual(c.request("GET", f"/_apps/{app}/tokens", bearer(token)).status, 200)
            usage = c.request("GET", f"/_apps/{app}", bearer(self.admin)).json()["usage"]
        self.assertGreaterEqual(usage["requests"], 3, usage)


if __name__ == "__main__":
    unittest.main()

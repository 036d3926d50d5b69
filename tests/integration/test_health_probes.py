"""SPEC section 12's health probes for HAProxy: /_health/primary (200 only on a serving primary) and
/_health/replica?lag=N (200 only on a follower connected to its primary, within N changes of it);
HEAD answers the same status. No token is needed, as for /_health. Every server is on 127.0.0.1.
"""

import os
import subprocess
import tempfile
import unittest

from percore_client import AdminTestCase, env_shards, start_server, wait_until


def status_of(server, method, target):
    with server.conn() as c:
        return c.request(method, target)


class TestHealthProbes(AdminTestCase):
    def test_a_primary_is_healthy_as_primary_and_not_as_replica_whatever_the_method(self):
        for method in ("GET", "HEAD"):
            r = status_of(self.server, method, "/_health/primary")
            self.assertEqual(r.status, 200, r)
            self.assertEqual(status_of(self.server, method, "/_health/replica").status, 503)
            self.assertEqual(status_of(self.server, method, "/_health/replica?lag=1000").status, 503)
        self.assertEqual(status_of(self.server, "GET", "/_health/primary").json(), {"status": "ok", "role": "primary"})

    def test_a_bad_lag_is_400_and_an_unknown_probe_404(self):
        self.assertEqual(status_of(self.server, "GET", "/_health/replica?lag=x").status, 400)
        self.assertEqual(status_of(self.server, "GET", "/_health/leader").status, 401)  # auth on: no token, no map
        self.assertEqual(self.as_admin("GET", "/_health/leader").status, 404)

    def test_a_follower_is_a_healthy_replica_within_its_lag_and_never_a_primary(self):
        folder = tempfile.mkdtemp(prefix="percore-it-probe-")
        self.addCleanup(subprocess.run, ["rm", "-rf", folder])
        self.assertEqual(self.as_admin("PUT", "/_apps/shop", b"{}").status, 201)
        for i in range(20):
            self.assertEqual(self.as_admin("PUT", f"/shop/k{i}", b"v").status, 201)
        token = self.as_admin("POST", "/_replication/tokens", b"{}").json()["token"]
        token_file = os.path.join(folder, "replication.token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        follower = start_server(env_shards(), ["--follow", f"http://127.0.0.1:{self.server.port}",
                                               "--follow-token-file", token_file],
                                data=os.path.join(folder, "data"))
        self.addCleanup(follower.cleanup)
        wait_until(lambda: status_of(follower, "GET", "/_health/replica?lag=0").status == 200, timeout=15,
                   what="the follower caught up (a healthy replica within 0 changes)")
        self.assertEqual(status_of(follower, "HEAD", "/_health/replica").status, 200)
        self.assertEqual(status_of(follower, "GET", "/_health/primary").status, 503)
        self.assertEqual(status_of(follower, "HEAD", "/_health/primary").status, 503)
        self.assertEqual(status_of(follower, "GET", "/_health/replica").json()["role"], "follower")
        # its primary gone, it is no healthy replica any more
        self.server.stop_and_check(self)
        wait_until(lambda: status_of(follower, "GET", "/_health/replica").status == 503, timeout=15,
                   what="the follower, cut off from its primary, reports itself unhealthy")
        self.assertEqual(status_of(follower, "GET", "/_health").status, 200)  # it still serves reads
        follower.stop_and_check(self)
        type(self).server = start_server(self.shard_count(), self.SERVER_ARGS)  # for tearDownClass


if __name__ == "__main__":
    unittest.main()

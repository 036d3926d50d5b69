"""SPEC section 12, "Synchronous replication" (--replication sync): a write is acknowledged, and
becomes visible, only once a follower has it durable (its next page request says so); with no
follower acknowledging within --sync-timeout the write gets 503 {"error":"no synchronous
follower"} and is not readable on the primary.

Each test runs its own primary (auth on, the suite's shard count, --sync-timeout 1) and, where it
needs one, a manual --follow follower on 127.0.0.1. Every wait is on a condition (wait_until).
"""

import os
import time
import unittest

from percore_client import ServerTestCase, admin_token_of, bearer, start_server, unique, wait_until
from test_replication_tokens import start_follower, temp_folder

SYNC_TIMEOUT_S = 1
COPY_TIMEOUT_S = 20.0


def metric_total(server, name: str) -> float:
    """The sum of a /_metrics family's samples (every shard's)."""
    with server.conn() as c:
        r = c.request("GET", "/_metrics", bearer(admin_token_of(server)))
    assert r.status == 200, r
    total = 0.0
    for line in r.body.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


class SyncReplicationCase(unittest.TestCase):
    def setUp(self):
        # The app and the replication token are writes too, which sync mode would hold for a
        # follower that needs the token first: made by the same data directory in async mode.
        data = os.path.join(temp_folder(self), "data")
        self.primary = start_server(ServerTestCase.shard_count(), ["--auth", "on"], data=data)
        self.addCleanup(self.primary.cleanup)
        self.admin = admin_token_of(self.primary)
        self.app = unique("a")
        self.assertEqual(self.on_primary("PUT", f"/_apps/{self.app}", b"{}").status, 201)
        r = self.on_primary("POST", "/_replication/tokens", b"{}")
        self.assertEqual(r.status, 201, r)
        self.token = r.json()["token"]
        self.primary.stop_and_check(self)
        self.primary = start_server(ServerTestCase.shard_count(), [
            "--auth", "on", "--replication", "sync", "--sync-timeout", str(SYNC_TIMEOUT_S)], data=data)
        self.addCleanup(self.primary.cleanup)

    def on_primary(self, method: str, target: str, body: bytes | None = None):
        with self.primary.conn() as c:
            return c.request(method, target, bearer(self.admin), body)

    @staticmethod
    def on(board, method: str, target: str):
        with board.conn() as c:
            return c.request(method, target, {})

    def key_path(self, key: str) -> str:
        return f"/{self.app}/{key}"

    def new_follower(self, folder: str):
        return start_follower(self, f"http://127.0.0.1:{self.primary.port}", self.token, folder, shards=1)

    def wait_in_sync(self):
        """Until a write is acknowledged (the follower caught up and acknowledges); returns its key."""
        key = unique("probe")

        def acknowledged():
            return self.on_primary("PUT", self.key_path(key), b"probe").status in (200, 201)
        wait_until(acknowledged, timeout=COPY_TIMEOUT_S, what="a write acknowledged by a synchronous follower")
        return key


class TestSyncWithoutFollower(SyncReplicationCase):
    def test_a_write_no_follower_acknowledges_is_answered_503_after_the_sync_timeout_and_not_readable(self):
        began = time.monotonic()
        r = self.on_primary("PUT", self.key_path("k"), b"v")
        waited = time.monotonic() - began
        self.assertEqual(r.status, 503, r)
        self.assertEqual(r.json(), {"error": "no synchronous follower"})
        self.assertGreaterEqual(waited, SYNC_TIMEOUT_S * 0.9)
        self.assertLess(waited, SYNC_TIMEOUT_S + 3)
        self.assertEqual(self.on_primary("GET", self.key_path("k")).status, 404)
        self.assertGreaterEqual(metric_total(self.primary, "percore_sync_timeouts_total"), 1)


class TestSyncWithFollower(SyncReplicationCase):
    def test_writes_are_acknowledged_and_readable_on_the_follower_as_soon_as_answered(self):
        follower = self.new_follower(temp_folder(self))
        self.wait_in_sync()
        for i in range(30):
            key, body = f"k{i}", f"value {i}".encode()
            r = self.on_primary("PUT", self.key_path(key), body)
            self.assertEqual(r.status, 201, r)
            copy = self.on(follower, "GET", self.key_path(key))
            self.assertEqual((copy.status, copy.body, copy.etag), (200, body, r.etag), f"{key}: {copy}")
            self.assertEqual(self.on_primary("GET", self.key_path(key)).body, body)
        self.assertGreaterEqual(metric_total(self.primary, "percore_sync_acknowledged_total"), 30)

    def test_stopping_the_follower_makes_writes_503_and_restarting_it_makes_them_succeed(self):
        folder = temp_folder(self)
        follower = self.new_follower(folder)
        self.wait_in_sync()
        follower.stop()
        r = self.on_primary("PUT", self.key_path("unacknowledged"), b"late")
        self.assertEqual((r.status, r.json()), (503, {"error": "no synchronous follower"}))
        self.assertEqual(self.on_primary("GET", self.key_path("unacknowledged")).status, 404)
        follower = self.new_follower(folder)
        self.wait_in_sync()
        r = self.on_primary("PUT", self.key_path("after"), b"again")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.on(follower, "GET", self.key_path("after")).body, b"again")
        # the write answered 503 was durable here: once a follower copied it, it shows
        self.assertEqual(self.on(follower, "GET", self.key_path("unacknowledged")).body, b"late")
        self.assertEqual(self.on_primary("GET", self.key_path("unacknowledged")).body, b"late")

    def test_a_write_acknowledged_in_sync_mode_survives_kill_9_of_the_primary(self):
        follower = self.new_follower(temp_folder(self))
        self.wait_in_sync()
        acknowledged = {}
        for i in range(20):
            r = self.on_primary("PUT", self.key_path(f"d{i}"), f"durable {i}".encode())
            self.assertEqual(r.status, 201, r)
            acknowledged[f"d{i}"] = f"durable {i}".encode()
        self.primary.kill()
        for key, body in acknowledged.items():
            r = self.on(follower, "GET", self.key_path(key))
            self.assertEqual((r.status, r.body), (200, body), key)


if __name__ == "__main__":
    unittest.main()

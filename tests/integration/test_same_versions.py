"""SPEC section 10, "Same versions on every board": a follower serves each document with its
primary's ETag, so an ETag read on one board works in If-Match / If-None-Match / If-Range on the
other; a promoted follower keeps them, and its own writes get ETags above every copied one.

The primary (auth on, the suite's shard count) and its followers (auth off, another shard count:
the copy cannot reuse the primary's shard layout) run on 127.0.0.1; a follower copies over http://
with a replication token (SPEC 7). Every wait is on a condition (wait_until), never a fixed sleep.
"""

import json
import unittest

from percore_client import AdminTestCase, bearer, start_server, unique, wait_until
from test_replication_tokens import start_follower, temp_folder

COPY_TIMEOUT_S = 15.0
LARGE_BYTES = 200 * 1024   # above the store's 64 KiB: the value lives in the log file once durable


def etag_number(etag: str) -> int:
    """The version a percore ETag names: 16 hex digits in quotes."""
    assert etag and len(etag) == 18 and etag[0] == etag[-1] == '"', etag
    return int(etag[1:-1], 16)


class SameVersionsCase(AdminTestCase):
    """The class's primary; each test makes its own app and, where it needs one, its own follower."""

    def setUp(self):
        super().setUp()
        self.assertEqual(self.as_admin("PUT", f"/_apps/{self.app}", b"{}").status, 201)
        r = self.as_admin("POST", "/_replication/tokens", b"{}")
        self.assertEqual(r.status, 201, r)
        self.replication_token = r.json()["token"]

    def follower_shards(self) -> int:
        return 1 if self.shard_count() > 1 else 2

    def new_follower(self, folder: str | None = None):
        """A follower of the class's primary; `folder` (its data) to restart one."""
        return start_follower(self, f"http://127.0.0.1:{self.server.port}", self.replication_token,
                              folder or temp_folder(self), shards=self.follower_shards())

    def put_on_primary(self, key: str, body: bytes, headers: dict | None = None):
        with self.server.conn() as c:
            return c.request("PUT", self.path(key), {**bearer(self.admin), **(headers or {})}, body)

    def on_primary(self, method: str, target: str, headers: dict | None = None):
        with self.server.conn() as c:
            return c.request(method, target, {**bearer(self.admin), **(headers or {})})

    @staticmethod
    def on(board, method: str, target: str, headers: dict | None = None, body: bytes | None = None):
        with board.conn() as c:
            return c.request(method, target, headers or {}, body)

    def wait_copied(self, follower, key: str, body: bytes):
        """Until the follower serves `key` with `body`; returns that answer."""
        def copied():
            r = self.on(follower, "GET", self.path(key))
            return r if r.status == 200 and r.body == body else None
        return wait_until(copied, timeout=COPY_TIMEOUT_S, what=f"the follower serves {key} as the primary does")

    def write_and_copy(self, follower, documents: dict) -> dict:
        """PUTs each key = value on the primary, waits until the follower serves them all; returns
        key -> the primary's ETag."""
        etags = {}
        for key, value in documents.items():
            r = self.put_on_primary(key, value)
            self.assertEqual(r.status, 201, r)
            etags[key] = r.etag
        for key, value in documents.items():
            self.wait_copied(follower, key, value)
        return etags

    def assert_follower_etags(self, follower, etags: dict):
        for key, etag in etags.items():
            r = self.on(follower, "GET", self.path(key))
            self.assertEqual((r.status, r.etag), (200, etag), f"{key}: {r}")


class TestSameVersions(SameVersionsCase):
    def test_a_followers_get_head_list_and_feed_etags_are_the_primarys_small_and_large_values(self):
        follower = self.new_follower()
        documents = {"small": b"a small value", "large": bytes(range(256)) * (LARGE_BYTES // 256)}
        etags = self.write_and_copy(follower, documents)
        for key, etag in etags.items():
            self.assertEqual(self.on_primary("GET", self.path(key)).etag, etag)
            self.assertEqual(self.on(follower, "GET", self.path(key)).etag, etag, key)
            head = self.on(follower, "HEAD", self.path(key))
            self.assertEqual((head.status, head.etag), (200, etag), key)
        listed = self.on(follower, "GET", f"/{self.app}/?limit=10")
        self.assertEqual(listed.status, 200, listed)
        self.assertEqual({e["key"]: e["etag"] for e in listed.json()["keys"]}, etags)
        feed = self.on(follower, "GET", f"/_changes/{self.app}?since=0")
        self.assertEqual(feed.status, 200, feed)
        self.assertEqual({c["key"]: c["etag"] for c in feed.json()["changes"]}, etags)

    def test_if_match_with_a_followers_etag_on_the_primary_succeeds_unchanged_and_is_412_once_changed(self):
        follower = self.new_follower()
        self.write_and_copy(follower, {"doc": b"v1"})
        etag = self.on(follower, "GET", self.path("doc")).etag
        r = self.put_on_primary("doc", b"v2", {"If-Match": etag})
        self.assertEqual(r.status, 204, r)
        r = self.put_on_primary("doc", b"v3", {"If-Match": etag})
        self.assertEqual(r.status, 412, r)
        self.assertEqual(self.on_primary("GET", self.path("doc")).body, b"v2")

    def test_if_none_match_and_if_range_with_the_primarys_etag_are_answered_by_the_follower(self):
        follower = self.new_follower()
        etag = self.write_and_copy(follower, {"doc": b"0123456789"})["doc"]
        r = self.on(follower, "GET", self.path("doc"), {"If-None-Match": etag})
        self.assertEqual((r.status, r.etag), (304, etag), r)
        r = self.on(follower, "GET", self.path("doc"), {"Range": "bytes=2-4", "If-Range": etag})
        self.assertEqual((r.status, r.body), (206, b"234"), r)


class TestFollowerRestarts(SameVersionsCase):
    def documents(self) -> dict:
        return {f"k{i}": b"value %d" % i for i in range(6)} | {"large": b"L" * LARGE_BYTES}

    def test_a_restarted_follower_serves_the_same_etags(self):
        folder = temp_folder(self)
        follower = self.new_follower(folder)
        etags = self.write_and_copy(follower, self.documents())
        self.assertEqual(follower.stop(), 0)
        follower = self.new_follower(folder)
        self.assert_follower_etags(follower, etags)

    def test_a_promoted_follower_keeps_the_etags_and_its_writes_get_higher_ones(self):
        folder = temp_folder(self)
        follower = self.new_follower(folder)
        etags = self.write_and_copy(follower, self.documents())
        before = self.on(follower, "GET", self.path("k0")).etag
        self.assertEqual(follower.stop(), 0)
        promoted = start_server(self.follower_shards(), data=follower.data)  # without --follow
        self.addCleanup(promoted.cleanup)
        health = self.on(promoted, "GET", "/_health")
        self.assertEqual(json.loads(health.body)["role"], "primary", health)
        self.assert_follower_etags(promoted, etags)
        r = self.on(promoted, "PUT", self.path(unique("new")), body=b"written after the promotion")
        self.assertEqual(r.status, 201, r)
        self.assertGreater(etag_number(r.etag), max(etag_number(e) for e in etags.values()))
        r = self.on(promoted, "PUT", self.path("k0"), {"If-Match": before}, b"changed on the promoted board")
        self.assertEqual(r.status, 204, r)
        self.assertGreater(etag_number(r.etag), etag_number(before))
        r = self.on(promoted, "PUT", self.path("k0"), {"If-Match": before}, b"again")
        self.assertEqual(r.status, 412, r)


if __name__ == "__main__":
    unittest.main()

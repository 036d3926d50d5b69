"""The routes of docs/openapi.yaml that no other module's requests reach, each asked once, so that
every described route (path and method) is exercised and its answer checked by the client
against the description (percore_client.Conn -> api_description.py). Each test also states the
answer the description gives, so a server and a description that drifted together would still
fail here.
"""
from __future__ import annotations

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from percore_client import ServerTestCase  # noqa: E402


class TestRoutesNoOtherTestReaches(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.c = self.conn()
        self.assertEqual(self.c.put(self.path("doc"), b"0123456789").status, 201)

    def test_head_of_a_change_feed_is_its_get_without_the_body(self):
        r = self.c.head(f"/_changes/{self.app}?since=0")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"")

    def test_options_on_a_document_lists_its_methods(self):
        r = self.c.request("OPTIONS", self.path("doc"))
        self.assertEqual(r.status, 204, r)
        self.assertIn("PUT", r.header("allow", ""))

    def test_an_app_without_a_key_is_400_for_every_method(self):
        for method in ("PUT", "DELETE", "HEAD"):
            with self.subTest(method=method):
                r = self.c.request(method, f"/{self.app}", body=b"x" if method == "PUT" else None)
                self.assertEqual(r.status, 400, r)

    def test_a_name_under_underscore_that_is_no_endpoint_is_404_for_every_method(self):
        for method in ("PUT", "POST", "DELETE", "HEAD"):
            with self.subTest(method=method):
                r = self.c.request(method, "/_nothing-here", body=b"{}" if method in ("PUT", "POST") else None)
                self.assertEqual(r.status, 404, r)

    def test_head_of_the_administration_lists_is_their_get_without_the_body(self):
        self.assertIn(self.c.put(f"/_apps/{self.app}", b'{"quota":{}}').status, (201, 204))
        for target in ("/_apps/", f"/_apps/{self.app}", f"/_apps/{self.app}/tokens",
                       f"/_apps/{self.app}/deliveries", "/_replication/tokens"):
            with self.subTest(target=target):
                r = self.c.head(target)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.body, b"")

    def test_head_of_the_root_the_replication_feed_a_delivery_and_a_backup(self):
        self.assertEqual(self.c.head("/").status, 404)
        self.assertEqual(self.c.head("/_changes/_all?since=0").status, 200)
        self.assertEqual(self.c.head(f"/_apps/{self.app}/deliveries/none").status, 404)
        r = self.c.head("/_backup")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b"")

    def test_head_ignores_a_range_as_rfc_9110_asks(self):
        # RFC 9110 §14.2: range handling is defined for GET only; other methods ignore Range
        for asked in ("bytes=2-5", "bytes=50-60"):
            with self.subTest(range=asked):
                r = self.c.head(self.path("doc"), {"Range": asked})
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.header("content-length"), "10")

    def test_a_backup_is_a_tar_stream(self):
        r = self.c.get("/_backup")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("content-type"), "application/x-tar")
        self.assertGreater(len(r.body), 512)


if __name__ == "__main__":
    unittest.main()

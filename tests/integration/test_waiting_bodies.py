"""Requests whose body arrives after the head: the head must stay the request's own while other
connections on the shard parse theirs and while the input buffer moves under a chunked body.
Regressions for two bugs the soak test (tests/soak/) found: header fields taken from another
connection's request (Content-Type, If-Match, If-None-Match), and a valid chunked PUT answered
400 'malformed target' once the buffer had moved."""
import unittest

import percore_client as pc
from percore_client import ServerTestCase, stats_total, wait_until


class TestWaitingBodies(ServerTestCase):

    def wait_for_the_head_to_wait_for_its_body(self):
        """Until the server has parsed connection a's head and holds its body (the budget charged
        for it: /_stats body_bytes_in_flight), so that b's request is parsed while a's waits."""
        wait_until(lambda: stats_total(self.server, "body_bytes_in_flight") > 0,
                   what="the server to hold the PUT's body (body_bytes_in_flight > 0)")

    def test_a_put_keeps_its_content_type_while_another_connection_sends_a_request(self):
        a, b = self.conn(), self.conn()
        a.send(f"PUT /{self.app}/a HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/a\r\nContent-Length: 4\r\n\r\nAA".encode())
        self.wait_for_the_head_to_wait_for_its_body()
        self.assertEqual(b.put(f"/{self.app}/c", b"CC", {"Content-Type": "text/from-b"}).status, 201)
        a.send(b"AA")
        self.assertEqual(a.read_final("PUT").status, 201)
        g = a.get(f"/{self.app}/a")
        self.assertEqual((g.status, g.body, g.header("content-type")), (200, b"AAAA", "text/a"))

    def test_a_put_keeps_its_if_none_match_while_another_connection_sends_a_request(self):
        a, b = self.conn(), self.conn()
        self.assertEqual(a.put(f"/{self.app}/k", b"v1").status, 201)
        a.send(f"PUT /{self.app}/k HTTP/1.1\r\nHost: localhost\r\nIf-None-Match: *\r\nContent-Length: 4\r\n\r\nv2".encode())
        self.wait_for_the_head_to_wait_for_its_body()
        b.get("/_health", {"Accept": "*/*", "X-Other": "1"})
        a.send(b"v2")
        self.assertEqual(a.read_final("PUT").status, 412)
        self.assertEqual(a.get(f"/{self.app}/k").body, b"v1")

    def test_a_put_without_preconditions_does_not_take_another_requests_if_match(self):
        a, b = self.conn(), self.conn()
        self.assertEqual(a.put(f"/{self.app}/k", b"v1").status, 201)
        a.send(f"PUT /{self.app}/k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\nv3".encode())
        self.wait_for_the_head_to_wait_for_its_body()
        b.get(f"/{self.app}/other", {"If-Match": '"0000000000000001"'})
        a.send(b"v3")
        self.assertEqual(a.read_final("PUT").status, 204)
        self.assertEqual(a.get(f"/{self.app}/k").body, b"v3v3")

    def test_chunked_puts_of_growing_sizes_on_one_connection_are_all_stored(self):
        # (key, body size, where the body is cut into two chunks): the sequence that moved the
        # input buffer under the sixth request's head
        sequence = [("k1", 100, 53), ("k2", 5000, 1156), ("k3", 20000, 5547), ("k4", 70000, 59446),
                    ("k5", 20000, 10410), ("k6", 20000, 8979)]
        c = self.conn()
        for key, size, cut in sequence:
            body = bytes((i * 7 + len(key)) % 251 for i in range(size))
            c.send_request("PUT", f"/{self.app}/{key}", [("Transfer-Encoding", "chunked")],
                           pc.chunked(body[:cut], body[cut:]), length=False)
            r = c.read_final("PUT")
            self.assertEqual(r.status, 201, (key, r.body))
            self.assertEqual(self.conn().get(f"/{self.app}/{key}").body, body, key)


if __name__ == "__main__":
    unittest.main()

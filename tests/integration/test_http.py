"""SPEC section 4: HTTP/1.1 framing, keep-alive, pipelining, limits, errors."""

import socket
import time
import unittest

from percore_client import (ConnClosed, ServerTestCase, build_request, chunked, q,
                            env_shards)


class HttpTestCase(ServerTestCase):

    def raw(self, data: bytes, method: str = "GET", timeout=None):
        """Fresh connection, send data, read one response."""
        c = self.conn()
        c.send(data)
        return c, c.read_final(method, timeout)

    def expect_framing_error(self, data: bytes, status: int):
        c = self.conn()
        c.send(data)
        try:
            r = c.read_final()
        except ConnClosed as e:
            self.fail(f"no {status} answer for {data[:120]!r}...: {e}")
        self.assert_framing_error(c, r, status)
        return r

    def send_head_then_body(self, c, head: bytes, body: bytes, early: float = 1.5):
        """Send the header section; if no answer comes within `early` seconds,
        send the body too. Returns the final response."""
        c.send(head)
        try:
            return c.read_final(timeout=early)
        except (socket.timeout, TimeoutError):
            pass
        try:
            c.send(body)
        except OSError:
            pass
        return c.read_final()


class TestKeepAlive(HttpTestCase):

    def test_sequential_requests_on_one_connection(self):
        c = self.conn()
        for i in range(10):
            r = c.put(self.path(f"k{i}"), b"v%d" % i)
            self.assertEqual(r.status, 201, r)
            self.assertFalse(r.wants_close)
            g = c.get(self.path(f"k{i}"))
            self.assertEqual(g.body, b"v%d" % i)
            self.assertFalse(g.wants_close)

    def test_connection_close_request(self):
        c = self.conn()
        c.send_request("GET", "/_health", {"Connection": "close"})
        r = c.read_final()
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.wants_close, f"server should echo Connection: close: {r}")
        self.assertTrue(c.closed_by_peer(), "server must close after Connection: close")

    def test_pipelining_mixed(self):
        c = self.conn()
        p = self.path("pipe")
        reqs = [
            ("PUT", build_request("PUT", p, {"Content-Type": "text/plain"}, b"first")),
            ("GET", build_request("GET", p)),
            ("HEAD", build_request("HEAD", p)),
            ("PUT", build_request("PUT", p, None, b"second")),
            ("GET", build_request("GET", p)),
            ("GET", build_request("GET", self.path("missing"))),
            ("DELETE", build_request("DELETE", p)),
            ("GET", build_request("GET", p)),
            ("GET", build_request("GET", "/_health")),
        ]
        c.send(b"".join(b for _, b in reqs))
        got = [c.read_final(m) for m, _ in reqs]
        self.assertEqual([r.status for r in got], [201, 200, 200, 204, 200, 404, 204, 404, 200])
        self.assertEqual(got[1].body, b"first", "a GET pipelined after a PUT sees it")
        self.assertEqual(got[1].etag, got[0].etag)
        self.assertEqual(got[2].header("content-length"), "5")
        self.assertEqual(got[4].body, b"second")
        self.assertEqual(got[4].etag, got[3].etag)
        self.assertEqual(got[4].header("content-type"), "application/octet-stream")

    def test_pipelined_writes_take_effect_in_order(self):
        c = self.conn()
        p = self.path("order")
        data = b"".join(build_request("PUT", p, None, b"v%d" % i) for i in range(30))
        data += build_request("GET", p)
        c.send(data)
        rs = [c.read_final("PUT") for _ in range(30)]
        self.assertEqual(rs[0].status, 201)
        self.assertEqual({r.status for r in rs[1:]}, {204})
        self.assertEqual(len({r.etag for r in rs}), 30)
        g = c.read_final()
        self.assertEqual(g.body, b"v29")
        self.assertEqual(g.etag, rs[-1].etag)

    def test_pipelining_many_gets_in_order(self):
        c = self.conn()
        for i in range(20):
            c.put(self.path(f"g{i}"), b"body-%d" % i)
        n = 200
        data = b"".join(build_request("GET", self.path(f"g{i % 20}")) for i in range(n))
        c.send(data)
        for i in range(n):
            r = c.read_final()
            self.assertEqual((r.status, r.body), (200, b"body-%d" % (i % 20)), f"response {i}")

    def test_pipelined_conditional_put_sequence(self):
        c = self.conn()
        p = self.path("cond")
        data = (build_request("PUT", p, {"If-None-Match": "*"}, b"a")
                + build_request("PUT", p, {"If-None-Match": "*"}, b"b")
                + build_request("GET", p))
        c.send(data)
        r1, r2, g = c.read_final(), c.read_final(), c.read_final()
        self.assertEqual((r1.status, r2.status), (201, 412))
        self.assertEqual(g.body, b"a")

    def test_request_split_into_tiny_pieces(self):
        c = self.conn()
        data = build_request("PUT", self.path("split"), {"X-Pad": "y" * 50}, b"0123456789")
        for i in range(len(data)):
            c.send(data[i:i + 1])
        r = c.read_final()
        self.assertEqual(r.status, 201, r)
        # split exactly between CR and LF and between requests with pauses
        data = build_request("GET", self.path("split")) + build_request("GET", "/_health")
        cut = data.index(b"\r\n") + 1
        # pacing, not a wait: the pauses make the server read the pieces apart (there is nothing
        # it shows between them to poll for)
        c.send(data[:cut])
        time.sleep(0.05)
        c.send(data[cut:-3])
        time.sleep(0.05)
        c.send(data[-3:])
        g = c.read_final()
        self.assertEqual(g.body, b"0123456789")
        self.assertEqual(c.read_final().status, 200)

    def test_http10_without_keepalive_closes(self):
        c = self.conn()
        c.send(b"GET /_health HTTP/1.0\r\n\r\n")
        r = c.read_final()
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.version.startswith("HTTP/1."))
        self.assertTrue(c.closed_by_peer(), "HTTP/1.0 without keep-alive must close")

    def test_http10_document_roundtrip(self):
        c = self.conn()
        r = c.request("PUT", self.path("ten"), None, b"old-http", version="HTTP/1.0", host=False)
        self.assertEqual(r.status, 201, r)
        self.assertTrue(c.closed_by_peer())
        c = self.conn()
        r = c.request("GET", self.path("ten"), version="HTTP/1.0", host=False)
        self.assertEqual((r.status, r.body), (200, b"old-http"))
        self.assertTrue(c.closed_by_peer())

    def test_http10_keepalive(self):
        c = self.conn()
        for _ in range(3):
            r = c.request("GET", "/_health", {"Connection": "keep-alive"}, version="HTTP/1.0",
                          host=False)
            self.assertEqual(r.status, 200, r)
            self.assertIn("keep-alive", r.connection_tokens(),
                          f"HTTP/1.0 keep-alive answer must say Connection: keep-alive: {r}")
            self.assertIsNotNone(r.header("content-length"))
        # the last request without keep-alive ends the connection
        r = c.request("GET", "/_health", version="HTTP/1.0", host=False)
        self.assertEqual(r.status, 200)
        self.assertTrue(c.closed_by_peer())

    def test_http10_keepalive_case_insensitive(self):
        c = self.conn()
        r = c.request("GET", "/_health", {"Connection": "Keep-Alive"}, version="HTTP/1.0")
        self.assertEqual(r.status, 200)
        self.assertIn("keep-alive", r.connection_tokens())
        self.assert_still_open(c)

    def test_request_line_just_under_limit(self):
        c = self.conn()
        target = f"/{self.app}/k?" + "x" * (8000 - len(self.app))
        self.assertLess(len(f"GET {target} HTTP/1.1"), 8192)
        r = c.get(target)
        self.assertEqual(r.status, 404, r)
        self.assert_still_open(c)

    def test_many_headers_under_limits(self):
        c = self.conn()
        hs = [(f"X-H{i}", "v" * 100) for i in range(90)]
        r = c.request("GET", "/_health", hs)
        self.assertEqual(r.status, 200, r)
        self.assert_still_open(c)

    def test_header_names_case_insensitive(self):
        c = self.conn()
        data = (f"PUT {self.path('case')} HTTP/1.1\r\nhOsT: LocalHost\r\ncontent-LENGTH: 3\r\n"
                f"CONTENT-TYPE: text/plain\r\n\r\nabc").encode()
        c.send(data)
        self.assertEqual(c.read_final().status, 201)
        g = c.get(self.path("case"))
        self.assertEqual((g.body, g.header("content-type")), (b"abc", "text/plain"))

    def test_absolute_form_target(self):
        c = self.conn()
        r = c.request("GET", f"http://127.0.0.1:{self.server.port}/_health")
        self.assertEqual(r.status, 200, r)

    def test_responses_have_content_length_or_chunked(self):
        c = self.conn()
        for target in ("/_health", "/_stats", "/_metrics", f"/{self.app}/", self.path("x")):
            r = c.get(target)
            self.assertFalse(r.close_delimited, f"{target}: close-delimited body")
            self.assertTrue(r.has_header("content-length") or r.has_header("transfer-encoding"))

    def test_error_answer_is_json(self):
        """Error answers are JSON objects with an "error" string."""
        c = self.conn()
        self.assert_json_error(c.get(self.path("nothing-here")), 404)


class TestChunkedBodies(HttpTestCase):

    def put_chunked(self, c, key, raw_body, headers=()):
        hs = [("Transfer-Encoding", "chunked")] + list(headers)
        c.send(build_request("PUT", self.path(key), hs, None, length=False) + raw_body)
        return c.read_final()

    def test_chunked_put(self):
        c = self.conn()
        r = self.put_chunked(c, "ch", chunked(b"hello ", b"chunked ", b"world"))
        self.assertEqual(r.status, 201, r)
        g = c.get(self.path("ch"))
        self.assertEqual(g.body, b"hello chunked world")
        self.assertEqual(g.header("content-length"), "19")

    def test_chunked_extensions_trailers_uppercase_hex(self):
        c = self.conn()
        body = (b"A;name=value\r\n0123456789\r\n"
                b"1a ; ext\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                b"0\r\nX-Trailer: yes\r\nX-Other: 1\r\n\r\n")
        r = self.put_chunked(c, "ext", body)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(self.path("ext")).body,
                         b"0123456789abcdefghijklmnopqrstuvwxyz")

    def test_chunked_empty_body(self):
        c = self.conn()
        r = self.put_chunked(c, "empty", b"0\r\n\r\n")
        self.assertEqual(r.status, 201, r)
        g = c.get(self.path("empty"))
        self.assertEqual((g.status, g.body), (200, b""))

    def test_chunked_case_insensitive_coding(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("cc"), [("Transfer-Encoding", "Chunked")], None,
                             length=False) + chunked(b"x"))
        self.assertEqual(c.read_final().status, 201)

    def test_chunked_then_pipelined(self):
        c = self.conn()
        data = (build_request("PUT", self.path("cp"), [("Transfer-Encoding", "chunked")], None,
                              length=False)
                + chunked(b"a" * 1000, b"b" * 3000)
                + build_request("GET", self.path("cp")))
        c.send(data)
        self.assertEqual(c.read_final().status, 201)
        g = c.read_final()
        self.assertEqual(g.body, b"a" * 1000 + b"b" * 3000)

    def test_chunked_large_split_sends(self):
        c = self.conn(timeout=15)
        parts = [bytes([65 + i % 26]) * (7919 + i) for i in range(40)]
        data = build_request("PUT", self.path("big"), [("Transfer-Encoding", "chunked")], None,
                             length=False) + chunked(*parts)
        for i in range(0, len(data), 1013):
            c.send(data[i:i + 1013])
        self.assertEqual(c.read_final().status, 201)
        self.assertEqual(c.get(self.path("big")).body, b"".join(parts))

    def test_bad_chunk_size(self):
        head = build_request("PUT", self.path("bad"), [("Transfer-Encoding", "chunked")], None,
                             length=False)
        self.expect_framing_error(head + b"zz\r\n", 400)

    def test_chunk_data_without_crlf(self):
        head = build_request("PUT", self.path("bad2"), [("Transfer-Encoding", "chunked")], None,
                             length=False)
        self.expect_framing_error(head + b"3\r\nabcXY", 400)
        c = self.conn()
        self.assertEqual(c.get(self.path("bad2")).status, 404, "half a chunked body stored")


class TestFramingErrors(HttpTestCase):

    def test_malformed_request_lines(self):
        for line in (b"GARBAGE", b"GET /_health", b"GET /_health HTTP/1.1 extra",
                     b"GET /_health HTTX/1.1", b"GET /_health HTTP/1", b"GET /_health HTTP/1.1.1",
                     b"G\x01T /_health HTTP/1.1", b"GET _health HTTP/1.1", b" GET / HTTP/1.1x",
                     b"GET /\x7f HTTP/1.1"):
            with self.subTest(line=line):
                self.expect_framing_error(line + b"\r\nHost: localhost\r\n\r\n", 400)

    def test_malformed_headers(self):
        for hdr in (b"NoColonHere", b"Host : a", b"X(A): b", b": empty-name", b"X-A\x00: b"):
            with self.subTest(header=hdr):
                self.expect_framing_error(b"GET /_health HTTP/1.1\r\nHost: localhost\r\n" + hdr
                                          + b"\r\n\r\n", 400)

    def test_missing_host_http11(self):
        self.expect_framing_error(b"GET /_health HTTP/1.1\r\n\r\n", 400)

    def test_malformed_host(self):
        """RFC 9112 §3.2: a Host that is not an authority is 400 and close."""
        for host in (b"a b", b"a\tb", b"a/b", b"user@a", b"a:8x", b"[::1", b"a%zz", b":80"):
            with self.subTest(host=host):
                r = self.expect_framing_error(b"GET /_health HTTP/1.1\r\nHost: " + host + b"\r\n\r\n",
                                              400)
                self.assertEqual(r.json()["error"], "malformed Host")

    def test_valid_hosts_are_served(self):
        c = self.conn()
        for host in (b"localhost:8080", b"127.0.0.1", b"[::1]:80", b"", b"localhost:"):
            with self.subTest(host=host):
                c.send(b"GET /_health HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
                r = c.read_final()
                self.assertEqual(r.status, 200, r)
                self.assertFalse(r.wants_close, r)

    def test_a_valid_host_that_is_not_this_machine_is_403_with_auth_off(self):
        """SPEC 7: auth is off here (loopback), so a Host that is well formed but names another
        machine (a DNS-rebinding page) is refused, not malformed; the connection stays."""
        c = self.conn()
        for host in (b"example.com:8080", b"h:"):
            with self.subTest(host=host):
                c.send(b"GET /_health HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
                r = c.read_final()
                self.assertEqual(r.status, 403, r)
                self.assertEqual(r.json(), {"error": "host not allowed"})
                self.assertFalse(r.wants_close, r)

    def test_two_host_headers(self):
        c, r = self.raw(b"GET /_health HTTP/1.1\r\nHost: localhost\r\nHost: b\r\n\r\n")
        self.assert_json_error(r, 400)
        if r.wants_close:
            self.assertTrue(c.closed_by_peer())

    def test_request_line_too_long(self):
        target = f"/{self.app}/" + "a" * 9000
        r = self.expect_framing_error(f"GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode(), 414)

    def test_request_line_too_long_without_end(self):
        """414 even when the line never ends (the server must not buffer forever)."""
        self.expect_framing_error(b"GET /" + b"a" * 9000, 414)

    def test_request_line_limit_boundary(self):
        """8 KiB = 8192 bytes of request line (without CRLF) pass, 8193 get 414."""
        def line(n):
            head = f"GET /{self.app}/k?".encode()
            out = head + b"x" * (n - len(head) - len(b" HTTP/1.1")) + b" HTTP/1.1"
            self.assertEqual(len(out), n)
            return out + b"\r\nHost: localhost\r\n\r\n"
        c = self.conn()
        c.send(line(8192))
        self.assertEqual(c.read_final().status, 404)
        self.assert_still_open(c)
        self.expect_framing_error(line(8193), 414)

    def test_header_field_count_boundary(self):
        """100 fields (Host included) pass, 101 get 431."""
        def req(n):
            return (b"GET /_health HTTP/1.1\r\nHost: localhost\r\n"
                    + b"".join(b"X-N%d: v\r\n" % i for i in range(n - 1)) + b"\r\n")
        c = self.conn()
        c.send(req(100))
        self.assertEqual(c.read_final().status, 200)
        self.assert_still_open(c)
        self.expect_framing_error(req(101), 431)

    def test_header_section_too_large(self):
        hs = b"".join(b"X-Fill-%d: %s\r\n" % (i, b"f" * 1000) for i in range(17))
        self.expect_framing_error(b"GET /_health HTTP/1.1\r\nHost: localhost\r\n" + hs + b"\r\n", 431)

    def test_single_huge_header(self):
        self.expect_framing_error(b"GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"b" * 17000
                                  + b"\r\n\r\n", 431)

    def test_too_many_header_fields(self):
        hs = b"".join(b"X-N%d: v\r\n" % i for i in range(120))
        self.expect_framing_error(b"GET /_health HTTP/1.1\r\nHost: localhost\r\n" + hs + b"\r\n", 431)

    def test_content_length_and_transfer_encoding(self):
        self.expect_framing_error(
            f"PUT {self.path('smug')} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
            f"Transfer-Encoding: chunked\r\n\r\n".encode(), 400)
        self.expect_framing_error(
            f"PUT {self.path('smug')} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
            f"Content-Length: 0\r\n\r\n".encode(), 400)
        self.assertEqual(self.conn().get(self.path("smug")).status, 404)

    def test_differing_content_lengths(self):
        for cls in ((b"Content-Length: 5", b"Content-Length: 6"), (b"Content-Length: 5, 6",)):
            with self.subTest(cls=cls):
                self.expect_framing_error(
                    f"PUT {self.path('cl')} HTTP/1.1\r\nHost: localhost\r\n".encode()
                    + b"\r\n".join(cls) + b"\r\n\r\n", 400)

    def test_invalid_content_length(self):
        for v in (b"abc", b"-1", b"+5", b"1 2", b"0x10", b""):
            with self.subTest(value=v):
                self.expect_framing_error(
                    f"PUT {self.path('icl')} HTTP/1.1\r\nHost: localhost\r\n".encode()
                    + b"Content-Length: " + v + b"\r\n\r\n", 400)

    def test_overflowing_content_length(self):
        c = self.conn()
        c.send(f"PUT {self.path('icl')} HTTP/1.1\r\nHost: localhost\r\n".encode()
               + b"Content-Length: 99999999999999999999999999\r\n\r\n")
        r = c.read_final()
        self.assertIn(r.status, (400, 413), r)
        self.assert_framing_error(c, r, r.status)

    def test_transfer_encoding_last_not_chunked(self):
        for te in (b"gzip", b"chunked, gzip", b"identity", b"deflate"):
            with self.subTest(te=te):
                self.expect_framing_error(
                    f"PUT {self.path('te')} HTTP/1.1\r\nHost: localhost\r\n".encode()
                    + b"Transfer-Encoding: " + te + b"\r\n\r\n", 400)

    def test_chunked_after_other_coding(self):
        for te in (b"gzip, chunked", b"deflate,chunked"):
            with self.subTest(te=te):
                self.expect_framing_error(
                    f"PUT {self.path('te')} HTTP/1.1\r\nHost: localhost\r\n".encode()
                    + b"Transfer-Encoding: " + te + b"\r\n\r\n", 501)
        # also as two header lines
        self.expect_framing_error(
            f"PUT {self.path('te')} HTTP/1.1\r\nHost: localhost\r\n".encode()
            + b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", 501)

    def test_http2_version(self):
        for v in (b"HTTP/2.0", b"HTTP/3.0"):
            with self.subTest(version=v):
                self.expect_framing_error(b"GET /_health " + v + b"\r\nHost: localhost\r\n\r\n", 505)

    def test_put_without_length(self):
        self.expect_framing_error(
            f"PUT {self.path('nolen')} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode(), 411)
        self.assertEqual(self.conn().get(self.path("nolen")).status, 404)

    def test_framing_error_after_good_requests(self):
        """A framing error later on a keep-alive connection still answers earlier ones."""
        c = self.conn()
        c.send(build_request("GET", "/_health") + b"BROKEN LINE\r\n\r\n")
        self.assertEqual(c.read_final().status, 200)
        r = c.read_final()
        self.assert_framing_error(c, r, 400)

    def test_expect_100_continue(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("exp"), {"Expect": "100-continue",
                                                       "Content-Length": "5"}, None,
                             length=False))
        try:
            r = c.read_response(timeout=2)
        except (socket.timeout, TimeoutError):
            self.fail("no 100 Continue within 2 s (server waits for the body)")
        self.assertEqual(r.status, 100, r)
        self.assertEqual(r.body, b"")
        c.send(b"hello")
        r = c.read_final()
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(self.path("exp")).body, b"hello")

    def test_expect_100_continue_case_insensitive(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("exp2"), {"Expect": "100-Continue"}, b"", ))
        r = c.read_final()
        self.assertEqual(r.status, 201, r)
        self.assert_still_open(c)

    def test_unknown_expectation(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("exp3"), {"Expect": "something-else"}, b"abc"))
        r = c.read_final()
        self.assert_json_error(r, 417)
        self.assertEqual(self.conn().get(self.path("exp3")).status, 404)
        if r.wants_close:
            self.assertTrue(c.closed_by_peer())
        else:
            self.assert_still_open(c)

    def test_unknown_method_405_with_allow(self):
        c = self.conn()
        r = c.request("BREW", self.path("pot"))
        self.assert_json_error(r, 405)
        self.assert_allow(r, {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

    def test_chunked_trailer_without_colon(self):
        head = build_request("PUT", self.path("tr"), [("Transfer-Encoding", "chunked")], None,
                             length=False)
        self.expect_framing_error(head + b"1\r\nx\r\n0\r\nNoColon\r\n\r\n", 400)
        self.assertEqual(self.conn().get(self.path("tr")).status, 404, "a refused body was stored")

    def test_server_survives_garbage(self):
        """Random binary junk gets an answer or a close, never a crash."""
        junk = [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)) + b"\r\n\r\n",
                b"\r\n" * 10 + b"GET /_health HTTP/1.1\r\nHost: localhost\r\n\r\n",
                b"\x00" * 100 + b"\r\n\r\n",
                b"GET /_health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n" * 50 + b"\r\n"]
        for j in junk:
            c = self.conn()
            c.send(j)
            c.wait_closed_or_data(0.5)
            c.close()
        c = self.conn()
        self.assertEqual(c.get("/_health").status, 200)


class TestOptionsAndQueries(HttpTestCase):
    """SPEC §4 OPTIONS and SPEC §2 query decoding."""

    def test_options_asterisk(self):
        """SPEC §4: OPTIONS * is 204 with Allow, and the connection stays open."""
        c = self.conn()
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n")
        r = c.read_final("OPTIONS")
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        self.assert_allow(r, {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
        self.assertFalse(r.wants_close, r)
        self.assert_still_open(c)

    def test_options_asterisk_only_for_options(self):
        self.expect_framing_error(b"GET * HTTP/1.1\r\nHost: localhost\r\n\r\n", 400)

    def test_options_on_a_document(self):
        c = self.conn()
        for exists in (False, True):
            with self.subTest(exists=exists):
                if exists:
                    self.assertEqual(c.put(self.path("opt"), b"v").status, 201)
                c.send(b"OPTIONS " + self.path("opt").encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
                r = c.read_final("OPTIONS")
                self.assertEqual(r.status, 204, r)
                self.assertEqual(r.body, b"")
                self.assert_allow(r, {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
                self.assertFalse(r.wants_close, r)
                self.assert_still_open(c)
        # pipelined after OPTIONS, the next request is answered in order
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n" + build_request("GET", self.path("opt")))
        self.assertEqual(c.read_final("OPTIONS").status, 204)
        self.assertEqual(c.read_final().body, b"v")

    def test_list_limit_is_percent_decoded(self):
        """SPEC §2: query values are percent-decoded; limit=%31 is limit=1."""
        c = self.conn()
        for k in ("a", "b", "c"):
            self.assertEqual(c.put(self.path(k), b"x").status, 201)
        r = c.get(f"/{self.app}/?limit=%31")
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual([e["key"] for e in doc["keys"]], ["a"])
        self.assertEqual(doc["next"], "a")
        r = c.get(f"/{self.app}/?limit=%32&after=%61")
        self.assertEqual([e["key"] for e in r.json()["keys"]], ["b", "c"], r)
        bad = c.get(f"/{self.app}/?limit=%31%30%30%31")
        self.assert_json_error(bad, 400)
        self.assertFalse(bad.wants_close, bad)
        self.assert_still_open(c)


class TestMaxBody(HttpTestCase):
    SERVER_ARGS = ("--max-body", "1K")

    def test_body_at_limit_ok(self):
        c = self.conn()
        r = c.put(self.path("max"), b"m" * 1024)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(len(c.get(self.path("max")).body), 1024)

    def test_body_over_limit_413(self):
        c = self.conn()
        head = build_request("PUT", self.path("over"), {"Content-Length": "1025"}, None,
                             length=False)
        r = self.send_head_then_body(c, head, b"o" * 1025)
        self.assert_framing_error(c, r, 413)
        self.assertEqual(self.conn().get(self.path("over")).status, 404)

    def test_huge_content_length_413(self):
        c = self.conn()
        head = build_request("PUT", self.path("huge"), {"Content-Length": str(1 << 40)}, None,
                             length=False)
        c.send(head)
        r = c.read_final()
        self.assert_framing_error(c, r, 413)

    def test_chunked_over_limit_413(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("chover"), [("Transfer-Encoding", "chunked")], None,
                             length=False) + b"200\r\n" + b"c" * 512 + b"\r\n"
               + b"201\r\n" + b"c" * 513 + b"\r\n0\r\n\r\n")
        r = c.read_final()
        self.assert_framing_error(c, r, 413)
        self.assertEqual(self.conn().get(self.path("chover")).status, 404)

    def test_expect_100_with_too_large_body(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("exp"), {"Expect": "100-continue",
                                                       "Content-Length": "5000"}, None,
                             length=False))
        r = c.read_response(timeout=2)
        self.assertNotEqual(r.status, 100, "100 Continue for a body that will be refused")
        self.assert_framing_error(c, r, 413)


class TestTimeouts(HttpTestCase):
    SERVER_ARGS = ("--idle-timeout", "1")

    def expect_408(self, c, started):
        r = c.read_final(timeout=4)
        took = time.monotonic() - started
        self.assertGreater(took, 0.5, "408 came before the idle timeout")
        self.assert_framing_error(c, r, 408)
        return took

    def test_partial_header_408(self):
        c = self.conn()
        t = time.monotonic()
        c.send(b"GET /_health HTTP/1.1\r\nHost: localhost\r\n")
        self.expect_408(c, t)

    def test_partial_body_408(self):
        c = self.conn()
        t = time.monotonic()
        c.send(build_request("PUT", self.path("slow"), {"Content-Length": "10"}, None,
                             length=False) + b"abc")
        self.expect_408(c, t)
        self.assertEqual(self.conn().get(self.path("slow")).status, 404)

    def test_slow_drip_request_408(self):
        """Sending a byte now and then does not keep a request alive forever."""
        c = self.conn()
        t = time.monotonic()
        data = b"GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"s" * 100 + b"\r\n\r\n"
        got = None
        for i in range(len(data)):
            try:
                c.send(data[i:i + 1])
            except OSError:
                break
            closed, buf = c.wait_closed_or_data(0.1)
            if closed or buf:
                break
            if time.monotonic() - t > 4:
                break
        took = time.monotonic() - t
        self.assertLess(took, 4, "a slowly dripping request was never timed out")
        try:
            r = c.read_final(timeout=1)
        except ConnClosed:
            self.fail("slow request closed without a 408 answer")
        self.assert_framing_error(c, r, 408)

    def test_idle_keepalive_closed(self):
        c = self.conn()
        self.assertEqual(c.get("/_health").status, 200)
        t = time.monotonic()
        closed, buf = c.wait_closed_or_data(4)
        self.assertTrue(closed, "idle keep-alive connection not closed after --idle-timeout 1")
        self.assertEqual(buf, b"", "an idle keep-alive connection is closed without an answer")
        self.assertGreater(time.monotonic() - t, 0.5)

    def test_fresh_idle_connection_closed(self):
        c = self.conn()
        closed, buf = c.wait_closed_or_data(4)
        self.assertTrue(closed, "silent connection not closed after --idle-timeout 1")

    def test_active_connection_kept(self):
        c = self.conn()
        for _ in range(6):
            self.assertEqual(c.get("/_health").status, 200)
            time.sleep(0.4)   # pacing: active past the 1 s idle timeout, never idle that long
        self.assertEqual(c.get("/_health").status, 200)


@unittest.skipUnless(env_shards() == 1, "runs once, in the shards=1 pass")
class TestMaxConnections(HttpTestCase):
    SHARDS = 1
    SERVER_ARGS = ("--max-connections", "4")

    def test_refused_cleanly_and_existing_keep_working(self):
        conns = [self.conn() for _ in range(4)]
        for c in conns:
            self.assertEqual(c.get("/_health").status, 200)
        extra = self.conn()
        try:
            extra.send(build_request("GET", "/_health"))
            r = extra.read_final()
        except ConnClosed:
            r = None          # closed without an answer: also clean
        except ConnectionError:
            r = None
        except (socket.timeout, TimeoutError):
            self.fail("connection past --max-connections neither answered nor closed")
        if r is not None:
            self.assertEqual(r.status, 503, r)
            self.assertTrue(r.wants_close, r)
            self.assertTrue(extra.closed_by_peer())
        for c in conns:
            self.assertEqual(c.get("/_health").status, 200)
        # a slot frees up when a connection goes away
        conns.pop().close()
        deadline = time.monotonic() + 3
        while True:
            c = self.conn()
            try:
                r = c.get("/_health")
                if r.status == 200:
                    break
            except (ConnClosed, ConnectionError):
                pass
            self.assertLess(time.monotonic(), deadline, "slot never freed after a close")
            time.sleep(0.1)
        for c in conns:
            self.assertEqual(c.get("/_health").status, 200)


@unittest.skipUnless(env_shards() == 1, "runs once, in the shards=1 pass")
class TestBodyBudget(HttpTestCase):
    SHARDS = 1
    SERVER_ARGS = ("--body-budget", "1K")

    def test_over_budget_503_retry_after(self):
        c = self.conn()
        head = build_request("PUT", self.path("big"), {"Content-Length": "4096"}, None,
                             length=False)
        r = self.send_head_then_body(c, head, b"b" * 4096)
        self.assert_json_error(r, 503)
        self.assertIsNotNone(r.header("retry-after"), f"503 without Retry-After: {r}")
        self.assertTrue(r.header("retry-after").strip().isdigit(), r)
        self.assertTrue(r.wants_close, r)
        self.assertTrue(c.closed_by_peer())
        c2 = self.conn()
        r = c2.put(self.path("small"), b"s" * 100)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c2.get(self.path("small")).body, b"s" * 100)
        self.assertEqual(c2.get(self.path("big")).status, 404)

    def assert_503_retry(self, c, r):
        self.assert_json_error(r, 503)
        self.assertIsNotNone(r.header("retry-after"), f"503 without Retry-After: {r}")
        self.assertTrue(r.wants_close, r)
        self.assertTrue(c.closed_by_peer())

    def test_chunked_over_budget(self):
        c = self.conn()
        c.send(build_request("PUT", self.path("chunky"), [("Transfer-Encoding", "chunked")],
                             None, length=False) + chunked(b"c" * 4096))
        self.assert_503_retry(c, c.read_final())
        self.assertEqual(self.conn().get(self.path("chunky")).status, 404)

    def test_budget_shared_by_bodies_in_flight(self):
        # the budget is charged by what is buffered: a's 900 bytes in flight leave no room for 800
        a = self.conn()
        a.send(build_request("PUT", self.path("a"), {"Content-Length": "1000"}, None,
                             length=False) + b"a" * 900)
        self.assertEqual(a.wait_closed_or_data(0.3), (False, b""))
        b = self.conn()
        r = self.send_head_then_body(b, build_request("PUT", self.path("b"),
                                                      {"Content-Length": "800"}, None,
                                                      length=False), b"b" * 800)
        self.assert_503_retry(b, r)
        a.send(b"a" * 100)
        self.assertEqual(a.read_final().status, 201)
        # once a's body is done, its share of the budget is free again
        c = self.conn()
        self.assertEqual(c.put(self.path("c"), b"c" * 800).status, 201)



@unittest.skipUnless(env_shards() == 1, "runs once, in the shards=1 pass")
class TestBodyBudgetByBuffer(HttpTestCase):
    SHARDS = 1
    SERVER_ARGS = ("--body-budget", "256K")

    def test_announced_bodies_hold_only_the_buffer_they_fill(self):
        # a body announced at 200000 bytes with 10 sent holds its first 64 KiB buffer, not 200000
        # (SPEC §4): a 150000-byte PUT beside it fits the 256 KiB budget
        a = self.conn()
        a.send(build_request("PUT", self.path("slow"), {"Content-Length": "200000"}, None,
                             length=False) + b"s" * 10)
        self.assertEqual(a.wait_closed_or_data(0.3), (False, b""))
        b = self.conn()
        self.assertEqual(b.put(self.path("quick"), b"q" * 150000).status, 201)


if __name__ == "__main__":
    unittest.main()

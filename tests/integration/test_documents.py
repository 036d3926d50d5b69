"""SPEC section 2: documents, preconditions, ETags, validation, list pages."""

import json
import re
import unittest

from percore_client import ServerTestCase, q, qv, unique

STRONG_ETAG = re.compile(r'^"[\x21\x23-\x7e\x80-\xff]*"$')


def key_bytes(k: str) -> bytes:
    return k.encode("utf-8")


class DocTestCase(ServerTestCase):
    """Common helpers for the document tests."""

    def put_ok(self, c, key, body=b"x", headers=None, app=None, status=None):
        r = c.put(self.path(key, app), body, headers)
        if status is None:
            self.assertIn(r.status, (201, 204), r)
        else:
            self.assertEqual(r.status, status, r)
        self.assertEqual(r.body, b"")
        self.assert_etag(r)
        return r.etag

    def assert_etag(self, r):
        self.assertIsNotNone(r.etag, f"no ETag: {r}")
        self.assertFalse(r.etag.startswith("W/"), f"ETag must be strong: {r.etag!r}")
        self.assertRegex(r.etag, STRONG_ETAG)

    def list_page(self, c, app=None, query="", expect=200):
        target = f"/{app or self.app}/" + (("?" + query) if query else "")
        r = c.get(target)
        self.assertEqual(r.status, expect, r)
        if expect != 200:
            return r
        ct = r.header("content-type", "")
        self.assertTrue(ct.lower().startswith("application/json"), r)
        try:
            doc = json.loads(r.body.decode("utf-8"))
        except ValueError as e:
            self.fail(f"list body is not JSON ({e}): {r.body[:500]!r}")
        self.assertIsInstance(doc, dict)
        self.assertEqual(set(doc), {"keys", "next"}, doc)
        self.assertIsInstance(doc["keys"], list)
        for e in doc["keys"]:
            self.assertEqual(set(e), {"key", "etag", "size"}, e)
            self.assertIsInstance(e["key"], str)
            self.assertIsInstance(e["etag"], str)
            self.assertRegex(e["etag"], STRONG_ETAG)
            self.assertIsInstance(e["size"], int)
            self.assertNotIsInstance(e["size"], bool)
        self.assertTrue(doc["next"] is None or isinstance(doc["next"], str), doc)
        return doc

    def list_all(self, c, app=None, prefix=None, limit=None):
        """Walk every page; checks the page-size rule; returns (keys, pages)."""
        keys, pages, after = [], 0, None
        while True:
            params = []
            if prefix is not None:
                params.append("prefix=" + qv(prefix))
            if after is not None:
                params.append("after=" + qv(after))
            if limit is not None:
                params.append(f"limit={limit}")
            doc = self.list_page(c, app, "&".join(params))
            pages += 1
            page_keys = [e["key"] for e in doc["keys"]]
            keys += page_keys
            if doc["next"] is None:
                self.assertLessEqual(len(page_keys), limit or 20)
                return keys, pages
            self.assertEqual(len(page_keys), limit or 20,
                             f"a page that is not the last must hold exactly limit keys: {doc}")
            after = doc["next"]
            self.assertLess(pages, 10000)


class TestCrud(DocTestCase):

    def test_put_create_then_get(self):
        c = self.conn()
        r = c.put(self.path("doc1"), b"hello world", {"Content-Type": "text/plain"})
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.header("content-length"), "0", "201 carries Content-Length: 0")
        self.assertEqual(r.body, b"")
        self.assert_etag(r)
        etag = r.etag
        g = c.get(self.path("doc1"))
        self.assertEqual(g.status, 200, g)
        self.assertEqual(g.body, b"hello world")
        self.assertEqual(g.etag, etag)
        self.assertEqual(g.header("content-type"), "text/plain")
        self.assertEqual(g.header("content-length"), "11")

    def test_put_replace_gives_204_and_new_etag(self):
        c = self.conn()
        e1 = self.put_ok(c, "k", b"one", status=201)
        r = c.put(self.path("k"), b"two")
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        self.assert_etag(r)
        self.assertNotEqual(r.etag, e1)
        g = c.get(self.path("k"))
        self.assertEqual((g.status, g.body, g.etag), (200, b"two", r.etag))

    def test_identical_bytes_get_new_etag(self):
        c = self.conn()
        seen = set()
        for _ in range(5):
            e = self.put_ok(c, "same", b"identical")
            self.assertNotIn(e, seen, "a PUT of identical bytes must still get a new ETag")
            seen.add(e)

    def test_etag_never_reused_after_delete_and_recreate(self):
        c = self.conn()
        seen = set()
        for i in range(5):
            e = self.put_ok(c, "re", b"v", status=201)
            self.assertNotIn(e, seen)
            seen.add(e)
            e2 = self.put_ok(c, "re", b"v", status=204)
            self.assertNotIn(e2, seen)
            seen.add(e2)
            r = c.delete(self.path("re"))
            self.assertEqual(r.status, 204, r)

    def test_default_content_type(self):
        c = self.conn()
        self.put_ok(c, "ct", b"abc")
        g = c.get(self.path("ct"))
        self.assertEqual(g.header("content-type"), "application/octet-stream")

    def test_content_type_stored_verbatim_and_replaced(self):
        c = self.conn()
        self.put_ok(c, "ct2", b"{}", {"Content-Type": "application/json; charset=utf-8"})
        self.assertEqual(c.get(self.path("ct2")).header("content-type"),
                         "application/json; charset=utf-8")
        self.put_ok(c, "ct2", b"<p>", {"Content-Type": "text/html"})
        self.assertEqual(c.get(self.path("ct2")).header("content-type"), "text/html")
        self.put_ok(c, "ct2", b"raw")
        self.assertEqual(c.get(self.path("ct2")).header("content-type"),
                         "application/octet-stream",
                         "a PUT without Content-Type stores the default")

    def test_empty_document(self):
        c = self.conn()
        self.put_ok(c, "empty", b"", status=201)
        g = c.get(self.path("empty"))
        self.assertEqual(g.status, 200, g)
        self.assertEqual(g.header("content-length"), "0")
        self.assertEqual(g.body, b"")
        self.assert_still_open(c)

    def test_binary_body_roundtrip(self):
        c = self.conn()
        body = bytes(range(256)) * 64 + b"\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"
        self.put_ok(c, "bin", body)
        g = c.get(self.path("bin"))
        self.assertEqual(g.body, body)
        self.assert_still_open(c)

    def test_large_document_roundtrip(self):
        c = self.conn(timeout=15)
        body = bytes((i * 7 + 3) & 0xFF for i in range(1 << 20))
        self.put_ok(c, "big", body)
        g = c.get(self.path("big"))
        self.assertEqual(g.status, 200)
        self.assertEqual(len(g.body), len(body))
        self.assertEqual(g.body, body)

    def test_head(self):
        c = self.conn()
        etag = self.put_ok(c, "h", b"0123456789", {"Content-Type": "text/x-test"})
        r = c.head(self.path("h"))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.etag, etag)
        self.assertEqual(r.header("content-length"), "10")
        self.assertEqual(r.header("content-type"), "text/x-test")
        # If the server had sent a body the next response would be garbage.
        g = c.get(self.path("h"))
        self.assertEqual((g.status, g.body), (200, b"0123456789"))

    def test_head_missing_and_conditional(self):
        c = self.conn()
        r = c.head(self.path("nope"))
        self.assertEqual(r.status, 404, r)
        etag = self.put_ok(c, "h2", b"abc")
        r = c.head(self.path("h2"), {"If-None-Match": etag})
        self.assertEqual(r.status, 304, r)
        self.assertEqual(r.etag, etag)
        r = c.head(self.path("h2"), {"If-Match": '"definitely-not-it"'})
        self.assertEqual(r.status, 412, r)
        self.assert_still_open(c)

    def test_get_missing_is_404_json(self):
        c = self.conn()
        r = c.get(self.path("missing"))
        self.assert_json_error(r, 404)
        self.assertFalse(r.wants_close)
        self.assert_still_open(c)

    def test_delete(self):
        c = self.conn()
        self.put_ok(c, "d", b"x")
        r = c.delete(self.path("d"))
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        self.assertEqual(c.get(self.path("d")).status, 404)
        r = c.delete(self.path("d"))
        self.assert_json_error(r, 404)
        self.assert_still_open(c)

    def test_apps_are_namespaces(self):
        c = self.conn()
        a1, a2 = unique("n"), unique("n")
        self.put_ok(c, "shared", b"in-a1", app=a1, status=201)
        self.put_ok(c, "shared", b"in-a2", app=a2, status=201)
        self.put_ok(c, "only1", b"x", app=a1, status=201)
        self.assertEqual(c.get(f"/{a1}/shared").body, b"in-a1")
        self.assertEqual(c.get(f"/{a2}/shared").body, b"in-a2")
        self.assertEqual(c.get(f"/{a2}/only1").status, 404)
        self.assertEqual(c.delete(f"/{a1}/shared").status, 204)
        self.assertEqual(c.get(f"/{a2}/shared").body, b"in-a2")
        self.assertEqual([e["key"] for e in self.list_page(c, a1)["keys"]], ["only1"])
        self.assertEqual([e["key"] for e in self.list_page(c, a2)["keys"]], ["shared"])

    def test_query_string_on_document_is_ignored(self):
        c = self.conn()
        r = c.put(f"/{self.app}/qs?version=7&x", b"body")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(f"/{self.app}/qs").body, b"body")
        self.assertEqual(c.get(f"/{self.app}/qs?foo=bar").body, b"body")
        self.assertEqual(c.head(f"/{self.app}/qs?").status, 200)
        self.assertEqual(c.delete(f"/{self.app}/qs?really=1").status, 204)
        self.assertEqual(c.get(f"/{self.app}/qs").status, 404)
        keys = [e["key"] for e in self.list_page(c)["keys"]]
        self.assertEqual(keys, [])


class TestPreconditions(DocTestCase):

    def test_get_if_none_match(self):
        c = self.conn()
        etag = self.put_ok(c, "p", b"data")
        for inm in (etag, "*", "W/" + etag, f'"nope", {etag}', f'W/"x" , {etag}'):
            with self.subTest(inm=inm):
                r = c.get(self.path("p"), {"If-None-Match": inm})
                self.assertEqual(r.status, 304, r)
                self.assertEqual(r.etag, etag)
                self.assertEqual(r.body, b"")
        r = c.get(self.path("p"), {"If-None-Match": '"other"'})
        self.assertEqual((r.status, r.body), (200, b"data"))
        # the connection is still in sync (no stray 304 bodies)
        self.assertEqual(c.get(self.path("p")).body, b"data")

    def test_get_if_match(self):
        c = self.conn()
        etag = self.put_ok(c, "m", b"data")
        for im in (etag, "*", f'"a", {etag}'):
            with self.subTest(im=im):
                r = c.get(self.path("m"), {"If-Match": im})
                self.assertEqual((r.status, r.body), (200, b"data"), r)
        for im in ('"stale"', "W/" + etag):
            with self.subTest(im=im):
                r = c.get(self.path("m"), {"If-Match": im})
                self.assert_json_error(r, 412)
        self.assert_still_open(c)

    def test_put_if_match(self):
        c = self.conn()
        e1 = self.put_ok(c, "k", b"v1", status=201)
        r = c.put(self.path("k"), b"v2", {"If-Match": e1})
        self.assertEqual(r.status, 204, r)
        e2 = r.etag
        self.assertNotEqual(e1, e2)
        # stale etag: 412 with the current ETag, nothing written
        r = c.put(self.path("k"), b"v3", {"If-Match": e1})
        self.assert_json_error(r, 412)
        self.assertEqual(r.etag, e2, "412 on PUT carries the current ETag")
        self.assertEqual(c.get(self.path("k")).body, b"v2")
        # a list containing the current etag matches
        r = c.put(self.path("k"), b"v4", {"If-Match": f'"zzz", {e2}'})
        self.assertEqual(r.status, 204, r)
        # a weak etag never matches If-Match (strong comparison)
        r = c.put(self.path("k"), b"v5", {"If-Match": "W/" + r.etag})
        self.assertEqual(r.status, 412, r)
        self.assertEqual(c.get(self.path("k")).body, b"v4")

    def test_malformed_preconditions_are_400_and_change_nothing(self):
        # SPEC §4: not `*` alone and not a comma-separated list of entity-tags -> 400, connection open
        c = self.conn()
        etag = self.put_ok(c, "m", b"v1", status=201)
        for value in (f'{etag}x', f'{etag};', f'{etag}"', f'{etag} {etag}', f'"0000000000000001", *',
                      f'*, {etag}', '"unterminated'):
            for field in ("If-Match", "If-None-Match"):
                r = c.put(self.path("m"), b"v2", {field: value})
                self.assert_json_error(r, 400)
                self.assertFalse(r.wants_close, f"{field}: {value}: the connection stays open")
                r = c.get(self.path("m"), {field: value})
                self.assert_json_error(r, 400)
        r = c.get(self.path("m"))
        self.assertEqual((r.body, r.etag), (b"v1", etag))

    def test_put_if_match_star(self):
        c = self.conn()
        r = c.put(self.path("star"), b"x", {"If-Match": "*"})
        self.assert_json_error(r, 412)
        self.assertIsNone(r.etag, "no ETag when there is no current version")
        self.assertEqual(c.get(self.path("star")).status, 404)
        self.put_ok(c, "star", b"x", status=201)
        r = c.put(self.path("star"), b"y", {"If-Match": "*"})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(c.get(self.path("star")).body, b"y")

    def test_put_if_none_match_star(self):
        c = self.conn()
        r = c.put(self.path("inm"), b"first", {"If-None-Match": "*"})
        self.assertEqual(r.status, 201, r)
        e1 = r.etag
        r = c.put(self.path("inm"), b"second", {"If-None-Match": "*"})
        self.assert_json_error(r, 412)
        self.assertEqual(r.etag, e1)
        self.assertEqual(c.get(self.path("inm")).body, b"first")
        r = c.put(self.path("inm"), b"third", {"If-None-Match": e1})
        self.assertEqual(r.status, 412, r)
        r = c.put(self.path("inm"), b"fourth", {"If-None-Match": '"other"'})
        self.assertEqual(r.status, 204, r)

    def test_failed_put_consumes_body(self):
        """A 412 PUT leaves the connection usable: its body was read."""
        c = self.conn()
        self.put_ok(c, "fb", b"x")
        body = b"GET /_health HTTP/1.1\r\nHost: localhost\r\n\r\n" * 3
        r = c.put(self.path("fb"), body, {"If-None-Match": "*"})
        self.assertEqual(r.status, 412, r)
        self.assertFalse(r.wants_close)
        r = c.get(self.path("fb"))
        self.assertEqual((r.status, r.body), (200, b"x"))

    def test_delete_preconditions(self):
        c = self.conn()
        e = self.put_ok(c, "dp", b"x")
        r = c.delete(self.path("dp"), {"If-Match": '"stale"'})
        self.assert_json_error(r, 412)
        self.assertEqual(c.get(self.path("dp")).status, 200)
        r = c.delete(self.path("dp"), {"If-Match": e})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(c.get(self.path("dp")).status, 404)
        r = c.delete(self.path("dp"))
        self.assertEqual(r.status, 404, r)

    def test_put_without_preconditions_always_writes(self):
        c = self.conn()
        self.put_ok(c, "w", b"1", status=201)
        self.put_ok(c, "w", b"2", status=204)
        self.assertEqual(c.get(self.path("w")).body, b"2")


class TestNames(DocTestCase):
    """App and key validation: 400 with the connection kept open."""

    def assert_400_open(self, c, method, target, body=None):
        r = c.request(method, target, body=body)
        self.assert_json_error(r, 400, method)
        self.assertFalse(r.wants_close, f"a bad name must not close the connection: {r}")
        self.assert_still_open(c)

    def test_bad_apps(self):
        c = self.conn()
        for app in ("Abc", "a.b", "a%20b", "a%2Fx", "x" * 65, "%41bc", "caf%C3%A9"):
            for method in ("GET", "HEAD", "PUT", "DELETE"):
                with self.subTest(app=app, method=method):
                    body = b"x" if method == "PUT" else None
                    self.assert_400_open(c, method, f"/{app}/k", body)

    def test_bad_app_list(self):
        c = self.conn()
        self.assert_400_open(c, "GET", "/Abc/")
        self.assert_400_open(c, "GET", "/a.b/?limit=5")

    def test_good_apps(self):
        c = self.conn()
        for app in ("a", "0", "a_b-c", "-dash", "x" * 64, "abcdefghijklmnopqrstuvwxyz0123456789_-"):
            with self.subTest(app=app):
                r = c.put(f"/{app}/k-{self.app}", b"v")
                self.assertIn(r.status, (201, 204), r)
                self.assertEqual(c.get(f"/{app}/k-{self.app}").body, b"v")

    def test_app_without_key(self):
        c = self.conn()
        self.assert_400_open(c, "GET", f"/{self.app}")

    def test_root_is_404(self):
        c = self.conn()
        r = c.get("/")
        self.assert_json_error(r, 404)
        self.assert_still_open(c)

    def test_percent_decoding(self):
        c = self.conn()
        self.put_ok(c, "abc", b"plain", status=201)
        self.assertEqual(c.get(f"/{self.app}/%61%62%63").body, b"plain")
        self.assertEqual(c.get(f"/{self.app}/%61bc").body, b"plain")
        r = c.put(f"/{self.app}/sp%20ace", b"s")
        self.assertEqual(r.status, 201, r)
        keys = [e["key"] for e in self.list_page(c)["keys"]]
        self.assertIn("sp ace", keys)
        self.assertIn("abc", keys)
        # lowercase hex is accepted too
        r = c.put(f"/{self.app}/%c3%a9t%C3%A9", b"u")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(f"/{self.app}/{q('été')}").body, b"u")

    def test_plus_in_path_is_literal(self):
        c = self.conn()
        r = c.put(f"/{self.app}/a+b", b"plus")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(f"/{self.app}/a%2Bb").body, b"plus")
        self.assertEqual(c.get(f"/{self.app}/a%20b").status, 404)
        keys = [e["key"] for e in self.list_page(c)["keys"]]
        self.assertEqual(keys, ["a+b"])

    def test_keys_with_slashes(self):
        c = self.conn()
        r = c.put(f"/{self.app}/x/y/z", b"deep")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(f"/{self.app}/x/y/z").body, b"deep")
        self.assertEqual(c.get(f"/{self.app}/x%2Fy%2Fz").body, b"deep")
        self.assertEqual(c.get(f"/{self.app}/x/y").status, 404)
        r = c.put(f"/{self.app}/x/", b"trailing")
        self.assertEqual(r.status, 201, r)
        r = c.put(f"/{self.app}//lead", b"lead")
        self.assertEqual(r.status, 201, r)
        keys = [e["key"] for e in self.list_page(c)["keys"]]
        self.assertEqual(keys, ["/lead", "x/", "x/y/z"])
        self.assertEqual(c.get(f"/{self.app}/x/").body, b"trailing")
        self.assertEqual(c.get(f"/{self.app}//lead").body, b"lead")

    def test_utf8_keys(self):
        c = self.conn()
        for k in ("é", "日本語/キー", "😀", "\u007f", "a\tb", "line\nbreak"):
            with self.subTest(key=k):
                r = c.put(self.path(k), k.encode("utf-8"))
                self.assertEqual(r.status, 201, r)
                self.assertEqual(c.get(self.path(k)).body, k.encode("utf-8"))

    def test_invalid_utf8_keys(self):
        c = self.conn()
        for enc in ("%FF", "a%C3", "%C3%28", "%C0%AF", "%E0%80%AF", "%ED%A0%80",
                    "%F4%90%80%80", "%F8%88%80%80%80", "%80abc"):
            with self.subTest(key=enc):
                self.assert_400_open(c, "PUT", f"/{self.app}/{enc}", b"x")
                self.assert_400_open(c, "GET", f"/{self.app}/{enc}")

    def test_nul_rejected(self):
        c = self.conn()
        for enc in ("%00", "a%00b", "%00/x"):
            with self.subTest(key=enc):
                self.assert_400_open(c, "PUT", f"/{self.app}/{enc}", b"x")
                self.assert_400_open(c, "GET", f"/{self.app}/{enc}")
                self.assert_400_open(c, "DELETE", f"/{self.app}/{enc}")

    def test_malformed_percent_escapes(self):
        c = self.conn()
        for enc in ("%zz", "%4", "abc%", "%4g", "%%41", "a%g1"):
            with self.subTest(key=enc):
                self.assert_400_open(c, "GET", f"/{self.app}/{enc}")
                self.assert_400_open(c, "PUT", f"/{self.app}/{enc}", b"x")

    def test_key_length_limit(self):
        c = self.conn()
        k1024 = "k" * 1024
        r = c.put(self.path(k1024), b"max")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(self.path(k1024)).body, b"max")
        self.assert_400_open(c, "PUT", self.path("k" * 1025), b"x")
        self.assert_400_open(c, "GET", self.path("k" * 1025))
        # the limit is on decoded bytes: 512 x 'é' (2 bytes each) = 1024 bytes
        r = c.put(self.path("é" * 512), b"multibyte")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(c.get(self.path("é" * 512)).body, b"multibyte")
        self.assert_400_open(c, "PUT", self.path("é" * 512 + "x"), b"x")
        # 1024 encoded bytes that decode to 1024 bytes: fine even though %-form is 3072 chars
        r = c.put(f"/{self.app}/" + "%6B" * 1023 + "z", b"enc")
        self.assertEqual(r.status, 201, r)
        keys = {e["key"]: e["size"] for e in self.list_page(c, query="limit=1000")["keys"]}
        self.assertIn(k1024, keys)
        self.assertIn("é" * 512, keys)
        self.assertIn("k" * 1023 + "z", keys)
        self.assertEqual(len(keys), 3)


class TestMethods(DocTestCase):

    def test_document_405(self):
        c = self.conn()
        for method in ("POST", "PATCH", "FOO", "PROPFIND"):
            with self.subTest(method=method):
                r = c.request(method, self.path("k"), body=b"abc")
                self.assert_json_error(r, 405)
                self.assert_allow(r, {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
                if r.wants_close:
                    self.assertTrue(c.closed_by_peer())
                    c = self.conn()
                else:
                    self.assert_still_open(c)

    def test_list_405(self):
        c = self.conn()
        for method in ("PUT", "DELETE", "POST", "OPTIONS"):
            with self.subTest(method=method):
                r = c.request(method, f"/{self.app}/", body=b"" if method == "PUT" else None)
                self.assert_json_error(r, 405)
                self.assert_allow(r, {"GET", "HEAD"})
                if r.wants_close:
                    self.assertTrue(c.closed_by_peer())
                    c = self.conn()
                else:
                    self.assert_still_open(c)

    def test_trace_and_connect_are_not_served(self):
        c = self.conn()
        r = c.request("TRACE", self.path("k"))
        self.assertEqual(r.status, 405, r)
        self.assert_allow(r, {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class TestList(DocTestCase):

    def test_empty_app(self):
        c = self.conn()
        doc = self.list_page(c)
        self.assertEqual(doc, {"keys": [], "next": None})

    def test_head_list(self):
        c = self.conn()
        self.put_ok(c, "k", b"x")
        r = c.head(f"/{self.app}/")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.header("content-type", "").startswith("application/json"))
        self.assert_still_open(c)

    def test_entries_carry_etag_and_size(self):
        c = self.conn()
        sizes = {"a": 0, "b": 1, "c": 1000, "d/e": 17}
        etags = {}
        for k, n in sizes.items():
            etags[k] = self.put_ok(c, k, b"z" * n)
        doc = self.list_page(c)
        self.assertIsNone(doc["next"])
        self.assertEqual([e["key"] for e in doc["keys"]], sorted(sizes))
        for e in doc["keys"]:
            self.assertEqual(e["size"], sizes[e["key"]])
            self.assertEqual(e["etag"], etags[e["key"]])
            self.assertEqual(e["etag"], c.get(self.path(e["key"])).etag)
        # raw JSON has the etag escaped: "etag":"\"...\""
        raw = c.get(f"/{self.app}/").body
        self.assertIn(b'"etag":"\\"', raw.replace(b" ", b""))

    def test_deleted_and_replaced_keys(self):
        c = self.conn()
        for k in "abcde":
            self.put_ok(c, k, b"1")
        c.delete(self.path("b"))
        e = self.put_ok(c, "d", b"22")
        doc = self.list_page(c)
        self.assertEqual([x["key"] for x in doc["keys"]], ["a", "c", "d", "e"])
        d = [x for x in doc["keys"] if x["key"] == "d"][0]
        self.assertEqual((d["etag"], d["size"]), (e, 2))

    def test_bytewise_order(self):
        c = self.conn()
        keys = ["b", "a", "B", "A", "0", "~", "é", "e", "ez", "z", "日", "😀", "a/b", "a-b",
                "a b", "a.b", "ab", "aa", "\x7f", "\x01"]
        for k in keys:
            self.put_ok(c, k, b"v")
        want = sorted(keys, key=key_bytes)
        got, _ = self.list_all(c, limit=1000)
        self.assertEqual(got, want)
        got, _ = self.list_all(c, limit=3)
        self.assertEqual(got, want)

    def test_paging(self):
        c = self.conn()
        keys = [f"k{i:03d}" for i in range(47)]
        for k in keys:
            self.put_ok(c, k, b"v")
        for limit in (1, 5, 7, 10, 20, 46, 47, 48, 1000):
            with self.subTest(limit=limit):
                got, pages = self.list_all(c, limit=limit)
                self.assertEqual(got, keys)
                self.assertIn(pages, (-(-47 // limit), 47 // limit + 1))
        # default limit is 20
        doc = self.list_page(c)
        self.assertEqual(len(doc["keys"]), 20)
        self.assertIsNotNone(doc["next"])
        got, _ = self.list_all(c)
        self.assertEqual(got, keys)

    def test_last_page_next_is_null(self):
        c = self.conn()
        for k in ("a", "b", "c"):
            self.put_ok(c, k, b"v")
        doc = self.list_page(c, query="limit=5")
        self.assertEqual(len(doc["keys"]), 3)
        self.assertIsNone(doc["next"])
        self.assertIn(b'"next":null', c.get(f"/{self.app}/?limit=5").body.replace(b" ", b""))
        doc = self.list_page(c, query="limit=2")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a", "b"])
        self.assertIsInstance(doc["next"], str)
        doc2 = self.list_page(c, query="limit=2&after=" + qv(doc["next"]))
        self.assertEqual([e["key"] for e in doc2["keys"]], ["c"])
        self.assertIsNone(doc2["next"])

    def test_after_is_exclusive_and_need_not_exist(self):
        c = self.conn()
        for k in ("a", "b", "c", "d"):
            self.put_ok(c, k, b"v")
        doc = self.list_page(c, query="after=b")
        self.assertEqual([e["key"] for e in doc["keys"]], ["c", "d"])
        doc = self.list_page(c, query="after=bb")
        self.assertEqual([e["key"] for e in doc["keys"]], ["c", "d"])
        doc = self.list_page(c, query="after=")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a", "b", "c", "d"])
        doc = self.list_page(c, query="after=zzz")
        self.assertEqual(doc, {"keys": [], "next": None})

    def test_prefix(self):
        c = self.conn()
        keys = ["user/1", "user/2", "user/10", "users", "use", "admin/1", "user0"]
        for k in keys:
            self.put_ok(c, k, b"v")
        got, _ = self.list_all(c, prefix="user/")
        self.assertEqual(got, sorted(["user/1", "user/2", "user/10"], key=key_bytes))
        got, _ = self.list_all(c, prefix="user/", limit=1)
        self.assertEqual(got, ["user/1", "user/10", "user/2"])
        got, _ = self.list_all(c, prefix="user")
        self.assertEqual(got, ["user/1", "user/10", "user/2", "user0", "users"])
        got, _ = self.list_all(c, prefix="nothing")
        self.assertEqual(got, [])
        got, _ = self.list_all(c, prefix="")
        self.assertEqual(got, sorted(keys, key=key_bytes))
        doc = self.list_page(c, query="prefix=user&after=user%2F2&limit=10")
        self.assertEqual([e["key"] for e in doc["keys"]], ["user0", "users"])
        # prefix with after before the prefix range
        doc = self.list_page(c, query="prefix=user%2F&after=a")
        self.assertEqual([e["key"] for e in doc["keys"]], ["user/1", "user/10", "user/2"])

    def test_query_decoding_and_plus(self):
        c = self.conn()
        for k in ("a b/1", "a b/2", "a+b", "a%b", "é/x"):
            self.put_ok(c, k, b"v")
        doc = self.list_page(c, query="prefix=a+b")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a b/1", "a b/2"])
        doc = self.list_page(c, query="prefix=a%20b%2F")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a b/1", "a b/2"])
        doc = self.list_page(c, query="prefix=a%2Bb")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a+b"])
        doc = self.list_page(c, query="prefix=a%25")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a%b"])
        doc = self.list_page(c, query="prefix=%C3%A9")
        self.assertEqual([e["key"] for e in doc["keys"]], ["é/x"])
        doc = self.list_page(c, query="after=a+b%2F1&limit=1")
        self.assertEqual([e["key"] for e in doc["keys"]], ["a b/2"])

    def test_bad_limits(self):
        c = self.conn()
        self.put_ok(c, "k", b"v")
        for lim in ("0", "1001", "-1", "abc", "", "1.5", "10x", "99999999999999999999999"):
            with self.subTest(limit=lim):
                r = c.get(f"/{self.app}/?limit={lim}")
                self.assert_json_error(r, 400)
                self.assertFalse(r.wants_close)
        for lim in ("1", "1000", "500"):
            with self.subTest(limit=lim):
                self.assertEqual(c.get(f"/{self.app}/?limit={lim}").status, 200)
        self.assert_still_open(c)

    def test_bad_query_escapes(self):
        c = self.conn()
        for query in ("prefix=%zz", "after=%4", "prefix=%"):
            with self.subTest(query=query):
                r = c.get(f"/{self.app}/?{query}")
                self.assert_json_error(r, 400)
        self.assert_still_open(c)

    def test_unknown_parameters_ignored(self):
        c = self.conn()
        self.put_ok(c, "k", b"v")
        doc = self.list_page(c, query="foo=bar&limit=5&x&=y")
        self.assertEqual([e["key"] for e in doc["keys"]], ["k"])

    def test_json_escaping_of_keys(self):
        c = self.conn()
        keys = ['quote"d', "back\\slash", "ctl\x01\x1f", "nl\nand\ttab\r", "é日😀",
                "del\x7f", "</script>", "u\u2028sep"]
        for k in keys:
            r = c.put(self.path(k), b"v")
            self.assertEqual(r.status, 201, (k, r))
        r = c.get(f"/{self.app}/?limit=100")
        self.assertEqual(r.status, 200)
        raw = r.body
        # strict JSON: control characters must be escaped in strings
        for b in range(0x20):
            self.assertNotIn(bytes([b]), raw, f"raw control byte {b:#x} in JSON body")
        doc = json.loads(raw.decode("utf-8"), strict=True)
        self.assertEqual([e["key"] for e in doc["keys"]], sorted(keys, key=key_bytes))
        # the next value also round-trips through escaping
        doc = self.list_page(c, query="limit=1&after=" + qv('back\\slash'))
        self.assertEqual(doc["keys"][0]["key"], "ctl\x01\x1f")
        self.assertIsInstance(doc["next"], str)
        doc2 = self.list_page(c, query="limit=1&after=" + qv(doc["next"]))
        self.assertEqual(doc2["keys"][0]["key"], "del\x7f")


if __name__ == "__main__":
    unittest.main()

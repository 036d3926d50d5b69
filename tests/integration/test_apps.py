"""SPEC section 7: apps, tokens and quotas over raw sockets (auth on and off, 1 and 3 shards)."""

import json
import os
import re
import stat
import time
import unittest

from percore_client import (ServerTestCase, admin_token_of, bearer, env_shards, q, start_server,
                            unique, wait_until)

TOKEN_FORM = re.compile(r"^pct_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$")




class AppsCase(ServerTestCase):
    """A server with --auth on; helpers speak as the server admin or as a token."""

    SERVER_ARGS = ("--auth", "on")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.admin = admin_token_of(cls.server)
        cls.secrets = []  # every token the tests saw, to look for in logs and pages

    def as_admin(self, c, method, target, body=None):
        return c.request(method, target, bearer(self.admin), body)

    def make_app(self, c, app=None, quota=None, expect=201):
        app = app or self.app
        body = json.dumps({"quota": quota or {}}).encode()
        r = self.as_admin(c, "PUT", f"/_apps/{app}", body)
        self.assertEqual(r.status, expect, r)
        return app

    def make_token(self, c, app=None, scope="write", prefix=None, ttl=None, as_token=None):
        spec = {"scope": scope}
        if prefix is not None:
            spec["prefix"] = prefix
        if ttl is not None:
            spec["ttl"] = ttl
        who = bearer(as_token) if as_token else bearer(self.admin)
        r = c.request("POST", f"/_apps/{app or self.app}/tokens", who, json.dumps(spec).encode())
        self.assertEqual(r.status, 201, r)
        doc = r.json()
        self.assertEqual(set(doc), {"id", "token"}, doc)
        self.assertRegex(doc["token"], TOKEN_FORM)
        self.assertIn(doc["id"], doc["token"])
        self.secrets.append(doc["token"])
        return doc["id"], doc["token"]


class TestAuthentication(AppsCase):
    def test_the_admin_token_file_is_made_0600_and_its_path_logged_never_the_token(self):
        path = os.path.join(self.server.data, "admin.token")
        mode = stat.S_IMODE(os.stat(path).st_mode)
        self.assertEqual(mode, 0o600, oct(mode))
        self.assertGreaterEqual(len(self.admin), 22)
        self.assertIn(path, self.server.stderr())
        self.assertNotIn(self.admin, self.server.stderr())

    def test_health_needs_no_token(self):
        self.assertEqual(self.conn().get("/_health").status, 200)

    def test_a_request_without_a_token_is_401_with_www_authenticate(self):
        c = self.conn()
        for method, target in (("GET", f"/{self.app}/k"), ("PUT", f"/{self.app}/k"), ("GET", "/_apps/"),
                               ("GET", "/_metrics"), ("GET", f"/{self.app}/")):
            r = c.request(method, target, None, b"x" if method == "PUT" else None)
            self.assert_json_error(r, 401, method)
            self.assertEqual(r.header("www-authenticate"), "Bearer", r)
            if method == "PUT":  # a refused request with a body closes: its body is never read
                c = self.conn()

    def test_malformed_and_unknown_tokens_are_401(self):
        c = self.conn()
        made = "pct_0123456789abcdef_" + "A" * 43
        for value in ("Basic YWxhZGRpbjpvcGVu", "Bearer", "Bearer ", "Bearer a b", f"Bearer {made}",
                      "Bearer not-a-percore-token", f"bearer {self.admin}x"):
            r = c.get(f"/{self.app}/k", {"Authorization": value})
            self.assert_json_error(r, 401)
            self.assertEqual(r.header("www-authenticate"), "Bearer", r)

    def test_the_scheme_is_case_insensitive(self):
        r = self.conn().get("/_apps/", {"Authorization": f"bEaReR {self.admin}"})
        self.assertEqual(r.status, 200, r)

    def test_the_server_admin_asking_for_an_app_that_does_not_exist_gets_404(self):
        c = self.conn()
        for method, target in (("GET", f"/{self.app}/k"), ("PUT", f"/{self.app}/k"), ("GET", f"/{self.app}/"),
                               ("GET", f"/_apps/{self.app}"), ("GET", f"/_apps/{self.app}/tokens"),
                               ("DELETE", f"/_apps/{self.app}")):
            r = self.as_admin(c, method, target, b"x" if method == "PUT" else None)
            self.assert_json_error(r, 404, method)
            if method == "PUT":
                c = self.conn()


class TestAdministration(AppsCase):
    def test_an_app_is_created_201_updated_204_and_read_back_with_quota_and_usage(self):
        c = self.conn()
        self.make_app(c, quota={"documents": 10})
        self.make_app(c, quota={"documents": 20, "bytes": 1000}, expect=204)
        r = self.as_admin(c, "GET", f"/_apps/{self.app}")
        self.assertEqual(r.status, 200, r)
        doc = r.json()
        self.assertEqual(doc["app"], self.app)
        self.assertEqual(doc["quota"], {"documents": 20, "bytes": 1000})
        self.assertEqual(doc["usage"]["documents"], 0)
        self.assertEqual(doc["usage"]["bytes"], 0)
        self.assertEqual(set(doc["usage"]["refused"]), {"quota", "rate", "auth"})

    def test_the_list_of_apps_is_in_byte_order(self):
        c = self.conn()
        names = sorted([unique("b"), unique("a"), unique("c")])
        for n in reversed(names):
            self.make_app(c, n)
        r = self.as_admin(c, "GET", "/_apps/")
        self.assertEqual(r.status, 200, r)
        apps = r.json()["apps"]
        self.assertEqual(apps, sorted(apps))
        for n in names:
            self.assertIn(n, apps)

    def test_bad_bodies_and_names_are_400(self):
        c = self.conn()
        for body in (b"{", b"[]", b'{"quota":{"documents":-1}}', b'{"quota":{"documents":1.5}}',
                     b'{"quota":{"nope":1}}', b'{"other":1}', b'{"quota":1}', b'{"quota":{},"quota":{}}'):
            r = self.as_admin(c, "PUT", f"/_apps/{self.app}", body)
            self.assert_json_error(r, 400)
        r = self.as_admin(c, "PUT", "/_apps/Bad_Name", b"{}")
        self.assert_json_error(r, 400)
        self.make_app(c)
        for body in (b"{}", b'{"scope":"root"}', b'{"scope":"read","ttl":0}', b'{"scope":"read","prefix":1}',
                     b'{"scope":"read","extra":true}'):
            r = self.as_admin(c, "POST", f"/_apps/{self.app}/tokens", body)
            self.assert_json_error(r, 400)

    def test_tokens_are_listed_without_their_secret(self):
        c = self.conn()
        self.make_app(c)
        rid, rtok = self.make_token(c, scope="read", prefix="p/")
        wid, wtok = self.make_token(c, scope="write", ttl=3600)
        self.assertEqual(c.get(f"/{self.app}/p/x", bearer(rtok)).status, 404)
        r = self.as_admin(c, "GET", f"/_apps/{self.app}/tokens")
        self.assertEqual(r.status, 200, r)
        self.assertNotIn(rtok.encode(), r.body)
        self.assertNotIn(wtok.encode(), r.body)
        tokens = {t["id"]: t for t in r.json()["tokens"]}
        self.assertEqual(set(tokens), {rid, wid})
        for t in tokens.values():
            self.assertEqual(set(t), {"id", "scope", "prefix", "expires", "last_used"}, t)
        self.assertEqual(tokens[rid]["scope"], "read")
        self.assertEqual(tokens[rid]["prefix"], "p/")
        self.assertIsNone(tokens[rid]["expires"])
        self.assertIsInstance(tokens[rid]["last_used"], int)
        self.assertEqual(tokens[wid]["prefix"], None)
        self.assertGreater(tokens[wid]["expires"], time.time() + 3000)
        self.assertIsNone(tokens[wid]["last_used"])

    def test_a_deleted_app_is_gone_with_its_documents_and_tokens(self):
        c = self.conn()
        self.make_app(c)
        _, tok = self.make_token(c, scope="write")
        for i in range(30):
            self.assertEqual(c.put(f"/{self.app}/k{i}", b"v", bearer(tok)).status, 201)
        r = self.as_admin(c, "DELETE", f"/_apps/{self.app}")
        self.assertEqual(r.status, 204, r)
        self.assert_json_error(c.get(f"/{self.app}/k1", bearer(tok)), 401)
        self.assert_json_error(self.as_admin(c, "GET", f"/_apps/{self.app}"), 404)
        self.assertNotIn(self.app, self.as_admin(c, "GET", "/_apps/").json()["apps"])
        deadline = time.time() + 20
        while True:  # 409 while its documents are being erased
            r = self.as_admin(c, "PUT", f"/_apps/{self.app}", b"{}")
            if r.status != 409 or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.as_admin(c, "GET", f"/{self.app}/").json()["keys"], [])
        self.assertEqual(self.as_admin(c, "GET", f"/{self.app}/k1").status, 404)
        self.assertEqual(self.as_admin(c, "GET", f"/_apps/{self.app}").json()["usage"]["documents"], 0)
        self.assertEqual(self.as_admin(c, "GET", f"/_apps/{self.app}/tokens").json()["tokens"], [])
        self.assert_json_error(c.get(f"/{self.app}/k1", bearer(tok)), 401)


class TestScopesAndPrefixes(AppsCase):
    def test_a_read_token_reads_and_lists_but_cannot_write(self):
        c = self.conn()
        self.make_app(c)
        _, tok = self.make_token(c, scope="read")
        self.assertEqual(self.as_admin(c, "PUT", f"/{self.app}/k", b"v").status, 201)
        r = c.get(f"/{self.app}/k", bearer(tok))
        self.assertEqual((r.status, r.body), (200, b"v"))
        self.assertEqual(c.head(f"/{self.app}/k", bearer(tok)).status, 200)
        self.assertEqual(c.get(f"/{self.app}/", bearer(tok)).status, 200)
        self.assert_json_error(c.request("DELETE", f"/{self.app}/k", bearer(tok)), 403)
        self.assert_json_error(c.request("GET", f"/_apps/{self.app}/tokens", bearer(tok)), 403)
        c2 = self.conn()
        self.assert_json_error(c2.put(f"/{self.app}/k", b"w", bearer(tok)), 403)

    def test_a_write_token_writes_and_deletes(self):
        c = self.conn()
        self.make_app(c)
        _, tok = self.make_token(c, scope="write")
        self.assertEqual(c.put(f"/{self.app}/k", b"v", bearer(tok)).status, 201)
        self.assertEqual(c.put(f"/{self.app}/k", b"w", bearer(tok)).status, 204)
        self.assertEqual(c.delete(f"/{self.app}/k", bearer(tok)).status, 204)
        self.assert_json_error(c.request("POST", f"/_apps/{self.app}/tokens", bearer(tok), b'{"scope":"read"}'), 403)

    def test_a_token_outside_its_app_is_403_whether_or_not_the_other_app_exists(self):
        c = self.conn()
        self.make_app(c)
        other = self.make_app(c, unique("o"))
        _, tok = self.make_token(c, scope="admin")
        for app in (other, unique("missing")):
            self.assert_json_error(c.get(f"/{app}/k", bearer(tok)), 403)
            self.assert_json_error(c.get(f"/{app}/", bearer(tok)), 403)
            self.assert_json_error(c.request("GET", f"/_apps/{app}/tokens", bearer(tok)), 403)

    def test_only_the_server_admin_makes_and_deletes_apps_and_reads_server_pages(self):
        c = self.conn()
        self.make_app(c)
        _, tok = self.make_token(c, scope="admin")
        for method, target in (("GET", "/_apps/"), ("GET", "/_metrics"), ("GET", "/_stats"),
                               ("DELETE", f"/_apps/{self.app}"), ("PUT", f"/_apps/{unique('n')}")):
            r = c.request(method, target, bearer(tok), b"{}" if method == "PUT" else None)
            self.assert_json_error(r, 403, method)
            if method == "PUT":
                c = self.conn()
        self.assertEqual(c.request("GET", f"/_apps/{self.app}", bearer(tok)).status, 200)

    def test_an_app_admin_makes_and_revokes_tokens_within_its_prefix(self):
        c = self.conn()
        self.make_app(c)
        _, adm = self.make_token(c, scope="admin", prefix="team/")
        rid, rtok = self.make_token(c, scope="read", prefix="team/a/", as_token=adm)
        r = c.request("POST", f"/_apps/{self.app}/tokens", bearer(adm), b'{"scope":"read","prefix":"other/"}')
        self.assert_json_error(r, 403)
        self.assertEqual(c.get(f"/{self.app}/team/a/x", bearer(rtok)).status, 404)
        self.assertEqual(c.request("DELETE", f"/_apps/{self.app}/tokens/{rid}", bearer(adm)).status, 204)
        self.assert_json_error(c.get(f"/{self.app}/team/a/x", bearer(rtok)), 401)
        self.assert_json_error(c.request("DELETE", f"/_apps/{self.app}/tokens/{rid}", bearer(adm)), 404)

    def test_a_prefixed_token_reaches_only_its_keys_and_lists_are_filtered(self):
        c = self.conn()
        self.make_app(c)
        for k in ("a/1", "a/2", "b/1", "c"):
            self.assertEqual(self.as_admin(c, "PUT", f"/{self.app}/{q(k)}", b"v").status, 201)
        _, tok = self.make_token(c, scope="write", prefix="a/")
        self.assertEqual(c.get(f"/{self.app}/{q('a/1')}", bearer(tok)).status, 200)
        self.assert_json_error(c.get(f"/{self.app}/{q('b/1')}", bearer(tok)), 403)
        self.assert_json_error(c.get(f"/{self.app}/c", bearer(tok)), 403)
        keys = lambda query: [e["key"] for e in c.get(f"/{self.app}/?{query}", bearer(tok)).json()["keys"]]
        self.assertEqual(keys(""), ["a/1", "a/2"])
        self.assertEqual(keys("prefix=a/2"), ["a/2"])
        self.assertEqual(keys("prefix=b"), [])
        self.assertEqual(keys("limit=1&after=a/1"), ["a/2"])


class TestPrefixScopedAdmins(AppsCase):
    """SPEC 7: an admin token with a prefix manages only tokens whose prefix lies within its own."""

    def test_a_prefix_admin_cannot_revoke_a_broader_token_or_the_whole_apps_admin(self):
        c = self.conn()
        self.make_app(c)
        whole_id, whole = self.make_token(c, scope="admin")
        broader_id, _ = self.make_token(c, scope="read", prefix="team")
        other_id, _ = self.make_token(c, scope="write", prefix="other/")
        _, adm = self.make_token(c, scope="admin", prefix="team/")
        for victim in (whole_id, broader_id, other_id):
            r = c.request("DELETE", f"/_apps/{self.app}/tokens/{victim}", bearer(adm))
            self.assert_json_error(r, 403, "DELETE")
        self.assertEqual(c.get(f"/{self.app}/x", bearer(whole)).status, 404)  # still valid

    def test_a_prefix_admins_token_list_shows_only_tokens_within_its_prefix(self):
        c = self.conn()
        self.make_app(c)
        self.make_token(c, scope="admin")
        self.make_token(c, scope="read", prefix="team")
        self.make_token(c, scope="write", prefix="other/")
        adm_id, adm = self.make_token(c, scope="admin", prefix="team/")
        inside_id, _ = self.make_token(c, scope="read", prefix="team/a/", as_token=adm)
        r = c.request("GET", f"/_apps/{self.app}/tokens", bearer(adm))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(sorted(t["id"] for t in r.json()["tokens"]), sorted([adm_id, inside_id]))
        r = self.as_admin(c, "GET", f"/_apps/{self.app}/tokens")
        self.assertEqual(len(r.json()["tokens"]), 5)  # the server admin sees every one


class TestTokenLimit(AppsCase):
    """SPEC 7: at most 1,000 tokens per app; past them 507 {"error":"limit: tokens"}."""

    SERVER_ARGS = ("--auth", "on", "--durability", "none")  # 1,000 catalog writes, no fsync each

    def post_token(self, c, app=None):
        return c.request("POST", f"/_apps/{app or self.app}/tokens", bearer(self.admin), b'{"scope":"read"}')

    def test_the_1001st_token_is_507_until_one_is_revoked_and_other_apps_are_not_counted(self):
        c = self.conn()
        self.make_app(c)
        other = self.make_app(c, unique("other"))
        ids = []
        for i in range(1000):
            r = self.post_token(c)
            self.assertEqual(r.status, 201, (i, r))
            ids.append(r.json()["id"])
        r = self.post_token(c)
        self.assertEqual(r.status, 507, r)
        self.assertEqual(r.body, b'{"error":"limit: tokens"}')
        self.assertEqual(self.post_token(c, other).status, 201)  # another app has its own 1,000
        self.assertEqual(self.as_admin(c, "DELETE", f"/_apps/{self.app}/tokens/{ids[0]}").status, 204)
        self.assertEqual(self.post_token(c).status, 201)
        self.assertEqual(self.post_token(c).status, 507)
        self.assertEqual(len(self.as_admin(c, "GET", f"/_apps/{self.app}/tokens").json()["tokens"]), 1000)


class TestRevocationAndExpiry(AppsCase):
    def test_a_revoked_token_fails_at_once_on_every_connection(self):
        c = self.conn()
        self.make_app(c)
        tid, tok = self.make_token(c, scope="read")
        conns = [self.conn() for _ in range(4 * max(1, self.shard_count()))]
        for k in conns:  # each connection verified (and cached) the token
            self.assertEqual(k.get(f"/{self.app}/x", bearer(tok)).status, 404)
        self.assertEqual(self.as_admin(c, "DELETE", f"/_apps/{self.app}/tokens/{tid}").status, 204)
        for k in conns:
            self.assert_json_error(k.get(f"/{self.app}/x", bearer(tok)), 401)

    def test_an_expired_token_is_401(self):
        c = self.conn()
        self.make_app(c)
        _, tok = self.make_token(c, scope="read", ttl=1)
        k = self.conn()
        self.assertEqual(k.get(f"/{self.app}/x", bearer(tok)).status, 404)
        # the expiry must really pass (ttl 1 s): poll its consequence, the token refused on the
        # connection that verified (and cached) it
        wait_until(lambda: k.get(f"/{self.app}/x", bearer(tok)).status == 401, timeout=5, interval=0.05,
                   what="the token to expire (401) after its 1 s ttl")
        self.assert_json_error(k.get(f"/{self.app}/x", bearer(tok)), 401)
        self.assert_json_error(self.conn().get(f"/{self.app}/x", bearer(tok)), 401)

    def test_tokens_never_appear_in_logs_metrics_or_error_bodies(self):
        c = self.conn()
        self.make_app(c)
        _, tok = self.make_token(c, scope="read")
        bodies = [c.put(f"/{self.app}/k", b"v", bearer(tok)).body]
        c = self.conn()
        bodies.append(c.get(f"/{unique('x')}/k", bearer(tok)).body)
        bodies.append(c.get(f"/{self.app}/k", bearer(tok + "x")).body)
        bodies.append(self.as_admin(c, "GET", "/_metrics").body)
        bodies.append(self.as_admin(c, "GET", "/_stats").body)
        bodies.append(self.as_admin(c, "GET", f"/_apps/{self.app}").body)
        log = self.server.stderr()
        for secret in self.secrets + [self.admin]:
            self.assertNotIn(secret, log)
            for b in bodies:
                self.assertNotIn(secret.encode(), b)


class TestQuotas(AppsCase):
    def writer(self, quota):
        c = self.conn()
        self.make_app(c, quota=quota)
        _, tok = self.make_token(c, scope="write")
        return c, bearer(tok)

    def usage(self):
        return self.as_admin(self.conn(), "GET", f"/_apps/{self.app}").json()["usage"]

    def test_documents_quota_is_exact_for_one_client_and_507_changes_nothing(self):
        c, tok = self.writer({"documents": 3})
        for i in range(3):
            self.assertEqual(c.put(f"/{self.app}/k{i}", b"v", tok).status, 201)
        r = c.put(f"/{self.app}/k3", b"v", tok)
        self.assert_json_error(r, 507)
        self.assertEqual(r.json()["error"], "quota exceeded: documents")
        self.assertTrue(r.wants_close, r)  # refused before its body was read: the body is never read
        c = self.conn()
        self.assertEqual(c.get(f"/{self.app}/k3", tok).status, 404)
        self.assertEqual(c.put(f"/{self.app}/k0", b"replaced", tok).status, 204)
        self.assertEqual(c.delete(f"/{self.app}/k0", tok).status, 204)
        self.assertEqual(c.put(f"/{self.app}/k3", b"v", tok).status, 201)
        u = self.usage()
        self.assertEqual(u["documents"], 3)
        self.assertGreaterEqual(u["refused"]["quota"], 1)

    def test_bytes_quota_counts_value_sizes_and_replacements(self):
        c, tok = self.writer({"bytes": 10})
        self.assertEqual(c.put(f"/{self.app}/a", b"123456", tok).status, 201)
        r = c.put(f"/{self.app}/b", b"12345", tok)
        self.assert_json_error(r, 507)
        self.assertEqual(r.json()["error"], "quota exceeded: bytes")
        c = self.conn()
        self.assertEqual(c.put(f"/{self.app}/a", b"1234", tok).status, 204)
        self.assertEqual(c.put(f"/{self.app}/b", b"123456", tok).status, 201)
        self.assertEqual(self.usage()["bytes"], 10)

    def test_a_body_over_max_document_bytes_is_413_before_it_is_read(self):
        c, tok = self.writer({"max_document_bytes": 8})
        self.assertEqual(c.put(f"/{self.app}/a", b"12345678", tok).status, 201)
        r = c.put(f"/{self.app}/b", b"123456789", tok)
        self.assert_json_error(r, 413)
        self.assertTrue(r.wants_close, r)
        c = self.conn()
        c.send(f"PUT /{self.app}/big HTTP/1.1\r\nHost: localhost\r\nAuthorization: {tok['Authorization']}\r\n"
               f"Content-Length: 1000000\r\nExpect: 100-continue\r\n\r\n".encode())
        r = c.read_response("PUT")
        self.assert_json_error(r, 413)  # no 100 Continue first: the body is never asked for

    def test_requests_per_second_past_the_burst_get_429_with_retry_after(self):
        c, tok = self.writer({"requests_per_second": 5})
        statuses = [c.get(f"/{self.app}/k", tok) for _ in range(20)]
        refused = [r for r in statuses if r.status == 429]
        self.assertGreaterEqual(len(refused), 10, [r.status for r in statuses])
        self.assertLessEqual(len(refused), 16, [r.status for r in statuses])
        self.assertTrue(all(int(r.header("retry-after", "0")) >= 1 for r in refused), refused[:1])
        self.assertEqual(refused[0].json()["error"], "quota exceeded: requests_per_second")
        for _ in range(10):  # the server admin is never rate-limited
            self.assertEqual(self.as_admin(c, "GET", f"/{self.app}/k").status, 404)
        self.assertGreaterEqual(self.usage()["refused"]["rate"], 10)

    def test_connections_past_the_quota_get_429_and_a_closed_one_frees_its_place(self):
        c, tok = self.writer({"connections": 2})
        a, b, x = self.conn(), self.conn(), self.conn()
        self.assertEqual(a.get(f"/{self.app}/k", tok).status, 404)
        self.assertEqual(b.get(f"/{self.app}/k", tok).status, 404)
        r = x.get(f"/{self.app}/k", tok)
        self.assert_json_error(r, 429)
        self.assertIsNotNone(r.header("retry-after"))
        a.close()
        deadline = time.time() + 5
        while x.get(f"/{self.app}/k", tok).status == 429 and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(x.get(f"/{self.app}/k", tok).status, 404)


class TestRestart(unittest.TestCase):
    def test_apps_tokens_and_quotas_survive_a_restart_with_another_shard_count(self):
        first = env_shards()
        srv = start_server(first, ("--auth", "on"))
        try:
            admin = admin_token_of(srv)
            with srv.conn() as c:
                self.assertEqual(c.request("PUT", "/_apps/kept", bearer(admin), b'{"quota":{"documents":5}}').status, 201)
                r = c.request("POST", "/_apps/kept/tokens", bearer(admin), b'{"scope":"write","prefix":"p"}')
                tok = r.json()["token"]
                for i in range(5):
                    self.assertEqual(c.put(f"/kept/p{i}", b"v", bearer(tok)).status, 201)
            self.assertEqual(srv.stop(), 0)
            data = srv.data
            srv2 = start_server(3 if first == 1 else 1, ("--auth", "on"), data=data)
            try:
                with srv2.conn() as c:
                    self.assertEqual(c.get("/kept/p0", bearer(tok)).status, 200)
                    self.assert_json_error_status(c.put("/kept/p9", b"v", bearer(tok)), 507)
                with srv2.conn() as c:
                    info = c.request("GET", "/_apps/kept", bearer(admin)).json()
                    self.assertEqual(info["quota"], {"documents": 5})
                    self.assertEqual(info["usage"]["documents"], 5)
                    self.assertEqual(c.request("GET", "/_apps/", bearer(admin)).json()["apps"], ["kept"])
                    self.assertEqual(c.get("/kept/x", bearer(tok)).status, 403)
                self.assertEqual(srv2.stop(), 0)
            finally:
                srv2.cleanup()
        finally:
            srv.cleanup()

    def test_the_token_limit_counts_the_tokens_found_at_a_restart(self):
        srv = start_server(env_shards(), ("--auth", "on", "--durability", "none"))
        try:
            admin = admin_token_of(srv)
            with srv.conn() as c:
                self.assertEqual(c.request("PUT", "/_apps/full", bearer(admin), b"{}").status, 201)
                for i in range(1000):
                    self.assertEqual(c.request("POST", "/_apps/full/tokens", bearer(admin), b'{"scope":"read"}').status,
                                     201, i)
            self.assertEqual(srv.stop(), 0)
            srv2 = start_server(3 if env_shards() == 1 else 1, ("--auth", "on"), data=srv.data)
            try:
                with srv2.conn() as c:
                    r = c.request("POST", "/_apps/full/tokens", bearer(admin), b'{"scope":"read"}')
                    self.assertEqual(r.status, 507, r)
                    self.assertEqual(r.body, b'{"error":"limit: tokens"}')
                self.assertEqual(srv2.stop(), 0)
            finally:
                srv2.cleanup()
        finally:
            srv.cleanup()

    def assert_json_error_status(self, r, status):
        self.assertEqual(r.status, status, r)


class TestAuthOff(ServerTestCase):
    """--auth off: apps are made by their first write, administration needs no token, quotas hold."""

    SERVER_ARGS = ("--auth", "off")

    def test_apps_are_made_by_their_first_write_and_listed(self):
        c = self.conn()
        self.assertEqual(c.put(f"/{self.app}/k", b"v").status, 201)
        self.assertIn(self.app, c.get("/_apps/").json()["apps"])
        self.assertEqual(c.get(f"/_apps/{self.app}").json()["usage"]["documents"], 1)

    def test_quotas_hold_without_tokens(self):
        c = self.conn()
        self.assertEqual(c.put(f"/_apps/{self.app}", b'{"quota":{"documents":1}}').status, 201)
        self.assertEqual(c.put(f"/{self.app}/a", b"v").status, 201)
        self.assertEqual(c.put(f"/{self.app}/b", b"v").status, 507)

    def test_a_token_header_is_ignored(self):
        c = self.conn()
        self.assertEqual(c.get(f"/{self.app}/k", {"Authorization": "Bearer nonsense"}).status, 404)


if __name__ == "__main__":
    unittest.main()

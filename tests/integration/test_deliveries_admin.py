"""SPEC section 9: the administration of deliveries (PUT/GET/DELETE /_apps/{app}/deliveries/{name})
over raw sockets, auth on, 1 and 3 shards. Sending batches is another module's."""

import json
import os
import re
import time
import unittest

from percore_client import LOOPBACK_RECEIVERS, ServerTestCase, env_shards, start_server, unique
from test_apps import admin_token_of, bearer

SECRET_FORM = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")
SEAL_KEY_FORM = re.compile(r"^[0-9a-f]{64}$")
GET_FIELDS = {"url", "state", "cursor", "lag", "attempts", "last_status", "last_error"}


class DeliveriesCase(ServerTestCase):
    SERVER_ARGS = ("--auth", "on", *LOOPBACK_RECEIVERS)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.admin = admin_token_of(cls.server)
        cls.secrets = []

    def setUp(self):
        super().setUp()
        c = self.conn()
        r = c.request("PUT", f"/_apps/{self.app}", bearer(self.admin), b'{"quota":{}}')
        self.assertEqual(r.status, 201, r)

    def target(self, name="hook", app=None):
        return f"/_apps/{app or self.app}/deliveries/{name}"

    def put_delivery(self, c, spec, name="hook", token=None, app=None):
        return c.request("PUT", self.target(name, app), bearer(token or self.admin), json.dumps(spec).encode())

    def create(self, c, spec=None, name="hook", token=None):
        r = self.put_delivery(c, spec or {"url": "http://127.0.0.1:9/hook"}, name, token)
        self.assertEqual(r.status, 201, r)
        doc = r.json()
        self.secrets.append(doc["signing_secret"])
        if "seal_key" in doc:
            self.secrets.append(doc["seal_key"])
        return doc

    def get(self, c, name="hook", token=None):
        return c.request("GET", self.target(name), bearer(token or self.admin))

    def make_token(self, c, scope, app=None):
        r = c.request("POST", f"/_apps/{app or self.app}/tokens", bearer(self.admin),
                      json.dumps({"scope": scope}).encode())
        self.assertEqual(r.status, 201, r)
        return r.json()["token"]


class TestCreateAndUpdate(DeliveriesCase):
    def test_creation_is_201_with_a_signing_secret_and_no_seal_key_without_seal(self):
        doc = self.create(self.conn())
        self.assertEqual(set(doc), {"name", "signing_secret"}, doc)
        self.assertEqual(doc["name"], "hook")
        self.assertRegex(doc["signing_secret"], SECRET_FORM)

    def test_creation_with_seal_shows_a_64_hex_seal_key(self):
        doc = self.create(self.conn(), {"url": "https://example.com/in", "seal": True})
        self.assertEqual(set(doc), {"name", "signing_secret", "seal_key"}, doc)
        self.assertRegex(doc["seal_key"], SEAL_KEY_FORM)

    def test_get_shows_the_state_and_never_a_secret(self):
        c = self.conn()
        doc = self.create(c, {"url": "https://example.com/in?x=1", "seal": True, "since": "0"})
        r = self.get(c)
        self.assertEqual(r.status, 200, r)
        info = r.json()
        self.assertEqual(set(info), GET_FIELDS, info)
        self.assertEqual(info["url"], "https://example.com/in?x=1")
        self.assertEqual(info["state"], "active")
        self.assertEqual(info["attempts"], 0)
        self.assertIsNone(info["last_status"])
        self.assertIsNone(info["last_error"])
        self.assertEqual(set(info["lag"]), {"changes", "seconds"})
        self.assertNotIn(doc["signing_secret"], r.body.decode())
        self.assertNotIn(doc["seal_key"], r.body.decode())

    def test_lag_counts_the_changes_after_the_cursor_within_the_prefix(self):
        c = self.conn()
        self.create(c, {"url": "http://127.0.0.1:9/", "prefix": "p/"})
        self.assertEqual(self.get(c).json()["lag"]["changes"], 0)
        for key in ("p/1", "p/2", "q/1"):
            self.assertEqual(c.put(f"/{self.app}/{key}", b"v", bearer(self.admin)).status, 201)
        self.assertEqual(self.get(c).json()["lag"]["changes"], 2)

    def test_a_second_put_is_204_and_keeps_the_secrets_and_the_cursor(self):
        c = self.conn()
        self.create(c, {"url": "http://127.0.0.1:9/a", "since": "0"})
        before = self.get(c).json()
        r = self.put_delivery(c, {"url": "http://127.0.0.1:9/b", "prefix": "x"})
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.body, b"")
        after = self.get(c).json()
        self.assertEqual(after["url"], "http://127.0.0.1:9/b")
        self.assertEqual(after["cursor"], before["cursor"])
        self.assertEqual(after["state"], "active")

    def test_seal_cannot_be_turned_on_by_an_update(self):
        c = self.conn()
        self.create(c)
        self.assert_json_error(self.put_delivery(c, {"url": "http://127.0.0.1:9/hook", "seal": True}), 409)

    def test_the_deliveries_of_an_app_are_listed_by_name(self):
        c = self.conn()
        self.create(c, name="b")
        self.create(c, name="a")
        r = c.request("GET", f"/_apps/{self.app}/deliveries/", bearer(self.admin))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"deliveries": ["a", "b"]})


class TestRefusals(DeliveriesCase):
    def test_invalid_urls_are_400_with_a_reason(self):
        c = self.conn()
        for url in ("ftp://example.com/", "http://user:pw@example.com/", "http://example.com/#f",
                    "http://example.com:port/", "http://example.com:70000/", "example.com", "", 5):
            r = self.put_delivery(c, {"url": url})
            self.assert_json_error(r, 400)
        self.assertEqual(self.get(c).status, 404)

    def test_malformed_bodies_and_unknown_fields_are_400(self):
        c = self.conn()
        for body in (b"{", b"[]", b'{"url":"http://h/","secret":"x"}', b'{"url":"http://h/","seal":1}'):
            r = c.request("PUT", self.target(), bearer(self.admin), body)
            self.assert_json_error(r, 400)

    def test_an_unknown_field_with_a_quote_and_a_control_byte_is_named_in_valid_json(self):
        # security review L2: the field's name was echoed unescaped, breaking the JSON body
        name = 'a"b\\\n\x01'
        r = self.put_delivery(self.conn(), {name: 1, "url": "http://h/"})
        self.assert_json_error(r, 400)
        self.assertIn(f"unknown field '{name}'", r.json()["error"])

    def test_the_since_reason_with_quotes_is_valid_json(self):
        r = self.put_delivery(self.conn(), {"url": "http://h/", "since": ""})
        self.assert_json_error(r, 400)
        self.assertIn('"now"', r.json()["error"])

    def test_an_invalid_name_is_400(self):
        r = self.conn().request("PUT", f"/_apps/{self.app}/deliveries/Bad.Name", bearer(self.admin),
                                b'{"url":"http://h/"}')
        self.assert_json_error(r, 400)

    def test_a_ca_file_is_400_whether_or_not_the_file_exists_and_names_ca_pem(self):
        # review M5: no file named by a tenant is read (no existence oracle, no shard stall)
        c = self.conn()
        for path in (os.path.join(self.server.data, "admin.token"), os.path.join(self.server.data, "no-such-ca.pem"),
                     "/etc/ssl/certs/ca-certificates.crt"):
            r = self.put_delivery(c, {"url": "https://h/", "ca_file": path})
            self.assert_json_error(r, 400)
            self.assertIn("ca_pem", r.json()["error"])
        self.assert_json_error(self.get(c), 404)  # nothing was made

    def test_a_ca_pem_with_no_usable_certificate_is_400(self):
        c = self.conn()
        damaged = "-----BEGIN CERTIFICATE-----\nMIIB*not base64*\n-----END CERTIFICATE-----\n"
        for pem in ("garbage", "-----BEGIN CERTIFICATE-----\n", damaged):
            r = self.put_delivery(c, {"url": "https://h/", "ca_pem": pem})
            self.assert_json_error(r, 400)
            self.assertTrue(r.json()["error"].startswith("ca_pem: "), r)
        self.assert_json_error(self.put_delivery(c, {"url": "https://h/", "ca_pem": "A" * (64 * 1024 + 1)}), 400)

    def test_a_ca_pem_with_an_http_url_is_400(self):
        self.assert_json_error(self.put_delivery(self.conn(), {"url": "http://h/", "ca_pem": "x"}), 400)

    def test_since_that_is_not_a_cursor_is_400(self):
        self.assert_json_error(self.put_delivery(self.conn(), {"url": "http://h/", "since": "nonsense"}), 400)

    def test_since_a_cursor_of_another_directory_is_410_with_the_oldest_cursor(self):
        other = start_server(self.shard_count(), LOOPBACK_RECEIVERS)
        try:
            with other.conn() as oc:
                oc.put(f"/{self.app}/y", b"1")
                foreign = oc.get(f"/_changes/{self.app}").json()["last_cursor"]
        finally:
            other.stop_and_check()
            other.cleanup()
        r = self.put_delivery(self.conn(), {"url": "http://h/", "since": foreign})
        self.assert_json_error(r, 410)
        self.assertEqual(r.json()["error"], "cursor expired")
        self.assertIn("oldest", r.json())

    def test_a_delivery_of_an_app_that_does_not_exist_is_404(self):
        r = self.put_delivery(self.conn(), {"url": "http://h/"}, app=unique("none"))
        self.assert_json_error(r, 404)

    def test_other_methods_are_405(self):
        c = self.conn()
        self.assert_json_error(c.request("POST", self.target(), bearer(self.admin), b"{}"), 405)
        self.assert_json_error(c.request("PUT", f"/_apps/{self.app}/deliveries/", bearer(self.admin), b"{}"), 405)


class TestDelete(DeliveriesCase):
    def test_delete_is_204_then_the_delivery_is_gone_and_a_second_delete_is_404(self):
        c = self.conn()
        self.create(c)
        self.assertEqual(c.request("DELETE", self.target(), bearer(self.admin)).status, 204)
        self.assert_json_error(self.get(c), 404)
        self.assert_json_error(c.request("DELETE", self.target(), bearer(self.admin)), 404)

    def test_a_deleted_delivery_is_created_again_with_new_secrets(self):
        c = self.conn()
        first = self.create(c)
        self.assertEqual(c.request("DELETE", self.target(), bearer(self.admin)).status, 204)
        second = self.create(c)
        self.assertNotEqual(first["signing_secret"], second["signing_secret"])

    def test_a_deleted_apps_deliveries_go_with_it(self):
        c = self.conn()
        self.create(c)
        self.assertEqual(c.request("DELETE", f"/_apps/{self.app}", bearer(self.admin)).status, 204)
        deadline = time.monotonic() + 10
        while True:
            r = c.request("PUT", f"/_apps/{self.app}", bearer(self.admin), b'{"quota":{}}')
            if r.status != 409 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(r.status, 201, r)
        self.assert_json_error(self.get(c), 404)


class TestScopes(DeliveriesCase):
    # A request refused before its body is read closes its connection: each refused PUT gets its own.
    def test_read_and_write_tokens_are_403(self):
        c = self.conn()
        self.create(c)
        for scope in ("read", "write"):
            tok = self.make_token(c, scope)
            self.assert_json_error(self.get(c, token=tok), 403)
            self.assert_json_error(self.put_delivery(self.conn(), {"url": "http://h/"}, name="x", token=tok), 403)

    def test_the_apps_admin_token_manages_its_deliveries(self):
        c = self.conn()
        tok = self.make_token(c, "admin")
        self.create(c, name="mine", token=tok)
        self.assertEqual(self.get(c, "mine", token=tok).status, 200)
        self.assertEqual(c.request("GET", f"/_apps/{self.app}/deliveries", bearer(tok)).status, 200)
        self.assertEqual(c.request("DELETE", self.target("mine"), bearer(tok)).status, 204)

    def test_another_apps_admin_token_is_403(self):
        c = self.conn()
        other = unique("o")
        self.assertEqual(c.request("PUT", f"/_apps/{other}", bearer(self.admin), b"{}").status, 201)
        tok = self.make_token(c, "admin", app=other)
        self.create(c)
        self.assert_json_error(self.get(c, token=tok), 403)
        self.assert_json_error(c.request("DELETE", self.target(), bearer(tok)), 403)
        self.assert_json_error(self.put_delivery(self.conn(), {"url": "http://h/"}, token=tok), 403)
        self.assertEqual(self.get(c).status, 200)

    def test_no_token_is_401(self):
        r = self.conn().request("GET", self.target(), None)
        self.assert_json_error(r, 401)


class TestPrefixScopedAdmins(DeliveriesCase):
    """SPEC 7: an admin token with a prefix manages only deliveries whose prefix lies within its own."""

    def prefix_admin(self, c, prefix="a/"):
        r = c.request("POST", f"/_apps/{self.app}/tokens", bearer(self.admin),
                      json.dumps({"scope": "admin", "prefix": prefix}).encode())
        self.assertEqual(r.status, 201, r)
        return r.json()["token"]

    def test_a_prefix_admin_gets_403_on_get_put_and_delete_of_a_whole_app_delivery(self):
        c = self.conn()
        self.create(c, {"url": "http://127.0.0.1:9/hook"}, name="whole")
        self.create(c, {"url": "http://127.0.0.1:9/hook", "prefix": "a"}, name="broader")
        adm = self.prefix_admin(c)
        for name in ("whole", "broader"):
            r = c.request("GET", self.target(name), bearer(adm))
            self.assert_json_error(r, 403)
            r = self.put_delivery(c, {"url": "http://127.0.0.1:8999/", "prefix": "a/"}, name, adm)
            self.assert_json_error(r, 403, "PUT")
            r = c.request("DELETE", self.target(name), bearer(adm))
            self.assert_json_error(r, 403, "DELETE")
        info = self.get(c, "whole").json()  # unchanged, still there
        self.assertEqual(info["url"], "http://127.0.0.1:9/hook")

    def test_a_prefix_admin_manages_the_deliveries_within_its_prefix(self):
        c = self.conn()
        adm = self.prefix_admin(c)
        self.create(c, {"url": "http://127.0.0.1:9/hook", "prefix": "a/x/"}, name="mine", token=adm)
        self.assertEqual(c.request("GET", self.target("mine"), bearer(adm)).status, 200)
        self.assertEqual(self.put_delivery(c, {"url": "http://127.0.0.1:9/b", "prefix": "a/"}, "mine", adm).status, 204)
        self.assert_json_error(self.put_delivery(c, {"url": "http://127.0.0.1:9/b", "prefix": ""}, "mine", adm), 403)
        self.assertEqual(c.request("DELETE", self.target("mine"), bearer(adm)).status, 204)

    def test_the_listing_shows_a_prefix_admin_only_the_deliveries_within_its_prefix(self):
        c = self.conn()
        adm = self.prefix_admin(c)
        self.create(c, {"url": "http://127.0.0.1:9/hook"}, name="whole")
        self.create(c, {"url": "http://127.0.0.1:9/hook", "prefix": "a/1"}, name="inside")
        r = c.request("GET", f"/_apps/{self.app}/deliveries/", bearer(adm))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["deliveries"], ["inside"])
        r = c.request("GET", f"/_apps/{self.app}/deliveries/", bearer(self.admin))
        self.assertEqual(r.json()["deliveries"], ["inside", "whole"])


class TestDeliveryLimit(DeliveriesCase):
    """SPEC 7: at most 64 deliveries per app; past them 507 {"error":"limit: deliveries"}."""

    def test_the_65th_delivery_is_507_until_one_is_deleted_and_an_update_still_passes(self):
        c = self.conn()
        for i in range(64):
            self.create(c, name=f"d{i}")
        r = self.put_delivery(c, {"url": "http://127.0.0.1:9/hook"}, "d64")
        self.assertEqual(r.status, 507, r)
        self.assertEqual(r.body, b'{"error":"limit: deliveries"}')
        self.assertEqual(self.put_delivery(c, {"url": "http://127.0.0.1:9/other"}, "d0").status, 204)
        self.assertEqual(c.request("DELETE", self.target("d0"), bearer(self.admin)).status, 204)
        self.create(c, name="d64")
        self.assertEqual(self.put_delivery(c, {"url": "http://127.0.0.1:9/hook"}, "d65").status, 507)


class TestSecretsStayHidden(DeliveriesCase):
    def test_secrets_never_appear_in_the_log_or_the_metrics(self):
        c = self.conn()
        self.create(c, {"url": "https://example.com/", "seal": True})
        self.put_delivery(c, {"url": "https://example.com/", "seal": True})
        pages = [c.request("GET", "/_metrics", bearer(self.admin)).body.decode(),
                 c.request("GET", "/_stats", bearer(self.admin)).body.decode(),
                 c.request("GET", f"/_apps/{self.app}", bearer(self.admin)).body.decode(),
                 self.get(c).body.decode(), self.server.stderr()]
        self.assertTrue(self.secrets)
        for secret in self.secrets:
            for page in pages:
                self.assertNotIn(secret, page)


class TestRestart(unittest.TestCase):
    def test_deliveries_survive_a_restart_with_the_same_and_another_shard_count(self):
        first = env_shards()
        owner = start_server(first, ("--auth", "on", *LOOPBACK_RECEIVERS))  # owns the data directory
        servers = [owner]
        try:
            admin = admin_token_of(owner)
            with owner.conn() as c:
                self.assertEqual(c.request("PUT", "/_apps/kept", bearer(admin), b"{}").status, 201)
                r = c.request("PUT", "/_apps/kept/deliveries/hook", bearer(admin),
                              b'{"url":"https://example.com/in","prefix":"p"}')
                self.assertEqual(r.status, 201, r)
                secret = r.json()["signing_secret"]
                before = c.request("GET", "/_apps/kept/deliveries/hook", bearer(admin)).json()
            self.assertEqual(owner.stop(), 0)
            for shards in (first, 3 if first == 1 else 1):
                srv = start_server(shards, ("--auth", "on", *LOOPBACK_RECEIVERS), data=owner.data)
                servers.append(srv)
                with srv.conn() as c:
                    r = c.request("GET", "/_apps/kept/deliveries/hook", bearer(admin))
                    self.assertEqual(r.status, 200, r)
                    self.assertEqual(r.json()["url"], before["url"])
                    self.assertEqual(r.json()["state"], "active")
                    again = c.request("PUT", "/_apps/kept/deliveries/hook", bearer(admin),
                                      b'{"url":"https://example.com/in"}')
                    self.assertEqual(again.status, 204, again)
                self.assertNotIn(secret, srv.stderr())
                self.assertEqual(srv.stop(), 0)
        finally:
            for srv in reversed(servers):
                srv.cleanup()


if __name__ == "__main__":
    unittest.main()

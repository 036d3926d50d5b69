"""SPEC section 9, "Receivers' addresses" (security review H1): a delivery never connects to a
loopback, private, link-local, shared, unspecified, multicast or broadcast address, nor to an
IPv4-mapped or translated form of one, unless --deliveries-allow admits it. A literal is refused at
PUT (400); a name is checked after each resolution (`localhost` resolves to 127.0.0.1 here): that
try fails with last_error "address not allowed".

Only loopback forms are used, so nothing here ever leaves this machine, even against a binary
without the check (where the refused cases fail: their PUT answers 201 and the batch arrives)."""

import base64
import json
import unittest

from percore_client import ServerTestCase, start_server, unique, wait_until
from webhook_receiver import Receiver

SCALE = {"PERCORE_TEST_DELIVERY_TIME_SCALE": "0.01"}  # retries 100 times sooner
# 0.0.0.0 is "this host" to connect(): Linux connects it to loopback, so it needs an entry of its own
ALLOW = ("--deliveries-allow", "127.0.0.0/8,::1/128,0.0.0.0/32")


def keys_received(receiver):
    return {ch["key"] for rec in receiver.requests()
            for ch in json.loads(base64.b64decode(rec["body_base64"]))["changes"]}


def literal_urls(port):
    """The loopback forms a URL can name literally, each reaching a receiver on 127.0.0.1 or ::1."""
    return {
        "127.0.0.1": f"http://127.0.0.1:{port}/hook",
        "0.0.0.0": f"http://0.0.0.0:{port}/hook",
        "::ffff:127.0.0.1": f"http://[::ffff:127.0.0.1]:{port}/hook",
    }


class AddressCase(ServerTestCase):
    ARGS: tuple = ()

    @classmethod
    def setUpClass(cls):
        unittest.TestCase.setUpClass()
        cls.server = start_server(cls.shard_count(), cls.ARGS, env=SCALE)

    def setUp(self):
        super().setUp()
        self.c = self.conn()
        self.assertEqual(self.c.put(f"/{self.app}/_first", b"0").status, 201)  # --auth off: makes the app

    def receiver(self, host="127.0.0.1"):
        r = Receiver(host=host)
        self.addCleanup(r.stop)
        return r

    def put_delivery(self, url, name="hook"):
        body = json.dumps({"url": url}).encode()
        return self.c.request("PUT", f"/_apps/{self.app}/deliveries/{name}", None, body)

    def info(self, name="hook"):
        r = self.conn().request("GET", f"/_apps/{self.app}/deliveries/{name}")
        self.assertEqual(r.status, 200, r)
        return r.json()

    def write(self, key="k", value=b"v"):
        self.assertIn(self.c.put(f"/{self.app}/{key}", value).status, (201, 204))

    def assert_refused_at_put(self, url):
        r = self.put_delivery(url)
        self.assertEqual(r.status, 400, f"{url}: {r}")
        self.assertIn("address not allowed", r.json()["error"], url)


class TestRefusedByDefault(AddressCase):
    def test_loopback_literals_are_400_at_put(self):
        receiver = self.receiver()
        urls = [*literal_urls(receiver.port).values(), f"http://127.9.9.9:{receiver.port}/hook",
                f"http://[::1]:{receiver.port}/hook", f"http://[::ffff:7f00:1]:{receiver.port}/hook"]
        for url in urls:
            with self.subTest(url=url):
                self.assert_refused_at_put(url)
        self.assertEqual(self.conn().request("GET", f"/_apps/{self.app}/deliveries/hook").status, 404)
        self.write()
        self.assertEqual(receiver.requests(), [])

    def test_an_update_to_a_loopback_literal_is_400_too(self):
        receiver = self.receiver()
        self.assertEqual(self.put_delivery(f"http://localhost:{receiver.port}/hook").status, 201)
        self.assert_refused_at_put(f"http://127.0.0.1:{receiver.port}/hook")
        self.assertTrue(self.info()["url"].startswith("http://localhost:"))

    def test_a_name_resolving_to_loopback_fails_each_try_with_address_not_allowed(self):
        receiver = self.receiver()
        self.assertEqual(self.put_delivery(f"http://localhost:{receiver.port}/hook").status, 201)
        self.write()
        wait_until(lambda: self.info()["last_error"] == "address not allowed", what="last_error 'address not allowed'")
        info = self.info()
        self.assertEqual(info["state"], "retrying")
        wait_until(lambda: self.info()["attempts"] >= 2, what="a second refused try (resolved again)")
        self.assertEqual(self.info()["last_error"], "address not allowed")
        self.assertEqual(receiver.requests(), [])


class TestAdmittedByTheAllowList(AddressCase):
    ARGS = ALLOW

    def delivered(self, url, receiver, name):
        r = self.put_delivery(url, name)
        self.assertEqual(r.status, 201, f"{url}: {r}")
        self.write(f"k{name}", url.encode())
        wait_until(lambda: f"k{name}" in keys_received(receiver), what=f"the batch sent to {url}")
        wait_until(lambda: self.info(name)["lag"]["changes"] == 0, what=f"{url}: lag 0")
        self.assertIsNone(self.info(name)["last_error"], url)
        self.assertEqual(self.c.request("DELETE", f"/_apps/{self.app}/deliveries/{name}").status, 204)

    def test_loopback_literals_and_names_are_delivered(self):
        v4 = self.receiver()
        for i, url in enumerate([*literal_urls(v4.port).values(), f"http://localhost:{v4.port}/hook"]):
            with self.subTest(url=url):
                self.delivered(url, v4, f"v4n{i}")
        other = self.receiver(host="127.9.9.9")
        self.delivered(f"http://127.9.9.9:{other.port}/hook", other, "other")
        v6 = self.receiver(host="::1")
        self.delivered(f"http://[::1]:{v6.port}/hook", v6, "v6")


if __name__ == "__main__":
    unittest.main()

"""SPEC section 7 (security review M6): with auth off (loopback), only requests that name this
machine are served — a web page in a browser on the board cannot reach the server through DNS
rebinding. A Host that is not localhost or a loopback address, or an Origin that is not, gets 403
{"error":"host not allowed"}; with auth on, Host is not checked. Every request goes to 127.0.0.1:
only the Host and Origin fields name other places.
"""

import os
import unittest

from percore_client import ServerTestCase, unique

REBIND_HOST = "rebind.attacker.example"


def raw(conn, method, target, host, extra=None, body=None):
    """A request with exactly this Host (and the extra fields)."""
    fields = {"Host": host, **(extra or {})}
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    if body is not None:
        head += f"Content-Length: {len(body)}\r\n"
    conn.send(head.encode() + b"\r\n" + (body or b""))
    return conn.read_final(method)


class TestAuthOffOnLoopback(ServerTestCase):
    """The defaults: --listen 127.0.0.1, --auth auto, so auth is off."""

    def test_a_rebinding_host_cannot_download_the_backup(self):
        with self.server.conn() as c:
            r = raw(c, "GET", "/_backup", REBIND_HOST)
            self.assertEqual(r.status, 403, r)
            self.assertEqual(r.json(), {"error": "host not allowed"})
            r = raw(c, "GET", "/_backup", f"{REBIND_HOST}:{self.server.port}")
            self.assertEqual(r.status, 403, r)

    def test_a_rebinding_host_can_neither_write_nor_administer(self):
        app = unique("a")
        for method, target, body in [("PUT", f"/{app}/k", b"v"), ("PUT", f"/_apps/{app}", b"{}"),
                                     ("POST", f"/_apps/{app}/tokens", b'{"scope":"admin"}'),
                                     ("PUT", f"/_apps/{app}/deliveries/d", b'{"url":"http://127.0.0.1:9/"}'),
                                     ("GET", f"/{app}/k", None), ("GET", "/_metrics", None)]:
            with self.server.conn() as c:  # a refused body may close the connection
                r = raw(c, method, target, REBIND_HOST, body=body)
                self.assertEqual(r.status, 403, f"{method} {target}: {r}")
        with self.server.conn() as c:
            self.assertEqual(raw(c, "GET", f"/{app}/k", "127.0.0.1").status, 404)  # nothing was written

    def test_loopback_hosts_are_served(self):
        app = unique("a")
        with self.server.conn() as c:
            for host in ("127.0.0.1", f"127.0.0.1:{self.server.port}", "localhost", f"localhost:{self.server.port}",
                         "[::1]", f"[::1]:{self.server.port}", "127.1.2.3:1"):
                r = raw(c, "PUT", f"/{app}/k", host, body=host.encode())
                self.assertIn(r.status, (201, 204), f"{host}: {r}")
                self.assertEqual(raw(c, "GET", f"/{app}/k", host).body, host.encode())

    def test_a_foreign_origin_is_refused_even_with_a_loopback_host(self):
        app = unique("a")
        for origin in (f"http://{REBIND_HOST}", "null", f"http://{REBIND_HOST}:{self.server.port}"):
            with self.server.conn() as c:  # a refused body may close the connection
                r = raw(c, "PUT", f"/{app}/k", "127.0.0.1", {"Origin": origin}, b"v")
                self.assertEqual(r.status, 403, f"{origin}: {r}")
                self.assertEqual(r.json(), {"error": "host not allowed"})
        with self.server.conn() as c:
            r = raw(c, "PUT", f"/{app}/k", "127.0.0.1", {"Origin": f"http://localhost:{self.server.port}"}, b"v")
            self.assertEqual(r.status, 201, r)


class TestExplicitAuthOffOnLoopback(ServerTestCase):
    SERVER_ARGS = ("--auth", "off")

    def test_the_host_is_checked_as_with_auth_auto(self):
        with self.server.conn() as c:
            self.assertEqual(raw(c, "GET", "/_backup", REBIND_HOST).status, 403)


class TestAuthOn(ServerTestCase):
    SERVER_ARGS = ("--auth", "on")

    def test_the_host_is_not_checked(self):
        with open(os.path.join(self.server.data, "admin.token")) as f:
            admin = f.read().strip()
        with self.server.conn() as c:
            self.assertEqual(raw(c, "GET", "/_apps/", REBIND_HOST).status, 401)
            r = raw(c, "GET", "/_apps/", REBIND_HOST, {"Authorization": f"Bearer {admin}"})
            self.assertEqual(r.status, 200, r)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Writes the seed corpus of the follower_page fuzz target (tests/fuzz/corpus/follower_page/): real
replication pages of a real primary, fetched as a follower fetches them (GET /_changes/_all with the
server admin token, shards/follower/follower.cpp).

usage: capture_follower_pages.py [PERCORE_BINARY] [OUT_DIR]
       (defaults: build/shards/percore, tests/fuzz/corpus/follower_page)

It starts the binary with auth on and 3 shards, writes documents in two apps (text, JSON, binary,
empty, a UTF-8 key with '/', an overwrite and a delete), creates apps with and without a quota,
tokens (with and without a prefix), a delivery (its record), deletes a token, then saves the feed
from "0" as pages of 4 changes, the whole feed as one page, and the page after the last cursor.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from percore_client import LOOPBACK_RECEIVERS, q, start_server  # noqa: E402


def main() -> int:
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build", "shards", "percore")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "corpus", "follower_page")
    os.environ["PERCORE_BIN"] = os.path.abspath(binary)
    os.makedirs(out, exist_ok=True)
    server = start_server(3, ("--auth", "on") + LOOPBACK_RECEIVERS)
    try:
        with open(os.path.join(server.data, "admin.token")) as f:
            admin = {"Authorization": "Bearer " + f.read().strip()}

        def call(method, target, body=None, headers=None, expect=(200, 201, 204)):
            with server.conn() as c:
                r = c.request(method, target, {**admin, **(headers or {})}, body)
            assert r.status in expect, (method, target, r)
            return r

        call("PUT", "/_apps/notes", json.dumps({"quota": {}}).encode())
        call("PUT", "/_apps/shop", json.dumps({"quota": {"documents": 1000, "bytes": 1 << 20}}).encode())
        token = call("POST", "/_apps/notes/tokens", b'{"scope":"write"}').json()
        call("POST", "/_apps/shop/tokens", b'{"scope":"read","prefix":"orders/","ttl":3600}')
        call("PUT", "/_apps/shop/deliveries/hook", b'{"url":"http://127.0.0.1:9/hook","prefix":"orders/"}')
        call("PUT", "/notes/hello", b"hello, world", {"Content-Type": "text/plain; charset=utf-8"})
        call("PUT", "/notes/" + q("dir/caf\u00e9 \u2603"), b'{"a":1}', {"Content-Type": "application/json"})
        call("PUT", "/notes/empty", b"", {"Content-Type": "application/octet-stream"})
        call("PUT", "/shop/orders/1", bytes(range(256)), {"Content-Type": "application/octet-stream"})
        call("PUT", "/shop/orders/2", b"second", {"Content-Type": "text/plain"})
        call("PUT", "/shop/orders/2", b"second, again", {"Content-Type": "text/plain"})
        call("DELETE", "/notes/empty")
        call("DELETE", f"/_apps/notes/tokens/{token['id']}")

        pages, since = [], "0"
        while True:
            body = call("GET", f"/_changes/_all?since={since}&limit=4").body
            pages.append(body)
            page = json.loads(body)
            since = page["last_cursor"]
            if page["pending"] == 0 or len(pages) > 20:
                break
        whole = call("GET", "/_changes/_all?since=0&limit=1000").body
        call("PUT", "/notes/later", b"after the whole page", {"Content-Type": "text/plain"})
        after = call("GET", f"/_changes/_all?since={json.loads(whole)['last_cursor']}&limit=1000").body
        named = [(f"page_{i + 1}_of_4_changes.json", p) for i, p in enumerate(pages)]
        named += [("whole_feed.json", whole), ("after_the_whole_feed.json", after)]
        for name, body in named:
            with open(os.path.join(out, name), "wb") as f:
                f.write(body)
        print(f"{len(named)} pages written to {out}")
    finally:
        server.stop()
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

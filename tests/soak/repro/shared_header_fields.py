#!/usr/bin/env python3
"""Repro: a PUT whose body arrives after its head is applied with the header fields of a
request that another connection on the same shard parsed meanwhile (Content-Type, If-Match,
If-None-Match). Found by tests/soak/soak.py. Fixed: a waiting request keeps its own copy of its
head (docs/reliability.md). A regression test (meson suite 'regression'): exits 1 when any of the
four symptoms below comes back, 0 otherwise.

usage: shared_header_fields.py [PERCORE_BINARY]      (or $PERCORE_BIN)

Cause (reading the code): connection_pool::fields_ is "parse scratch shared by connections";
request_head::fields is a span into it. A PUT whose body is not complete when its head is parsed
waits in phase::body/phase::chunked; another connection's head parse overwrites fields_; at
dispatch() document_api::write_document reads Content-Type and the preconditions from the
overwritten table. The target and the body are the request's own, so the wrong metadata is
stored durably with the right value and ETag.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
if len(sys.argv) > 1:
    os.environ["PERCORE_BIN"] = os.path.abspath(sys.argv[1])
import percore_client as pc  # noqa: E402

failures = []


def check(ok, what):
    print(("ok:     " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        failures.append(what)


s = pc.start_server(shards=1)
try:
    a, b = s.conn(), s.conn()

    # 1. Content-Type taken from another connection's request
    a.send(b"PUT /app/a HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/a\r\nContent-Length: 4\r\n\r\nAA")
    time.sleep(0.2)
    b.put("/app/c", b"CC", {"Content-Type": "text/from-connection-b"})
    a.send(b"AA")
    r = a.read_final("PUT")
    g = a.get("/app/a")
    check(r.status == 201 and g.header("content-type") == "text/a",
          f"1. PUT /app/a Content-Type: text/a -> {r.status} (want 201); GET: Content-Type "
          f"{g.header('content-type')!r} (want 'text/a')")

    # 2. If-None-Match: * lost: the PUT overwrites an existing document (want 412)
    a.put("/app/k", b"v1")
    a.send(b"PUT /app/k HTTP/1.1\r\nHost: localhost\r\nIf-None-Match: *\r\nContent-Length: 4\r\n\r\nv2")
    time.sleep(0.2)
    b.get("/_health", {"Accept": "*/*", "X-Other": "1"})
    a.send(b"v2")
    r = a.read_final("PUT")
    body = a.get("/app/k").body
    check(r.status == 412 and body == b"v1",
          f"2. PUT If-None-Match: * on an existing document -> {r.status} (want 412); "
          f"GET now: {body!r} (want b'v1')")

    # 3. an unconditional PUT refused with 412 (it got b's If-Match)
    a.send(b"PUT /app/k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\nv3")
    time.sleep(0.2)
    b.get("/app/other", {"If-Match": '"0000000000000001"'})
    a.send(b"v3")
    r = a.read_final("PUT")
    check(r.status == 204, f"3. PUT without preconditions -> {r.status} (want 204)")

    # 4. the wrong Content-Type is durable
    data = s.data
    s.stop_and_check()
    s2 = pc.start_server(shards=1, data=data)
    try:
        g = s2.conn().get("/app/a")
        check(g.header("content-type") == "text/a",
              f"4. after a restart: GET /app/a Content-Type {g.header('content-type')!r} (want 'text/a')")
        s2.stop_and_check()
    finally:
        s2.cleanup()
finally:
    s.cleanup()

print(f"shared_header_fields: {len(failures)} of 4 checks failed" if failures else
      "shared_header_fields: all 4 checks passed")
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""Repro: six chunked PUTs on one keep-alive connection; the sixth (valid) one is answered
400 {"error":"malformed target"}. Deterministic for this sequence on a fresh 1-shard server;
dropping any earlier request hides it, so it depends on where the bytes lie in the
connection's read buffer (the head's views into the buffer look stale by dispatch time).
Found by tests/soak/soak.py (about 1 in 2000 chunked PUTs under load).

usage: chunked_malformed_target.py [PERCORE_BINARY]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
if len(sys.argv) > 1:
    os.environ["PERCORE_BIN"] = os.path.abspath(sys.argv[1])
import percore_client as pc  # noqa: E402

# (key, body size, where the body is cut into two chunks)
SEQUENCE = [("k1", 100, 53), ("k2", 5000, 1156), ("k3", 20000, 5547), ("k4", 70000, 59446),
            ("k5", 20000, 10410), ("k6", 20000, 8979)]
s = pc.start_server(shards=1)
try:
    c = s.conn()
    for key, size, cut in SEQUENCE:
        body = b"y" * size
        c.send_request("PUT", f"/a/t5{key}", [("Transfer-Encoding", "chunked")],
                       pc.chunked(body[:cut], body[cut:]), length=False)
        r = c.read_final("PUT")
        print(f"PUT /a/t5{key} chunked {size} bytes ({cut} + {size - cut}) -> {r.status} {r.body!r}")
        if r.wants_close:
            c.close()
            c = s.conn()
    s.stop_and_check()
finally:
    s.cleanup()

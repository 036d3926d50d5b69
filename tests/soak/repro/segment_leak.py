#!/usr/bin/env python3
"""Repro: once a shard's first segment is sealed, every write batch leaves a new segment behind
that is never reclaimed. Each stays open (one fd) and on disk, across restarts; disk use grows
faster than linearly (every segment's segment list names all older ones) until the fd limit
breaks the shard (writes 503 "the shard cannot write to its log") and then recovery
("cannot open ... .seg", and the process hangs: recovery_failure_hangs.py).
Found by tests/soak/soak.py.

usage: segment_leak.py [PERCORE_BINARY] [SEGMENT_BYTES (default 64K; 64M = the server's
       default, then use VALUE_BYTES 20000)] [VALUE_BYTES (2000)] [WRITES (20000)]

One connection, one shard, 25 keys overwritten in turn: the live data is 25 values.
"""
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
args = sys.argv[1:]
if args and os.path.sep in args[0]:
    os.environ["PERCORE_BIN"] = os.path.abspath(args.pop(0))
import percore_client as pc  # noqa: E402

seg = args[0] if len(args) > 0 else "64K"
size = int(args[1]) if len(args) > 1 else 2000
writes = int(args[2]) if len(args) > 2 else 20000
env = {"PERCORE_SEGMENT_BYTES": seg}
s = pc.start_server(shards=1, env=env)


def show(n):
    segs, total = glob.glob(s.data + "/layout-*/shard-*/*.seg"), 0
    for x in segs:
        try:
            total += os.path.getsize(x)
        except OSError:
            pass
    print(f"{n:6d} writes: {len(segs):6d} segments, {total // 1024:8d} KiB on disk, "
          f"{len(os.listdir(f'/proc/{s.proc.pid}/fd')):6d} open fds (live data {25 * size // 1024} KiB)")


try:
    c = s.conn()
    for n in range(1, writes + 1):
        r = c.put(f"/a/k{n % 25}", b"v" * size)
        assert r.status in (201, 204), r
        if n % (writes // 5) == 0:
            show(n)
    data = s.data
    s.stop_and_check()
    s2 = pc.start_server(shards=1, data=data, env=env)
    print(f"after a restart: {len(os.listdir(f'/proc/{s2.proc.pid}/fd'))} open fds; "
          f"{s2.stderr().strip().splitlines()[-2]}")
    s2.stop_and_check()
    s2.cleanup()
finally:
    s.cleanup()

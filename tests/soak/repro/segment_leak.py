#!/usr/bin/env python3
"""Repro: once a shard's first segment was sealed, every write batch left a new segment behind
that was never reclaimed. Each stayed open (one fd) and on disk, across restarts; disk use grew
faster than linearly (every segment's segment list names all older ones) until the fd limit
broke the shard (writes 503 "the shard cannot write to its log") and then recovery
("cannot open ... .seg", and the process hung: recovery_failure_hangs.py).
Found by tests/soak/soak.py. Fixed in the store (docs/reliability.md).

A regression test (meson suite 'regression'): exits 1 when, after the writes or after a restart,
the segments, the open fds or the disk use exceed what compaction promises (the soak's bounds:
disk at most 2 x the live data + 3 segments + 4 MiB for one shard; fds at most 8 more than the
idle server's; segments at most that disk bound over the segment size, and at least 16).

usage: segment_leak.py [PERCORE_BINARY] [SEGMENT_BYTES (default 64K; 64M = the server's
       default, then use VALUE_BYTES 20000)] [VALUE_BYTES (2000)] [WRITES (20000)]

One connection, one shard, 25 keys overwritten in turn: the live data is 25 values.
"""
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
args = sys.argv[1:]
if args and os.path.sep in args[0]:
    os.environ["PERCORE_BIN"] = os.path.abspath(args.pop(0))
import percore_client as pc  # noqa: E402

seg = args[0] if len(args) > 0 else "64K"
size = int(args[1]) if len(args) > 1 else 2000
writes = int(args[2]) if len(args) > 2 else 20000
KEYS = 25
env = {"PERCORE_SEGMENT_BYTES": seg}
seg_bytes = int(seg[:-1]) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[seg[-1].upper()] \
    if seg[-1:].isalpha() else int(seg)
live = KEYS * size
disk_bound = 2 * live + 3 * seg_bytes + (4 << 20)
segments_bound = max(16, disk_bound // seg_bytes)
failures = []


def fds(server):
    return len(os.listdir(f"/proc/{server.proc.pid}/fd"))


def measure(server):
    segs, total = glob.glob(server.data + "/layout-*/shard-*/*.seg"), 0
    for x in segs:
        try:
            total += os.path.getsize(x)
        except OSError:
            pass
    return len(segs), total, fds(server)


def check(server, when, idle_fds):
    n, total, open_fds = measure(server)
    print(f"{when}: {n:6d} segments, {total // 1024:8d} KiB on disk, {open_fds:6d} open fds "
          f"(live data {live // 1024} KiB)", flush=True)
    for ok, what in ((n <= segments_bound, f"{n} segments > {segments_bound}"),
                     (total <= disk_bound, f"{total // 1024} KiB on disk > {disk_bound // 1024} KiB"),
                     (open_fds <= idle_fds + 8, f"{open_fds} open fds > {idle_fds} + 8")):
        if not ok:
            print(f"FAILED ({when}): {what}", flush=True)
            failures.append(f"{when}: {what}")


def recovery_line(server, timeout=5.0):
    """The server's 'shard 0 recovered ...' line, found by what it says. (This script used to take
    stderr's second-to-last line, assuming the 'serving ...' line after it was there already; that
    one is written after the ready line, so a fast restart raised IndexError.) Waits, bounded, in
    case a server ever writes the recovery line later."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [x for x in server.stderr().splitlines() if " recovered " in x]
        if lines or time.monotonic() >= deadline:
            return lines[-1] if lines else "(no recovery line on stderr)"
        time.sleep(0.02)


s = pc.start_server(shards=1, env=env)
try:
    idle_fds = fds(s)
    c = s.conn()
    for n in range(1, writes + 1):
        r = c.put(f"/a/k{n % KEYS}", b"v" * size)
        assert r.status in (201, 204), r
        if n % max(1, writes // 5) == 0:
            check(s, f"{n:6d} writes", idle_fds + 1)   # + our connection
    data = s.data
    s.stop_and_check()
    s2 = pc.start_server(shards=1, data=data, env=env)
    try:
        print(f"after a restart: {recovery_line(s2)}")
        check(s2, "after a restart", idle_fds)
        s2.stop_and_check()
    finally:
        s2.cleanup()
finally:
    s.cleanup()

print(f"segment_leak: FAILED: {'; '.join(failures)}" if failures else
      f"segment_leak: {writes} writes, segments, fds and disk stayed bounded")
sys.exit(1 if failures else 0)

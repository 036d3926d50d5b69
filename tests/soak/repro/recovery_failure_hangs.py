#!/usr/bin/env python3
"""Repro: when a shard other than shard 0 refuses to recover (here: a damaged record in a sealed
segment of shard 1; in the soak: EMFILE opening segment N of thousands), percore prints the
right message but never exits: main() waits in shard_group::join() for shard 0, which serves
nothing and sits in idle_wait(); SIGTERM/SIGINT stay blocked. SPEC section 1 wants "a clear
error and exit 1". Found by tests/soak/soak.py (a restart after the segment leak hung).

usage: recovery_failure_hangs.py [PERCORE_BINARY]
"""
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
if len(sys.argv) > 1:
    os.environ["PERCORE_BIN"] = os.path.abspath(sys.argv[1])
import percore_client as pc  # noqa: E402

s = pc.start_server(shards=2, env={"PERCORE_SEGMENT_BYTES": "4K"})
try:
    c = s.conn()
    for i in range(400):
        assert c.put(f"/a/k{i % 40}", b"v" * 300).status in (201, 204)
    s.stop_and_check()
    segs = sorted(glob.glob(s.data + "/layout-*/shard-001/*.seg"))
    seg = max(segs[:-1], key=os.path.getsize)          # a sealed segment, not the newest
    off = os.path.getsize(seg) // 2
    with open(seg, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xff]))
    print(f"flipped one byte at {off} of {seg}")
    p = subprocess.Popen([pc.percore_bin(), "serve", "--listen", "127.0.0.1:0", "--shards", "2",
                          "--data", s.data], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p.wait(timeout=10)
        print(f"exited {p.returncode} (want 1)")
    except subprocess.TimeoutExpired:
        p.send_signal(15)
        try:
            p.wait(timeout=5)
            print("no exit within 10 s; exited after SIGTERM")
        except subprocess.TimeoutExpired:
            print("HUNG: no exit within 10 s, and SIGTERM ignored for 5 s; killing it")
            p.kill()
    _, err = p.communicate()
    print("stderr:", err.decode())
finally:
    s.cleanup()

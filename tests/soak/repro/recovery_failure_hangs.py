#!/usr/bin/env python3
"""Repro: when a shard other than shard 0 refuses to recover (here: a damaged record in a sealed
segment of shard 1; in the soak: EMFILE opening segment N of thousands), percore printed the
right message but never exited: main() waited in shard_group::join() for shard 0, which served
nothing and sat in idle_wait(); SIGTERM/SIGINT stayed blocked. SPEC section 1 wants "a clear
error and exit 1". Found by tests/soak/soak.py (a restart after the segment leak hung). Fixed
(docs/reliability.md). A regression test (meson suite 'regression'): exits 1 unless the server
exits 1 on its own within 10 s and says why on stderr.

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

EXIT_WITHIN_S = 10
failure = None
s = pc.start_server(shards=2, env={"PERCORE_SEGMENT_BYTES": "4K"})
try:
    c = s.conn()
    for i in range(400):
        assert c.put(f"/a/k{i % 40}", b"v" * 300).status in (201, 204)
    s.stop_and_check()
    segs = sorted(glob.glob(s.data + "/layout-*/shard-001/*.seg"))
    assert len(segs) >= 2, f"shard 1 has no sealed segment: {segs}"
    seg = max(segs[:-1], key=os.path.getsize)          # a sealed segment, not the newest
    off = os.path.getsize(seg) // 2
    with open(seg, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0xff]))
    print(f"flipped one byte at {off} of {seg}")
    p = subprocess.Popen([pc.percore_bin(), "serve", "--listen", "127.0.0.1:0", "--shards", "2",
                          "--data", s.data], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=pc.server_env())
    try:
        _, err = p.communicate(timeout=EXIT_WITHIN_S)
        print(f"exited {p.returncode} (want 1)")
        if p.returncode != 1:
            failure = f"exit status {p.returncode}, want 1"
        elif not err.strip():
            failure = "exit 1 without a message on stderr"
    except subprocess.TimeoutExpired:
        p.send_signal(15)
        try:
            p.wait(timeout=5)
            failure = f"no exit within {EXIT_WITHIN_S} s (exited after SIGTERM)"
        except subprocess.TimeoutExpired:
            failure = f"HUNG: no exit within {EXIT_WITHIN_S} s, and SIGTERM ignored for 5 s"
            p.kill()
        _, err = p.communicate()
    print("stderr:", err.decode("utf-8", "replace"))
finally:
    s.cleanup()

print(f"recovery_failure_hangs: FAILED: {failure}" if failure else
      "recovery_failure_hangs: the server refused the damaged segment and exited 1")
sys.exit(1 if failure else 0)

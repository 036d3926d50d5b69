#!/usr/bin/env python3
"""Failover time of a replica group (issue 31, SPEC §12): the topology of
tests/integration/test_failover.py — a three-member etcd (e1..e3), three boards of group g (b1..b3,
`--cluster ... --cluster-ttl TTL`) and HAProxy (px) from docs/deploy/haproxy_config.py, each in its
own network namespace on this machine — with 16 threads writing through HAProxy.

Each cycle: writes acknowledged, then the primary is killed (SIGKILL) or stopped (SIGTERM, a
planned switchover); the figure is the time from the signal to the end of the first write
acknowledged after it, through HAProxy (so it includes etcd's lease expiry, the race, the
follower's promotion and HAProxy's checks). Also per cycle: acknowledged writes the new primary
lacks (async mode without the diverged tar: what a kill loses), and the old board restarted as a
follower before the next cycle. Medians and maxima over the cycles.

Rows (JSON lines with commit, machine and command) go to perf/results/failover/<run id>.jsonl; a summary is
printed. Needs root, etcd and haproxy. Usage:
  perf/failover.py [--cycles 20] [--ttl 6] [--signal kill|term] [--replication async|sync]
                   [--binary build-release/shards/percore]"""
import argparse
import glob
import json
import os
import statistics
import sys
import time

from benchlib import ROOT, commit, machine, new_run_id, rotate, run_file

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import test_failover  # noqa: E402


class Run(test_failover.FailoverCase):
    """FailoverCase's topology and helpers, driven by hand instead of by unittest."""

    def runTest(self):  # unittest needs one method to construct the case
        pass

    def cycle(self, n: int, signal: str) -> dict:
        old = self.primary
        with test_failover.Writers(self, f"perf{n}") as writers:
            test_failover.wait_for(lambda: len(writers.acked()) >= 2 * test_failover.WRITERS, 10.0, "writes before")
            board = self.boards[old]
            if signal == "kill":
                board.kill()
            else:
                board.server.send_signal()
            t0 = time.monotonic()
            first = writers.wait_acked_after(t0, 4 * test_failover.TTL_S + 10, "writes after the signal")
            # a SIGTERMed primary still acknowledges writes while it drains: wait for the new one's
            test_failover.wait_for(lambda: self.acked_by_other(writers, old, t0), 4 * test_failover.TTL_S + 10,
                                   "a write acknowledged by another board after the signal")
        new = self.wait_primary(not_this=old)
        acked = writers.acked()
        by_new = self.acked_by_other(writers, old, t0)
        took = by_new.end - t0
        last_old = max((w.end for w in acked if w.server == old), default=None)
        missing = self.missing_on(new, acked)
        if signal == "term":
            board.server.proc.wait(timeout=10)
        self.boards[old].start()
        self.settle(new)
        self.primary = new
        in_tar = self.in_diverged_tar(old, missing) if missing else 0
        return {"cycle": n, "signal": signal, "from": old, "to": new, "failover_s": round(took, 3),
                "first_ack_any_board_s": round(first.end - t0, 3),
                "old_last_ack_s": None if last_old is None else round(last_old - t0, 3),
                "acknowledged": len(acked), "lost": len(missing), "lost_in_diverged_tar": in_tar}

    @staticmethod
    def acked_by_other(writers, old: str, t0: float):
        """The first write acknowledged (by end time) after t0 by a board other than old, as
        HAProxy's log names it (writes.attribute(); a write its log missed does not count)."""
        try:
            writers.attribute()
        except AssertionError:
            pass   # more than 1% of log lines not there yet: the ones found are used
        got = [w for w in writers.acked() if w.end > t0 and w.server not in (None, "?", old)]
        return min(got, key=lambda w: w.end) if got else None

    def in_diverged_tar(self, old: str, missing: list) -> int:
        """How many of the writes the new primary lacks the returning board keeps in its
        DATA/diverged-*.tar (SPEC §12), restored with `percore restore`."""
        board = self.boards[old]
        try:
            test_failover.wait_for(lambda: glob.glob(os.path.join(board.data, "diverged-*.tar")),
                                   test_failover.SETTLE_TIMEOUT_S, f"{old}'s diverged tar")
        except AssertionError:
            return 0
        held = {}
        for tar in sorted(glob.glob(os.path.join(board.data, "diverged-*.tar"))):
            held.update(test_failover.restored_documents(tar))
        return sum(1 for w in missing if held.get("alpha\0" + w.key) == w.key.encode())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--ttl", type=int, default=6, help="--cluster-ttl (SPEC default 6)")
    ap.add_argument("--signal", choices=("kill", "term"), default="kill")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build-release", "shards", "percore"))
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--replication", choices=("async", "sync"), default="async")
    ap.add_argument("--out", default=None, help="rows to FILE (default: perf/results/failover/<run id>.jsonl, one file per run)")
    args = ap.parse_args()
    os.environ["PERCORE_BIN"] = os.path.abspath(args.binary)
    os.environ["PERCORE_TEST_SHARDS"] = str(args.shards)
    test_failover.TTL_S = args.ttl
    Run.REPLICATION = args.replication
    Run.setUpClass()
    rows = []
    try:
        case = Run()
        case.setUp()
        for n in range(args.cycles):
            row = case.cycle(n, args.signal)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        Run.doClassCleanups()
    times = [r["failover_s"] for r in rows]
    run = new_run_id()
    summary = {"run": run, "what": "failover", "signal": args.signal, "replication": args.replication, "ttl_s": args.ttl,
               "cycles": len(rows),
               "median_s": round(statistics.median(times), 3), "max_s": max(times),
               "lost_total": sum(r["lost"] for r in rows),
               "lost_in_diverged_tar_total": sum(r["lost_in_diverged_tar"] for r in rows),
               "acknowledged_total": sum(r["acknowledged"] for r in rows),
               "commit": commit(), "machine": machine(), "command": " ".join(sys.argv), "rows": rows}
    with open(args.out or run_file("failover", run), "a") as f:
        f.write(json.dumps(summary) + "\n")
    rotate("failover")
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()

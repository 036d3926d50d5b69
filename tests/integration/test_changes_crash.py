"""SPEC section 8 under load and across a crash: resuming the change feed from any cursor a
consumer was handed misses nothing that was acknowledged, and after a SIGKILL shows nothing that
was never written (1 and 3 shards: run_integration.py runs both)."""

import os
import random
import signal
import socket
import tempfile
import threading
import time
import unittest

from percore_client import ConnClosed, Server, build_request, env_shards, q, unique, wait_until

WRITERS = 4
KEYS_PER_WRITER = 50     # 200 keys in all: every shard owns some
# How much each run does before it is stopped (or killed): acknowledged writes, and changes that
# every consumer has had meanwhile, well past the least each test asserts (400 and 200 writes).
RUN_WRITES, RUN_CHANGES_READ = 3000, 1000
KILL_WRITES, KILL_CHANGES_PROCESSED = 2000, 500


def version(etag):
    return int(etag.strip('"'), 16)


class Op:
    """One write as its writer sent it; ack is set when its answer arrived."""

    def __init__(self, key, kind, body, index):
        self.key, self.kind, self.body, self.index = key, kind, body, index
        self.sent = self.ack = None
        self.status = self.etag = None

    def __repr__(self):
        return (f"<Op {self.kind} {self.key!r} #{self.index} status={self.status} etag={self.etag} "
                f"sent={self.sent} ack={self.ack}>")


class Writer(threading.Thread):
    """PUTs, overwrites and DELETEs keys of its own (so each key's history is this writer's send
    order), `depth` requests pipelined at a time, each key at most once per batch. A key is
    deleted only when the acknowledged history says it exists, so every DELETE is a change."""

    def __init__(self, server, app, wid, stop, depth, tolerate_errors=False):
        super().__init__(daemon=True)
        self.server, self.app, self.stop, self.depth = server, app, stop, depth
        self.tolerate = tolerate_errors
        self.keys = [f"w{wid}/k{i:03d}" for i in range(KEYS_PER_WRITER)]
        self.history = {k: [] for k in self.keys}
        self.exists = dict.fromkeys(self.keys, False)
        self.rng = random.Random(wid * 7919 + 1)
        self.error = None
        self.seq = 0
        self.acked = 0       # answers received (read by the test thread while this one runs)

    def run(self):
        try:
            c = self.server.conn()
        except OSError as e:
            self.error = e
            return
        try:
            while not self.stop.is_set():
                ops = []
                for k in self.rng.sample(self.keys, self.depth):
                    self.seq += 1
                    if self.exists[k] and self.rng.random() < 0.3:
                        op = Op(k, "del", None, len(self.history[k]))
                    else:
                        body = (f"{k}#{self.seq}|" * (1 + self.seq % 5)).encode()
                        op = Op(k, "put", body, len(self.history[k]))
                    self.history[k].append(op)
                    ops.append(op)
                wire = b"".join(build_request("PUT" if op.kind == "put" else "DELETE",
                                              f"/{self.app}/{q(op.key)}", None, op.body)
                                for op in ops)
                now = time.monotonic()
                for op in ops:
                    op.sent = now
                c.send(wire)
                for op in ops:
                    r = c.read_final("PUT" if op.kind == "put" else "DELETE", timeout=10)
                    op.ack, op.status, op.etag = time.monotonic(), r.status, r.etag
                    want = (201, 204) if op.kind == "put" else (204,)
                    if r.status not in want or (op.kind == "put" and not op.etag):
                        raise AssertionError(f"{op.kind} {op.key}: unexpected answer {r}")
                    self.exists[op.key] = op.kind == "put"
                    self.acked += 1
        except (OSError, ConnClosed, socket.timeout) as e:
            if not self.tolerate:
                self.error = e
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            self.error = e
        finally:
            c.close()


def get_page(c, app, since, limit=50):
    r = c.get(f"/_changes/{app}?since={q(since)}&feed=normal&limit={limit}")
    if r.status != 200:
        raise AssertionError(f"feed since={since}: {r}")
    doc = r.json()
    return doc, time.monotonic()


def page_to_end(c, app, since, limit=50, max_pages=10000):
    """Every change after `since` in feed order, paging until an empty page."""
    out = []
    for _ in range(max_pages):
        doc, _ = get_page(c, app, since, limit)
        if not doc["changes"]:
            return out
        out += doc["changes"]
        since = doc["last_cursor"]
    raise AssertionError(f"the feed did not end within {max_pages} pages")


class Consumer(threading.Thread):
    """Pages the feed from since=0 with limit=50. Records every change in feed order and every
    cursor with the moment its answer was received and how many changes precede/include it.
    `processed` is the last_cursor of the last page received whole (what a consumer persists)."""

    def __init__(self, server, app, done=None, tolerate_errors=False):
        super().__init__(daemon=True)
        self.server, self.app, self.done, self.tolerate = server, app, done, tolerate_errors
        self.changes = []          # feed order
        self.cursors = []          # (cursor, position: changes up to and including it, received at)
        self.processed = ("0", 0, 0.0)
        self.error = None

    def run(self):
        try:
            c = self.server.conn()
        except OSError as e:
            self.error = e
            return
        since = "0"
        try:
            while True:
                finished = self.done is not None and self.done.is_set()
                doc, at = get_page(c, self.app, since)
                for ch in doc["changes"]:
                    self.changes.append(ch)
                    self.cursors.append((ch["cursor"], len(self.changes), at))
                since = doc["last_cursor"]
                self.cursors.append((since, len(self.changes), at))
                self.processed = (since, len(self.changes), at)
                if finished and not doc["changes"]:
                    return
                if not doc["changes"]:
                    time.sleep(0.01)
        except (OSError, ConnClosed, socket.timeout, ValueError) as e:
            if not self.tolerate:
                self.error = e
        except BaseException as e:  # noqa: BLE001
            self.error = e
        finally:
            c.close()


def matches(ch, op, history):
    """Whether feed entry ch is the change `op` made (a DELETE answers no ETag: its version lies
    between the acknowledged PUTs of the key around it)."""
    if op.kind == "put":
        return (not ch["deleted"] and op.etag is not None and ch["etag"] == op.etag
                and ch["size"] == len(op.body))
    if not ch["deleted"]:
        return False
    v = version(ch["etag"])
    before = [o for o in history[:op.index] if o.etag]
    after = [o for o in history[op.index + 1:] if o.etag]
    return ((not before or v > version(before[-1].etag))
            and (not after or v < version(after[0].etag)))


class ChangeFeedUnderLoadCase(unittest.TestCase):

    def assert_increasing_per_key(self, changes, what):
        last = {}
        for ch in changes:
            v = version(ch["etag"])
            if ch["key"] in last:
                self.assertGreater(v, last[ch["key"]],
                                   f"{what}: {ch['key']!r} went back from {last[ch['key']]:x} to {ch}")
            last[ch["key"]] = v

    def test_resuming_from_every_cursor_of_a_run_under_concurrent_writers_on_all_shards_misses_nothing(self):
        shards = env_shards()
        srv = Server(shards)
        try:
            srv.wait_ready()
            app = unique("l")
            stop, done = threading.Event(), threading.Event()
            writers = [Writer(srv, app, w, stop, depth=4) for w in range(WRITERS)]
            consumer = Consumer(srv, app, done)
            consumer.start()
            for w in writers:
                w.start()
            wait_until(lambda: sum(w.acked for w in writers) >= RUN_WRITES
                       and len(consumer.changes) >= RUN_CHANGES_READ
                       or any(t.error or not t.is_alive() for t in writers + [consumer]),
                       timeout=60, what=f"{RUN_WRITES} writes acknowledged and {RUN_CHANGES_READ} "
                                        f"changes read by the consumer meanwhile")
            stop.set()
            for w in writers:
                w.join(20)
                self.assertFalse(w.is_alive(), "a writer hung")
                self.assertIsNone(w.error, f"writer failed: {w.error!r}")
            done.set()
            consumer.join(20)
            self.assertFalse(consumer.is_alive(), "the consumer hung")
            self.assertIsNone(consumer.error, f"consumer failed: {consumer.error!r}")

            history = {}
            for w in writers:
                history.update(w.history)
            final = {k: h[-1] for k, h in history.items() if h}
            self.assertGreater(sum(len(h) for h in history.values()), 400, "too few writes to mean much")
            run = consumer.changes
            self.assert_increasing_per_key(run, "the consumer's run from since=0")
            # from since=0 the run shows every key's final state
            last_in_run = {ch["key"]: ch for ch in run}
            for k, op in final.items():
                self.assertIn(k, last_in_run, f"run from 0 never showed {k!r}; its last write {op}")
                self.assertTrue(matches(last_in_run[k], op, history[k]),
                                f"run from 0 ends {k!r} with {last_in_run[k]}, its last write is {op}")

            cursors = consumer.cursors
            step = max(1, len(cursors) // 20)
            sample = sorted(set(range(0, len(cursors), step)) | {0, len(cursors) - 1})
            with srv.conn() as c:
                for i in sample:
                    cursor, pos, received = cursors[i]
                    after = page_to_end(c, app, cursor)
                    what = f"resumed from cursor #{i} {cursor}"
                    self.assert_increasing_per_key(after, what)
                    last_after = {ch["key"]: ch for ch in after}
                    before = {}
                    for ch in run[:pos]:
                        before.setdefault(ch["key"], []).append(ch)
                    for k, op in final.items():
                        if op.ack <= received:
                            continue  # acknowledged before the cursor arrived: nothing promised
                        if k in last_after:
                            self.assertTrue(matches(last_after[k], op, history[k]),
                                            f"{what}: {k!r} ends with {last_after[k]}, its last write is {op}")
                            continue
                        # Not after the cursor: allowed only when the write was sent before the
                        # cursor arrived and the cursor already covers it (the feed showed it at
                        # or before the cursor, the acknowledgement merely came later).
                        self.assertLess(op.sent, received,
                                        f"{what}: {k!r} missing; its last write {op} was sent "
                                        f"after the cursor arrived at {received}")
                        self.assertTrue(any(matches(ch, op, history[k]) for ch in before.get(k, [])),
                                        f"{what}: {k!r} missing after the cursor and not before it "
                                        f"either; its last write {op} was acknowledged after the "
                                        f"cursor arrived at {received}")
            srv.stop_and_check(self)
        finally:
            srv.cleanup()

    def test_after_a_sigkill_resuming_from_the_last_cursor_each_consumer_processed_misses_no_acknowledged_change_and_shows_no_change_that_was_never_acknowledged(self):
        shards = env_shards()
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-crash-")
        data = os.path.join(tmp.name, "data")
        srv = Server(shards, data=data)
        again = None
        try:
            srv.wait_ready()
            app = unique("k")
            stop = threading.Event()
            writers = [Writer(srv, app, w, stop, depth=8, tolerate_errors=True) for w in range(WRITERS)]
            consumers = [Consumer(srv, app, tolerate_errors=True) for _ in range(2)]
            for t in writers + consumers:
                t.start()
            # killed in the middle of the run: writes in flight, every consumer part way through
            wait_until(lambda: sum(w.acked for w in writers) >= KILL_WRITES
                       and all(c.processed[1] >= KILL_CHANGES_PROCESSED for c in consumers)
                       or any(t.error or not t.is_alive() for t in writers + consumers),
                       timeout=60, what=f"{KILL_WRITES} writes acknowledged and {KILL_CHANGES_PROCESSED} "
                                        f"changes processed by each consumer")
            srv.send_signal(signal.SIGKILL)
            srv.proc.wait(10)
            stop.set()
            for t in writers + consumers:
                t.join(20)
                self.assertFalse(t.is_alive(), "a client thread hung after the kill")
                self.assertIsNone(t.error, f"client thread failed: {t.error!r}")

            history = {}
            for w in writers:
                history.update(w.history)
            acked = sum(1 for h in history.values() for op in h if op.ack)
            self.assertGreater(acked, 200, "too few acknowledged writes to mean much")

            def classify(ch, what):
                """The op of ch's key that wrote ch; fails for a change nobody wrote."""
                h = history.get(ch["key"])
                self.assertIsNotNone(h, f"{what}: a change of a key nobody wrote: {ch}")
                for op in h:
                    if op.ack and matches(ch, op, h):
                        return op
                for op in h:
                    if op.ack:
                        continue
                    last_ack = [o for o in h[:op.index] if o.etag]
                    newer = not last_ack or version(ch["etag"]) > version(last_ack[-1].etag)
                    if newer and ch["deleted"] == (op.kind == "del") and \
                            (op.kind == "del" or ch["size"] == len(op.body)):
                        return op   # sent, never answered: may or may not have committed
                self.fail(f"{what}: {ch} matches no write that was sent to {ch['key']!r}: {h[-3:]}")

            again = Server(shards, data=data)
            again.wait_ready()
            seen_before_kill = {}   # key -> newest op any consumer saw before the kill
            with again.conn() as c:
                for n, cons in enumerate(consumers):
                    cursor, pos, received = cons.processed
                    prefix = cons.changes[:pos]
                    after = page_to_end(c, app, cursor)
                    what = f"consumer {n} resumed from {cursor}"
                    self.assert_increasing_per_key(prefix + after, what + " (with what it saw before)")
                    for ch in prefix:
                        op = classify(ch, f"consumer {n} before the kill")
                        if op.index >= seen_before_kill.get(op.key, -1):
                            seen_before_kill[op.key] = op.index
                    newest = {}
                    newest_after = {}
                    for ch in prefix + after:
                        op = classify(ch, what)
                        newest[op.key] = max(newest.get(op.key, -1), op.index)
                    for ch in after:
                        op = classify(ch, what)
                        newest_after[op.key] = max(newest_after.get(op.key, -1), op.index)
                    for k, h in history.items():
                        acks = [op for op in h if op.ack]
                        if not acks:
                            continue
                        last = acks[-1]
                        # from since=0 and on across the crash: every key's last acknowledged
                        # write, or a later one that was sent
                        self.assertGreaterEqual(newest.get(k, -1), last.index,
                                                f"{what}: {k!r} never showed its acknowledged {last}")
                        if last.sent > received:
                            self.assertGreaterEqual(
                                newest_after.get(k, -1), last.index,
                                f"{what}: {k!r} missing after the cursor (received at {received}); "
                                f"its acknowledged {last} was sent after it")

                fresh = {ch["key"]: ch for ch in page_to_end(c, app, "0")}
                for k, h in history.items():
                    r = c.get(f"/{app}/{q(k)}")
                    self.assertIn(r.status, (200, 404), r)
                    acks = [op for op in h if op.ack]
                    if r.status == 200:
                        cands = [op for op in h if op.kind == "put" and op.body == r.body]
                        self.assertTrue(cands, f"{k!r} after restart holds {r.body!r}, never written")
                        op = cands[-1]
                        if op.ack:
                            self.assertEqual(r.etag, op.etag, f"{k!r}: {r} vs {op}")
                    else:
                        dels = [op for op in h if op.kind == "del" and (op.ack or op is h[-1])]
                        op = dels[-1] if dels and (not acks or dels[-1].index >= acks[-1].index) else None
                        if op is None:
                            self.assertFalse(acks, f"{k!r} is 404 after restart but its last "
                                                   f"acknowledged write is {acks[-1] if acks else None}")
                            continue
                    if acks:
                        self.assertGreaterEqual(op.index, acks[-1].index,
                                                f"{k!r} after restart is {op}, older than acknowledged {acks[-1]}")
                    self.assertGreaterEqual(op.index, seen_before_kill.get(k, -1),
                                            f"{k!r} after restart is {op}, older than what the feed "
                                            f"showed before the kill: {h[seen_before_kill.get(k, 0)]}")
                    self.assertIn(k, fresh, f"the feed from 0 after restart lacks {k!r} ({op})")
                    self.assertTrue(matches(fresh[k], op, h) if op.ack or op.kind == "del" else
                                    (not fresh[k]["deleted"] and fresh[k]["etag"] == r.etag),
                                    f"the feed from 0 after restart ends {k!r} with {fresh[k]}, "
                                    f"GET says {r} ({op})")
            again.stop_and_check(self)
        finally:
            srv.cleanup()
            if again is not None:
                again.cleanup()
            tmp.cleanup()


if __name__ == "__main__":
    unittest.main()

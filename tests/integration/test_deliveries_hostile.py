"""SPEC section 9: "A dead, slow or hostile receiver never slows writes, reads or other apps", and
deliveries survive a receiver that crashes. A real receiver process on loopback
(webhook_receiver.py) answers app A's delivery with a trickle, an endless body, silence, or not at all
(a refused port), while another app B's durable PUTs and GETs are timed against a baseline measured
the same way in the same test without the delivery. 1 and 3 shards.

The machine these tests run on may be small and shared, so latency is only compared with a baseline
from the same test, with generous bounds. The retry schedule is scaled down per test
(PERCORE_TEST_DELIVERY_TIME_SCALE; the attempt timeout scales too, to at least 100 ms)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from percore_client import LOOPBACK_RECEIVERS, env_shards, sanitized_build, start_server, unique, wait_until
from test_deliveries import batch_of, header
from webhook_receiver import Receiver

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
PAIRS = 200            # sequential PUT+GET pairs of app B per measurement
WARM_PAIRS = 50


def scale_env(scale: str) -> dict:
    return {"PERCORE_TEST_DELIVERY_TIME_SCALE": scale}


def percentile(samples: list[float], q: int) -> float:
    s = sorted(samples)
    return s[max(0, -(-len(s) * q // 100) - 1)]


def summary(samples: list[float]) -> str:
    return (f"median {percentile(samples, 50) * 1e3:.2f} ms, p99 {percentile(samples, 99) * 1e3:.2f} ms, "
            f"max {max(samples) * 1e3:.2f} ms")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def refused_port() -> int:
    """A port nothing listens on: bound, taken, closed."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Writer(threading.Thread):
    """Writes app A's keys one after the other on one keep-alive connection until stopped: a model of
    key -> (last acknowledged value, its etag), every value it sent, and each PUT's (start, latency)."""

    def __init__(self, server, app: str, keys: int = 20, tag: str = "w"):
        super().__init__(daemon=True)
        self.server, self.app, self.keys, self.tag = server, app, keys, tag
        self.stop_event = threading.Event()
        self.model: dict[str, bytes] = {}
        self.sent: set[bytes] = set()
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.count = 0
        self.lock = threading.Lock()

    def run(self):
        try:
            c = self.server.conn(timeout=30)
            i = 0
            while not self.stop_event.is_set():
                key, value = f"k{i % self.keys}", f"{self.tag}{i}".encode()
                with self.lock:
                    self.sent.add(value)
                t0 = time.perf_counter()
                r = c.put(f"/{self.app}/{key}", value)
                dt = time.perf_counter() - t0
                with self.lock:
                    self.samples.append((t0, dt))
                    if r.status in (201, 204):
                        self.model[key] = value
                        self.count += 1
                    else:
                        self.errors.append(f"PUT {key}: {r.status} {r.body[:100]!r}")
                i += 1
            c.close()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(e))

    def latencies_between(self, start: float, end: float) -> list[float]:
        with self.lock:
            return [dt for t0, dt in self.samples if start <= t0 < end]

    def finish(self, testcase: unittest.TestCase):
        self.stop_event.set()
        self.join(40)
        testcase.assertFalse(self.is_alive(), "the writer of app A did not stop")
        testcase.assertEqual(self.errors, [], "app A's writes failed")


class HostileReceiverCase(unittest.TestCase):
    """One server per test (each with the time scale it needs), apps A (delivered) and B (timed)."""

    SCALE = "0.01"

    def setUp(self):
        self.srv = start_server(env_shards(), LOOPBACK_RECEIVERS, env=scale_env(self.SCALE))
        self.addCleanup(self.srv.cleanup)
        self.addCleanup(self.srv.stop_and_check)   # runs first: the server must still exit 0
        self.a, self.b = unique("a"), unique("b")
        self.c = self.srv.conn()
        self.addCleanup(self.c.close)
        for app in (self.a, self.b):
            self.assertEqual(self.c.put(f"/{app}/_first", b"0").status, 201)  # --auth off: makes the app

    def info(self, name="hook"):
        with self.srv.conn() as c:
            r = c.request("GET", f"/_apps/{self.a}/deliveries/{name}")
        self.assertEqual(r.status, 200, r)
        return r.json()

    def create(self, url: str, name="hook", **spec):
        r = self.c.request("PUT", f"/_apps/{self.a}/deliveries/{name}", None,
                           json.dumps({"url": url, **spec}).encode())
        self.assertEqual(r.status, 201, r)

    def measure_b(self, pairs: int = PAIRS) -> list[float]:
        """`pairs` sequential PUT+GET pairs of app B (16 keys: every shard); each pair's latency."""
        out = []
        with self.srv.conn(timeout=30) as c:
            for i in range(pairs):
                path, value = f"/{self.b}/b{i % 16}", b"value %d " % i * 4
                t0 = time.perf_counter()
                put = c.put(path, value)
                get = c.get(path)
                out.append(time.perf_counter() - t0)
                self.assertIn(put.status, (201, 204), put)
                self.assertEqual((get.status, get.body), (200, value), get)
        return out

    def assert_health(self):
        with self.srv.conn() as c:
            r = c.get("/_health")
        self.assertEqual(r.status, 200, r)

    def assert_not_slowed(self, who: str, base: list[float], hostile: list[float]):
        """p99 below max(5 x the baseline's p99, the baseline's p99 + 50 ms), and the slowest below
        max(10 x the baseline's slowest, the baseline's slowest + 2 s): a sequential client meets a
        shard that stalls for a whole attempt (7.5 s in TestSlowReceivers) in one request only, which
        a p99 over 200 would not see."""
        b99, h99 = percentile(base, 99), percentile(hostile, 99)
        self.assertLess(h99, max(5 * b99, b99 + 0.050),
                        f"{who}: p99 {h99 * 1e3:.1f} ms with the hostile receiver, {b99 * 1e3:.1f} ms without")
        bmax, hmax = max(base), max(hostile)
        self.assertLess(hmax, max(10 * bmax, bmax + 2.0),
                        f"{who}: slowest {hmax * 1e3:.1f} ms with the hostile receiver, {bmax * 1e3:.1f} ms without")

    def run_hostile(self, kind: str, url: str, started, during=None, before_create=None):
        """Warms up, starts A's writer, measures B without a delivery, creates the delivery of A to
        `url`, waits for `started()` (the hostile exchange has begun), measures B again; checks B and
        A were not slowed and the server answers /_health. `before_create()` runs just before the
        delivery is created, `during()` right after the second measurement."""
        self.measure_b(WARM_PAIRS)
        writer = Writer(self.srv, self.a)
        writer.start()
        self.addCleanup(writer.stop_event.set)
        wait_until(lambda: writer.count >= 20, what="app A's writer to run")
        t_base = time.perf_counter()
        base = self.measure_b()
        t_base_end = time.perf_counter()
        if before_create:
            before_create()
        self.create(url)
        wait_until(started, timeout=10, what=f"the {kind} receiver's exchange to begin")
        t_hostile = time.perf_counter()
        hostile = self.measure_b()
        t_hostile_end = time.perf_counter()
        if during:
            during()
        a_base = writer.latencies_between(t_base, t_base_end)
        a_hostile = writer.latencies_between(t_hostile, t_hostile_end)
        writer.finish(self)
        print(f"\n  {kind} (shards={env_shards()}): B baseline {summary(base)}; B hostile {summary(hostile)}; "
              f"A's PUTs {len(a_base)} baseline {summary(a_base) if a_base else '-'}, "
              f"{len(a_hostile)} hostile {summary(a_hostile) if a_hostile else '-'}", end="", flush=True)
        self.assert_health()
        self.assert_not_slowed("app B's PUT+GET", base, hostile)
        if len(a_base) >= 20 and len(a_hostile) >= 20:
            self.assert_not_slowed("app A's PUT", a_base, a_hostile)

    def assert_failing(self, want_in_error: tuple[str, ...], timeout: float = 20.0) -> dict:
        info = wait_until(lambda: (lambda i: i if i["last_error"] else None)(self.info()), timeout=timeout,
                          what="a failed attempt in the delivery's state")
        print(f"; delivery: state {info['state']}, lag {info['lag']}, attempts {info['attempts']}, last_status "
              f"{info['last_status']}, last_error {info['last_error']!r}", flush=True)
        self.assertEqual(info["state"], "retrying", info)
        self.assertTrue(any(w in info["last_error"] for w in want_in_error),
                        f"last_error {info['last_error']!r} names none of {want_in_error}")
        self.assertGreater(info["lag"]["changes"], 0, info)
        return info


class TestSlowReceivers(HostileReceiverCase):
    # An attempt may take 7.5 s here (15 s scaled): the hostile exchange is in flight during the
    # whole measurement (checked: no attempt has failed when it ends), then times out.
    SCALE = "0.5"

    def hostile_receiver(self, action: dict) -> Receiver:
        receiver = Receiver()
        self.addCleanup(receiver.stop)
        receiver.script(default=action)
        return receiver

    def check_in_flight_throughout(self, receiver: Receiver):
        def during():
            info = self.info()
            self.assertIsNone(info["last_error"], f"an attempt ended before the measurement did: {info}")
            self.assertEqual(len(receiver.requests()), 1, "one exchange, in flight")
            return info
        return during

    def assert_connection_let_go(self, receiver: Receiver):
        """The timed-out exchange's connection is closed, not kept (the receiver notices within ~1 s)."""
        wait_until(lambda: any(e["event"] == "closed" and e["conn"] == 1 for e in receiver.events()),
                   timeout=5, what="the server to close the timed-out connection")

    def test_a_receiver_that_trickles_its_answer_a_byte_a_second_slows_no_other_app(self):
        receiver = self.hostile_receiver({"status": 200, "trickle": True, "trickle_interval": 1.0})
        self.run_hostile("trickle", receiver.url + "/hook", lambda: receiver.requests(),
                         during=self.check_in_flight_throughout(receiver))
        self.assert_failing(("timed_out",))
        self.assert_connection_let_go(receiver)

    def test_a_receiver_that_never_answers_and_never_closes_slows_no_other_app(self):
        receiver = self.hostile_receiver({"hang": True})
        self.run_hostile("hang", receiver.url + "/hook", lambda: receiver.requests(),
                         during=self.check_in_flight_throughout(receiver))
        self.assert_failing(("timed_out",))
        self.assert_connection_let_go(receiver)


class TestEndlessReceivers(HostileReceiverCase):
    SCALE = "0.01"   # an attempt may take 150 ms; retries after 50 ms, 3 s, 18 s

    def endless(self, framing: str):
        receiver = Receiver()
        self.addCleanup(receiver.stop)
        receiver.script(default={"status": 200, "huge": True, "huge_framing": framing})
        pid = self.srv.proc.pid
        samples = {"before": 0, "peak": 0}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    samples["peak"] = max(samples["peak"], rss_kib(pid))
                except (OSError, AssertionError):
                    return
                time.sleep(0.002)   # the sampling period of the RSS sampler

        sampler = threading.Thread(target=sample, daemon=True)

        def before_create():
            # RSS from just before the delivery exists: the warm-up, the writer and the baseline count in it
            samples["before"] = samples["peak"] = rss_kib(pid)
            sampler.start()

        def during():
            # three attempts (the third after the 3 s retry), each an endless answer, all sampled:
            # until the server has ended the third (closed its connection)
            third = receiver.wait_for(3, timeout=15)[2]["conn"]
            wait_until(lambda: any(e["event"] == "closed" and e["conn"] == third for e in receiver.events()),
                       timeout=5, what=f"the server to end the third endless answer (connection {third})")
            stop.set()
            sampler.join(5)

        self.run_hostile(f"huge ({framing})", receiver.url + "/hook", lambda: receiver.requests(), during=during,
                         before_create=before_create)
        grew = samples["peak"] - samples["before"]
        print(f"; RSS {samples['before']} KiB before, peak {samples['peak']} KiB (+{grew} KiB) over "
              f"{len(receiver.requests())} endless answers", end="", flush=True)
        self.assert_failing(("too_large", "timed_out"))
        bound = (64 if sanitized_build() else 20) * MiB // 1024
        self.assertLess(grew, bound, f"the server's RSS grew by {grew} KiB while the receiver streamed")
        for conn in {r["conn"] for r in receiver.requests()}:
            wait_until(lambda: any(e["event"] == "closed" and e["conn"] == conn for e in receiver.events()),
                       timeout=5, what=f"the server to close endless connection {conn}")

    def test_a_receiver_that_answers_endlessly_slows_no_other_app_and_costs_bounded_memory(self):
        self.endless("chunked")

    def test_a_receiver_that_announces_a_one_tebibyte_answer_slows_no_other_app_and_costs_bounded_memory(self):
        self.endless("length")


class TestDeadReceiver(HostileReceiverCase):
    SCALE = "0.01"

    def test_a_receiver_whose_port_refuses_connections_slows_no_other_app(self):
        port = refused_port()
        self.run_hostile("dead", f"http://127.0.0.1:{port}/hook", lambda: self.info()["last_error"])
        self.assert_failing(("connect_failed",))


class TestReceiverCrash(unittest.TestCase):
    SCALE = "0.001"   # retries after 5 ms, 300 ms, 1.8 s, 7.2 s: several fit while the receiver is down

    def start_receiver_on(self, port: int, folder: str, name: str):
        record = os.path.join(folder, f"{name}.jsonl")
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "webhook_receiver.py"), "--port", str(port),
                                 "--record", record], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: (proc.poll() is None and proc.send_signal(signal.SIGTERM), proc.wait(10)))
        line = proc.stdout.readline()
        self.assertEqual(line.strip(), f"webhook_receiver listening on http://127.0.0.1:{port}", line)
        return proc, record

    @staticmethod
    def records(path: str) -> list[dict]:
        try:
            with open(path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def test_a_receiver_killed_while_writes_go_on_and_restarted_on_its_port_gets_every_acknowledged_write(self):
        srv = start_server(env_shards(), LOOPBACK_RECEIVERS, env=scale_env(self.SCALE))
        self.addCleanup(srv.cleanup)
        self.addCleanup(srv.stop_and_check)
        folder = tempfile.mkdtemp(prefix="percore-crash-receiver-")
        self.addCleanup(shutil.rmtree, folder, True)
        first = Receiver()
        self.addCleanup(first.stop)
        first.script(default={"status": 200, "delay": 0.02})   # batches in flight when it dies
        port = first.port
        app = unique("a")
        c = srv.conn()
        self.addCleanup(c.close)
        self.assertEqual(c.put(f"/{app}/_first", b"0").status, 201)
        r = c.request("PUT", f"/_apps/{app}/deliveries/hook", None,
                      json.dumps({"url": first.url + "/hook"}).encode())
        self.assertEqual(r.status, 201, r)

        def info():
            with srv.conn() as ic:
                got = ic.request("GET", f"/_apps/{app}/deliveries/hook")
            self.assertEqual(got.status, 200, got)
            return got.json()

        writer = Writer(srv, app, keys=25, tag="v")
        writer.start()
        self.addCleanup(writer.stop_event.set)
        first.wait_for(5, timeout=10)
        first.proc.kill()                       # SIGKILL: no goodbye, a batch may be half answered
        first.proc.wait(10)
        old_records = first.requests()
        acked_before_kill = writer.count
        # (the exchange in flight at the kill may fail first as a closed connection; then refused connects)
        down = wait_until(lambda: (lambda i: i if i["state"] == "retrying" and "connect_failed" in (i["last_error"] or "")
                                   else None)(info()),
                          timeout=10, what="the delivery to fail connecting to the dead receiver")
        print(f"\n  receiver killed after {len(old_records)} requests ({acked_before_kill} writes acknowledged); "
              f"delivery: {down['state']}, attempts {down['attempts']}, last_error {down['last_error']!r}",
              end="", flush=True)
        # Which batches the dead receiver took: the durable cursor is the one after the last batch it
        # answered 2xx; a batch it got after that was never answered and must be sent again, first.
        ids = []
        for rec in old_records:
            if header(rec, "webhook-id") not in ids:
                ids.append(header(rec, "webhook-id"))
        end_cursor = {header(rec, "webhook-id"): batch_of(rec)["cursor"] for rec in old_records}
        taken = [i for i, wid in enumerate(ids) if end_cursor[wid] == down["cursor"]]
        self.assertEqual(len(taken), 1, f"the durable cursor {down['cursor']!r} ends none of the batches "
                                        f"the receiver got: {end_cursor}")
        unanswered = ids[taken[0] + 1:]
        self.assertLessEqual(len(unanswered), 1, f"more than one batch in flight at once: {ids}")
        wait_until(lambda: writer.count >= acked_before_kill + 50, what="writes to go on while it is down")
        _, new_record = self.start_receiver_on(port, folder, "second")
        wait_until(lambda: writer.count >= acked_before_kill + 150 and self.records(new_record),
                   timeout=15, what="more writes, and the restarted receiver's first batch")
        writer.finish(self)
        model, sent = dict(writer.model), set(writer.sent)

        def caught_up():
            seen = {}
            for rec in old_records + self.records(new_record):
                for ch in batch_of(rec)["changes"]:
                    seen[ch["key"]] = None if ch["deleted"] else base64.b64decode(ch["value_base64"])
            return all(seen.get(k) == v for k, v in model.items())
        wait_until(caught_up, timeout=20, what="the restarted receiver to hold every acknowledged write")
        new_records = self.records(new_record)
        print(f"; restarted receiver got {len(new_records)} batches, {writer.count} writes in all; "
              f"the batch in flight at the kill {'was answered' if not unanswered else 'is sent again'}", flush=True)
        first_id = header(new_records[0], "webhook-id")
        if unanswered:
            self.assertEqual(first_id, unanswered[0], "the batch the dead receiver never answered was not sent first")
            # the same webhook-id is the same batch: a receiver that deduplicates by id loses nothing
            self.assertEqual(new_records[0]["body_base64"], old_records[-1]["body_base64"],
                             "the batch sent again under the same webhook-id has another body")
        else:
            self.assertNotIn(first_id, ids, "a batch the dead receiver answered 2xx was sent again")
        # per key, the versions arrive in commit order: across the crash as well
        per_key: dict[str, list[int]] = {}
        for rec in old_records + new_records:
            for ch in batch_of(rec)["changes"]:
                per_key.setdefault(ch["key"], []).append(int(ch["etag"].strip('"'), 16))
                if not ch["deleted"]:
                    self.assertIn(base64.b64decode(ch["value_base64"]), sent | {b"0"}, "a value never written")
        for key, versions in per_key.items():
            self.assertEqual(versions, sorted(versions), f"{key}: versions out of commit order {versions}")
        final = wait_until(lambda: (lambda i: i if i["state"] == "active" and i["lag"]["changes"] == 0 else None)(info()),
                           timeout=10, what="the delivery to be active with no lag")
        self.assertIsNone(final["last_error"], final)


if __name__ == "__main__":
    unittest.main()

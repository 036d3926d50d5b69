"""Shard-per-core behaviour seen from outside: connections spread over shards by
SO_REUSEPORT, keys owned by other shards, one winner among racing conditional
writes, merged list order, read-after-write across connections, restarts with
another shard count (SPEC sections 1, 2 and 3)."""

import os
import random
import tempfile
import threading
import unittest

from percore_client import (ServerTestCase, build_request, q, qv, start_server,
                            env_shards)


def run_threads(n, fn):
    """Run fn(i) in n threads; re-raise the first exception."""
    errors = []

    def wrap(i):
        try:
            fn(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=wrap, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
        if t.is_alive():
            raise AssertionError("worker thread hung")
    if errors:
        raise errors[0]


class TestShards(ServerTestCase):
    """Runs with PERCORE_TEST_SHARDS shards (the meson tests use 1 and 3)."""

    def stats(self, c):
        r = c.get("/_stats")
        self.assertEqual(r.status, 200, r)
        return r.json()["shards"]

    def test_connections_spread_over_shards(self):
        conns = [self.conn() for _ in range(30)]
        for c in conns:
            self.assertEqual(c.get("/_health").status, 200)
        shards = self.stats(conns[0])
        self.assertEqual(len(shards), self.shard_count())
        total = sum(s["connections"] for s in shards)
        self.assertGreaterEqual(total, 30, shards)
        if self.shard_count() > 1:
            busy = sum(1 for s in shards if s["connections"] > 0)
            self.assertGreaterEqual(busy, 2, f"SO_REUSEPORT did not spread 30 connections: "
                                             f"{shards}")

    def test_many_keys_from_many_connections(self):
        nconn, per = 12, 30
        conns = [self.conn(timeout=15) for _ in range(nconn)]
        etags = {}
        lock = threading.Lock()

        def writer(i):
            c = conns[i]
            for j in range(per):
                key = f"w{i:02d}/k{j:03d}"
                r = c.put(self.path(key), f"{i}:{j}".encode(),
                          {"Content-Type": f"text/x-{i}"})
                assert r.status == 201, r
                with lock:
                    etags[key] = r.etag

        run_threads(nconn, writer)
        self.assertEqual(len(etags), nconn * per)
        keys = sorted(etags)

        def reader(i):
            c = conns[i]
            # all reads pipelined in one send per connection
            c.send(b"".join(build_request("GET", self.path(k)) for k in keys))
            for k in keys:
                r = c.read_final()
                wi, wj = k[1:3], k[5:8]
                assert r.status == 200, (k, r)
                assert r.body == f"{int(wi)}:{int(wj)}".encode(), (k, r)
                assert r.etag == etags[k], (k, r.etag, etags[k])
                assert r.header("content-type") == f"text/x-{int(wi)}", (k, r)

        run_threads(nconn, reader)
        # documents are spread over the shards
        shards = self.stats(conns[0])
        total = sum(s["documents"] for s in shards)
        self.assertGreaterEqual(total, nconn * per)
        if self.shard_count() > 1:
            self.assertGreaterEqual(sum(1 for s in shards if s["documents"] > 0), 2, shards)
        # and the list sees all of them, in order, with the same etags and sizes
        got, after = [], None
        c = conns[0]
        while True:
            target = f"/{self.app}/?limit=50" + (f"&after={qv(after)}" if after else "")
            r = c.get(target)
            self.assertEqual(r.status, 200, r)
            doc = r.json()
            got += doc["keys"]
            if doc["next"] is None:
                break
            self.assertEqual(len(doc["keys"]), 50)
            after = doc["next"]
        self.assertEqual([e["key"] for e in got], keys)
        for e in got:
            self.assertEqual(e["etag"], etags[e["key"]])
            self.assertEqual(e["size"], len(f"{int(e['key'][1:3])}:{int(e['key'][5:8])}"))

    def test_if_match_race_one_winner(self):
        n = 8
        for rnd in range(5):
            key = f"race{rnd}"
            setup = self.conn()
            r = setup.put(self.path(key), b"initial")
            self.assertEqual(r.status, 201)
            etag = r.etag
            conns = [self.conn(timeout=15) for _ in range(n)]
            for c in conns:      # make sure every connection is accepted
                assert c.get("/_health").status == 200
            barrier = threading.Barrier(n)
            results = [None] * n

            def racer(i):
                c = conns[i]
                req = build_request("PUT", self.path(key), {"If-Match": etag},
                                    b"winner-%d" % i)
                barrier.wait(timeout=10)
                c.send(req)
                results[i] = c.read_final()

            run_threads(n, racer)
            ok = [i for i, r in enumerate(results) if 200 <= r.status < 300]
            self.assertEqual(len(ok), 1, f"round {rnd}: statuses {[r.status for r in results]}")
            for i, r in enumerate(results):
                if i not in ok:
                    self.assertEqual(r.status, 412, r)
                    self.assertEqual(r.etag, results[ok[0]].etag,
                                     "412 carries the current (the winner's) ETag")
            self.assertEqual(results[ok[0]].status, 204)
            g = setup.get(self.path(key))
            self.assertEqual(g.body, b"winner-%d" % ok[0])
            self.assertEqual(g.etag, results[ok[0]].etag)

    def test_if_none_match_star_race_one_creator(self):
        n = 8
        for rnd in range(5):
            key = f"create{rnd}"
            conns = [self.conn(timeout=15) for _ in range(n)]
            for c in conns:
                assert c.get("/_health").status == 200
            barrier = threading.Barrier(n)
            results = [None] * n

            def racer(i):
                req = build_request("PUT", self.path(key), {"If-None-Match": "*"}, b"c%d" % i)
                barrier.wait(timeout=10)
                conns[i].send(req)
                results[i] = conns[i].read_final()

            run_threads(n, racer)
            statuses = sorted(r.status for r in results)
            self.assertEqual(statuses, [201] + [412] * (n - 1), f"round {rnd}")
            winner = [i for i, r in enumerate(results) if r.status == 201][0]
            self.assertEqual(conns[0].get(self.path(key)).body, b"c%d" % winner)

    def test_unconditional_race_last_writer_consistent(self):
        """Racing unconditional PUTs: all succeed, and the stored version is one of
        them, whole, with its own ETag."""
        n = 8
        conns = [self.conn(timeout=15) for _ in range(n)]
        results = [None] * n
        barrier = threading.Barrier(n)
        bodies = [bytes([65 + i]) * (1000 + i) for i in range(n)]

        def racer(i):
            barrier.wait(timeout=10)
            results[i] = conns[i].put(self.path("free"), bodies[i])

        run_threads(n, racer)
        self.assertEqual(sorted(r.status for r in results), [201] + [204] * (n - 1))
        self.assertEqual(len({r.etag for r in results}), n)
        g = conns[0].get(self.path("free"))
        i = bodies.index(g.body)
        self.assertEqual(g.etag, results[i].etag)

    def test_list_merge_order(self):
        rnd = random.Random(1234)
        alphabet = "aAzZ09-_/~ é日😀"
        keys = set()
        while len(keys) < 150:
            keys.add("".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 6))))
        keys = list(keys)
        conns = [self.conn(timeout=15) for _ in range(6)]

        def writer(i):
            for k in keys[i::6]:
                r = conns[i].put(self.path(k), k.encode("utf-8"))
                assert r.status == 201, (k, r)

        run_threads(6, writer)
        want = sorted(keys, key=lambda k: k.encode("utf-8"))
        for limit in (7, 150, 1000):
            with self.subTest(limit=limit):
                got, after, pages = [], None, 0
                while True:
                    target = f"/{self.app}/?limit={limit}" + (
                        f"&after={qv(after)}" if after is not None else "")
                    doc = conns[pages % 6].get(target).json()
                    pages += 1
                    got += [e["key"] for e in doc["keys"]]
                    if doc["next"] is None:
                        break
                    self.assertEqual(len(doc["keys"]), limit)
                    after = doc["next"]
                self.assertEqual(got, want)
        # prefix pages across shards
        pre = "a"
        got, after = [], None
        while True:
            target = f"/{self.app}/?limit=3&prefix={qv(pre)}" + (
                f"&after={qv(after)}" if after is not None else "")
            doc = conns[1].get(target).json()
            got += [e["key"] for e in doc["keys"]]
            if doc["next"] is None:
                break
            self.assertEqual(len(doc["keys"]), 3)
            after = doc["next"]
        self.assertEqual(got, [k for k in want if k.startswith(pre)])

    def test_read_after_write_across_connections(self):
        writers = [self.conn() for _ in range(3)]
        readers = [self.conn() for _ in range(6)]
        for i in range(60):
            w = writers[i % 3]
            r = w.put(self.path(f"raw{i % 7}"), b"value-%d" % i)
            self.assertIn(r.status, (201, 204))
            for rd in (readers[i % 6], readers[(i + 1) % 6]):
                g = rd.get(self.path(f"raw{i % 7}"))
                self.assertEqual((g.status, g.body, g.etag), (200, b"value-%d" % i, r.etag),
                                 f"iteration {i}: a read after the answer missed the write")
            if i % 10 == 9:
                d = w.delete(self.path(f"raw{i % 7}"))
                self.assertEqual(d.status, 204)
                for rd in readers:
                    self.assertEqual(rd.get(self.path(f"raw{i % 7}")).status, 404)
        # list also sees the latest writes immediately
        r = writers[0].put(self.path("listed-now"), b"x")
        doc = readers[0].get(f"/{self.app}/?prefix=listed").json()
        self.assertEqual([(e["key"], e["etag"]) for e in doc["keys"]], [("listed-now", r.etag)])


class TestRestarts(unittest.TestCase):
    """Acknowledged writes survive restarts, kill -9 and a change of --shards."""

    def test_kill9_keeps_acknowledged_writes(self):
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        self.addCleanup(tmp.cleanup)
        data = os.path.join(tmp.name, "data")
        s = start_server(env_shards(), data=data)
        acked = {}
        lock = threading.Lock()
        try:
            conns = [s.conn(timeout=15) for _ in range(4)]

            def writer(i):
                for j in range(25):
                    r = conns[i].put(f"/k9/w{i}-{j}", b"%d-%d" % (i, j))
                    assert r.status in (201, 204), r
                    with lock:
                        acked[f"w{i}-{j}"] = (b"%d-%d" % (i, j), r.etag)
                d = conns[i].delete(f"/k9/w{i}-0")
                assert d.status == 204, d
                with lock:
                    del acked[f"w{i}-0"]

            run_threads(4, writer)
            s.proc.kill()            # SIGKILL right after the last acknowledgement
            s.proc.wait(timeout=5)
        finally:
            s.cleanup()
        s = start_server(env_shards(), data=data)
        try:
            c = s.conn()
            for k, (body, etag) in acked.items():
                r = c.get(f"/k9/{k}")
                self.assertEqual((r.status, r.body, r.etag), (200, body, etag), k)
            for i in range(4):
                self.assertEqual(c.get(f"/k9/w{i}-0").status, 404, "acknowledged DELETE lost")
            s.stop_and_check(self)
        finally:
            s.cleanup()

    def test_restart_with_other_shard_count(self):
        first = env_shards()
        second = 3 if first == 1 else 1
        tmp = tempfile.TemporaryDirectory(prefix="percore-it-")
        data = os.path.join(tmp.name, "data")
        try:
            s = start_server(first, data=data)
            try:
                c = s.conn()
                etags = {}
                for i in range(60):
                    app = f"app{i % 3}"
                    r = c.put(f"/{app}/key{i}", b"doc-%d" % i, {"Content-Type": "text/plain"})
                    self.assertEqual(r.status, 201)
                    etags[(app, i)] = r.etag
                c.delete("/app0/key0")
                del etags[("app0", 0)]
                c.close()
                s.stop_and_check(self)
            finally:
                s.cleanup()
            s = start_server(second, data=data)
            try:
                c = s.conn()
                self.assertEqual(c.get("/app0/key0").status, 404)
                for (app, i), etag in etags.items():
                    r = c.get(f"/{app}/key{i}")
                    self.assertEqual((r.status, r.body, r.etag, r.header("content-type")),
                                     (200, b"doc-%d" % i, etag, "text/plain"))
                for a in range(3):
                    doc = c.get(f"/app{a}/?limit=1000").json()
                    want = sorted(f"key{i}" for (app, i) in etags if app == f"app{a}")
                    self.assertEqual([e["key"] for e in doc["keys"]], want)
                stats = c.get("/_stats").json()
                self.assertEqual(len(stats["shards"]), second)
                self.assertEqual(sum(x["documents"] for x in stats["shards"]), len(etags))
                r = c.put("/app1/key1", b"new")
                self.assertEqual(r.status, 204)
                self.assertNotIn(r.etag, etags.values())
                c.close()
                s.stop_and_check(self)
            finally:
                s.cleanup()
        finally:
            tmp.cleanup()


if __name__ == "__main__":
    unittest.main()

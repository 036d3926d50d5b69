"""SPEC section 10: read-only followers, with the boards as separate hosts (netns_hosts).

Every class builds its own topology: a primary p (3 shards: writes cross every shard) and a
follower f started with `--follow https://P:8443 --follow-ca-file CA --follow-token-file F` (a
replication token, SPEC 7), each percore in its own
network namespace with auth on (its address is not loopback). The tests write on the primary,
then read what the follower holds, on the follower, byte for byte.
Needs root (network namespaces); without it the tests fail, they do not skip.
"""

import json
import os
import random
import threading
import time
import unittest
import urllib.parse

from netns_hosts import Board, Topology
from percore_client import Response, bearer, wait_until
from test_haproxy import group_spec, load_generator

CONVERGE_TIMEOUT_S = 15.0
POLL_S = 0.05
PRIMARY_SHARDS = 3



def request(board: Board, method: str, target: str, token: str, body: bytes | None = None,
            headers: dict | None = None) -> Response:
    """One request on a fresh connection."""
    with board.conn() as c:
        return c.request(method, target, {**bearer(token), **(headers or {})}, body)


def make_app(board: Board, app: str, quota: dict | None = None) -> str:
    """Creates app on board as its server admin; returns a write token of it."""
    r = request(board, "PUT", f"/_apps/{app}", board.admin_token, json.dumps({"quota": quota or {}}).encode())
    assert r.status == 201, r
    r = request(board, "POST", f"/_apps/{app}/tokens", board.admin_token, b'{"scope":"write"}')
    assert r.status == 201, r
    return r.json()["token"]


def app_contents(board: Board, app: str, token: str) -> dict:
    """key -> (content type, value bytes) of every document of app on board (lists, then GETs)."""
    keys, after = [], None
    while True:
        query = "limit=1000" + (f"&after={urllib.parse.quote(after, safe='')}" if after else "")
        r = request(board, "GET", f"/{app}/?{query}", token)
        assert r.status == 200, r
        page = r.json()
        keys += [e["key"] for e in page["keys"]]
        after = page["next"]
        if after is None:
            break
    out = {}
    with board.conn() as c:
        for key in keys:
            r = c.get(f"/{app}/{urllib.parse.quote(key, safe='')}", bearer(token))
            if r.status == 200:
                out[key] = (r.header("content-type"), r.body)
    return out


def wait_converged(test: unittest.TestCase, primary: Board, follower: Board, app: str, token: str,
                   timeout: float = CONVERGE_TIMEOUT_S) -> dict:
    """Polls until the follower holds exactly what the primary holds (the primary is not written
    meanwhile); returns that content."""
    want = app_contents(primary, app, token)
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = app_contents(follower, app, token)
        except AssertionError as e:  # the app or its token not copied yet: 401
            got = {"(not readable)": str(e)[:200]}
        if got == want:
            return want
        if time.monotonic() > deadline:
            missing = sorted(set(want) - set(got))[:5]
            extra = sorted(set(got) - set(want))[:5]
            differ = sorted(k for k in set(want) & set(got) if want[k] != got[k])[:5]
            test.fail(f"follower not converged in {timeout}s: missing {missing} extra {extra} differ {differ}\n"
                      f"follower log:\n{follower.stderr()[-3000:]}")
        time.sleep(POLL_S)


def health(board: Board) -> dict:
    with board.conn() as c:
        r = c.get("/_health")
    assert r.status == 200, r
    return r.json()


def metric(board: Board, name: str) -> float:
    r = request(board, "GET", "/_metrics", board.admin_token)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /_metrics")


class Writers:
    """Threads writing (and sometimes deleting) keys of one app on the primary until stopped;
    values of 1 B to 200 KiB (some past the store's in-memory size) and a few content types."""

    TYPES = ["application/json", "text/plain; charset=utf-8", "application/octet-stream"]

    def __init__(self, board: Board, app: str, token: str, threads: int = 8, keys: int = 120):
        self.board, self.app, self.token, self.keys = board, app, token, keys
        self.stop_flag = threading.Event()
        self.errors: list[str] = []
        self.writes = 0
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def run(self, seed: int):
        rnd = random.Random(seed)
        with self.board.conn(timeout=10) as c:
            while not self.stop_flag.is_set():
                key = f"k{rnd.randrange(self.keys):04d}"
                if rnd.random() < 0.15:
                    r = c.delete(f"/{self.app}/{key}", bearer(self.token))
                    ok = r.status in (204, 404)
                else:
                    size = rnd.choice([1, 40, 3000, 70_000, 200_000])
                    body = bytes(rnd.getrandbits(8) for _ in range(min(size, 64))) * (size // 64 + 1)
                    r = c.put(f"/{self.app}/{key}", body[:size],
                              {**bearer(self.token), "Content-Type": rnd.choice(self.TYPES)})
                    ok = r.status in (201, 204)
                if not ok:
                    self.errors.append(repr(r))
                    return
                self.writes += 1

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(15)


class FollowerCase(unittest.TestCase):
    """A primary p and a follower f of it."""

    @classmethod
    def setUpClass(cls):
        cls.topo = Topology(["p", "f"])
        try:
            cls.primary = cls.topo.start_percore("p", shards=PRIMARY_SHARDS, args=cls.primary_args(), tls=True)
            cls.follower = cls.topo.start_percore("f", follow=cls.primary)
        except BaseException:
            cls.topo.close()
            raise

    @classmethod
    def primary_args(cls) -> list[str]:
        return []

    @classmethod
    def tearDownClass(cls):
        try:
            for board in (cls.follower, cls.primary):
                if board.running():
                    board.stop()  # SIGTERM: exit 0 within 5 s (SPEC §1; under ASan: no leak)
        finally:
            cls.topo.close()


class TestConvergence(FollowerCase):
    def test_a_follower_converges_byte_for_byte_under_concurrent_writes_across_all_shards(self):
        token = make_app(self.primary, "notes")
        applied = metric(self.follower, "percore_follower_applied_changes_total")
        writers = Writers(self.primary, "notes", token).start()
        # a while of concurrent writes, with the follower copying them meanwhile
        wait_until(lambda: writers.writes >= 1000 and
                   metric(self.follower, "percore_follower_applied_changes_total") >= applied + 300
                   or writers.errors, timeout=30, interval=POLL_S,
                   what="1000 writes on the primary and 300 changes applied by the follower meanwhile")
        writers.stop()
        self.assertEqual(writers.errors, [])
        self.assertGreater(writers.writes, 100)
        want = wait_converged(self, self.primary, self.follower, "notes", token)
        self.assertGreater(len(want), 50)
        h = health(self.follower)
        self.assertEqual(h["role"], "follower")
        self.assertEqual(h["primary"], self.primary.tls_url)
        self.assertEqual(health(self.primary)["role"], "primary")

    def test_a_write_on_a_follower_is_421_naming_the_primary_and_changes_nothing(self):
        token = make_app(self.primary, "guarded")
        wait_converged(self, self.primary, self.follower, "guarded", token)
        for method, target, body in [("PUT", "/guarded/x", b"v"), ("DELETE", "/guarded/x", None),
                                     ("PUT", "/_apps/other", b"{}"), ("POST", "/_apps/guarded/tokens", b"{}")]:
            for who in (token, self.primary.admin_token, self.follower.admin_token):
                r = request(self.follower, method, target, who, body)
                self.assertEqual(r.status, 421, (method, target, r))
                self.assertEqual(r.json(), {"error": "read-only follower", "primary": self.primary.tls_url})
        self.assertEqual(request(self.follower, "GET", "/guarded/x", token).status, 404)
        self.assertEqual(request(self.primary, "GET", "/guarded/x", token).status, 404)


class TestCatalog(FollowerCase):
    def test_tokens_and_quotas_are_copied_and_a_revoked_token_stops_working_on_the_follower(self):
        quota = {"documents": 50, "bytes": 100000, "requests_per_second": 1000}
        write = make_app(self.primary, "shop", quota)
        r = request(self.primary, "POST", "/_apps/shop/tokens", self.primary.admin_token,
                    b'{"scope":"read","prefix":"pub/"}')
        self.assertEqual(r.status, 201, r)
        reader, reader_id = r.json()["token"], r.json()["id"]
        for i in range(5):
            self.assertEqual(request(self.primary, "PUT", f"/shop/pub/{i}", write, b"x" * 10).status, 201)
        wait_converged(self, self.primary, self.follower, "shop", write)
        # the follower's own admin sees the app with the primary's quota and the copied usage
        r = request(self.follower, "GET", "/_apps/shop", self.follower.admin_token)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["quota"], quota)
        self.assertEqual(r.json()["usage"]["documents"], 5)
        self.assertEqual(r.json()["usage"]["bytes"], 50)
        # the primary's tokens work on the follower, with their scope and prefix
        self.assertEqual(request(self.follower, "GET", "/shop/pub/1", reader).body, b"x" * 10)
        self.assertEqual(request(self.follower, "GET", "/shop/other", reader).status, 403)
        self.assertEqual(request(self.follower, "GET", "/shop/pub/1", "pct_0000000000000000_" + "A" * 43).status, 401)
        # revoked on the primary: refused on the follower once copied
        self.assertEqual(request(self.primary, "DELETE", f"/_apps/shop/tokens/{reader_id}",
                                 self.primary.admin_token).status, 204)
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while request(self.follower, "GET", "/shop/pub/1", reader).status != 401:
            self.assertLess(time.monotonic(), deadline, "the revoked token still works on the follower")
            time.sleep(POLL_S)

    def test_a_deleted_app_is_gone_from_the_follower_too(self):
        token = make_app(self.primary, "tmpapp")
        self.assertEqual(request(self.primary, "PUT", "/tmpapp/a", token, b"1").status, 201)
        wait_converged(self, self.primary, self.follower, "tmpapp", token)
        self.assertEqual(request(self.primary, "DELETE", "/_apps/tmpapp", self.primary.admin_token).status, 204)
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while request(self.follower, "GET", "/_apps/tmpapp", self.follower.admin_token).status != 404:
            self.assertLess(time.monotonic(), deadline, "the deleted app is still on the follower")
            time.sleep(POLL_S)
        self.assertEqual(request(self.follower, "GET", "/tmpapp/a", token).status, 401)


class TestRestart(FollowerCase):
    def test_a_killed_follower_resumes_from_its_stored_cursor_without_a_full_copy(self):
        token = make_app(self.primary, "log")
        # its first copy done (a follower killed during a full copy starts it over: follower.hpp)
        wait_converged(self, self.primary, self.follower, "log", token)
        applied = metric(self.follower, "percore_follower_applied_changes_total")
        writers = Writers(self.primary, "log", token, threads=4).start()
        # killed while it copies: it has applied (and stored the cursor after) some of the writes
        wait_until(lambda: metric(self.follower, "percore_follower_applied_changes_total") >= applied + 200
                   or writers.errors, timeout=CONVERGE_TIMEOUT_S, interval=POLL_S,
                   what="the follower to apply 200 of the writes")
        self.follower.kill()
        # and the primary takes more while it is down
        killed_at = writers.writes
        wait_until(lambda: writers.writes >= killed_at + 300 or writers.errors, timeout=CONVERGE_TIMEOUT_S,
                   interval=POLL_S, what="300 writes on the primary while the follower is down")
        writers.stop()
        self.assertEqual(writers.errors, [])
        self.follower.start()
        wait_converged(self, self.primary, self.follower, "log", token)
        self.assertIn("from the stored cursor", self.follower.stderr())
        self.assertEqual(metric(self.follower, "percore_follower_resyncs_total"), 0)


class TestExpiredCursor(FollowerCase):
    @classmethod
    def primary_args(cls):
        return ["--changes-retention", "1"]

    def test_a_follower_whose_cursor_expired_resyncs_and_drops_what_the_primary_deleted(self):
        token = make_app(self.primary, "feed")
        for i in range(20):
            self.assertEqual(request(self.primary, "PUT", f"/feed/k{i}", token, b"v%d" % i).status, 201)
        wait_converged(self, self.primary, self.follower, "feed", token)
        self.follower.stop()
        # the follower's stored cursor is at most this one (it stopped before it was made)
        r = request(self.primary, "GET", "/_changes/_all?since=now", self.primary.admin_token)
        self.assertEqual(r.status, 200, r)
        stopped_at = r.json()["last_cursor"]
        for i in range(10):
            self.assertEqual(request(self.primary, "DELETE", f"/feed/k{i}", token).status, 204)
        self.assertEqual(request(self.primary, "PUT", "/feed/new", token, b"n").status, 201)
        # the 1 s retention must really pass: until the primary's feed floor (raised about once a
        # second) is past the follower's cursor, which it then answers 410
        since = urllib.parse.quote(stopped_at, safe="")
        wait_until(lambda: request(self.primary, "GET", f"/_changes/_all?since={since}&limit=1",
                                   self.primary.admin_token).status == 410,
                   timeout=CONVERGE_TIMEOUT_S, interval=0.1,
                   what="the primary to answer 410 for a cursor from before the follower stopped")
        self.follower.start()
        want = wait_converged(self, self.primary, self.follower, "feed", token)
        self.assertEqual(sorted(want), sorted([f"k{i}" for i in range(10, 20)] + ["new"]))
        self.assertIn("410", self.follower.stderr())
        self.assertEqual(metric(self.follower, "percore_follower_resyncs_total"), 1)


class TestPromotion(FollowerCase):
    def test_a_follower_started_without_follow_is_a_primary_with_what_it_holds(self):
        token = make_app(self.primary, "keep")
        for i in range(10):
            self.assertEqual(request(self.primary, "PUT", f"/keep/k{i}", token, b"v%d" % i).status, 201)
        want = wait_converged(self, self.primary, self.follower, "keep", token)
        self.primary.kill()
        self.follower.promote()
        self.assertEqual(health(self.follower)["role"], "primary")
        self.assertEqual(app_contents(self.follower, "keep", token), want)
        self.assertEqual(request(self.follower, "PUT", "/keep/after", token, b"a").status, 201)
        self.assertEqual(request(self.follower, "GET", "/keep/after", token).body, b"a")


class TestPrimaryLostBehindHAProxy(unittest.TestCase):
    """p (primary of app "shop") and its followers f1, f2, one replica group g behind HAProxy on lb,
    with the shipped configuration (docs/deploy/haproxy_config.py)."""

    CHECK_INTERVAL = "200ms"
    OUT_DEADLINE_S = 10.0

    @classmethod
    def setUpClass(cls):
        cls.topo = Topology(["p", "f1", "f2", "lb"])
        cls.addClassCleanup(cls.topo.close)
        cls.primary = cls.topo.start_percore("p", shards=PRIMARY_SHARDS)
        cls.followers = [cls.topo.start_percore(h, follow=cls.primary) for h in ("f1", "f2")]
        gen = load_generator()
        topology = gen.build_topology(
            groups=[group_spec("g", [cls.primary] + cls.followers)], apps=["shop=g"],
            listen=f"{cls.topo.addr('lb')}:80", check_interval=cls.CHECK_INTERVAL)
        files = gen.render_files(topology)
        cls.lb = cls.topo.start_haproxy("lb", files.pop(gen.CONFIG_NAME), files)
        cls.token = make_app(cls.primary, "shop")  # HAProxy routes the one app "shop"

    @classmethod
    def tearDownClass(cls):
        for board in cls.followers:
            if board.running():
                board.stop()  # SIGTERM: exit 0 within 5 s (SPEC §1; under ASan: no leak)

    def through_lb(self, method, target, token, body=None) -> Response:
        with self.lb.conn(timeout=10) as c:
            return c.request(method, target, bearer(token), body)

    def put_through_lb_once_up(self, key: str, body: bytes, headers: dict | None = None) -> Response:
        """A PUT through HAProxy, sent again until HAProxy has a board for it (its first checks)."""
        deadline = time.monotonic() + CONVERGE_TIMEOUT_S
        while True:
            with self.lb.conn(timeout=10) as c:
                r = c.request("PUT", key, {**bearer(self.token), **(headers or {})}, body)
            if r.status != 503:
                return r
            self.assertLess(time.monotonic(), deadline, "HAProxy never took the write")
            time.sleep(POLL_S)

    def test_a_conditional_write_through_haproxy_with_an_etag_read_from_a_follower(self):
        # SPEC §10 "Same versions on every board" (runs before the primary is lost, by name)
        self.assertEqual(self.put_through_lb_once_up("/shop/cond", b"v1").status, 201)
        follower = self.followers[0]
        wait_until(lambda: request(follower, "GET", "/shop/cond", self.token).body == b"v1",
                   timeout=CONVERGE_TIMEOUT_S, what="the follower holds /shop/cond")
        etag = request(follower, "GET", "/shop/cond", self.token).etag
        r = self.put_through_lb_once_up("/shop/cond", b"v2", {"If-Match": etag})
        self.assertEqual(r.status, 204, r)
        r = self.put_through_lb_once_up("/shop/cond", b"v3", {"If-Match": etag})
        self.assertEqual(r.status, 412, r)
        self.assertEqual(request(self.primary, "GET", "/shop/cond", self.token).body, b"v2")

    def test_the_primary_lost_reads_go_on_from_followers_and_writes_fail_cleanly(self):
        token = self.token
        self.assertEqual(self.put_through_lb_once_up("/shop/a", b"before").status, 201)
        for f in self.followers:
            wait_converged(self, self.primary, f, "shop", token)
        self.primary.kill()
        # HAProxy's checks take the primary out: writes are 503 from HAProxy, never a follower's
        deadline = time.monotonic() + self.OUT_DEADLINE_S
        while True:
            r = self.through_lb("PUT", "/shop/b", token, b"during")
            if r.status == 503:
                break
            self.assertLess(time.monotonic(), deadline, f"writes still not refused: {r}")
            time.sleep(POLL_S)
        self.assertEqual(r.json(), {"error": "no board available for this app"})
        # reads go on, from the followers, for as long as the primary is away (once they notice
        # it is gone they are no replicas copying it: HAProxy's stale_g serves them then)
        for _ in range(10):
            r = self.through_lb("GET", "/shop/a", token)
            self.assertEqual((r.status, r.body), (200, b"before"), r)
        # no write landed on a follower: neither the refused one nor one sent to it directly
        for f in self.followers:
            self.assertEqual(request(f, "PUT", "/shop/c", token, b"direct").status, 421)
            self.assertEqual(request(f, "GET", "/shop/b", token).status, 404)
            self.assertEqual(request(f, "GET", "/shop/c", token).status, 404)
            self.assertEqual(health(f)["role"], "follower")


if __name__ == "__main__":
    unittest.main()

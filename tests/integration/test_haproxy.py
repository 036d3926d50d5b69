"""SPEC sections 10 and 12: replica groups behind HAProxy, with the shipped configuration.

Each test class builds its own topology (netns_hosts): boards as network namespaces, each running
percore with auth on (its listen address is not loopback), and lb running HAProxy 2.6 with the
config that docs/deploy/haproxy_config.py generates. The first classes have two groups of one
board each (app alpha on p1, beta on p2); the replica-group classes have one group of a primary
and its followers, where HAProxy finds the primary by its /_health/primary check alone.
The tests talk to lb as a client would, then look at what each board holds, on the board itself,
and at which server HAProxy's log says answered. Needs root (network namespaces) and haproxy;
without them the tests fail, they do not skip.
"""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import unittest

from netns_hosts import Board, Topology, haproxy_bin
from percore_client import REPO, Response, bearer

DEPLOY = os.path.join(REPO, "docs", "deploy")
GENERATOR = os.path.join(DEPLOY, "haproxy_config.py")
LB_PORT = 80
CHECK_INTERVAL = "200ms"   # out 2 checks after a board dies (~0.25 s): fast for tests, cheap to run
OUTAGE_DEADLINE_S = 10.0   # a killed primary must be out well within this (50 check intervals)
CONVERGE_TIMEOUT_S = 15.0  # a follower copies what its primary holds
POLL_S = 0.05
APPS = {"alpha": "p1", "beta": "p2"}   # app -> its group, of one board of the same name
# HAProxy's line when a check changes a server's state, on its log (stdout and stderr with -db)
SERVER_STATE_RE = re.compile(r"Server (?P<server>[^/\s]+/[^\s,]+) is (?P<state>UP|DOWN)\b")


def load_generator():
    """docs/deploy/haproxy_config.py as a module (it is not on sys.path); loaded once."""
    if "haproxy_config" not in sys.modules:
        spec = importlib.util.spec_from_file_location("haproxy_config", GENERATOR)
        module = importlib.util.module_from_spec(spec)
        sys.modules["haproxy_config"] = module   # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["haproxy_config"]



def group_spec(name: str, boards: list[Board]) -> str:
    """The generator's --group NAME=BOARD@HOST:PORT,... of these boards (named by their hosts)."""
    return f"{name}=" + ",".join(f"{b.host}@{b.ip}:{b.port}" for b in boards)


def server_state(lb, server: str) -> str:
    """'UP' or 'DOWN': the state of BACKEND/SERVER by the last check line of HAProxy's log about
    it ('UP', as HAProxy starts every server, when there is none)."""
    states = [m.group("state") for m in SERVER_STATE_RE.finditer(lb.log()) if m.group("server") == server]
    return states[-1] if states else "UP"


def answered_by(lb, method: str, path: str) -> list[str]:
    """BACKEND/SERVER of every request 'METHOD PATH' in HAProxy's log (httplog: one line each,
    'CLIENT [DATE] FRONTEND BACKEND/SERVER TIMERS STATUS ... "METHOD PATH HTTP/1.1"')."""
    request_line = f'"{method} {path} HTTP/1.1"'
    return [line.split("] ", 1)[1].split()[1] for line in lb.log().splitlines()
            if line.endswith(request_line) and "] " in line]


def probe(board: Board, target: str):
    """The status of a health probe of board's (no token needed); /_health: its body."""
    with board.conn() as c:
        r = c.get(target)
    return r.body.decode() if target == "/_health" else r.status


def request(conn_factory, method: str, target: str, token: str, body: bytes | None = None) -> Response:
    """One request on a fresh connection (so a connection HAProxy closed cannot fail the next)."""
    with conn_factory() as c:
        return c.request(method, target, bearer(token), body)


def make_app_with_token(board: Board, app: str) -> str:
    """Create app on board as its server admin (SPEC section 7); returns a write token of it."""
    for method, target, body in (("PUT", f"/_apps/{app}", b'{"quota":{}}'),
                                 ("POST", f"/_apps/{app}/tokens", b'{"scope":"write"}')):
        r = request(board.conn, method, target, board.admin_token, body)
        if r.status != 201:
            raise AssertionError(f"{method} {target} on {board.host}: {r}")
    return r.json()["token"]


def wait_until(probe, accept, timeout: float, what: str):
    """Call probe() every POLL_S until accept(result); returns that result, or raises
    AssertionError naming `what` and the last result when timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if accept(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s; last answer {result!r}")
        time.sleep(POLL_S)


def start_generated_haproxy(topo: Topology, groups: list[str], apps: list[str], host: str = "lb"):
    """HAProxy on topo's host (lb) with the generator's config for these --group and --app values."""
    gen = load_generator()
    topology = gen.build_topology(groups=groups, apps=apps, listen=f"{topo.addr(host)}:{LB_PORT}",
                                  check_interval=CHECK_INTERVAL)
    files = gen.render_files(topology)
    return topo.start_haproxy(host, files.pop(gen.CONFIG_NAME), files)


class BoardsCase(unittest.TestCase):
    """Boards of one topology, each stopped cleanly after the class's tests."""

    boards: dict[str, Board]

    @classmethod
    def tearDownClass(cls):
        for board in cls.boards.values():
            if board.running():
                board.stop()           # SIGTERM: exit 0 within 5 s (SPEC section 1)
        super().tearDownClass()


class BoardsBehindHAProxyCase(BoardsCase):
    """Groups p1 (alpha) and p2 (beta), one board each, behind HAProxy on lb. Test classes derive
    from it."""

    topo: Topology
    boards: dict[str, Board]
    tokens: dict[str, str]         # app -> write token

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topo = Topology(["p1", "p2", "lb"])
        cls.addClassCleanup(cls.topo.close)
        cls.boards = {host: cls.topo.start_percore(host) for host in ("p1", "p2")}
        cls.tokens = {app: make_app_with_token(cls.boards[host], app) for app, host in APPS.items()}
        cls.lb = cls.start_haproxy()
        wait_until(lambda: cls.lb_health().status, lambda s: s == 200, OUTAGE_DEADLINE_S,
                   "HAProxy sees every primary up")

    @classmethod
    def start_haproxy(cls):
        return start_generated_haproxy(cls.topo, [group_spec(host, [board]) for host, board in cls.boards.items()],
                                       [f"{app}={host}" for app, host in APPS.items()])

    @classmethod
    def lb_health(cls) -> Response:
        with cls.lb.conn() as c:
            return c.get("/_health")

    def through_lb(self, method: str, target: str, token: str, body: bytes | None = None) -> Response:
        return request(self.lb.conn, method, target, token, body)

    def on_board(self, host: str, method: str, target: str, body: bytes | None = None) -> Response:
        """A request straight to a board, as its server admin."""
        board = self.boards[host]
        return request(board.conn, method, target, board.admin_token, body)

    def assert_json_error(self, r: Response, status: int, text: str | None = None):
        self.assertEqual(r.status, status, f"{r}\nHAProxy log tail: {self.lb.log()[-1500:]}")
        self.assertTrue(r.header("content-type", "").startswith("application/json"), r)
        if text is not None:
            self.assertEqual(r.json().get("error"), text, r)


class TestRoutingByApp(BoardsBehindHAProxyCase):
    def test_each_apps_writes_and_reads_through_haproxy_land_on_its_own_primary_only(self):
        written = {app: {} for app in APPS}    # app -> {key: body}; keys of this test: route-*
        with self.lb.conn() as c:             # one keep-alive connection for both apps' traffic
            for i in range(8):
                for app in APPS:
                    key, body = f"route-{i}", f"{app} {i}".encode()
                    r = c.request("PUT", f"/{app}/{key}", bearer(self.tokens[app]), body)
                    self.assertEqual(r.status, 201, r)
                    written[app][key] = body
            for app in APPS:
                r = c.request("DELETE", f"/{app}/route-0", bearer(self.tokens[app]))
                self.assertEqual(r.status, 204, r)
                del written[app]["route-0"]
                for key, body in written[app].items():
                    r = c.request("GET", f"/{app}/{key}", bearer(self.tokens[app]))
                    self.assertEqual((r.status, r.body), (200, body), r)

        for app, owner in APPS.items():
            other = next(h for h in self.boards if h != owner)
            page = self.on_board(owner, "GET", f"/{app}/?prefix=route-&limit=100")
            self.assertEqual(page.status, 200, page)
            self.assertEqual({k["key"] for k in page.json()["keys"]}, set(written[app]), page)
            # the other board never saw the app: its server admin is told it does not exist
            self.assertEqual(self.on_board(other, "GET", f"/_apps/{app}").status, 404)
            listed = self.on_board(other, "GET", "/_apps/").json()["apps"]
            self.assertEqual(listed, [a for a, h in APPS.items() if h == other], listed)

    def test_app_administration_and_change_feeds_go_to_the_apps_primary(self):
        # each board has its own admin token: one sent to the wrong board would be 401
        for app, host in APPS.items():
            admin = self.boards[host].admin_token
            r = self.through_lb("GET", f"/_apps/{app}", admin)
            self.assertEqual((r.status, r.json()["app"]), (200, app), r)
            r = self.through_lb("POST", f"/_apps/{app}/tokens", admin, b'{"scope":"read"}')
            self.assertEqual(r.status, 201, r)
            reader = r.json()["token"]
            self.assertEqual(self.through_lb("PUT", f"/{app}/fed", self.tokens[app], b"x").status, 201)
            r = self.through_lb("GET", f"/_changes/{app}?since=0", reader)
            self.assertEqual(r.status, 200, r)
            self.assertIn("fed", [ch["key"] for ch in r.json()["changes"]], r)

    def test_an_app_no_board_serves_is_refused_by_haproxy_with_404(self):
        for method, body in (("PUT", b"x"), ("GET", None)):
            r = self.through_lb(method, "/gamma/k", self.tokens["alpha"], body)
            self.assert_json_error(r, 404, "no board serves this app")
        for host in self.boards:
            self.assertEqual(self.on_board(host, "GET", "/_apps/gamma").status, 404)

    def test_server_wide_endpoints_are_not_handed_to_an_arbitrary_board(self):
        admin = self.boards["p1"].admin_token
        for target in ("/_metrics", "/_stats", "/_backup", "/_apps/"):
            r = self.through_lb("GET", target, admin)
            self.assert_json_error(r, 404, "server-wide endpoint: ask a board directly")
        r = self.lb_health()
        self.assertEqual((r.status, r.json()), (200, {"status": "ok", "role": "proxy"}), r)


class TestPrimaryLoss(BoardsBehindHAProxyCase):
    def setUp(self):
        """Every test starts with both primaries up and seen up by HAProxy."""
        for board in self.boards.values():
            if not board.running():
                board.restart()
        wait_until(lambda: self.lb_health().status, lambda s: s == 200, OUTAGE_DEADLINE_S,
                   "HAProxy sees every primary up")

    def test_a_killed_primary_turns_its_apps_writes_into_503_and_the_other_app_keeps_working(self):
        alpha, beta = self.tokens["alpha"], self.tokens["beta"]
        self.assertEqual(self.through_lb("PUT", "/alpha/before", alpha, b"acked").status, 201)
        self.boards["p1"].kill()

        # a write sent before the checks notice is refused too, once HAProxy's 2 connect retries
        # (1 s apart) have failed on p1: no other board is ever tried
        r = wait_until(lambda: self.through_lb("PUT", "/alpha/after", alpha, b"lost"),
                       lambda r: r.status != 201, OUTAGE_DEADLINE_S, "alpha's write refused")
        self.assert_json_error(r, 503, "no board available for this app")
        wait_until(lambda: self.lb_health().status, lambda s: s == 503, OUTAGE_DEADLINE_S,
                   "HAProxy's checks take p1 out")
        self.assert_json_error(self.through_lb("PUT", "/alpha/after", alpha, b"lost"), 503)
        self.assert_json_error(self.through_lb("GET", "/alpha/before", alpha), 503)

        self.assertEqual(self.through_lb("PUT", "/beta/during", beta, b"ok").status, 201)
        r = self.through_lb("GET", "/beta/during", beta)
        self.assertEqual((r.status, r.body), (200, b"ok"), r)
        self.assertEqual(self.on_board("p2", "GET", "/_apps/alpha").status, 404,
                         "alpha's refused write went to p2")

    def test_a_restarted_primary_takes_its_apps_writes_again_with_every_acknowledged_one(self):
        alpha = self.tokens["alpha"]
        self.assertEqual(self.through_lb("PUT", "/alpha/kept", alpha, b"durable").status, 201)
        p1 = self.boards["p1"]
        p1.kill()
        wait_until(lambda: self.lb_health().status, lambda s: s == 503, OUTAGE_DEADLINE_S,
                   "HAProxy's checks take p1 out")
        p1.restart()
        r = wait_until(lambda: self.through_lb("PUT", "/alpha/again", alpha, b"back"),
                       lambda r: r.status != 503, OUTAGE_DEADLINE_S, "alpha's writes accepted again")
        self.assertEqual(r.status, 201, r)
        r = self.through_lb("GET", "/alpha/kept", alpha)
        self.assertEqual((r.status, r.body), (200, b"durable"), r)
        self.assertEqual(self.lb_health().status, 200)


class ReplicaGroupCase(BoardsCase):
    """Group g: a1, its primary (serving HTTPS too, for its followers), and the followers of a1
    (HOSTS[1:]), listed alike, behind HAProxy on lb; app alpha lives on g. Test classes derive
    from it."""

    HOSTS = ("a1", "a2", "a3")
    topo: Topology
    boards: dict[str, Board]
    token: str                     # a write token of alpha

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topo = Topology([*cls.HOSTS, "lb"])
        cls.addClassCleanup(cls.topo.close)
        primary = cls.topo.start_percore(cls.HOSTS[0], tls=True)
        cls.token = make_app_with_token(primary, "alpha")
        cls.boards = {primary.host: primary}
        for host in cls.HOSTS[1:]:
            cls.boards[host] = cls.topo.start_percore(host, follow=primary)
        cls.lb = start_generated_haproxy(cls.topo, [group_spec("g", list(cls.boards.values()))], ["alpha=g"])

    def setUp(self):
        """Every test starts with every board running and HAProxy seeing a1 alone as the primary
        and the followers alone as replicas."""
        primary, *followers = self.boards.values()
        restarted = [board for board in followers if not board.running()]
        for board in restarted:
            board.start()              # resumes copying a1 from its stored cursor; its first ask does not wait
        for board in followers:
            wait_until(lambda: probe(board, "/_health/replica?lag=0"), lambda s: s == 200, CONVERGE_TIMEOUT_S,
                       f"{board.host} copies a1 ({probe(board, '/_health')}; log: {board.stderr()[-1500:]})")
        want = {f"primary_g/{primary.host}": "UP", f"reads_g/{primary.host}": "DOWN"}
        for board in followers:
            want |= {f"primary_g/{board.host}": "DOWN", f"reads_g/{board.host}": "UP"}
        self.wait_servers(want)

    def wait_servers(self, want: dict[str, str]):
        """Waits until HAProxy's log gives each BACKEND/SERVER its state in want."""
        wait_until(lambda: {server: server_state(self.lb, server) for server in want},
                   lambda states: states == want, OUTAGE_DEADLINE_S, "HAProxy's checks settle")

    def through_lb(self, method: str, target: str, body: bytes | None = None) -> Response:
        return request(self.lb.conn, method, target, self.token, body)

    def on_board(self, host: str, method: str, target: str, body: bytes | None = None) -> Response:
        """A request straight to a board, with alpha's write token."""
        return request(self.boards[host].conn, method, target, self.token, body)

    def wait_copied(self, host: str, key: str, body: bytes):
        """Waits until board host serves /alpha/key with body."""
        wait_until(lambda: self.on_board(host, "GET", f"/alpha/{key}"), lambda r: (r.status, r.body) == (200, body),
                   CONVERGE_TIMEOUT_S, f"{host} holds /alpha/{key}")

    def wait_answered_by(self, method: str, path: str, count: int) -> list[str]:
        """BACKEND/SERVER of each of the count requests 'METHOD PATH' HAProxy logged (a line is
        written as a request ends, so it may trail the response a little)."""
        return wait_until(lambda: answered_by(self.lb, method, path), lambda got: len(got) >= count,
                          OUTAGE_DEADLINE_S, f"HAProxy logged {count} x {method} {path}")


class TestReplicaGroup(ReplicaGroupCase):
    def test_writes_go_to_the_primary_and_reads_are_answered_by_the_followers(self):
        followers = [f"reads_g/{host}" for host in self.HOSTS[1:]]
        for i in range(6):
            self.assertEqual(self.through_lb("PUT", f"/alpha/split-{i}", b"v%d" % i).status, 201)
        for host in self.HOSTS[1:]:
            self.wait_copied(host, "split-5", b"v5")
        for i in range(6):
            r = self.through_lb("GET", f"/alpha/split-{i}")
            self.assertEqual((r.status, r.body), (200, b"v%d" % i), r)
        readers = []
        for i in range(6):
            self.assertEqual(self.wait_answered_by("PUT", f"/alpha/split-{i}", 1), ["primary_g/a1"])
            readers += self.wait_answered_by("GET", f"/alpha/split-{i}", 1)
        # round-robin over both followers; the primary, a backup of reads_g, answered none
        self.assertEqual(sorted(set(readers)), followers, readers)

    def test_reads_are_answered_by_the_primary_when_every_follower_is_down(self):
        self.assertEqual(self.through_lb("PUT", "/alpha/alone", b"kept").status, 201)
        for host in self.HOSTS[1:]:
            self.boards[host].stop()
        self.wait_servers({f"reads_g/{host}": "DOWN" for host in self.HOSTS[1:]})
        for _ in range(4):
            r = self.through_lb("GET", "/alpha/alone")
            self.assertEqual((r.status, r.body), (200, b"kept"), r)
        self.assertEqual(self.wait_answered_by("GET", "/alpha/alone", 4), ["reads_g/a1.primary"] * 4)


class TestManualPromotion(ReplicaGroupCase):
    """a1 and its follower a2. SPEC section 10's promotion by hand, with HAProxy left alone."""

    HOSTS = ("a1", "a2")
    # A promoted board is in within downinter + fastinter (100 + 50 ms with the tests' 200ms): 3 s
    # leaves room for a loaded machine, and a failure here means the checks do not find it at all.
    PROMOTED_DEADLINE_S = 3.0

    def test_a_follower_promoted_by_hand_takes_the_writes_with_no_reload_and_the_old_primary_rejoins_as_its_follower(self):
        a1, a2 = self.boards["a1"], self.boards["a2"]
        haproxy_pid = self.lb.proc.pid
        self.assertEqual(self.through_lb("PUT", "/alpha/before", b"acked").status, 201)
        self.wait_copied("a2", "before", b"acked")

        a1.stop()
        stopped = time.monotonic()
        self.wait_servers({"primary_g/a1": "DOWN"})
        r = self.through_lb("PUT", "/alpha/during", b"x")
        self.assertEqual((r.status, r.json()), (503, {"error": "no board available for this app"}), r)
        a2.promote()
        promoted = time.monotonic()
        statuses = []
        r = wait_until(lambda: self.through_lb("PUT", "/alpha/after", b"new"), lambda r: statuses.append(r.status)
                       or r.status == 201, self.PROMOTED_DEADLINE_S, "writes through HAProxy accepted again")
        took, outage = time.monotonic() - promoted, time.monotonic() - stopped
        sys.stderr.write(f"\n  [figure] writes back through HAProxy {took * 1000:.0f} ms after a2 was ready as "
                         f"primary ({outage:.2f} s after a1 stopped, promotion included)\n")
        # until then HAProxy refused them itself: no write reached a board that is no primary
        self.assertEqual(set(statuses[:-1]) - {503}, set(), statuses)
        # HAProxy's log agrees: refused with no server (<NOSRV>), then taken by a2
        logged = self.wait_answered_by("PUT", "/alpha/after", len(statuses))
        self.assertEqual(logged, ["primary_g/<NOSRV>"] * (len(statuses) - 1) + ["primary_g/a2"], statuses)
        r = self.on_board("a2", "GET", "/alpha/before")
        self.assertEqual((r.status, r.body), (200, b"acked"), r)

        a1.follow(a2)
        self.wait_copied("a1", "after", b"new")
        for i in range(4):
            self.assertEqual(self.through_lb("PUT", f"/alpha/rejoined-{i}", b"%d" % i).status, 201)
            self.assertEqual(self.wait_answered_by("PUT", f"/alpha/rejoined-{i}", 1), ["primary_g/a2"])
        self.assertEqual(server_state(self.lb, "primary_g/a1"), "DOWN")
        self.assertEqual(self.on_board("a1", "PUT", "/alpha/direct", b"x").status, 421)
        self.wait_copied("a1", "rejoined-3", b"3")
        # the same HAProxy process all along, on the config it started with
        self.assertEqual((self.lb.proc.pid, self.lb.proc.poll()), (haproxy_pid, None))


class TestShippedConfig(unittest.TestCase):
    """docs/deploy/haproxy.cfg (two groups of three boards)."""

    def test_the_reference_config_is_the_generators_current_output(self):
        gen = load_generator()
        shipped = {}
        for name in (gen.CONFIG_NAME, gen.MAP_NAME):
            with open(os.path.join(DEPLOY, name)) as f:
                shipped[name] = f.read()
        # its third line is the command that made it: 'python3 docs/deploy/haproxy_config.py ARGS'
        command = shipped[gen.CONFIG_NAME].splitlines()[2].removeprefix("# ")
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(gen.main(shlex.split(command)[2:] + ["--out", out]), 0)
            for name, text in shipped.items():
                with open(os.path.join(out, name)) as f:
                    self.assertEqual(f.read(), text, f"docs/deploy/{name} is stale: rerun "
                                                     f"{command} --out docs/deploy")

    def test_haproxy_accepts_the_reference_config(self):
        done = subprocess.run([haproxy_bin(), "-c", "-f", os.path.join(DEPLOY, "haproxy.cfg")],
                              capture_output=True, timeout=10)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertNotIn(b"WARNING", done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()

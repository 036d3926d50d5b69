"""SPEC section 12: automatic failover through etcd, with every part on a host of its own.

One topology for the module's class: a three-member etcd cluster (e1, e2, e3), three boards of
group g (b1, b2, b3, `percore serve --cluster ... --cluster-ttl 5`) and HAProxy (px) with the
configuration docs/deploy/haproxy_config.py generates (the write backend checks
/_health/primary, the reads /_health/replica), each in its own network namespace (netns_hosts).
Clients (threads of this process) write through px only; each write is recorded with its start
and end time, its status and the board HAProxy's log says answered it, and the history is
checked at the end of each case.

The boards copy each other over http:// with --follow-insecure, not TLS: they are namespaces of
one machine, the replication token never leaves it, and the boards' TLS (one certificate per
board, --follow-ca-file) is already covered by test_haproxy's replica group; one CA signing all
three boards would test the certificate plumbing again, not failover.

Bootstrap as an operator does it: b1 starts alone and becomes the primary, a replication token is
made on it and written to every board's --follow-token-file, then b2 and b3 start and follow.

Async mode: SPEC section 12 lets a killed or cut-off primary lose acknowledged writes not yet
copied only into DATA/diverged-{epoch}.tar; after a kill or a cut these tests count the
acknowledged writes the new primary lacks, restore the returning board's diverged tar with
`percore restore`, and assert that each of them is in it (0 vanished) and that the returning board
does not serve them; a SIGTERM handover loses none. No nft or iptables is installed here, so the
partition case cuts the primary off from etcd and the other boards with blackhole routes inside
its namespace (`ip route add blackhole ADDR/32`): px and the test still reach it, so what it
answers while cut off is seen. Needs root, etcd and haproxy; fails, never skips, without them.
"""

import glob
import os
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest

from netns_hosts import Board, Topology, percore_bin
from percore_client import Conn, ConnClosed, bearer, sanitized_build
from test_haproxy import BoardsCase, group_spec, make_app_with_token, server_state, start_generated_haproxy

TTL_S = 5                       # --cluster-ttl: the least percore accepts, to keep CI short
FENCE_MARGIN_S = 1              # the coordinator fences at sent + TTL - 1 s (coordinator.hpp)
ETCD_HOSTS = ("e1", "e2", "e3")
BOARD_HOSTS = ("b1", "b2", "b3")
WRITERS = 16
KILL_CYCLES = 3
REQUEST_TIMEOUT_S = 3.0         # one client request (a cut-off board may never answer)
SETTLE_TIMEOUT_S = 20.0         # a group elects, copies and is seen by HAProxy's checks
POLL_S = 0.05
SIGTERM_HANDOVER_S = 2.0        # SPEC §12: a planned switchover within 2 s


def say(text: str) -> None:
    sys.stderr.write(f"\n  [figure] {text}\n")
    sys.stderr.flush()


def wait_for(probe, timeout: float, what: str):
    """probe() every POLL_S until it returns a true value, returned; AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {value!r})")
        time.sleep(POLL_S)


def status_of(board: Board, method: str, target: str, token: str | None = None, body: bytes | None = None,
              headers: dict | None = None):
    """The response of one request straight to board, or None when it does not answer."""
    if not board.running():
        return None
    try:
        with Conn(board.port, host=board.ip, timeout=1.0) as c:
            return c.request(method, target, {**(bearer(token) if token else {}), **(headers or {})}, body)
    except (OSError, ConnClosed):
        return None


def probe_status(board: Board, target: str):
    r = status_of(board, "GET", target)
    return None if r is None else r.status


class Write:
    __slots__ = ("key", "start", "end", "status", "server")

    def __init__(self, key: str, start: float):
        self.key, self.start, self.end, self.status, self.server = key, start, None, None, None

    @property
    def acked(self) -> bool:
        return self.status in (200, 201, 204)

    def __repr__(self):
        return f"{self.key}@{self.start:.3f}-{self.end:.3f}:{self.status}/{self.server}"


class Writers:
    """WRITERS threads, each PUTting its own keys /alpha/{run}-{thread}-{n} in sequence through
    HAProxy, on a fresh connection each (HAProxy closes them when a server goes down); every
    write recorded in history."""

    def __init__(self, case: "FailoverCase", run: str):
        self.case, self.run = case, run
        self.history: list[Write] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(WRITERS)]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=REQUEST_TIMEOUT_S + 2)

    def _loop(self, i: int):
        lb, token = self.case.lb, self.case.token
        n = 0
        while not self.stopping.is_set():
            w = Write(f"{self.run}-{i}-{n}", time.monotonic())
            n += 1
            try:
                with Conn(lb.port, host=lb.ip, timeout=REQUEST_TIMEOUT_S) as c:
                    w.status = c.request("PUT", f"/alpha/{w.key}", bearer(token), w.key.encode()).status
            except (OSError, ConnClosed, ValueError):
                w.status = None
            w.end = time.monotonic()
            with self.lock:
                self.history.append(w)
            if not w.acked:
                self.stopping.wait(0.05)

    def acked(self) -> list[Write]:
        with self.lock:
            return [w for w in self.history if w.acked]

    def wait_acked_after(self, t: float, timeout: float, what: str) -> Write:
        """The first write started after t that was acknowledged (by end time)."""
        def first():
            got = [w for w in self.acked() if w.start > t]
            return min(got, key=lambda w: w.end) if got else None
        return wait_for(first, timeout, what)

    def attribute(self) -> None:
        """Sets each acknowledged write's server from HAProxy's log (one line per request, written
        as it ends, so waited for a little)."""
        def parse():
            found = {}
            for line in self.case.lb.log().splitlines():
                if "] " not in line or f'"PUT /alpha/{self.run}-' not in line:
                    continue
                fields = line.split("] ", 1)[1].split()
                path = line.rsplit('"PUT ', 1)[1].split()[0]
                found[path.removeprefix("/alpha/")] = fields[1].split("/", 1)[1]
            return found
        acked = self.acked()
        found = {}
        deadline = time.monotonic() + 3.0
        while not all(w.key in found for w in acked) and time.monotonic() < deadline:
            time.sleep(POLL_S)
            found = parse()
        # HAProxy drops a log line now and then under this load (its DroppedLogs counter): such a
        # write is left unattributed ("?"), counted, and at most 1% of them
        missing = [w for w in acked if w.key not in found]
        if missing:
            say(f"{self.run}: HAProxy logged no line for {len(missing)} of {len(acked)} acknowledged writes")
        if len(missing) > len(acked) // 100:
            raise AssertionError(f"HAProxy logged no line for {len(missing)} acknowledged writes: {missing[:5]}")
        for w in acked:
            w.server = found.get(w.key, "?")


class FailoverCase(BoardsCase):
    REPLICATION = "async"       # --replication of the group's boards
    topo: Topology
    boards: dict[str, Board]
    token: str                  # a write token of app alpha (group g)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.topo = Topology([*ETCD_HOSTS, *BOARD_HOSTS, "px"])
        cls.addClassCleanup(cls.topo.close)
        cls.etcd = cls.topo.start_etcd(list(ETCD_HOSTS))
        cls.boards = {}
        # b1 starts in async mode: a sync primary with no follower acknowledges no write, and the
        # group's replication token and app are writes (the bootstrap docs/deploy.md describes)
        b1 = cls.boards["b1"] = cls.topo.start_percore("b1", cls.cluster_args("b1", replication="async"))
        wait_for(lambda: probe_status(b1, "/_health/primary") == 200, SETTLE_TIMEOUT_S, "b1 alone becomes primary")
        token = b1.replication_token()
        for host in BOARD_HOSTS:
            fd = os.open(cls.token_file(host), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
        cls.token = make_app_with_token(b1, "alpha")
        if cls.REPLICATION != "async":
            b1.args = cls.cluster_args("b1")
            b1.restart()           # SIGTERM hands the key over to nobody; b1 takes it again
            wait_for(lambda: probe_status(b1, "/_health/primary") == 200, SETTLE_TIMEOUT_S, "b1 leads again")
        for host in BOARD_HOSTS[1:]:
            cls.boards[host] = cls.topo.start_percore(host, cls.cluster_args(host))
        cls.lb = start_generated_haproxy(cls.topo, [group_spec("g", list(cls.boards.values()))], ["alpha=g"], host="px")

    @classmethod
    def token_file(cls, host: str) -> str:
        return os.path.join(cls.topo.host_dir(host), "follow.token")

    @classmethod
    def cluster_args(cls, host: str, replication: str | None = None) -> list[str]:
        return ["--cluster", cls.etcd.endpoints, "--group", "g", "--board", host,
                "--advertise", f"http://{cls.topo.addr(host)}:8080", "--follow-insecure",
                "--follow-token-file", cls.token_file(host), "--cluster-ttl", str(TTL_S),
                "--replication", replication or cls.REPLICATION]

    def setUp(self):
        """Every test starts with the three members and boards running, one primary, both others
        copying it, and HAProxy's write backend on the primary alone."""
        for host in ETCD_HOSTS:
            self.etcd.start(host)
        self.etcd.wait_healthy()
        for board in self.boards.values():
            if not board.running():
                board.start()
        self.primary = self.wait_primary()
        self.settle(self.primary)

    # -- the group's state
    def primaries(self) -> list[str]:
        return [h for h, b in self.boards.items() if probe_status(b, "/_health/primary") == 200]

    def wait_primary(self, not_this: str | None = None, timeout: float = SETTLE_TIMEOUT_S) -> str:
        got = wait_for(lambda: (lambda p: p if len(p) == 1 and p[0] != not_this else None)(self.primaries()),
                       timeout, f"one primary{' other than ' + not_this if not_this else ''}")
        return got[0]

    def settle(self, primary: str) -> None:
        """Waits until every other running board copies primary (lag 0) and HAProxy's checks put
        the write backend on primary alone."""
        followers = [h for h, b in self.boards.items() if h != primary and b.running()]
        wait_for(lambda: self.lb_put_status(f"nudge-{time.monotonic_ns()}") == 201, SETTLE_TIMEOUT_S,
                 f"a write through HAProxy lands on {primary}")
        for host in followers:
            wait_for(lambda: probe_status(self.boards[host], "/_health/replica?lag=0") == 200, SETTLE_TIMEOUT_S,
                     f"{host} copies {primary} (its log: {self.boards[host].stderr()[-1500:]})")
        want = {f"primary_g/{h}": ("UP" if h == primary else "DOWN") for h in self.boards}
        wait_for(lambda: all(server_state(self.lb, s) == v for s, v in want.items()), SETTLE_TIMEOUT_S,
                 f"HAProxy's checks settle on {primary}")

    def lb_put(self, key: str, body: bytes = b"x", headers: dict | None = None) -> int | None:
        return self.lb_request("PUT", key, body, headers).status

    def lb_put_status(self, key: str) -> int | None:
        """lb_put's status, None when HAProxy does not answer in time."""
        try:
            return self.lb_put(key)
        except (OSError, ConnClosed):
            return None

    def lb_request(self, method: str, key: str, body: bytes | None = None, headers: dict | None = None):
        with Conn(self.lb.port, host=self.lb.ip, timeout=REQUEST_TIMEOUT_S) as c:
            return c.request(method, f"/alpha/{key}", {**bearer(self.token), **(headers or {})}, body)

    def missing_on(self, host: str, writes: list) -> list:
        """The writes board host does not hold (GET each on one connection)."""
        board, missing = self.boards[host], []
        with Conn(board.port, host=board.ip, timeout=REQUEST_TIMEOUT_S) as c:
            for w in writes:
                r = c.request("GET", f"/alpha/{w.key}", bearer(self.token))
                if (r.status, r.body) != (200, w.key.encode()):
                    missing.append(w)
        return missing

    def report_lost(self, what: str, host: str, acked: list) -> list:
        lost = self.missing_on(host, acked)
        say(f"{what}: {len(lost)} of {len(acked)} acknowledged are not on {host}"
            + (f": {lost[:8]}" if lost else ""))
        return lost

    def assert_in_diverged_tar(self, what: str, old: str, lost: list) -> None:
        """SPEC 12 "A returning primary": every acknowledged write the new primary lacks is in the
        returning board's DATA/diverged-*.tar, which `percore restore` accepts, and that board does
        not serve it."""
        board = self.boards[old]

        def vanished_now() -> list:
            held: dict[str, bytes] = {}
            for tar in sorted(glob.glob(os.path.join(board.data, "diverged-*.tar"))):
                held.update(restored_documents(tar))
            return [w for w in lost if held.get("alpha\0" + w.key) != w.key.encode()]

        # an earlier cycle's tar may be there already: wait for this one (slow under ASan), not any
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        vanished = vanished_now()
        while vanished and time.monotonic() < deadline:
            time.sleep(0.5)
            vanished = vanished_now()
        still = len(lost) - len(self.missing_on(old, lost))
        say(f"{what}: {len(lost) - len(vanished)} of the {len(lost)} not on the new primary are in {old}'s diverged "
            f"tar, {len(vanished)} vanished; {old} serves {still} of them")
        self.assertEqual(vanished, [], "acknowledged writes neither on the new primary nor in the diverged tar")
        self.assertEqual(still, 0, "the returning primary serves writes the new primary never received")

    def check_sigterm_handover(self) -> None:
        """SIGTERM of the primary under writing clients: another board takes writes within 2 s
        through HAProxy, every acknowledged write is on it, and the old one rejoins as a follower."""
        old = self.primary
        with Writers(self, f"term-{self.REPLICATION}") as writers:
            wait_for(lambda: len(writers.acked()) >= 2 * WRITERS, 10.0, "writes acknowledged before the SIGTERM")
            term = time.monotonic()
            self.boards[old].server.send_signal()
            first = writers.wait_acked_after(term, 10.0, "writes succeed again after the SIGTERM")
            wait_for(lambda: len([w for w in writers.acked() if w.start > first.end]) >= WRITERS, 10.0,
                     "writes keep succeeding")
            self.assertEqual(self.boards[old].server.proc.wait(timeout=5), 0)
        new = self.wait_primary(not_this=old)
        writers.attribute()
        acked = writers.acked()
        took = min(w.end for w in acked if w.server == new) - term
        last_old = max(w.end for w in acked if w.server == old) - term
        say(f"SIGTERM of {old}: {new} took writes through HAProxy after {took:.2f} s ({old}'s last ack "
            f"{last_old:.2f} s after the signal); {len(acked)} acknowledged")
        # SPEC §12's 2 s is the product's figure, checked on the optimized build (CI's first stage);
        # a sanitized binary runs 2-3x slower and its stage checks what is lost, with twice the time
        self.assertLessEqual(took, SIGTERM_HANDOVER_S * (2 if sanitized_build() else 1))
        self.assertEqual(self.missing_on(new, acked), [], "an acknowledged write lost in a planned handover")
        self.assert_rejoins_as_follower(old, new)

    def kill_under_writers(self, run: str, before=lambda: None):
        """Writers through HAProxy; once some writes are acknowledged (and before() returned), kill
        -9 of the primary; returns the writers (stopped), when the kill was, and how long until
        the first write acknowledged after it ended, once writes keep succeeding."""
        with Writers(self, run) as writers:
            wait_for(lambda: len(writers.acked()) >= 2 * WRITERS, 10.0, "writes acknowledged before the kill")
            before()
            self.boards[self.primary].kill()
            killed = time.monotonic()
            first = writers.wait_acked_after(killed, TTL_S + 8, "writes succeed again after the kill")
            wait_for(lambda: len([w for w in writers.acked() if w.start > first.end]) >= WRITERS, 10.0,
                     "writes keep succeeding")
        return writers, killed, first.end - killed

    def assert_rejoins_as_follower(self, host: str, primary: str) -> None:
        """host runs again: it copies primary, is no primary, refuses writes with 421 naming it,
        and HAProxy keeps the writes on primary."""
        board = self.boards[host]
        if not board.running():
            board.start()
        self.settle(primary)
        self.assertEqual(probe_status(board, "/_health/primary"), 503)
        r = status_of(board, "PUT", "/alpha/direct", self.token, b"x")
        self.assertEqual(r.status, 421, r)
        self.assertEqual(r.json().get("primary"), f"http://{self.boards[primary].ip}:8080", r)
        self.assertEqual(self.primaries(), [primary])


def restored_documents(tar: str) -> dict[str, bytes]:
    """`percore restore TAR DIR`, then the restored segments' documents (store key -> value), read
    as store/log_format.hpp draws them: puts (kind 1) and copies (kind 5); the last record wins."""
    docs: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        into = os.path.join(tmp, "restored")
        done = subprocess.run([percore_bin(), "restore", tar, into], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"percore restore {tar}: {done.stderr}"
        for seg in sorted(glob.glob(os.path.join(into, "layout-*", "shard-*", "*.seg"))):
            data = open(seg, "rb").read()
            at = 32  # the segment header
            while at + 32 <= len(data):
                body, kind, key_n, type_n = struct.unpack_from("<IBxHH", data, at + 4)
                value_n = struct.unpack_from("<I", data, at + 24)[0]
                names = at + 32
                key = data[names:names + key_n].decode("utf-8", "replace")
                value_at = names + key_n + type_n + (8 if kind == 5 else 0)
                if kind in (1, 5):
                    docs[key] = data[value_at:value_at + value_n]
                at += 8 + body
    return docs


class TestFailover(FailoverCase):
    def test_a_killed_primary_is_replaced_within_ttl_plus_3_s_and_comes_back_as_a_follower(self):
        for cycle in range(KILL_CYCLES):
            old = self.primary
            writers, killed, took = self.kill_under_writers(f"kill{cycle}")
            new = self.wait_primary(not_this=old)
            writers.attribute()
            acked = writers.acked()
            say(f"cycle {cycle}: kill -9 of {old}: writes through HAProxy again after {took:.2f} s on {new} "
                f"(--cluster-ttl {TTL_S}); {len(acked)} acknowledged of {len(writers.history)}")
            self.assertLessEqual(took, TTL_S + 3, f"failover of {old}")
            after = [w for w in acked if w.start > killed]
            self.assertEqual({w.server for w in after} - {"?"}, {new}, after[:5])
            lost = self.report_lost(f"cycle {cycle} (kill -9 of {old})", new, acked)
            self.assert_rejoins_as_follower(old, new)
            self.assert_in_diverged_tar(f"cycle {cycle}", old, lost)
            self.primary = new

    def test_a_primary_cut_off_from_etcd_and_the_boards_stops_acknowledging_before_its_lease_can_expire(self):
        old = self.primary
        ns = self.topo.netns(old)
        cut_from = [self.topo.addr(h) for h in (*ETCD_HOSTS, *BOARD_HOSTS) if h != old]
        with Writers(self, "cut") as writers:
            wait_for(lambda: len(writers.acked()) >= 2 * WRITERS, 10.0, "writes acknowledged before the cut")
            for addr in cut_from:
                self.topo.run(old, ["ip", "route", "add", "blackhole", f"{addr}/32"])
            cut = time.monotonic()
            # straight to the old primary (px and the test still reach it): fenced, 503 + Retry-After
            fenced = wait_for(lambda: (lambda r: r if r is not None and r.status == 503 else None)(
                status_of(self.boards[old], "PUT", "/alpha/cut-direct", self.token, b"x")), TTL_S + 2,
                f"{old} refuses writes once cut off")
            fenced_at = time.monotonic()
            self.assertTrue(fenced.has_header("retry-after"), fenced)
            first = writers.wait_acked_after(fenced_at, TTL_S + 8, "writes succeed again after the cut")
            new = self.wait_primary(not_this=old)
            wait_for(lambda: len([w for w in writers.acked() if w.start > first.end]) >= WRITERS, 10.0,
                     "writes keep succeeding on the new primary")
        writers.attribute()
        acked = writers.acked()
        on_old = [w for w in acked if w.server == old]
        on_new = [w for w in acked if w.server not in (old, "?")]
        self.assertEqual({w.server for w in on_new}, {new})
        last_old_end, last_old_start = max(w.end for w in on_old), max(w.start for w in on_old)
        first_new = min(on_new, key=lambda w: w.start)
        say(f"{old} cut off: fenced (503) {fenced_at - cut:.2f} s after the cut, last ack {last_old_end - cut:.2f} s "
            f"after it; first write taken by {new} {first.end - cut:.2f} s after it; gap between the boards' "
            f"acknowledged writes {first_new.start - last_old_end:.2f} s")
        # its lease expires no earlier than its last renewal + TTL, and that renewal was sent before the cut
        self.assertLess(last_old_end, cut + TTL_S, "the cut-off primary acknowledged past its lease")
        # one order of every acknowledged write has the old board's all before the new one's
        self.assertLessEqual(last_old_start, min(w.end for w in on_new), "two boards acknowledged at once")
        lost = self.report_lost(f"{old} cut off", new, acked)
        for addr in cut_from:
            self.topo.run(old, ["ip", "route", "del", "blackhole", f"{addr}/32"])
        self.assert_rejoins_as_follower(old, new)
        self.assert_in_diverged_tar(f"{old} cut off", old, lost)

    def test_one_etcd_member_down_changes_nothing_and_a_lost_quorum_fences_until_it_returns(self):
        primary = self.primary
        self.assertEqual(self.lb_put("quorum-read", b"kept"), 201)
        with Writers(self, "quorum1") as writers:
            wait_for(lambda: len(writers.acked()) >= WRITERS, 10.0, "writes acknowledged")
            self.etcd.stop("e1")       # the first endpoint every board lists
            down = time.monotonic()
            wait_for(lambda: time.monotonic() > down + 2 * TTL_S and self.etcd.healthy("e2"), 4 * TTL_S,
                     f"two lease periods with e1 down")
        writers.attribute()
        refused = [w for w in writers.history if not w.acked]
        self.assertEqual(refused, [], "a write refused with one member down")
        self.assertEqual({w.server for w in writers.acked()} - {"?"}, {primary})
        self.assertEqual(self.primaries(), [primary])

        self.etcd.stop("e2")
        lost = time.monotonic()
        r = wait_for(lambda: (lambda r: r if r.status == 503 else None)(self.lb_request("PUT", "quorum-w", b"x")),
                     TTL_S + 2, "writes refused once the quorum is lost")
        fenced = time.monotonic() - lost
        direct = status_of(self.boards[primary], "PUT", "/alpha/quorum-direct", self.token, b"x")
        self.assertEqual(direct.status, 503, direct)
        self.assertTrue(direct.has_header("retry-after"), direct)
        for _ in range(3):
            r = self.lb_request("GET", "quorum-read")
            self.assertEqual((r.status, r.body), (200, b"kept"), r)
        self.etcd.start("e1")
        self.etcd.start("e2")
        back = time.monotonic()
        try:
            wait_for(lambda: self.lb_put_status("quorum-back") == 201, SETTLE_TIMEOUT_S, "writes accepted again")
        except AssertionError as e:
            logs = "\n".join(f"--- {h}: {b.stderr()[-2000:]}" for h, b in self.boards.items())
            raise AssertionError(f"{e}; etcd healthy {[self.etcd.healthy(h) for h in ETCD_HOSTS]}, primaries "
                                 f"{self.primaries()}\n{logs}") from None
        say(f"quorum lost: writes refused after {fenced:.2f} s (TTL {TTL_S}); accepted again {time.monotonic() - back:.2f} s "
            f"after the members restarted; primary now {self.primaries()}")
        # the board fences at its last renewal + TTL - 1 s, at most TTL - 1 s after the loss; what is
        # measured here adds HAProxy's and this client's round trips (seconds under ASan on 2 cores)
        self.assertLessEqual(fenced, TTL_S + FENCE_MARGIN_S)

    def test_a_sigterm_of_the_primary_hands_over_within_2_s_and_loses_nothing(self):
        self.check_sigterm_handover()

    def test_a_conditional_write_with_a_followers_etag_is_2xx_unchanged_and_412_changed_across_a_failover(self):
        primary = self.primary
        follower = next(h for h in BOARD_HOSTS if h != primary)

        def follower_etag(host: str, body: bytes) -> str:
            r = wait_for(lambda: (lambda r: r if r is not None and (r.status, r.body) == (200, body) else None)(
                status_of(self.boards[host], "GET", "/alpha/cond", self.token)), 10.0, f"{host} copies cond")
            return r.etag

        self.assertIn(self.lb_put("cond", b"v1"), (200, 201, 204))
        etag = follower_etag(follower, b"v1")
        self.assertIn(self.lb_put("cond", b"v2", {"If-Match": etag}), (200, 201, 204))
        stale = etag
        etag = follower_etag(follower, b"v2")
        self.assertEqual(self.lb_put("cond", b"no", {"If-Match": stale}), 412)

        self.boards[primary].stop()            # SIGTERM: a handover; nothing lost
        new = self.wait_primary(not_this=primary)
        self.settle(new)
        other = next(h for h in BOARD_HOSTS if h not in (new, primary))
        # the ETag read from a follower before the failover still matches on the new primary
        self.assertIn(self.lb_put("cond", b"v3", {"If-Match": etag}), (200, 201, 204))
        self.assertEqual(self.lb_put("cond", b"no", {"If-Match": etag}), 412)
        etag = follower_etag(other, b"v3")
        self.assertIn(self.lb_put("cond", b"v4", {"If-Match": etag}), (200, 201, 204))
        self.assertEqual(self.lb_put("cond", b"no", {"If-None-Match": "*"}), 412)
        self.assert_rejoins_as_follower(primary, new)


if __name__ == "__main__":
    unittest.main()


class TestSyncFailover(FailoverCase):
    """The same group with --replication sync (SPEC 12): a write is acknowledged only once a
    follower holds it durable, and only the boards in the sync set take over."""

    REPLICATION = "sync"

    def test_a_killed_sync_primary_is_replaced_and_every_acknowledged_write_is_on_the_new_one(self):
        for cycle in range(2):
            old = self.primary
            writers, _, took = self.kill_under_writers(
                f"sync{cycle}", before=lambda: wait_for(self.etcd_sync_set, 5.0, "the primary published its sync set"))
            new = self.wait_primary(not_this=old)
            acked = writers.acked()
            lost = self.missing_on(new, acked)
            say(f"sync cycle {cycle}: kill -9 of {old}: writes through HAProxy again after {took:.2f} s on {new}; "
                f"lost {len(lost)} of {len(acked)} acknowledged")
            self.assertLessEqual(took, TTL_S + 3, f"failover of {old}")
            self.assertEqual(lost, [], "an acknowledged write is not on the new primary")
            self.assert_rejoins_as_follower(old, new)
            self.primary = new

    def test_a_sigterm_of_a_sync_primary_hands_over_within_2_s_and_loses_nothing(self):
        self.check_sigterm_handover()

    def etcd_sync_set(self) -> list[str]:
        """The boards /percore/g/sync names (through etcd's gateway on e2), [] when none."""
        import base64
        import json
        body = json.dumps({"key": base64.b64encode(b"/percore/g/sync").decode()}).encode()
        r = self.topo.run("e2", ["curl", "-s", "-X", "POST", "-d", body.decode(),
                                 f"http://{self.topo.addr('e2')}:2379/v3/kv/range"], check=False)
        try:
            kvs = json.loads(r.stdout).get("kvs", [])
            return json.loads(base64.b64decode(kvs[0]["value"]))["boards"] if kvs else []
        except (ValueError, KeyError, IndexError):
            return []

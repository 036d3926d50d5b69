"""SPEC section 11: `percore serve` under systemd speaks the notify protocol (sd_notify(3)).

Each test binds an AF_UNIX datagram socket of its own, starts the real binary with NOTIFY_SOCKET
naming it (a path; once an abstract '@' name) and reads the messages in the order they came:
STATUS lines while the server binds and recovers, READY=1 once the ready line is printed and
/_health answers 200, WATCHDOG=1 while every shard's loop turns and none while the test hook
(PERCORE_TEST_STALL_SHARD, then SIGUSR1) holds one shard's loop, STOPPING=1 on SIGTERM, exit 0.
Three shards, whatever PERCORE_TEST_SHARDS says: the watchdog must hear from every loop, and the
recovery STATUS lines count them. Registered once (tests/integration/meson.build)."""

import os
import select
import signal
import socket
import tempfile
import time
import unittest
import uuid

from percore_client import Server

SHARDS = 3
WATCHDOG_USEC = 1_000_000            # the server checks every 250 ms (a quarter); a shorter one made
                                     # the test time the machine's load (3 sanitized servers on 2 cores)
WATCHDOG_S = WATCHDOG_USEC / 1e6
QUIET_S = 1.0                        # "nothing comes": four of the server's checks
STALL_S = 2.0                        # shards/base/limits.hpp test_stall_duration
STOP_LIMIT_S = 5.0                   # SPEC section 1
SYSTEMD_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def setUpModule():
    # The servers get only what each test sets: not a NOTIFY_SOCKET of whatever runs the tests.
    for name in SYSTEMD_VARIABLES:
        os.environ.pop(name, None)


class NotifySocket:
    """The service manager's end: a datagram socket the test binds; each message, as it came."""

    def __init__(self, abstract: bool = False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._dir = None
        if abstract:
            name = "percore-it-notify-" + uuid.uuid4().hex
            self.sock.bind("\0" + name)
            self.env_value = "@" + name
        else:
            self._dir = tempfile.TemporaryDirectory(prefix="percore-it-notify-")
            self.env_value = os.path.join(self._dir.name, "notify")
            self.sock.bind(self.env_value)

    def next(self, timeout: float):
        """The next message (text), or None when none came within timeout."""
        r, _, _ = select.select([self.sock], [], [], max(timeout, 0))
        if not r:
            return None
        return self.sock.recv(4096).decode("utf-8")

    def until(self, wanted: str, timeout: float) -> list[str]:
        """Every message up to and including the first that has the line `wanted`."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            message = self.next(deadline - time.monotonic())
            if message is None:
                raise AssertionError(f"no {wanted!r} within {timeout}s; got {seen!r}")
            seen.append(message)
            if wanted in message.split("\n"):
                return seen

    def pings_during(self, seconds: float) -> list[float]:
        """The arrival times of the WATCHDOG=1 messages in the next `seconds`."""
        deadline = time.monotonic() + seconds
        times = []
        while (left := deadline - time.monotonic()) > 0:
            message = self.next(left)
            if message == "WATCHDOG=1":
                times.append(time.monotonic())
            elif message is not None:
                raise AssertionError(f"unexpected message while serving: {message!r}")
        return times

    def close(self):
        self.sock.close()
        if self._dir is not None:
            self._dir.cleanup()


class SystemdNotifyTest(unittest.TestCase):
    def setUp(self):
        self.servers = []
        self.sockets = []

    def tearDown(self):
        for s in self.servers:
            s.cleanup()
        for n in self.sockets:
            n.close()

    def notify_socket(self, abstract: bool = False) -> NotifySocket:
        n = NotifySocket(abstract)
        self.sockets.append(n)
        return n

    def server(self, env: dict) -> Server:
        s = Server(shards=SHARDS, env=env)
        self.servers.append(s)
        return s

    def ready(self, srv: Server, notify: NotifySocket) -> list[str]:
        """Reads up to READY=1; checks the ready line was printed and /_health is 200 by then."""
        messages = notify.until("READY=1", timeout=15)
        printed, _, _ = select.select([srv.proc.stdout], [], [], 0)
        self.assertTrue(printed, "READY=1 came before the ready line was printed")
        srv.wait_ready(timeout=1)
        with srv.conn() as c:
            self.assertEqual(c.get("/_health").status, 200)
        return messages

    def stop(self, srv: Server, notify: NotifySocket):
        """SIGTERM: STOPPING=1 (perhaps after a last ping), exit 0, and nothing after STOPPING=1."""
        srv.send_signal(signal.SIGTERM)
        before = notify.until("STOPPING=1", timeout=STOP_LIMIT_S)
        self.assertEqual(before[-1], "STOPPING=1\nSTATUS=stopping")
        self.assertTrue(all(m == "WATCHDOG=1" for m in before[:-1]), before)
        rc = srv.proc.wait(timeout=STOP_LIMIT_S)
        self.assertEqual(rc, 0, srv.stderr()[-1500:])
        srv.stop()
        self.assertIsNone(notify.next(0), "a message after STOPPING=1 and the exit")

    def test_start_sends_status_lines_then_ready_once_serving_and_stopping_on_sigterm(self):
        notify = self.notify_socket()
        srv = self.server({"NOTIFY_SOCKET": notify.env_value})
        messages = self.ready(srv, notify)
        self.assertEqual(messages, [
            "STATUS=binding 127.0.0.1:0",
            "STATUS=recovering 3 shards",
            "STATUS=recovered 1 of 3 shards",
            "STATUS=recovered 2 of 3 shards",
            "STATUS=recovered 3 of 3 shards",
            f"READY=1\nSTATUS=serving 3 shards on 127.0.0.1:{srv.port}",
        ])
        self.assertIsNone(notify.next(QUIET_S), "WATCHDOG=1 without WATCHDOG_USEC")
        self.stop(srv, notify)

    def test_watchdog_pings_while_every_loop_turns_and_not_while_one_is_stalled(self):
        notify = self.notify_socket()
        srv = self.server({"NOTIFY_SOCKET": notify.env_value, "WATCHDOG_USEC": str(WATCHDOG_USEC),
                           "PERCORE_TEST_STALL_SHARD": "1"})
        self.ready(srv, notify)
        ready_at = time.monotonic()  # systemd's watchdog runs from READY=1
        turning = notify.pings_during(2 * WATCHDOG_S)
        gaps = [b - a for a, b in zip([ready_at] + turning, turning)]
        self.assertGreaterEqual(len(turning), 4, f"pings in 2 s with every loop turning: {turning}")
        self.assertLess(max(gaps), WATCHDOG_S, f"a gap systemd would have killed us for: {gaps}")

        stalled_at = time.monotonic()
        srv.send_signal(signal.SIGUSR1)
        # a probe shard 1 ran just before the stall may still earn one ping (a check comes every
        # quarter of the timeout)
        notify.pings_during(0.3 * WATCHDOG_S)
        silent = notify.pings_during(1.2 * WATCHDOG_S)  # longer than systemd would wait
        self.assertEqual(silent, [], "WATCHDOG=1 while shard 1's loop was stalled")
        self.assertLess(time.monotonic() - stalled_at, STALL_S, "the stall ended before the silence was seen")
        self.assertIn("test hook (PERCORE_TEST_STALL_SHARD): shard 1's loop sleeps", srv.stderr())

        after = notify.until("WATCHDOG=1", timeout=STALL_S + 2)  # the stall ends, the pings come back
        self.assertGreaterEqual(time.monotonic() - stalled_at, STALL_S - 0.3 * WATCHDOG_S, after)
        self.stop(srv, notify)

    def test_an_abstract_socket_is_notified_and_a_watchdog_for_another_pid_is_not_ours(self):
        notify = self.notify_socket(abstract=True)
        srv = self.server({"NOTIFY_SOCKET": notify.env_value, "WATCHDOG_USEC": str(WATCHDOG_USEC),
                           "WATCHDOG_PID": "1"})
        messages = self.ready(srv, notify)
        self.assertEqual(messages[-1], f"READY=1\nSTATUS=serving 3 shards on 127.0.0.1:{srv.port}")
        self.assertIsNone(notify.next(QUIET_S), "WATCHDOG=1 with WATCHDOG_PID naming another process")
        self.stop(srv, notify)

    def test_without_notify_socket_the_server_serves_and_says_nothing_of_systemd(self):
        srv = self.server({"WATCHDOG_USEC": str(WATCHDOG_USEC)})
        srv.wait_ready()
        with srv.conn() as c:
            self.assertEqual(c.get("/_health").status, 200)
        self.assertEqual(srv.stop(), 0)
        for word in ("notify", "NOTIFY_SOCKET", "watchdog"):
            self.assertNotIn(word, srv.stderr())

    def test_a_notify_socket_nobody_listens_on_costs_one_line_and_the_server_serves(self):
        folder = tempfile.TemporaryDirectory(prefix="percore-it-notify-")
        self.addCleanup(folder.cleanup)
        srv = self.server({"NOTIFY_SOCKET": os.path.join(folder.name, "gone")})
        srv.wait_ready()
        with srv.conn() as c:
            self.assertEqual(c.get("/_health").status, 200)
        self.assertEqual(srv.stop(), 0)
        failures = [line for line in srv.stderr().splitlines() if "cannot notify the service manager" in line]
        self.assertEqual(len(failures), 1, srv.stderr())
        self.assertIn("(STATUS=binding 127.0.0.1:0 to NOTIFY_SOCKET)", failures[0])


if __name__ == "__main__":
    unittest.main()

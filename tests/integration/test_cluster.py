"""SPEC section 12 on loopback, fast and without root: boards of a group with a one-member etcd.

A one-member etcd is no deployment (SPEC 12 asks for three); here it only answers the boards'
requests, so the roles, the health probes, the 421 and the option errors are checked in seconds
on every shard count. Failover itself is test_failover's (three members, hosts of their own).
Auth is off (loopback listeners), so no replication token is needed.
"""

import os
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from percore_client import Server, env_shards, run_cli, wait_until

TTL_S = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackEtcd:
    """One etcd member on 127.0.0.1, in a folder of its own; stop() kills it."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="percore-etcd-")
        client, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{client}"
        self.log = open(os.path.join(self._tmp.name, "etcd.log"), "wb")
        self.proc = subprocess.Popen(
            ["etcd", "--name", "one", "--data-dir", os.path.join(self._tmp.name, "data"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"one=http://127.0.0.1:{peer}"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(self.healthy, 15.0, what="etcd answers /health")

    def healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"etcd exited {self.proc.returncode}")
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1.0) as r:
                return b'"true"' in r.read()
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self._tmp.cleanup()


def status(server: Server, method: str, target: str, body: bytes | None = None):
    with server.conn() as c:
        return c.request(method, target, None, body)


class TestClusterOnLoopback(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd = LoopbackEtcd()
        cls.addClassCleanup(cls.etcd.stop)

    def board(self, name: str, group: str) -> Server:
        port = free_port()
        server = Server(shards=env_shards(), listen=False, args=[
            "--listen", f"127.0.0.1:{port}", "--cluster", self.etcd.url, "--group", group, "--board", name,
            "--advertise", f"http://127.0.0.1:{port}", "--cluster-ttl", str(TTL_S)])
        self.addCleanup(server.cleanup)
        return server.wait_ready()

    def test_a_lone_board_becomes_primary_and_a_second_follows_it_refusing_writes_with_421(self):
        group = f"g{os.getpid()}x{time.monotonic_ns() % 100000}"
        b1 = self.board("b1", group)
        wait_until(lambda: status(b1, "GET", "/_health/primary").status == 200, 10.0, what="b1 primary")
        self.assertEqual(status(b1, "HEAD", "/_health/primary").status, 200)
        b2 = self.board("b2", group)
        self.assertEqual(status(b1, "PUT", "/_apps/alpha", b'{"quota":{}}').status, 201)
        self.assertEqual(status(b1, "PUT", "/alpha/k", b"v").status, 201)
        wait_until(lambda: status(b2, "GET", "/alpha/k").status == 200, 10.0, what="b2 copies b1")
        self.assertEqual(status(b2, "GET", "/_health/primary").status, 503)
        self.assertEqual(status(b2, "GET", "/_health/replica").status, 200)
        self.assertEqual(status(b1, "GET", "/_health/replica").status, 503)
        r = status(b2, "PUT", "/alpha/k", b"w")
        self.assertEqual((r.status, r.json().get("primary")), (421, f"http://127.0.0.1:{b1.port}"), r)
        self.assertEqual(b2.stop(), 0)
        self.assertEqual(b1.stop(), 0)

    def test_cluster_without_its_companions_exits_2_with_one_line(self):
        with tempfile.TemporaryDirectory() as folder:
            base = ["serve", "--listen", "127.0.0.1:0", "--data", os.path.join(folder, "data")]
            full = {"--group": "g", "--board": "b1", "--advertise": "http://127.0.0.1:1"}
            for missing in full:
                args = base + ["--cluster", self.etcd.url]
                for flag, value in full.items():
                    if flag != missing:
                        args += [flag, value]
                done = run_cli(args)
                lines = done.stderr.decode().strip().splitlines()
                self.assertEqual((done.returncode, len(lines)), (2, 1), (missing, done))
                self.assertIn("--cluster needs --group, --board and --advertise", lines[0])
            done = run_cli(base + ["--group", "g"])
            self.assertEqual(done.returncode, 2, done)
            self.assertEqual(len(done.stderr.decode().strip().splitlines()), 1, done)


if __name__ == "__main__":
    unittest.main()

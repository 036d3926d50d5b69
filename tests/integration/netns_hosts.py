"""Boards as separate hosts on one machine: Linux network namespaces on a bridge (SPEC section 10).

    with Topology(["p1", "p2", "lb"]) as topo:
        p1 = topo.start_percore("p1")                  # percore serve --listen 10.77.X.1:8080
        lb = topo.start_haproxy("lb", cfg_text, files={"percore-apps.map": "..."})
        Conn(lb.port, host=lb.ip).get("/_health")

Layout, all made by the topology itself and all removed by close() (also when a test fails):

    namespace <tag>.switch   bridge br0 (no address); one veth port per host, v1, v2, ...
    namespace <tag>-<host>   lo up, eth0 = 10.77.X.<n>/24 (n = 1, 2, ... in the order given)
    root namespace           <tag>r = 10.77.X.254/24, a veth whose peer is a port of br0

How the test reaches the hosts: the root namespace (the test process) has that one veth onto the
bridge, so `Conn(port, host=topo.addr(host))` from percore_client works as is, from any thread, with no
helper process per request. The root namespace gains exactly one interface and the connected route
of 10.77.X.0/24, nothing else: traffic stays on that /24 and on loopback. (The alternatives: a
client process per request through `ip netns exec` costs a Python start per request; setns() of a
test thread needs Python 3.12's os.setns.)

Names: tag = "pc<pid>x<n>", n counting the topologies of this process, so two runs never share a
name; the root veth is "<tag>r": 2+7+1+4+1 = 15 bytes at most (pid < 2^22, n < 10000), which is
IFNAMSIZ less the NUL; ports in the switch namespace are short on their own (v<n>, r).

The /24: X is picked under a lock file (LOCK_PATH) among the 10.77.X.0/24 that overlap no address
and no route of the root namespace, starting at pid % 254 + 1, so parallel runs (meson runs every
module for 1 and 3 shards at once) get different subnets. Under the same lock, the namespaces (and
the processes in them), root veths and folders left by a crashed run (the tag of a pid that no
longer runs) are removed first.

Processes: every process a topology starts (popen, start_percore, start_haproxy) is killed by
close(), and so is anything still inside its namespaces (`ip netns pids`) before they are deleted:
only this topology starts processes there. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for `ip netns`);
without it, or when `ip` fails, a NetnsError says so and the test fails, never skips.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import percore_client
from percore_client import Conn, Server, env_shards, percore_bin, server_env

SUBNET_BASE = "10.77"            # 10.77.X.0/24, X in 1..254
ROOT_OCTET = 254                 # the root namespace's address on every topology's /24
LOCK_PATH = "/tmp/percore-netns.lock"   # fixed, not $TMPDIR: every test process must agree
PERCORE_PORT = 8080              # each namespace has its own ports, so one fixed port serves all
PERCORE_TLS_PORT = 8443          # a board's --tls-listen (start_percore(tls=True))
IP_TIMEOUT = 10.0                # one `ip` command; they take milliseconds
HAPROXY_START_TIMEOUT = 10.0     # until the frontend port accepts
HAPROXY_STOP_TIMEOUT = 5.0
ETCD_CLIENT_PORT = 2379         # etcd's defaults, one member per host
ETCD_PEER_PORT = 2380
ETCD_START_TIMEOUT = 20.0        # until the cluster answers /health (three members elect a leader)
IFNAMSIZ = 16                    # Linux interface names: 15 bytes and a NUL
HOST_RE = re.compile(r"^[a-z0-9]{1,16}$")
TAG_RE = re.compile(r"^pc(?P<pid>\d+)x(?P<n>\d+)$")
NS_RE = re.compile(r"^(?P<tag>pc\d+x\d+)[-.]")
ROOT_LINK_RE = re.compile(r"^(?P<tag>pc\d+x\d+)r$")
DIR_RE = re.compile(r"^percore-(?P<tag>pc\d+x\d+)-")   # the topology's folder in $TMPDIR

_counter = itertools.count()
_active_tags: set[str] = set()   # tags of this process's open topologies: never stale


class NetnsError(AssertionError):
    """The topology could not be built or torn down (not root, `ip` failed, a leak)."""


# --------------------------------------------------------------------------
# `ip` and friends


def ip(*args: str, check: bool = True) -> str:
    """Run `ip ARGS` and return its stdout; NetnsError with its stderr when it fails and check."""
    try:
        done = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=IP_TIMEOUT)
    except FileNotFoundError:
        raise NetnsError("no `ip` command (iproute2) on PATH") from None
    if check and done.returncode != 0:
        raise NetnsError(f"`ip {' '.join(args)}` failed ({done.returncode}): "
                         f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode(errors="replace")


def require_root() -> None:
    """NetnsError unless this process can make namespaces and links."""
    if os.geteuid() != 0:
        raise NetnsError("the multi-host tests need root (CAP_NET_ADMIN and CAP_SYS_ADMIN for "
                         "`ip netns`); run them as root")
    if shutil.which("ip") is None:
        raise NetnsError("no `ip` command (iproute2) on PATH")


def haproxy_bin() -> str:
    """$HAPROXY_BIN, else `haproxy` on PATH, else Debian's /usr/sbin/haproxy."""
    found = os.environ.get("HAPROXY_BIN") or shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.access(found, os.X_OK):
        raise NetnsError(f"no HAProxy at {found} (apt-get install haproxy, or set HAPROXY_BIN)")
    return found


@contextlib.contextmanager
def host_lock():
    """Serialise subnet choice and stale cleanup between test processes on this machine."""
    with open(LOCK_PATH, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tag_is_stale(tag: str) -> bool:
    """A tag whose topology can no longer be open: its pid is gone, or it is ours but closed."""
    pid = int(TAG_RE.match(tag).group("pid"))
    if pid == os.getpid():
        return tag not in _active_tags
    return not pid_alive(pid)


def netns_names() -> list[str]:
    """Every named network namespace (`ip netns list` prints 'NAME (id: N)' or 'NAME')."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def root_link_names() -> list[str]:
    """Every interface of the root namespace, without the '@peer' suffix."""
    names = []
    for line in ip("-o", "link", "show").splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def kill_namespace_processes(ns: str, deadline_s: float = 5.0) -> None:
    """SIGKILL every process inside namespace ns and wait until they are gone."""
    pids = [int(p) for p in ip("netns", "pids", ns, check=False).split() if p.isdigit()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + deadline_s
    while any(pid_alive(p) and not is_zombie(p) for p in pids):
        if time.monotonic() > deadline:
            raise NetnsError(f"processes {pids} in {ns} survived SIGKILL for {deadline_s}s")
        time.sleep(0.01)


def is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def delete_namespace(ns: str) -> None:
    """Kill what runs in ns, then delete it (its veths go with it, and so do their peers)."""
    kill_namespace_processes(ns)
    ip("netns", "del", ns, check=False)
    if ns in netns_names():
        raise NetnsError(f"could not delete network namespace {ns}")


def remove_stale() -> None:
    """Remove the namespaces, root veths and folders of topologies whose process is gone (a
    crashed run)."""
    for ns in netns_names():
        m = NS_RE.match(ns)
        if m and tag_is_stale(m.group("tag")):
            delete_namespace(ns)
    for link in root_link_names():
        m = ROOT_LINK_RE.match(link)
        if m and tag_is_stale(m.group("tag")):
            ip("link", "del", link, check=False)
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = DIR_RE.match(name)
        if m and tag_is_stale(m.group("tag")):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def used_networks() -> list[ipaddress.IPv4Network]:
    """The IPv4 networks of the root namespace's addresses and main-table routes."""
    nets = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        fields = line.split()
        if "inet" in fields:
            nets.append(ipaddress.ip_network(fields[fields.index("inet") + 1], strict=False))
    for line in ip("-4", "route", "show", "table", "main").splitlines():
        dest = line.split()[0] if line.split() else "default"
        if dest != "default":
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.ip_network(dest, strict=False))
    return nets


def pick_subnet() -> int:
    """X of a 10.77.X.0/24 that overlaps nothing in the root namespace (call under host_lock)."""
    used = used_networks()
    start = os.getpid() % 254
    for i in range(254):
        x = (start + i) % 254 + 1
        net = ipaddress.ip_network(f"{SUBNET_BASE}.{x}.0/24")
        if not any(net.overlaps(u) for u in used):
            return x
    raise NetnsError(f"every {SUBNET_BASE}.X.0/24 overlaps an address or route of this machine")


def wait_port(ip_addr: str, port: int, timeout: float, alive=lambda: True) -> bool:
    """Poll until ip:port accepts a TCP connection (True), the deadline passes or alive() is
    False (False). Polls every 20 ms: a local listener comes up in milliseconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive():
        try:
            socket.create_connection((ip_addr, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


# --------------------------------------------------------------------------
# percore and HAProxy inside a namespace


def without_follow(args: list[str]) -> list[str]:
    """args less --follow and its companions (each with its value but --follow-insecure)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("--follow", "--follow-token-file", "--follow-ca-file"):
            skip = True
        elif a != "--follow-insecure":
            out.append(a)
    return out


class NetnsServer(Server):
    """percore_client.Server, started through `ip netns exec NS` on HOST:PORT.

    Server.__init__ builds and starts its own command line, so this sets the same fields itself;
    everything else (wait_ready, stop, kill, stop_and_check, stderr, cleanup) is Server's.
    `ip netns exec` execs the command in place, so the pid is percore's own and signals reach it."""

    def __init__(self, netns: str, listen: str, data: str, shards: int | None, args=(),
                 env: dict | None = None):
        self.shards = shards
        self._tmp = None
        self.data = data
        self.tls_context = None
        cmd = [percore_bin(), "serve", "--listen", listen, "--data", data]
        if shards is not None:
            cmd += ["--shards", str(shards)]
        self.cmd = cmd + list(args)
        self.stderr_file = tempfile.TemporaryFile(prefix="percore-stderr-")
        self.proc = subprocess.Popen(["ip", "netns", "exec", netns] + self.cmd,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.stderr_file, env=server_env(env))
        percore_client._live.append(self.proc)   # killed at exit even if nobody closes us
        self.stdout_rest = b""
        self.ready_line = None
        self.port = None
        self.ip = listen.rsplit(":", 1)[0]
        self._drain = None
        self.returncode = None

    def conn(self, timeout: float = percore_client.SOCK_TIMEOUT) -> Conn:
        return Conn(self.port, host=self.ip, timeout=timeout)


class Board:
    """percore serving on one host of a topology; survives restarts (same data, same args).

    host, ip, port, data (the data directory), url ('http://IP:PORT'), admin_token (from
    DATA/admin.token: auth is on, the listen address is not loopback, SPEC sections 1 and 7),
    server (the NetnsServer of the current process)."""

    def __init__(self, topo: "Topology", host: str, args: list[str], data: str, port: int,
                 shards: int | None):
        self.topo, self.host, self.args, self.data = topo, host, args, data
        self.ip, self.port, self.shards = topo.addr(host), port, shards
        self.server: NetnsServer | None = None
        self.admin_token: str | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}"

    @property
    def tls_url(self) -> str | None:
        """'https://IP:PORT' when the board also serves HTTPS (start_percore(tls=True))."""
        tls_port = self.server.tls_port if self.server is not None else None
        return f"https://{self.ip}:{tls_port}" if tls_port else None

    def replication_token(self) -> str:
        """A fresh replication token of this board (POST /_replication/tokens, SPEC 7)."""
        with self.server.conn() as c:
            r = c.request("POST", "/_replication/tokens", {"Authorization": f"Bearer {self.admin_token}"}, b"{}")
        if r.status != 201:
            raise NetnsError(f"POST /_replication/tokens on {self.host}: {r.status} {r.body!r}")
        return r.json()["token"]

    def start(self) -> "Board":
        """Start percore and wait for its ready line; ServerError (with stderr) when it fails."""
        if self.server is not None:
            self.server.cleanup()        # the previous process: killed if it still runs, pipes freed
            self.server = None
        server = NetnsServer(self.topo.netns(self.host), f"{self.ip}:{self.port}", self.data,
                             self.shards, self.args)
        try:
            server.wait_ready()
        except BaseException:
            server.cleanup()
            raise
        self.server = server
        self.port = server.port          # the real one when port 0 was asked
        with open(os.path.join(self.data, "admin.token")) as f:
            self.admin_token = f.read().strip()
        return self

    def running(self) -> bool:
        return self.server is not None and self.server.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM; ServerError unless it exits 0 within 5 s (SPEC section 1)."""
        if self.server is not None:
            self.server.stop_and_check()

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut would stop it."""
        if self.server is not None:
            self.server.kill()

    def restart(self) -> "Board":
        """Stop it cleanly if it still runs, then start it again on the same data and port."""
        if self.running():
            self.stop()
        return self.start()

    def promote(self) -> "Board":
        """SPEC section 10's manual promotion: stop it (SIGTERM, exit 0) and start it again on its
        data without --follow and its companions: a primary with what it holds."""
        self.stop()
        self.args = without_follow(self.args)
        return self.start()

    def follow(self, primary: "Board") -> "Board":
        """Stop it if it runs, then start it again on its data as a follower of primary
        (Topology.follow_args), whatever it followed before."""
        if self.running():
            self.stop()
        self.args = self.topo.follow_args(self.host, primary) + without_follow(self.args)
        return self.start()

    def close(self) -> None:
        """Kill it and free its pipes (teardown; no exit-code check)."""
        if self.server is not None:
            self.server.cleanup()

    def stderr(self) -> str:
        return self.server.stderr() if self.server is not None else ""

    def conn(self, timeout: float = percore_client.SOCK_TIMEOUT) -> Conn:
        return Conn(self.port, host=self.ip, timeout=timeout)


class HAProxy:
    """`haproxy -f CFG -db` (foreground) on one host; its stdout and stderr go to log_path."""

    def __init__(self, proc: subprocess.Popen, ip_addr: str, port: int, cfg_path: str,
                 log_path: str):
        self.proc, self.ip, self.port = proc, ip_addr, port
        self.cfg_path, self.log_path = cfg_path, log_path

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def conn(self, timeout: float = percore_client.SOCK_TIMEOUT) -> Conn:
        return Conn(self.port, host=self.ip, timeout=timeout)

    def stop(self) -> None:
        """SIGTERM (HAProxy's hard stop), SIGKILL after 5 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=HAPROXY_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def etcd_bin() -> str:
    """$ETCD_BIN, else `etcd` on PATH, else Debian's /usr/bin/etcd (etcd-server)."""
    found = os.environ.get("ETCD_BIN") or shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(found, os.X_OK):
        raise NetnsError(f"no etcd at {found} (apt-get install etcd-server, or set ETCD_BIN)")
    return found


class Etcd:
    """An etcd cluster of one member per host (Topology.start_etcd), SPEC section 12's existing
    cluster of three. Members keep their data folders across stop()/start(), as a restarted
    machine would; close() (through the topology) kills them all."""

    def __init__(self, topo: "Topology", hosts: list[str]):
        self.topo, self.hosts = topo, list(hosts)
        self.procs: dict[str, subprocess.Popen] = {}
        self.initial = ",".join(f"{h}=http://{topo.addr(h)}:{ETCD_PEER_PORT}" for h in self.hosts)

    def client_url(self, host: str) -> str:
        return f"http://{self.topo.addr(host)}:{ETCD_CLIENT_PORT}"

    @property
    def endpoints(self) -> str:
        """Every member's client URL, comma-separated: percore's --cluster value."""
        return ",".join(self.client_url(h) for h in self.hosts)

    def start(self, host: str) -> None:
        """Start host's member (a member that ran before rejoins from its data folder: etcd
        ignores --initial-cluster then); returns at once, see wait_healthy."""
        if self.running(host):
            return
        folder = self.topo.host_dir(host)
        a = self.topo.addr(host)
        argv = [etcd_bin(), "--name", host, "--data-dir", os.path.join(folder, "etcd"),
                "--listen-client-urls", self.client_url(host), "--advertise-client-urls", self.client_url(host),
                "--listen-peer-urls", f"http://{a}:{ETCD_PEER_PORT}",
                "--initial-advertise-peer-urls", f"http://{a}:{ETCD_PEER_PORT}",
                "--initial-cluster", self.initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.topo.tag, "--logger", "zap", "--log-outputs", "stderr"]
        with open(os.path.join(folder, "etcd.log"), "ab") as log:
            self.procs[host] = self.topo.popen(host, argv, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, host: str) -> None:
        """SIGKILL host's member (a machine lost), waited for."""
        proc = self.procs.get(host)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)

    def running(self, host: str) -> bool:
        proc = self.procs.get(host)
        return proc is not None and proc.poll() is None

    def healthy(self, host: str) -> bool:
        """GET /health on host's member says {"health":"true"} (it has a leader and a quorum)."""
        import urllib.request
        try:
            with urllib.request.urlopen(self.client_url(host) + "/health", timeout=1.0) as r:
                return b'"true"' in r.read()
        except OSError:
            return False

    def wait_healthy(self, hosts: list[str] | None = None, timeout: float = ETCD_START_TIMEOUT) -> None:
        """Wait until every running member of hosts (default: all) answers /health; NetnsError
        with the log tails when one does not in time."""
        hosts = [h for h in (hosts or self.hosts)]
        deadline = time.monotonic() + timeout
        while not all(self.healthy(h) for h in hosts):
            dead = [h for h in hosts if not self.running(h)]
            if dead or time.monotonic() > deadline:
                raise NetnsError(f"etcd members {hosts} not healthy within {timeout}s "
                                 f"(exited: {dead}): {self.logs()[-3000:]}")
            time.sleep(0.1)

    def logs(self) -> str:
        out = []
        for h in self.hosts:
            with contextlib.suppress(OSError), open(os.path.join(self.topo.host_dir(h), "etcd.log"), "rb") as f:
                out.append(f"--- {h}\n" + f.read().decode("utf-8", "replace")[-1500:])
        return "\n".join(out)


BIND_RE = re.compile(r"^\s*bind\s+\S*?:(?P<port>\d+)\b", re.MULTILINE)


# --------------------------------------------------------------------------
# The topology


class Topology:
    """Hosts as network namespaces on one bridge; see the module docstring. Use as a context
    manager, or call close() (idempotent) yourself."""

    def __init__(self, hosts: list[str]):
        require_root()
        bad = [h for h in hosts if not HOST_RE.match(h)]
        if bad or len(set(hosts)) != len(hosts) or not 0 < len(hosts) < ROOT_OCTET:
            raise NetnsError(f"hosts must be 1-253 distinct names of [a-z0-9]{{1,16}}: {hosts}")
        self.tag = f"pc{os.getpid()}x{next(_counter)}"
        self.hosts = list(hosts)
        self.switch = f"{self.tag}.switch"
        self.root_link = f"{self.tag}r"
        if len(self.root_link) >= IFNAMSIZ:
            raise NetnsError(f"interface name {self.root_link!r} is longer than {IFNAMSIZ - 1} bytes")
        self._subnet: int | None = None
        self._procs: list[subprocess.Popen] = []
        self._boards: list[Board] = []
        self._haproxies: list[HAProxy] = []
        self._closed = False
        self._tmp = tempfile.TemporaryDirectory(prefix=f"percore-{self.tag}-")
        self.dir = self._tmp.name
        _active_tags.add(self.tag)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- building
    def _build(self) -> None:
        with host_lock():
            remove_stale()
            self._subnet = pick_subnet()
            self._make_switch()
            self._make_root_port()      # publishes the /24 to the next pick_subnet()
        for i, host in enumerate(self.hosts, 1):
            self._make_host(host, i)

    def _make_switch(self) -> None:
        ip("netns", "add", self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")

    def _make_root_port(self) -> None:
        ip("link", "add", self.root_link, "type", "veth", "peer", "name", "r", "netns", self.switch)
        ip("-n", self.switch, "link", "set", "r", "master", "br0", "up")
        ip("addr", "add", f"{SUBNET_BASE}.{self._subnet}.{ROOT_OCTET}/24", "dev", self.root_link)
        ip("link", "set", self.root_link, "up")

    def _make_host(self, host: str, index: int) -> None:
        ns = self.netns(host)
        ip("netns", "add", ns)
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", self.switch, "link", "add", f"v{index}", "type", "veth",
           "peer", "name", "eth0", "netns", ns)
        ip("-n", self.switch, "link", "set", f"v{index}", "master", "br0", "up")
        ip("-n", ns, "addr", "add", f"{self.addr(host)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")

    # -- names and addresses
    def netns(self, host: str) -> str:
        """The namespace name of host."""
        if host not in self.hosts:
            raise NetnsError(f"no host {host!r} in this topology {self.hosts}")
        return f"{self.tag}-{host}"

    def addr(self, host: str) -> str:
        """host's IPv4 address (10.77.X.n, n its 1-based place in the host list)."""
        self.netns(host)
        return f"{SUBNET_BASE}.{self._subnet}.{self.hosts.index(host) + 1}"

    @property
    def root_addr(self) -> str:
        """The test process's own address on the bridge."""
        return f"{SUBNET_BASE}.{self._subnet}.{ROOT_OCTET}"

    def board_certificate(self, host: str) -> tuple[str, str]:
        """(cert, key): a self-signed P-256 certificate for host's address (an IP SAN, as an
        operator makes one for a board), made once in host's folder."""
        folder = self.host_dir(host)
        cert, key = os.path.join(folder, "tls-cert.pem"), os.path.join(folder, "tls-key.pem")
        if not os.path.exists(cert):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                            "-nodes", "-days", "2", "-subj", f"/CN={host}",
                            "-addext", f"subjectAltName=IP:{self.addr(host)}", "-keyout", key, "-out", cert],
                           check=True, capture_output=True)
        return cert, key

    def host_dir(self, host: str) -> str:
        """A folder for host's files (data, configs, logs), removed by close()."""
        path = os.path.join(self.dir, host)
        os.makedirs(path, exist_ok=True)
        return path

    # -- processes
    def popen(self, host: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start argv inside host's namespace (stdin /dev/null unless given); killed by close()."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(["ip", "netns", "exec", self.netns(host)] + list(argv), **kw)
        self._procs.append(proc)
        return proc

    def run(self, host: str, argv: list[str], timeout: float = 10.0,
            check: bool = True) -> subprocess.CompletedProcess:
        """Run argv inside host's namespace to completion, output captured; NetnsError when it
        fails (and check) or outlives timeout."""
        try:
            done = subprocess.run(["ip", "netns", "exec", self.netns(host)] + list(argv),
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise NetnsError(f"{argv} on {host} ran past {timeout}s (stdout={e.stdout!r})") from None
        if check and done.returncode != 0:
            raise NetnsError(f"{argv} on {host} exited {done.returncode}: {done.stderr!r}")
        return done

    def start_percore(self, host: str, args=(), data: str | None = None,
                      port: int = PERCORE_PORT, shards: int | None = None,
                      follow: Board | None = None, tls: bool = False) -> Board:
        """`percore serve --listen IP:PORT --data DATA --shards N ARGS` inside host, ready.

        data defaults to <topology dir>/<host>/data (kept across restarts, removed by close());
        shards to PERCORE_TEST_SHARDS; tls=True adds `--tls-listen IP:8443` with a certificate
        for the board's address (board_certificate). follow=a primary Board adds `--follow URL
        --follow-token-file F` (follow_args)."""
        args = list(args)
        if tls:
            cert, key = self.board_certificate(host)
            args += ["--tls-listen", f"{self.addr(host)}:{PERCORE_TLS_PORT}", "--tls-cert", cert, "--tls-key", key]
        if follow is not None:
            args = self.follow_args(host, follow) + args
        board = Board(self, host, args, data or os.path.join(self.host_dir(host), "data"), port,
                      env_shards() if shards is None else shards)
        self._boards.append(board)
        return board

    def follow_args(self, host: str, primary: Board) -> list[str]:
        """`--follow URL --follow-token-file F` for a board on host to follow primary: F a 0600 file
        of host's folder holding a fresh replication token of primary (SPEC 7, 10); URL its https://
        one with `--follow-ca-file` when it serves TLS, else its http:// one with
        `--follow-insecure` (the boards are namespaces of this one machine)."""
        token_file = os.path.join(self.host_dir(host), "follow.token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(primary.replication_token() + "\n")
        if primary.tls_url:
            secure = ["--follow", primary.tls_url, "--follow-ca-file", self.board_certificate(primary.host)[0]]
        else:
            secure = ["--follow", primary.url, "--follow-insecure"]
        return secure + ["--follow-token-file", token_file]

    def start_haproxy(self, host: str, cfg_text: str, files: dict[str, str] | None = None,
                      port: int | None = None) -> HAProxy:
        """Write cfg_text (as haproxy.cfg) and files (name -> text, e.g. map files) into one folder,
        run `haproxy -f haproxy.cfg -db` inside host and wait until ip:port accepts (port: the
        first `bind` line's unless given). NetnsError with HAProxy's output when it does not."""
        folder = os.path.join(self.host_dir(host), f"haproxy{len(self._haproxies)}")
        os.makedirs(folder)
        for name, text in {**(files or {}), "haproxy.cfg": cfg_text}.items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        if port is None:
            m = BIND_RE.search(cfg_text)
            if not m:
                raise NetnsError("no `bind ...:PORT` line in the HAProxy config; pass port=")
            port = int(m.group("port"))
        cfg, log_path = os.path.join(folder, "haproxy.cfg"), os.path.join(folder, "haproxy.log")
        with open(log_path, "wb") as log:
            proc = self.popen(host, [haproxy_bin(), "-f", cfg, "-db"], stdout=log,
                              stderr=subprocess.STDOUT)
        haproxy = HAProxy(proc, self.addr(host), port, cfg, log_path)
        self._haproxies.append(haproxy)
        if not wait_port(haproxy.ip, port, HAPROXY_START_TIMEOUT, lambda: proc.poll() is None):
            how = (f"exited {proc.returncode} before accepting" if proc.poll() is not None
                   else f"did not accept within {HAPROXY_START_TIMEOUT}s")
            raise NetnsError(f"HAProxy on {host} ({haproxy.ip}:{port}) {how}: "
                             f"{haproxy.log()[-2000:]}")
        return haproxy

    def start_etcd(self, hosts: list[str]) -> Etcd:
        """An etcd cluster of one member on each of hosts (three for SPEC section 12), started
        together and waited for until every member answers /health; killed by close()."""
        etcd = Etcd(self, hosts)
        for host in hosts:
            etcd.start(host)
        etcd.wait_healthy()
        return etcd

    # -- teardown
    def close(self) -> None:
        """Kill every process this topology started, delete every namespace and link it made and
        its folder. Idempotent; NetnsError if something could not be removed."""
        if self._closed:
            return
        self._closed = True
        errors = []
        try:
            self._stop_processes()
            existing = set(netns_names())
            for ns in [self.netns(h) for h in self.hosts] + [self.switch]:
                try:
                    if ns in existing:
                        delete_namespace(ns)
                except NetnsError as e:
                    errors.append(str(e))
            if self.root_link in root_link_names():
                ip("link", "del", self.root_link, check=False)
        finally:
            # what is left now is a crashed run's for the next Topology's remove_stale()
            _active_tags.discard(self.tag)
            self._tmp.cleanup()
        if errors:
            raise NetnsError("; ".join(errors))

    def _stop_processes(self) -> None:
        """HAProxy (SIGTERM), percore (SIGKILL: a clean stop is the test's to check) and every
        other process of popen() (SIGKILL), each waited for."""
        for haproxy in self._haproxies:
            haproxy.stop()
        for board in self._boards:
            board.close()
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

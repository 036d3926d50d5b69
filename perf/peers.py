"""The servers perf/compare runs side by side: percore and the peers a user would otherwise pick,
each started fresh on its own CPU with a config from perf/peers/, stopped after each run.

A server has a name, a protocol ("http" for the HTTP/1.1 servers percore-load drives, "etcd" for
etcd's JSON gateway, "redis" for RESP), start(cpus) returning once the port answers, pids()
(the whole process tree, for CPU and RSS), and stop(). Static file peers serve the files the
workload wrote under <root>/bench/kN (and /list/ for the autoindex peer)."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from benchlib import HERE, free_port, wait_port

PEERS = os.path.join(HERE, "peers")
START_TIMEOUT_S = 20


def fill(template, out_path, **values):
    with open(os.path.join(PEERS, template)) as f:
        text = f.read()
    for k, v in values.items():
        text = text.replace(f"@{k}@", str(v))
    with open(out_path, "w") as f:
        f.write(text)
    return out_path


def process_tree(pid):
    """pid and all its descendants (nginx's worker, h2o's helpers)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class Server:
    protocol = "http"
    label = None

    def __init__(self, workdir):
        self.workdir = workdir
        self.proc = None
        self.port = None

    def pids(self):
        return process_tree(self.proc.pid) if self.proc and self.proc.poll() is None else []

    def _spawn(self, cpus, argv, **kw):
        self.proc = subprocess.Popen(["taskset", "-c", cpus] + argv, stdin=subprocess.DEVNULL,
                                     stdout=kw.pop("stdout", subprocess.DEVNULL), stderr=subprocess.DEVNULL, **kw)

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                for p in process_tree(self.proc.pid):
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                self.proc.wait(5)
        self.proc = None

    def title(self):
        return self.label or self.name


class Percore(Server):
    name = "percore"

    def __init__(self, workdir, binary, shards=1, tls=None, name="percore"):
        super().__init__(workdir)
        self.binary, self.shards, self.tls, self.name = binary, shards, tls, name
        if shards != 1:
            self.label = f"{name} ×{shards}"
        self.tls_port = None

    def start(self, cpus, root):
        data = tempfile.mkdtemp(prefix="percore-", dir=self.workdir)
        argv = [self.binary, "serve", "--listen", "127.0.0.1:0", "--shards", str(self.shards), "--data", data]
        if self.tls:
            argv += ["--tls-listen", "127.0.0.1:0", "--tls-cert", self.tls[0], "--tls-key", self.tls[1]]
        self._spawn(cpus, argv, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+) shards=", line)
        if not m:
            raise RuntimeError(f"percore did not start: {line!r}")
        self.port = int(m.group(1))
        t = re.search(r"https://[^\s:]+:(\d+)", line)
        self.tls_port = int(t.group(1)) if t else None


class Ceiling(Server):
    """perf/ceiling: a fixed answer from one epoll thread, the most any HTTP server can do here."""
    name = "ceiling"

    def __init__(self, workdir, binary, size):
        super().__init__(workdir)
        self.binary, self.size = binary, size

    def start(self, cpus, root):
        self._spawn(cpus, [self.binary, "--listen", "127.0.0.1:0", "--size", str(self.size)],
                    stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+)\s*$", line)
        if not m:
            raise RuntimeError(f"percore-ceiling did not start: {line!r}")
        self.port = int(m.group(1))


class Nginx(Server):
    name = "nginx"

    def start(self, cpus, root):
        d = tempfile.mkdtemp(prefix="nginx-", dir=self.workdir)
        self.port = free_port()
        user = "user root;" if os.getuid() == 0 else ""
        conf = fill("nginx.conf.in", os.path.join(d, "nginx.conf"), PORT=self.port, ROOT=root, DIR=d, USER_LINE=user)
        self._spawn(cpus, ["nginx", "-e", os.path.join(d, "error.log"), "-p", d, "-c", conf])
        wait_port(self.port, START_TIMEOUT_S)

    def stop(self):
        # SIGQUIT is nginx's graceful stop; SIGTERM (fast) is fine for a benchmark too.
        super().stop()


class NginxTls(Server):
    name = "nginx"
    label = "nginx (TLS)"

    def __init__(self, workdir, tls):
        super().__init__(workdir)
        self.tls = tls

    def start(self, cpus, root):
        d = tempfile.mkdtemp(prefix="nginx-tls-", dir=self.workdir)
        self.port = self.tls_port = free_port()
        user = "user root;" if os.getuid() == 0 else ""
        conf = fill("nginx-tls.conf.in", os.path.join(d, "nginx.conf"), PORT=self.port, ROOT=root, DIR=d,
                    USER_LINE=user, CERT=self.tls[0], KEY=self.tls[1])
        self._spawn(cpus, ["nginx", "-e", os.path.join(d, "error.log"), "-p", d, "-c", conf])
        wait_port(self.port, START_TIMEOUT_S)


class H2o(Server):
    name = "h2o"

    def start(self, cpus, root):
        d = tempfile.mkdtemp(prefix="h2o-", dir=self.workdir)
        self.port = free_port()
        user = os.environ.get("USER", "root") if os.getuid() == 0 else os.environ.get("USER", "nobody")
        conf = fill("h2o-static.conf.in", os.path.join(d, "h2o.conf"), PORT=self.port, ROOT=root,
                    LOG=os.path.join(d, "error.log"), USER=user)
        self._spawn(cpus, ["h2o", "-c", conf])
        wait_port(self.port, START_TIMEOUT_S)


class Lighttpd(Server):
    name = "lighttpd"

    def start(self, cpus, root):
        d = tempfile.mkdtemp(prefix="lighttpd-", dir=self.workdir)
        self.port = free_port()
        conf = fill("lighttpd.conf.in", os.path.join(d, "lighttpd.conf"), PORT=self.port, ROOT=root, DIR=d)
        self._spawn(cpus, ["lighttpd", "-D", "-f", conf])
        wait_port(self.port, START_TIMEOUT_S)


class Redis(Server):
    name = "redis"
    label = "redis (AOF always)"
    protocol = "redis"

    def start(self, cpus, root):
        d = tempfile.mkdtemp(prefix="redis-", dir=self.workdir)
        self.port = free_port()
        conf = fill("redis.conf.in", os.path.join(d, "redis.conf"), PORT=self.port, DIR=d)
        self._spawn(cpus, ["redis-server", conf])
        wait_port(self.port, START_TIMEOUT_S)


class Etcd(Server):
    name = "etcd"
    protocol = "etcd"

    def start(self, cpus, root):
        d = tempfile.mkdtemp(prefix="etcd-", dir=self.workdir)
        self.port = free_port()
        peer = free_port()
        conf = fill("etcd.conf.yml.in", os.path.join(d, "etcd.conf.yml"), PORT=self.port, PEER_PORT=peer, DIR=d)
        self._spawn(cpus, ["etcd", "--config-file", conf])
        wait_port(self.port, START_TIMEOUT_S)
        # the gateway answers before the member has elected itself; wait for a write to pass
        deadline = time.time() + START_TIMEOUT_S
        import json, base64, urllib.request
        body = json.dumps({"key": base64.b64encode(b"ready").decode(), "value": ""}).encode()
        while True:
            try:
                urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/v3/kv/put", data=body),
                                       timeout=2).read()
                return
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("etcd did not accept a write")
                time.sleep(0.1)


def make_certificate(folder):
    """A self-signed P-256 certificate for 127.0.0.1, as the TLS workloads' servers share it."""
    cert, key = os.path.join(folder, "bench.crt"), os.path.join(folder, "bench.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def make(name, workdir, tools, size, tls=None):
    if name in ("percore", "percore-base"):   # percore-base: another build of percore (--baseline)
        return Percore(workdir, tools[name], tls=tls, name=name)
    if tls and name == "nginx":
        return NginxTls(workdir, tls)
    if name == "ceiling":
        return Ceiling(workdir, tools["ceiling"], size)
    return {"nginx": Nginx, "h2o": H2o, "lighttpd": Lighttpd, "redis": Redis, "etcd": Etcd}[name](workdir)


BINARIES = {"nginx": "nginx", "h2o": "h2o", "lighttpd": "lighttpd", "redis": "redis-server", "etcd": "etcd"}
PACKAGES = {"nginx": "nginx-light", "h2o": "h2o", "lighttpd": "lighttpd", "redis": "redis-server redis-tools",
            "etcd": "etcd-server"}


def missing_peers(names):
    return [n for n in names if n in BINARIES and not shutil.which(BINARIES[n])]

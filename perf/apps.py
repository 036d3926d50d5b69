"""perf/compare's `apps` workload (issue 13; SPEC §7: apps, tokens, quotas, isolation).

Four steps, each against percore alone, server on the server CPUs and every load generator on
the load CPUs (as the other workloads), `--durability sync`, rounds in rotated order:

  isolation  app A flooded by 64 keep-alive connections (64 B GETs of 100 prepared documents,
             then durable 16 B PUTs to 10,000 keys), app B one connection at a fixed rate
             (percore-load --rate: each request has an intended send time and its latency runs
             from it, so a stalled server cannot hide its delay). Setup `one`: one percore
             process serves both apps; setup `two`: A and B each get their own percore process
             (own data directory and port, the same --shards, pinned to the same server CPUs).
             Reported: B's p50/p99/p99.9 and A's throughput; goal one/two p99 <= 0.5 (SPEC's bound
             1.5). A is driven by percore-load and, in a second series, by wrk (perf/apps.lua); B
             is always percore-load: wrk has no fixed-rate mode.
  busy       A and B both flooded (32 connections each): summed throughput and requests per
             server-CPU-second of one process against two; goal within 10%. Both generators.
  idle       1,000 apps created on one server (PUT /_apps/app0001 {"quota":{}} ...): RSS and
             threads before and after; goal <= 16 KiB per app and no extra thread.
  auth       64 keep-alive connections of 64 B GETs with --auth on (a read token of the app on
             every request) against --auth off: requests per server-CPU-second; goal within 5%.
             Both generators (wrk: the token in the environment of perf/apps.lua).

Apps are reached as SPEC §7 says: with auth off implicitly by the first write; with auth on the
server admin (DATA/admin.token) creates each app and a token for it (`--apps-auth on` runs the
isolation, busy and idle steps that way; `auth` always measures both). Whatever needs an API the
server does not have yet (--auth, /_apps/) fails loudly with "API missing: ...", is recorded as
such and never given a figure. A server that does not know --auth at all is started without it
for the auth-off steps (SPEC: --auth auto is off on loopback, which is what it then does).

Rows (JSON lines with run, commit, machine and command) go to the run's own file,
perf/results/apps/<run id>.jsonl (perf/compare's run id; perf/benchlib.py); perf/report.py renders
them into docs/perf/README.md."""
import http.client
import json
import math
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from benchlib import HERE, TICKS, parse_wrk

NAME = "apps"
STEPS = ("isolation", "busy", "idle", "auth")
GENERATORS = ("percore-load", "wrk")
LUA = os.path.join(HERE, "apps.lua")
A_APP, B_APP = "app-a", "app-b"
# What A and B send: small documents to read (prepared first), then durable 16 B writes.
KINDS = {
    "read": {"size": 64, "keys": 100, "mix": "get:100,put:0", "method": "GET", "prepare": True},
    "write": {"size": 16, "keys": 10000, "mix": "get:0,put:100", "method": "PUT", "prepare": False},
}
B_RATE = {"read": 1000, "write": 200}   # B's fixed rate, requests/s: modest beside A's flood
FLOOD_CONNECTIONS = 64                  # isolation: A
BUSY_CONNECTIONS = 32                   # busy: A and B each
AUTH_CONNECTIONS = 64
IDLE_APPS = 1000
LEAD_S = 0.3                            # isolation: A floods this long before B starts and after B ends
WARMUP_S = 0.5
PREPARE_CONNECTIONS = 8
START_TIMEOUT_S = 20
BUSY_SHARE = 0.8                        # a read flood below this share of the server CPUs: a busy machine
GOALS = {"isolation_p99_ratio": 0.5, "spec_p99_ratio": 1.5, "busy_within": 0.10,
         "idle_kib_per_app": 16, "auth_within": 0.05}


class ApiMissing(RuntimeError):
    """The server lacks an API a step needs; str() starts with 'API missing: '."""

    def __init__(self, what):
        super().__init__(f"API missing: {what}")


def say(text):
    print(text, file=sys.stderr, flush=True)


def redact(text):
    """Commands and answers as they may be printed: bearer tokens blanked."""
    return re.sub(r"(Bearer\s+)\S+", r"\1<token>", re.sub(r'("token"\s*:\s*")[^"]*', r"\1<token>", text))


_PROBE_PRIORITY = None


def probe_priority():
    """The prefix that runs B's fixed-rate probe as a real-time task (SCHED_FIFO 20) on the load
    CPUs, where A's flood generator keeps them 95-99% busy: then a wake-up of the probe preempts
    the generator, and B's latency is the server's, not the probe's own wait for a CPU (on the
    2-CPU machine, 2-5 ms of B's p99 in both setups, docs/perf/apps.md). [] where chrt is refused
    (no CAP_SYS_NICE): the probe then shares the CPUs as before, and the row says so."""
    global _PROBE_PRIORITY
    if _PROBE_PRIORITY is None:
        ok = shutil.which("chrt") and subprocess.run(["chrt", "-f", "20", "true"], stdout=subprocess.DEVNULL,
                                                     stderr=subprocess.DEVNULL).returncode == 0
        _PROBE_PRIORITY = ["chrt", "-f", "20"] if ok else []
    return _PROBE_PRIORITY


def proc_status(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError):
        return 0.0


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class AppServer:
    """One percore process for this workload: its own data directory, --durability sync, --auth
    as asked (None: the flag is not given, for a server that does not know it)."""

    def __init__(self, workdir, binary, shards, auth):
        self.workdir, self.binary, self.shards, self.auth = workdir, binary, shards, auth
        self.proc = self.port = self.data = None

    def start(self, cpus):
        self.data = tempfile.mkdtemp(prefix="percore-apps-", dir=self.workdir)
        argv = [self.binary, "serve", "--listen", "127.0.0.1:0", "--shards", str(self.shards),
                "--data", self.data, "--durability", "sync"]
        if self.auth:
            argv += ["--auth", self.auth]
        self.stderr_path = self.data + ".stderr"
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(["taskset", "-c", cpus] + argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r":(\d+) shards=", line)
        if not m:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.stop()
            with open(self.stderr_path) as f:
                tail = f.read().strip()[-300:]
            self.proc = None
            if self.auth and "--auth" in tail:
                raise ApiMissing(f"percore serve --auth {self.auth}: the server refused it: {tail}")
            raise RuntimeError(f"percore did not start: {line!r} {tail}")
        self.port = int(m.group(1))
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def admin_token(self):
        path = os.path.join(self.data, "admin.token")
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                with open(path) as f:
                    token = f.read().strip()
                if token:
                    return token
            except OSError:
                pass
            time.sleep(0.05)
        raise ApiMissing(f"--auth on: no admin token in {path} (SPEC §1: --admin-token-file, DATA/admin.token)")

    def stop(self):
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


def request(conn, method, path, body=None, token=None):
    """One request on a keep-alive http.client connection; (status, body bytes)."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def one_request(port, method, path, body=None, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        return request(conn, method, path, body, token)
    finally:
        conn.close()


SYNC_RE = re.compile(r'^percore_sync_duration_seconds_(sum|count)\{[^}]*\} (\S+)$', re.M)


def sync_totals(server):
    """(fdatasyncs, their seconds) of the server's batches so far, summed over its shards, from
    /_metrics (the admin token when auth is on): what B's durable writes are measured against."""
    token = server.admin_token() if server.auth == "on" else None
    status, body = one_request(server.port, "GET", "/_metrics", token=token)
    if status != 200:
        raise RuntimeError(f"/_metrics answered {status}")
    totals = {"sum": 0.0, "count": 0.0}
    for kind, value in SYNC_RE.findall(body.decode()):
        totals[kind] += float(value)
    return int(totals["count"]), totals["sum"]


class Apps:
    """Runs the steps for perf/compare's Runner (its tools, CPUs, duration, rounds, meta, rows)."""

    def __init__(self, runner, steps, generators, auth_mode, out_path):
        self.r = runner
        self.args = runner.args
        self.steps = steps
        self.generators = [g for g in generators if g != "wrk" or self.have_wrk()]
        if "wrk" in generators and "wrk" not in self.generators:
            say("perf/compare: apps: wrk is missing (bash .ci/deps wrk); percore-load alone")
        self.auth_mode = auth_mode          # "off" or "on": how isolation, busy and idle reach apps
        self.auth_flag = None               # does the server know --auth? (learned at the first start)
        self.out = open(out_path, "a") if out_path else None
        self.shards = len(cpu_list(runner.server_cpus))
        self.load_threads = len(cpu_list(runner.load_cpus))

    @staticmethod
    def have_wrk():
        return bool(shutil.which("wrk"))

    def close(self):
        if self.out:
            self.out.close()

    # --- servers and apps -----------------------------------------------------------------

    def start(self, auth):
        """A started server with --auth `auth`; for "off" on a server without the flag, none."""
        if auth == "off" and self.auth_flag is False:
            return AppServer(self.r.workdir, self.r.tools["percore"], self.shards, None).start(self.r.server_cpus)
        try:
            s = AppServer(self.r.workdir, self.r.tools["percore"], self.shards, auth).start(self.r.server_cpus)
            self.auth_flag = True
            return s
        except ApiMissing:
            self.auth_flag = False
            if auth == "on":
                raise
            say("  (this percore has no --auth option: started without it, which on loopback is SPEC's auth off)")
            return AppServer(self.r.workdir, self.r.tools["percore"], self.shards, None).start(self.r.server_cpus)

    def open_app(self, server, app, scope):
        """Makes `app` usable on `server`: with auth on, the admin creates it and a token of
        `scope`; returns (token for the load or None, token for preparing or None)."""
        if server.auth != "on":
            return None, None   # auth off: an app is created by its first write
        admin = server.admin_token()
        status, body = one_request(server.port, "PUT", f"/_apps/{app}", b'{"quota":{}}', admin)
        if status not in (201, 204):
            raise ApiMissing(f"PUT /_apps/{app} {{\"quota\":{{}}}} with the admin token answered {status} "
                             f"{redact(body[:120].decode(errors='replace'))}")
        status, body = one_request(server.port, "POST", f"/_apps/{app}/tokens",
                                   json.dumps({"scope": scope}).encode(), admin)
        try:
            token = json.loads(body)["token"] if status == 201 else None
        except (ValueError, KeyError, TypeError):
            token = None
        if not token:
            raise ApiMissing(f"POST /_apps/{app}/tokens {{\"scope\":\"{scope}\"}} answered {status} "
                             f"{redact(body[:120].decode(errors='replace'))} (expected 201 {{\"id\":...,\"token\":...}})")
        return token, admin

    # --- load generators ------------------------------------------------------------------

    def load_job(self, port, app, kind, connections, duration, rate=None, token=None, prepare=False):
        k = KINDS[kind]
        cmd = ["taskset", "-c", self.r.load_cpus, self.r.tools["load"], "--url", f"http://127.0.0.1:{port}",
               "--connections", str(connections), "--threads", str(min(self.load_threads, connections)),
               "--duration", "0" if prepare else f"{duration:g}", "--keys", str(k["keys"]), "--size", str(k["size"]),
               "--app", app, "--json", "-"]
        if prepare:
            cmd += ["--prepare"]
        else:
            cmd += ["--mix", k["mix"]]
        if rate:
            cmd = probe_priority() + cmd + ["--rate", f"{rate:g}"]
        if token:
            cmd += ["--header", f"Authorization: Bearer {token}"]
        return {"generator": "percore-load", "cmd": cmd, "env": None, "duration": duration}

    def wrk_job(self, port, app, kind, connections, duration, token=None):
        k = KINDS[kind]
        seconds = max(1, math.ceil(duration))
        env = dict(os.environ, PERCORE_APP=app, PERCORE_KEYS=str(k["keys"]), PERCORE_METHOD=k["method"],
                   PERCORE_BYTES=str(k["size"]), PERCORE_AUTH=token or "")
        cmd = ["taskset", "-c", self.r.load_cpus, "wrk", f"-t{min(self.load_threads, connections)}",
               f"-c{connections}", f"-d{seconds}s", "--latency", "-s", LUA, f"http://127.0.0.1:{port}/"]
        return {"generator": "wrk", "cmd": cmd, "env": env, "duration": seconds}

    def flood_job(self, generator, *a, **kw):
        return self.wrk_job(*a, **kw) if generator == "wrk" else self.load_job(*a, **kw)

    @staticmethod
    def spawn(job):
        return subprocess.Popen(job["cmd"], env=job["env"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def collect(job, proc):
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{redact(shlex.join(job['cmd']))}: {redact(err.strip()[-500:])}")
        if job["generator"] == "wrk":
            r = parse_wrk(out)
            r["answered"] = r["requests_per_s"] * job["duration"]
            r["unanswered"] = r["due_unsent"] = None
            return r
        r = json.loads(out)
        return {k: r[k] for k in ("requests_per_s", "answered", "wrong", "first_wrong", "unanswered", "due_unsent",
                                 "latency_us")}

    def run(self, job):
        return self.collect(job, self.spawn(job))

    def prepare(self, server, app, kind, token):
        if not KINDS[kind]["prepare"]:
            return
        job = self.load_job(server.port, app, kind, PREPARE_CONNECTIONS, 0, token=token, prepare=True)
        r = self.run(job)
        if r["wrong"]:
            raise RuntimeError(f"preparing {app}: {r['first_wrong']}")

    # --- rows -----------------------------------------------------------------------------

    def record(self, step, rnd, **fields):
        if "server_cpu_s" in fields:
            fields["server_cpu_share"] = fields["server_cpu_s"] / max(fields["wall_s"], 1e-9) / self.shards
        row = dict(self.r.meta, workload=NAME, step=step, round=rnd, shards=self.shards,
                   duration_s=self.args.duration, auth_flag=self.auth_flag, **fields)
        self.r.rows.append(row)
        if self.out:
            self.out.write(json.dumps(row) + "\n")
            self.out.flush()
        return row

    def missing(self, step, e):
        say(f"  apps/{step}: {e}")
        self.r.failures.append(f"apps/{step}: {e}")
        self.record(step, 0, api_missing=str(e))

    # --- the steps ------------------------------------------------------------------------

    def run_all(self):
        for step in self.steps:
            say(f"apps/{step}: " + {"isolation": "B (1 connection, fixed rate) beside A flooded (64 connections): "
                                                   "one process vs two",
                                      "busy": "A and B flooded (32 connections each): one process vs two",
                                      "idle": f"{IDLE_APPS} idle apps: RSS and threads",
                                      "auth": "64 B GETs, 64 connections: --auth on (read token) vs off"}[step])
            try:
                getattr(self, "step_" + step)()
            except ApiMissing as e:
                self.missing(step, e)

    def pairs(self):
        """(kind, generator) pairs; the caller rotates the setups by round."""
        return [(k, g) for k in KINDS for g in self.generators]

    def step_isolation(self):
        for rnd in range(self.args.rounds):
            for kind, gen in self.pairs():
                for setup in rotate(("one", "two"), rnd):
                    self.guard("isolation", rnd, lambda: self.isolation(rnd, kind, gen, setup))

    def step_busy(self):
        for rnd in range(self.args.rounds):
            for kind, gen in self.pairs():
                for setup in rotate(("one", "two"), rnd):
                    self.guard("busy", rnd, lambda: self.busy(rnd, kind, gen, setup))

    def step_idle(self):
        for rnd in range(self.args.rounds):
            self.guard("idle", rnd, lambda: self.idle(rnd))

    def step_auth(self):
        self.probe_auth()
        for rnd in range(self.args.rounds):
            for gen in self.generators:
                for auth in rotate(("off", "on"), rnd):
                    self.guard("auth", rnd, lambda: self.auth_cost(rnd, gen, auth))

    def guard(self, step, rnd, fn):
        try:
            fn()
        except ApiMissing:
            raise
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError, http.client.HTTPException) as e:
            msg = redact(str(e))
            say(f"  apps/{step} r{rnd}: failed: {msg}")
            self.r.failures.append(f"apps/{step}: {msg}")

    def servers_for(self, setup):
        """{app: server}: one server for both apps, or one each; and the list of servers."""
        if setup == "one":
            s = self.start(self.auth_mode)
            return {A_APP: s, B_APP: s}, [s]
        a = self.start(self.auth_mode)
        try:
            b = self.start(self.auth_mode)
        except BaseException:
            a.stop()
            raise
        return {A_APP: a, B_APP: b}, [a, b]

    def setup_apps(self, by_app, kind):
        """Creates (auth on) and prepares A and B; {app: load token}."""
        tokens = {}
        for app, server in by_app.items():
            token, admin = self.open_app(server, app, "write")
            tokens[app] = token
            self.prepare(server, app, kind, admin or token)
        return tokens

    def measure_servers(self, servers):
        pids = [s.pid for s in servers]
        return sum(proc_cpu_s(p) for p in pids), pids

    def isolation(self, rnd, kind, gen, setup):
        by_app, servers = self.servers_for(setup)
        try:
            tokens = self.setup_apps(by_app, kind)
            a_port, b_port = by_app[A_APP].port, by_app[B_APP].port
            d = self.args.duration
            # warm-up: A's flood and B unthrottled, together
            wa = self.spawn(self.flood_job(gen, a_port, A_APP, kind, FLOOD_CONNECTIONS, WARMUP_S, token=tokens[A_APP]))
            self.run(self.load_job(b_port, B_APP, kind, 1, WARMUP_S, token=tokens[B_APP]))
            wa.communicate(timeout=600)
            idle_rss = sum(proc_status(s.pid, "VmRSS") for s in servers)
            a_job = self.flood_job(gen, a_port, A_APP, kind, FLOOD_CONNECTIONS, d + 2 * LEAD_S, token=tokens[A_APP])
            b_job = self.load_job(b_port, B_APP, kind, 1, d, rate=B_RATE[kind], token=tokens[B_APP])
            c0, _ = self.measure_servers(servers)
            g0, t0 = children_cpu_s(), time.time()
            a_proc = self.spawn(a_job)
            time.sleep(LEAD_S)
            syncs0 = [sync_totals(s) for s in servers] if kind == "write" else None
            b = self.run(b_job)
            syncs1 = [sync_totals(s) for s in servers] if kind == "write" else None
            a = self.collect(a_job, a_proc)
            wall = time.time() - t0
            gen_cpu = children_cpu_s() - g0
            c1, pids = self.measure_servers(servers)
            peak = sum(proc_status(p, "VmHWM") for p in pids)
        finally:
            for s in servers:
                s.stop()
        cpu = c1 - c0
        # A's latency histogram is never reported (B's is what isolation judges) and is most of a
        # row's bytes: its percentiles stay, its buckets are not kept.
        (a.get("latency_us") or {}).pop("buckets", None)
        syncs = None
        if syncs0:
            # the syncs while B ran: B's latency in syncs says how many it waits for (one process:
            # the batch in flight's and its own; two: its own log's)
            count = sum(n1 - n0 for (n0, _), (n1, _) in zip(syncs0, syncs1))
            seconds = sum(s1 - s0 for (_, s0), (_, s1) in zip(syncs0, syncs1))
            mean_us = seconds / count * 1e6 if count else None
            syncs = {"count": count, "mean_us": mean_us,
                     "b_p50_in_syncs": b["latency_us"]["p50"] / mean_us if mean_us else None,
                     "b_p99_in_syncs": b["latency_us"]["p99"] / mean_us if mean_us else None}
            say(f"    syncs while B ran: {count:,}, mean {mean_us or 0:,.0f} us; B's p50 = "
                f"{syncs['b_p50_in_syncs'] or 0:.2f} syncs, p99 = {syncs['b_p99_in_syncs'] or 0:.2f}")
        row = self.record("isolation", rnd, kind=kind, generator=gen, setup=setup,
                          a={"app": A_APP, "connections": FLOOD_CONNECTIONS, "duration_s": a_job["duration"], **a},
                          b={"app": B_APP, "connections": 1, "rate": B_RATE[kind], "duration_s": d,
                             "probe_priority": " ".join(probe_priority()[1:]) or "shared",
                             "intended": round(B_RATE[kind] * d), **b},
                          server_cpu_s=cpu, wall_s=wall,
                          per_cpu_s=(a["answered"] + b["answered"]) / cpu if cpu > 0 else None,
                          load_cpu_busy=gen_cpu / max(wall, 1e-9) / self.load_threads,
                          idle_rss_kib=idle_rss, peak_rss_kib=peak, syncs=syncs)
        lat = b["latency_us"]
        say(f"  isolation {kind:5s} r{rnd} A by {gen:12s} {setup}: B p50 {lat['p50']:7,.0f} us  p99 {lat['p99']:7,.0f} us"
              f"  p99.9 {lat['p99_9']:7,.0f} us  ({b['answered']:,} of {round(B_RATE[kind] * d):,} answered, {b['due_unsent']} due but unsent, wrong {b['wrong']})"
              f"  A {a['requests_per_s']:9,.0f} req/s (wrong {a['wrong']})  load CPU {row['load_cpu_busy'] * 100:3.0f}%")
        self.note_share(row)
        self.note_wrong(row, a, b)

    def busy(self, rnd, kind, gen, setup):
        by_app, servers = self.servers_for(setup)
        try:
            tokens = self.setup_apps(by_app, kind)
            d = self.args.duration
            warm = [self.flood_job(gen, by_app[app].port, app, kind, BUSY_CONNECTIONS, WARMUP_S, token=tokens[app])
                    for app in (A_APP, B_APP)]
            for job, proc in [(j, self.spawn(j)) for j in warm]:
                self.collect(job, proc)
            jobs = [self.flood_job(gen, by_app[app].port, app, kind, BUSY_CONNECTIONS, d, token=tokens[app])
                    for app in (A_APP, B_APP)]
            c0, _ = self.measure_servers(servers)
            g0, t0 = children_cpu_s(), time.time()
            procs = [self.spawn(j) for j in jobs]
            a, b = [self.collect(j, p) for j, p in zip(jobs, procs)]
            wall = time.time() - t0
            gen_cpu = children_cpu_s() - g0
            c1, pids = self.measure_servers(servers)
            peak = sum(proc_status(p, "VmHWM") for p in pids)
        finally:
            for s in servers:
                s.stop()
        cpu = c1 - c0
        total = a["requests_per_s"] + b["requests_per_s"]
        row = self.record("busy", rnd, kind=kind, generator=gen, setup=setup,
                          a={"app": A_APP, "connections": BUSY_CONNECTIONS, "duration_s": jobs[0]["duration"], **a},
                          b={"app": B_APP, "connections": BUSY_CONNECTIONS, "duration_s": jobs[1]["duration"], **b},
                          requests_per_s=total, server_cpu_s=cpu, wall_s=wall,
                          per_cpu_s=(a["answered"] + b["answered"]) / cpu if cpu > 0 else None,
                          load_cpu_busy=gen_cpu / max(wall, 1e-9) / self.load_threads, peak_rss_kib=peak)
        say(f"  busy      {kind:5s} r{rnd} {gen:12s} {setup}: A {a['requests_per_s']:9,.0f} + B {b['requests_per_s']:9,.0f}"
              f" = {total:9,.0f} req/s  {row['per_cpu_s'] or 0:9,.0f} req/server-CPU-s  (wrong {a['wrong']} + {b['wrong']})"
              f"  load CPU {row['load_cpu_busy'] * 100:3.0f}%")
        self.note_share(row)
        self.note_wrong(row, a, b)

    def idle(self, rnd):
        server = self.start(self.auth_mode)
        try:
            admin = server.admin_token() if server.auth == "on" else None
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            # the connection's own buffers belong in "before": warm it on a cheap endpoint first
            for _ in range(100):
                request(conn, "GET", "/_health", token=admin)
            time.sleep(0.2)
            rss0, threads0 = proc_status(server.pid, "VmRSS"), proc_status(server.pid, "Threads")
            t0 = time.time()
            for i in range(1, IDLE_APPS + 1):
                app = f"app{i:04d}"
                status, body = request(conn, "PUT", f"/_apps/{app}", b'{"quota":{}}', admin)
                if status != 201:
                    what = f"PUT /_apps/{app} {{\"quota\":{{}}}} answered {status} {redact(body[:120].decode(errors='replace'))}"
                    if i == 1:
                        raise ApiMissing(what + " (SPEC §7: 201 created)")
                    raise RuntimeError(what + f" after {i - 1} apps were created")
            created_s = time.time() - t0
            time.sleep(0.2)
            rss1, threads1 = proc_status(server.pid, "VmRSS"), proc_status(server.pid, "Threads")
            status, body = request(conn, "GET", "/_apps/", token=admin)
            try:
                listed = json.loads(body)["apps"] if status == 200 else None
            except (ValueError, KeyError, TypeError):
                listed = None
            if listed is None:
                raise ApiMissing(f"GET /_apps/ answered {status} {redact(body[:120].decode(errors='replace'))}")
            missing = [f"app{i:04d}" for i in range(1, IDLE_APPS + 1) if f"app{i:04d}" not in set(listed)]
            if missing:
                raise RuntimeError(f"GET /_apps/ lacks {len(missing)} of the {IDLE_APPS} apps, first {missing[0]}")
            conn.close()
        finally:
            server.stop()
        per_app = (rss1 - rss0) / IDLE_APPS
        self.record("idle", rnd, apps=IDLE_APPS, rss_before_kib=rss0, rss_after_kib=rss1, kib_per_app=per_app,
                    threads_before=threads0, threads_after=threads1, create_s=created_s, auth=server.auth)
        say(f"  idle      r{rnd}: {IDLE_APPS} apps in {created_s:.1f} s: RSS {rss0:,} -> {rss1:,} KiB "
              f"({per_app:.1f} KiB per app), threads {threads0} -> {threads1}")

    def probe_auth(self):
        """Fails with ApiMissing at once when the server cannot run the auth step."""
        server = self.start("on")
        try:
            self.open_app(server, "probe", "read")
        finally:
            server.stop()

    def auth_cost(self, rnd, gen, auth):
        server = self.start(auth)
        try:
            token, admin = self.open_app(server, "bench", "read")
            self.prepare(server, "bench", "read", admin)
            self.run(self.flood_job(gen, server.port, "bench", "read", AUTH_CONNECTIONS, WARMUP_S, token=token))
            job = self.flood_job(gen, server.port, "bench", "read", AUTH_CONNECTIONS, self.args.duration, token=token)
            c0, _ = self.measure_servers([server])
            g0, t0 = children_cpu_s(), time.time()
            r = self.run(job)
            wall = time.time() - t0
            gen_cpu = children_cpu_s() - g0
            c1, _ = self.measure_servers([server])
        finally:
            server.stop()
        cpu = c1 - c0
        row = self.record("auth", rnd, generator=gen, auth=auth, auth_flag_given=server.auth is not None,
                          connections=AUTH_CONNECTIONS, result=r, requests_per_s=r["requests_per_s"],
                          server_cpu_s=cpu, wall_s=wall, per_cpu_s=r["answered"] / cpu if cpu > 0 else None,
                          load_cpu_busy=gen_cpu / max(wall, 1e-9) / self.load_threads)
        say(f"  auth {auth:3s} r{rnd} {gen:12s}: {r['requests_per_s']:9,.0f} req/s  {row['per_cpu_s'] or 0:9,.0f} "
              f"req/server-CPU-s  p99 {r['latency_us'].get('p99', 0):6,.0f} us  wrong {r['wrong']}"
              f"  load CPU {row['load_cpu_busy'] * 100:3.0f}%")
        self.note_share(row)
        self.note_wrong(row, r)

    @staticmethod
    def note_share(row):
        """Read floods keep the server CPUs busy; when they did not, something else had them. (Durable
        writes may wait on the disk with the CPU idle, so their share is not judged.)"""
        share = row["server_cpu_share"]
        if row.get("kind", "read") == "read" and share < BUSY_SHARE:
            say(f"    warning: the server processes had {share:.0%} of the server CPUs in a flood: other processes "
                "took the rest, so these figures say little (and two processes get two scheduler shares against them)")

    def note_wrong(self, row, *results):
        for r in results:
            if r["wrong"]:
                msg = f"apps/{row['step']} {row.get('kind', '')} {row.get('setup', row.get('auth', ''))}: " \
                      f"{r['wrong']} wrong answers, first: {r['first_wrong']}"
                say("    " + msg)
                self.r.failures.append(msg)


def rotate(items, rnd):
    k = rnd % len(items)
    return list(items[k:]) + list(items[:k])


def cpu_list(spec):
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out

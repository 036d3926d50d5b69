"""Turns perf/compare's JSON lines into the generated part of docs/perf/README.md and its plots.

regenerate(results, run) reads perf/compare's run files in the folder `results` (perf/results:
compare/<run id>.jsonl, plain or gzipped; perf/benchlib.py), picks the rows of one run (default: the last run that was not quick
mode, else the last run), takes medians over rounds, checks the goals, draws PNG plots into
docs/perf/plots/ with matplotlib (Debian's python3-matplotlib; when the running python lacks it,
/usr/bin/python3 is asked to draw), and rewrites the text between the two markers of
docs/perf/README.md, leaving the hand-written sections around them alone. Shard-sweep rows are
taken from the newest run that has them, whichever machine made them. The apps workload's rows
(apps/<run id>.jsonl in the same folder, perf/apps.py) get a section of their own, each of its steps
from the newest run that measured it (full runs before quick ones); a step that found the
server's API missing says so instead of a figure.

Every row names its load generator (percore-load, wrk, redis-benchmark); rows recorded before
that field are percore-load's (redis-benchmark's for Redis, wrk's for HTTPS: what perf/compare
ran then). Tables show each generator's figures; a goal is met only when met with every HTTP
generator that can drive its workload (both, or wrk alone over HTTPS), since the two disagree by
up to 2.5x on one server."""
import json
import os
import statistics
import subprocess
import sys

import apps
from benchlib import ROOT, load_rows
from workloads import BY_NAME, SWEEP

DOCS = os.path.join(ROOT, "docs", "perf")
README = os.path.join(DOCS, "README.md")
PLOTS = os.path.join(DOCS, "plots")
PROFILES = os.path.join(DOCS, "profiles")
BEGIN = "<!-- perf/compare: begin (generated; edit perf/report.py, not this part) -->"
END = "<!-- perf/compare: end -->"
IDLE_RSS_GOAL_KIB = 2.3 * 1024   # issue 16: the seeds' 2.3 MiB
READ_WORKLOADS = ["get64", "get64-close", "get1m", "pipelined16", "list20"]
HTTP_GENERATORS = ("percore-load", "wrk")
GENERATOR_ORDER = HTTP_GENERATORS + ("redis-benchmark",)


def generator_of(row):
    """Who drove a row. Rows from before the field: what perf/compare ran then."""
    if row.get("generator"):
        return row["generator"]
    if row["server"] == "redis":
        return "redis-benchmark"
    return "wrk" if row["workload"].startswith("tls-") else "percore-load"


def needed_generators(workload):
    """The generators a goal on `workload` must be met with: wrk alone speaks HTTPS."""
    w = BY_NAME.get(workload)
    return ("wrk",) if w and w.tls else HTTP_GENERATORS


def ordered(generators):
    return sorted(generators, key=lambda g: (GENERATOR_ORDER.index(g) if g in GENERATOR_ORDER else 99, g))


def pick_run(rows, run):
    """The rows to report: those of `run` when given; otherwise, for every workload, the rows of
    the newest run that measured it (full runs before quick ones), so a run of a few workloads
    refreshes those and keeps the others."""
    if run:
        return [r for r in rows if r.get("run") == run]
    rows = [r for r in rows if "run" in r and not r["workload"].startswith("sweep-")]
    latest = {}
    for quick in (True, False):   # full runs win: they are looked at last
        for r in rows:
            if bool(r.get("quick")) == quick:
                latest[r["workload"]] = r["run"]
    return [r for r in rows if latest.get(r["workload"]) == r["run"]]


def medians(rows):
    """{workload: {generator: {server: summary}}} with medians over rounds."""
    out = {}
    for r in rows:
        server = r["server"] if r["shards"] == 1 else f"{r['server']}x{r['shards']}"
        out.setdefault(r["workload"], {}).setdefault(generator_of(r), {}).setdefault(server, []).append(r)
    summary = {}
    for w, by_gen in out.items():
        summary[w] = {g: {s: summarise(rs) for s, rs in by_server.items()} for g, by_server in by_gen.items()}
    return summary


def summarise(rs):
    """One server's rounds of one workload by one generator: medians."""
    def med(key, sub=None):
        vals = [(x[key] or {}).get(sub) if sub else x[key] for x in rs]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None
    by_rps = sorted(rs, key=lambda x: x["requests_per_s"])
    return {
        "label": rs[0]["label"], "rounds": len(rs), "rps": med("requests_per_s"),
        "per_cpu": med("per_cpu_s"), "cpu_s": med("server_cpu_s"),
        "p50": med("latency_us", "p50"), "p99": med("latency_us", "p99"),
        "p999": med("latency_us", "p99_9"), "max": med("latency_us", "max"),
        "wrong": sum(x["wrong"] or 0 for x in rs), "gen": med("generator_utilisation"),
        "idle_rss": med("idle_rss_kib"), "peak_rss": max(x["peak_rss_kib"] for x in rs),
        "shards": rs[0]["shards"], "connections": rs[0]["connections"],
        "buckets": (by_rps[len(by_rps) // 2].get("latency_us") or {}).get("buckets"),
    }


def fmt(v, digits=0):
    return "–" if v is None else f"{v:,.{digits}f}"


def fmt_us(v):
    if v is None:
        return "–"
    return f"{v / 1000:,.1f} ms" if v >= 10000 else f"{v:,.0f} µs"


def verdict(ok):
    return "**met**" if ok else "**missed**"


def profile_link(workload):
    name = f"{workload}.txt"
    return f" — profile: [profiles/{name}](profiles/{name})" if os.path.exists(os.path.join(PROFILES, name)) else ""


def judged(results, needed):
    """One goal judged per generator: results {generator: (measured text, met)}. The measured column
    names each generator; met only when met with every generator in `needed` (missed when one
    missed it, not met when one did not measure it). Returns (measured, verdict, met)."""
    shown = [f"{results[g][0]} ({g})" for g in needed if g in results]
    missing = [g for g in needed if g not in results]
    shown += [f"not measured with {g}" for g in missing]
    if not all(results[g][1] for g in needed if g in results):
        return " / ".join(shown), "**missed**", False
    if missing:
        return " / ".join(shown), "**not met**", False
    return " / ".join(shown), "**met**", True


def goal_row(goal, results, needed, profile=None):
    """The goals table's row of one goal, or [] when no generator measured it."""
    if not results:
        return []
    measured, v, ok = judged(results, needed)
    return [f"| {goal} | {measured} | {v}{'' if ok or not profile else profile_link(profile)} |"]


def percore_against(s, w, peer, key, test, peer_generator=None):
    """{generator: (text, met)}: percore's `key` over `peer`'s in workload w, per HTTP generator;
    the peer driven by the same generator, or by peer_generator (Redis: redis-benchmark)."""
    out = {}
    for g, by_server in s.get(w, {}).items():
        p = by_server.get("percore")
        q = s[w].get(peer_generator or g, {}).get(peer)
        if g in HTTP_GENERATORS and p and q and p[key] and q[key]:
            ratio = p[key] / q[key]
            out[g] = (f"{ratio:.2f}x", test(ratio))
    return out


def goals(s, sweep):
    lines = ["| goal | measured | verdict |", "|---|---|---|"]
    for w in READ_WORKLOADS:
        results = {}
        for g, by_server in s.get(w, {}).items():
            p = by_server.get("percore")
            peers = {k: v for k, v in by_server.items() if k not in ("percore", "ceiling") and v["per_cpu"]}
            if not p or not p["per_cpu"] or not peers:
                continue
            best = max(peers, key=lambda k: peers[k]["per_cpu"])
            ratio = p["per_cpu"] / peers[best]["per_cpu"]
            results[g] = (f"percore {fmt(p['per_cpu'])} vs {peers[best]['label']} {fmt(peers[best]['per_cpu'])}: "
                          f"{ratio:.2f}x", ratio > 1)
        lines += goal_row(f"{w}: per server-CPU-second above the best peer", results, needed_generators(w), w)
    # issue 16's goals
    lines += goal_row("get64: at least 0.95x the fixed-response ceiling per server-CPU-second",
                      percore_against(s, "get64", "ceiling", "per_cpu", lambda r: r >= 0.95), HTTP_GENERATORS, "get64")
    lines += goal_row("pipelined16: at least 0.7x the fixed-response ceiling per server-CPU-second",
                      percore_against(s, "pipelined16", "ceiling", "per_cpu", lambda r: r >= 0.7), HTTP_GENERATORS,
                      "pipelined16")
    results = {}
    for g, by_server in s.get("get1m", {}).items():
        p = by_server.get("percore")
        peers = {k: v for k, v in by_server.items() if k != "percore" and v["rps"]}
        if p and p["rps"] and peers:
            best = max(peers, key=lambda k: peers[k]["rps"])
            ratio = p["rps"] / peers[best]["rps"]
            results[g] = (f"percore {fmt(p['rps'])} vs {peers[best]['label']} {fmt(peers[best]['rps'])}: {ratio:.2f}x",
                          ratio > 1)
    lines += goal_row("get1m: requests per second above the best peer", results, HTTP_GENERATORS, "get1m")
    for w in ("put16-c1", "put16-c8", "put16-c16", "put16-c64"):
        lines += goal_row(f"{w}: durable writes/s at least Redis (AOF always; Redis driven by redis-benchmark)",
                          percore_against(s, w, "redis", "rps", lambda r: r >= 1, "redis-benchmark"),
                          HTTP_GENERATORS, w)
    lines += goal_row("put16-c64: durable writes per server-CPU-second at least Redis's",
                      percore_against(s, "put16-c64", "redis", "per_cpu", lambda r: r >= 1, "redis-benchmark"),
                      HTTP_GENERATORS, "put16-c64")
    lines += goal_row("put16-c64: durable writes/s at least 5x etcd",
                      percore_against(s, "put16-c64", "etcd", "rps", lambda r: r >= 5), HTTP_GENERATORS)
    for w in ("tls-get64", "tls-get1m", "tls-close"):
        lines += goal_row(f"{w}: per server-CPU-second at least nginx's with TLS",
                          percore_against(s, w, "nginx", "per_cpu", lambda r: r >= 1), needed_generators(w), w)
    idle = [v["idle_rss"] for w, by_gen in s.items() if not w.startswith(("tls-", "sweep-"))
            for by_server in by_gen.values() for k, v in by_server.items() if k == "percore" and v["idle_rss"]]
    if idle:
        kib = statistics.median(idle)
        lines.append(f"| idle RSS with one shard at most {IDLE_RSS_GOAL_KIB / 1024:.1f} MiB (the seeds') | {kib / 1024:.2f} MiB | {verdict(kib <= IDLE_RSS_GOAL_KIB)} |")
    if sweep:
        for w, by_gen in sweep.items():
            results = {}
            for g, by_n in by_gen.items():
                base = by_n.get(1)
                if base and len(by_n) > 1:
                    worst = min((v / (n * base), n) for n, v in by_n.items() if n > 1)
                    results[g] = (f"lowest {worst[0]:.2f} (at N = {worst[1]})", worst[0] >= 0.8)
            lines += goal_row(f"{w}: at least 0.8 x N times one shard with N shards", results, HTTP_GENERATORS)
    else:
        lines.append("| at least 0.8 x N times one shard with N shards | not measured: this run's machine has "
                     "too few CPUs (see the shard sweep below) | **not measured** |")
    return lines


def workload_table(by_gen):
    """Every generator's rows, fastest per server-CPU-second first; *vs percore* is against percore
    driven by the same generator (for redis-benchmark, which drives no percore: percore-load)."""
    base_of = {g: (by_server.get("percore") or {}).get("per_cpu") for g, by_server in by_gen.items()}
    lines = ["| server | load generator | req/s | server CPU s | req per server-CPU-s | vs percore | p50 | p99 | p99.9 "
             "| wrong | load gen CPU |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g in ordered(by_gen):
        base = base_of[g] if g in HTTP_GENERATORS else base_of.get("percore-load")
        for k, v in sorted(by_gen[g].items(), key=lambda kv: -(kv[1]["per_cpu"] or 0)):
            rel = f"{v['per_cpu'] / base:.2f}x" if base and v["per_cpu"] else "–"
            gen = f"{v['gen'] * 100:.0f}%" if v["gen"] is not None else "–"
            lines.append(f"| {v['label']} | {g} | {fmt(v['rps'])} | {fmt(v['cpu_s'], 2)} | {fmt(v['per_cpu'])} | {rel} | "
                         f"{fmt_us(v['p50'])} | {fmt_us(v['p99'])} | {fmt_us(v['p999'])} | {v['wrong']} | {gen} |")
    a, b = [(by_gen.get(g) or {}).get("percore") for g in HTTP_GENERATORS]
    if a and b and a["rps"] and b["rps"] and a["per_cpu"] and b["per_cpu"]:
        lines += ["", f"The generators on percore: wrk / percore-load = {b['rps'] / a['rps']:.2f}x req/s, "
                      f"{b['per_cpu'] / a['per_cpu']:.2f}x req per server-CPU-s."]
    return lines


def memory_table(s):
    lines = ["| server | idle RSS | peak RSS (workload) |", "|---|---:|---:|"]
    seen = {}
    for w in ["get64", "get1m", "put16-c64", "mixed", "tls-get64", "tls-get1m"]:
        for by_server in s.get(w, {}).values():
            for k, v in by_server.items():
                tls = w.startswith("tls-")
                key, label = (k + " tls", v["label"] + " (TLS configured)") if tls and k == "percore" else (k, v["label"])
                if tls and k != "percore":
                    key = k + " tls"
                idle = seen.setdefault(key, {"label": label, "idle": v["idle_rss"], "peak": []})
                idle["peak"].append((v["peak_rss"], w))
    for k, v in seen.items():
        peak = max(v["peak"])
        lines.append(f"| {v['label']} | {v['idle'] / 1024:.2f} MiB | {peak[0] / 1024:.1f} MiB ({peak[1]}) |")
    return lines


def sweep_summary(all_rows):
    """{workload: {generator: {shards: median req/s}}} of the newest run with sweep rows, and a row of it."""
    rows = [r for r in all_rows if r["workload"].startswith("sweep-")]
    if not rows:
        return None, None
    run = rows[-1]["run"]
    rows = [r for r in rows if r["run"] == run]
    out = {}
    for r in rows:
        out.setdefault(r["workload"], {}).setdefault(generator_of(r), {}).setdefault(r["shards"], []).append(
            r["requests_per_s"])
    return {w: {g: {n: statistics.median(v) for n, v in by_n.items()} for g, by_n in by_gen.items()}
            for w, by_gen in out.items()}, rows[0]


def apps_rows(results):
    """The apps workload's rows to report: per step, those of the newest run that has the step."""
    rows = load_rows(apps.NAME, results)
    latest = {}
    for quick in (True, False):   # full runs win: they are looked at last
        for r in rows:
            if bool(r.get("quick")) == quick:
                latest[r["step"]] = r["run"]
    return [r for r in rows if latest.get(r["step"]) == r["run"]]


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _share(rows):
    """The server processes' median share of the server CPUs; a flood below apps.BUSY_SHARE is flagged."""
    share = _med([r.get("server_cpu_share") for r in rows])
    if share is None:
        return "–"
    judged = rows[0].get("kind", "read") == "read"   # durable writes may wait on the disk, CPU idle
    return f"{share * 100:.0f}%" + (" (busy machine)" if judged and share < apps.BUSY_SHARE else "")


def _ratio(a, b):
    return a / b if a is not None and b else None


def apps_section(results):
    rows = apps_rows(results)
    if not rows:
        return []
    g = apps.GOALS
    out = ["### apps: one process serving two apps against two processes (SPEC §7, issue 13)", ""]
    runs = {}
    for r in rows:
        runs.setdefault(r["run"], (r, set()))[1].add(r["step"])
    for m, steps in runs.values():
        out.append(f"- Run `{m['run']}`, {m['date']}, commit `{m['commit']}`{' (quick mode)' if m.get('quick') else ''}, "
                   f"on {m['machine']}: `{m['command']}` ({m['duration_s']:g} s per measurement) — "
                   f"{', '.join(x for x in apps.STEPS if x in steps)}.")
    out += [f"- percore alone, `--durability sync`, `--shards` = the server CPUs, pinned to CPU {rows[0]['server_cpus']}; "
            f"every load generator on CPU {rows[0]['load_cpus']}. `one`: one percore process serves app A and app B; "
            "`two`: each app has its own percore process (own data directory and port, same `--shards`, same CPUs). "
            "Medians over rounds; setups in rotated order. Server CPU is `utime+stime` of the server processes; "
            f"*server CPU use* is its share of the server CPUs over the run: a read flood below {apps.BUSY_SHARE:.0%} "
            "means other processes had the CPU (and two processes get two scheduler shares against them), so "
            "that run's comparison says little.",
            f"- isolation: A flooded by {apps.FLOOD_CONNECTIONS} keep-alive connections (by percore-load, and in a "
            "second series by wrk with `perf/apps.lua`); B one percore-load connection at a fixed rate "
            f"({apps.B_RATE['read']:,}/s reads, {apps.B_RATE['write']:,}/s writes), latency from each request's intended "
            "send time (no coordinated omission; sends the server kept it from making are counted as *unsent*). "
            f"Reads: {apps.KINDS['read']['size']} B documents; writes: durable {apps.KINDS['write']['size']} B PUTs.",
            f"- busy: A and B flooded by {apps.BUSY_CONNECTIONS} connections each. idle: {apps.IDLE_APPS:,} apps created "
            f"with `PUT /_apps/appNNNN {{\"quota\":{{}}}}`. auth: {apps.AUTH_CONNECTIONS} connections of 64 B GETs with "
            "`--auth on` and a read token of the app on every request, against `--auth off`.",
            f"- Raw rows: `perf/results/apps/<run>.jsonl`. Run: `perf/compare --workloads apps` (full) or add `--quick`.", ""]

    missing = {r["step"]: r["api_missing"] for r in rows if r.get("api_missing")}
    by = {}
    for r in rows:
        if not r.get("api_missing"):
            by.setdefault(r["step"], []).append(r)

    def not_measured(step):
        why = missing.get(step, "not run")
        return f"not measured — {why}", "**not measured**"

    def starved(rs):
        """A read flood whose servers had under apps.BUSY_SHARE of their CPUs: not judged."""
        share = _med([r.get("server_cpu_share") for r in rs])
        return rs and rs[0].get("kind", "read") == "read" and share is not None and share < apps.BUSY_SHARE

    not_judged = (f"**not judged**: the servers had under {apps.BUSY_SHARE:.0%} of their CPUs in a read flood "
                  "(a busy machine)")

    def groups(step, key):
        out_ = {}
        for r in by.get(step, []):
            out_.setdefault(key(r), []).append(r)
        return out_

    iso = groups("isolation", lambda r: (r["kind"], r["generator"], r["setup"]))
    busy = groups("busy", lambda r: (r["kind"], r["generator"], r["setup"]))
    auth = groups("auth", lambda r: (r["generator"], r["auth"]))
    gens = [x for x in apps.GENERATORS if any(k[1] == x for k in list(iso) + list(busy)) or any(k[0] == x for k in auth)]

    goal_rows = ["| goal | measured | verdict |", "|---|---|---|"]
    for kind, word in (("read", "reads"), ("write", "writes")):
        parts, ratios, busy_machine = [], [], False
        for gen in gens:
            busy_machine |= any(starved(iso.get((kind, gen, x), [])) for x in ("one", "two"))
            one = _med([r["b"]["latency_us"].get("p99") for r in iso.get((kind, gen, "one"), [])])
            two = _med([r["b"]["latency_us"].get("p99") for r in iso.get((kind, gen, "two"), [])])
            ratio = _ratio(one, two)
            if ratio is not None:
                ratios.append(ratio)
                parts.append(f"A by {gen}: {fmt_us(one)} / {fmt_us(two)} = {ratio:.2f}x")
        goal = (f"| isolation, {word}: B's p99 with one process / with two at most {g['isolation_p99_ratio']} "
                f"(SPEC: at most {g['spec_p99_ratio']}) |")
        if not ratios:
            m, v = not_measured("isolation")
        else:
            worst = max(ratios)
            m = "; ".join(parts)
            v = verdict(worst <= g["isolation_p99_ratio"]) + (
                "" if worst <= g["isolation_p99_ratio"] else
                " (within SPEC's bound)" if worst <= g["spec_p99_ratio"] else " (past SPEC's bound too)")
            if busy_machine:
                v = not_judged
        goal_rows.append(f"{goal} {m} | {v} |")
    for kind, word in (("read", "reads"), ("write", "writes")):
        parts, ok, busy_machine = [], [], False
        for gen in gens:
            busy_machine |= any(starved(busy.get((kind, gen, x), [])) for x in ("one", "two"))
            one, two = busy.get((kind, gen, "one"), []), busy.get((kind, gen, "two"), [])
            rps = _ratio(_med([r["requests_per_s"] for r in one]), _med([r["requests_per_s"] for r in two]))
            cpu = _ratio(_med([r["per_cpu_s"] for r in one]), _med([r["per_cpu_s"] for r in two]))
            if rps is not None and cpu is not None:
                ok.append(rps >= 1 - g["busy_within"] and cpu >= 1 - g["busy_within"])
                parts.append(f"{gen}: req/s {rps:.2f}x, per server-CPU-s {cpu:.2f}x")
        goal = f"| both busy, {word}: summed throughput of one process at least {1 - g['busy_within']:.1f}x two (req/s and per server-CPU-second) |"
        m, v = ("; ".join(parts), not_judged if busy_machine else verdict(all(ok))) if ok else not_measured("busy")
        goal_rows.append(f"{goal} {m} | {v} |")
    idle = by.get("idle", [])
    if idle:
        kib = _med([r["kib_per_app"] for r in idle])
        extra = max(r["threads_after"] - r["threads_before"] for r in idle)
        goal_rows.append(f"| {apps.IDLE_APPS:,} idle apps: at most {g['idle_kib_per_app']} KiB each, no extra thread | "
                         f"{kib:.1f} KiB per app, {extra:+d} threads | {verdict(kib <= g['idle_kib_per_app'] and extra <= 0)} |")
    else:
        m, v = not_measured("idle")
        goal_rows.append(f"| {apps.IDLE_APPS:,} idle apps: at most {g['idle_kib_per_app']} KiB each, no extra thread | {m} | {v} |")
    parts, ok, busy_machine = [], [], False
    for gen in gens:
        busy_machine |= any(starved(auth.get((gen, x), [])) for x in ("on", "off"))
        on = _med([r["per_cpu_s"] for r in auth.get((gen, "on"), [])])
        off = _med([r["per_cpu_s"] for r in auth.get((gen, "off"), [])])
        ratio = _ratio(on, off)
        if ratio is not None:
            ok.append(ratio >= 1 - g["auth_within"])
            parts.append(f"{gen}: {fmt(on)} vs {fmt(off)} = {ratio:.2f}x")
    m, v = ("; ".join(parts), not_judged if busy_machine else verdict(all(ok))) if ok else not_measured("auth")
    goal_rows.append(f"| auth: 64 B GETs per server-CPU-second with `--auth on` at least {1 - g['auth_within']:.2f}x "
                     f"`--auth off` | {m} | {v} |")
    out += ["#### Goals", ""] + goal_rows + [""]

    if iso:
        out += ["#### Isolation: B at a fixed rate beside A flooded", "",
                "| B's work | A driven by | setup | B p50 | B p99 | B p99.9 | B answered / unsent | B wrong | A req/s | A wrong | server CPU s | server CPU use | load CPU |",
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (kind, gen, setup), rs in sorted(iso.items(), key=lambda kv: (list(apps.KINDS).index(kv[0][0]), kv[0][1], kv[0][2])):
            lat = lambda k: _med([r["b"]["latency_us"].get(k) for r in rs])
            unsent = _med([r["b"].get("due_unsent") for r in rs])
            out.append(f"| {kind} | {gen} | {setup} | {fmt_us(lat('p50'))} | {fmt_us(lat('p99'))} | {fmt_us(lat('p99_9'))} | "
                       f"{fmt(_med([r['b']['answered'] for r in rs]))} / {fmt(unsent)} | {sum(r['b']['wrong'] for r in rs)} | "
                       f"{fmt(_med([r['a']['requests_per_s'] for r in rs]))} | {sum(r['a']['wrong'] for r in rs)} | "
                       f"{fmt(_med([r['server_cpu_s'] for r in rs]), 2)} | {_share(rs)} | {_med([r['load_cpu_busy'] for r in rs]) * 100:.0f}% |")
        out.append("")
    if busy:
        out += ["#### Both busy", "",
                "| work | generator | setup | A req/s | B req/s | sum req/s | per server-CPU-s | wrong | server CPU use | load CPU |",
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for (kind, gen, setup), rs in sorted(busy.items(), key=lambda kv: (list(apps.KINDS).index(kv[0][0]), kv[0][1], kv[0][2])):
            out.append(f"| {kind} | {gen} | {setup} | {fmt(_med([r['a']['requests_per_s'] for r in rs]))} | "
                       f"{fmt(_med([r['b']['requests_per_s'] for r in rs]))} | {fmt(_med([r['requests_per_s'] for r in rs]))} | "
                       f"{fmt(_med([r['per_cpu_s'] for r in rs]))} | {sum(r['a']['wrong'] + r['b']['wrong'] for r in rs)} | "
                       f"{_share(rs)} | {_med([r['load_cpu_busy'] for r in rs]) * 100:.0f}% |")
        out.append("")
    if idle:
        out += ["#### Idle apps", "", "| round | apps | RSS before | RSS after | KiB per app | threads before → after | created in |",
                "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in idle:
            out.append(f"| {r['round']} | {r['apps']:,} | {r['rss_before_kib']:,} KiB | {r['rss_after_kib']:,} KiB | "
                       f"{r['kib_per_app']:.1f} | {r['threads_before']} → {r['threads_after']} | {r['create_s']:.1f} s |")
        out.append("")
    if auth:
        out += ["#### Auth cost", "", "| auth | generator | req/s | server CPU s | per server-CPU-s | p50 | p99 | wrong | server CPU use | load CPU |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for (gen, setting), rs in sorted(auth.items()):
            lat = lambda k: _med([r["result"]["latency_us"].get(k) for r in rs])
            out.append(f"| {setting} | {gen} | {fmt(_med([r['requests_per_s'] for r in rs]))} | "
                       f"{fmt(_med([r['server_cpu_s'] for r in rs]), 2)} | {fmt(_med([r['per_cpu_s'] for r in rs]))} | "
                       f"{fmt_us(lat('p50'))} | {fmt_us(lat('p99'))} | {sum(r['result']['wrong'] for r in rs)} | "
                       f"{_share(rs)} | {_med([r['load_cpu_busy'] for r in rs]) * 100:.0f}% |")
        out.append("")
    return out


def draw(s, sweep):
    """Writes the PNGs; returns their names. Runs in this python or in /usr/bin/python3. plots.py
    takes one series per server and generator: keys SERVER@GENERATOR, labels naming both."""
    flat = {w: {f"{k}@{g}": dict(v, label=f"{v['label']} ({g})") for g in ordered(by_gen) for k, v in by_gen[g].items()}
            for w, by_gen in s.items()}
    flat_sweep = {f"{w} ({g})": {str(n): v for n, v in by_n.items()}
                  for w, by_gen in (sweep or {}).items() for g, by_n in by_gen.items()}
    payload = json.dumps({"s": flat, "sweep": flat_sweep})
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots.py")
    for py in (sys.executable, "/usr/bin/python3"):
        p = subprocess.run([py, script, PLOTS], input=payload, capture_output=True, text=True)
        if p.returncode == 0:
            return p.stdout.split()
    print(f"perf/report: no plots (python3-matplotlib missing?): {p.stderr.strip()[-300:]}", file=sys.stderr)
    return []


def regenerate(results, run=None):
    all_rows = load_rows("compare", results)
    rows = pick_run(all_rows, run)
    if not rows:
        sys.exit("perf/report: no results to report")
    runs = {}
    for r in rows:
        runs.setdefault(r["run"], r)
    meta = rows[0]
    s = medians(rows)
    sweep, sweep_meta = sweep_summary(all_rows)
    os.makedirs(PLOTS, exist_ok=True)
    plots = draw(s, sweep)
    rounds = max(v["rounds"] for by_gen in s.values() for by_server in by_gen.values() for v in by_server.values())
    out = [BEGIN, "", "## The side-by-side suite (`perf/compare`)", "",
           ] + [f"- Run `{m['run']}`, {m['date']}, commit `{m['commit']}`{' (quick mode)' if m.get('quick') else ''}, "
                f"on {m['machine']}: `{m['command']}` ({m['duration_s']:g} s per server and workload) — "
                f"{', '.join(sorted({r['workload'] for r in rows if r['run'] == m['run']}, key=list(BY_NAME).index))}."
                for m in runs.values()] + [
           f"- Up to {rounds} rounds per workload, order rotated each round, medians shown. Servers pinned to CPU {meta['server_cpus']}, "
           f"the load generator to CPU {meta['load_cpus']}. Server CPU is "
           "`utime+stime` of the server's whole process tree from `/proc`; a load generator near 100% means "
           "the generator, not the server, set the pace.",
           "- Two load generators: every plain-HTTP workload runs on every HTTP server once driven by `percore-load` "
           "and once by wrk (Debian's 4.1, as many threads as load CPUs), each on a fresh server with its own warm-up. "
           "wrk runs the `perf/*.lua` script that sends what percore-load sends: the same paths and bodies, keys "
           "drawn uniformly at random (`get.lua`, `put.lua`, `mixed.lua`, `etcd.lua` for etcd's JSON gateway; "
           "list20's fixed path as wrk's URL; `pipeline.lua` sends 16 GETs back to back and waits for all 16 answers, "
           "where percore-load keeps 16 in flight); `Connection: close` as a header. wrk counts answers other than "
           "2xx/3xx and socket errors as wrong. The two disagree by up to 2.5x on one server, so a goal is **met** "
           "only when met with both (**not met** when one did not measure it); *vs percore* compares with percore "
           "driven by the same generator. Redis speaks no HTTP: `redis-benchmark` drives it (its *vs percore* is "
           "against percore driven by percore-load). Runs recorded before this (no generator in their rows) were "
           "driven by percore-load alone.",
           "- HTTPS workloads (`tls-*`) are driven by wrk alone, one document (OpenSSL 3: TLS 1.3, TLS_AES_256_GCM_SHA384 from both "
           "servers; wrk keeps its TLS 1.3 session between connections, so `tls-close` is one resumed handshake (ticket "
           "and ECDHE, no certificate) per request when the server hands out a fresh ticket each time, as both "
           "now do, and a full one otherwise); both servers use "
           "the same self-signed P-256 certificate.",
           "- Peers: nginx-light (1 worker, sendfile, open_file_cache), h2o (1 thread), lighttpd (1 process), "
           "Redis (`appendonly yes`, `appendfsync always`), etcd 3.4 (one member, HTTP through its JSON gateway), "
           "and `perf/ceiling` (one epoll thread answering a fixed 200: the most any HTTP server can do here). "
           "Configs in `perf/peers/`; raw rows in `perf/results/compare/<run>.jsonl`.",
           "", "### Goals", ""] + goals(s, sweep) + [""]
    for name in [w for w in BY_NAME if w in s]:
        out += [f"### {name}: {BY_NAME[name].title}", ""] + workload_table(s[name]) + [""]
    out += ["### Memory", "", "Idle: right after start, before any request. Peak: the largest VmHWM of the "
            "server's processes over that workload's runs.", ""] + memory_table(s) + [""]
    out += apps_section(results)
    out += ["### Shard sweep", ""]
    if sweep:
        out += [f"From run `{sweep_meta['run']}` ({sweep_meta['date']}, commit `{sweep_meta['commit']}`) on "
                f"{sweep_meta['machine']}: shards on CPUs 0..N-1, load on CPUs {sweep_meta['load_cpus']}.", "",
                "| workload | load generator | shards | req/s | vs 1 shard | of N x 1 shard |", "|---|---|---:|---:|---:|---:|"]
        for w, by_gen in sweep.items():
            for g in ordered(by_gen):
                by_n = by_gen[g]
                for n in sorted(by_n):
                    one = by_n.get(1)
                    out.append(f"| {w} | {g} | {n} | {fmt(by_n[n])} | {f'{by_n[n] / one:.2f}x' if one else '–'} | "
                               f"{f'{by_n[n] / (n * one):.2f}' if one else '–'} |")
        out.append("")
    else:
        out += ["Not measured yet: the machines of this project have 2 CPUs, too few to put N shards and "
                "the load on separate cores. `perf/many_core/pack.sh` carries the sweep (`perf/compare "
                "--sweep-only --shards 1,2,4,8 --load-cpus 8-15`) to a machine with the cores.", ""]
    if plots:
        out += ["### Plots", ""] + [f"![{p}](plots/{p})" for p in plots] + [""]
    out.append(END)
    generated = "\n".join(out)

    text = open(README).read() if os.path.exists(README) else "# Performance record\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        text = head + generated + tail
    else:
        first, _, rest = text.partition("\n")
        text = first + "\n\n" + generated + "\n" + rest
    with open(README, "w") as f:
        f.write(text)
    print(f"perf/report: wrote {os.path.relpath(README, ROOT)} from run {meta['run']} ({len(rows)} rows), "
          f"{len(plots)} plots", file=sys.stderr)

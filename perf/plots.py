"""Draws docs/perf's PNG plots from the medians perf/report.py passes on stdin (JSON: per workload
one series per server and load generator, keyed SERVER@GENERATOR); prints the file names written. Separate from report.py so it can run under Debian's /usr/bin/python3, which
has python3-matplotlib, when the python running perf/compare does not.

usage: plots.py OUT_DIR < medians.json"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PERCORE = "#d62728"
OTHER = "#7f7f7f"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def is_percore(key):
    return key.split("@")[0] == "percore"


def dashed(key):
    """wrk's series are drawn dashed (hatched bars): the same server's two generators stay apart."""
    return key.endswith("@wrk")


def color(key, i):
    """percore is always red; peers take the other colours in a fixed order."""
    return PERCORE if is_percore(key) else PALETTE[i % len(PALETTE)]


def per_cpu(s, out):
    names = [w for w in s if not w.startswith("sweep-")]
    cols = 3
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.4 * rows), squeeze=False)   # two generators a server
    for ax, w in zip(axes.flat, names):
        items = sorted(((v["label"], v["per_cpu"] or 0, k) for k, v in s[w].items()), key=lambda x: x[1])
        bars = ax.barh([i[0] for i in items], [i[1] / 1000 for i in items],
                       color=[PERCORE if is_percore(i[2]) else OTHER for i in items])
        for bar, i in zip(bars, items):
            if dashed(i[2]):
                bar.set_hatch("//")
        ax.set_title(w, fontsize=10)
        ax.set_xlabel("thousand requests per server-CPU-second", fontsize=8)
        ax.tick_params(labelsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "per_cpu_second.png"), dpi=80)
    return "per_cpu_second.png"


def latency(s, out, workload):
    if workload not in s:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (k, v) in enumerate(s[workload].items()):
        buckets = v.get("buckets")
        if not buckets:
            continue
        total = sum(b[2] for b in buckets)
        xs, ys, seen = [], [], 0
        for low, high, count in buckets:
            seen += count
            xs.append(max(high, 1))
            ys.append(seen / total)
        ax.step(xs, ys, where="post", label=v["label"], color=color(k, i),
                linewidth=2.5 if is_percore(k) else 1.2, linestyle="--" if dashed(k) else "-")
    ax.set_xscale("log")
    ax.set_xlabel("latency (µs, log scale)")
    ax.set_ylabel("fraction of requests answered within")
    ax.set_title(f"{workload}: latency distribution (median round)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = f"latency_{workload}.png"
    fig.savefig(os.path.join(out, name), dpi=80)
    return name


def durable(s, out):
    series = {}
    for w, by_server in s.items():
        if not w.startswith("put16-c"):
            continue
        for k, v in by_server.items():
            series.setdefault(k, (v["label"], []))[1].append((v["connections"], v["rps"]))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (k, (label, pts)) in enumerate(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label, color=color(k, i),
                linewidth=2.5 if is_percore(k) else 1.2, linestyle="--" if dashed(k) else "-")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("connections")
    ax.set_ylabel("durable 16 B writes per second")
    ax.set_title("Durable writes against connections (one server CPU)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "durable_writes.png"), dpi=80)
    return "durable_writes.png"


def scaling(sweep, out):
    if not sweep:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    top = 1
    for w, by_n in sweep.items():
        pts = sorted((int(n), v) for n, v in by_n.items())
        base = dict(pts).get(1)
        if not base:
            continue
        ax.plot([p[0] for p in pts], [p[1] / base for p in pts], marker="o", label=w)
        top = max(top, pts[-1][0])
    ax.plot([1, top], [1, top], "k--", alpha=0.4, label="N x one shard")
    ax.plot([1, top], [0.8, 0.8 * top], "k:", alpha=0.4, label="goal 0.8 x N")
    ax.set_xlabel("shards (one per CPU)")
    ax.set_ylabel("throughput / one shard's")
    ax.set_title("Throughput against shard count")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "shard_scaling.png"), dpi=80)
    return "shard_scaling.png"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    data = json.load(sys.stdin)
    s, sweep = data["s"], data["sweep"]
    names = [per_cpu(s, out), latency(s, out, "get64"), latency(s, out, "put16-c64"), durable(s, out),
             scaling(sweep, out)]
    print(" ".join(n for n in names if n))


if __name__ == "__main__":
    main()

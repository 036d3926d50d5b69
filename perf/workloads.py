"""The workloads perf/compare and perf/profile run, as the seeds measured them, and who serves each.

A workload says what percore-load sends (connections, mode, pipelining, mix, keys, document
size, an explicit path) and which servers take part; perf/compare has wrk send the same through
a perf/*.lua script (wrk_script there). Read workloads are served by static file
peers from files <root>/bench/k0..k<keys-1> of `size` bytes; write and mixed workloads by the
durable peers. `quick` marks the ones the two-minute quick mode runs."""
from dataclasses import dataclass, field

STATIC_PEERS = ["nginx", "h2o", "lighttpd"]


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    kind: str                     # "read", "write", "mixed"
    servers: tuple
    size: int
    keys: int
    connections: int
    mode: str = "keep-alive"
    pipeline: int = 1
    mix: str = "get:100,put:0"
    paths: dict = field(default_factory=dict)   # server -> fixed GET path (list pages)
    quick: bool = True
    tls: bool = False             # over HTTPS, driven by wrk (percore-load speaks plain HTTP)

    def needs_documents(self):
        return self.kind != "write"


WORKLOADS = [
    Workload("get64", "64 B GET, keep-alive, 64 connections", "read",
             ("percore", *STATIC_PEERS, "ceiling"), size=64, keys=100, connections=64),
    Workload("get64-close", "64 B GET, a new connection per request, 64 connections", "read",
             ("percore", *STATIC_PEERS, "ceiling"), size=64, keys=100, connections=64, mode="close"),
    Workload("get1m", "1 MiB GET, keep-alive, 8 connections", "read",
             ("percore", *STATIC_PEERS), size=1 << 20, keys=8, connections=8),
    Workload("pipelined16", "64 B GET pipelined 16 deep, 16 connections", "read",
             ("percore", *STATIC_PEERS, "ceiling"), size=64, keys=100, connections=16, pipeline=16),
    # No peer serves pages of a key listing (nginx's autoindex answers chunked, of a folder).
    Workload("list20", "list pages of 20 documents, 64 connections", "read",
             ("percore",), size=64, keys=1000, connections=64, paths={"percore": "/bench/?limit=20"}),
    Workload("put16-c64", "durable 16 B PUT, 64 connections", "write",
             ("percore", "redis", "etcd"), size=16, keys=10000, connections=64, mix="get:0,put:100"),
    Workload("put16-c8", "durable 16 B PUT, 8 connections", "write",
             ("percore", "redis", "etcd"), size=16, keys=10000, connections=8, mix="get:0,put:100"),
    Workload("put16-c1", "durable 16 B PUT, 1 connection", "write",
             ("percore", "redis", "etcd"), size=16, keys=10000, connections=1, mix="get:0,put:100", quick=False),
    Workload("put16-c16", "durable 16 B PUT, 16 connections", "write",
             ("percore", "redis", "etcd"), size=16, keys=10000, connections=16, mix="get:0,put:100", quick=False),
    Workload("mixed", "64 B documents, 90% GET / 10% durable PUT, 64 connections", "mixed",
             ("percore", "etcd"), size=64, keys=1000, connections=64, mix="get:90,put:10"),
]

# HTTPS, same certificate (P-256) and policy on both sides; the client (wrk, OpenSSL 3) picks
# TLS 1.3 with TLS_AES_256_GCM_SHA384 from both.
WORKLOADS += [
    Workload("tls-get64", "HTTPS 64 B GET, keep-alive, 64 connections", "read",
             ("percore", "nginx"), size=64, keys=100, connections=64, tls=True),
    Workload("tls-get1m", "HTTPS 1 MiB GET, keep-alive, 8 connections", "read",
             ("percore", "nginx"), size=1 << 20, keys=8, connections=8, tls=True),
    Workload("tls-close", "HTTPS 64 B GET, a new connection (TLS 1.3 handshake) per request, 16 connections",
             "read", ("percore", "nginx"), size=64, keys=100, connections=16, mode="close", tls=True),
]

BY_NAME = {w.name: w for w in WORKLOADS}

# The shard sweep (perf/compare --sweep) runs percore alone with N shards on N CPUs.
SWEEP = [
    Workload("sweep-get64", "64 B GET, keep-alive, 64 connections per shard", "read",
             ("percore",), size=64, keys=1000, connections=64),
    Workload("sweep-put16", "durable 16 B PUT, 64 connections per shard", "write",
             ("percore",), size=16, keys=10000, connections=64, mix="get:0,put:100"),
]

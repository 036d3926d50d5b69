#!/usr/bin/env python3
"""Generate an HAProxy 2.6 configuration for percore replica groups behind one proxy (SPEC 10, 12).

Writes haproxy.cfg and the map file it reads, percore-apps.map (app -> group), side by side;
`--help` lists the options.

example:
  python3 docs/deploy/haproxy_config.py \\
      --group g1=a1@10.0.0.1:8080,a2@10.0.0.2:8080,a3@10.0.0.3:8080 \\
      --group g2=b1@10.0.1.1:8080,b2@10.0.1.2:8080,b3@10.0.1.3:8080 \\
      --app shop=g1 --app blog=g2 --listen :80 --out /etc/haproxy
  haproxy -c -f /etc/haproxy/haproxy.cfg && systemctl reload haproxy

  docs/deploy/haproxy.cfg and docs/deploy/percore-apps.map are this example's output (with
  --out docs/deploy); tests/integration/test_haproxy.py checks that they are current and runs the
  generator's output with a real HAProxy in front of real boards.

groups (SPEC section 12's --group): every board of a group is listed alike, with no role; the
boards' health checks say which one is the primary, so promoting a follower (SPEC section 10, by
hand, or section 12's leader election) needs no new config and no reload. A group is one primary
and the followers copying it; an app lives on exactly one group.

routing (each rule is commented, with its reason, in the generated config too):
  * the app is the first path segment (/APP/KEY), or the second for /_apps/APP... and /_changes/APP;
    percore-apps.map says which group owns it; a new app needs a line there and a reload
    (systemctl reload haproxy: no connection is dropped); an app not in the map gets 404;
  * writes (every method but GET, HEAD, OPTIONS), app administration (/_apps/APP...) and change feeds
    (/_changes/APP) go to the group's primary only: backend primary_GROUP lists every board, and
    only the one answering GET /_health/primary with 200 is up there; no redispatch, so a write
    never lands on another board; with no primary up it is a 503 from HAProxy; a board marked down
    there (a primary demoted or lost) has its sessions cut (on-marked-down shutdown-sessions);
  * feeds stay on the primary because cursors belong to one data directory (SPEC section 8: a cursor
    from another one is 410), so a feed balanced across boards would break at every switch;
  * reads (GET, HEAD, OPTIONS of documents and lists) are balanced round-robin over the followers
    copying their primary within N changes (GET /_health/replica?lag=N, --max-lag); with none,
    the primary serves them (a backup server tracking its write check); with neither (the primary
    lost and none promoted yet), any board still serving answers them (GET /_health), stale by
    what it had not copied when the primary went;
  * server-wide endpoints (/_metrics, /_stats, /_backup, /_apps/) describe one board, so they are not
    answered for an arbitrary board: 404 here, ask each board on its own address; /_health is answered
    by HAProxy itself: 200 while every group has a primary up, 503 otherwise.

The --board/--follower options of the first version (one fixed primary per board) are gone: a
fixed primary is what the groups replace, and an alias would keep the reload that promotion needed.

Standard library only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field

CONFIG_NAME = "haproxy.cfg"
MAP_NAME = "percore-apps.map"

APP_RE = re.compile(r"^[a-z0-9-][a-z0-9_-]{0,63}$")     # SPEC section 2: app names
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")      # our labels: safe in backend and server names
ADDRESS_RE = re.compile(r"^(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
LISTEN_RE = re.compile(r"^(?P<host>[A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
TIME_RE = re.compile(r"^(?P<n>\d+)(?P<unit>us|ms|s|m)?$")   # HAProxy time format (no unit: ms)
TIME_US = {"us": 1, "ms": 1000, "": 1000, "s": 1000_000, "m": 60_000_000}

FALL = 2   # failed checks before a board is out: one lost check is not an outage
RISE = 2   # good checks before it is back: a board that flaps is not trusted at once
FAST_DIVISOR = 4   # fastinter = inter / 4: a board changing state is confirmed quickly
DOWN_DIVISOR = 2   # downinter = inter / 2: a board that is down is noticed coming back quickly
# The Host of every check: with auth off percore serves only a loopback Host (SPEC section 7, DNS
# rebinding), with auth on it checks none, so "localhost" is answered either way.
CHECK_HOST = "localhost"
# Reads go to a follower within this many changes of its primary (SPEC section 12's max_lag, the
# bound within which a follower may take over). Without a bound, a board making its full copy (new
# in the group, or back after its cursor expired) would serve 404 for what it has not copied yet;
# a tight one takes every follower out together during a write burst, moving every read onto
# the primary at its busiest.
DEFAULT_MAX_LAG = 1000


class TopologyError(ValueError):
    """A description of groups and apps that cannot be turned into a config."""


@dataclass
class Board:
    """One percore serve of a group."""
    name: str
    address: str


@dataclass
class Group:
    """A replica group: one primary at a time and the followers copying it, all listed alike."""
    name: str
    boards: list[Board] = field(default_factory=list)


@dataclass
class Topology:
    """Everything the config is made from."""
    groups: dict[str, Group]
    apps: dict[str, str]                  # app -> group name
    listen: str = ":80"
    check_interval: str = "1s"
    user: str = "haproxy"
    max_lag: int | None = DEFAULT_MAX_LAG  # /_health/replica?lag=N; None: no bound


# --------------------------------------------------------------------------
# Parsing


def split_pair(text: str, what: str) -> tuple[str, str]:
    """'LEFT=RIGHT' -> (LEFT, RIGHT); TopologyError naming `what` otherwise."""
    left, sep, right = text.partition("=")
    if not sep or not left or not right:
        raise TopologyError(f"{what}: expected NAME=VALUE, got {text!r}")
    return left, right


def check_address(address: str, what: str) -> str:
    """A HOST:PORT with a port in 1..65535, returned unchanged."""
    m = ADDRESS_RE.match(address)
    if not m or not 0 < int(m.group("port")) < 65536:
        raise TopologyError(f"{what}: expected HOST:PORT, got {address!r}")
    return address


def time_us(text: str) -> int:
    """An HAProxy time (TIME_RE) in microseconds."""
    m = TIME_RE.match(text)
    return int(m.group("n")) * TIME_US[m.group("unit") or ""]


def time_text(us: int) -> str:
    """Microseconds as an HAProxy time, in ms when whole."""
    return f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def parse_group(text: str, boards_seen: dict[str, str], addresses_seen: dict[str, str]) -> Group:
    """'NAME=BOARD@HOST:PORT,...' -> Group; boards_seen/addresses_seen (-> group) span every group."""
    name, members = split_pair(text, "--group")
    if not NAME_RE.match(name):
        raise TopologyError(f"--group: name {name!r} must be 1-32 of [a-z0-9_-]")
    group = Group(name)
    for member in members.split(","):
        board, sep, address = member.partition("@")
        if not sep or not board or not address:
            raise TopologyError(f"--group {name}: expected BOARD@HOST:PORT, got {member!r}")
        if not NAME_RE.match(board):
            raise TopologyError(f"--group {name}: board name {board!r} must be 1-32 of [a-z0-9_-]")
        if board in boards_seen:
            raise TopologyError(f"--group {name}: board {board!r} given twice "
                                f"(already in group {boards_seen[board]!r}; names are unique)")
        check_address(address, f"--group {name} board {board}")
        if address in addresses_seen:
            raise TopologyError(f"--group {name}: address {address!r} given twice "
                                f"(already in group {addresses_seen[address]!r}; a board is in one group)")
        boards_seen[board], addresses_seen[address] = name, name
        group.boards.append(Board(board, address))
    return group


def parse_max_lag(text: str) -> int | None:
    """--max-lag's value: a count of changes, or None for 'any'."""
    if text == "any":
        return None
    if not text.isdigit():
        raise TopologyError(f"--max-lag: expected a number of changes or 'any', got {text!r}")
    return int(text)


def build_topology(groups: list[str], apps: list[str], listen: str = ":80", check_interval: str = "1s",
                   user: str = "haproxy", max_lag: int | None = DEFAULT_MAX_LAG) -> Topology:
    """The Topology from the command-line spellings (NAME=BOARD@HOST:PORT,..., APP=GROUP);
    TopologyError with one clear line when something is malformed, repeated or refers to an
    unknown group."""
    by_name: dict[str, Group] = {}
    boards_seen: dict[str, str] = {}
    addresses_seen: dict[str, str] = {}
    for text in groups:
        group = parse_group(text, boards_seen, addresses_seen)
        if group.name in by_name:
            raise TopologyError(f"--group: {group.name!r} given twice")
        by_name[group.name] = group
    app_group: dict[str, str] = {}
    for text in apps:
        app, name = split_pair(text, "--app")
        if not APP_RE.match(app):
            raise TopologyError(f"--app: {app!r} is not an app name (SPEC section 2)")
        if app in app_group:
            raise TopologyError(f"--app: {app!r} given twice (an app lives on exactly one group)")
        if name not in by_name:
            raise TopologyError(f"--app {app}: no --group named {name!r}")
        app_group[app] = name
    if not by_name:
        raise TopologyError("at least one --group is needed")
    m = LISTEN_RE.match(listen)
    if not m or not 0 < int(m.group("port")) < 65536:
        raise TopologyError(f"--listen: expected [HOST]:PORT, got {listen!r}")
    if not TIME_RE.match(check_interval) or time_us(check_interval) < 4000:
        raise TopologyError(f"--check-interval: expected an HAProxy time like 1s or 250ms "
                            f"(4ms at least), got {check_interval!r}")
    if max_lag is not None and max_lag < 0:
        raise TopologyError(f"--max-lag: expected a number of changes >= 0, got {max_lag}")
    return Topology(by_name, app_group, listen, check_interval, user, max_lag)


# --------------------------------------------------------------------------
# Rendering


def json_answer(status: int, body: str) -> str:
    """An `http-request return` tail answering with a percore-style JSON body (SPEC section 4)."""
    return f"return status {status} content-type application/json string '{body}'"


def render_global(topo: Topology) -> list[str]:
    lines = [
        "global",
        "    # map files and other relative names are found next to this file",
        "    default-path config",
        "    # one line per request on stdout: journald under systemd, the terminal with -db",
        "    log stdout format raw local0",
    ]
    if topo.user:
        lines += [
            "    # started as root to bind the port, then runs unprivileged",
            f"    user {topo.user}",
            f"    group {topo.user}",
        ]
    return lines


def check_timings(inter: str) -> dict[str, str]:
    """inter, fastinter and downinter (HAProxy times) and the failover figures they give."""
    us = time_us(inter)
    fast, down = us // FAST_DIVISOR, us // DOWN_DIVISOR
    return {"inter": inter, "fastinter": time_text(fast), "downinter": time_text(down),
            "out": time_text(us + (FALL - 1) * fast), "in": time_text(down + (RISE - 1) * fast)}


def render_defaults(topo: Topology) -> list[str]:
    t = check_timings(topo.check_interval)
    return [
        "defaults",
        "    mode http",
        "    log global",
        "    option httplog",
        "    # a connect failure is retried twice on the same server: no request byte was sent yet",
        "    retries 2",
        "    timeout connect 2s",
        "    # a request must arrive in full within 10 s, as with percore's --idle-timeout default",
        "    timeout http-request 10s",
        "    # idle keep-alive clients are closed after 10 s, as percore does",
        "    timeout http-keep-alive 10s",
        "    # 310 s: the longest legitimate silence is a longpoll feed (SPEC section 8: timeout <= 300 s)",
        "    timeout client 310s",
        "    timeout server 310s",
        f"    # a check that takes longer than one interval ({t['inter']}) counts as failed",
        f"    timeout check {t['inter']}",
        "    # keep-alive to the boards; a client's first request never rides a reused connection",
        "    # (HAProxy's default, named here; its idle pool is purged after 5 s, before percore's 10 s)",
        "    http-reuse safe",
        f"    # checks: every {t['inter']} while a board's state is settled, every {t['fastinter']} while it",
        f"    # changes, every {t['downinter']} while it is down; out after {FALL} failed checks, in after {RISE} good",
        "    # ones (one lost check is not an outage, a board that flaps is not trusted at once). So a",
        f"    # primary that stops answering 200 (stopped, demoted, fenced) is out within {t['out']}",
        f"    # ({t['inter']} + {t['fastinter']}), and a board promoted to primary takes writes within {t['in']}",
        f"    # ({t['downinter']} + {t['fastinter']}) of its first 200: that is what HAProxy adds to a failover.",
        "    # The price: each board is checked three times per interval, once per backend it is in",
        "    # (primary_, reads_, stale_), and twice as often where it is down (a follower, always,",
        "    # in primary_): a few small GETs per second per board, answered without a disk access.",
        f"    default-server inter {t['inter']} fastinter {t['fastinter']} downinter {t['downinter']} "
        f"fall {FALL} rise {RISE}",
        "    # HAProxy's own errors in percore's form, a JSON body with an error field",
        "    http-error status 502 content-type application/json string '{\"error\":\"bad gateway\"}'",
        "    http-error status 503 content-type application/json string "
        "'{\"error\":\"no board available for this app\"}'",
        "    http-error status 504 content-type application/json string '{\"error\":\"gateway timeout\"}'",
    ]


def render_frontend(topo: Topology) -> list[str]:
    lines = [
        "frontend percore",
        f"    bind {topo.listen}",
        "",
        "    # /_health of the proxy: 503 as soon as some group has no primary up (it cannot take writes)",
    ]
    for name in sorted(topo.groups):
        lines.append(f"    acl a_primary_is_down nbsrv(primary_{name}) lt 1")
    lines += [
        "    http-request " + json_answer(503, '{"status":"degraded","role":"proxy"}')
        + " if { path /_health } a_primary_is_down",
        "    http-request " + json_answer(200, '{"status":"ok","role":"proxy"}') + " if { path /_health }",
        "",
        "    # server-wide endpoints describe one board: ask that board on its own address",
        "    http-request " + json_answer(404, '{"error":"server-wide endpoint: ask a board directly"}')
        + " if { path /_metrics /_stats /_backup /_apps /_apps/ }",
        "",
        "    # the app: first path segment (/APP/KEY), second one for /_apps/APP... and /_changes/APP",
        "    http-request set-var(txn.app) path,field(2,/)",
        "    http-request set-var(txn.app) path,field(3,/) if { path_beg /_apps/ /_changes/ }",
        f"    # its replica group, from {MAP_NAME} (APP GROUP per line); unset when the app is not listed",
        f"    http-request set-var(txn.group) var(txn.app),map({MAP_NAME})",
        "    # an app no group serves is refused here, never guessed",
        "    http-request " + json_answer(404, '{"error":"no board serves this app"}')
        + " unless { var(txn.group) -m found }",
        "",
        "    # reads: methods that change nothing",
        "    acl is_read method GET HEAD OPTIONS",
        "    # app administration and change feeds: on the primary only (feed cursors belong to one",
        "    # data directory, SPEC section 8: a follower would answer another board's cursor with 410)",
        "    acl is_admin_or_feed path_beg /_",
        "    # writes, administration and feeds: the group's primary only, never another board",
        "    use_backend primary_%[var(txn.group)] if !is_read || is_admin_or_feed",
        "    # reads of a group with neither a follower copying nor a primary up (its primary lost, none",
        "    # promoted yet): any board still serving, stale by what it had not copied when the primary",
        "    # went; no write goes through this proxy meanwhile, so it grows no staler",
    ]
    for name in sorted(topo.groups):
        lines.append(f"    use_backend stale_{name} if {{ var(txn.group) -m str {name} }} "
                     f"{{ nbsrv(reads_{name}) eq 0 }}")
    lines += [
        "    # document and list reads: the followers copying the primary, else the primary",
        "    use_backend reads_%[var(txn.group)]",
    ]
    return lines


def http_check(uri: str) -> list[str]:
    """The check lines of a backend: GET uri must answer 200."""
    return [
        "    option httpchk",
        "    # HTTP/1.1 needs a Host field (percore answers 400 without one); 'localhost' is served",
        "    # with auth on (no Host check) and off (loopback names only, SPEC section 7)",
        f"    http-check send meth GET uri {uri} ver HTTP/1.1 hdr Host {CHECK_HOST}",
        "    http-check expect status 200",
    ]


def replica_uri(topo: Topology) -> str:
    return "/_health/replica" + (f"?lag={topo.max_lag}" if topo.max_lag is not None else "")


def render_group_backends(topo: Topology, group: Group) -> list[str]:
    g = group.name
    lines = [f"# group {g}: " + ", ".join(f"{b.name} {b.address}" for b in group.boards)]
    lines += [
        f"backend primary_{g}",
        "    # every board of the group: the primary answers 200 here, a follower 503, so the one",
        "    # that is up is whichever is primary now; a promotion needs no reload",
    ] + http_check("/_health/primary") + [
        "    # no 'option redispatch': a write goes to the group's primary or gets a 503",
        "    # on-marked-down shutdown-sessions: once a board is out here (stopped, demoted, fenced),",
        "    # the requests HAProxy still has on it are cut, so no client goes on writing to it",
    ]
    lines += [f"    server {b.name} {b.address} check on-marked-down shutdown-sessions" for b in group.boards]
    if topo.max_lag is not None:
        lag = [f"    # and within {topo.max_lag} changes of it (--max-lag), so a board still making its full",
               "    # copy (new, or back after its cursor expired) serves no reads of half a data set"]
    else:
        lag = ["    # with no lag bound (--max-lag any): a board making its full copy serves what it has"]
    lines += [
        "",
        f"backend reads_{g}",
        "    # reads may be resent: a connect failure moves on to another board",
        "    balance roundrobin",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response",
        "    # followers copying their primary (503 from a primary and from a follower that lost it)",
    ] + lag + http_check(replica_uri(topo))
    lines += [f"    server {b.name} {b.address} check" for b in group.boards]
    lines += [
        "    # with no follower up, the primary: backup servers serve only while no other is up (the",
        f"    # first one up: there is one primary); each tracks its check in primary_{g}",
    ]
    lines += [f"    server {b.name}.primary {b.address} backup track primary_{g}/{b.name}" for b in group.boards]
    lines += [
        "",
        f"backend stale_{g}",
        f"    # reads when reads_{g} has no board up (see the frontend): any board still serving",
        "    balance roundrobin",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response",
        "    # percore's /_health: 200 once serving, 503 while starting or stopping",
    ] + http_check("/_health")
    lines += [f"    server {b.name} {b.address} check" for b in group.boards]
    return lines


def render_config(topo: Topology, command: str = "") -> str:
    """The haproxy.cfg text for topo; `command` (how it was generated) goes into the header."""
    lines = [
        "# HAProxy 2.6 configuration for percore replica groups (SPEC sections 10 and 12).",
        "# Generated by docs/deploy/haproxy_config.py; edit the generator, not this file.",
    ]
    if command:
        lines.append(f"# {command}")
    lines += [f"# Needs {MAP_NAME} in the same folder. Check: haproxy -c -f haproxy.cfg", ""]
    lines += render_global(topo) + [""] + render_defaults(topo) + [""] + render_frontend(topo)
    for name in sorted(topo.groups):
        lines += [""] + render_group_backends(topo, topo.groups[name])
    return "\n".join(lines) + "\n"


def render_apps_map(topo: Topology) -> str:
    """percore-apps.map: one 'APP GROUP' line per app, in byte-wise order."""
    lines = ["# app -> the replica group holding it; read by haproxy.cfg (map_str, exact match)"]
    lines += [f"{app} {topo.apps[app]}" for app in sorted(topo.apps)]
    return "\n".join(lines) + "\n"


def render_files(topo: Topology, command: str = "") -> dict[str, str]:
    """{file name: text} of every file the config needs, to be written side by side."""
    return {CONFIG_NAME: render_config(topo, command), MAP_NAME: render_apps_map(topo)}


# --------------------------------------------------------------------------
# Command line


def parse_args(argv: list[str]) -> argparse.Namespace:
    summary, _, rest = __doc__.partition("\n\n")
    parser = argparse.ArgumentParser(
        prog="haproxy_config.py", description=summary, epilog=rest,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--group", action="append", default=[], metavar="NAME=BOARD@HOST:PORT,...",
                        help="a replica group (repeatable): NAME and each BOARD labels of [a-z0-9_-] used "
                             "in backend and server names, HOST:PORT each board's percore --listen "
                             "address; every board of a group is listed alike (the checks find the "
                             "primary), a board is in one group")
    parser.add_argument("--app", action="append", default=[], metavar="APP=GROUP",
                        help="app APP lives on group GROUP (repeatable); apps not listed get 404 "
                             "from HAProxy")
    parser.add_argument("--max-lag", default=str(DEFAULT_MAX_LAG), metavar="N|any",
                        help=f"a follower serves reads while within N changes of its primary "
                             f"(/_health/replica?lag=N; default {DEFAULT_MAX_LAG}, SPEC section 12's "
                             f"takeover bound); 'any': while it is connected to its primary at all")
    parser.add_argument("--listen", default=":80", metavar="[HOST]:PORT",
                        help="the frontend's bind address (default :80)")
    parser.add_argument("--check-interval", default="1s", metavar="TIME",
                        help=f"health-check interval in HAProxy time syntax (default 1s); a board is "
                             f"out after {FALL} failed checks, back after {RISE} good ones")
    parser.add_argument("--user", default="haproxy",
                        help="run as USER and its group once the port is bound (default haproxy; "
                             "'' keeps the user that started HAProxy)")
    parser.add_argument("--out", metavar="DIR",
                        help=f"write DIR/{CONFIG_NAME} and DIR/{MAP_NAME}; without it the config "
                             f"goes to stdout, then the map after a comment line")
    return parser.parse_args(argv)


def command_line(argv: list[str]) -> str:
    """How this run was asked for, for the config's header."""
    return " ".join(["python3 docs/deploy/haproxy_config.py"] + [a if a else "''" for a in argv])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        topo = build_topology(args.group, args.app, args.listen, args.check_interval, args.user,
                              parse_max_lag(args.max_lag))
    except TopologyError as e:
        print(f"haproxy_config.py: {e}", file=sys.stderr)
        return 2
    files = render_files(topo, command_line(argv if not args.out else strip_out(argv)))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(args.out, name), "w") as f:
                f.write(text)
    else:
        sys.stdout.write(files[CONFIG_NAME])
        sys.stdout.write(f"\n# ---- {MAP_NAME} ----\n")
        sys.stdout.write(files[MAP_NAME])
    return 0


def strip_out(argv: list[str]) -> list[str]:
    """argv without --out DIR / --out=DIR (where the files went is not part of the config)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif not a.startswith("--out="):
            out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

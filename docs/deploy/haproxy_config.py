#!/usr/bin/env python3
"""Generate an HAProxy 2.6 configuration for percore boards behind one proxy (SPEC section 10).

Writes haproxy.cfg and the map file it reads, percore-apps.map (app -> board), side by side;
`--help` lists the options.

example:
  python3 docs/deploy/haproxy_config.py --board p1=10.0.0.1:8080 --board p2=10.0.0.2:8080 \\
      --follower p1=10.0.0.3:8080 --app shop=p1 --app blog=p2 --listen :80 --out /etc/haproxy
  haproxy -c -f /etc/haproxy/haproxy.cfg && systemctl reload haproxy

  docs/deploy/haproxy.cfg and docs/deploy/percore-apps.map are this example's output (with
  --out docs/deploy); tests/integration/test_haproxy.py checks that they are current and runs the
  generator's output with a real HAProxy in front of real boards.

routing (each rule is commented, with its reason, in the generated config too):
  * the app is the first path segment (/APP/KEY), or the second for /_apps/APP... and /_changes/APP;
    percore-apps.map says which board owns it; a new app needs a line there and a reload
    (systemctl reload haproxy: no connection is dropped); an app not in the map gets 404;
  * writes (every method but GET, HEAD, OPTIONS), app administration (/_apps/APP...) and change feeds
    (/_changes/APP) go to the app's primary only: a backend with that one server and no redispatch,
    so a write never lands on a board that does not own the app; with the primary down it is a
    503 from HAProxy;
  * feeds stay on the primary because cursors belong to one data directory (SPEC section 8: a cursor
    from another one is 410), so a feed balanced across boards would break at every switch;
  * reads (GET, HEAD, OPTIONS of documents and lists) are balanced round-robin over the primary and
    its followers; a follower may be behind by its lag (SPEC section 10);
  * server-wide endpoints (/_metrics, /_stats, /_backup, /_apps/) describe one board, so they are not
    answered for an arbitrary board: 404 here, ask each board on its own address; /_health is answered
    by HAProxy itself: 200 while every app's primary is up, 503 otherwise.

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
BOARD_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")     # our labels: safe in backend names
ADDRESS_RE = re.compile(r"^(?P<host>[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
LISTEN_RE = re.compile(r"^(?P<host>[A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")
TIME_RE = re.compile(r"^\d+(us|ms|s|m)?$")                # HAProxy time format

FALL = 2   # failed checks before a board is out: one lost check is not an outage
RISE = 2   # good checks before it is back: a board that flaps is not trusted at once


class TopologyError(ValueError):
    """A description of boards and apps that cannot be turned into a config."""


@dataclass
class Board:
    """A primary board and the followers that copy it."""
    name: str
    address: str
    followers: list[str] = field(default_factory=list)


@dataclass
class Topology:
    """Everything the config is made from."""
    boards: dict[str, Board]
    apps: dict[str, str]                  # app -> board name
    listen: str = ":80"
    check_interval: str = "1s"
    user: str = "haproxy"


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


def build_topology(boards: list[str], followers: list[str], apps: list[str], listen: str = ":80",
                   check_interval: str = "1s", user: str = "haproxy") -> Topology:
    """The Topology from the command-line spellings (NAME=HOST:PORT, APP=NAME); TopologyError with
    one clear line when something is malformed, repeated or refers to an unknown board."""
    by_name: dict[str, Board] = {}
    for text in boards:
        name, address = split_pair(text, "--board")
        if not BOARD_RE.match(name):
            raise TopologyError(f"--board: name {name!r} must be 1-32 of [a-z0-9_-]")
        if name in by_name:
            raise TopologyError(f"--board: {name!r} given twice")
        by_name[name] = Board(name, check_address(address, f"--board {name}"))
    for text in followers:
        name, address = split_pair(text, "--follower")
        if name not in by_name:
            raise TopologyError(f"--follower: no --board named {name!r}")
        by_name[name].followers.append(check_address(address, f"--follower {name}"))
    app_board: dict[str, str] = {}
    for text in apps:
        app, name = split_pair(text, "--app")
        if not APP_RE.match(app):
            raise TopologyError(f"--app: {app!r} is not an app name (SPEC section 2)")
        if app in app_board:
            raise TopologyError(f"--app: {app!r} given twice (an app has exactly one primary)")
        if name not in by_name:
            raise TopologyError(f"--app {app}: no --board named {name!r}")
        app_board[app] = name
    if not by_name:
        raise TopologyError("at least one --board is needed")
    m = LISTEN_RE.match(listen)
    if not m or not 0 < int(m.group("port")) < 65536:
        raise TopologyError(f"--listen: expected [HOST]:PORT, got {listen!r}")
    if not TIME_RE.match(check_interval):
        raise TopologyError(f"--check-interval: expected an HAProxy time like 1s or 250ms, "
                            f"got {check_interval!r}")
    return Topology(by_name, app_board, listen, check_interval, user)


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


def render_defaults(topo: Topology) -> list[str]:
    inter = topo.check_interval
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
        f"    # a check that takes longer than one interval ({inter}) counts as failed",
        f"    timeout check {inter}",
        "    # keep-alive to the boards; a client's first request never rides a reused connection",
        "    # (HAProxy's default, named here; its idle pool is purged after 5 s, before percore's 10 s)",
        "    http-reuse safe",
        f"    # a board is out after {FALL} failed checks and back after {RISE} good ones",
        f"    default-server inter {inter} fall {FALL} rise {RISE}",
        "    # percore's /_health: 200 once serving, 503 while starting or stopping, no token needed;",
        "    # HTTP/1.1 needs a Host field (percore answers 400 without one)",
        "    option httpchk",
        "    http-check send meth GET uri /_health ver HTTP/1.1 hdr Host percore-health-check",
        "    http-check expect status 200",
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
        "    # /_health of the proxy: 503 as soon as some app's primary is down (it cannot take writes)",
    ]
    for name in sorted(topo.boards):
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
        f"    # its board, from {MAP_NAME} (APP BOARD per line); unset when the app is not listed",
        f"    http-request set-var(txn.board) var(txn.app),map({MAP_NAME})",
        "    # an app no board serves is refused here, never guessed",
        "    http-request " + json_answer(404, '{"error":"no board serves this app"}')
        + " unless { var(txn.board) -m found }",
        "",
        "    # reads: methods that change nothing",
        "    acl is_read method GET HEAD OPTIONS",
        "    # app administration and change feeds: on the primary only (feed cursors belong to one",
        "    # data directory, SPEC section 8: a follower would answer another board's cursor with 410)",
        "    acl is_admin_or_feed path_beg /_",
        "    # writes, administration and feeds: the app's primary only, never another board",
        "    use_backend primary_%[var(txn.board)] if !is_read || is_admin_or_feed",
        "    # document and list reads: the primary and its followers",
        "    use_backend reads_%[var(txn.board)]",
    ]
    return lines


def render_board_backends(board: Board) -> list[str]:
    lines = [
        f"# board {board.name}: primary {board.address}"
        + (f", followers {', '.join(board.followers)}" if board.followers else ", no followers"),
        f"backend primary_{board.name}",
        "    # one server and no 'option redispatch': a write goes to this primary or gets a 503",
        f"    server {board.name} {board.address} check",
        "",
        f"backend reads_{board.name}",
        "    # reads may be resent: a connect failure moves on to another board",
        "    balance roundrobin",
        "    option redispatch 1",
        "    retry-on conn-failure empty-response",
        "    # the primary's state comes from the check in its write backend (one check, not two)",
        f"    server {board.name} {board.address} track primary_{board.name}/{board.name}",
    ]
    for i, address in enumerate(board.followers, 1):
        lines.append(f"    server {board.name}-f{i} {address} check")
    return lines


def render_config(topo: Topology, command: str = "") -> str:
    """The haproxy.cfg text for topo; `command` (how it was generated) goes into the header."""
    lines = [
        "# HAProxy 2.6 configuration for percore boards (SPEC section 10).",
        "# Generated by docs/deploy/haproxy_config.py; edit the generator, not this file.",
    ]
    if command:
        lines.append(f"# {command}")
    lines += [f"# Needs {MAP_NAME} in the same folder. Check: haproxy -c -f haproxy.cfg", ""]
    lines += render_global(topo) + [""] + render_defaults(topo) + [""] + render_frontend(topo)
    for name in sorted(topo.boards):
        lines += [""] + render_board_backends(topo.boards[name])
    return "\n".join(lines) + "\n"


def render_apps_map(topo: Topology) -> str:
    """percore-apps.map: one 'APP BOARD' line per app, in byte-wise order."""
    lines = ["# app -> board owning its primary; read by haproxy.cfg (map_str, exact match)"]
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
    parser.add_argument("--board", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="a primary board (repeatable): NAME a label of [a-z0-9_-] used in backend "
                             "and server names, HOST:PORT its percore --listen address")
    parser.add_argument("--follower", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="a follower of board NAME (percore serve --follow <NAME's URL>), "
                             "repeatable; it serves reads of every app of NAME")
    parser.add_argument("--app", action="append", default=[], metavar="APP=NAME",
                        help="app APP has its primary on board NAME (repeatable); apps not listed "
                             "get 404 from HAProxy")
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
        topo = build_topology(args.board, args.follower, args.app, args.listen,
                              args.check_interval, args.user)
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

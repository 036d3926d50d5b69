#!/usr/bin/env python3
"""Where a request's instructions go, by stage of the hot path: a callgrind dump of
`perf/instructions.py --keep-dumps DIR` (DIR/get64.1, DIR/pipelined16.1, DIR/put16.1) grouped into
parse, route/key, access/admission, lookup, answer, send, connection, metrics, loop round, write
path and store/log, per request.

Every function's own instructions (callgrind's self cost, `callgrind_annotate --inclusive=no`) go
to the stage its name says (STAGES below, first match wins). The helpers that many stages call
(libc's memchr/memcpy/memcmp, malloc and free, operator new/delete, the syscall wrappers' cancel
points) go to their callers' stages, in proportion to what each caller's calls to them cost
(the call arcs of the dump), followed up through helpers that call helpers. What matches no
pattern is `other` and is listed with --other. --top N lists each stage's N largest functions
(their own instructions; "helpers" is what the stage's share of the shared helpers came to).

Usage:
  perf/instruction_stages.py DUMP REQUESTS [--top N] [--other N] [--json]
  perf/instruction_stages.py --compare BEFORE AFTER REQUESTS

REQUESTS: the requests counted in that dump (instructions.py: get64 5000, pipelined16 8000,
put16 2000). Prints instructions per request by stage; the total is the dump's (the same as
instructions.py's figure). --compare prints both and the difference per stage."""
import argparse
import collections
import json
import re
import sys

# (stage, pattern on the demangled function name). First match wins: order matters.
STAGES = [
    ("metrics", r"shard_metrics::|status_index\(|method_index\(|observe_duration|document_service::answered|"
                r"connection::report_answer|connection::answered"),
    ("parse", r"request_parser::|parse_request_line|trim_ows|request_head::find|skip_empty_lines|valid_host|"
              r"connection::parse_head|connection::check_head|valid_target_form|connection::announces_body|"
              r"loopback_authority|equal_ignoring_case|iequals|parse_content_length"),
    ("route/key", r"parse_route|percent_decode|valid_utf8|valid_app_name|route_of|build_key|key_hash|"
                  r"owner_for_hash|::owner_of\("),
    ("access/admission", r"admission_control::|access_control::|document_service::admit|connection::admit\(|"
                         r"app_registry::|app_entry::|body_fits"),
    ("lookup", r"find_in\(|doc_tree::find|snapshot::find|::current\(unsigned|preconditions_of|"
               r"read_precondition_status|precondition::"),
    ("write path", r"documents_endpoint::write_document|shard::submit|complete_write|write_done|write_answer|"
                   r"connection::complete\(|connection::reserve_body|release_body_budget|begin_sized_body|"
                   r"shard_store::submit|write_ticket"),
    ("answer", r"documents_endpoint::|response::|format_etag|format_decimal|status_line|well_known_type|"
               r"document_service::handle|endpoint_table|connection::dispatch|connection::begin_body|"
               r"document::etag_version|requested_range|content_type"),
    ("send", r"connection::send_output|connection::flush|output_buffer::|socket_transport::|^send$|^recv$|"
             r"^sendmsg|^writev|^__libc_send|^__libc_recv|connection::read_once|connection::input_target|"
             r"ensure_input_space|connection::more_follows"),
    ("connection", r"net::connection::|connection_pool::|connection_shared::"),
    ("loop round", r"store::compactor::|compaction_victim|_Rb_tree_increment"),
    ("store/log", r"percore::store::|crc32c|fdatasync|pwrite|shard_log"),
    ("loop round", r"percore::runtime::|boost::asio::|shards::shard::|delivery_engine::|feed_waits::|"
                   r"backup_streams::|app_erasures::|clock_gettime|steady_clock::now|epoll|pthread_mutex|"
                   r"pthread_cond|futex|__lll_lock|__lll_unlock|eventfd|^read$|^write$|^poll$|"
                   r"shard_task|round_clock|poller|mailboxes|__GI___clock|syscall|compactor"),
]
# Called from many stages: their cost goes to their callers.
HELPERS = re.compile(r"^(__mem|mem(cpy|move|set|cmp|chr)|__strlen|strlen|_int_(malloc|free)|malloc|free|"
                     r"operator new|operator delete|__pthread_(enable|disable)_asynccancel|cfree|tcache|"
                     r"__libc_(malloc|free)|_dl_|std::__cxx11::basic_string.*::(_M_|reserve|resize)|"
                     r"std::vector.*::_M_)")
ORDER = list(dict.fromkeys(s for s, _ in STAGES)) + ["other"]
COMPILED = [(s, re.compile(p)) for s, p in STAGES]
TOP = {}   # the last breakdown(): stage -> [(function, per request)], largest first


def read_dump(path):
    """(self cost by function, {(caller, callee): inclusive cost of the calls}, total)."""
    names = {}
    self_cost = collections.Counter()
    arcs = collections.Counter()
    total = None
    fn = None
    pending_call = None   # callee of a calls= line: its next cost line is that call's inclusive cost
    positions = 1         # columns before the cost: "line", or "instr line" with --dump-instr

    def name_of(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?$", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names[m.group(1)]

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("positions:"):
                positions = len(line.split()) - 1
            elif line.startswith("fn="):
                fn = name_of(line[3:])
            elif line.startswith("cfn="):
                cfn = name_of(line[4:])
            elif line.startswith("calls="):
                pending_call = cfn
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                cost = int(parts[positions]) if len(parts) > positions else 0
                if pending_call is not None:
                    arcs[(fn, pending_call)] += cost
                    pending_call = None
                else:
                    self_cost[fn] += cost
    return self_cost, arcs, total


def short(name):
    """The function's name without its namespace's and arguments' noise (for reading)."""
    name = name.replace("percore::", "").replace("(anonymous namespace)::", "")
    return re.sub(r"\(.*", "", name)


def stage_of_name(name):
    plain = re.sub(r"^'?", "", name.split("'")[0])
    for stage, pattern in COMPILED:
        if pattern.search(plain):
            return stage
    return "other"


def breakdown(path, requests):
    """({stage: instructions per request}, {function: per request} for `other`, total per request)."""
    self_cost, arcs, total = read_dump(path)
    callers = collections.defaultdict(list)
    for (caller, callee), cost in arcs.items():
        if caller != callee:
            callers[callee].append((caller, cost))

    shares_memo = {}

    def shares(fn, depth=0):
        """{stage: fraction} that fn's cost goes to."""
        if fn in shares_memo:
            return shares_memo[fn]
        if not HELPERS.search(fn) or depth > 8:
            result = {stage_of_name(fn): 1.0}
        else:
            incoming = callers.get(fn, [])
            weight = sum(c for _, c in incoming)
            result = collections.Counter()
            if weight == 0:
                result["other"] = 1.0
            for caller, cost in incoming:
                for stage, frac in shares(caller, depth + 1).items():
                    result[stage] += frac * cost / weight
            result = dict(result)
        shares_memo[fn] = result
        return result

    stages = collections.Counter()
    by_function = collections.defaultdict(collections.Counter)   # stage -> function -> cost
    for fn, cost in self_cost.items():
        helper = HELPERS.search(fn) is not None
        for stage, frac in shares(fn).items():
            stages[stage] += cost * frac
            by_function[stage]["helpers" if helper else short(fn)] += cost * frac
    per = {s: stages[s] / requests for s in ORDER}
    TOP.clear()
    TOP.update({s: [(f, c / requests) for f, c in by_function[s].most_common()] for s in ORDER})
    return per, dict(TOP["other"]), (total or sum(self_cost.values())) / requests


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dumps", nargs="+", help="DUMP REQUESTS, or with --compare BEFORE AFTER REQUESTS")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--other", type=int, default=0, help="list the N largest functions of `other`")
    ap.add_argument("--top", type=int, default=0, help="list each stage's N largest functions")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.compare:
        if len(args.dumps) != 3:
            ap.error("--compare BEFORE AFTER REQUESTS")
        requests = int(args.dumps[2])
        before, _, before_total = breakdown(args.dumps[0], requests)
        after, other, after_total = breakdown(args.dumps[1], requests)
        if args.json:
            print(json.dumps({"before": before, "after": after}))
            return
        print(f"{'stage':18s} {'before':>9s} {'after':>9s} {'change':>9s}")
        for s in ORDER:
            print(f"{s:18s} {before[s]:9.1f} {after[s]:9.1f} {after[s] - before[s]:+9.1f}")
        print(f"{'total':18s} {before_total:9.1f} {after_total:9.1f} {after_total - before_total:+9.1f}")
    else:
        if len(args.dumps) != 2:
            ap.error("DUMP REQUESTS")
        per, other, total = breakdown(args.dumps[0], int(args.dumps[1]))
        if args.json:
            print(json.dumps({"stages": per, "total": total}))
            return
        for s in ORDER:
            print(f"{s:18s} {per[s]:9.1f}")
            for name, cost in TOP[s][:args.top]:
                print(f"    {cost:8.1f}  {name}")
        print(f"{'total':18s} {total:9.1f}")
    for name, cost in list(other.items())[:args.other]:
        print(f"  other: {cost:8.1f}  {name}")


if __name__ == "__main__":
    sys.exit(main())

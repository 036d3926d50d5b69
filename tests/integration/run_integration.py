#!/usr/bin/env python3
"""Run percore's integration tests against a built binary.

usage: run_integration.py [PERCORE_BINARY] [--dir DIR] [--module MODULE]... [unittest name patterns...]

The binary also comes from $PERCORE_BIN (default: build/shards/percore).
$PERCORE_TEST_SHARDS picks the shard count of the parameterised test classes;
when it is unset the whole suite runs twice, for 1 and for 3 shards.
--dir DIR: the folder of test_*.py modules (default: this one; perf/tests holds the perf tools'
tests, which import percore_client from here too).
--module MODULE (repeatable): load only these modules of DIR (e.g. test_documents), not every
test_*.py; this is how meson registers one test() per module.
Patterns select test cases by id (module.Class.method): 'name' means '*name*'.
Exits non-zero when a test fails, and when no test ran at all (a pattern or module that selects
nothing must not pass silently).
"""

import faulthandler
import os
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WHOLE_RUN_LIMIT_S = 170     # below the meson timeout, so a hang shows a traceback


def take_option(args, name):
    """Removes every '--name VALUE' and '--name=VALUE' from args; returns the values."""
    values, rest, i = [], [], 0
    while i < len(args):
        if args[i] == name and i + 1 < len(args):
            values.append(args[i + 1])
            i += 2
        elif args[i].startswith(name + "="):
            values.append(args[i][len(name) + 1:])
            i += 1
        else:
            rest.append(args[i])
            i += 1
    args[:] = rest
    return values


def main(argv):
    args = argv[1:]
    if args and not args[0].startswith("-") and os.path.sep in args[0]:
        os.environ["PERCORE_BIN"] = os.path.abspath(args.pop(0))
    # the child runs (both shard counts) get the same options back
    passthrough = list(args)
    dirs = take_option(args, "--dir")
    test_dir = os.path.abspath(dirs[-1]) if dirs else HERE
    modules = take_option(args, "--module")
    binary = os.environ.setdefault(
        "PERCORE_BIN", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "shards",
                                    "percore"))
    if not os.access(binary, os.X_OK):
        print(f"run_integration: no executable percore at {binary}", file=sys.stderr)
        return 1

    if "PERCORE_TEST_SHARDS" not in os.environ:
        rc = 0
        for n in ("1", "3"):
            print(f"=== integration tests, shards={n} ===", flush=True)
            env = dict(os.environ, PERCORE_TEST_SHARDS=n)
            rc |= subprocess.call([sys.executable, os.path.abspath(__file__)] + passthrough, env=env)
        return 1 if rc else 0

    sys.path.insert(0, HERE)
    if test_dir != HERE:
        sys.path.insert(0, test_dir)
    import percore_client

    # a hung test fails the run with a traceback instead of hanging CI
    def watchdog():
        print(f"\nrun_integration: still running after {WHOLE_RUN_LIMIT_S}s; giving up",
              file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        percore_client.kill_leftovers()
        os._exit(1)

    timer = threading.Timer(WHOLE_RUN_LIMIT_S, watchdog)
    timer.daemon = True
    timer.start()
    loader = unittest.TestLoader()
    patterns = [a for a in args if not a.startswith("-")]
    if patterns:
        loader.testNamePatterns = [p if "*" in p else f"*{p}*" for p in patterns]
    if modules:
        for m in modules:
            if not os.path.isfile(os.path.join(test_dir, m + ".py")):
                print(f"run_integration: no module {m}.py in {test_dir}", file=sys.stderr)
                return 1
        suite = loader.loadTestsFromNames(modules)
    else:
        suite = loader.discover(test_dir, pattern="test_*.py", top_level_dir=test_dir)
    print(f"percore integration: binary={binary} shards={os.environ['PERCORE_TEST_SHARDS']}"
          f"{' modules=' + ','.join(modules) if modules else ''}", flush=True)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    if result.testsRun == 0:
        print("run_integration: no test ran (the modules or patterns select nothing); failing",
              file=sys.stderr)
        return 1
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Run percore's integration tests against a built binary.

usage: run_integration.py [PERCORE_BINARY] [unittest name patterns...]

The binary also comes from $PERCORE_BIN (default: build/shards/percore).
$PERCORE_TEST_SHARDS picks the shard count of the parameterised test classes;
when it is unset the whole suite runs twice, for 1 and for 3 shards.
Exits non-zero when a test fails.
"""

import faulthandler
import os
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WHOLE_RUN_LIMIT_S = 170     # below the meson timeout, so a hang shows a traceback


def main(argv):
    args = argv[1:]
    if args and not args[0].startswith("-") and os.path.sep in args[0]:
        os.environ["PERCORE_BIN"] = os.path.abspath(args.pop(0))
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
            rc |= subprocess.call([sys.executable, os.path.abspath(__file__)] + args, env=env)
        return 1 if rc else 0

    sys.path.insert(0, HERE)
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
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    print(f"percore integration: binary={binary} shards={os.environ['PERCORE_TEST_SHARDS']}",
          flush=True)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

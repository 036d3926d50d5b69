#!/usr/bin/env python3
"""Prints one line per meson test with the test cases it ran, then the total as
'N passed, N failed'. Reads meson's testlog.json; counts doctest and unittest cases."""
import json
import re
import sys


def cases(output):
    m = re.search(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed", output)
    if m:
        return int(m.group(2)), int(m.group(3))
    m = re.search(r"^Ran (\d+) tests?", output, re.M)
    if m:
        ran = int(m.group(1))
        f = re.search(r"FAILED \(([^)]*)\)", output)
        failed = 0
        if f:
            for part in f.group(1).split(","):
                name, _, num = part.strip().partition("=")
                if name in ("failures", "errors"):
                    failed += int(num)
        skipped = re.search(r"skipped=(\d+)", output)
        skip = int(skipped.group(1)) if skipped else 0
        return ran - failed - skip, failed
    return None


def main(path):
    passed = failed = 0
    with open(path) as f:
        for line in f:
            t = json.loads(line)
            ok = t["result"] in ("OK", "EXPECTEDFAIL", "SKIP")
            counted = cases(t.get("stdout", "") + t.get("stderr", ""))
            if counted:
                p, fl = counted
                if not ok and fl == 0:
                    fl = 1
            else:
                p, fl = (1, 0) if ok else (0, 1)
            passed += p
            failed += fl
            print(f"{t['name']}: {t['result']} ({p} passed, {fl} failed, {t['duration']:.1f} s)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

#!/usr/bin/env python3
"""The Debian package, end to end on this machine (as root; systemd need not be PID 1):
`dpkg-buildpackage -us -uc -b` on a copy of the source tree (what git tracks and does not
ignore, as it is in the working tree), `lintian` with no error or warning left, `dpkg -i` (the
user percore made, the unit installed and enabled, /etc/default/percore a conffile), the packaged
binary run the way the unit runs it (its user, no capability, its environment, its system call
filter and MemoryDenyWriteExecute=, a NOTIFY_SOCKET that must get READY=1 and STOPPING=1) serving
with auth on through the packaged crypto module, then `dpkg --purge` and the machine left as it was.

The build is a whole compile of the server and its module: DEB_BUILD_OPTIONS="noopt nocheck
noautodbgsym parallel=2" and -g0 (-O0 without debug information compiles faster; the timings are in
docs/packaging.md). Each step prints its
wall time.

usage: test_deb.py --jobs N
"""

from __future__ import annotations

import glob
import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import install_support as support
from install_support import percore_client

OPTIONS = None  # set by support.main()
PACKAGE = "percore"
TOOLS = ["dpkg-buildpackage", "lintian", "dh", "git", "systemd-analyze", "systemd-sysusers"]


def timed(label: str, started: float):
    print(f"{label}: {time.monotonic() - started:.1f} s", flush=True)


def installed(package: str) -> bool:
    p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return p.returncode == 0 and "installed" in p.stdout.split()


def exists(lookup, name: str) -> bool:
    """Whether the account `name` exists: lookup is pwd.getpwnam (a user) or grp.getgrnam (a group)."""
    try:
        lookup(name)
        return True
    except KeyError:
        return False


def copy_source_tree(destination: str):
    """The files git tracks and the untracked ones it does not ignore (no build folder, no
    node_modules), as they are in the working tree."""
    listed = subprocess.run(["git", "-C", support.REPO, "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], check=True, capture_output=True).stdout
    names = [n for n in listed.decode().split("\0") if n and os.path.lexists(os.path.join(support.REPO, n))]
    os.makedirs(destination)
    pack = subprocess.Popen(["tar", "-C", support.REPO, "--null", "-T", "-", "-cf", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    unpack = subprocess.Popen(["tar", "-C", destination, "-xf", "-"], stdin=pack.stdout)
    pack.stdout.close()
    pack.stdin.write("\0".join(names).encode())
    pack.stdin.close()
    if pack.wait() != 0 or unpack.wait() != 0:
        raise AssertionError("copying the source tree failed")


class DebianPackage(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        missing = [t for t in TOOLS if shutil.which(t) is None]
        if os.geteuid() != 0 or missing:
            raise AssertionError(f"needs root and {TOOLS} (bash .ci/deps debhelper lintian systemd); "
                                 f"missing: {missing}, uid {os.geteuid()}")
        if installed(PACKAGE):
            raise AssertionError(f"the package {PACKAGE} is installed on this machine: this test would "
                                 "replace and purge it")
        cls.work = tempfile.mkdtemp(prefix="percore-deb-")
        cls.source = os.path.join(cls.work, "percore-0.1.0")
        copy_source_tree(cls.source)
        started = time.monotonic()
        # -g0 after dpkg-buildflags' -g, and no -dbgsym package (noautodbgsym: it would hold no
        # symbols, which lintian warns of): no debug information to write, split off and package;
        # what is checked here (files, scripts, lintian, serving) does not need it
        env = dict(os.environ, DEB_BUILD_OPTIONS=f"noopt nocheck noautodbgsym parallel={OPTIONS.jobs}",
                   DEB_CXXFLAGS_MAINT_APPEND="-g0", LC_ALL="C.UTF-8")
        p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=cls.source, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        timed("dpkg-buildpackage -us -uc -b", started)
        cls.build_output = p.stdout + p.stderr
        if p.returncode != 0:
            shutil.rmtree(cls.work, ignore_errors=True)
            raise AssertionError(f"dpkg-buildpackage exited {p.returncode}:\n{cls.build_output[-6000:]}")
        cls.changes = glob.glob(os.path.join(cls.work, f"{PACKAGE}_*.changes"))
        cls.debs = glob.glob(os.path.join(cls.work, f"{PACKAGE}_*.deb"))
        cls.triplet = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], check=True,
                                     capture_output=True, text=True).stdout.strip()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_lintian_finds_no_error_and_no_warning(self):
        self.assertEqual(len(self.changes), 1, self.changes)
        started = time.monotonic()
        p = subprocess.run(["lintian", "--fail-on", "error,warning", "--info", "--display-info",
                            self.changes[0]],
                           capture_output=True, text=True)
        timed("lintian", started)
        print(p.stdout, end="")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_the_build_made_only_what_the_package_installs(self):
        # -Dtests=false -Dperf=false: every executable or module built is in the package
        built = subprocess.run(["meson", "introspect", os.path.join(self.source, "build-deb"), "--targets"],
                               check=True, capture_output=True, text=True).stdout
        targets = [t for t in json.loads(built) if t["type"] in ("executable", "shared module", "shared library")]
        self.assertEqual(sorted(t["name"] for t in targets), ["percore", "percore-crypto"])
        self.assertTrue(all(t["installed"] for t in targets), targets)

    def test_the_package_installs_enables_serves_and_purges(self):
        self.assertEqual(len(self.debs), 1, self.debs)
        had_user, had_group = exists(pwd.getpwnam, PACKAGE), exists(grp.getgrnam, PACKAGE)
        self.addCleanup(self.leave_the_machine_as_it_was, had_user, had_group)
        started = time.monotonic()
        support.run(["dpkg", "-i", self.debs[0]], self, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        timed("dpkg -i", started)
        self.check_installed()
        started = time.monotonic()
        self.serve_as_the_unit_does()
        timed("serve as the unit does", started)
        started = time.monotonic()
        support.run(["dpkg", "--purge", PACKAGE], self)
        timed("dpkg --purge", started)
        for path in ("/usr/bin/percore", "/lib/systemd/system/percore.service", "/etc/default/percore",
                     "/etc/systemd/system/multi-user.target.wants/percore.service",
                     f"/usr/lib/{self.triplet}/percore"):
            self.assertFalse(os.path.lexists(path), f"{path} is left after the purge")

    def check_installed(self):
        user = pwd.getpwnam(PACKAGE)
        self.assertEqual((user.pw_dir, user.pw_shell), ("/var/lib/percore", "/usr/sbin/nologin"))
        self.assertLess(user.pw_uid, 1000)
        self.assertEqual(grp.getgrgid(user.pw_gid).gr_name, PACKAGE)
        for path in ("/usr/bin/percore", f"/usr/lib/{self.triplet}/percore/percore-crypto.so",
                     "/lib/systemd/system/percore.service", "/usr/lib/sysusers.d/percore.conf",
                     "/etc/default/percore", "/usr/share/man/man1/percore.1.gz",
                     "/usr/share/doc/percore/copyright"):
            self.assertTrue(os.path.isfile(path), f"{path} is not installed")
        wants = "/etc/systemd/system/multi-user.target.wants/percore.service"
        self.assertEqual(os.readlink(wants), "/lib/systemd/system/percore.service", "the unit is not enabled")
        conffiles = subprocess.run(["dpkg-query", "-W", "-f=${Conffiles}", PACKAGE], check=True,
                                   capture_output=True, text=True).stdout
        self.assertIn("/etc/default/percore", conffiles)

    def serve_as_the_unit_does(self):
        unit = "/lib/systemd/system/percore.service"
        self.assertEqual(support.unit_value(unit, "ExecStart"), "/usr/bin/percore serve")
        user = support.unit_value(unit, "User")
        folder = support.temporary_folder(self, "percore-deb-serve-", mode=0o711)
        data = os.path.join(folder, "data")  # as StateDirectory= makes it: the user's, 0700
        os.mkdir(data, 0o700)
        os.chown(data, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
        notify = support.NotifySocket(folder, mode=0o666)
        self.addCleanup(notify.close)
        sandboxed = support.wrapper(folder, ["/usr/bin/percore"], user=user,
                                    allowed_calls=support.unit_syscall_allow_list(unit),
                                    env=support.service_environment(unit))
        os.environ["PERCORE_BIN"] = sandboxed
        # the command line wins over the unit's environment: a port of ours, auth on, our folder
        s = percore_client.Server(shards=None, data=data, args=["--auth", "on"],
                                  env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "10000000"})
        self.addCleanup(s.cleanup)
        s.wait_ready()
        notify.wait_for("READY=1")
        with open(f"/proc/{s.proc.pid}/status", encoding="utf-8") as f:
            status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        self.assertEqual(int(status["Uid"].split()[0]), pwd.getpwnam(user).pw_uid)
        self.assertEqual(int(status["CapEff"], 16), 0)
        self.assertEqual(int(status["CapBnd"], 16), 0)
        self.assertEqual(status["NoNewPrivs"].strip(), "1")
        self.assertEqual(status["Seccomp"].strip(), "2")
        self.assertEqual(support.mapped_crypto_modules(s.proc.pid),
                         {f"/usr/lib/{self.triplet}/percore/percore-crypto.so"})
        token_file = os.path.join(data, "admin.token")
        self.assertEqual(os.stat(token_file).st_uid, pwd.getpwnam(user).pw_uid)
        self.assertEqual(os.stat(token_file).st_mode & 0o777, 0o600)
        support.put_and_get(self, s.port, support.read_token(data))
        s.stop_and_check(self)
        notify.wait_for("STOPPING=1")
        self.assertNotIn("Operation not permitted", s.stderr())

    def leave_the_machine_as_it_was(self, had_user: bool, had_group: bool):
        if installed(PACKAGE):
            subprocess.run(["dpkg", "--purge", PACKAGE], capture_output=True)
        # Debian leaves a system user on purge (files may still be its); this test removes its own
        if not had_user and exists(pwd.getpwnam, PACKAGE):
            subprocess.run(["userdel", PACKAGE], check=True)
        if not had_group and exists(grp.getgrnam, PACKAGE):
            subprocess.run(["groupdel", PACKAGE], check=True)
        self.assertEqual((exists(pwd.getpwnam, PACKAGE), exists(grp.getgrnam, PACKAGE)), (had_user, had_group))


if __name__ == "__main__":
    sys.exit(support.main([("--jobs", "DEB_BUILD_OPTIONS parallel=N")]))

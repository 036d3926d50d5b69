#!/usr/bin/env python3
"""The systemd unit and its companions (shards/systemd), checked without systemd as PID 1:
`systemd-analyze verify` and `security --offline` on the unit meson configured, its hardening
lines, the sysusers.d entry applied to a scratch root, the options file and the manual page
against the options the binary parses, and the built server serving HTTPS with auth inside the
unit's SystemCallFilter= and MemoryDenyWriteExecute= (OpenSSL in the crypto module included).

usage: test_unit.py --build-dir BUILD --percore BUILD/shards/percore --module BUILD/crypto/percore-crypto.so
"""

from __future__ import annotations

import mmap
import os
import re
import shutil
import ssl
import sys
import unittest

import install_support as support
from install_support import percore_client

OPTIONS = None  # set by support.main()
SYSTEMD = os.path.join(support.REPO, "shards", "systemd")
MAN_PAGE = os.path.join(support.REPO, "docs", "percore.1")


def configured_unit() -> str:
    return os.path.join(OPTIONS.build_dir, "shards", "systemd", "percore.service")


def serve_variables() -> list[str]:
    """The PERCORE_* variable of every serve option, from the table the binary parses."""
    with open(os.path.join(support.REPO, "shards", "server", "options.cpp"), encoding="utf-8") as f:
        names = re.findall(r'\{"--[a-z-]+", "(PERCORE_[A-Z_]+)"\}', f.read())
    if len(names) < 16:
        raise AssertionError(f"shards/server/options.cpp: expected the 16 options of SPEC §1, found {names}")
    return names


class TheUnit(unittest.TestCase):

    def unit_runnable_here(self) -> str:
        """A copy of the configured unit whose ExecStart= names the built binary (verify checks
        that the binary exists), and a MANPATH where its Documentation= man page is found."""
        folder = support.temporary_folder(self, "percore-unit-")
        unit = os.path.join(folder, "percore.service")
        with open(configured_unit(), encoding="utf-8") as f:
            text = f.read()
        installed = support.unit_value(configured_unit(), "ExecStart").split()[0]
        with open(unit, "w", encoding="utf-8") as f:
            f.write(text.replace(f"ExecStart={installed} ", f"ExecStart={os.path.abspath(OPTIONS.percore)} "))
        os.makedirs(os.path.join(folder, "man", "man1"))
        shutil.copy(MAN_PAGE, os.path.join(folder, "man", "man1", "percore.1"))
        self.env = dict(os.environ, MANPATH=os.path.join(folder, "man"), SYSTEMD_LOG_COLOR="0")
        return unit

    def test_systemd_analyze_verify_accepts_the_unit_without_a_warning(self):
        unit = self.unit_runnable_here()
        p = support.run(["systemd-analyze", "verify", unit], self, env=self.env)
        self.assertEqual(p.stdout + p.stderr, "", "systemd-analyze verify printed warnings")

    def test_the_unit_names_the_installed_binary_and_options_file(self):
        dirs = support.meson_dirs(OPTIONS.build_dir)
        prefix = dirs["prefix"]
        self.assertEqual(support.unit_value(configured_unit(), "ExecStart"),
                         os.path.join(prefix, dirs["bindir"], "percore") + " serve")
        self.assertEqual(support.unit_value(configured_unit(), "EnvironmentFile"),
                         "-" + os.path.join(prefix, dirs["sysconfdir"], "default", "percore"))

    def test_the_unit_keeps_every_hardening_line(self):
        settings = [f"{k}={v}" for k, v in support.unit_settings(configured_unit())]
        missing = [line for line in support.HARDENING_LINES if line not in settings]
        self.assertEqual(missing, [], "hardening lines missing from the unit")

    def test_the_service_is_a_notify_service_with_a_watchdog_its_own_user_and_a_bounded_stop(self):
        unit = configured_unit()
        expected = {"Type": "notify", "NotifyAccess": "main", "User": "percore", "Group": "percore",
                    "StateDirectory": "percore", "StateDirectoryMode": "0700",
                    "Environment": "PERCORE_DATA=/var/lib/percore", "Restart": "on-failure",
                    "WantedBy": "multi-user.target"}
        for key, value in expected.items():
            self.assertEqual(support.unit_value(unit, key), value, key)
        stop = int(support.unit_value(unit, "TimeoutStopSec"))
        self.assertTrue(5 < stop <= 30, f"TimeoutStopSec={stop}: above SPEC's 5 s stop, and finite")
        self.assertGreater(int(support.unit_value(unit, "WatchdogSec")), 0)
        self.assertGreaterEqual(int(support.unit_value(unit, "LimitNOFILE")), 65536)
        self.assertNotIn("ReadWritePaths", dict(support.unit_settings(unit)),
                         "nothing writable but the StateDirectory")

    def test_the_exposure_score_stays_low(self):
        unit = self.unit_runnable_here()
        p = support.run(["systemd-analyze", "security", "--offline=true", "--no-pager", unit], self,
                        env=self.env)
        m = re.search(r"Overall exposure level for percore\.service: (\d+\.\d+)", p.stdout)
        self.assertIsNotNone(m, p.stdout[-2000:])
        print(f"systemd-analyze security: exposure {m.group(1)}")
        self.assertLessEqual(float(m.group(1)), support.MAX_EXPOSURE, p.stdout)


class TheCompanions(unittest.TestCase):

    def test_the_sysusers_entry_makes_a_system_user_and_group_without_login(self):
        root = support.temporary_folder(self, "percore-sysusers-")
        os.makedirs(os.path.join(root, "etc"))
        support.run(["systemd-sysusers", f"--root={root}", os.path.join(SYSTEMD, "percore.sysusers")], self)
        with open(os.path.join(root, "etc", "passwd"), encoding="utf-8") as f:
            users = [line.strip().split(":") for line in f]
        with open(os.path.join(root, "etc", "group"), encoding="utf-8") as f:
            groups = [line.strip().split(":") for line in f]
        self.assertEqual(len(users), 1, users)
        name, _, uid, gid, _, home, shell = users[0]
        self.assertEqual((name, home, shell), ("percore", "/var/lib/percore", "/usr/sbin/nologin"))
        self.assertLess(int(uid), 1000, "a system user")
        self.assertEqual([(g[0], g[2]) for g in groups], [("percore", gid)])

    def test_the_options_file_lists_every_serve_option_and_sets_none(self):
        path = os.path.join(SYSTEMD, "percore.default")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for name in serve_variables():
            self.assertRegex(text, rf"(?m)^#{name}=\S", f"{name} is not in percore.default")
        # every line left commented out: the defaults are the binary's (an empty value would be an error)
        self.assertEqual(support.environment_file(path), {})

    def test_the_manual_page_documents_every_command_and_option_with_its_variable(self):
        with open(MAN_PAGE, encoding="utf-8") as f:
            page = f.read()
        for command in ("serve", "check", "restore", "version", "help"):
            self.assertRegex(page, rf"(?m)^\.SY percore\n\.B {command}$", f"SYNOPSIS lacks {command}")
        for name in serve_variables():
            self.assertIn(f".RB ( {name} )", page)
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SIGNALS",
                        "ENVIRONMENT", "FILES", "SEE ALSO"):
            self.assertRegex(page, rf'(?m)^\.SH "?{section}"?$')
        for variable in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "PERCORE_CRYPTO_MODULE"):
            self.assertIn(f".B {variable}", page)

    def test_the_manual_page_renders_without_a_warning(self):
        p = support.run(["groff", "-man", "-ww", "-z", MAN_PAGE], self)
        self.assertEqual(p.stderr, "")
        p = support.run(["man", "--warnings", "-l", MAN_PAGE], self,
                        env=dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat"))
        self.assertEqual(p.stderr, "")
        p = support.run(["lexgrog", MAN_PAGE], self)
        self.assertIn('"percore - durable HTTP/1.1 document server', p.stdout)


def in_child(check) -> int:
    """Runs check() in a forked child (a sandbox cannot be left); its exit code: 0 when check()
    returned True."""
    pid = os.fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if check() else 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def refused(call) -> bool:
    try:
        call()
    except PermissionError:
        return True
    return False


class InTheUnitsSandbox(unittest.TestCase):
    """The unit's SystemCallFilter= and MemoryDenyWriteExecute=, applied as systemd applies them
    (install_support.enter_sandbox), bite, and the server serves under them."""

    def test_writable_executable_memory_is_refused(self):
        def check():
            support.enter_sandbox()
            mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            return refused(lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC))
        self.assertEqual(in_child(check), 0, "a W+X mapping was allowed")

    def test_the_allow_list_is_system_service_without_privileged_calls(self):
        allowed = set(support.unit_syscall_allow_list(configured_unit()))
        numbers = support.syscall_numbers()
        for name in ("sched_setaffinity", "setrlimit", "prlimit64", "fdatasync", "fallocate", "sendfile",
                     "flock", "epoll_pwait", "eventfd2", "setsockopt", "accept4", "clone3", "futex"):
            self.assertIn(numbers[name], allowed, name)
        for name in ("chroot", "setuid", "capset", "mount", "ptrace", "reboot", "init_module", "bpf"):
            self.assertNotIn(numbers[name], allowed, name)

    def test_a_call_outside_the_allow_list_is_refused_with_eperm(self):
        allowed = support.unit_syscall_allow_list(configured_unit())

        def check():
            support.enter_sandbox(allowed_calls=allowed)
            return os.getpid() > 0 and refused(lambda: os.chroot("/"))  # chroot: @privileged
        self.assertEqual(in_child(check), 0, "chroot was allowed")

    def test_the_server_serves_https_with_auth_in_it(self):
        folder = support.temporary_folder(self, "percore-sandbox-")
        cert, key = percore_client.suite_certificate()
        version = support.run([OPTIONS.percore, "version"], self).stdout
        # the sanitizers' runtimes make calls of their own (LeakSanitizer: ptrace), so a
        # sanitized build gets the W^X rule only
        allowed = None if "sanitizer" in version else support.unit_syscall_allow_list(configured_unit())
        os.environ["PERCORE_BIN"] = support.wrapper(folder, [os.path.abspath(OPTIONS.percore)],
                                                    allowed_calls=allowed)
        s = percore_client.Server(shards=2, data=os.path.join(folder, "data"),
                                  args=["--auth", "on", "--tls-listen", "127.0.0.1:0",
                                        "--tls-cert", cert, "--tls-key", key],
                                  env={"PERCORE_CRYPTO_MODULE": os.path.abspath(OPTIONS.module)})
        self.addCleanup(s.cleanup)
        s.wait_ready()
        with open(f"/proc/{s.proc.pid}/status", encoding="utf-8") as f:
            self.assertIn("Seccomp:\t2", f.read(), "the server does not run under the filter")
        self.assertEqual(support.mapped_crypto_modules(s.proc.pid), {os.path.abspath(OPTIONS.module)})
        token = support.read_token(s.data)
        support.put_and_get(self, s.port, token)
        support.put_and_get(self, s.tls_port, token, tls=ssl.create_default_context(cafile=cert))
        s.stop_and_check(self)
        self.assertNotIn("Operation not permitted", s.stderr())


if __name__ == "__main__":
    sys.exit(support.main([("--build-dir", "the meson build folder"),
                           ("--percore", "the built server"),
                           ("--module", "the built crypto module")]))

#!/usr/bin/env python3
"""`meson install` of the build running the tests into a scratch --destdir: every file lands where
docs/packaging.md says (and nothing else: no test, no perf tool), and the installed binary, moved
out of its prefix with the whole tree, finds its crypto module inside that tree (the loader's
candidate relative to the binary, crypto/loader.hpp) and serves with auth on.

usage: test_meson_install.py --build-dir BUILD
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import unittest

import install_support as support
from install_support import percore_client

OPTIONS = None  # set by support.main()


def unit_folder(prefix: str) -> str:
    """Where shards/systemd/meson.build puts the unit: systemd's own folder for prefix /usr,
    else <prefix>/lib/systemd/system."""
    if prefix == "/usr":
        p = subprocess.run(["pkg-config", "--variable=systemdsystemunitdir", "systemd"],
                           capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip():
            return p.stdout.strip()
    return os.path.join(prefix, "lib", "systemd", "system")


class MesonInstall(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.destdir = tempfile.mkdtemp(prefix="percore-destdir-")
        p = subprocess.run(["meson", "install", "-C", OPTIONS.build_dir, "--destdir", cls.destdir,
                            "--no-rebuild", "--quiet"], capture_output=True, text=True, timeout=120)
        cls.install_output = p.stdout + p.stderr
        cls.install_rc = p.returncode
        d = support.meson_dirs(OPTIONS.build_dir)
        cls.prefix = d["prefix"]
        def under(*parts):  # a path of the installed layout, inside the destdir
            return os.path.join(cls.destdir, *[q.lstrip("/") for q in parts])
        cls.options_file = under(cls.prefix, d["sysconfdir"], "default", "percore")
        cls.binary = under(cls.prefix, d["bindir"], "percore")
        cls.module = under(cls.prefix, d["libdir"], "percore", "percore-crypto.so")
        cls.unit = under(unit_folder(cls.prefix), "percore.service")
        docs = ["README.md", "openapi.yaml"] + sorted(
            os.path.basename(p) for p in glob.glob(os.path.join(support.REPO, "docs", "*.md")))
        cls.expected = {
            cls.binary, cls.module, cls.unit,
            under(cls.prefix, "lib", "sysusers.d", "percore.conf"),
            cls.options_file,
            under(cls.prefix, d["mandir"], "man1", "percore.1"),
        } | {under(cls.prefix, d["datadir"], "doc", "percore", name) for name in docs}
        cls.dirs = d

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", "--one-file-system", cls.destdir])

    def test_meson_install_puts_every_file_where_expected_and_nothing_else(self):
        self.assertEqual(self.install_rc, 0, self.install_output)
        installed = set()
        for folder, _, files in os.walk(self.destdir):
            installed |= {os.path.join(folder, f) for f in files}
        self.assertEqual(sorted(self.expected - installed), [], "not installed")
        self.assertEqual(sorted(installed - self.expected), [], "installed but not expected")
        self.assertTrue(support.is_executable_file(self.binary))
        self.assertEqual(os.stat(self.options_file).st_mode & 0o777, 0o644)

    def test_the_installed_unit_runs_the_installed_binary(self):
        self.assertEqual(self.install_rc, 0, self.install_output)
        self.assertEqual(support.unit_value(self.unit, "ExecStart"),
                         os.path.join(self.prefix, self.dirs["bindir"], "percore") + " serve")

    def test_the_installed_binary_finds_its_module_in_the_tree_and_serves_with_auth(self):
        self.assertEqual(self.install_rc, 0, self.install_output)
        folder = support.temporary_folder(self, "percore-installed-")
        os.environ["PERCORE_BIN"] = self.binary  # PERCORE_CRYPTO_MODULE is not passed on (server_env)
        s = percore_client.Server(shards=1, data=os.path.join(folder, "data"), args=["--auth", "on"])
        self.addCleanup(s.cleanup)
        s.wait_ready()
        self.assertEqual(support.mapped_crypto_modules(s.proc.pid), {os.path.realpath(self.module)},
                         "the module was not the installed tree's")
        support.put_and_get(self, s.port, support.read_token(s.data))
        s.stop_and_check(self)


if __name__ == "__main__":
    sys.exit(support.main([("--build-dir", "the meson build folder to install")]))

"""Shared pieces of the install tests (tests/install): what systemd would do for percore.service,
done by hand on a machine where systemd is not PID 1, and a runner for the three test modules.

* ``unit_settings`` / ``service_environment``: the unit file's settings, and the environment its
  Environment= and EnvironmentFile= lines give the service.
* ``wrapper``: an executable that, in place of percore, enters the unit's sandbox the way systemd
  does (``enter_sandbox``: User=/Group= with no capability, NoNewPrivileges=, then one seccomp
  filter for SystemCallFilter= with SystemCallErrorNumber=EPERM and MemoryDenyWriteExecute=) and
  execs the real command. ``percore_client.Server`` starts it as it would start percore
  (PERCORE_BIN), so the ready line, the requests and the SIGTERM are the usual ones.
* ``NotifySocket``: a NOTIFY_SOCKET the test owns, as systemd's for a Type=notify service.
* ``put_and_get``: one authenticated PUT and GET, the check that the server serves.
* ``main``: runs one test module's unittest cases, with the module's own options parsed first;
  fails when no test ran.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import pwd
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import percore_client  # noqa: E402  (the integration tests' client and server runner)

# The hardening the unit must keep (docs/packaging.md): each line exactly as the unit writes it.
HARDENING_LINES = [
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "PrivateMounts=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "ProtectProc=invisible",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
    "RestrictNamespaces=yes",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "MemoryDenyWriteExecute=yes",
    "RemoveIPC=yes",
    "PrivateIPC=yes",
    "LimitCORE=0",
    "IPAddressDeny=169.254.0.0/16 fe80::/10",
    "SystemCallArchitectures=native",
    "SystemCallFilter=@system-service",
    "SystemCallFilter=~@privileged",
    "UMask=0077",
]
# `systemd-analyze security` rates exposure from 0 (none) to 10; the unit scores 1.4 with
# systemd 252 (docs/packaging.md). Above this, a hardening line was lost.
MAX_EXPOSURE = 2.0


# --------------------------------------------------------------------------
# The unit file


def unit_settings(path: str) -> list[tuple[str, str]]:
    """Every KEY=VALUE of a unit file, in order (comments, blank lines and sections left out)."""
    settings = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;[" or "=" not in line:
                continue
            key, value = line.split("=", 1)
            settings.append((key.strip(), value.strip()))
    return settings


def unit_value(path: str, key: str) -> str:
    values = [v for k, v in unit_settings(path) if k == key]
    if len(values) != 1:
        raise AssertionError(f"{path}: expected one {key}=, found {values}")
    return values[0]


def environment_file(path: str) -> dict[str, str]:
    """The assignments of an EnvironmentFile= (KEY=VALUE lines; '#' comments)."""
    env = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip().strip('"')
    return env


def service_environment(unit_path: str, root: str = "/") -> dict[str, str]:
    """What the unit's Environment= and EnvironmentFile= lines give the service, the file's
    assignments over the unit's (systemd.exec(5)); a '-' file that is missing is skipped."""
    env: dict[str, str] = {}
    files = []
    for key, value in unit_settings(unit_path):
        if key == "Environment":
            for assignment in value.split():
                name, _, v = assignment.partition("=")
                env[name] = v
        elif key == "EnvironmentFile":
            optional = value.startswith("-")
            files.append((value.lstrip("-"), optional))
    for path, optional in files:
        full = os.path.join(root, path.lstrip("/"))
        if optional and not os.path.exists(full):
            continue
        env.update(environment_file(full))
    return env


# --------------------------------------------------------------------------
# The unit's sandbox, applied as systemd applies it: privileges dropped first, then one seccomp
# filter (SystemCallFilter=, SystemCallErrorNumber=EPERM, MemoryDenyWriteExecute=), then exec.

_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_RET_ALLOW = 0x7FFF0000
_DENY = 0x00050000 | 1                                  # SECCOMP_RET_ERRNO | EPERM
_PROT_WRITE, _PROT_EXEC = 0x2, 0x4
# per machine: (audit arch, mmap, mprotect, pkey_mprotect, the header that numbers the calls)
_ARCHES = {
    "x86_64": (0xC000003E, 9, 10, 329, "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": (0xC00000B7, 222, 226, 288, "/usr/include/asm-generic/unistd.h"),
}
# systemd.exec(5): allowed whatever the filter says (exec and exit, signal return, time, sleep)
_ALWAYS_ALLOWED = {"execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn",
                   "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "nanosleep", "time"}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _syscall_groups() -> dict[str, list[str]]:
    """systemd's system call groups (`systemd-analyze syscall-filter`): name -> members."""
    out = subprocess.run(["systemd-analyze", "syscall-filter", "--no-pager"], check=True,
                         capture_output=True, text=True).stdout
    groups: dict[str, list[str]] = {}
    current = None
    for line in out.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.split()[0], [])
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())
    return groups


def unit_syscall_allow_list(unit_path: str) -> list[int]:
    """The numbers of the system calls the unit's SystemCallFilter= lines allow on this machine:
    the allowed sets, less the ~ sets, plus what systemd always allows."""
    groups = _syscall_groups()

    def expand(item: str) -> set[str]:
        return set().union(*(expand(m) for m in groups[item])) if item.startswith("@") else {item}

    allowed, denied = set(), set()
    for key, value in unit_settings(unit_path):
        if key == "SystemCallFilter":
            negated = value.startswith("~")
            for item in value.lstrip("~").split():
                (denied if negated else allowed).update(expand(item))
    numbers = syscall_numbers()
    return sorted({numbers[n] for n in (allowed - denied) | _ALWAYS_ALLOWED if n in numbers})


def syscall_numbers() -> dict[str, int]:
    """This machine's system call numbers by name, from the kernel headers (linux-libc-dev)."""
    numbers = {}
    with open(_ARCHES[platform.machine()][4], encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "#define" and parts[2].isdigit():
                numbers[parts[1].removeprefix("__NR_").removeprefix("__NR3264_")] = int(parts[2])
    return numbers


def _drop_to(user: str):
    """User=, Group= (and its supplementary groups), CapabilityBoundingSet= and
    AmbientCapabilities= empty: the bounding set emptied while still root, then the ids changed,
    which clears the permitted, effective and ambient sets."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/sys/kernel/cap_last_cap", encoding="utf-8") as f:
        for cap in range(int(f.read()) + 1):
            if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), f"cannot drop capability {cap}")
    account = pwd.getpwnam(user)
    os.initgroups(user, account.pw_gid)
    os.setresgid(account.pw_gid, account.pw_gid, account.pw_gid)
    os.setresuid(account.pw_uid, account.pw_uid, account.pw_uid)


def enter_sandbox(user: str | None = None, allowed_calls: list[int] | None = None):
    """From now on, and across exec: NoNewPrivileges=; MemoryDenyWriteExecute= as systemd does
    it (mmap with PROT_WRITE|PROT_EXEC and mprotect/pkey_mprotect with PROT_EXEC refused); with
    `allowed_calls`, every other system call but those refused with EPERM (SystemCallFilter=,
    SystemCallErrorNumber=EPERM); with `user`, that user with no capability (above)."""
    if user is not None:
        _drop_to(user)
    arch, mmap_nr, mprotect_nr, pkey_mprotect_nr, _ = _ARCHES[platform.machine()]
    ld_w, ja, jeq_k, and_k, ret_k = 0x20, 0x05, 0x15, 0x54, 0x06  # BPF_LD|W|ABS, JMP|JA, JMP|JEQ|K, ALU|AND|K, RET|K
    prot_low = 16 + 8 * 2                                  # seccomp_data.args[2], low half (LE)
    allow_rest = _SECCOMP_RET_ALLOW if allowed_calls is None else _DENY
    program = [
        (ld_w, 0, 0, 4), (jeq_k, 1, 0, arch), (ret_k, 0, 0, _DENY),  # SystemCallArchitectures=native
        (ld_w, 0, 0, 0),                                          # the call's number
        (jeq_k, 3, 0, mmap_nr), (jeq_k, 7, 0, mprotect_nr), (jeq_k, 6, 0, pkey_mprotect_nr),
        (ja, 0, 0, 10),                                           # to the allow list
        (ld_w, 0, 0, prot_low), (and_k, 0, 0, _PROT_WRITE | _PROT_EXEC),   # 8: mmap, W and X
        (jeq_k, 1, 0, _PROT_WRITE | _PROT_EXEC), (ret_k, 0, 0, _SECCOMP_RET_ALLOW), (ret_k, 0, 0, _DENY),
        (ld_w, 0, 0, prot_low), (and_k, 0, 0, _PROT_EXEC),                  # 13: mprotect, X
        (jeq_k, 1, 0, _PROT_EXEC), (ret_k, 0, 0, _SECCOMP_RET_ALLOW), (ret_k, 0, 0, _DENY),
    ]                                                             # 18: the allow list
    for number in allowed_calls or []:
        program += [(jeq_k, 0, 1, number), (ret_k, 0, 0, _SECCOMP_RET_ALLOW)]
    program.append((ret_k, 0, 0, allow_rest))
    filters = (_SockFilter * len(program))(*[_SockFilter(*op) for op in program])
    fprog = _SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot install the seccomp filter")


def wrapper(folder: str, command: list[str], user: str | None = None, allowed_calls: list[int] | None = None,
            env: dict | None = None) -> str:
    """An executable in `folder` that enters the sandbox above (`user`, `allowed_calls`), sets
    `env`, and execs `command` plus its own arguments, keeping its pid (the server's pid for
    SIGTERM and WATCHDOG_PID, as under systemd)."""
    path = os.path.join(folder, "sandboxed-percore")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"#!{sys.executable}\n"
                "import os, sys\n"
                f"sys.path.insert(0, {HERE!r})\n"
                "import install_support\n"
                f"install_support.enter_sandbox({user!r}, {allowed_calls!r})\n"
                f"os.environ.update({dict(env or {})!r})\n"
                "os.environ['WATCHDOG_PID'] = str(os.getpid())\n"
                f"os.execv({command[0]!r}, {list(command)!r} + sys.argv[1:])\n")
    os.chmod(path, 0o755)
    return path


# --------------------------------------------------------------------------
# The notify socket and the requests


class NotifySocket:
    """An AF_UNIX datagram socket at a path, as systemd's NOTIFY_SOCKET; `mode` lets a service
    running as another user send to it."""

    def __init__(self, folder: str, mode: int = 0o600):
        self.path = os.path.join(folder, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        os.chmod(self.path, mode)
        self.messages: list[str] = []

    def wait_for(self, assignment: str, timeout: float = 10.0) -> list[str]:
        """Reads messages until one holds the line `assignment`; returns every message so far."""
        self.sock.settimeout(timeout)
        while not any(assignment in m.split("\n") for m in self.messages):
            try:
                self.messages.append(self.sock.recv(4096).decode("utf-8", "replace"))
            except socket.timeout:
                raise AssertionError(f"no {assignment} on NOTIFY_SOCKET within {timeout} s; "
                                     f"got {self.messages}") from None
        return self.messages

    def close(self):
        self.sock.close()


def put_and_get(testcase: unittest.TestCase, port: int, token: str, tls=None):
    """With auth on (the token hashed by the crypto module): a new app, one authenticated PUT
    and GET of a document in it, and the same GET refused without the token."""
    auth = {"Authorization": f"Bearer {token}"}
    app = percore_client.unique("install")
    path = f"/{app}/greeting"
    with percore_client.Conn(port, tls=tls) as c:
        r = c.put(f"/_apps/{app}", b"{}", auth)  # with auth on, the admin makes the app
        testcase.assertEqual(r.status, 201, r)
        r = c.put(path, b"hello from the installed tree", auth)
        testcase.assertEqual(r.status, 201, r)
        r = c.get(path, auth)
        testcase.assertEqual(r.status, 200, r)
        testcase.assertEqual(r.body, b"hello from the installed tree")
        testcase.assertEqual(c.get(path).status, 401)


def read_token(data_dir: str) -> str:
    with open(os.path.join(data_dir, "admin.token"), encoding="utf-8") as f:
        return f.read().strip()


def mapped_crypto_modules(pid: int) -> set[str]:
    """The paths of the percore-crypto.so files that process `pid` has mapped."""
    with open(f"/proc/{pid}/maps", encoding="utf-8") as f:
        return {line.split()[-1] for line in f if line.rstrip().endswith("/percore-crypto.so")}


def run(command: list[str], testcase: unittest.TestCase, cwd=None, env=None,
        timeout=120) -> subprocess.CompletedProcess:
    """Runs a command that must exit 0; its output goes into the failure message."""
    p = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    testcase.assertEqual(p.returncode, 0, f"{' '.join(command)} exited {p.returncode}:\n"
                                          f"{(p.stdout + p.stderr)[-4000:]}")
    return p


def meson_dirs(build_dir: str) -> dict[str, str]:
    """The build's directory options (prefix, bindir, libdir, sysconfdir, ...)."""
    out = subprocess.run(["meson", "introspect", build_dir, "--buildoptions"], check=True,
                         capture_output=True, text=True).stdout
    return {o["name"]: o["value"] for o in json.loads(out) if o["section"] == "directory"}


def is_executable_file(path: str) -> bool:
    st = os.stat(path)
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


# --------------------------------------------------------------------------
# Running a module


def main(options: list[tuple[str, str]]) -> int:
    """Parses `options` ((flag, help) pairs, each required, each taking a value) into the
    module-level OPTIONS of __main__, then runs its test cases; 1 on a failure or when no test
    ran."""
    parser = argparse.ArgumentParser()
    for flag, text in options:
        parser.add_argument(flag, required=True, help=text)
    parsed = parser.parse_args()
    main_module = sys.modules["__main__"]
    main_module.OPTIONS = parsed
    suite = unittest.defaultTestLoader.loadTestsFromModule(main_module)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.testsRun == 0:
        print("no test ran", file=sys.stderr)
        return 1
    return 0 if result.wasSuccessful() else 1


def temporary_folder(testcase: unittest.TestCase, prefix: str, mode: int = 0o700) -> str:
    """A folder removed after the test."""
    folder = tempfile.mkdtemp(prefix=prefix)
    os.chmod(folder, mode)
    testcase.addCleanup(subprocess.run, ["rm", "-rf", "--one-file-system", folder])
    return folder


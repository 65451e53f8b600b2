"""Isolation of the processes the server starts: shell commands (agent/shell.py) and git (history/git.py).

A child runs as init of a PID namespace of its own with its own `/proc` (`unshare --pid --fork --kill-child
--mount-proc`; as a non-root user inside a user namespace), with CAP_SYS_ADMIN/CAP_SYS_PTRACE/… dropped from its
bounding set, so that even as root it cannot unmount that `/proc` to look at the host's. The server's `/proc/<pid>`
(its environment, memory, open files) is then simply not there for the child, and when the child ends, the kernel
kills everything left in the namespace. Where namespaces are not available (no unshare, a seccomp profile that
forbids it, or NAGENT_LSP_SHELL_ISOLATION=off) the caller makes the server non-dumpable instead
(`make_undumpable`), so a process of the same user cannot read its memory or its `/proc/<pid>/environ`.

The probe runs once per process (a few short-lived processes) and checks the property relied on: the child is
PID 1 and cannot unmount /proc. Imports only core/.
"""

from __future__ import annotations

import os
import subprocess
import threading
from typing import TYPE_CHECKING, NamedTuple

from nagent_lsp.core.log_setup import info, logger
from nagent_lsp.core.secret_env import command_environ

if TYPE_CHECKING:
    import logging

ISOLATION_SWITCH = "NAGENT_LSP_SHELL_ISOLATION"  # "off": never use a namespace (diagnostics, tests of the fallback)
# Capabilities a root child loses: mounting (unmounting its /proc to see the host's), ptrace, raw memory, modules;
# bpf and perfmon where the kernel and setpriv know them (5.8+), else the first four alone.
DROPPED_CAPS = ("sys_admin", "sys_ptrace", "sys_module", "sys_rawio", "bpf", "perfmon")
ESSENTIAL_CAPS = DROPPED_CAPS[:4]

_probe_lock = threading.Lock()
_probed: list[list[str] | None] = []  # [] until probed, then [prefix or None]


def _log() -> logging.Logger:
    # made when a record is written: the CLI's cold `history` starts git without importing logging (issue 29)
    return logger(__name__)


def isolation_off() -> bool:
    return os.environ.get(ISOLATION_SWITCH, "").lower() == "off"


async def namespace_prefix() -> list[str] | None:
    """The argv prefix that runs a command in a PID namespace of its own, or None where that is not possible
    (probed once, in a thread: the event loop never waits for it)."""
    if isolation_off():
        return None
    if not _probed:
        import asyncio  # here, not at the top: history's git (worker threads) never pays for importing asyncio

        await asyncio.to_thread(namespace_prefix_blocking)
    return _probed[0]


def namespace_prefix_blocking() -> list[str] | None:
    """The same, for callers already off the event loop (history's git runs in worker threads). Concurrent first
    callers wait for one probe rather than each running their own."""
    return _probed_once(None)[0]


class Ran(NamedTuple):
    """A command the probe ran in the namespace it had just verified (namespace_prefix_with)."""

    code: int
    out: bytes
    err: bytes


def namespace_prefix_with(command: list[str], env: dict[str, str], cwd: str) -> tuple[list[str] | None, Ran | None]:
    """namespace_prefix_blocking, and when this call is the one that probes, `command` run by the probe's own
    process once its check has passed, in the namespace the check verified: one process chain fewer before the
    first git answer (issue 29: the CLI's cold `history` waits on probe → config → page). Ran is None when the
    probe was made before (or by another thread meanwhile), or found no namespace: the caller then runs the command
    itself, under the prefix returned. A check that fails never runs the command."""
    return _probed_once(_Then(command, env, cwd))


def _probed_once(then: _Then | None) -> tuple[list[str] | None, Ran | None]:
    if isolation_off():
        return None, None
    if _probed:
        return _probed[0], None
    with _probe_lock:
        if _probed:
            return _probed[0], None
        prefix, ran = _probe(then)
        _probed.append(prefix)
    return prefix, ran


class _Then(NamedTuple):
    command: list[str]
    env: dict[str, str]
    cwd: str


CHECK = '[ "$$" = 1 ] && ! umount /proc 2>/dev/null'  # PID 1 of its namespace, and its /proc cannot be unmounted
# With a command: it runs only once the check passed, in the same process (exec), after PASSED on its output, so
# output that starts with PASSED comes from the verified namespace.
CHECK_THEN = CHECK + " || exit 1; printf 'nagent: isolated\\n'; exec \"$@\""
PASSED = b"nagent: isolated\n"
CHECK_TIMEOUT = 10.0  # seconds: a namespace whose set-up hangs is no namespace


def _probe(then: _Then | None = None) -> tuple[list[str] | None, Ran | None]:
    unshare, setpriv, bash = which("unshare"), which("setpriv"), which("bash")
    if not (unshare and bash) or not os.path.isdir("/proc/self"):
        _log().warning("commands run without a PID namespace of their own: unshare or bash is missing")
        return None, None
    root = os.geteuid() == 0
    if root and not setpriv:
        _log().warning("commands run without a PID namespace of their own: setpriv is missing")
        return None, None
    base = [unshare, "--pid", "--fork", "--kill-child", "--mount-proc"]
    users = [[]] if root else [["--user", "--map-current-user"], ["--user", "--map-root-user"]]
    cap_sets = (DROPPED_CAPS, ESSENTIAL_CAPS) if setpriv else ((),)
    script = CHECK if then is None else CHECK_THEN
    problem = ""
    for user, caps in ((u, c) for u in users for c in cap_sets):
        drop = [setpriv, "--bounding-set=" + ",".join(f"-{c}" for c in caps), "--"] if setpriv and caps else []
        prefix = [*base[:1], *user, *base[1:], *drop]
        try:
            done = _run_check([*prefix, bash, "-c", script], then)
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = str(exc)
            continue
        passed = done.stdout.startswith(PASSED) if then else done.returncode == 0
        if passed:
            info(__name__, "shell commands and git run in a PID namespace of their own (%s)", " ".join(prefix[:6]))
            ran = Ran(done.returncode, done.stdout[len(PASSED) :], done.stderr) if then else None
            return prefix, ran
        said = done.stderr.decode(errors="replace").strip().splitlines()
        problem = said[-1][:200] if said else f"the check exited with {done.returncode}"
    _log().warning(
        "shell commands and git run without a PID namespace of their own (%s); "
        "shell commands are stopped by process group and tag, and the server is made non-dumpable",
        problem or "unshare failed",
    )
    return None, None


def _run_check(argv: list[str], then: _Then | None) -> subprocess.CompletedProcess[bytes]:
    """The check, and `then` after it. The check has CHECK_TIMEOUT; once it passed (PASSED on stdout), the command
    takes as long as it takes, as every git call may."""
    if then is None:
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=CHECK_TIMEOUT,
            env=command_environ(),
        )
    proc = subprocess.Popen(
        [*argv, "nagent-probe", *then.command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=then.env,
        cwd=then.cwd,
    )
    try:
        out, err = proc.communicate(timeout=CHECK_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        if not (exc.output or b"").startswith(PASSED):
            proc.kill()
            proc.communicate()
            raise
        out, err = proc.communicate()  # retried, nothing read so far is lost (subprocess's own guarantee)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def which(name: str) -> str | None:
    """The program `name` in the PATH's absolute folders. Not shutil.which: that also looks in relative entries
    ("" or "." in a PATH: the current folder, a repository's), and importing shutil pulls in its archive codecs
    (~3 ms of the CLI's cold `history`, issue 29)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder, name)
        if os.path.isabs(folder) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


_undumpable = False


def make_undumpable() -> None:
    """PR_SET_DUMPABLE 0: a same-user process can no longer read this one's memory or /proc environ."""
    global _undumpable
    if _undumpable:
        return
    _undumpable = True
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass

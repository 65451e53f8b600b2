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
import shutil
import subprocess
import threading
from typing import TYPE_CHECKING

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
    if isolation_off():
        return None
    if not _probed:
        with _probe_lock:
            if not _probed:
                _probed.append(_probe())
    return _probed[0]


def probe_soon() -> None:
    """Start the probe in a thread of its own and return: a one-shot command (the CLI's `history`) overlaps its
    few short-lived processes with its own imports, on the other core; the first git call then finds it done (or
    waits for that one probe, never runs a second)."""
    if _probed or isolation_off():
        return
    threading.Thread(target=namespace_prefix_blocking, name="nagent-isolation-probe", daemon=True).start()


def _probe() -> list[str] | None:
    unshare, setpriv, bash = shutil.which("unshare"), shutil.which("setpriv"), shutil.which("bash")
    if not (unshare and bash) or not os.path.isdir("/proc/self"):
        _log().warning("commands run without a PID namespace of their own: unshare or bash is missing")
        return None
    root = os.geteuid() == 0
    if root and not setpriv:
        _log().warning("commands run without a PID namespace of their own: setpriv is missing")
        return None
    base = [unshare, "--pid", "--fork", "--kill-child", "--mount-proc"]
    users = [[]] if root else [["--user", "--map-current-user"], ["--user", "--map-root-user"]]
    cap_sets = (DROPPED_CAPS, ESSENTIAL_CAPS) if setpriv else ((),)
    check = '[ "$$" = 1 ] && ! umount /proc 2>/dev/null'
    problem = ""
    for user, caps in ((u, c) for u in users for c in cap_sets):
        drop = [setpriv, "--bounding-set=" + ",".join(f"-{c}" for c in caps), "--"] if setpriv and caps else []
        prefix = [*base[:1], *user, *base[1:], *drop]
        try:
            done = subprocess.run(
                [*prefix, bash, "-c", check],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=10,
                env=command_environ(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            problem = str(exc)
            continue
        if done.returncode == 0:
            info(__name__, "shell commands and git run in a PID namespace of their own (%s)", " ".join(prefix[:6]))
            return prefix
        said = done.stderr.decode(errors="replace").strip().splitlines()
        problem = said[-1][:200] if said else f"the check exited with {done.returncode}"
    _log().warning(
        "shell commands and git run without a PID namespace of their own (%s); "
        "shell commands are stopped by process group and tag, and the server is made non-dumpable",
        problem or "unshare failed",
    )
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

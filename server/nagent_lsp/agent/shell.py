"""`<nagent-shell>` in an editor session (DESIGN §5.4, §12).

`bash -c` in the workspace root, stdin closed (a command waiting for input would otherwise hang the run), combined
output capped inline with the whole of it spilled to `outputs/NNNN-shell.txt`. The command's environment never
holds a key variable (`core.secret_env.command_environ`).

`shellTimeout` bounds the whole action: waiting for the command's exit never waits for its output pipe (a child
that keeps the pipe open, `setsid sleep 100 & echo started`, cannot hold the run), the pipe is read only until
the command and everything it started are stopped, and the result says how long it really took.

Isolation (`isolate=True`, what the agent's shell tool asks for): the command runs as init of a PID namespace of
its own with its own `/proc` (`unshare --pid --fork --kill-child --mount-proc`; as a non-root user inside a user
namespace), with CAP_SYS_ADMIN/CAP_SYS_PTRACE/… dropped from its bounding set, so that even as root it cannot
unmount that `/proc` to look at the host's. The server's `/proc/<pid>` (its environment, memory, open files) is
then simply not there for the command, and when the command's shell ends, the kernel kills everything left in
the namespace, `setsid -f` daemons included. Where namespaces are not available (no unshare, a seccomp profile
that forbids it) the command runs in its own session and process group instead, tagged through its environment:
whatever carries the tag when the command ends is killed, and the server makes itself non-dumpable so a command
of the same user cannot read its memory or its `/proc/<pid>/environ` (root with CAP_SYS_PTRACE still could: there
the re-exec without key variables, headless/launch.py, is what keeps the key out of that file). The probe and the
non-dumpable fallback live in core/isolation.py: git (history/git.py) runs under the same isolation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nagent_lsp.core.isolation import make_undumpable, namespace_prefix
from nagent_lsp.core.secret_env import command_environ, held_values
from nagent_lsp.store.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

OUTPUT_INLINE_CHARS = 8 * 1024  # characters of output kept in the conversation (bytes beyond: outputs/)
SPILL_LIMIT = 16 * 1024 * 1024  # bytes kept at all; a runaway command must not fill the disk
TERM_GRACE = 0.3  # seconds between SIGTERM and SIGKILL
DRAIN_GRACE = 0.5  # seconds to keep reading the output once everything the command started is stopped
EXIT_GRACE = 5.0  # seconds to wait for a SIGKILLed process to be reaped (the kernel takes microseconds)
RUN_TAG = "NAGENT_SHELL_RUN"  # without a namespace: marks every process of one command through its environment

# PID 1 of the namespace: runs the command ($1) with the report descriptor ($2) closed, then writes to that
# descriptor how many processes the command left running (the kernel kills them when this shell exits). Its own
# messages ("Terminated") are not the command's output.
_INIT = r"""exec 3>&"$2"; [ "$2" = 3 ] || eval "exec $2>&-"
exec 4>&2 2>/dev/null
"$BASH" -c "$1" 2>&4 3>&- 4>&-
rc=$?
n=0
for p in /proc/[0-9]*; do
  [ "$p" = "/proc/$$" ] && continue
  read -r s < "$p/stat" 2>/dev/null || continue
  s=${s##*) }
  [ "${s%% *}" = Z ] || n=$((n+1))
done
printf '%s\n' "$n" >&3
exit $rc
"""


@dataclass(frozen=True)
class ShellResult:
    exit_code: int | None  # negative: killed by that signal
    output: str  # stdout and stderr interleaved, capped
    truncated: bool
    spilled_path: Path | None
    timed_out: bool
    interrupted: bool
    stopped_background: bool = False  # processes left running by the command were stopped
    total_bytes: int = 0
    elapsed: float = 0.0  # seconds from start until the command and everything it started were stopped
    isolated: bool = False  # ran in a PID namespace of its own

    def describe(self, timeout: float) -> str:
        """The body of the `<nagent-shell-result>` block the model reads."""
        lines = [f"exit_code: {self.exit_code}", f"elapsed: {self.elapsed:.1f} s"]
        if self.timed_out:
            lines.append(
                f"timed out after {self.elapsed:.1f} s (shellTimeout is {timeout:g} s); "
                "the command and every process it started were stopped"
            )
        if self.interrupted:
            lines.append("interrupted")
        if self.stopped_background:
            lines.append("processes the command left running in the background were stopped")
        if self.output.strip():
            lines += ["output:", self.output.rstrip("\r\n")]
        if self.spilled_path:
            lines.append(f"(output truncated; the full output of {self.total_bytes} bytes is in {self.spilled_path})")
        return "\n".join(lines)


async def run_shell(  # noqa: C901, PLR0912, PLR0913, PLR0915  2026-11-27: one process's life: start, stream, cancel, kill the group, redact; keyword-only options
    cmd: str,
    cwd: Path,
    timeout: float,
    cancel_event: asyncio.Event | None = None,
    outputs_dir: Path | None = None,
    *,
    inline_limit: int = OUTPUT_INLINE_CHARS,
    env: Mapping[str, str] | None = None,
    hide_env: Iterable[str] = (),
    redact: Iterable[str] = (),
    isolate: bool = False,
) -> ShellResult:
    """Run one command. A set `cancel_event` interrupts it (returns `interrupted`); cancelling the calling
    task kills everything it started too and re-raises. `env` (default: the server's) loses every key-like
    variable and the names in `hide_env`; `redact` values (and the held secrets) never appear in the output.
    `isolate`: run it in a PID namespace of its own when the system allows (see the module's docstring)."""
    environ = command_environ(env, hide_env)
    started = time.monotonic()
    prefix = await namespace_prefix() if isolate else None
    if isolate and prefix is None:
        make_undumpable()
    bash = shutil.which("bash") or "/bin/sh"
    report_r = report_w = -1
    tag = ""
    if prefix is not None:
        report_r, report_w = os.pipe()
        argv = [*prefix, bash, "-c", _INIT, "nagent-shell", cmd, str(report_w)]
    else:
        tag = secrets.token_hex(12)
        environ[RUN_TAG] = tag
        argv = [bash, "-c", cmd]
    try:
        proc = subprocess.Popen(
            argv,
            cwd=str(cwd),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=environ,
            pass_fds=(report_w,) if report_w >= 0 else (),
        )
    except OSError as exc:  # a missing cwd, no shell: a result for the model, not a crashed run
        for fd in (report_r, report_w):
            if fd >= 0:
                os.close(fd)
        return ShellResult(None, f"could not start the command: {exc}", False, None, False, False)
    if report_w >= 0:
        os.close(report_w)
    loop = asyncio.get_running_loop()
    exited = _watch_exit(loop, proc)
    assert proc.stdout is not None
    collector = _Collector(loop)
    transport, _ = await loop.connect_read_pipe(lambda: collector, proc.stdout)
    cancel_wait = asyncio.ensure_future(cancel_event.wait()) if cancel_event is not None else None
    timed_out = interrupted = stopped = False
    try:
        watched: set[asyncio.Future] = {exited} | ({cancel_wait} if cancel_wait else set())
        remaining = max(started + max(timeout, 0) - time.monotonic(), 0)
        done, _ = await asyncio.wait(watched, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if exited not in done:
            interrupted = cancel_wait is not None and cancel_wait in done
            timed_out = not interrupted
            await _stop(proc, exited)
        elif prefix is not None:
            stopped = _left_running(report_r)  # the namespace is gone with them
        else:
            stopped = _group_alive(proc.pid) or bool(_tagged(tag))
        _end_everything(proc, tag)
        try:
            await asyncio.wait_for(asyncio.shield(collector.closed), DRAIN_GRACE)
        except TimeoutError:
            pass  # something outside our reach still holds the pipe: stop listening to it
    except asyncio.CancelledError:
        _end_everything(proc, tag)
        raise
    finally:
        transport.close()
        if cancel_wait is not None and not cancel_wait.done():
            cancel_wait.cancel()
        if report_r >= 0:
            os.close(report_r)
    elapsed = time.monotonic() - started
    captured = bytes(collector.data)
    for secret in {*filter(None, redact), *held_values()}:
        # The key is never in the command's environment nor visible in the server's /proc; this only keeps a value
        # that reached the output some other way (the user echoing it from a file) out of the conversation.
        captured = captured.replace(secret.encode(), b"[redacted]")
    text = captured.decode("utf-8", errors="replace")
    total = collector.total
    result = ShellResult(
        proc.returncode, text, False, None, timed_out, interrupted, stopped, total, elapsed, prefix is not None
    )
    if total <= inline_limit and len(text) <= inline_limit:
        return result
    spilled = _spill(outputs_dir, captured, total) if outputs_dir is not None else None
    return replace(result, output=_cap(text, inline_limit, total, spilled), truncated=True, spilled_path=spilled)


class _Collector(asyncio.Protocol):
    """Reads the command's output pipe on the event loop, keeping at most SPILL_LIMIT bytes."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.data = bytearray()
        self.total = 0
        self.closed: asyncio.Future[None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self.total += len(data)
        room = SPILL_LIMIT - len(self.data)
        if room > 0:
            self.data.extend(data[:room])

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _watch_exit(loop: asyncio.AbstractEventLoop, proc: subprocess.Popen) -> asyncio.Future[int]:
    """A future for the process's exit that does not wait for its pipes (asyncio's Process.wait does). On Linux
    a pidfd on the event loop; elsewhere a thread. Either reaps the process, also after the run was cancelled."""
    future: asyncio.Future[int] = loop.create_future()

    def settle() -> None:
        if not future.done():
            future.set_result(proc.returncode if proc.returncode is not None else -1)

    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:

        def ready() -> None:
            if proc.poll() is None:
                return
            loop.remove_reader(pidfd)
            os.close(pidfd)
            settle()

        loop.add_reader(pidfd, ready)
    else:

        def wait() -> None:
            proc.wait()
            loop.call_soon_threadsafe(settle)

        threading.Thread(target=wait, name=f"shell-wait-{proc.pid}", daemon=True).start()
    return future


async def _stop(proc: subprocess.Popen, exited: asyncio.Future[int]) -> None:
    """SIGTERM the group, a moment to exit, then SIGKILL; every wait bounded."""
    _killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(exited), TERM_GRACE)
    except TimeoutError:
        pass
    # Children may ignore SIGTERM (or the shell exited and left them): the group is killed regardless. In a
    # namespace this kills unshare and the namespace's init, and with it everything inside.
    _killpg(proc.pid, signal.SIGKILL)
    try:
        await asyncio.wait_for(asyncio.shield(exited), EXIT_GRACE)
    except TimeoutError:
        log.warning("a stopped shell command (pid %s) has not exited yet", proc.pid)


def _end_everything(proc: subprocess.Popen, tag: str) -> None:
    _killpg(proc.pid, signal.SIGKILL)
    if tag:
        _kill_tagged(tag)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _left_running(report_r: int) -> bool:
    try:
        os.set_blocking(report_r, False)
        return int(os.read(report_r, 64).split()[0]) > 0
    except (OSError, ValueError, IndexError):
        return False


def _tagged(tag: str) -> list[int]:
    """Processes (other than zombies) whose environment carries this run's tag: the command's, also those that
    left its session (`setsid`). Without /proc (not Linux) there are none to find."""
    if not tag:
        return []
    marker = f"{RUN_TAG}={tag}".encode()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker + b"\0" in f.read() + b"\0":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill_tagged(tag: str) -> None:
    for _ in range(8):  # a process may fork while we look: look again until nothing is left
        pids = _tagged(tag)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _cap(text: str, limit: int, total: int, spilled: Path | None) -> str:
    # Head and tail: a command's first lines say what it did, its last lines how it ended.
    half = max(limit // 2, 1)
    where = f"the full output is in {spilled}" if spilled else "the full output was not saved"
    marker = f"\n[... {total} bytes in all, the middle is left out here; {where} ...]\n"
    return text[:half] + marker + text[-half:]


_NUMBERED = re.compile(r"^(\d+)-")


def _spill(outputs_dir: Path, data: bytes, total: int) -> Path | None:
    try:
        outputs_dir.mkdir(parents=True, exist_ok=True)
        numbers = [int(m.group(1)) for p in outputs_dir.iterdir() if (m := _NUMBERED.match(p.name))]
        number = max(numbers, default=0) + 1
        if total > len(data):
            data += f"\n[output stopped after {len(data)} of {total} bytes]\n".encode()
        while True:
            path = outputs_dir / f"{number:04d}-shell.txt"
            try:
                # O_EXCL reserves the name, so two concurrent commands never overwrite each other's output.
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                number += 1
                continue
            atomic_write_bytes(path, data)
            return path
    except OSError:
        return None

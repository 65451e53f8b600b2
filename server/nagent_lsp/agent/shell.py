"""`<nagent-shell>` in an editor session (DESIGN §5.4).

`bash -c` in the workspace root, in its own process group (so a timeout or a cancel kills everything the
command started, not just the shell), stdin closed (a command waiting for input would otherwise hang the run),
combined output capped inline with the whole of it spilled to `outputs/NNNN-shell.txt`.
A shell tag's processes live only as long as the tag: whatever is still running in the group when the
command ends is stopped too, so nothing outlives the run in the user's editor.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from nagent_lsp.store.atomic import atomic_write_bytes

OUTPUT_INLINE_CHARS = 8 * 1024  # characters of output kept in the conversation (bytes beyond: outputs/)
SPILL_LIMIT = 16 * 1024 * 1024  # bytes kept at all; a runaway command must not fill the disk
TERM_GRACE = 0.3  # seconds between SIGTERM and SIGKILL
DRAIN_GRACE = 0.5  # seconds to wait for the output pipe to close once the shell has exited


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


async def run_shell(
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
) -> ShellResult:
    """Run one command. A set `cancel_event` interrupts it (returns `interrupted`); cancelling the calling
    task kills the group too and re-raises. `hide_env` names variables (the API key's) the command must not see."""
    environ = dict(os.environ if env is None else env)
    for name in hide_env:
        environ.pop(name, None)
    try:
        proc = await asyncio.create_subprocess_exec(
            shutil.which("bash") or "/bin/sh",
            "-c",
            cmd,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=environ,
        )
    except OSError as exc:  # a missing cwd, no shell: a result for the model, not a crashed run
        return ShellResult(None, f"could not start the command: {exc}", False, None, False, False)
    captured = bytearray()
    total = 0

    async def pump() -> None:
        nonlocal total
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            total += len(chunk)
            room = SPILL_LIMIT - len(captured)
            if room > 0:
                captured.extend(chunk[:room])

    reader = asyncio.create_task(pump())
    waiter = asyncio.create_task(proc.wait())
    cancel_wait = asyncio.create_task(cancel_event.wait()) if cancel_event is not None else None
    timed_out = interrupted = stopped = False
    try:
        watched = {waiter} | ({cancel_wait} if cancel_wait else set())
        done, _ = await asyncio.wait(watched, timeout=max(timeout, 0), return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            interrupted = cancel_wait is not None and cancel_wait in done
            timed_out = not interrupted
            await _stop_group(proc, waiter)
        stopped = not (timed_out or interrupted) and _group_alive(proc.pid)
        _killpg(proc.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_GRACE)
        except TimeoutError:
            # Something that left the group (setsid) still holds the pipe: stop listening to it.
            reader.cancel()
    except asyncio.CancelledError:
        _killpg(proc.pid, signal.SIGKILL)
        reader.cancel()
        raise
    finally:
        for task in (waiter, cancel_wait):
            if task is not None and not task.done():
                task.cancel()
    for secret in (s for s in redact if s):
        # A hidden variable can still be read from the server's own /proc/PID/environ: never keep its value.
        captured = bytearray(bytes(captured).replace(secret.encode(), b"[redacted]"))
    text = captured.decode("utf-8", errors="replace")
    exit_code = proc.returncode
    if total <= inline_limit and len(text) <= inline_limit:
        return ShellResult(exit_code, text, False, None, timed_out, interrupted, stopped, total)
    spilled = _spill(outputs_dir, bytes(captured), total) if outputs_dir is not None else None
    capped = _cap(text, inline_limit, total, spilled)
    return ShellResult(exit_code, capped, True, spilled, timed_out, interrupted, stopped, total)


async def _stop_group(proc: asyncio.subprocess.Process, waiter: asyncio.Task) -> None:
    _killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(waiter), TERM_GRACE)
    except TimeoutError:
        pass
    # Children may ignore SIGTERM (or the shell exited and left them): the group is killed regardless.
    _killpg(proc.pid, signal.SIGKILL)
    await waiter


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

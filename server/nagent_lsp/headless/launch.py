"""Start-up: the server process never holds an API key in its own environment (DESIGN §12).

`/proc/<pid>/environ` shows the environment a process was *started* with; removing a variable from
`os.environ` later does not change it, and root can read it for any process. So, before anything else runs,
`secure_start` moves every key-like variable (`core.secret_env.is_key_like`, plus whatever `apiKeyEnv` names in
`~/.nagent/config.json` or a `.nagent/config.json` at or above the current folder) out of the environment and
re-executes the same interpreter with the same arguments and the rest of the environment, handing the
secrets over through an inherited pipe: written before the exec, read and closed by the new process at once,
before it reads a request. Same pid, same stdin/stdout, so the editor notices nothing.

Cheaper first (issue 29: the exec cost a second interpreter start, 30-60 ms quiet, on every command run with a key
in the environment): on Linux the initial environment `/proc/<pid>/environ` shows is this process's own memory
(the block between `env_start` and `env_end` of /proc/self/stat). `scrub_in_place` removes the variables from
`os.environ` (unsetenv: libc's `environ` no longer points at them), overwrites their `NAME=value` bytes in that
block with NULs through /proc/self/mem, and reads /proc/self/environ back: only when no name or value is left
there does it count as done. That is the state the exec reaches — the environment anyone (root included) can read
holds no key from then on, the key lives only in this process's memory (`hold`), and the window before it is the
same: the interpreter's start up to this call. Anything refused on the way (no /proc, a kernel or LSM that refuses
writes to /proc/self/mem, an unexpected block) → the exec, as before.

Nothing to hide → nothing happens (no cost). The exec failing, or a platform without it → the secrets are still
moved into memory (no subprocess inherits them) and a warning says the process's initial environment holds them.
Imports only the standard library and `core.secret_env`: it runs before the CLI or the server is imported.
"""

from __future__ import annotations

import os
import sys

from nagent_lsp.core.secret_env import hideable, hold, is_key_like

HANDOVER = "NAGENT_LSP_SECRETS_FD"  # names the inherited pipe's fd in the re-executed process
_QUICK = frozenset({"--version", "-h", "--help"})  # these exit at once and read no key: not worth an exec
_started = False


def secure_start(argv: list[str] | None = None) -> None:
    """Call first thing in the process (idempotent). Either returns with the secrets held in memory (and, when
    this is the re-executed process, absent from its initial environment), or replaces the process."""
    global _started
    if _started:
        return
    _started = True
    handed = os.environ.pop(HANDOVER, None)
    if handed is not None:
        hold(_receive(handed))
        return
    if _QUICK.intersection((argv if argv is not None else sys.argv)[1:]):
        return
    names = secret_names(os.environ)
    if not names:
        return
    secrets = {name: os.environ[name] for name in names}
    if scrub_in_place(secrets):
        hold(secrets)
        return
    if os.name == "posix" and sys.executable:
        try:
            _reexec(secrets)  # returns only on failure
        except OSError as exc:
            print(
                f"nagent-lsp: could not restart without the key variables ({exc.strerror});"
                " they are held in memory, but this process's initial environment still shows them",
                file=sys.stderr,
            )
    for name in names:
        os.environ.pop(name, None)
    hold(secrets)


def secret_names(environ: os._Environ[str] | dict[str, str]) -> list[str]:
    """The variables present that must not stay in the environment."""
    configured = _configured_key_names()
    return sorted(
        name
        for name, value in environ.items()
        if value and hideable(name) and (is_key_like(name) or name in configured)
    )


def _configured_key_names() -> set[str]:
    """`apiKeyEnv` (top level and in `models` profiles) of the config files the server will read first."""
    paths = [os.path.join(os.path.expanduser("~"), ".nagent", "config.json")]
    try:
        folder = os.getcwd()
    except OSError:  # started in a folder that no longer exists
        return set()
    while True:
        paths.append(os.path.join(folder, ".nagent", "config.json"))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    names: set[str] = set()
    for path in paths:
        if not os.path.isfile(path):
            continue
        import json  # only when a config file exists

        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue  # the settings loader reports a broken file; here it only names no variable
        if not isinstance(data, dict):
            continue
        profiles = data.get("models")
        for holder in [data, *(profiles.values() if isinstance(profiles, dict) else [])]:
            name = holder.get("apiKeyEnv") if isinstance(holder, dict) else None
            if isinstance(name, str) and name:
                names.add(name)
    return names


def scrub_in_place(secrets: dict[str, str]) -> bool:
    """Take `secrets` out of os.environ and out of the environment block /proc/<pid>/environ shows (see the module's
    docstring); True only when reading that block back finds none of their names or values."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2 :].split()  # field 3 (state) onwards: the command name may hold spaces
        env_start, env_end = int(fields[47]), int(fields[48])  # fields 50 and 51 (Linux 3.5+)
        block = _environ_block()
        if len(block) != env_end - env_start:
            return False  # not the block we think it is: leave it to the exec
        for name in secrets:
            os.environ.pop(name, None)  # unsetenv first: nothing in libc points at the bytes about to be cleared
        encoded = [(os.fsencode(k) + b"=", os.fsencode(v)) for k, v in secrets.items()]
        mem = os.open("/proc/self/mem", os.O_RDWR)
        try:
            offset = 0
            for entry in block.split(b"\0"):
                if any(entry.startswith(prefix) for prefix, _ in encoded):
                    if os.pwrite(mem, bytes(len(entry)), env_start + offset) != len(entry):
                        return False
                offset += len(entry) + 1
        finally:
            os.close(mem)
        after = _environ_block()
    except (OSError, ValueError, IndexError):
        return False
    return not any(prefix in after or (value and value in after) for prefix, value in encoded)


def _environ_block() -> bytes:
    with open("/proc/self/environ", "rb") as f:
        return f.read()


def _reexec(secrets: dict[str, str]) -> None:
    payload = b"".join(os.fsencode(k) + b"=" + os.fsencode(v) + b"\0" for k, v in secrets.items())
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(write_end, False)  # a payload larger than the pipe fails here instead of blocking
        if len(payload) > 65536:
            import fcntl

            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, len(payload))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_end, view) :]
        os.close(write_end)
        write_end = -1
        os.set_inheritable(read_end, True)
        env = {k: v for k, v in os.environ.items() if k not in secrets}
        env[HANDOVER] = str(read_end)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        argv = [sys.executable, *sys.orig_argv[1:]]
        os.execve(sys.executable, argv, env)
    finally:  # reached only when the exec failed
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)


def _receive(handed: str) -> dict[str, str]:
    try:
        fd = int(handed)
    except ValueError:
        return {}
    if fd <= 2:  # never the LSP stream, whatever the variable says
        return {}
    import stat

    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return {}  # not our pipe: leave that descriptor alone
    except OSError:
        return {}
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return {}
    finally:
        os.close(fd)
    secrets: dict[str, str] = {}
    for entry in b"".join(chunks).split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if name and eq:
            secrets[os.fsdecode(name)] = os.fsdecode(value)
    return secrets

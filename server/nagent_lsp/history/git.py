"""The one module that runs git. Every call here is ONE git process, its output streamed.

Why streaming: the history pass on a big repository prints hundreds of megabytes; parsing while git still walks
keeps both cores busy and memory flat. Never one process per commit.

Why `subprocess` and not GitPython's `Git.execute(..., as_process=True)`, which this module used before: that call
is a thin wrapper over the same Popen, and importing GitPython cost 40-90 ms on the first history request of a
server (a third of the cold `nagent.history` budget on git.git, measured against nagent's own sequence). The process
model DESIGN §6 asks for is unchanged: one streamed `git` process per query, never `iter_commits` + `stats`.

Git runs as a reader, never as a command runner (DESIGN §12, "Trust the user, not the repository"). A repository
(cloned, unpacked from an archive with its own `.git`, or a `.git` *file* the model wrote pointing at a git dir of
its making) configures programs git would run on our behalf; none of them may run:

- diff drivers (`diff.<d>.textconv`, `diff.<d>.command`, `diff.external`): `--no-textconv --no-ext-diff` on every
  command that diffs (log, show, diff; blame takes `--no-textconv`). Textconv also smudges the blob first, so that
  flag stops the smudge filter on these paths too.
- every driver the configuration defines (`filter.<d>.clean/smudge/process`, `diff.<d>.textconv/command`,
  `merge.<d>.driver`), whichever `.gitattributes` names it: overridden empty (git runs nothing for an empty
  filter, and never consults an empty diff driver behind the flags above) and `filter.<d>.required=false`. git
  2.39 has no `--attr-source`, so the names come from `git config --list` (reading config runs nothing), cached per
  repository and read again when a config file (includes too) or the `.git` entry changes.
- `core.fsmonitor=false`, `core.hooksPath=/dev/null` (update-ref and fast-import run the reference-transaction
  hook; no hook is found under /dev/null), `core.pager=cat` + `--no-pager` + GIT_PAGER=cat (and never a tty),
  `core.alternateRefsCommand=true`, `protocol.ext.allow=never`, no automatic gc/maintenance, no submodule recursion,
  `push.gpgSign=false`.
- no network: a partial clone (`remote.X.promisor`) fetches a missing object on demand, through the remote's
  transport as the repository configures it (`remote.X.uploadpack`, ssh, credential helpers, any URL), on a plain
  blame or log. Every call runs with GIT_NO_LAZY_FETCH=1 (git ≥ 2.39.4), and every call but fetch/push with
  GIT_ALLOW_PROTOCOL empty (no transport at all, whatever `protocol.*.allow` the repository sets; older gits too).
  A missing object is then an error, not a fetch.
- fetch/push: `--upload-pack`/`--receive-pack` given explicitly (a repository's `remote.X.uploadpack` is a
  command); a local remote's receive-pack runs with hooks off too (`-c` does not reach it: git scrubs
  GIT_CONFIG_PARAMETERS for local transports). `core.sshCommand`, `core.askPass` and `credential.helper` are the
  USER's (system and global config, read outside any repository) or dropped; a remote helper named by the
  repository (`remote.X.vcs`) is refused; the proxy command is the user's environment's or none.

Its environment is `command_environ()` (no key-like variable), without the variables that redirect git elsewhere
(GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG/GIT_CONFIG_PARAMETERS/GIT_CONFIG_COUNT…, GIT_EXTERNAL_DIFF);
the user's GIT_CONFIG_GLOBAL/SYSTEM/NOSYSTEM and ssh/askpass/trace variables stay (system config is the admin's,
trusted). And it runs under the shell's isolation (core/isolation.py): a PID namespace of its own where available,
else the server is made non-dumpable before the first git child.

Reads come from the object database (commits, trees, blobs: log, show, diff of two commits, blame of a revision,
ls-tree, cat-file --batch); no call here reads the work tree or the index except git's own `.gitattributes` lookup,
whose drivers are neutralised above.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, NamedTuple

from nagent_lsp.core.isolation import make_undumpable, namespace_prefix_blocking, namespace_prefix_with
from nagent_lsp.core.secret_env import command_environ

# Pin every formatting knob a user's config could change, so the parsers see one format.
_FORMAT = (
    "core.quotePath=false",
    "log.showSignature=false",
    "color.ui=never",
    "diff.renameLimit=0",
    "log.follow=false",
    "i18n.logOutputEncoding=UTF-8",
)
# Nothing the repository configures runs (see the module's docstring). Command-line scope: these win over every file.
_SAFETY = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "diff.external=",
    "core.alternateRefsCommand=true",
    "protocol.ext.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "push.gpgSign=false",
)
# Every call but fetch/push: no transport may run (a partial clone's on-demand fetch), whatever the config allows.
_READER_ENV = {"GIT_ALLOW_PROTOCOL": ""}
_GLOBAL_OPTIONS = ["--no-pager"]
for _pair in (*_FORMAT, *_SAFETY):
    _GLOBAL_OPTIONS += ["-c", _pair]
# What each driver kind a configuration can define would run, and the value that runs nothing.
_DRIVER_KEYS = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}
# A local remote's receive-pack: `-c` does not reach it (git scrubs GIT_CONFIG_PARAMETERS for local transports).
_LOCAL_RECEIVE_PACK = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.alternateRefsCommand=true receive-pack"
)
_UPLOAD_PACK = "git-upload-pack"
_NO_DRIVERS = ("--no-textconv", "--no-ext-diff")
_RECEIVE_PACK = "git-receive-pack"
# Inherited GIT_* variables kept: the user's own choices of config files, transport programs and diagnostics.
# Every other one (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF…) is dropped.
_KEPT_GIT_ENV = frozenset(
    {
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_EXEC_PATH",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_PROXY_COMMAND",
        "GIT_ALLOW_PROTOCOL",  # the user's own list, for fetch and push (every other call gets an empty one)
        "GIT_SSL_NO_VERIFY",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_HTTP_USER_AGENT",
        "GIT_CURL_VERBOSE",
    }
)

# Header of one commit record in our log format: \x01 hash \x1f parents \x1f name \x1f email \x1f epoch \x1f subject.
LOG_FORMAT = "--format=%x01%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%s"
CHUNK = 1 << 16
_USER_SCOPES = ("system", "global")


class GitError(RuntimeError):
    pass


def git_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git child: no key-like variable, nothing that points git elsewhere, no pager."""
    env = {
        k: v
        for k, v in command_environ(base).items()
        if not k.startswith("GIT_") or k in _KEPT_GIT_ENV or k.startswith("GIT_TRACE")
    }
    env.update(GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C", GIT_PAGER="cat", GIT_NO_LAZY_FETCH="1")
    return env


def _error_file() -> BinaryIO:
    """An unnamed scratch file for git's stderr: O_TMPFILE in $TMPDIR or /tmp, what tempfile.TemporaryFile makes
    on Linux, without importing tempfile (random, hashlib, shutil: ~9 ms of the CLI's cold `history`, issue 29);
    tempfile itself where that is refused."""
    try:
        fd = os.open(os.environ.get("TMPDIR") or "/tmp", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except (AttributeError, OSError):
        import tempfile

        return tempfile.TemporaryFile()
    return open(fd, "w+b")


def _environ(config: list[tuple[str, str]], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = git_environ()
    env.update(extra or {})
    _config_env(env, config)
    return env


class MissingObjects(GitError):
    """A partial clone lacks objects the command needs, and nagent-lsp does not fetch them (module docstring)."""


MISSING_OBJECTS = (
    "this repository is a partial clone without the objects git needs here; nagent-lsp does not fetch them, since "
    "a fetch runs what the repository's git config names: if you trust that config, `git blame FILE` in a terminal "
    "fetches them"
)


def _failed(args: list[str], code: int, stderr: bytes) -> GitError:
    message = stderr.decode("utf-8", "replace").strip()
    if "from promisor remote" in message or "lazy fetching disabled" in message:
        return MissingObjects(f"{MISSING_OBJECTS} (git {' '.join(args[:2])}: {message.splitlines()[-1]})")
    return GitError(f"git {' '.join(args[:3])} failed ({code}): {message}")


def _config_env(env: dict[str, str], pairs: list[tuple[str, str]]) -> None:
    """Command-line-scope config through GIT_CONFIG_COUNT (git ≥ 2.31): no `name=value` splitting, so a driver
    whose name holds `=` is overridden all the same."""
    if pairs:
        env["GIT_CONFIG_COUNT"] = str(len(pairs))
        for i, (key, value) in enumerate(pairs):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value


class ConfigEntry(NamedTuple):
    scope: str  # system | global | local | worktree | command
    origin: str  # "file:<path>", "blob:…", "command line:"
    key: str  # section and key lower case, subsection as written
    value: str


def _parse_config(data: bytes) -> list[ConfigEntry]:
    """`git config -z --show-scope --show-origin --list`: scope NUL origin NUL key LF value NUL, repeated."""
    fields = data.split(b"\0")
    entries = []
    for i in range(0, len(fields) - 2, 3):
        key, _, value = fields[i + 2].partition(b"\n")
        decode = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731
        entries.append(ConfigEntry(decode(fields[i]), decode(fields[i + 1]), decode(key), decode(value)))
    return entries


def driver_overrides(entries: Iterable[ConfigEntry]) -> list[tuple[str, str]]:
    """For every filter/diff/merge driver the configuration defines, the overrides that make it run nothing."""
    names: dict[tuple[str, str], None] = {}
    for entry in entries:
        section, dot, rest = entry.key.partition(".")
        subsection, dot2, _ = rest.rpartition(".")
        if dot and dot2 and section in _DRIVER_KEYS:
            names[(section, subsection)] = None
    return [(f"{section}.{name}.{key}", value) for section, name in names for key, value in _DRIVER_KEYS[section]]


def _stamp(paths: Iterable[Path]) -> tuple:
    out: list[tuple[object, ...]] = []
    for path in sorted(set(paths)):
        try:
            st = os.stat(path)
        except OSError:
            out.append((str(path), None))
            continue
        out.append((str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def _git_dirs(root: Path) -> list[Path]:
    """The `.git` entry and the config files of the repository at `root`, found without a process: a `.git`
    directory, or a `.git` file's `gitdir:` (and that dir's `commondir`)."""
    dotgit = root / ".git"
    found = [dotgit]
    gitdir = dotgit
    if dotgit.is_file():
        try:
            line = dotgit.read_text("utf-8", "replace").splitlines()[0]
        except (OSError, IndexError):
            return found
        if line.startswith("gitdir:"):
            gitdir = (root / line[len("gitdir:") :].strip()).resolve()
    found += [gitdir / "config", gitdir / "config.worktree", gitdir / "commondir"]
    try:
        common = (gitdir / (gitdir / "commondir").read_text("utf-8").strip()).resolve()
        found.append(common / "config")
    except OSError:
        pass
    return found


def _config_files(root: Path, entries: Iterable[ConfigEntry]) -> list[Path]:
    """Every file whose change can change the drivers: the repository's config files, every file an entry came
    from, and every file an include names (an included file that is empty today has no entry)."""
    files = _git_dirs(root)
    for entry in entries:
        if entry.origin.startswith("file:"):
            origin = Path(entry.origin[len("file:") :])
            files.append(origin if origin.is_absolute() else root / origin)
            if entry.key.endswith(".path") and entry.key.split(".", 1)[0] in ("include", "includeif"):
                target = Path(os.path.expanduser(entry.value))
                base = files[-1].parent
                files.append(target if target.is_absolute() else base / target)
    return files


_drivers_lock = threading.Lock()
_drivers: dict[str, tuple[tuple, list[tuple[str, str]], list[ConfigEntry]]] = {}  # root: (stamp, overrides, config)
_reading: dict[str, threading.Lock] = {}  # root: held while its config is being read


def url_is_local(url: str) -> bool:
    """git's own rule (connect.c): file:// URLs, and paths that are not scp-like `host:path`."""
    if "://" in url:
        return url.split("://", 1)[0].lower() == "file"
    colon, slash = url.find(":"), url.find("/")
    return colon < 0 or (0 <= slash < colon)


class GitRepository:
    """A work tree; `root` is its toplevel. Cheap to create (no process)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)

    # -- running git -----------------------------------------------------------------------------------------------
    def stream(self, args: list[str], stdin: bytes | None = None) -> Iterator[bytes]:
        """Yield stdout of `git <args>` in chunks as git produces it; raises GitError on a non-zero exit. Closing
        the generator early (a cancelled build) kills the process. Every repository-defined driver is off."""
        return self._stream(args, stdin, self._driver_overrides(), extra_env=_READER_ENV)

    def _stream(
        self,
        args: list[str],
        stdin: bytes | None,
        config: list[tuple[str, str]],
        *,
        extra_env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Iterator[bytes]:
        env = _environ(config, extra_env)
        prefix = namespace_prefix_blocking()
        if prefix is None:
            make_undumpable()  # a git child of the same user must not read this server's memory or environ
        with _error_file() as errors:  # a file, not a pipe: git's stderr can never fill up and block it
            try:
                raw = subprocess.Popen(
                    [*(prefix or ()), "git", *_GLOBAL_OPTIONS, *args],
                    cwd=cwd or self.root,
                    env=env,
                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                )
            except OSError as exc:
                raise GitError(f"cannot run git: {exc}") from exc
            assert raw.stdout is not None
            try:
                if stdin is not None and raw.stdin is not None:
                    raw.stdin.write(stdin)
                    raw.stdin.close()
                out = raw.stdout
                read = getattr(out, "read1", out.read)  # a BufferedReader: whatever is there, up to CHUNK
                while True:
                    chunk = read(CHUNK)
                    if not chunk:
                        break
                    yield chunk
                code = raw.wait()
            finally:
                if raw.poll() is None:
                    raw.kill()  # in a namespace: unshare; --kill-child takes git and all it started with it
                    raw.wait()
                raw.stdout.close()
            if code != 0:
                errors.seek(0)
                raise _failed(args, code, errors.read(4000))

    def run(self, args: list[str], stdin: bytes | None = None) -> bytes:
        return b"".join(self.stream(args, stdin))

    # -- the configuration, read without running anything ---------------------------------------------------------
    def config(self) -> list[ConfigEntry]:
        """Every config entry git sees here (system, global, the repository's and its includes), cached and read
        again when one of those files changes."""
        return self._config_cached()[1]

    def _driver_overrides(self) -> list[tuple[str, str]]:
        return self._config_cached()[0]

    def _config_cached(self) -> tuple[list[tuple[str, str]], list[ConfigEntry]]:
        key = str(self.root)
        with _drivers_lock:
            cached = _drivers.get(key)
            reading = _reading.setdefault(key, threading.Lock())
        if cached is not None and _stamp(_config_files(self.root, cached[2])) == cached[0]:
            return cached[1], cached[2]
        with reading:  # callers at the same time (a warm-up thread and the query) wait for one read, not run two
            with _drivers_lock:
                cached = _drivers.get(key)
            if cached is not None and _stamp(_config_files(self.root, cached[2])) == cached[0]:
                return cached[1], cached[2]
            return self._read_config(key)

    def _read_config(self, key: str) -> tuple[list[tuple[str, str]], list[ConfigEntry]]:
        before = _stamp(_git_dirs(self.root))
        args = ["config", "-z", "--show-scope", "--show-origin", "--list"]
        # Usually the first git call of a process: the isolation probe runs it itself, in the namespace it verified
        # (one process chain fewer before the first answer, issue 29); else it runs as every other call does.
        _, ran = namespace_prefix_with(["git", *_GLOBAL_OPTIONS, *args], _environ([], _READER_ENV), str(self.root))
        if ran is not None and ran.code != 0:
            raise _failed(args, ran.code, ran.err[:4000])
        data = ran.out if ran is not None else b"".join(self._stream(args, None, [], extra_env=_READER_ENV))
        entries = [e for e in _parse_config(data) if e.scope != "command"]
        stamp = _stamp(_config_files(self.root, entries))
        overrides = driver_overrides(entries)
        if _stamp(_git_dirs(self.root)) == before:  # not changed while git read it: cache (else read again next time)
            with _drivers_lock:
                _drivers[key] = (stamp, overrides, entries)
        return overrides, entries

    def _user_config(self) -> list[ConfigEntry]:
        """The user's and the admin's config (system, global), read outside any repository."""
        data = b"".join(
            self._stream(
                ["config", "-z", "--show-scope", "--show-origin", "--list"],
                None,
                [],
                extra_env=_READER_ENV,
                cwd=Path("/"),
            )
        )
        return [e for e in _parse_config(data) if e.scope in _USER_SCOPES]

    def _transport(self, remote: str, *, push: bool) -> tuple[list[str], dict[str, str], list[tuple[str, str]]]:
        """Options, environment and config for a fetch or push: the pack programs given explicitly, and ssh,
        askpass, credential helpers and the proxy only as the user configured them."""
        ours = [e for e in self.config() if e.scope not in _USER_SCOPES]
        if any(e.key.lower() == f"remote.{remote}.vcs".lower() and e.value for e in ours):
            raise GitError(
                f"remote {remote} names a remote helper in the repository's config (remote.{remote}.vcs); "
                "nagent-lsp does not run it"
            )
        user = self._user_config()
        environ = git_environ()
        extra: dict[str, str] = {}
        if "GIT_SSH_COMMAND" not in environ:
            ssh = [e.value for e in user if e.key == "core.sshcommand"]
            if ssh:
                extra["GIT_SSH_COMMAND"] = ssh[-1]
            elif environ.get("GIT_SSH"):
                extra["GIT_SSH_COMMAND"] = shlex.quote(environ["GIT_SSH"])
            else:
                extra["GIT_SSH_COMMAND"] = "ssh"
        extra.setdefault("GIT_PROXY_COMMAND", environ.get("GIT_PROXY_COMMAND", ""))
        askpass = [e.value for e in user if e.key == "core.askpass"]
        config = [("core.askPass", askpass[-1] if askpass else environ.get("SSH_ASKPASS", ""))]
        # An empty credential.helper empties the list collected so far (every scope, URL-specific entries too);
        # the user's own helpers are then given again, in their order, under their own names.
        config.append(("credential.helper", ""))
        config += [(e.key, e.value) for e in user if e.key.startswith("credential.") and e.key.endswith(".helper")]
        named = push and self._is_remote_name(self.config(), remote)
        url_args = ["remote", "get-url", "--push", remote] if named else None
        urls = self.run(url_args or ["ls-remote", "--get-url", remote]).decode("utf-8", "replace").split()
        if push:
            program = _LOCAL_RECEIVE_PACK if any(url_is_local(u) for u in urls) else _RECEIVE_PACK
            options = [f"--receive-pack={program}"]
        else:
            options = [f"--upload-pack={_UPLOAD_PACK}"]
        return options, extra, config

    @staticmethod
    def _is_remote_name(entries: Iterable[ConfigEntry], remote: str) -> bool:
        wanted = (f"remote.{remote}.url", f"remote.{remote}.pushurl")
        return any(e.key in wanted for e in entries)

    # -- the queries the history capability needs -----------------------------------------------------------------
    def log_all(self, revision: str = "HEAD", exclude: Iterable[str] = ()) -> Iterator[bytes]:
        """The whole-repository pass: every commit reachable from `revision` but not from any of `exclude` (HEADs
        whose history is already indexed; names git no longer knows are ignored), with the files it changed (-M:
        renames as R lines). Merges show no files (their changes count once, in the commits that made them)."""
        args = ["log", "-z", "--name-status", "-M", "--no-color", *_NO_DRIVERS, LOG_FORMAT, revision]
        excluded = [e for e in exclude if e]
        if excluded:
            args += ["--ignore-missing", "--not", *excluded]
        return self.stream(args + ["--"])

    def log_paths(self, paths: Iterable[str], limit: int, revision: str = "HEAD") -> Iterator[bytes]:
        """Bounded per-file query (the first page before the index is ready): the last `limit` non-merge commits
        touching any of `paths`, each with ALL the files it changed (--full-diff), so renames into these paths are
        visible as R lines and co-edits can be counted. git's default history simplification (what `git log FILE`
        and nagent's `git log --follow` show): --full-history walks every side branch and is 2-5x slower on
        git.git; the complete index, built in the background, then adds what simplification hid. No --follow
        (never Bloom-accelerated): a rename seen in the page is followed by another page for the old name."""
        args = [
            "log",
            "-z",
            "--name-status",
            "-M",
            "--no-color",
            "--no-merges",
            *_NO_DRIVERS,
            "--full-diff",
            f"-n{int(limit)}",
            LOG_FORMAT,
            revision,
            "--",
            *paths,
        ]
        return self.stream(args)

    def diff_zero_context(self, old: str, new: str, path: str) -> bytes:
        """`git diff -U0 old new -- path`: the hunks that move a blame from `old` to `new`."""
        return self.run(["diff", "-U0", "--no-color", *_NO_DRIVERS, "--no-renames", old, new, "--", path])

    def is_ancestor(self, old: str, new: str) -> bool:
        try:
            self.run(["merge-base", "--is-ancestor", old, new])
            return True
        except GitError:
            return False

    def blame(self, path: str, revision: str = "HEAD", ignore_revs_file: Path | None = None) -> bytes:
        args = ["blame", "--porcelain", "--no-textconv"]
        if ignore_revs_file is not None:
            args += ["--ignore-revs-file", str(ignore_revs_file)]
        return self.run(args + [revision, "--", path])

    def show_patches(self, hashes: list[str], paths: list[str]) -> Iterator[bytes]:
        """One process for a batch of commits: each commit's stat + patch limited to `paths` (all the file's names,
        so a rename shows both sides), records separated by \\x01<hash>\\n."""
        args = [
            "show",
            "-M",
            "--no-color",
            *_NO_DRIVERS,
            "--stat",
            "--patch",
            "--format=%x01%H",
            *hashes,
            "--",
            *paths,
        ]
        return self.stream(args)

    # -- git notes (DESIGN §11: commit summaries shared through the team's remote) -----------------------------------
    def rev_parse(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it does not exist."""
        try:
            out = self.run(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        except GitError:
            return None
        return out.decode("ascii", "replace").strip() or None

    def notes_list(self, rev: str) -> dict[str, str]:
        """{annotated commit: note blob} of the notes tree at `rev` (a notes ref's full name, refs/notes/…, or a commit
        of one); {} when it does not exist. Read with ls-tree, so any fan-out (ab/cdef…) reads the same."""
        if self.rev_parse(rev) is None:
            return {}
        out = self.run(["ls-tree", "-r", "-z", f"{rev}^{{commit}}"])
        notes: dict[str, str] = {}
        for record in out.split(b"\0"):
            meta, _, path = record.partition(b"\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == b"blob":
                name = path.decode("ascii", "replace").replace("/", "")
                if len(name) in (40, 64):
                    notes[name] = parts[2].decode("ascii")
        return notes

    def cat_blobs(self, blobs: Iterable[str]) -> dict[str, bytes]:
        """The contents of many blobs in one `git cat-file --batch`."""
        wanted = list(dict.fromkeys(blobs))
        if not wanted:
            return {}
        data = self.run(["cat-file", "--batch"], stdin=os.fsencode("\n".join(wanted) + "\n"))  # rev:path names
        out: dict[str, bytes] = {}
        pos = 0
        for sha in wanted:
            eol = data.index(b"\n", pos)
            header = data[pos:eol].split()
            pos = eol + 1
            if len(header) < 3 or header[1] == b"missing":
                continue
            size = int(header[2])
            out[sha] = data[pos : pos + size]
            pos += size + 1  # the content, then a newline
        return out

    # -- attribution (refs/notes/ai): blobs, a commit's parents, new commits, one line's origin -------------------
    def blob_at(self, rev: str, path: str) -> bytes | None:
        """The file `path` as committed in `rev` (exact bytes, no filter), or None when it is not there."""
        return self.cat_blobs([f"{rev}:{path}"]).get(f"{rev}:{path}")

    def commit_parents(self, rev: str) -> tuple[list[str], str]:
        """(the commit `rev` names then its parents, its author's e-mail); ([], "") when it is not a commit."""
        try:
            out = self.run(["log", "-1", "--no-walk", "--format=%H %P%x00%ae", f"{rev}^{{commit}}", "--"])
        except GitError:
            return [], ""
        chain, _, email = out.decode("utf-8", "replace").strip().partition("\0")
        return chain.split(), email

    def new_commits(self, head: str, exclude: Iterable[str], limit: int) -> list[str]:
        """At most `limit` commits reachable from `head` and from none of `exclude`, newest first."""
        excluded = [e for e in exclude if e]
        args = ["rev-list", f"--max-count={int(limit)}", head]
        if excluded:
            args += ["--ignore-missing", "--not", *excluded]
        return self.run([*args, "--"]).decode("ascii", "replace").split()

    def line_origin(self, path: str, rev: str, line: int) -> tuple[str, str, int] | None:
        """(commit, path in it, 1-based line in it) that last changed `line` of `path` at `rev`."""
        try:
            out = self.run(["blame", "--porcelain", "--no-textconv", "-L", f"{line},{line}", rev, "--", path])
        except GitError:
            return None
        header = out.split(b"\n", 1)[0].split()
        name = next((r[9:] for r in out.split(b"\n") if r.startswith(b"filename ")), path.encode())
        if len(header) < 2:
            return None
        return header[0].decode("ascii"), name.decode("utf-8", "surrogateescape"), int(header[1])

    def write_notes(
        self, ref: str, notes: dict[str, bytes | str], *, parent: str | None, merge: str | None = None, message: str
    ) -> str:
        """One commit on the notes ref `ref` whose tree is exactly `notes` ({annotated commit: content bytes, or the
        sha of a blob that already holds it}), flat (git reads notes at any fan-out), through one `git fast-import`.
        Its parents are `parent` (and `merge`). The ref moves only if it is still at `parent` (fast-import refuses
        anything else), so a concurrent writer is never overwritten. Returns the new commit."""
        when = int(time.time())
        body = message.encode("utf-8")
        chunks = [
            f"commit {ref}\ncommitter nagent-lsp <nagent-lsp@localhost> {when} +0000\ndata {len(body)}\n".encode(),
            body,
            b"\n",
        ]
        if parent:
            chunks.append(f"from {parent}\n".encode("ascii"))
        if merge:
            chunks.append(f"merge {merge}\n".encode("ascii"))
        chunks.append(b"deleteall\n")
        for commit, content in sorted(notes.items()):
            if isinstance(content, str):
                chunks.append(f"M 100644 {content} {commit}\n".encode("ascii"))
            else:
                chunks.append(f"M 100644 inline {commit}\ndata {len(content)}\n".encode("ascii"))
                chunks += [content, b"\n"]
        chunks.append(b"\ndone\n")
        self.run(["fast-import", "--quiet", "--done"], stdin=b"".join(chunks))
        new = self.rev_parse(ref)
        if new is None:
            raise GitError(f"git fast-import did not write {ref}")
        return new

    def update_ref(self, ref: str, new: str, old: str | None) -> None:
        """Move `ref` to `new` only if it is still at `old` (None: only if it does not exist yet)."""
        self.run(["update-ref", ref, new, old or "0" * 40])

    def fetch_ref(self, remote: str, source: str, destination: str) -> bool:
        """`git fetch REMOTE +source:destination`; False when the remote has no `source`."""
        options, extra, config = self._transport(remote, push=False)
        args = ["fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-auto-maintenance", *options]
        try:
            b"".join(
                self._stream(
                    [*args, remote, f"+{source}:{destination}"],
                    None,
                    self._driver_overrides() + config,
                    extra_env=extra,
                )
            )
        except GitError as exc:
            if "couldn't find remote ref" in str(exc).lower():
                return False
            raise
        return True

    def push_ref(self, remote: str, ref: str) -> bool:
        """`git push REMOTE ref:ref`; False when the remote refused it as not a fast-forward (fetch and merge first)."""
        options, extra, config = self._transport(remote, push=True)
        args = ["push", "--quiet", "--no-verify", "--no-signed", "--no-recurse-submodules", *options]
        try:
            b"".join(
                self._stream([*args, remote, f"{ref}:{ref}"], None, self._driver_overrides() + config, extra_env=extra)
            )
        except GitError as exc:
            text = str(exc).lower()
            if "non-fast-forward" in text or "rejected" in text or "fetch first" in text:
                return False
            raise
        return True

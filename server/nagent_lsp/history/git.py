"""The one module that imports GitPython. Every call here is ONE git process, its output streamed.

Why streaming through `Git.execute(..., as_process=True)`: the history pass on a big repository prints hundreds of
megabytes; parsing while git still walks keeps both cores busy and memory flat. Never one process per commit.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

# Pin every formatting knob a user's config could change, so the parsers see one format.
_CONFIG = (
    "-c",
    "core.quotePath=false",
    "-c",
    "log.showSignature=false",
    "-c",
    "color.ui=never",
    "-c",
    "diff.renameLimit=0",
    "-c",
    "log.follow=false",
    "-c",
    "i18n.logOutputEncoding=UTF-8",
)

# Header of one commit record in our log format: \x01 hash \x1f parents \x1f name \x1f email \x1f epoch \x1f subject.
LOG_FORMAT = "--format=%x01%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%s"
CHUNK = 1 << 16


class GitError(RuntimeError):
    pass


class GitRepository:
    """A work tree; `root` is its toplevel. Cheap to create (no process)."""

    def __init__(self, root: Path | str):
        # Imported here, not at module level: GitPython costs ~85 ms to import, which server start-up and the
        # commands that never run git (status, split, edit without history) should not pay.
        import git as gitpython

        self.root = Path(root)
        self._git = gitpython.Git(str(self.root))

    # -- streaming -----------------------------------------------------------------------------------------------
    def stream(self, args: list[str], stdin: bytes | None = None) -> Iterator[bytes]:
        """Yield stdout of `git <args>` in chunks as git produces it; raises GitError on a non-zero exit."""
        proc = self._git.execute(
            ["git", *_CONFIG, *args],
            as_process=True,
            istream=subprocess.PIPE if stdin is not None else None,
            env={"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
        raw = proc.proc
        assert raw is not None and raw.stdout is not None  # as_process=True always starts the process
        try:
            if stdin is not None and raw.stdin is not None:
                raw.stdin.write(stdin)
                raw.stdin.close()
            out = raw.stdout
            while True:
                chunk = out.read1(CHUNK) if hasattr(out, "read1") else out.read(CHUNK)
                if not chunk:
                    break
                yield chunk
            err = raw.stderr.read() if raw.stderr else b""
            code = raw.wait()
        finally:
            if raw.poll() is None:
                raw.kill()
                raw.wait()
            for pipe in (raw.stdout, raw.stderr):
                if pipe:
                    pipe.close()
        if code != 0:
            raise GitError(f"git {' '.join(args[:3])} failed ({code}): {err.decode('utf-8', 'replace').strip()}")

    def run(self, args: list[str], stdin: bytes | None = None) -> bytes:
        return b"".join(self.stream(args, stdin))

    # -- the queries the history capability needs -----------------------------------------------------------------
    def log_all(self, revision: str = "HEAD", exclude: Iterable[str] = ()) -> Iterator[bytes]:
        """The whole-repository pass: every commit reachable from `revision` but not from any of `exclude` (HEADs
        whose history is already indexed; names git no longer knows are ignored), with the files it changed (-M:
        renames as R lines). Merges show no files (their changes count once, in the commits that made them)."""
        args = ["log", "-z", "--name-status", "-M", "--no-color", LOG_FORMAT, revision]
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
        return self.run(["diff", "-U0", "--no-color", "--no-ext-diff", "--no-renames", old, new, "--", path])

    def is_ancestor(self, old: str, new: str) -> bool:
        try:
            self.run(["merge-base", "--is-ancestor", old, new])
            return True
        except GitError:
            return False

    def blame(self, path: str, revision: str = "HEAD", ignore_revs_file: Path | None = None) -> bytes:
        args = ["blame", "--porcelain"]
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
            "--no-ext-diff",
            "--stat",
            "--patch",
            "--format=%x01%H",
            *hashes,
            "--",
            *paths,
        ]
        return self.stream(args)

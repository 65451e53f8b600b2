"""Notice HEAD moving by reading `.git` files directly (0.02 ms) instead of starting `git rev-parse` (2-8 ms)."""

from __future__ import annotations

from pathlib import Path


def git_dirs(worktree: Path) -> tuple[Path, Path] | None:
    """(gitdir, commondir) of a work tree; handles `.git` files (worktrees, submodules)."""
    dotgit = worktree / ".git"
    if dotgit.is_dir():
        gitdir = dotgit
    elif dotgit.is_file():
        try:
            text = dotgit.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not text.startswith("gitdir:"):
            return None
        gitdir = (worktree / text[len("gitdir:") :].strip()).resolve()
    else:
        return None
    common = gitdir
    commondir = gitdir / "commondir"
    if commondir.is_file():
        try:
            common = (gitdir / commondir.read_text(encoding="utf-8").strip()).resolve()
        except OSError:
            pass
    return gitdir, common


def _packed_ref(common: Path, ref: str) -> str | None:
    try:
        with open(common / "packed-refs", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith(("#", "^")):
                    continue
                sha, _, name = line.rstrip("\n").partition(" ")
                if name == ref:
                    return sha
    except OSError:
        return None
    return None


def read_head(worktree: Path) -> str | None:
    """The commit HEAD points at, or None (no repository, unborn branch, unreadable)."""
    dirs = git_dirs(worktree)
    if dirs is None:
        return None
    gitdir, common = dirs
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    for _ in range(5):  # symbolic refs may chain; bound it
        if not head.startswith("ref:"):
            return head if len(head) >= 40 else None
        ref = head[4:].strip()
        value = None
        for base in (gitdir, common):
            try:
                value = (base / ref).read_text(encoding="utf-8").strip()
                break
            except OSError:
                continue
        if value is None:
            return _packed_ref(common, ref)
        head = value
    return None


def local_heads(worktree: Path, limit: int) -> list[str]:
    """The commits of the most recently updated local branches (loose refs by mtime, then packed ones), at most
    `limit`, without a git process. What a user switches to next is almost always one of them."""
    dirs = git_dirs(worktree)
    if dirs is None:
        return []
    heads = dirs[1] / "refs" / "heads"
    found: list[tuple[float, str]] = []
    try:
        for ref in heads.rglob("*"):
            try:
                if ref.is_file():
                    found.append((ref.stat().st_mtime, ref.read_text(encoding="utf-8").strip()))
            except OSError:
                continue
            if len(found) >= 1000:  # a repository with thousands of branches: the first thousand seen will do
                break
    except OSError:
        pass
    found.sort(reverse=True)
    out = [sha for _, sha in found]
    try:
        with open(dirs[1] / "packed-refs", encoding="utf-8") as handle:
            for line in handle:
                sha, _, name = line.rstrip("\n").partition(" ")
                if name.startswith("refs/heads/") and len(out) < limit * 4:
                    out.append(sha)
    except OSError:
        pass
    return list(dict.fromkeys(s for s in out if len(s) == 40))[:limit]

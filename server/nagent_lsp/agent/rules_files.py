"""The team's rules files as layers of the initial context (DESIGN §5.2): AGENTS.md, CLAUDE.md, `.claude/rules/*.md`,
`.github/copilot-instructions.md` and `.github/instructions/*.instructions.md` (config.rules_files says which file
applies to which target).

Order, stable first so a provider's prompt cache keeps the prefix (DESIGN §11):
  1. repository-wide: the root AGENTS.md, the root CLAUDE.md, `.github/copilot-instructions.md`, then the
     `.claude/rules` files without `paths:` (by name) — the same for every file of the repository;
  2. per folder: the nested AGENTS.md then CLAUDE.md files from below the root down to the target's folder (root
     first, nearest last) — the same for every file of that folder;
  3. per file: the `.claude/rules` files whose `paths:` match, then the `.github/instructions` files whose
     `applyTo` matches (by name).

Reading: only regular files inside the repository (symlinks resolved first: a link pointing out of it is refused,
and linked folders are not walked), never a denyRead match, each through the bounded reader with at most
maxFileBytes and `RULES_FILE_MAX_BYTES` (1 MiB; a larger file is skipped with a message). Together the blocks hold
at most `RULES_TOTAL_BYTES` (64 KiB) of text: the file that crosses it is cut at that point and later ones are
left out, each with a note in its block so the model knows it is not seeing everything. A front matter that
cannot be read makes its file skipped, with one message naming it: the file meant to limit where it applies, and
guessing "everywhere" would send it with every request. The text is only ever shown to the model; nothing in it is
a setting, a permission, a command or an endpoint.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from nagent_lsp.agent.sandbox import ReadRules, Refused
from nagent_lsp.config.rules_files import (
    CLAUDE_RULES_DIR,
    CONVENTIONS,
    COPILOT_FILE,
    COPILOT_INSTRUCTIONS_DIR,
    COPILOT_SUFFIX,
    FOLDER_FILES,
    Convention,
    FrontMatterError,
    matches_any,
    split_front_matter,
)

RULES_TOTAL_BYTES = 64 * 1024  # all rules blocks together; about 16k tokens
RULES_FILE_MAX_BYTES = 1024 * 1024  # a rules file larger than this is not read at all
MAX_SCOPED_FILES = 200  # `.claude/rules` or `.github/instructions` entries looked at, per folder tree
CLOSE_MARK = "{/rules}"

Scope = Literal["repository", "folder", "file"]


@dataclass(frozen=True)
class RulesFile:
    """One rules file that applies. `source` is its path relative to the repository (`/`-separated); `size` its
    bytes on disk; `text` what the model is shown (front matter removed, cut at the total cap: `truncated`);
    `globs` the `paths:`/`applyTo` globs it was scoped by (empty: unscoped); `matched` the glob the target matched."""

    convention: Convention
    source: str
    path: Path
    size: int
    text: str
    scope: Scope
    globs: tuple[str, ...] = ()
    matched: str | None = None
    truncated: bool = False
    omitted: bool = False  # over the total cap: listed, its text left out


@dataclass(frozen=True)
class RulesFiles:
    files: tuple[RulesFile, ...] = ()
    problems: tuple[str, ...] = field(default=())  # one line per skipped file, naming it and why


def repository_root(target: Path, folders: tuple[Path, ...]) -> Path:
    """The git work tree holding `target` (walking up to a `.git`), else the workspace folder holding it, else its
    own folder."""
    start = target if target.is_dir() else target.parent
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate.resolve()
    inside = [f for f in folders if f == start or f in start.parents]
    return max(inside, key=lambda f: len(f.parts)) if inside else start.resolve()


def collect(
    target: Path, rules: ReadRules, enabled: set[Convention] | frozenset[Convention], *, all_scoped: bool = False
) -> RulesFiles:
    """The rules files for `target` (a file, or a folder for a workspace-wide listing), in context order.
    `all_scoped`: list every `.claude/rules` and `.github/instructions` file whatever its globs (for `nagent.status`,
    which has no target file)."""
    target = target.resolve()
    root = repository_root(target, rules.folders)
    # Confined to the repository itself (a link out of it is refused), with the user's denyRead and size limits.
    reader = _Reader(ReadRules.of([root], rules.deny, min(rules.max_bytes, RULES_FILE_MAX_BYTES)), root)
    relative = target.relative_to(root).as_posix() if target != root else ""
    is_file = not target.is_dir()
    chain = _folder_chain(PurePosixPath(relative).parent if is_file else PurePosixPath(relative))
    found: list[RulesFile] = []
    for convention, name in FOLDER_FILES.items():  # tier 1: the root's
        if convention in enabled:
            found += reader.plain(convention, name, "repository")
    if "copilot" in enabled:
        found += reader.plain("copilot", COPILOT_FILE, "repository")
    scoped_claude = reader.scoped("claudeRules", CLAUDE_RULES_DIR, ".md", "paths") if "claudeRules" in enabled else []
    found += [f for f in scoped_claude if not f.globs]
    for convention, name in FOLDER_FILES.items():  # tier 2: nested, root first
        if convention in enabled:
            for sub in chain:
                found += reader.plain(convention, f"{sub}/{name}", "folder")
    scoped_copilot = (
        reader.scoped("copilot", COPILOT_INSTRUCTIONS_DIR, COPILOT_SUFFIX, "applyTo") if "copilot" in enabled else []
    )
    for scoped in [f for f in scoped_claude if f.globs], scoped_copilot:  # tier 3
        for item in scoped:
            glob = matches_any(item.globs, relative) if relative and is_file else None
            if glob is not None or all_scoped:
                found.append(_with(item, matched=glob))
    return RulesFiles(_capped(found), tuple(reader.problems))


def _folder_chain(folder: PurePosixPath) -> list[str]:
    """`a/b/c` → [`a`, `a/b`, `a/b/c`]; the root itself is tier 1."""
    parts = [p for p in folder.parts if p not in ("", ".")]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _with(item: RulesFile, **changes: object) -> RulesFile:
    from dataclasses import replace

    return replace(item, **changes)  # type: ignore[arg-type]


def _capped(found: list[RulesFile]) -> tuple[RulesFile, ...]:
    left = RULES_TOTAL_BYTES
    kept: list[RulesFile] = []
    for item in found:
        raw = item.text.encode("utf-8")
        if left <= 0:
            kept.append(_with(item, text="", omitted=True))
        elif len(raw) > left:
            kept.append(_with(item, text=raw[:left].decode("utf-8", errors="ignore"), truncated=True))
            left = 0
        else:
            kept.append(item)
            left -= len(raw)
    return tuple(kept)


class _Reader:
    def __init__(self, rules: ReadRules, root: Path):
        self.rules = rules
        self.root = root
        self.problems: list[str] = []

    def plain(self, convention: Convention, relative: str, scope: Scope) -> list[RulesFile]:
        text, size, path = self._read(relative)
        if text is None or path is None:
            return []
        return [RulesFile(convention, relative, path, size, text, scope)] if text.strip() else []

    def scoped(self, convention: Convention, directory: str, suffix: str, key: str) -> list[RulesFile]:
        """Every `suffix` file under `directory` (sorted by path, linked folders not walked) with its globs;
        `.claude/rules` files without `paths:` are unscoped (always), instructions without `applyTo` are dropped."""
        try:
            base = self.rules.confine(self.root / directory)
        except Refused:
            return []
        if not base.is_dir():
            return []
        out: list[RulesFile] = []
        for relative in _walk(base, suffix)[:MAX_SCOPED_FILES]:
            source = f"{directory}/{relative}"
            text, size, path = self._read(source)
            if text is None or path is None:
                continue
            try:
                front = split_front_matter(text, key)
            except FrontMatterError as exc:
                self.problems.append(f"{source}: {exc}; the file is skipped (fix its front matter to use it)")
                continue
            if front.globs is None and convention == "copilot":
                continue  # Copilot applies an instructions file without applyTo only when attached by hand
            if front.body.strip():
                scope: Scope = "file" if front.globs else "repository"
                out.append(RulesFile(convention, source, path, size, front.body, scope, front.globs or ()))
        return out

    def _read(self, relative: str) -> tuple[str | None, int, Path | None]:
        candidate = self.root / relative
        if not os.path.lexists(candidate):
            return None, 0, None
        try:
            path = self.rules.confine(candidate)
            text = self.rules.read_text(path)
        except Refused as exc:
            if exc.kind == "location":
                self.problems.append(f"{relative}: leads outside the repository ({self.root}); not read")
            elif exc.kind != "missing":
                self.problems.append(f"{relative}: {exc.reason}; not read")
            return None, 0, None
        return text, len(text.encode("utf-8")), path


def _walk(base: Path, suffix: str) -> list[str]:
    found: list[str] = []
    stack = [base]
    while stack and len(found) < MAX_SCOPED_FILES:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.name.endswith(suffix):
                found.append(Path(entry.path).relative_to(base).as_posix())
    return sorted(found)


def render(files: tuple[RulesFile, ...]) -> str:
    """The rules files as labelled blocks, ready for the initial context ("" when there are none)."""
    blocks = [_block(item) for item in files]
    if not blocks:
        return ""
    heading = (
        "Repository rules files (the team's instructions, written for any coding assistant; text to follow where "
        "it applies, never a permission, command or endpoint):"
    )
    return heading + "\n" + "\n\n".join(blocks)


def _block(item: RulesFile) -> str:
    header = f'source="{item.source}"'
    if item.matched:
        header += f' matched="{item.matched}"'
    body = item.text.replace(CLOSE_MARK, "{/rules }")
    if item.omitted:
        body = f"[left out: the rules files together are capped at {RULES_TOTAL_BYTES // 1024} KiB; {item.size} bytes]"
    elif item.truncated:
        shown = len(item.text.encode("utf-8"))
        body = body.rstrip("\n") + (
            f"\n[truncated: {shown} of {item.size} bytes shown; the rules files together are capped at "
            f"{RULES_TOTAL_BYTES // 1024} KiB]"
        )
    body = body if body.endswith("\n") else body + "\n"
    return "{rules " + header + "}\n" + body + CLOSE_MARK


def enabled_conventions(switches: object) -> frozenset[Convention]:
    """The conventions a `RulesFilesSettings` leaves on."""
    return frozenset(c for c in CONVENTIONS if getattr(switches, c, True))

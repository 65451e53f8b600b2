"""Git AI authorship logs (standard v3.0.0) under `refs/notes/ai`: parse, render, read, write, fetch and push.

A log is an attestation section, a line `---`, then a JSON object. The attestation section names a file at the
start of a line (quoted when it holds spaces, tabs or newlines), then entries indented by exactly two spaces:
`KEY RANGES`, RANGES being ascending 1-based lines of the file as committed (`1-4,9-10,12`). Keys are
`s_<14 hex>::t_<14 hex>` (a session and one checkpoint's trace), `h_<14 hex>` (a known human) or, legacy, 16 bare
hex digits. The metadata holds `schema_version`, `base_commit_sha`, `prompts` (legacy; `{}`), `sessions`
(`s_…` → `{agent_id: {tool, id, model}, human_author?}`) and `humans` (`h_…` → `{author}`). A note never holds
conversation text: the prompt stays in the file's conversation.

Reading is lenient (another tool's note that is slightly off still shows what it can); writing is strict. Every
git call is one process (history.git); writes go through one `fast-import`, moving the ref only from the tip read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from nagent_lsp.history.git import GitError, GitRepository
from nagent_lsp.history.refs import git_dirs

log = logging.getLogger(__name__)

AI_REF = "refs/notes/ai"
FETCHED_REF = "refs/nagent/fetched-ai"
SCHEMA = "authorship/3.0.0"
WRITE_ATTEMPTS = 3
_RANGE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_HEX14 = "[0-9a-f]{14}"
SESSION_KEY = re.compile(rf"^s_{_HEX14}::t_{_HEX14}$")
HUMAN_KEY = re.compile(rf"^h_{_HEX14}$")
LEGACY_KEY = re.compile(r"^[0-9a-f]{16}$")


def _hex14(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:14]


def session_id(tool: str, conversation: str) -> str:
    """`s_` + 14 hex of SHA-256 of "<tool>:<conversation id>": the same for every commit of one conversation."""
    return "s_" + _hex14(f"{tool}:{conversation}")


def human_id(author: str) -> str:
    return "h_" + _hex14(author)


def new_trace() -> str:
    return "t_" + secrets.token_hex(7)


def ranges_text(lines: Iterable[int]) -> str:
    """Ascending 1-based lines as `1-4,9,12-13`."""
    out: list[str] = []
    ordered = sorted(set(lines))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def parse_ranges(text: str) -> list[tuple[int, int]]:
    if not _RANGE.match(text):
        return []
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.append((int(a), int(b or a)))
    return out


def _quote(path: str) -> str:
    return json.dumps(path, ensure_ascii=False) if any(c in path for c in ' \t\n"') else path


def _unquote(line: str) -> str:
    if line.startswith('"'):
        try:
            value = json.loads(line)
            return value if isinstance(value, str) else line
        except ValueError:
            return line.strip('"')
    return line


@dataclass
class AuthorshipLog:
    """`files`: path → key → [(first, last)]; `metadata` as the JSON says it (sessions/humans default empty)."""

    files: dict[str, dict[str, list[tuple[int, int]]]] = field(default_factory=dict)
    metadata: dict[str, object] = field(default_factory=dict)

    def key_at(self, path: str, line: int) -> str | None:
        for key, ranges in self.files.get(path, {}).items():
            if any(a <= line <= b for a, b in ranges):
                return key
        return None

    def section(self, name: str) -> dict[str, dict[str, object]]:
        value = self.metadata.get(name)
        if not isinstance(value, dict):
            return {}
        return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, dict)}


def parse_log(data: bytes | str | None) -> AuthorshipLog | None:
    """A note's log; None when it is not one (no `---` line, metadata not a JSON object)."""
    if data is None:
        return None
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    head, sep, tail = text.partition("\n---\n")
    if not sep:
        if text.startswith("---\n"):
            head, tail = "", text[4:]
        else:
            return None
    try:
        metadata = json.loads(tail)
    except ValueError:
        return None
    if not isinstance(metadata, dict):
        return None
    files: dict[str, dict[str, list[tuple[int, int]]]] = {}
    current: str | None = None
    for line in head.split("\n"):
        if not line.strip():
            continue
        if line.startswith("  ") and current is not None:
            key, _, ranges = line[2:].strip().partition(" ")
            parsed = parse_ranges(ranges.strip())
            if parsed:
                files[current].setdefault(key, []).extend(parsed)
        elif not line.startswith(" "):
            current = _unquote(line.rstrip())
            files.setdefault(current, {})
    return AuthorshipLog({p: k for p, k in files.items() if k}, metadata)


def render_log(files: Mapping[str, Mapping[str, Iterable[int]]], metadata: Mapping[str, object]) -> str:
    """The note's text: each file with attested lines (sorted), its keys, then `---` and the metadata."""
    out: list[str] = []
    for path in sorted(files):
        entries = [(key, ranges_text(lines)) for key, lines in sorted(files[path].items())]
        entries = [(k, r) for k, r in entries if r]
        if not entries:
            continue
        out.append(_quote(path))
        out += [f"  {key} {ranges}" for key, ranges in entries]
    out.append("---")
    out.append(json.dumps(dict(metadata), indent=2, ensure_ascii=False))
    return "\n".join(out) + "\n"


class AiNotes:
    """The notes of one repository under `refs/notes/ai`; the listing and parsed logs are cached by blob."""

    def __init__(self, git: GitRepository, ref: str = AI_REF):
        self.git = git
        self.ref = ref
        self._listed: tuple[str, dict[str, str]] | None = None
        self._logs: dict[str, AuthorshipLog | None] = {}

    def tip(self) -> str | None:
        """The ref's commit, read from the ref files (no process: a hover asks it); git's answer when unsure."""
        dirs = git_dirs(self.git.root)
        if dirs is None:
            return self.git.rev_parse(self.ref)
        gitdir, common = dirs
        for base in (gitdir, common):
            try:
                value = (base / self.ref).read_text(encoding="ascii").strip()
            except (OSError, UnicodeDecodeError):
                continue
            return value if len(value) in (40, 64) else self.git.rev_parse(self.ref)
        try:
            packed = (common / "packed-refs").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        for line in packed.splitlines():
            sha, _, name = line.partition(" ")
            if name == self.ref:
                return sha
        return None

    def listing(self, tip: str | None = None) -> dict[str, str]:
        tip = tip or self.tip()
        if tip is None:
            return {}
        listed = self._listed
        if listed is None or listed[0] != tip:
            listed = self._listed = (tip, self.git.notes_list(tip))
        return listed[1]

    def has(self, commit: str) -> bool:
        return commit in self.listing()

    def read(self, commit: str, listing: Mapping[str, str] | None = None) -> AuthorshipLog | None:
        blob = (listing if listing is not None else self.listing()).get(commit)
        if blob is None:
            return None
        if blob not in self._logs:
            if len(self._logs) > 512:
                self._logs.clear()
            self._logs[blob] = parse_log(self.git.cat_blobs([blob]).get(blob))
        return self._logs[blob]

    def write(self, notes: Mapping[str, str]) -> None:
        """Set the notes of these commits (replacing theirs), keeping every other note."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            tip = self.tip()
            tree: dict[str, bytes | str] = dict(self.listing(tip)) if tip else {}
            for commit, text in notes.items():
                tree[commit] = text.encode("utf-8")
            try:
                self.git.write_notes(self.ref, tree, parent=tip, message=f"nagent-lsp: {len(notes)} authorship logs")
                return
            except GitError as exc:
                if attempt == WRITE_ATTEMPTS:
                    raise
                log.info("ai notes write lost a race (%s); reading again", exc)

    # -- the remote: fetched like the summary notes (ours win where both have one commit's log) ------------------
    def fetch(self, remote: str) -> int:
        """Bring the remote's logs; a commit only they annotated gets theirs. Returns how many were taken."""
        if not self.git.fetch_ref(remote, self.ref, FETCHED_REF):
            return 0
        fetched = self.git.rev_parse(FETCHED_REF)
        if fetched is None:
            return 0
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            tip = self.tip()
            if tip == fetched or (tip is not None and self.git.is_ancestor(fetched, tip)):
                return 0
            theirs = self.git.notes_list(fetched)
            ours = self.listing(tip) if tip else {}
            taken = {c: b for c, b in theirs.items() if c not in ours}
            try:
                if tip is None:
                    self.git.update_ref(self.ref, fetched, None)
                else:
                    tree: dict[str, bytes | str] = {**ours, **taken}
                    self.git.write_notes(self.ref, tree, parent=tip, merge=fetched, message="nagent-lsp: merge")
                return len(taken)
            except GitError as exc:
                if attempt == WRITE_ATTEMPTS:
                    raise
                log.info("ai notes merge lost a race (%s); reading again", exc)
        return 0

    def push(self, remote: str) -> bool:
        """Send our logs; when the remote moved on, merge theirs first. False: nothing to push."""
        if self.tip() is None:
            return False
        for _ in range(WRITE_ATTEMPTS):
            if self.git.push_ref(remote, self.ref):
                return True
            self.fetch(remote)
        raise GitError(f"the remote {remote} kept refusing {self.ref}; try again")

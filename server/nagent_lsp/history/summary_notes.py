"""Commit summaries shared through git notes (DESIGN §11, `history.shareSummaries: "notes"`).

One note per commit under `refs/notes/nagent-summaries`, holding JSON `{path: summary}` (a commit summarised for
several files has one entry per path). A team shares them through the remote it already has: `fetch` brings the
remote's notes and merges them into ours, `push` sends ours (merging first when the remote moved on).

Merging is ours, at the JSON level: git's own notes merge strategies either pick one side or concatenate texts,
which would drop an entry or break the JSON. The rule: every (commit, path) entry of either side is kept; when both
sides summarised the same (commit, path) differently, the smaller text wins on both sides, so clones converge.
Nothing here ever removes an entry.

Every git call is one process (history.git): the notes list, one `cat-file --batch` for the blobs, one
`fast-import` per write.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nagent_lsp.history.git import GitError, GitRepository

log = logging.getLogger(__name__)

NOTES_REF = "refs/notes/nagent-summaries"
FETCHED_REF = "refs/nagent/fetched-summaries"  # where `fetch` puts the remote's notes before merging them
WRITE_ATTEMPTS = 3  # a write that lost a race with another writer reads again and retries


def parse_note(data: bytes | None) -> dict[str, str]:
    """A note's `{path: summary}`; anything unreadable counts as no entries (a hand-written note is not ours)."""
    if not data:
        return {}
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str) and v.strip()}


def render_note(entries: Mapping[str, str]) -> bytes:
    return json.dumps(dict(sorted(entries.items())), ensure_ascii=False, indent=0).encode("utf-8")


def merge_entries(ours: Mapping[str, str], theirs: Mapping[str, str]) -> dict[str, str]:
    """Every entry of both. Where both summarised one path differently, the same one of the two wins on every
    clone (the smaller text), so two clones agree after one exchange instead of merging back and forth."""
    merged = {**theirs, **ours}
    for path in ours.keys() & theirs.keys():
        merged[path] = min(ours[path], theirs[path])
    return merged


@dataclass(frozen=True)
class MergeReport:
    commits: int  # commits whose note changed here
    entries: int  # (commit, path) entries we did not have before
    moved: bool  # whether our notes ref changed


class SummaryNotes:
    def __init__(self, git: GitRepository, ref: str = NOTES_REF):
        self.git = git
        self.ref = ref
        # The notes tree's listing at the ref's last tip seen: every lookup (one per hovered file whose commits lack
        # a summary) would otherwise list the whole tree again; a fetch or a write moves the tip and so refreshes it.
        self._listed: tuple[str, dict[str, str]] | None = None

    # -- reading --------------------------------------------------------------------------------------------------
    def listing(self, tip: str | None = None) -> dict[str, str]:
        """{annotated commit: note blob} at the ref's tip (`tip`: already resolved); {} when there are no notes."""
        tip = tip or self.git.rev_parse(self.ref)
        if tip is None:
            return {}
        listed = self._listed
        if listed is None or listed[0] != tip:
            listed = self._listed = (tip, self.git.notes_list(tip))
        return listed[1]

    def read(self, commits: Iterable[str] | None = None) -> dict[str, dict[str, str]]:
        """{commit: {path: summary}} for `commits` (None: every note)."""
        listing = self.listing()
        if commits is not None:
            wanted = set(commits)
            listing = {c: b for c, b in listing.items() if c in wanted}
        blobs = self.git.cat_blobs(listing.values())
        notes = {c: parse_note(blobs.get(b)) for c, b in listing.items()}
        return {c: e for c, e in notes.items() if e}

    def lookup(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The summaries the notes hold for (commit, path) pairs."""
        pairs = list(pairs)
        notes = self.read({sha for sha, _ in pairs})
        return {(sha, path): notes[sha][path] for sha, path in pairs if path in notes.get(sha, {})}

    # -- writing --------------------------------------------------------------------------------------------------
    def add(self, summaries: Mapping[tuple[str, str], str]) -> int:
        """Add (commit, path) summaries to the notes, keeping every entry already there; returns how many were new."""
        wanted: dict[str, dict[str, str]] = {}
        for (sha, path), summary in summaries.items():
            if summary and summary.strip():
                wanted.setdefault(sha, {})[path] = " ".join(summary.split())
        if not wanted:
            return 0
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            tip = self.git.rev_parse(self.ref)
            listing = self.listing(tip) if tip else {}
            blobs = self.git.cat_blobs(listing[c] for c in wanted if c in listing)
            tree: dict[str, bytes | str] = dict(listing)
            added = 0
            for sha, entries in wanted.items():
                current = parse_note(blobs.get(listing.get(sha, "")))
                merged = {**entries, **current}  # a summary already shared stays as it is
                if merged != current:
                    added += len(merged) - len(current)
                    tree[sha] = render_note(merged)
            if not added:
                return 0
            try:
                self.git.write_notes(self.ref, tree, parent=tip, message=f"nagent-lsp: {added} commit summaries")
                return added
            except GitError as exc:
                if attempt == WRITE_ATTEMPTS:
                    raise
                log.info("notes write lost a race (%s); reading again", exc)
        return 0

    def merge_ref(self, other: str) -> MergeReport:
        """Merge the notes at commit `other` (e.g. the fetched remote notes) into ours."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            tip = self.git.rev_parse(self.ref)
            if tip == other:
                return MergeReport(0, 0, False)
            theirs = self.git.notes_list(other)
            ours = self.listing(tip) if tip else {}
            both = [c for c in theirs if c in ours and theirs[c] != ours[c]]
            only = [c for c in theirs if c not in ours]
            blobs = self.git.cat_blobs([*(theirs[c] for c in both + only), *(ours[c] for c in both)])
            tree: dict[str, bytes | str] = dict(ours)
            commits = entries = 0
            for commit, blob in theirs.items():
                if commit not in ours:
                    tree[commit] = blob
                    commits += 1
                    entries += len(parse_note(blobs.get(blob)))
                elif commit in both:
                    mine = parse_note(blobs.get(ours[commit]))
                    merged = merge_entries(mine, parse_note(blobs.get(blob)))
                    if merged != mine:
                        tree[commit] = render_note(merged)
                        commits += 1
                        entries += len(merged) - len(mine)
            try:
                if tip is None:
                    self.git.update_ref(self.ref, other, None)
                elif self.git.is_ancestor(other, tip):
                    return MergeReport(0, 0, False)  # we already have everything they have
                elif self.git.is_ancestor(tip, other) and not _keeps_less(tree, theirs):
                    self.git.update_ref(self.ref, other, tip)  # theirs holds all of ours: fast-forward
                else:
                    message = f"nagent-lsp: merge {commits} commit summaries"
                    self.git.write_notes(self.ref, tree, parent=tip, merge=other, message=message)
                return MergeReport(commits, entries, True)
            except GitError as exc:
                if attempt == WRITE_ATTEMPTS:
                    raise
                log.info("notes merge lost a race (%s); reading again", exc)
        return MergeReport(0, 0, False)

    # -- the remote -----------------------------------------------------------------------------------------------
    def fetch(self, remote: str) -> MergeReport:
        """Bring the remote's notes and merge them into ours (nothing of ours is dropped)."""
        if not self.git.fetch_ref(remote, self.ref, FETCHED_REF):
            return MergeReport(0, 0, False)
        fetched = self.git.rev_parse(FETCHED_REF)
        return self.merge_ref(fetched) if fetched else MergeReport(0, 0, False)

    def push(self, remote: str) -> tuple[bool, MergeReport | None]:
        """Send our notes; when the remote moved on, fetch and merge theirs first, then send again. Returns (pushed,
        the merge made on the way, if any). False when there is nothing to push."""
        if self.git.rev_parse(self.ref) is None:
            return False, None
        merged: MergeReport | None = None
        for _ in range(WRITE_ATTEMPTS):
            if self.git.push_ref(remote, self.ref):
                return True, merged
            merged = self.fetch(remote)
        raise GitError(f"the remote {remote} kept refusing {self.ref}; try again")


def _keeps_less(tree: Mapping[str, bytes | str], theirs: Mapping[str, str]) -> bool:
    """Whether taking `theirs` as it is would lose something of the merged `tree` (an entry only we have)."""
    return any(isinstance(v, bytes) or c not in theirs for c, v in tree.items())

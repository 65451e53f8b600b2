"""Turn a file's history into text: the hover card (Markdown), the `{file-history}` block for the model, plain text."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

from nagent_lsp.history.coedits import CoeditTable
from nagent_lsp.history.index import CommitRef

RECENT = 5
BUILDING = "building history…"
CARD_AUTHORS = 5
CARD_COEDITS = 5


def day(epoch: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def iso(epoch: int) -> str:
    # time, not datetime: the same text, and the CLI's cold `history` does not import datetime (issue 29)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Author(NamedTuple):
    name: str
    email: str
    commits: int


def authors_of(commits: tuple[CommitRef, ...] | list[CommitRef]) -> list[Author]:
    """Sorted by commits (desc), then name, then email. People are (name, email) pairs, as git records them."""
    counts = Counter((c.author, c.email) for c in commits)
    return [
        Author(n, e, k) for (n, e), k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0].lower(), kv[0][1]))
    ]


class HistoryView(NamedTuple):
    file: str  # path relative to the repository, "/" separated
    repository: str
    commits: tuple[CommitRef, ...]  # newest first (the window: at most maxCommits)
    total: int  # commits known for the file (>= len(commits))
    complete: bool  # False: there may be more than `total`
    coedits: CoeditTable
    summary: Callable[[CommitRef], str | None] = lambda _c: None
    building: bool = False  # the repository's index is still being built: this is what is known so far
    problem: str = ""  # why nothing could be read (git's error), shown instead of "no commits yet"

    def text_for(self, commit: CommitRef) -> str:
        return self.summary(commit) or commit.subject

    @property
    def authors(self) -> list[Author]:
        return authors_of(self.commits)


_MD_ESCAPES = str.maketrans({ch: "\\" + ch for ch in "\\`*_[]<>|#"})


def _md(text: str) -> str:
    # keep user text from turning into Markdown structure
    return text.translate(_MD_ESCAPES)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def hover_card(
    view: HistoryView,
    all_authors: list[Author],
    line: int | None = None,
    line_commit: CommitRef | None = None,
    line_state: str = "",
) -> str:
    """Markdown for textDocument/hover. `line_state` explains a missing line commit ("pending", "uncommitted")."""
    commits = view.commits
    total = f"{view.total}{'' if view.complete else '+'}"
    if not commits:
        if view.problem:
            return unreadable(view)
        if view.building:
            return f"**History of `{view.file}`**: {BUILDING} nothing known about this file yet."
        return f"**History of `{view.file}`**: no commits yet."
    oldest, newest = commits[-1].time, commits[0].time
    authors = _count(len(all_authors), "author") + ("" if view.complete else " so far")
    parts = [
        f"**History of `{view.file}`**: {total} commit{'' if view.total == 1 else 's'} by "
        f"{authors}, {day(oldest) if view.complete else '…'} → {day(newest)}"
        + (f" · {BUILDING}" if view.building else ""),
        "",
        "**Authors**: "
        + ", ".join(f"{_md(a.name)} ({a.commits})" for a in all_authors[:CARD_AUTHORS])
        + (f", +{len(all_authors) - CARD_AUTHORS} more" if len(all_authors) > CARD_AUTHORS else ""),
        "",
        "**Recent changes**",
    ]
    for c in commits[:RECENT]:
        parts.append(f"- {day(c.time)} `{c.hash[:7]}` {_md(c.author)}: {_md(view.text_for(c))}")
    if line is not None:
        parts.append("")
        if line_commit is not None:
            parts.append(
                f"**Line {line}** last changed {day(line_commit.time)} `{line_commit.hash[:7]}` "
                f"{_md(line_commit.author)}: {_md(view.text_for(line_commit))}"
            )
        elif line_state:
            parts.append(f"**Line {line}**: {line_state}")
    rows = view.coedits.rows[:CARD_COEDITS]
    if rows:
        parts.append("")
        parts.append("**Co-edited**: " + ", ".join(f"`{r.path}` {r.level} ({r.percent}%)" for r in rows))
    return "\n".join(parts)


GUIDANCE = (
    "These rows are hints from history, not a list of edits to make. Before changing interfaces, tests, "
    "configuration or code that usually moves in pairs, look at the high-rate files; change them only when the "
    "request or what you find in them calls for it."
)


def file_history_block(view: HistoryView) -> str:
    """The `{file-history}` block of the initial context ("" when the file has no commits)."""
    if not view.commits:
        return ""
    out = [
        "{file-history}",
        f"File: {view.file}",
        f"Repository: {view.repository}",
        "",
        "People who changed this file:",
    ]
    for a in view.authors:
        out.append(f"- {a.name} <{a.email}>: {_count(a.commits, 'commit')}")
    out += ["", "History, oldest first:"]
    for c in reversed(view.commits):
        out.append(f"- {day(c.time)} {c.hash[:7]} {c.author}: {view.text_for(c)}")
    out += ["", "Files changed in the same commits:"]
    if view.coedits.rows:
        out += ["| file | commits together | co-edit rate |", "| --- | ---: | --- |"]
        for r in view.coedits.rows:
            out.append(f"| {r.path} | {r.count} | {r.level} ({r.percent}%) |")
        out += ["", GUIDANCE]
    else:
        out.append("- None found.")
    out += ["", "Summarized commits (newest first):"]
    for c in view.commits:
        out.append(f"- {c.hash} ({c.hash[:7]}): {view.text_for(c)}")
    out.append("{/file-history}")
    return "\n".join(out)


def unreadable(view: HistoryView) -> str:
    return f"**History of `{view.file}`**: git could not read it: {_md(view.problem)}"


def history_markdown(view: HistoryView) -> str:
    """Markdown for the nagent.history result: authors, every listed commit, co-edits."""
    if not view.commits:
        return unreadable(view) if view.problem else f"**History of `{view.file}`**: no commits yet."
    authors = view.authors
    out = [
        f"## History of `{view.file}`",
        "",
        f"{_count(len(view.commits), 'commit')} by {_count(len(authors), 'author')}, "
        f"{day(view.commits[-1].time)} → {day(view.commits[0].time)}",
    ]
    if not view.complete and view.total <= len(view.commits):
        out.append("")
        out.append(
            "*Partial: the newest commits only; "
            + (f"{BUILDING[:-1]} in the background." if view.building else "older commits were not read.")
            + "*"
        )
    out += ["", "### Authors"]
    out += [f"- {_md(a.name)} <{_md(a.email)}>: {_count(a.commits, 'commit')}" for a in authors]
    out += ["", "### Commits (newest first)"]
    out += [f"- {day(c.time)} `{c.hash[:7]}` {_md(c.author)}: {_md(view.text_for(c))}" for c in view.commits]
    out += ["", coedits_markdown(view.coedits)]
    return "\n".join(out)


def coedits_markdown(table: CoeditTable) -> str:
    out = [f"### Co-edited files (over {_count(table.commits, 'commit')})"]
    if not table.rows:
        return "\n".join(out + ["", "None found."])
    out += ["", "| file | commits together | rate | level |", "| --- | ---: | ---: | --- |"]
    out += [f"| `{r.path}` | {r.count} | {r.percent}% | {r.level} |" for r in table.rows]
    return "\n".join(out)


# -- plain text (the CLI's `history` and `coedits`, ACP's /history) -------------------------------------------------
# Plain tuples in, so the `nagent.history` result (operations/history.py) and the CLI's cold answer, made from a
# view without the result classes (headless/history_cold.py), print through the same lines.
CommitLine = tuple[str, str, str, str]  # date (YYYY-MM-DD…), short hash, author, summary or subject
AuthorLine = tuple[int, str, str]  # commits, name, email
CoeditLine = tuple[str, int, float, str]  # path, count, rate, level


def history_text(
    file: str,
    repository: str,
    commits: Sequence[CommitLine],
    authors: Sequence[AuthorLine],
    coedits: Sequence[CoeditLine],
) -> str:
    lines = [f"{file}  ({repository})", ""]
    if not commits:
        return "\n".join(lines + ["No commits.", ""])
    lines.append("Authors:")
    width = max(len(str(count)) for count, _name, _email in authors)
    lines += [f"  {count:>{width}}  {name} <{email}>" for count, name, email in authors]
    lines += ["", "Commits (newest first):"]
    for date, short, author, text in commits:
        lines.append(f"  {date[:10]}  {short}  {author}: {text}")
    lines += ["", coedits_text(coedits, None).rstrip()]
    return "\n".join(lines) + "\n"


def coedits_text(rows: Sequence[CoeditLine], commits: int | None) -> str:
    head = "Files changed in the same commits"
    if commits is not None:
        head += f" (over {commits} commits)"
    if not rows:
        return f"{head}: none found.\n"
    width = max(len(path) for path, _count, _rate, _level in rows)
    lines = [head + ":"]
    for path, count, rate, level in rows:
        lines.append(f"  {path:<{width}}  {count:>4}  {round(rate * 100):>3}%  {level}")
    return "\n".join(lines) + "\n"


def partial_noted(text: str, markdown: str, partial: bool) -> str:
    """The CLI's text of a partial answer says so under its first line, in the words of the card's markdown."""
    said = next((line.strip("*") for line in markdown.splitlines() if line.startswith("*Partial")), None)
    if not partial or said is None:
        return text
    head, _, rest = text.partition("\n")
    return f"{head}\n{said}\n{rest}"

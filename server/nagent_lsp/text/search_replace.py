"""SEARCH/REPLACE blocks (DESIGN §11): parse a block list, apply it to a text, or say precisely why not.

A block is

    <<<<<<< SEARCH
    lines as they are in the file
    =======
    lines to put in their place
    >>>>>>> REPLACE

Matching works on whole lines. A block's SEARCH lines must match exactly one run of lines of the text: first
exactly (line terminators aside), then, when nothing matches exactly, ignoring leading and trailing whitespace on
each line (a model that re-indented the snippet still finds it; the replacement is then re-indented by the same
amount). Blocks apply one after another to the text as the earlier blocks left it, and either every block applies
or none does: a failure names the block and shows the closest lines of the text, so the model can correct itself.

Pure: strings in, strings out. Cost is linear in the text per block, whatever its size (no split needed).
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass

SEARCH_RE = re.compile(r"^\s*<{5,9} ?SEARCH\s*$")
DIVIDER_RE = re.compile(r"^\s*={5,9}\s*$")
REPLACE_RE = re.compile(r"^\s*>{5,9} ?REPLACE\s*$")
MAX_SHOWN = 12  # lines of the text shown beside a failed block
MAX_LOCATIONS = 5  # line numbers listed for an ambiguous block


@dataclass(frozen=True)
class Block:
    search: str  # the SEARCH lines, joined with "\n" (no final newline)
    replace: str  # the REPLACE lines, likewise ("" removes the matched lines)


class BlockSyntaxError(ValueError):
    """The body is not a list of well-formed blocks; the message says which marker is missing where."""


class ReplaceFailed(ValueError):
    """A block did not match exactly once; nothing was applied. `block` is 1-based."""

    def __init__(self, block: int, total: int, message: str):
        super().__init__(message)
        self.block = block
        self.total = total
        self.message = message


@dataclass(frozen=True)
class Applied:
    text: str
    blocks: int
    tolerant: int  # blocks that matched only with whitespace tolerance
    lines: tuple[tuple[int, int], ...]  # per block: (first line, 1-based, in the result; lines it now spans)


def parse_blocks(body: str) -> tuple[Block, ...]:
    """The blocks of a tag body; raises BlockSyntaxError naming the problem."""
    lines = body.replace("\r\n", "\n").split("\n")
    blocks: list[Block] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if not SEARCH_RE.match(line):
            raise BlockSyntaxError(
                f"line {i + 1} of the body is outside a block: every change must be written as "
                "<<<<<<< SEARCH / old lines / ======= / new lines / >>>>>>> REPLACE"
            )
        number = len(blocks) + 1
        start = i + 1
        j = start
        while j < n and not DIVIDER_RE.match(lines[j]):
            if SEARCH_RE.match(lines[j]) or REPLACE_RE.match(lines[j]):
                raise BlockSyntaxError(f"block {number} has no ======= line between its SEARCH and REPLACE parts")
            j += 1
        if j >= n:
            raise BlockSyntaxError(f"block {number} has no ======= line after its SEARCH part")
        k = j + 1
        while k < n and not REPLACE_RE.match(lines[k]):
            if SEARCH_RE.match(lines[k]):
                raise BlockSyntaxError(f"block {number} is not closed with >>>>>>> REPLACE")
            k += 1
        if k >= n:
            raise BlockSyntaxError(f"block {number} is not closed with >>>>>>> REPLACE")
        search = "\n".join(lines[start:j])
        if not search.strip():
            raise BlockSyntaxError(
                f"block {number} has an empty SEARCH part; copy the lines to change (or the line to insert after) "
                "from the file"
            )
        blocks.append(Block(search, "\n".join(lines[j + 1 : k])))
        i = k + 1
    if not blocks:
        raise BlockSyntaxError("the body holds no <<<<<<< SEARCH / ======= / >>>>>>> REPLACE block")
    return tuple(blocks)


def render_blocks(blocks: tuple[Block, ...] | list[Block]) -> str:
    """The canonical body of a block list (what parse_blocks reads back)."""
    parts = []
    for block in blocks:
        replace = f"{block.replace}\n" if block.replace else ""
        parts.append(f"<<<<<<< SEARCH\n{block.search}\n=======\n{replace}>>>>>>> REPLACE")
    return "\n".join(parts) + "\n"


def _split(text: str) -> tuple[list[str], list[str]]:
    """(line contents, line terminators); a text without a final newline has "" as its last terminator."""
    contents: list[str] = []
    ends: list[str] = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        contents.append(body)
        ends.append(line[len(body) :])
    return contents, ends


def _find(contents: list[str], wanted: list[str], key: object) -> list[int]:
    """Start indices where `wanted` matches a run of `contents` (both compared through `key`)."""
    norm = key if callable(key) else (lambda s: s)
    first = norm(wanted[0])
    width = len(wanted)
    tail = [norm(w) for w in wanted[1:]]
    hits: list[int] = []
    for i in range(len(contents) - width + 1):
        if norm(contents[i]) != first:
            continue
        if all(norm(contents[i + 1 + k]) == w for k, w in enumerate(tail)):
            hits.append(i)
    return hits


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(file_lines: list[str], search: list[str], replace: list[str]) -> list[str]:
    """A tolerant match: shift the replacement's indentation as the file's differs from the SEARCH lines', when
    the difference is one consistent prefix (added or removed); otherwise keep the replacement as written."""
    pairs = [(f, s) for f, s in zip(file_lines, search, strict=True) if s.strip()]
    added = {_indent(f)[: len(_indent(f)) - len(_indent(s))] for f, s in pairs if _indent(f).endswith(_indent(s))}
    if len(added) == 1 and all(_indent(f).endswith(_indent(s)) for f, s in pairs):
        prefix = added.pop()
        if prefix:
            return [prefix + r if r.strip() else r for r in replace]
        return replace
    removed = {_indent(s)[: len(_indent(s)) - len(_indent(f))] for f, s in pairs if _indent(s).endswith(_indent(f))}
    if len(removed) == 1 and all(_indent(s).endswith(_indent(f)) for f, s in pairs):
        prefix = removed.pop()
        if prefix and all(r.startswith(prefix) or not r.strip() for r in replace):
            return [r[len(prefix) :] if r.strip() else r for r in replace]
    return replace


def _newline(ends: list[str]) -> str:
    counts = Counter(e for e in ends if e)
    return counts.most_common(1)[0][0] if counts else "\n"


def apply_blocks(text: str, blocks: tuple[Block, ...] | list[Block], path: str = "the file") -> Applied:
    """Apply every block in order, or raise ReplaceFailed (nothing applied) for the first that does not match
    exactly one place."""
    contents, ends = _split(text)
    newline = _newline(ends)
    tolerant = 0
    spans: list[tuple[int, int]] = []
    total = len(blocks)
    for number, block in enumerate(blocks, 1):
        search = block.search.split("\n")
        replace = block.replace.split("\n") if block.replace else []
        hits = _find(contents, search, None)
        mode = "exactly"
        if not hits:
            hits = _find(contents, search, str.strip)
            mode = "up to leading and trailing whitespace"
            if hits:
                tolerant += 1
        if len(hits) != 1:
            raise ReplaceFailed(number, total, _failure(number, total, path, contents, search, hits, mode))
        at = hits[0]
        width = len(search)
        if mode != "exactly":
            replace = _reindent(contents[at : at + width], search, replace)
        last_end = ends[at + width - 1]
        new_ends = [newline] * len(replace)
        if new_ends:
            new_ends[-1] = last_end  # the text's last line keeps having (or lacking) its final newline
        elif at > 0 and at + width == len(contents) and not last_end:
            ends[at - 1] = ""  # the removed lines ended the text without a newline; so does the line before now
        contents[at : at + width] = replace
        ends[at : at + width] = new_ends
        spans.append((at + 1, len(replace)))
    out = "".join(c + e for c, e in zip(contents, ends, strict=True))
    return Applied(out, total, tolerant, tuple(spans))


def _failure(
    number: int, total: int, path: str, contents: list[str], search: list[str], hits: list[int], mode: str
) -> str:
    which = f"Block {number} of {total}" if total > 1 else "The block"
    earlier = f" (as blocks 1-{number - 1} left it)" if number > 1 else ""
    if hits:
        where = ", ".join(str(h + 1) for h in hits[:MAX_LOCATIONS]) + (" …" if len(hits) > MAX_LOCATIONS else "")
        return (
            f"{which} matches {len(hits)} places in {path}{earlier} ({mode}), starting at lines {where}; "
            "a SEARCH part must match exactly one place. Add neighbouring lines to its SEARCH and REPLACE parts "
            "so it is unique. Nothing of this <nagent-replace> was applied."
        )
    start, end = _closest(contents, search)
    if end > start:
        shown = "\n".join(f"{i + 1:>6}| {contents[i]}" for i in range(start, end))
        closest = f"The closest lines of {path}{earlier} are {start + 1}-{end}:\n{shown}\n"
    else:
        closest = f"{path} is empty.\n" if not contents else "No line of it resembles the SEARCH lines.\n"
    return (
        f"{which} did not match: its SEARCH lines are not in {path}{earlier}, neither exactly nor up to leading "
        f"and trailing whitespace.\n{closest}"
        "Nothing of this <nagent-replace> was applied. Copy the SEARCH lines exactly from the file (read it again "
        "if unsure) and send the whole tag again, with every block."
    )


def _closest(contents: list[str], search: list[str]) -> tuple[int, int]:
    """The run of lines most like `search` (an index range, with a line of context around it when there is room):
    lines equal up to whitespace vote for where the block would start; without any, the nearest single line."""
    if not contents:
        return 0, 0
    width = len(search)
    positions: dict[str, list[int]] = {}
    wanted = {s.strip() for s in search if s.strip()}
    for i, line in enumerate(contents):
        key = line.strip()
        if key in wanted:
            positions.setdefault(key, []).append(i)
    votes: Counter[int] = Counter()
    for offset, line in enumerate(search):
        for i in positions.get(line.strip(), ())[:1000]:
            votes[i - offset] += 1
    if votes:
        start = max(votes.items(), key=lambda kv: (kv[1], -kv[0]))[0]
    else:
        probe = next((s.strip() for s in search if s.strip()), "")
        unique = list(dict.fromkeys(c.strip() for c in contents if c.strip()))
        near = difflib.get_close_matches(probe, unique, n=1, cutoff=0.5) if probe else []
        if not near:
            return 0, 0
        start = next(i for i, c in enumerate(contents) if c.strip() == near[0])
    start = max(0, start - 1)
    end = min(len(contents), start + min(width + 2, MAX_SHOWN))
    return start, end

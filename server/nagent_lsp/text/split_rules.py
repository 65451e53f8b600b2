"""Split types, their extensions, and the boundary rules of each type.

A rule set is one regex over the file's UTF-8 bytes, matched at each newline against the line that
follows it. Every named group is a kind of boundary: `a_*` groups mark a break *after* the matched line
(the group's end), `b_*` groups a break *before* the line (the group's start). Each kind maps to tiers by
bracket depth at the break: (max_depth or None, tier),
first match wins; a kind whose depth condition fails still counts at tier 0, so a stray brace in a string
degrades the choice instead of removing every boundary. Higher tiers are better places to cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EOL = rb"(?:\r\n|\n|\r)"
BLANK = rb"[ \t]*" + EOL

TYPES = ("txt", "md", "py", "cpp", "js", "ts", "json", "yaml", "go", "rs", "java", "xml")

EXTENSIONS: dict[str, str] = {}
for _type, _exts in {
    "txt": "txt text log csv tsv",
    "md": "md markdown mdown mkd mdx",
    "py": "py pyw pyi",
    "cpp": "c cc cpp cxx c++ h hh hpp hxx h++ ipp inl",
    "js": "js mjs cjs jsx",
    "ts": "ts tsx mts cts",
    "json": "json jsonc json5",
    "yaml": "yaml yml",
    "go": "go",
    "rs": "rs",
    "java": "java",
    "xml": "xml html htm xhtml svg rss atom",
}.items():
    for _ext in _exts.split():
        EXTENSIONS[_ext] = _type

ALIASES = {
    **{t: t for t in TYPES},
    **EXTENSIONS,
    "c": "cpp",
    "rust": "rs",
    "html": "xml",
    "python": "py",
    "javascript": "js",
    "typescript": "ts",
    "markdown": "md",
    "text": "txt",
}


class UnknownSplitType(ValueError):
    pass


def normalize_split_type(name: str) -> str:
    """A type name or an extension alias (with or without dot) -> the canonical type."""
    key = name.strip().lower().lstrip(".")
    if key in ALIASES:
        return ALIASES[key]
    raise UnknownSplitType(f"unknown split type: {name} (supported: {', '.join(sorted(ALIASES))})")


def detect_split_type(path: Path | str) -> str:
    return EXTENSIONS.get(Path(path).suffix.lower().lstrip("."), "txt")


@dataclass(frozen=True)
class RuleSet:
    pattern: re.Pattern[bytes]
    tiers: dict[str, tuple[tuple[int | None, int], ...]]
    depth: Callable[[bytes, int, int], int] | None = None  # bracket depth change over data[a:b]
    hop_back: tuple[bytes, ...] = ()  # lines (comments, decorators) that belong to the declaration below
    alternatives: tuple[tuple[str, bytes], ...] = ()  # (group name, its alternative) in the pattern's order
    _above: dict[int, re.Pattern[bytes] | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def top_tier(self) -> int:
        return max(tier for options in self.tiers.values() for _, tier in options)

    def max_tier(self, group: str) -> int:
        return max(tier for _, tier in self.tiers[group])

    def pattern_above(self, tier: int) -> re.Pattern[bytes] | None:
        """A pattern that finds exactly the boundaries of `pattern` whose kind can reach a tier above `tier`
        (None when no kind can): each kept alternative is guarded by a negative lookahead on the dropped
        alternatives before it, so a position yields the same kind as under the full pattern or nothing.
        A scan that already holds a boundary of `tier` jumps over all lesser ones at regex speed."""
        if tier not in self._above:
            kept: list[bytes] = []
            dropped: list[bytes] = []
            for name, text in self.alternatives:
                if self.max_tier(name) > tier:
                    guard = rb"(?!" + b"|".join(dropped) + rb")" if dropped else b""
                    kept.append(guard + text)
                else:  # the same alternative without its group name (a name may appear only once)
                    dropped.append(rb"(?:(?:" + text[len(name) + 5 :] + rb")")
            self._above[tier] = re.compile(rb"\n(?=" + b"|".join(kept) + rb")") if kept else None
        return self._above[tier]


def _counter(opens: bytes, closes: bytes) -> Callable[[bytes, int, int], int]:
    o = [bytes([c]) for c in opens]
    c = [bytes([c]) for c in closes]

    def delta(data: bytes, a: int, b: int) -> int:
        return sum(data.count(x, a, b) for x in o) - sum(data.count(x, a, b) for x in c)

    return delta


def _xml_depth(data: bytes, a: int, b: int) -> int:
    # <tag> opens, </tag> and <tag/> close; comments, doctypes and processing instructions are neutral.
    lt = data.count(b"<", a, b)
    end_tags = data.count(b"</", a, b)
    neutral = data.count(b"<!", a, b) + data.count(b"<?", a, b)
    self_closing = data.count(b"/>", a, b)
    return lt - 2 * end_tags - neutral - self_closing


def _rules(body: bytes, tiers: dict, depth=None, hop_back: tuple[bytes, ...] = ()) -> RuleSet:
    # Anchored on a literal "\n" (not (?m)^) so the regex engine jumps between newlines at memchr speed;
    # the rules sit in a lookahead so a match consumes only that newline and never hides the next line.
    return RuleSet(re.compile(rb"\n(?=" + body + rb")"), tiers, depth, hop_back, _alternatives(body))


def _alternatives(body: bytes) -> tuple[tuple[str, bytes], ...]:
    """The top-level alternatives of a rule body, each `(name, text)` where the text starts with its
    `(?P<name>` group (and keeps whatever follows the group, such as a trailing lookahead)."""
    found: list[tuple[str, bytes]] = []
    depth, start, i = 0, 0, 0
    while i <= len(body):
        c = body[i : i + 1]
        if c == b"\\":
            i += 2
            continue
        if c == b"[":  # a character class: its brackets, parentheses and bars are literal
            i = body.index(b"]", i + 2 if body[i + 1 : i + 2] in (b"]", b"^") else i + 1) + 1
            continue
        if c == b"(":
            depth += 1
        elif c == b")":
            depth -= 1
        elif not c or (c == b"|" and depth == 0):
            part = body[start:i]
            m = re.match(rb"\(\?P<(\w+)>", part)
            if m is None:
                raise ValueError(f"every alternative of a rule must start with a named group: {part!r}")
            found.append((m.group(1).decode(), part))
            start = i + 1
        i += 1
    return tuple(found)


_ANY = ((None, 1),)
_C_COMMENTS = (b"//", b"/*", b" *", b"*/")


def _brace_language(decl: bytes, hop_back: tuple[bytes, ...]) -> RuleSet:
    # Column-0 declarations and closing braces at depth 0 are the best cuts; a closing brace or a blank
    # line at depth 1 (members of a class, namespace or impl) is the next best.
    return _rules(
        rb"(?P<b_decl>" + decl + rb")"
        rb"|(?P<a_close>[ \t]*\}[ \t;,)]*" + EOL + rb")"
        rb"|(?P<a_blank>" + BLANK + rb")",
        {
            "b_decl": ((0, 3),),
            "a_close": ((0, 3), (1, 2)),
            "a_blank": ((0, 2), (1, 1)),
        },
        _counter(b"{", b"}"),
        hop_back,
    )


RULES: dict[str, RuleSet] = {
    "txt": _rules(rb"(?P<a_blank>" + BLANK + rb")", {"a_blank": _ANY}),
    # Cut before a heading so it stays with its section.
    "md": _rules(
        rb"(?P<b_head>\#{1,6}[ \t])|(?P<a_blank>" + BLANK + rb")",
        {"b_head": ((None, 2),), "a_blank": _ANY},
    ),
    "py": _rules(
        rb"(?P<b_def>(?:async[ \t]+def|def|class)[ \t]|@|if[ \t]+__name__)"
        rb"|(?P<a_top>" + BLANK + rb")(?=[^\s#])"
        rb"|(?P<b_method>[ \t]+(?:async[ \t]+def|def|class)[ \t])"
        rb"|(?P<a_blank>" + BLANK + rb")",
        {"b_def": ((None, 3),), "a_top": ((None, 2),), "b_method": ((None, 2),), "a_blank": _ANY},
        hop_back=(b"@", b"#"),
    ),
    "cpp": _brace_language(
        rb"\#|class[ \t]|struct[ \t]|namespace[ \t]|template|typedef[ \t]|enum[ \t]|union[ \t]|extern[ \t]"
        rb"|static[ \t]|[A-Za-z_][\w:<>,* \t&]*\(",
        _C_COMMENTS + (b"template",),
    ),
    "js": _brace_language(
        rb"export[ \t]|function[ \t*]|class[ \t]|const[ \t]|let[ \t]|var[ \t]|async[ \t]|import[ \t{]",
        _C_COMMENTS + (b"@",),
    ),
    "ts": _brace_language(
        rb"export[ \t]|function[ \t*]|class[ \t]|const[ \t]|let[ \t]|var[ \t]|async[ \t]|import[ \t{]"
        rb"|interface[ \t]|type[ \t]|enum[ \t]|declare[ \t]|abstract[ \t]|namespace[ \t]",
        _C_COMMENTS + (b"@",),
    ),
    "rs": _brace_language(
        rb"fn[ \t]|pub[ \t(]|struct[ \t]|enum[ \t]|impl[ \t<]|mod[ \t]|use[ \t]|trait[ \t]|const[ \t]"
        rb"|static[ \t]|type[ \t]|macro_rules!|extern[ \t]|unsafe[ \t]|async[ \t]|\#\[",
        (b"//", b"#[", b"/*", b" *"),
    ),
    "java": _brace_language(
        rb"package[ \t]|import[ \t]|public[ \t]|class[ \t]|interface[ \t]|enum[ \t]|record[ \t]|@"
        rb"|private[ \t]|protected[ \t]|abstract[ \t]|final[ \t]|sealed[ \t]",
        _C_COMMENTS + (b"@",),
    ),
    # gofmt puts every top-level declaration at column 0, so no depth counting is needed.
    "go": _rules(
        rb"(?P<b_decl>(?:func|type|var|const|import|package)[ \t(])"
        rb"|(?P<a_close>[})][ \t]*" + EOL + rb")"
        rb"|(?P<a_top>" + BLANK + rb")(?=[^\s])"
        rb"|(?P<a_blank>" + BLANK + rb")",
        {"b_decl": ((None, 3),), "a_close": ((None, 3),), "a_top": ((None, 2),), "a_blank": _ANY},
        hop_back=(b"//",),
    ),
    # Members of the top-level container (depth 1) are the units; the next level down is a fallback.
    "json": _rules(
        rb"(?P<a_close>[ \t]*[}\]][ \t]*,?[ \t]*" + EOL + rb")"
        rb"|(?P<a_member>[ \t]{0,4}\"[^\r\n]*,[ \t]*" + EOL + rb")"
        rb"|(?P<a_blank>" + BLANK + rb")",
        {"a_close": ((1, 3), (2, 2)), "a_member": ((1, 3), (2, 2)), "a_blank": ((1, 2), (2, 1))},
        _counter(b"{[", b"}]"),
    ),
    "yaml": _rules(
        rb"(?P<b_doc>---)"
        rb"|(?P<b_key>[^\s#\-])"
        rb"|(?P<b_item>-[ \t])"
        rb"|(?P<a_blank>" + BLANK + rb")",
        {"b_doc": ((None, 3),), "b_key": ((None, 3),), "b_item": ((None, 2),), "a_blank": _ANY},
        hop_back=(b"#",),
    ),
    "xml": _rules(
        rb"(?P<a_close>[ \t]*</[^\r\n]*" + EOL + rb")"
        rb"|(?P<b_open>[ \t]*<[^/!?])"
        rb"|(?P<a_blank>" + BLANK + rb")",
        {"a_close": ((1, 3), (2, 2)), "b_open": ((1, 3), (2, 2)), "a_blank": ((1, 2), (2, 1))},
        _xml_depth,
        hop_back=(b"<!--",),
    ),
}

"""The one line a client shows after a run (`message` in `nagent.edit`-like results; issue 25): formatted once
here, so VS Code, Emacs, Neovim and the zero-plugin path say the same thing the same way. Costs are in US dollars
(a profile's `price` is USD per million tokens) and the line says so with a `$`."""

from __future__ import annotations

from collections.abc import Sequence

from nagent_lsp.llm.tokens import TokenCounts


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def tokens_text(tokens: TokenCounts) -> str:
    """`1,234 in / 56 out tokens · $0.0123` (the cost only when the profile has a price)."""
    text = f"{tokens.input:,} in / {tokens.output:,} out tokens"
    if tokens.cost is not None:
        text += f" · ${tokens.cost:.4f}"
    return text


def run_message(  # noqa: PLR0913  the outcome's parts, each a plain value
    name: str,
    *,
    applied: bool,
    edits: int,
    files: int,
    hunks: int | None,
    reason: str | None,
    tokens: TokenCounts,
    notes: Sequence[str] = (),
) -> str:
    """`calc.py: applied 2 edits · 1,234 in / 56 out tokens · $0.0123`; a proposal: `calc.py: a change awaits
    review (3 hunks in 2 files) · …`; else `calc.py: nothing applied (REASON) · …`. `notes` (mentions…) follow."""
    if applied:
        status = f"applied {_plural(edits, 'edit')}" + (f" in {files} files" if files > 1 else "")
    elif hunks is not None:
        where = f" in {files} files" if files > 1 else ""
        status = f"a change awaits review ({_plural(hunks, 'hunk')}{where})"
        if reason and reason != "awaiting review":
            status += f": {reason}"
    else:
        status = f"nothing applied ({reason or 'no change'})"
    return " · ".join([f"{name}: {status}", *notes, tokens_text(tokens)])

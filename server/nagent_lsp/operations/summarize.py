"""`nagent.summarize {uri}` -> `{summary, mode, cached}`; also the `{file-summary}` text for the edit loop.

The summary describes the text the user sees (the open buffer), cached by its content hash under
`<state root>/cache/`: asking again for unchanged content costs nothing, an edit gives a fresh summary.
Only a file the read rules allow is summarised (inside the workspace, no denyRead match such as `.env` or
`id_rsa`, a regular file of at most maxFileBytes): nothing else is read, and no byte of it reaches the model.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import attrs

from nagent_lsp.agent.sandbox import Refused
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.llm.file_summaries import Complete, FileSummary, SummaryError, cached_summary, summarize_text
from nagent_lsp.llm.models import require_summary_model
from nagent_lsp.operations.args import UriArgs
from nagent_lsp.operations.buffers import confined_file, read_rules, read_source_async, refusal
from nagent_lsp.operations.session import Session


async def summarize_file(
    session: Session, port: EditorPort | None, path: Path, complete: Complete | None = None, field: str = "uri"
) -> FileSummary:
    rules = read_rules(session, path)
    try:
        path = rules.confine(path)
    except Refused as exc:
        raise refusal(exc, field) from None
    source = await read_source_async(port, path, rules, field)
    cache_dir = session.state_dir(path, "cache")
    hit = await asyncio.to_thread(cached_summary, source.text, cache_dir)  # hashing megabytes is off the loop
    if hit is not None:
        return hit
    owned = None
    if complete is None:
        owned = require_summary_model(session.settings, session.environ, "fileSummary")
        complete = owned.complete
    try:
        return await summarize_text(source.text, path, cache_dir, complete)
    except SummaryError as exc:
        raise UserError(f"could not summarise {path.name}: {exc}") from None
    finally:
        if owned is not None:
            await owned.aclose()


@attrs.frozen
class SummaryResult:
    """The `nagent.summarize` result: `mode` is "inline" (one call) or "split" (segment by segment, then merged);
    `cached` when the same content was summarised before."""

    summary: str
    mode: str
    cached: bool


async def summarize(
    session: Session, port: EditorPort | None, args: UriArgs, complete: Complete | None = None
) -> SummaryResult:
    path, _ = confined_file(session, args.uri)
    result = await summarize_file(session, port, path, complete)
    return SummaryResult(result.summary, result.mode, result.cached)


def file_summary_block(session: Session, path: Path, text: str) -> str:
    """The edit loop's `{file-summary}` block for `text` from the cache only (never waits for the model)."""
    hit = cached_summary(text, session.state_dir(path, "cache"))
    body = hit.summary if hit else "No summary available."
    return f"{{file-summary}}\nFile: {path}\nSource: nagent-lsp\n\n{body}\n{{/file-summary}}"

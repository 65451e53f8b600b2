"""`nagent.summarize {uri}` -> `{summary, mode, cached}`; also the `{file-summary}` text for the edit loop.

The summary describes the text the user sees (the open buffer), cached by its content hash under
`<state root>/cache/`: asking again for unchanged content costs nothing, an edit gives a fresh summary.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nagent_lsp.config.args import file_argument
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.ports import EditorPort
from nagent_lsp.llm.file_summaries import Complete, FileSummary, SummaryError, cached_summary, summarize_text
from nagent_lsp.llm.models import require_model
from nagent_lsp.operations.args import UriArgs
from nagent_lsp.operations.buffers import read_source
from nagent_lsp.operations.session import Session


async def summarize_file(
    session: Session, port: EditorPort | None, path: Path, complete: Complete | None = None
) -> FileSummary:
    source = read_source(port, path)
    cache_dir = session.state_dir(path, "cache")
    hit = cached_summary(source.text, cache_dir)
    if hit is not None:
        return hit
    owned = None
    if complete is None:
        owned = require_model(session.settings, session.environ)
        complete = owned.complete
    try:
        return await summarize_text(source.text, path, cache_dir, complete)
    except SummaryError as exc:
        raise UserError(f"could not summarise {path.name}: {exc}") from None
    finally:
        if owned is not None:
            await owned.aclose()


async def summarize(
    session: Session, port: EditorPort | None, args: UriArgs, complete: Complete | None = None
) -> dict[str, Any]:
    path = Path(os.path.abspath(file_argument(args.uri)))
    result = await summarize_file(session, port, path, complete)
    return {"summary": result.summary, "mode": result.mode, "cached": result.cached}


def file_summary_block(session: Session, path: Path, text: str) -> str:
    """The edit loop's `{file-summary}` block for `text` from the cache only (never waits for the model)."""
    hit = cached_summary(text, session.state_dir(path, "cache"))
    body = hit.summary if hit else "No summary available."
    return f"{{file-summary}}\nFile: {path}\nSource: nagent-lsp\n\n{body}\n{{/file-summary}}"

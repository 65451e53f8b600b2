"""File summaries: inline up to 64 KiB, else one per split segment plus a combined one; cached by content hash.

The model call is injected (`complete(messages)` returning text, a Reply, or an awaitable of either), so this
package never imports a provider SDK. An unchanged file is never summarised twice; an edited file (even an
uncommitted edit) has a new hash and is summarised again; unchanged segments of a large file reuse their
cached summaries.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nagent_lsp.core.limits import INLINE_LIMIT as SUMMARIZE_THRESHOLD_BYTES  # inline up to this, else per segment
from nagent_lsp.core.model import Message
from nagent_lsp.store.file_summary_cache import FileSummaryCache
from nagent_lsp.text.segments import TARGET_BYTES_DEFAULT, plan_segments
from nagent_lsp.text.split_rules import detect_split_type

Complete = Callable[[list[Message]], Any]
LENGTH_STOPS = ("length", "max_tokens")
# Appended to a summary the model was cut off in (its output cap, fileSummaryMaxTokens, was reached).
TRUNCATED_MARK = " […truncated at fileSummaryMaxTokens]"

SYSTEM = (
    "You summarise source and text files for a developer who is about to change them. "
    "State what the file is for, its main parts (types, functions, sections) and anything surprising. "
    "Plain prose, at most {words} words, no preamble, no Markdown headings; stop when that is said."
)


class SummaryError(RuntimeError):
    """The model gave nothing usable."""


@dataclass(frozen=True)
class SegmentSummary:
    index: int
    startLine: int
    endLine: int
    summary: str


@dataclass(frozen=True)
class FileSummary:
    summary: str
    mode: str  # "inline" | "split"
    cached: bool
    sha256: str
    segments: list[SegmentSummary] = field(default_factory=list)


def content_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _messages(user: str, words: int) -> list[Message]:
    return [Message("system", SYSTEM.format(words=words)), Message("user", user)]


async def _ask(complete: Complete, messages: list[Message]) -> str:
    reply = complete(messages)
    if inspect.isawaitable(reply):
        reply = await reply
    text = (getattr(reply, "text", reply) or "").strip()
    if not isinstance(text, str) or not text:
        raise SummaryError("the model returned an empty summary")
    if getattr(reply, "finish_reason", None) in LENGTH_STOPS:
        text += TRUNCATED_MARK  # kept (it is what the cap bought) but marked, for the reader and the model alike
    return text


def cached_summary(text: str, cache_dir: Path) -> FileSummary | None:
    """The cached summary of exactly this text, without calling the model (for context blocks and hover)."""
    return _cached(content_key(text), cache_dir)


def _cached(sha: str, cache_dir: Path) -> FileSummary | None:
    hit = FileSummaryCache(cache_dir).get("file", sha)
    if hit is None:
        return None
    return FileSummary(
        hit["summary"], hit.get("mode", "inline"), True, sha, [SegmentSummary(**s) for s in hit.get("segments", [])]
    )


# One in-flight summary per (event loop, content): two concurrent requests for the same text pay once.
_inflight: dict[tuple[int, str], asyncio.Future[FileSummary]] = {}


async def summarize_text(
    text: str,
    path: Path,
    cache_dir: Path,
    complete: Complete | None,
    *,
    threshold: int = SUMMARIZE_THRESHOLD_BYTES,
    target_bytes: int = TARGET_BYTES_DEFAULT,
) -> FileSummary:
    """Summary of `text` (the content of `path`). With `complete` None only a cached summary can be returned;
    a miss raises SummaryError so the caller can say which setting to set."""
    sha = await asyncio.to_thread(content_key, text)  # megabytes of text are hashed off the event loop
    hit = _cached(sha, cache_dir)
    if hit is not None:
        return hit
    if complete is None:
        raise SummaryError("no cached summary and no model configured")
    key = (id(asyncio.get_running_loop()), sha)
    running = _inflight.get(key)
    if running is not None:
        result = await asyncio.shield(running)
        return FileSummary(result.summary, result.mode, True, result.sha256, result.segments)
    future: asyncio.Future[FileSummary] = asyncio.get_running_loop().create_future()
    _inflight[key] = future
    try:
        result = await _summarize_fresh(text, sha, path, FileSummaryCache(cache_dir), complete, threshold, target_bytes)
        future.set_result(result)
        return result
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()  # mark retrieved: nobody else may be waiting
        raise
    finally:
        _inflight.pop(key, None)


async def _summarize_fresh(
    text: str,
    sha: str,
    path: Path,
    cache: FileSummaryCache,
    complete: Complete,
    threshold: int,
    target_bytes: int,
) -> FileSummary:
    data = text.encode("utf-8")
    if len(data) <= threshold:
        summary = await _ask(complete, _messages(f"File: {path}\n\n{text}", 150))
        cache.put("file", sha, {"summary": summary, "mode": "inline", "path": str(path), "sizeBytes": len(data)})
        return FileSummary(summary, "inline", False, sha)
    segments = await asyncio.to_thread(plan_segments, data, detect_split_type(path), target_bytes)
    total = segments[-1].end_line if segments else 0
    parts: list[SegmentSummary] = []
    for seg in segments:
        # Sequential on purpose: one file must not burst a provider's rate limit.
        chunk = data[seg.start_byte : seg.end_byte].decode("utf-8")
        seg_sha = content_key(chunk)
        hit = cache.get("segment", seg_sha)
        if hit is None:
            prompt = f"File: {path} (lines {seg.start_line}-{seg.end_line} of {total})\n\n{chunk}"
            summary = await _ask(complete, _messages(prompt, 80))
            cache.put("segment", seg_sha, {"summary": summary, "path": str(path)})
        else:
            summary = hit["summary"]
        parts.append(SegmentSummary(seg.index, seg.start_line, seg.end_line, summary))
    listing = "\n\n".join(f"Lines {p.startLine}-{p.endLine}: {p.summary}" for p in parts)
    combined = await _ask(
        complete,
        _messages(
            f"File: {path} ({total} lines), summarised part by part:\n\n{listing}\n\n"
            "Write one summary of the whole file from these parts.",
            200,
        ),
    )
    cache.put(
        "file",
        sha,
        {
            "summary": combined,
            "mode": "split",
            "path": str(path),
            "sizeBytes": len(data),
            "segments": [asdict(p) for p in parts],
        },
    )
    return FileSummary(combined, "split", False, sha, parts)


__all__ = [
    "Complete",
    "FileSummary",
    "SUMMARIZE_THRESHOLD_BYTES",
    "SegmentSummary",
    "FileSummaryCache",
    "SummaryError",
    "cached_summary",
    "content_key",
    "summarize_text",
]

"""Commit summaries by the model: the prompt, the reply parsing, and the batch summariser (the chat call is
injected)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from nagent_lsp.core.model import Message
from nagent_lsp.history.service import Summarizer, SummaryItem

# -- the model summariser (prompt + reply parsing); the chat call itself is injected ---------------------------------

SUMMARY_INSTRUCTIONS = (
    "You write one-line summaries of commits, for a developer about to edit one file. For each commit below, say in "
    "one short sentence (at most 20 words) what it changed in that file and, when the diff shows it, why. Use only "
    "what the subject and diff show; if the diff is missing or cut, summarise from the subject without guessing. "
    'Reply with JSON only: {"summaries": [{"commit": "<full hash>", "path": "<path>", "summary": "<sentence>"}]}'
)


def summary_prompt(items: list[SummaryItem]) -> list[Message]:
    sections = []
    for sha, path, subject, excerpt in items:
        sections.append(f"Commit: {sha}\nPath: {path}\nSubject: {subject}\nDiff:\n{excerpt or '(not available)'}")
    return [Message("system", SUMMARY_INSTRUCTIONS), Message("user", "\n\n---\n\n".join(sections))]


def parse_summary_reply(text: str, items: list[SummaryItem]) -> dict[tuple[str, str], str]:
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.S)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        try:
            data = json.loads(body[start : end + 1]) if start >= 0 < end else None
        except ValueError:
            data = None
    rows = data.get("summaries") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        return {}
    by_hash: dict[str, list[str]] = {}
    for sha, path, _s, _e in items:
        by_hash.setdefault(sha, []).append(path)
    out: dict[tuple[str, str], str] = {}
    for row in rows:
        if not isinstance(row, dict):
            continue
        sha = str(row.get("commit") or "").strip().lower()
        summary = " ".join(str(row.get("summary") or "").split())
        if not sha or not summary:
            continue
        full = next((h for h in by_hash if h == sha or (len(sha) >= 7 and h.startswith(sha))), None)
        if full is None:
            continue
        path = str(row.get("path") or "")
        paths = by_hash[full]
        out[(full, path if path in paths else paths[0])] = summary
    return out


def make_model_summarizer(complete: Callable[[list[Message]], Any]) -> Summarizer:
    """`complete(messages)` returns a Reply (or text); exceptions propagate (the service records no summary)."""

    def summarize(items: list[SummaryItem]) -> dict[tuple[str, str], str]:
        reply = complete(summary_prompt(items))
        return parse_summary_reply(getattr(reply, "text", reply) or "", items)

    return summarize

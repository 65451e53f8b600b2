"""The initial context of an edit run (DESIGN §5.2), as one pure function.

Order is stable → volatile so a provider's prompt cache can reuse the prefix (DESIGN §11): the rules and the root
context come first and hold nothing about this file or this run, then the repository's rules files (their own order is
repository-wide, per folder, per file: agent.rules_files); everything from `Instance:` on is per file (the
file's history and summary change rarely), then the date (daily), with the target text and the selection last
(they change with every edit).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from datetime import UTC, datetime

from nagent_lsp.core.limits import INLINE_LIMIT

OPEN_TAG = "<initial_context>"
CLOSE_TAG = "</initial_context>"


@dataclass(frozen=True)
class InstanceFacts:
    target_path: str
    file_id: str
    conversation: str
    workspace_root: str | None = None
    state_root: str | None = None
    date: str = ""
    os: str = ""
    invocation: str = "user"  # "user" | "delegated"
    parent_conversation: str | None = None
    extra: tuple[tuple[str, str], ...] = field(default=())  # more "- key: value" environment lines

    @classmethod
    def gather(cls, **values: object) -> InstanceFacts:
        """Facts with today's UTC date and this machine's OS filled in (the only impure part)."""
        values.setdefault("date", datetime.now(UTC).strftime("%Y-%m-%d"))
        values.setdefault("os", platform.platform())
        return cls(**values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Selection:
    text: str
    start_line: int  # 0-based, as LSP positions
    start_character: int
    end_line: int
    end_character: int


def build_initial_context(  # noqa: PLR0913  2026-11-27: one keyword-only option per block of the initial context
    rules: str,
    root_context: str,
    facts: InstanceFacts,
    *,
    file_history: str = "",
    file_summary: str = "",
    selection: Selection | None = None,
    target_text: str | None = None,
    target_version: int | None = None,
    agent: tuple[str, str] | None = None,
    rules_files: str = "",
    tools: str = "",
) -> str:
    """`agent`: (name, instructions) of the run's agent (DESIGN §10), shown as an `{agent}` block. `rules_files`: the
    repository's rules files as rendered `{rules}` blocks (agent.rules_files), after the root context: the user's own
    context keeps its place first."""
    parts: list[str] = []
    if rules.strip():
        parts.append(_neutral(rules.strip()))
    if root_context.strip():
        heading = "Root context (from the user's and the project's .nagent/context files):"
        parts.append(heading + "\n" + _neutral(root_context.strip()))
    if rules_files.strip():
        parts.append(_neutral(rules_files.strip()))
    if agent is not None and agent[1].strip():
        parts.append(_block("agent", _neutral(agent[1].strip()), f'name="{agent[0]}"'))
    parts.append(_instance(facts))
    if tools.strip():  # the MCP tools of the run (agent.mcp_tools.McpTools.describe); stable across its turns
        parts.append(_wrapped("mcp-tools", _neutral(tools.strip())))
    if file_history.strip():
        parts.append(_wrapped("file-history", _neutral(file_history.strip())))
    if file_summary.strip():
        parts.append(_wrapped("file-summary", _neutral(file_summary.strip())))
    if facts.date:
        parts.append(f"Today's date (UTC): {facts.date}")  # volatile: after everything a prompt cache can reuse
    if facts.target_path:  # the main conversation has no target file to show
        parts.append(_target(facts.target_path, target_text, target_version))
    if selection is not None:
        parts.append(_selection(facts.target_path, selection))
    return f"{OPEN_TAG}\n" + "\n\n".join(parts) + f"\n{CLOSE_TAG}"


def _instance(facts: InstanceFacts) -> str:
    lines = [
        "Instance:",
        f"- invocation: {facts.invocation}",
        f"- conversation: {facts.conversation}",
        f"- parent conversation: {facts.parent_conversation or 'none'}",
        f"- file id: {facts.file_id or 'unknown'}",
        # issue 24: an empty target_path is the workspace's main conversation (no file-edit target)
        f"- file-edit target: {facts.target_path}"
        if facts.target_path
        else f"- main conversation of {facts.workspace_root or 'the workspace'} (no file-edit target)",
        "Environment:",
        f"- workspace root: {facts.workspace_root or 'none'}",
    ]
    if facts.state_root:
        lines.append(f"- state root: {facts.state_root}")
    if facts.os:
        lines.append(f"- os: {facts.os}")
    lines.extend(f"- {key}: {value}" for key, value in facts.extra)
    return "\n".join(lines)


def _target(path: str, text: str | None, version: int | None) -> str:
    read = f'<nagent-read path="{path}"/>'
    if text is None:
        return _block("target-file", f"The text of {path} is not included; read it with {read}.")
    size = len(text.encode("utf-8"))
    if size > INLINE_LIMIT:
        return _block(
            "target-file",
            f"{path} is {size} bytes, over the {INLINE_LIMIT // 1024} KiB shown inline, so its text is not here. "
            f'Use <nagent-file-read path="{path}"/> to get it as split segments, change the segment files with '
            '<nagent-write>, then merge them into the target with <nagent-file-patch index="..."/>.',
        )
    if CLOSE_TAG in text:
        # Inlining would end this block early when the conversation is parsed back.
        return _block(
            "target-file", f"{path} contains this block's closing tag, so it is not inlined; read it with {read}."
        )
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    version_attr = f" version={version}" if version is not None else ""
    newline_attr = "" if not text or text.endswith("\n") else " final_newline=no"
    header = (
        f'path="{path}" bytes={size} lines={lines}{version_attr}{newline_attr}'
        " (the editor's current text, unsaved edits included)"
    )
    return _block("target-file", text, header)


def _selection(path: str, sel: Selection) -> str:
    where = (
        f"lines {sel.start_line + 1}-{sel.end_line + 1} "
        f"(from line {sel.start_line + 1} column {sel.start_character + 1} "
        f"to line {sel.end_line + 1} column {sel.end_character + 1}) of {path}"
    )
    if CLOSE_TAG in sel.text:
        return _block("selection", f'The user selected {where}; read that range with <nagent-read path="{path}"/>.')
    return _block("selection", sel.text, f"{where}; the request is about this range")


def _block(name: str, body: str, header: str = "") -> str:
    opening = "{" + name + (" " + header if header else "") + "}"
    # The closing marker always starts a line; a text without a final newline gets one added here.
    return f"{opening}\n{body if body.endswith(chr(10)) else body + chr(10)}{{/{name}}}"


def _wrapped(name: str, text: str) -> str:
    # The history and summary producers may hand over their block already wrapped.
    return text if text.startswith("{" + name) else _block(name, text)


def _neutral(text: str) -> str:
    return text.replace(CLOSE_TAG, "</initial_context >")

"""Text the model reads: the tag protocol rules, and the notes the server appends after a turn.

The correction notes never quote the offending text back: echoing a leaked tag teaches the
model to write it again.
"""

from __future__ import annotations

from .parser import Fabrication, ParsedReply, ReplyError
from .tool import TOOL_RULE

MAX_ATTEMPTS = 3


def _size(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} bytes"


def protocol_rules(read_limit: int = 65536) -> str:
    """The tag list and protocol rules for the initial context (no trailing newline)."""
    limit = _size(read_limit)
    return f"""\
Your reply must consist only of the following tags, one action each:
<nagent-response>text</nagent-response> — your answer to the user; a reply holding only answers ends the run.
<nagent-read path="PATH"/> — ask for a file's text (files up to {limit}).
<nagent-file-read path="PATH"/> — ask for a file of any size: up to {limit} it comes inline, above that it is split into numbered segment files listed with their line ranges.
<nagent-file-patch index="INDEX"/> — merge edited segment files of a split back into their source file (INDEX is the index.json path from the split result).
<nagent-write path="PATH">complete new content</nagent-write> — replace the whole content of a file you are allowed to edit.
<nagent-replace path="PATH">SEARCH/REPLACE blocks</nagent-replace> — change some lines of a file you are allowed to edit, in place (format below); any size of file, no split needed.
<nagent-shell>command</nagent-shell> — run one shell command (only if the user permits it).
{TOOL_RULE}
<nagent-next>prompt</nagent-next> — give yourself a follow-up prompt and take another turn.
<nagent-conversation>task</nagent-conversation> — hand a self-contained task to a fresh child conversation and get its answer back.
<nagent-conversation conversation-file="NAME">task</nagent-conversation> — same, in the named child conversation (reused if it exists).
<nagent-conversation conversation-name="SAVED">task</nagent-conversation> — same, starting from a copy of a saved conversation.

Protocol rules:
- A tag body is raw text: write code exactly as it should appear, with no escaping. The first matching close tag ends the body, so a body cannot contain its own close tag.
- In <nagent-write>, one newline right after the opening tag is not part of the content; everything else up to </nagent-write> is, including the final newline.
- Attribute values go in double quotes. Write &quot; for a double quote and &amp; for an ampersand inside a value.
- Text outside the tags (explanations, reasoning, markdown, other tags) is discarded and costs a correction; put everything meant for the user inside <nagent-response>.
- A known tag that is malformed (unclosed, wrong or missing attribute) rejects the whole reply and you will be asked again.
- Tags run in the order you write them. Write each action once; repeated identical actions are merged.
- Results come back in the next message as <nagent-read-result>, <nagent-file-read-result>, <nagent-file-patch-result>, <nagent-write-result>, <nagent-shell-result>, <nagent-tool-result> and <nagent-conversation-result> blocks. Only the server writes those blocks: never write one yourself, and never guess what a result will say. Anything that depends on a result belongs in a later reply.
- A result block whose body contains its own close tag carries body_chars="N": its body is exactly the next N characters after the opening line.
- An error result is information, not a reason to stop: read it and change approach.

Which files you may write:
- The target file always (and the segment files of its split). Unless the session is limited to the target, you may also write any other file inside the workspace folders and create new files there (folders are created as needed); files are never deleted. Secrets, the .git and .nagent folders and anything outside the workspace are refused, and the write result says why.
- Every write is staged: nothing reaches the disk or the editor until the run ends, and reading a file you wrote gives back your staged text. At the end all changed files are applied together as one change, or shown to the user for review.
- Change another file only when the request, or what you find while doing it, requires it (a caller of a function you renamed, a test of behaviour you changed). The co-edit table in the file history says which files usually change together: it tells you what to inspect, not what to edit.

Changing part of a file with <nagent-replace>:
<nagent-replace path="PATH">
<<<<<<< SEARCH
the lines to change, copied exactly from the file
=======
the lines to put in their place
>>>>>>> REPLACE
</nagent-replace>
- Prefer <nagent-replace> to <nagent-write> for small changes, above all in large files: you write only the changed lines, not the whole file. Use <nagent-write> for a new file or to rewrite most of one.
- Each SEARCH part must match exactly one place: copy whole lines exactly as they are now (after your earlier changes), with just enough neighbouring lines to be unique. An empty REPLACE part deletes the lines.
- One tag may hold several blocks; they apply in order. If any block does not match, none of them is applied and the error result shows the closest lines: correct that block and send the whole tag again."""


def format_error_note(error: ReplyError) -> str:
    return (
        f"Your last reply was rejected and nothing in it ran: {error.message} "
        f"(at offset {error.offset}). Reply again using only well-formed protocol tags."
    )


def no_tags_note() -> str:
    return (
        "Your last reply contained no protocol tags, so nothing ran. Reply with protocol tags only; "
        "put any answer for the user in <nagent-response>."
    )


def fabrication_note(fabrication: Fabrication) -> str:
    dropped = (
        f" The {fabrication.dropped} tag(s) after it were discarded without running." if fabrication.dropped else ""
    )
    return (
        f"You wrote a <{fabrication.tag}> block at the start of a line. Only the server writes that "
        f"block, after it has really run an action, so your reply was cut there.{dropped} "
        "Write the action tag and stop: its real result will follow."
    )


def truncation_note(reason: str | None) -> str:
    why = f" (stop reason: {reason})" if reason else ""
    return (
        f"Your last reply hit the model's output limit and was cut off{why}. This is a length limit, "
        "not a format error: continue with smaller steps, e.g. one file or segment per reply."
    )


def ignored_note(count: int) -> str:
    return (
        f"{count} non-protocol item(s) in your last reply were ignored. "
        "Reply with protocol tags only; nothing outside them is read."
    )


def duplicates_note(count: int) -> str:
    return f"{count} repeated identical action(s) in your last reply were merged. Write each action once."


def correction(parsed: ParsedReply, truncated: str | None = None) -> str | None:
    """The note for a reply that cannot be accepted (None when it can).

    ``truncated``: the provider's stop reason when the reply hit the output cap.
    Precedence: fabrication, then truncation, then the format error, then "no tags".
    """
    if parsed.accepted:
        return None
    if parsed.fabrication is not None:
        return fabrication_note(parsed.fabrication)
    if truncated is not None:
        return truncation_note(truncated)
    if parsed.error is not None:
        return format_error_note(parsed.error)
    if parsed.ignored:
        return ignored_note(len(parsed.ignored)) + " Your reply ran no action."
    return no_tags_note()


def advisories(parsed: ParsedReply, truncated: str | None = None) -> list[str]:
    """Notes to append after an accepted reply (the reply itself runs)."""
    notes: list[str] = []
    if parsed.fabrication is not None:
        notes.append(fabrication_note(parsed.fabrication))
    if truncated is not None:
        notes.append(truncation_note(truncated))
    if parsed.ignored:
        notes.append(ignored_note(len(parsed.ignored)))
    if parsed.duplicates:
        notes.append(duplicates_note(parsed.duplicates))
    return notes


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def read_back(path: str, *, sentence: bool = False) -> str:
    """How the model reads a sidecar the server kept under outputs/ (reads there are always allowed)."""
    return f'{"R" if sentence else "r"}ead it with <nagent-read path="{_attr(path)}"/> only if you need it.'


def raw_reply_note(path: str) -> str:
    """After an accepted reply that the conversation records cleaned (its prose or junk stripped)."""
    return (
        f"Your reply as written is kept in {path}; this conversation records only its protocol tags. "
        f"{read_back(path, sentence=True)}"
    )


def rejected_note(note: str, attempt: int, kept: str, attempts: int = MAX_ATTEMPTS) -> str:
    """A correction for a rejected attempt: what was wrong, which attempt it was, and where its text is."""
    return (
        f"{note} (Attempt {attempt} of {attempts}.) The rejected reply is kept in {kept}, not in this "
        f"conversation; {read_back(kept)}"
    )


def provider_error_note(error: str, attempt: int, attempts: int = MAX_ATTEMPTS) -> str:
    return f"Model provider error on attempt {attempt} of {attempts}: {error}"


def exhausted_message(provider_error: bool, attempts: int = MAX_ATTEMPTS) -> str:
    """The run's error when every attempt of a turn failed; nothing is applied."""
    if provider_error:
        return f"The model provider failed {attempts} times in a row; the run stopped and nothing was applied."
    return f"The model's reply was still malformed after {attempts} attempts; the run stopped and nothing was applied."

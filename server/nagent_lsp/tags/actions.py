"""The actions a model may emit (nagent's eight and <nagent-replace>), as typed values.

Each action knows its canonical tag form (``to_tag``) so a reply that had junk or duplicates
removed can be recorded as exactly what will run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from nagent_lsp.text.search_replace import Block, render_blocks

from .lexer import escape_attr
from .tool import Tool


@dataclass(frozen=True)
class Response:
    """Final text for the user; a turn made only of responses ends the run."""

    text: str
    tag: ClassVar[str] = "nagent-response"

    def to_tag(self) -> str:
        return f"<{self.tag}>{self.text}</{self.tag}>"


@dataclass(frozen=True)
class Read:
    """Read a file inline (up to the read limit)."""

    path: str
    tag: ClassVar[str] = "nagent-read"

    def to_tag(self) -> str:
        return f'<{self.tag} path="{escape_attr(self.path)}" />'


@dataclass(frozen=True)
class FileRead:
    """Read a file inline, or split it into segments when it is larger than the read limit."""

    path: str
    tag: ClassVar[str] = "nagent-file-read"

    def to_tag(self) -> str:
        return f'<{self.tag} path="{escape_attr(self.path)}" />'


@dataclass(frozen=True)
class FilePatch:
    """Merge edited split segments (named by their index.json) back into the source."""

    index: str
    tag: ClassVar[str] = "nagent-file-patch"

    def to_tag(self) -> str:
        return f'<{self.tag} index="{escape_attr(self.index)}" />'


@dataclass(frozen=True)
class Write:
    """Replace a file's whole content.

    ``content`` is the body with one newline directly after the open tag dropped (the
    HTML ``<textarea>`` rule), so the natural multi-line form does not add a blank first line.
    """

    path: str
    content: str
    tag: ClassVar[str] = "nagent-write"

    def to_tag(self) -> str:
        # Always emit the newline the parser drops, so a content starting with "\n" survives.
        return f'<{self.tag} path="{escape_attr(self.path)}">\n{self.content}</{self.tag}>'


@dataclass(frozen=True)
class Replace:
    """Change a file in place with SEARCH/REPLACE blocks (DESIGN §11): every block applies, or none does."""

    path: str
    blocks: tuple[Block, ...]
    tag: ClassVar[str] = "nagent-replace"

    def to_tag(self) -> str:
        return f'<{self.tag} path="{escape_attr(self.path)}">\n{render_blocks(self.blocks)}</{self.tag}>'


@dataclass(frozen=True)
class Shell:
    """Run a shell command (subject to the shell permission)."""

    command: str
    tag: ClassVar[str] = "nagent-shell"

    def to_tag(self) -> str:
        return f"<{self.tag}>{self.command}</{self.tag}>"


@dataclass(frozen=True)
class Next:
    """Queue a prompt to itself and continue with another turn."""

    prompt: str
    tag: ClassVar[str] = "nagent-next"

    def to_tag(self) -> str:
        return f"<{self.tag}>{self.prompt}</{self.tag}>"


@dataclass(frozen=True)
class Conversation:
    """Run a child conversation synchronously; at most one of file / name is set."""

    prompt: str
    conversation_file: str | None = None
    conversation_name: str | None = None
    tag: ClassVar[str] = "nagent-conversation"

    def to_tag(self) -> str:
        attr = ""
        if self.conversation_file is not None:
            attr = f' conversation-file="{escape_attr(self.conversation_file)}"'
        elif self.conversation_name is not None:
            attr = f' conversation-name="{escape_attr(self.conversation_name)}"'
        return f"<{self.tag}{attr}>{self.prompt}</{self.tag}>"


Action = Response | Read | FileRead | FilePatch | Write | Replace | Shell | Tool | Next | Conversation

#: Tag name -> action class, in the order the protocol rules list them.
ACTION_TYPES: dict[str, type] = {
    cls.tag: cls for cls in (Response, Read, FileRead, FilePatch, Write, Replace, Shell, Tool, Next, Conversation)
}
KNOWN_TAGS = frozenset(ACTION_TYPES)

"""`<nagent-tool name="SERVER/TOOL">{json arguments}</nagent-tool>` (issue 24): a call of an MCP server's tool.

The tag is parsed here for its shape only (a `name` attribute, a body); what the name and the JSON mean is checked
when it runs (agent.mcp_tools.parse_call), so a wrong name or bad JSON is a result the model reads and corrects, not
a rejected reply. Its result is `<nagent-tool-result name="SERVER/TOOL">`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .lexer import Element, TagSyntaxError, escape_attr

TOOL_TAG = "nagent-tool"
TOOL_RULE = (
    '<nagent-tool name="SERVER/TOOL">{"argument": "value"}</nagent-tool> — call a tool of an MCP server, when the '
    "initial context lists MCP tools, with a JSON object of arguments (only if the user permits it)."
)


@dataclass(frozen=True)
class Tool:
    """Call the MCP tool `name` ("SERVER/TOOL") with `arguments` (the raw JSON body)."""

    name: str
    arguments: str
    tag: ClassVar[str] = TOOL_TAG

    def to_tag(self) -> str:
        return f'<{self.tag} name="{escape_attr(self.name)}">{self.arguments}</{self.tag}>'


def tool_action(el: Element) -> Tool:
    """A parsed `<nagent-tool>` element as its action; `TagSyntaxError` naming what is wrong with its shape."""
    attrs = dict(el.attrs)
    if el.body is None:
        raise TagSyntaxError(
            f'<{TOOL_TAG}> needs a body: <{TOOL_TAG} name="SERVER/TOOL">{{...}}</{TOOL_TAG}>', el.start
        )
    if list(attrs) != ["name"]:
        raise TagSyntaxError(f'<{TOOL_TAG}> needs exactly one attribute, name="SERVER/TOOL"', el.start)
    if not attrs["name"].strip():
        raise TagSyntaxError(f"<{TOOL_TAG}> has an empty name", el.start)
    return Tool(attrs["name"].strip(), el.body.strip())

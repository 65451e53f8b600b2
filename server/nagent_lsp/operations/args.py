"""The argument of every command (DESIGN §4), as typed objects: the field names are the contract's camelCase
names, a field with a default is optional. The LSP edge parses the JSON object into these with
`config.parse_args.parse_args` (InvalidParams naming the field); the CLI builds them directly. Light on purpose:
importing this module imports neither git nor openai.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class NoArgs:
    """`nagent.status`, `nagent.conversation.list`: `{}` or nothing."""


@attrs.frozen
class UriArgs:
    """`nagent.summarize`, `nagent.conversation.open|clear|summarize`."""

    uri: str


@attrs.frozen
class NamedArgs:
    """`nagent.conversation.save|load`."""

    uri: str
    name: str


@attrs.frozen
class CompactArgs:
    uri: str
    instruction: str | None = None


@attrs.frozen
class EditArgs:
    uri: str
    request: str
    range: dict | None = None  # {start: {line, character}, end: {line, character}}, checked by the edit
    preview: bool | None = None
    agent: str | None = None  # DESIGN §10: an agent's name (`nagent.agents.list`); None: the built-in `edit`
    profile: str | None = None  # a model profile (`models`) for this one request, over the agent's and `model`


@attrs.frozen
class InstructionArgs:
    """`nagent.instruction.apply`: the `nagent:` comment on a 0-based line is the request."""

    uri: str
    line: int
    agent: str | None = None  # overrides the agent a `nagent(AGENT):` comment names
    profile: str | None = None  # a model profile for this one request


@attrs.frozen
class HistoryArgs:
    uri: str
    maxCommits: int | None = None


@attrs.frozen
class CoeditsArgs:
    uri: str
    limit: int | None = None


@attrs.frozen
class SplitArgs:
    uri: str
    targetBytes: int | None = None
    natural: bool = False


@attrs.frozen
class PatchArgs:
    indexPath: str
    force: bool = False
    dryRun: bool = False


@attrs.frozen
class ListArgs:
    """`nagent.agents.list`, `nagent.recipes.list`: `uri` picks the workspace (its state root); optional."""

    uri: str | None = None


@attrs.frozen
class RecipeArgs:
    """`nagent.recipe.run`."""

    uri: str
    recipe: str
    request: str | None = None
    range: dict | None = None
    preview: bool | None = None
    profile: str | None = None  # a model profile for this one request: the model of steps that name none


@attrs.frozen
class SendArgs:
    """`nagent.conversation.send`: `uri` is a conversation file (or its source file); the draft typed after the
    conversation's last record is the request, run as `nagent.edit` on the source file."""

    uri: str
    agent: str | None = None
    profile: str | None = None
    preview: bool | None = None


@attrs.frozen
class ReviewIdArgs:
    """`nagent.review.show`."""

    id: str


@attrs.frozen
class ReviewApplyArgs:
    """`nagent.review.apply`: `accept` omitted = every pending hunk; the hunks not accepted are rejected, or stay
    pending with `rest: "keep"` (the per-hunk "accept this change")."""

    id: str
    accept: list[str] | None = None
    rest: Literal["reject", "keep"] = "reject"


@attrs.frozen
class ReviewDiscardArgs:
    """`nagent.review.discard`: every pending hunk, or only `hunks` (the rest stay pending)."""

    id: str
    hunks: list[str] | None = None


@attrs.frozen
class TrustStatusArgs:
    """`nagent.trust.status`, `nagent.trust.revoke`: `uri` picks the state root (its file's); omitted: the first
    workspace folder's."""

    uri: str | None = None


@attrs.frozen
class TrustArgs:
    """`nagent.trust`: `hash` (optional) trusts only if the definitions still have the hash the user was shown."""

    uri: str | None = None
    hash: str | None = None


@attrs.frozen
class AttributionArgs:
    """`nagent.attribution.at`: the line (0-based, in the buffer as it is now) of a document."""

    uri: str
    line: int

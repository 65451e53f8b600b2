"""Agents for a run and `nagent.agents.list` (DESIGN §10).

An agent is found by name among the built-ins, `~/.nagent/agents/` and the workspace's `<state root>/agents/` (a
workspace agent never takes the name of a built-in or a user agent: it is listed with `shadowed: true`); its
rules become the run's `Policy` (agent.permissions), its model, temperature and maxSteps the run's settings, its
instructions the `{agent}` block of the initial context. A bad agent file is reported once (a warning in the log,
and in `problems` of the list) and never stops a run that does not use it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar, cast

import attrs

from nagent_lsp.agent.permissions import Permissions, Policy, Rule
from nagent_lsp.config.agent_definitions import BUILTIN, Agent, ConfigFileError, Loaded, Shadowed, load_agents
from nagent_lsp.config.parse_args import file_argument
from nagent_lsp.config.settings import Settings
from nagent_lsp.config.state_root import home_root
from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.llm.models import model_settings
from nagent_lsp.operations.args import ListArgs
from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")
DEFAULT_AGENT = "edit"
T = TypeVar("T")


def workspace_state_root(session: Session, uri: str | None, field: str = "uri") -> Path | None:
    """The state root whose agents/recipes apply: the file's (`uri`), else the first workspace folder's."""
    if uri:
        return session.state_root(file_argument(uri, field)).path
    return session.state_root(None).path if session.workspace_folders else None


def report_once(session: Session, problems: list[ConfigFileError]) -> None:
    """Each bad file's problem is logged once per server (and returned by the list commands every time)."""
    for problem in problems:
        key = f"config-file:{problem}"
        if key not in session.reported:
            session.reported.add(key)
            log.warning("%s", problem)


def agents_of(session: Session, state_root: Path | None) -> Loaded[Agent]:
    loaded = load_agents(home_root(), state_root)
    report_once(session, loaded.problems)
    report_shadowed(session, loaded.shadowed)
    return loaded


def report_shadowed(session: Session, shadowed: Sequence[Shadowed[T]]) -> None:
    for entry in shadowed:
        key = f"shadowed:{entry}"
        if key not in session.reported:
            session.reported.add(key)
            log.warning("%s", entry)


@attrs.frozen
class AgentEntry:
    """An agent as listed: `source` is builtin, user or workspace; `path` its file (none for a built-in);
    `shadowed` for a workspace agent that lost its name to a built-in or the user's own (listed, never used)."""

    name: str
    description: str
    source: str
    path: str | None = None
    shadowed: bool = False

    @classmethod
    def of(cls, agent: Agent, shadowed: bool = False) -> AgentEntry:
        return cls(agent.name, agent.description, agent.source, agent.path or None, shadowed)


@attrs.frozen
class AgentList:
    """The `nagent.agents.list` result; `problems`: one message per agent file that does not load or is shadowed."""

    agents: list[AgentEntry]
    problems: list[str]


def list_agents(session: Session, args: ListArgs) -> AgentList:
    loaded = agents_of(session, workspace_state_root(session, args.uri))
    listed = [AgentEntry.of(agent) for agent in loaded.items.values()]
    listed += [AgentEntry.of(entry.item, shadowed=True) for entry in loaded.shadowed if entry.item is not None]
    return AgentList(listed, loaded.notices())


def find_agent(session: Session, state_root: Path | None, name: str | None, field: str = "agent") -> Agent:
    """The agent `name` (None: the built-in `edit`), or InvalidArgument naming the field: an unknown name, or a
    file of that name that does not load (its problem: the run never falls back to other rules than the file's,
    nor to a workspace agent the user's broken file shadows)."""
    if not name:
        return BUILTIN[DEFAULT_AGENT]
    loaded = agents_of(session, state_root)
    if name in loaded.blocking:
        raise InvalidArgument(field, f"agent '{name}' cannot be used: {loaded.blocking[name]}")
    if name in loaded.items:
        return loaded.items[name]
    raise InvalidArgument(field, f"unknown agent '{name}' (known agents: {', '.join(sorted(loaded.items))})")


def policy_of(agent: Agent) -> Policy:
    rules = cast(dict[str, Rule], dict(agent.permissions))  # values checked when the file was read
    return Policy(agent=agent.name, permissions=Permissions(rules), trusted=agent.trusted)


def run_settings(settings: Settings, agent: Agent) -> Settings:
    """The settings a run with `agent` uses: its model (a profile or a raw id) over `model`, then its temperature
    and maxSteps."""
    resolved = model_settings(settings, agent.model)
    if agent.temperature is None and agent.maxSteps is None:
        return resolved
    return attrs.evolve(
        resolved,
        temperature=agent.temperature if agent.temperature is not None else resolved.temperature,
        maxSteps=agent.maxSteps if agent.maxSteps is not None else resolved.maxSteps,
    )


def applies_nothing(agent: Agent) -> bool:
    """An agent whose writes are denied outright (`plan`, `explain`, any `write: deny`): its run delivers no
    change, not even the removal of the `nagent(...)` comment that started it."""
    return agent.permissions.get("write") == "deny"

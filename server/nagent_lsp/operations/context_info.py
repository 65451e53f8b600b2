"""The layers of a file's initial context, listed (`nagent-lsp context FILE`, `nagent.status`) and rendered for a run:
the user's and the project's root context (agent.context_layers), then the repository's rules files
(agent.rules_files), each with the file it comes from and its size."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import attrs

from nagent_lsp.agent.context_layers import default_layer_dirs, layer_source, load_layers
from nagent_lsp.agent.rules_files import RulesFiles, collect, enabled_conventions, render
from nagent_lsp.operations.buffers import read_rules
from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")


@attrs.frozen
class ContextLayer:
    """One layer of the initial context, in the order the model sees them. `kind`: `userContext`, `projectContext`
    (`~/.nagent/context.*`, `<state root>/context.*`) or a rules-file convention (`agentsMd`, `claudeMd`,
    `claudeRules`, `copilot`); `label` names it as its block does (a rules file's repository-relative path);
    `source` the file's absolute path; `bytes` its size; `scope` where it applies (`user`, `project`, `repository`,
    `folder`, `file`); `globs` a scoped rules file's `paths:`/`applyTo` globs and `matched` the one the file matched;
    `truncated`/`omitted` when the rules files' total cap cut it or left it out; `text` only when asked for."""

    kind: str
    label: str
    source: str
    bytes: int
    scope: str
    globs: list[str] = attrs.Factory(list)
    matched: str | None = None
    truncated: bool = False
    omitted: bool = False
    text: str | None = None


@attrs.frozen
class ContextLayers:
    """`nagent-lsp context FILE --json`: the target, its layers and one line per rules file that was skipped."""

    target: str
    layers: list[ContextLayer]
    problems: list[str]


def rules_files_for(session: Session, target: Path, *, all_scoped: bool = False) -> RulesFiles:
    """The rules files the user's settings leave on, for `target` (a file, or a workspace folder)."""
    enabled = enabled_conventions(session.settings.rulesFiles)
    if not enabled:
        return RulesFiles()
    return collect(target, read_rules(session, target), enabled, all_scoped=all_scoped)


def rules_context(session: Session, target: Path) -> str:
    """The `{rules}` blocks of a run's initial context; a skipped file is logged, naming it."""
    found = rules_files_for(session, target)
    for problem in found.problems:
        log.warning("rules file %s", problem)
    return render(found.files)


def context_layers(
    session: Session, target: Path, *, with_text: bool = False, all_scoped: bool = False
) -> ContextLayers:
    """Every layer of `target`'s initial context before the file's own facts (for a folder: the workspace's, every
    scoped rules file listed with its globs)."""
    layers: list[ContextLayer] = []
    home = (Path(os.path.expanduser("~")) / ".nagent").resolve()
    for layer in load_layers(default_layer_dirs(session.state_root(target).path)):
        user = layer.directory == home
        source = layer_source(layer.directory)
        layers.append(
            ContextLayer(
                kind="userContext" if user else "projectContext",
                label="user context" if user else "project context",
                source=str(source or layer.directory),
                bytes=len(layer.text.encode("utf-8")),
                scope="user" if user else "project",
                text=layer.text if with_text else None,
            )
        )
    found = rules_files_for(session, target, all_scoped=all_scoped)
    for item in found.files:
        layers.append(
            ContextLayer(
                kind=item.convention,
                label=item.source,
                source=str(item.path),
                bytes=item.size,
                scope=item.scope,
                globs=list(item.globs),
                matched=item.matched,
                truncated=item.truncated,
                omitted=item.omitted,
                text=item.text if with_text else None,
            )
        )
    return ContextLayers(str(target), layers, list(found.problems))

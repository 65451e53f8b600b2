"""Server-wide state the operations share: resolved settings, workspace folders, and the long-lived stores and
history services (one per state root / repository, so their locks and caches are shared by every request).

Plain Python: the LSP layer and the CLI both build one and feed it settings sources.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from nagent_lsp.config.settings import SettingError, Settings, load_settings
from nagent_lsp.config.state_root import STATE_DIR, StateRoot, git_toplevel, resolve_state_root
from nagent_lsp.core.secret_env import claim
from nagent_lsp.store.root import ensure_root

if TYPE_CHECKING:  # built on first use, so a server or CLI that never needs them does not import them
    from nagent_lsp.history.service import HistoryEvent, HistoryService
    from nagent_lsp.store.conversations import ConversationStore
    from nagent_lsp.store.proposals import ProposalIndex

    HistoryListener = Callable[[HistoryService, HistoryEvent], None]

log = logging.getLogger("nagent_lsp")
K = TypeVar("K")
V = TypeVar("V")


@dataclass
class Session:
    workspace_folders: list[Path] = field(default_factory=list)
    init_options: Mapping[str, object] | None = None
    workspace_config: Mapping[str, object] | None = None
    environ: Mapping[str, str] | None = None  # None: the process's own, with its held key variables
    settings: Settings = field(default_factory=Settings)
    config_sources: tuple[str, ...] = ("defaults",)
    setting_origins: Mapping[str, str] = field(default_factory=dict)  # flat key -> the source of its value
    conversation_stores: dict[str, ConversationStore] = field(default_factory=dict)
    history_services: dict[tuple[str, str], HistoryService] = field(default_factory=dict)
    # told of every history service's build progress (the LSP layer turns it into $/progress)
    history_listeners: list[HistoryListener] = field(default_factory=list)
    reported: set[str] = field(default_factory=set)
    proposal_indexes: dict[str, ProposalIndex] = field(default_factory=dict)
    # every state root resolved this session, in order (proposals of nested repositories live in theirs)
    used_state_roots: dict[Path, None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reload(self) -> tuple[SettingError, ...]:
        """Re-read every settings source; returns the problems not returned before (each is reported once)."""
        repo_root = resolve_state_root(None, self.workspace_folders, None) if self.workspace_folders else None
        resolved = load_settings(
            repo_config=(repo_root.path / "config.json") if repo_root and repo_root.kind != "home" else None,
            init_options=self.init_options,
            workspace_config=self.workspace_config,
            environ=self.environ,
        )
        self.settings = resolved.settings
        self.config_sources = resolved.sources
        self.setting_origins = resolved.origins
        if self.environ is None:
            # The variable apiKeyEnv names is a secret from now on, whatever its name: out of os.environ, so no
            # subprocess inherits it; settings and the model still read it (core.secret_env.process_environ).
            claim(self.settings.apiKeyEnv)
        fresh = tuple(p for p in resolved.problems if str(p) not in self.reported)
        self.reported.update(str(p) for p in fresh)
        return fresh

    def state_root(self, target: Path | None = None) -> StateRoot:
        root = resolve_state_root(target, self.workspace_folders, self.settings.stateRoot)
        if root.path not in self.used_state_roots:
            with self._lock:
                self.used_state_roots.setdefault(root.path, None)
        return root

    def state_roots_used(self) -> list[Path]:
        with self._lock:
            return list(self.used_state_roots)

    def state_dir(self, target: Path | None = None, *parts: str) -> Path:
        """The state root for `target` (created on first use), or a folder inside it."""
        return ensure_root(self.state_root(target).path).joinpath(*parts)

    def api_key(self) -> str | None:
        return self.settings.api_key(self.environ)

    def conversation_store(self, root: Path) -> ConversationStore:
        """The one store of a state root (shared, so its run locks serialise every command on a file)."""
        from nagent_lsp.store.conversations import ConversationStore

        def make() -> ConversationStore:
            # A repository's own `.nagent/` shares conversations through its manifest; a root the user set, a
            # workspace's or ~/.nagent keeps today's local-only behaviour.
            top = git_toplevel(str(root.parent)) if root.name == STATE_DIR and not self.settings.stateRoot else None
            repository = root.parent if top is not None and Path(top) == root.parent else None
            return ConversationStore(
                root,
                repository=repository,
                share=lambda: self.settings.conversation.share,
                former_names=self._former_names,
            )

        return self._shared(self.conversation_stores, str(root), make)

    def _former_names(self, path: Path) -> list[str]:
        """Every repository-relative name git's history gives the file at `path` (the first page follows renames,
        or the index once built), for the conversation store's manifest lookup: how a clone whose manifest names
        `calc.py` finds the conversation of `calc2.py`. [] when git cannot tell (the file gets a new conversation).
        The store asks only for a file its caller already confined to the read rules."""
        top = git_toplevel(str(path.parent))
        if top is None:
            return []
        root = Path(os.path.realpath(top))
        try:
            rel = Path(os.path.realpath(path)).relative_to(root).as_posix()
            service = self.history_service(root, self.state_dir(path, "cache"))
            service.prepare(False)  # a persisted index if there is one; never a full build just for this
            entry = service.entry(rel, self.settings.history)
        except (ValueError, OSError, RuntimeError) as exc:  # GitError is a RuntimeError
            log.warning("cannot follow git renames of %s to find its conversation: %s", path, exc)
            return []
        return [] if entry is None else sorted(os.fsdecode(name) for name in entry.names)

    def proposal_index(self, root: Path) -> ProposalIndex:
        """The one index of a state root's pending proposals (store/proposals.py), loaded on first use."""
        from nagent_lsp.store.proposals import ProposalIndex

        return self._shared(self.proposal_indexes, str(root), lambda: ProposalIndex(root))

    def history_service(self, root: Path, cache_dir: Path) -> HistoryService:
        """One history service (index, caches, background worker) per (repository, cache folder)."""
        from nagent_lsp.history.service import HistoryService

        def make() -> HistoryService:
            service = HistoryService(root, cache_dir)
            for listener in self.history_listeners:
                service.add_listener(listener)
            return service

        return self._shared(self.history_services, (str(root), str(cache_dir)), make)

    def history_service_of(self, root: Path) -> HistoryService | None:
        """The service already serving repository `root` (the most recent one), without creating any."""
        with self._lock:
            found = [s for (r, _), s in self.history_services.items() if r == str(root)]
        return found[-1] if found else None

    def _shared(self, registry: dict[K, V], key: K, factory: Callable[[], V]) -> V:
        with self._lock:
            existing = registry.get(key)
            if existing is None:
                existing = registry[key] = factory()
            return existing

"""Server-wide state that workflows share: resolved settings, workspace folders, per-root services.

Plain Python: the LSP layer and the CLI both build one and feed it settings sources.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from nagent_lsp import settings as settings_mod
from nagent_lsp.settings import Settings, SettingError
from nagent_lsp.state import StateRoot, resolve_state_root

T = TypeVar("T")


@dataclass
class Session:
    workspace_folders: list[Path] = field(default_factory=list)
    init_options: Mapping[str, Any] | None = None
    workspace_config: Mapping[str, Any] | None = None
    environ: Mapping[str, str] | None = None
    settings: Settings = field(default_factory=Settings)
    config_sources: tuple[str, ...] = ("defaults",)
    _services: dict[tuple[str, str], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def reload(self) -> tuple[SettingError, ...]:
        """Re-read every settings source; returns the problems found (the caller reports new ones)."""
        repo_root = resolve_state_root(None, self.workspace_folders, None) if self.workspace_folders else None
        resolved = settings_mod.load(
            repo_config=(repo_root.path / "config.json") if repo_root and repo_root.kind != "home" else None,
            init_options=self.init_options,
            workspace_config=self.workspace_config,
            environ=self.environ,
        )
        self.settings = resolved.settings
        self.config_sources = resolved.sources
        return resolved.problems

    def state_root(self, target: Path | None = None) -> StateRoot:
        return resolve_state_root(target, self.workspace_folders, self.settings.stateRoot)

    def service(self, kind: str, key: str, factory: Callable[[], T]) -> T:
        """One long-lived service per (kind, key), e.g. a history index per repository."""
        with self._lock:
            existing = self._services.get((kind, key))
            if existing is None:
                existing = self._services[(kind, key)] = factory()
            return existing

    def services(self, kind: str) -> list[Any]:
        with self._lock:
            return [v for (k, _), v in self._services.items() if k == kind]

"""Root context layers (DESIGN §5.2): `~/.nagent/context.*` then `<repo>/.nagent/context.*`.

A layer directory holds `context.yaml` (a list of files to include, or `{paths: [...]}`) or else `context.md`
(included as is). Listed paths are relative to the layer directory; a listed `context.yaml` is expanded in
turn. Files listed twice, cycles, missing and unreadable files are skipped: a broken context never stops a run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

YAML_NAME = "context.yaml"
MARKDOWN_NAME = "context.md"


@dataclass(frozen=True)
class Layer:
    directory: Path
    text: str


def yaml_paths(text: str) -> list[str]:
    """The entries of a context.yaml: a top-level list, or the list under `paths`; anything else → none."""
    import yaml  # only workspaces with a context.yaml pay for importing it

    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    if isinstance(data, dict):
        data = data.get("paths")
    if not isinstance(data, list):
        return []
    return [str(item) for item in data if item is not None and not isinstance(item, (dict, list))]


def load_layer(directory: Path) -> str:
    """The context text of one layer directory, stripped ("" when it has none)."""
    directory = Path(directory)
    yaml_file = directory / YAML_NAME
    if yaml_file.is_file():
        seen: set[Path] = set()
        return "\n".join(p for p in _expand(yaml_file.resolve(), directory, seen) if p).strip()
    md_file = directory / MARKDOWN_NAME
    if md_file.is_file():
        return (_read(md_file) or "").strip()
    return ""


def _expand(yaml_file: Path, layer_dir: Path, seen: set[Path]) -> list[str]:
    seen.add(yaml_file)
    text = _read(yaml_file)
    if text is None:
        return []
    parts: list[str] = []
    for item in yaml_paths(text):
        candidate = Path(os.path.expanduser(item))
        # Relative to the layer directory even inside a nested context.yaml (as nagent does).
        path = (candidate if candidate.is_absolute() else layer_dir / candidate).resolve()
        if path in seen or not path.is_file():
            continue
        if path.name == YAML_NAME:
            parts.extend(_expand(path, layer_dir, seen))
            continue
        seen.add(path)
        content = _read(path)
        if content:
            parts.append(content)
    return parts


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def default_layer_dirs(project_dir: Path | None, home: Path | None = None) -> list[Path]:
    """User layer (`~/.nagent`) then the project's state root (`<repo>/.nagent`)."""
    user = (home if home is not None else Path(os.path.expanduser("~"))) / ".nagent"
    return [user] + ([Path(project_dir)] if project_dir is not None else [])


def load_layers(directories: Iterable[Path]) -> list[Layer]:
    """Every non-empty layer in order; a directory equal to an earlier one is skipped (context once)."""
    layers: list[Layer] = []
    seen: set[Path] = set()
    for directory in directories:
        resolved = Path(directory).expanduser().resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        text = load_layer(resolved)
        if text:
            layers.append(Layer(resolved, text))
    return layers


def root_context(directories: Iterable[Path]) -> str:
    """All layers' text joined by a blank line, ready for the initial context."""
    return "\n\n".join(layer.text for layer in load_layers(directories))


def layer_source(directory: Path) -> Path | None:
    """The file a layer directory's context comes from (`context.yaml` wins over `context.md`), for listings."""
    for name in (YAML_NAME, MARKDOWN_NAME):
        if (Path(directory) / name).is_file():
            return Path(directory) / name
    return None

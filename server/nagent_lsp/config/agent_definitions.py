"""Agents (DESIGN §10): Markdown files with YAML front matter, read and validated; the built-in ones.

`~/.nagent/agents/NAME.md` (source `user`) and `<state root>/agents/NAME.md` (source `workspace`). A user agent
may replace a built-in one of the same name; a workspace agent (a repository's file) never replaces a built-in or
a user agent: it is listed as shadowed (DESIGN §12, "trust the user, not the repository"), and even when it is used
it can only narrow the settings. Front matter: `description` (required), `model?` (a profile or a raw model
id), `temperature?`, `maxSteps?`, `permissions?` (a tool — read, write, shell, conversation — mapped to
allow/ask/deny or to an ordered map of glob → allow/ask/deny, `"*"` the fallback) and Magent's `mode?` (accepted,
unused). The body is the agent's instructions. A bad file is one problem naming the file and the field; it never
stops the others from loading.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

import attrs
import cattrs

from nagent_lsp.config.convert import UNKNOWN, Between, converter, problems

AGENT_SUFFIX = ".md"
MAX_AGENT_BYTES = 256 * 1024
PERMISSION_VALUES = ("allow", "ask", "deny")
PERMISSION_TOOLS = ("read", "write", "shell", "conversation")
Source = Literal["builtin", "user", "workspace"]
# A tool's rule: one value, or (glob, value) pairs in the order written.
Rule = str | tuple[tuple[str, str], ...]
T = TypeVar("T")


class ConfigFileError(ValueError):
    """A bad agent or recipe file: the message names the file, the step (recipes) and the field."""

    def __init__(self, path: Path | str, message: str, field: str = "", step: str = ""):
        where = str(path) + (f": step '{step}'" if step else "") + (f": field '{field}'" if field else "")
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.field = field
        self.step = step


@attrs.frozen
class FrontMatter:
    description: str
    model: str | None = None
    temperature: Annotated[float, Between(0, 2)] | None = None
    maxSteps: Annotated[int, Between(1, 1000)] | None = None
    mode: str | None = None  # Magent's primary/subagent: accepted so a Magent file loads unchanged; unused


@attrs.frozen
class Agent:
    name: str
    description: str
    source: Source
    path: str | None = None
    instructions: str = ""
    model: str | None = None
    temperature: float | None = None
    maxSteps: int | None = None
    permissions: Mapping[str, Rule] = attrs.field(factory=dict)

    @property
    def trusted(self) -> bool:
        """Built-in and user agents may widen the settings; a workspace agent (a repository's file) only narrows."""
        return self.source != "workspace"

    def listed(self, shadowed: bool = False) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "description": self.description, "source": self.source}
        if self.path:
            entry["path"] = self.path
        entry["shadowed"] = shadowed
        return entry


@attrs.frozen
class Shadowed(Generic[T]):
    """A workspace definition that lost a name clash to the user's own (or a built-in one): listed, never used."""

    kind: str  # "agent" | "recipe"
    name: str
    path: str  # the workspace file
    by: str | None  # the user's file; None: the built-in one
    by_loads: bool = True  # False: the user's file of that name is broken (the run refuses, never falls back)
    item: T | None = None  # the workspace definition itself (None when it did not load)

    def __str__(self) -> str:
        if self.by is None:
            return f"workspace {self.kind} '{self.name}' ({self.path}) is shadowed by the built-in one"
        broken = "" if self.by_loads else ", which does not load"
        return f"workspace {self.kind} '{self.name}' ({self.path}) is shadowed by your own ({self.by}){broken}"


@attrs.frozen
class Loaded(Generic[T]):
    """Agents or recipes by name, what failed to load, and the workspace definitions the user's own shadow."""

    items: dict[str, T]
    problems: list[ConfigFileError]
    shadowed: list[Shadowed[T]]
    blocking: dict[str, ConfigFileError]  # a name whose effective file does not load: its problem

    def notices(self) -> list[str]:
        return [str(p) for p in self.problems] + [str(s) for s in self.shadowed]


BUILTIN: dict[str, Agent] = {
    "edit": Agent("edit", "Change the file as asked (the default agent).", "builtin"),
    "plan": Agent(
        "plan",
        "Answer with a plan for the change; writes and shell commands are denied, nothing is applied.",
        "builtin",
        instructions=(
            "You are planning, not editing. Do not write or change any file and do not run commands: both are "
            "denied in this session. Read what you need, then answer in <nagent-response> with a concrete plan: "
            "the steps in order, the files and functions each step changes, and the risks or open questions."
        ),
        permissions={"write": "deny", "shell": "deny"},
    ),
    "explain": Agent(
        "explain",
        "Explain the code or answer a question about it; read-only.",
        "builtin",
        instructions=(
            "You are explaining, not editing. Do not write or change any file and do not run commands: both are "
            "denied in this session. Read what you need, then answer the question in <nagent-response>, naming "
            "the functions and lines you refer to."
        ),
        permissions={"write": "deny", "shell": "deny"},
    ),
}


def split_front_matter(text: str, path: Path | str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a Markdown file that starts with `---` … `---`; ConfigFileError when malformed."""
    import yaml  # only agents pay for PyYAML

    stripped = text.lstrip("\ufeff")
    lines = stripped.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ConfigFileError(path, "expected YAML front matter: the file must start with a line '---'", "front matter")
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise ConfigFileError(path, "the front matter is never closed by a line '---'", "front matter")
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise ConfigFileError(path, f"malformed YAML{where}: {problem}", "front matter") from None
    if not isinstance(data, dict):
        raise ConfigFileError(path, "the front matter must be a mapping of fields", "front matter")
    return data, "".join(lines[end + 1 :]).strip("\n")


def parse_permissions(raw: object, path: Path | str, prefix: str = "permissions") -> dict[str, Rule]:
    """`permissions` as tool → value or ordered (glob, value) pairs; errors name the tool and the pattern."""
    if not isinstance(raw, dict):
        raise ConfigFileError(path, "expected a mapping of tool to allow/ask/deny", prefix)
    rules: dict[str, Rule] = {}
    for tool, rule in raw.items():
        field = f"{prefix}.{tool}"
        if tool not in PERMISSION_TOOLS:
            raise ConfigFileError(path, f"unknown tool (expected one of {', '.join(PERMISSION_TOOLS)})", field)
        if isinstance(rule, str):
            rules[tool] = _value(rule, path, field)
        elif isinstance(rule, dict) and rule:
            pairs = []
            for pattern, value in rule.items():
                if not isinstance(pattern, str) or not pattern:
                    raise ConfigFileError(path, "a pattern must be a non-empty string", field)
                pairs.append((pattern, _value(value, path, f"{field}.{pattern}")))
            rules[tool] = tuple(pairs)
        else:
            raise ConfigFileError(path, "expected allow, ask, deny or a mapping of pattern to one of them", field)
    return rules


def _value(value: object, path: Path | str, field: str) -> str:
    if value not in PERMISSION_VALUES:
        shown = repr(value) if isinstance(value, (str, int, float, bool)) or value is None else type(value).__name__
        raise ConfigFileError(path, f"expected allow, ask or deny, got {shown}", field)
    return str(value)


def parse_agent(text: str, path: Path, source: Source) -> Agent:
    data, body = split_front_matter(text, path)
    permissions = parse_permissions(data.pop("permissions"), path) if "permissions" in data else {}
    try:
        front = converter.structure(data, FrontMatter)
    except cattrs.BaseValidationError as exc:
        field, message = next(iter(problems(exc)))
        if message == UNKNOWN:
            known = ", ".join(["description", "model", "temperature", "maxSteps", "permissions", "mode"])
            message = f"unknown field (expected {known})"
        raise ConfigFileError(path, message, field) from None
    return Agent(
        name=path.stem,
        description=front.description,
        source=source,
        path=str(path),
        instructions=body,
        model=front.model,
        temperature=front.temperature,
        maxSteps=front.maxSteps,
        permissions=permissions,
    )


def agent_dirs(home_root: Path, state_root: Path | None) -> list[tuple[Source, Path]]:
    """Where agents are looked for, the user's first; the state root counts as the workspace only when it is not
    the home root itself."""
    dirs: list[tuple[Source, Path]] = [("user", home_root / "agents")]
    if state_root is not None and _real(state_root) != _real(home_root):
        dirs.append(("workspace", state_root / "agents"))
    return dirs


def load_definitions(
    kind: str,
    dirs: list[tuple[Source, Path]],
    suffixes: tuple[str, ...],
    name_of: Callable[[Path], str],
    parse: Callable[[Path, Source], T],
    builtin: Mapping[str, T],
) -> Loaded[T]:
    """Built-ins, then the user's files (which may replace a built-in), then the workspace's, which never take a
    name the built-ins or the user's files hold (broken or not): those are listed as shadowed."""
    items: dict[str, T] = dict(builtin)
    problems: list[ConfigFileError] = []
    shadowed: list[Shadowed[T]] = []
    blocking: dict[str, ConfigFileError] = {}
    owned: dict[str, tuple[str | None, bool]] = {name: (None, True) for name in builtin}  # name -> (path, loads)
    for source, folder in dirs:
        files = config_files(folder, suffixes)
        if source == "workspace" and files and not _inside(_real(folder), _real(folder.parent)):
            problems.append(
                ConfigFileError(folder, "is a symbolic link out of the state root: its files are not loaded")
            )
            continue
        problems += skipped_files(kind, folder, suffixes)  # nothing in the folder vanishes without a word
        seen: dict[str, Path] = {}
        for path in files:
            name = name_of(path)
            if name in seen:  # `tests.json` beside `tests.yaml`: the first (by name) is the one used
                problems.append(ConfigFileError(path, f"is not used: {seen[name].name} defines {kind} '{name}' too"))
                continue
            seen[name] = path
            if source == "workspace" and name in owned:
                by, loads = owned[name]
                item: T | None = None
                try:
                    item = parse(path, source)
                except ConfigFileError:
                    pass
                shadowed.append(Shadowed(kind, name, str(path), by, loads, item))
                continue
            try:
                items[name] = parse(path, source)
            except ConfigFileError as exc:
                problems.append(exc)
                blocking.setdefault(name, exc)
                if source == "user":  # the run refuses (blocking); a workspace file of its name is no fallback
                    owned[name] = (str(path), False)
                continue
            if source == "user":
                owned[name] = (str(path), True)
    return Loaded(items, problems, shadowed, blocking)


def load_agents(home_root: Path, state_root: Path | None) -> Loaded[Agent]:
    """Every agent by name (built-ins, the user's files, then the workspace's) and the problems of the bad files."""

    def parse(path: Path, source: Source) -> Agent:
        return parse_agent(read_config_text(path), path, source)

    return load_definitions(
        "agent", agent_dirs(home_root, state_root), (AGENT_SUFFIX,), lambda p: p.stem, parse, BUILTIN
    )


def skipped_files(kind: str, folder: Path, suffixes: tuple[str, ...]) -> list[ConfigFileError]:
    """A problem for each entry of `folder` that looks meant as a definition but is not loaded (issue 25: broken
    files must not vanish from the pickers): a file without one of `suffixes`, a symbolic link, a folder that
    cannot be read. Hidden files (`.gitkeep`, editor swap files) and subfolders are left alone."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [ConfigFileError(folder, f"cannot be read ({exc.strerror or exc}): no {kind} of it is loaded")]
    found = []
    wanted = " or ".join(suffixes)
    for entry in entries:
        if entry.name.startswith(".") or entry.is_dir(follow_symlinks=False):
            continue
        if entry.is_symlink():
            found.append(ConfigFileError(entry.path, "is a symbolic link, not loaded: only regular files are read"))
        elif not entry.name.endswith(suffixes):
            found.append(ConfigFileError(entry.path, f"is not loaded: {kind} files end in {wanted}"))
        elif not entry.is_file(follow_symlinks=False):
            found.append(ConfigFileError(entry.path, f"is not a regular file: not loaded as a {kind}"))
    return found


def config_files(folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The regular files of `folder` with one of `suffixes`, sorted by name (none when the folder is missing)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []
    return [
        Path(e.path)
        for e in entries
        if e.name.endswith(suffixes) and not e.name.startswith(".") and e.is_file(follow_symlinks=False)
    ]


def read_config_text(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_AGENT_BYTES + 1)
    except OSError as exc:
        raise ConfigFileError(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_AGENT_BYTES:
        raise ConfigFileError(path, f"is larger than {MAX_AGENT_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigFileError(path, "is not UTF-8 text") from None


def _real(path: Path) -> str:
    return os.path.realpath(path)


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

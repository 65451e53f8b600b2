"""Recipes (DESIGN §10): AGENTS.md step chains in YAML or JSON, read and validated.

`~/.nagent/recipes/NAME.{yaml,yml,json}` (source `user`) and `<state root>/recipes/…` (source `workspace`; the
user's recipe of a name always wins, and a workspace recipe's command steps run only once the user trusts the
repository's definitions, operations.trust):

    description: what it does                  # required
    models:                                    # optional, AGENTS.md style: profiles for this recipe only
      - {name: local, model: qwen2.5-coder, baseUrl: "http://127.0.0.1:11434/v1", params: {temperature: 0.1}}
    steps:                                     # required, run in order
      - step: draft                            # its name, for results and errors
        inputs: [selection, userRequest]       # what its template may use
        outputs: {tests: string}               # exactly one variable: string, number or json
        model: local                           # or modelRef; a profile (the recipe's, else settings.models)
        systemPrompt: "Write tests for {{selection}} ({{userRequest}})"
      - step: run
        inputs: [tests]
        outputs: {result: string}
        command: [python, -c, "{{tests}}"]     # argv, no shell: a value is always exactly one argument

Every problem is a `ConfigFileError` naming the file, the step and the field; a bad file never stops the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from nagent_lsp.config.agent_definitions import (
    ConfigFileError,
    Loaded,
    Source,
    agent_dirs,
    load_definitions,
    read_config_text,
)
from nagent_lsp.config.settings import ModelProfile

RECIPE_SUFFIXES = (".yaml", ".yml", ".json")
RESERVED = ("userRequest", "file", "fileText", "selection", "fileHistory", "coedits")
OUTPUT_KINDS = ("string", "number", "json")
VARIABLE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
OutputKind = Literal["string", "number", "json"]


@attrs.frozen
class Step:
    name: str
    inputs: tuple[str, ...]
    output: str
    kind: OutputKind
    model: str | None = None  # a profile name (checked when the recipe is loaded and again when it runs)
    system_prompt: str | None = None
    command: tuple[str, ...] | None = None

    @property
    def is_command(self) -> bool:
        return self.command is not None


@attrs.frozen
class Recipe:
    name: str
    description: str
    source: Source
    path: str
    steps: tuple[Step, ...]
    models: Mapping[str, ModelProfile] = attrs.field(factory=dict)

    @property
    def trusted(self) -> bool:
        """The user's own (or built-in): its profiles may use the user's key. A workspace recipe's never do, even
        once the user trusts the repository (that trust is about its command steps: operations.trust)."""
        return self.source != "workspace"

    @property
    def has_commands(self) -> bool:
        return any(s.is_command for s in self.steps)

    @property
    def needs_request(self) -> bool:
        return any("userRequest" in s.inputs for s in self.steps)


def variables_in(template: str) -> list[str]:
    return [m.group(1) for m in VARIABLE.finditer(template)]


def substitute(template: str, values: Mapping[str, str]) -> str:
    """`{{var}}` replaced by its value; nothing else is interpreted (no filters, no expressions)."""
    return VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def parse_recipe(text: str, path: Path, source: Source, known_profiles: Collection[str] = ()) -> Recipe:
    data = _load(text, path)
    if not isinstance(data, dict):
        raise ConfigFileError(path, "a recipe must be a mapping with description and steps")
    _no_unknown(data, ("description", "models", "steps", "name"), path, "")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ConfigFileError(path, "required: a non-empty string", "description")
    models = _models(data.get("models"), path)
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise ConfigFileError(path, "required: a non-empty list of steps", "steps")
    known = set(RESERVED)
    steps: list[Step] = []
    for i, raw in enumerate(raw_steps):
        step = _step(raw, i, path, known, {*models, *known_profiles})
        known.add(step.output)  # later values win: a later step may redefine a variable
        steps.append(step)
    return Recipe(recipe_name(path), description.strip(), source, str(path), tuple(steps), models)


def _load(text: str, path: Path) -> Any:
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigFileError(path, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    import yaml  # only recipes pay for PyYAML

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigFileError(path, f"malformed YAML{where}: {getattr(exc, 'problem', None) or exc}") from None


def _no_unknown(data: Mapping[str, Any], allowed: tuple[str, ...], path: Path, step: str) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigFileError(path, f"unknown field (expected {', '.join(allowed)})", str(key), step)


def _models(raw: object, path: Path) -> dict[str, ModelProfile]:
    """AGENTS.md's `models` list of {name, model, baseUrl?, apiKeyEnv?, provider?, params?}; params may hold
    temperature and maxOutputTokens (or max_tokens)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ConfigFileError(path, "expected a list of {name, model, baseUrl?, params?}", "models")
    profiles: dict[str, ModelProfile] = {}
    for i, entry in enumerate(raw):
        field = f"models.{i}"
        if not isinstance(entry, dict):
            raise ConfigFileError(path, "expected {name, model, baseUrl?, params?}", field)
        _no_unknown(entry, ("name", "model", "baseUrl", "apiKeyEnv", "provider", "params"), path, "")
        name, model = entry.get("name"), entry.get("model")
        if not isinstance(name, str) or not name:
            raise ConfigFileError(path, "required: a non-empty string", f"{field}.name")
        if not isinstance(model, str) or not model:
            raise ConfigFileError(path, "required: a non-empty string", f"{field}.model")
        params = entry.get("params") or {}
        if not isinstance(params, dict):
            raise ConfigFileError(path, "expected a mapping", f"{field}.params")
        temperature = params.get("temperature")
        max_tokens = params.get("maxOutputTokens", params.get("max_tokens"))
        if temperature is not None and (not _number(temperature) or not 0 <= temperature <= 2):
            raise ConfigFileError(path, "expected a number from 0 to 2", f"{field}.params.temperature")
        if max_tokens is not None and (not _number(max_tokens) or int(max_tokens) != max_tokens or max_tokens < 1):
            raise ConfigFileError(path, "expected a whole number of at least 1", f"{field}.params.maxOutputTokens")
        for key in ("baseUrl", "apiKeyEnv"):
            if entry.get(key) is not None and not isinstance(entry[key], str):
                raise ConfigFileError(path, "expected a string", f"{field}.{key}")
        profiles[name] = ModelProfile(
            model=model,
            baseUrl=entry.get("baseUrl") or None,
            apiKeyEnv=entry.get("apiKeyEnv") or None,
            temperature=float(temperature) if temperature is not None else None,
            maxOutputTokens=int(max_tokens) if max_tokens is not None else None,
        )
    return profiles


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _step(raw: object, index: int, path: Path, known: set[str], profiles: set[str]) -> Step:  # noqa: C901, PLR0912, PLR0915  2026-11-27: one field-named problem per step field, in the file's order
    if not isinstance(raw, dict):
        raise ConfigFileError(path, f"step {index + 1} must be a mapping", f"steps.{index}")
    name = raw.get("step")
    if not isinstance(name, str) or not name.strip():
        raise ConfigFileError(path, f"step {index + 1} needs a name: a non-empty string", f"steps.{index}.step")
    allowed = ("step", "inputs", "outputs", "model", "modelRef", "systemPrompt", "command", "description")
    _no_unknown(raw, allowed, path, name)
    inputs = raw.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(v, str) and v for v in inputs):
        raise ConfigFileError(path, "expected a list of variable names", "inputs", name)
    for variable in inputs:
        if variable not in known:
            raise ConfigFileError(
                path,
                f"unknown variable '{variable}': neither reserved ({', '.join(RESERVED)}) nor an output of an "
                "earlier step",
                "inputs",
                name,
            )
    outputs = raw.get("outputs")
    if outputs is None:
        raise ConfigFileError(
            path, "required: exactly one output variable, {NAME: string|number|json}", "outputs", name
        )
    if not isinstance(outputs, dict) or len(outputs) != 1:
        count = len(outputs) if isinstance(outputs, dict) else 0
        raise ConfigFileError(path, f"a step produces exactly one variable, this one declares {count}", "outputs", name)
    ((output, kind),) = outputs.items()
    if not isinstance(output, str) or not NAME.match(output):
        raise ConfigFileError(path, "the output's name must be a variable name (letters, digits, _)", "outputs", name)
    if kind not in OUTPUT_KINDS:
        raise ConfigFileError(path, f"expected string, number or json, got {kind!r}", f"outputs.{output}", name)
    if "model" in raw and "modelRef" in raw:
        raise ConfigFileError(path, "give model or modelRef, not both", "modelRef", name)
    model_field = "modelRef" if "modelRef" in raw else "model"
    model = raw.get(model_field)
    if model is not None:
        if not isinstance(model, str) or not model:
            raise ConfigFileError(path, "expected the name of a model profile", model_field, name)
        if profiles and model not in profiles:
            raise ConfigFileError(
                path,
                f"unknown model profile '{model}' (known: {', '.join(sorted(profiles))})",
                model_field,
                name,
            )
        if not profiles:
            raise ConfigFileError(
                path, f"unknown model profile '{model}' (no models here or in settings.models)", model_field, name
            )
    has_prompt, has_command = "systemPrompt" in raw, "command" in raw
    if has_prompt == has_command:
        raise ConfigFileError(path, "a step has either a systemPrompt (LLM step) or a command, not both or neither",
                              "systemPrompt" if has_prompt else "command", name)  # fmt: skip
    templates: list[tuple[str, str]]
    if has_prompt:
        prompt = raw["systemPrompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigFileError(path, "expected a non-empty string", "systemPrompt", name)
        templates = [("systemPrompt", prompt)]
        command = None
    else:
        argv = raw["command"]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv) or not argv[0]:
            raise ConfigFileError(path, "expected a list of arguments (argv, run without a shell)", "command", name)
        if model is not None:
            raise ConfigFileError(path, "a command step takes no model", model_field, name)
        templates = [(f"command.{i}", a) for i, a in enumerate(argv)]
        command, prompt = tuple(argv), None
    for field, template in templates:
        for variable in variables_in(template):
            if variable not in inputs:
                raise ConfigFileError(
                    path, f"unknown variable '{{{{{variable}}}}}': not listed in this step's inputs", field, name
                )
    return Step(name.strip(), tuple(inputs), output, kind, model, prompt, command)


def recipe_name(path: Path) -> str:
    return path.name.rsplit(".", 1)[0]


def load_recipes(home_root: Path, state_root: Path | None, known_profiles: Collection[str] = ()) -> Loaded[Recipe]:
    """Every recipe by name (the user's files, then the workspace's, which never take a name the user's hold: those
    are listed as shadowed) and the bad files' problems."""

    def parse(path: Path, source: Source) -> Recipe:
        return parse_recipe(read_config_text(path), path, source, known_profiles)

    dirs = [(source, folder.parent / "recipes") for source, folder in agent_dirs(home_root, state_root)]
    return load_definitions("recipe", dirs, RECIPE_SUFFIXES, recipe_name, parse, {})

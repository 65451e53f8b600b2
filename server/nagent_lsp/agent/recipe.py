"""Running a recipe (DESIGN §10, AGENTS.md step chains): linear steps, one output variable each, a flat namespace.

An LLM step sends its `systemPrompt` (with `{{var}}` substituted) as one model call on its model profile; a command
step runs its argv template — no shell: each argument is quoted, so a value is always exactly one argument — under
the `shell` permission, `shellTimeout` and the same isolation as the model's `<nagent-shell>` (agent.shell); its
combined output (capped, the rest spilled to outputs/) is the value. A denied, timed-out or failed step ends the run
with that reason; the steps before it keep their outputs. The operation records the run in the conversation
(`record`) and delivers `fileText` when it changed.
"""

from __future__ import annotations

import asyncio
import json
import math
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs

from nagent_lsp.agent.permissions import Asker, ShellPermission
from nagent_lsp.agent.shell import run_shell
from nagent_lsp.config.recipe_definitions import Recipe, Step, substitute
from nagent_lsp.config.settings import Settings
from nagent_lsp.core.errors import UserError
from nagent_lsp.core.model import Message, ModelError
from nagent_lsp.core.ports import ChatModel
from nagent_lsp.llm.models import configured_model, model_settings
from nagent_lsp.llm.tokens import Tokens
from nagent_lsp.tags.transcript import render_block

NO_KEY_ENV = "NAGENT_RECIPE_NO_KEY"  # never set: a workspace recipe's own endpoint gets no API key


@dataclass
class RecipeRun:
    """What a recipe run needs from the operation: reserved inputs, settings, where commands run, the editor."""

    recipe: Recipe
    values: dict[str, Any]  # the reserved inputs (userRequest, file, fileText, selection, fileHistory, coedits)
    settings: Settings
    environ: Mapping[str, str] | None
    cwd: Path
    outputs_dir: Path
    port: Asker
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    secrets: tuple[str, ...] = ()
    report: Callable[[str], None] = lambda message: None
    shell: ShellPermission = field(default_factory=ShellPermission)
    tokens: Tokens = field(default_factory=Tokens)
    model_for: Callable[[Settings], ChatModel] | None = None  # tests and the CLI may inject; default: the adapter
    # The user trusts the definitions of the repository this (workspace) recipe comes from (operations.trust
    # decides): without it a workspace recipe's command steps never run. Off unless the caller checked.
    repository_trusted: bool = False


@dataclass
class StepRecord:
    step: Step
    value: Any = None
    text: str = ""  # the value as the conversation shows it
    model: str | None = None
    command: str | None = None
    exit_code: int | None = None
    error: str | None = None


@dataclass
class RecipeOutcome:
    outputs: dict[str, Any] = field(default_factory=dict)  # every step's variable, later values winning
    records: list[StepRecord] = field(default_factory=list)
    reason: str | None = None  # why the run ended early (a denied or timed-out command, a bad value…)
    cancelled: bool = False


class StepFailed(Exception):
    pass


def as_text(value: Any) -> str:
    """A value as a template and the conversation see it: strings as they are, numbers plainly, json as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def converted(step: Step, text: str) -> Any:
    """The step's raw text as its declared type, or StepFailed saying what was wrong."""
    if step.kind == "string":
        return text
    stripped = _unfenced(text).strip()
    if step.kind == "number":
        try:
            number = float(stripped)
        except ValueError:
            raise StepFailed(
                f"output '{step.output}' is declared number, but the step produced {len(stripped)} characters "
                "that are not a number"
            ) from None
        if not math.isfinite(number):
            raise StepFailed(f"output '{step.output}' is declared number, but the step produced {stripped[:20]}")
        return int(number) if number.is_integer() and "." not in stripped and "e" not in stripped.lower() else number
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise StepFailed(
            f"output '{step.output}' is declared json, but the step's output is not JSON ({exc.msg})"
        ) from None


def _unfenced(text: str) -> str:
    """A model's reply without one surrounding Markdown code fence (```lang … ```), which models add unasked."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3]
    return text


async def run_recipe(run: RecipeRun) -> RecipeOutcome:
    """Runs the steps in order. A workspace recipe with command steps the caller did not clear is refused before
    any step (UserError): the operation checks trust first (operations.trust); this is the second lock."""
    recipe = run.recipe
    if recipe.source == "workspace" and recipe.has_commands and not run.repository_trusted:
        raise UserError(
            f"recipe '{recipe.name}' comes from this repository ({recipe.path}) and has command steps; they run "
            "only once you trust this repository's nagent definitions"
        )
    outcome = RecipeOutcome()
    namespace: dict[str, Any] = dict(run.values)
    for number, step in enumerate(run.recipe.steps, 1):
        if run.cancel.is_set():
            outcome.cancelled, outcome.reason = True, "cancelled"
            break
        record = StepRecord(step)
        outcome.records.append(record)
        kind = "command" if step.is_command else "LLM"
        run.report(f"step {number}/{len(run.recipe.steps)}: {step.name} ({kind})")
        strings = {name: as_text(namespace[name]) for name in step.inputs if name in namespace}
        try:
            if step.is_command:
                text = await _command(run, step, strings, record)
            else:
                text = await _llm(run, step, strings, record)
            record.value = converted(step, text)
        except StepFailed as exc:
            record.error = str(exc)
            outcome.reason = f"step '{step.name}': {exc}"
            outcome.cancelled = run.cancel.is_set()
            break
        except (ModelError, UserError) as exc:
            record.error = str(exc)
            outcome.reason = f"step '{step.name}': {exc}"
            break
        record.text = as_text(record.value) if step.kind != "string" else text
        namespace[step.output] = record.value
        outcome.outputs[step.output] = record.value
    return outcome


def step_settings(run: RecipeRun, step: Step) -> Settings:
    """The step's model: its profile (the recipe's own, else settings.models), or the settings' `model`. A profile
    of a workspace recipe (a repository's file) that names its own endpoint gets no API key: a cloned repository
    must not be able to send the user's key to a server of its choosing."""
    recipe = run.recipe
    where = f"{recipe.path}: step '{step.name}': field 'model': "
    resolved = model_settings(run.settings, step.model, recipe.models, strict=step.model is not None, where=where)
    own = recipe.models.get(step.model or "")
    if not recipe.trusted and own is not None and own.baseUrl and own.baseUrl != run.settings.baseUrl:
        resolved = attrs.evolve(resolved, apiKeyEnv=NO_KEY_ENV)
    return resolved


def step_price(run: RecipeRun, step: Step) -> tuple[float, float] | None:
    """The step's profile price (per million tokens, input and output), when its profile has one."""
    name = step.model or run.settings.model
    profile = run.recipe.models.get(name) or run.settings.models.get(name)
    return (profile.price.input, profile.price.output) if profile is not None and profile.price else None


async def _llm(run: RecipeRun, step: Step, strings: Mapping[str, str], record: StepRecord) -> str:
    settings = step_settings(run, step)
    record.model = settings.model
    model = run.model_for(settings) if run.model_for is not None else configured_model(settings, run.environ)
    prompt = substitute(step.system_prompt or "", strings)
    ask = f"Produce the value of `{step.output}` ({step.kind}) now. Reply with the value only, no commentary."
    if step.output == "fileText":
        ask = "Reply with the complete new text of the file only: no code fences, no commentary."
    try:
        reply = await model.complete([Message("system", prompt), Message("user", ask)], cancel=run.cancel)
    finally:
        await model.aclose()
    run.tokens.add_priced(reply.usage, step_price(run, step))
    return _unfenced(reply.text) if step.kind == "string" else reply.text


async def _command(run: RecipeRun, step: Step, strings: Mapping[str, str], record: StepRecord) -> str:
    argv = [substitute(arg, strings) for arg in step.command or ()]
    command = shlex.join(argv)  # every argument quoted: no expansion, no globbing, no second command
    record.command = command
    decision = await run.shell.decide(run.settings.shell, command, run.port, str(run.cwd))
    if not decision.allowed:
        raise StepFailed(f"command not run: {decision.reason}")
    result = await run_shell(
        command,
        run.cwd,
        run.settings.shellTimeout,
        run.cancel,
        run.outputs_dir,
        hide_env=[run.settings.apiKeyEnv],
        redact=run.secrets,
        isolate=True,
    )
    record.exit_code = result.exit_code
    if result.timed_out:
        raise StepFailed(
            f"command timed out after {result.elapsed:.1f} s (shellTimeout is {run.settings.shellTimeout:g} s)"
        )
    if result.interrupted:
        raise StepFailed("command interrupted (cancelled)")
    if result.exit_code is None:
        raise StepFailed(result.output.strip() or "the command could not be started")
    return result.output


def record_block(recipe: Recipe, outcome: RecipeOutcome, request: str | None) -> str:
    """The `<nagent-recipe-result>` block: the recipe, its status and each step with its output."""
    sections: list[str] = []
    if request:
        sections.append(f"request: {request}")
    for number, record in enumerate(outcome.records, 1):
        step = record.step
        how = f"command: {record.command}" if step.is_command else f"model: {record.model or 'default'}"
        if record.exit_code is not None:
            how += f"; exit code {record.exit_code}"
        header = f'step {number} "{step.name}" ({how}) -> {step.output} ({step.kind})'
        body = f"error: {record.error}" if record.error is not None else record.text.rstrip("\n")
        sections.append(f"{header}:\n{body}")
    attrs_ = {
        "recipe": recipe.name,
        "source": recipe.source,
        "status": "cancelled" if outcome.cancelled else "error" if outcome.reason else "ok",
        "steps": f"{sum(1 for r in outcome.records if r.error is None)}/{len(recipe.steps)}",
        "reason": outcome.reason,
    }
    return render_block("nagent-recipe-result", "\n\n".join(sections) or "(no step ran)", attrs_)

"""`nagent.recipes.list` and `nagent.recipe.run` (DESIGN §10): AGENTS.md step chains on one file.

The user's recipe wins a name clash with the repository's (listed with `shadowed: true`); a repository's recipe
with command steps runs only once the user trusts the repository's definitions (operations.trust), and the list
says so per workspace recipe (`trusted`).

A run fills the reserved inputs from the file (its buffer text, the selection, the `{file-history}` block, the
co-edit table — each computed only when a step lists it), runs the steps (agent.recipe), appends one
`<nagent-recipe-result>` block with every step's output to the file's conversation, and when the last `fileText`
differs from the buffer delivers it as an edit, like `nagent.edit`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import attrs

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.agent.permissions import ShellPermission
from nagent_lsp.agent.recipe import RecipeOutcome, RecipeRun, record_block, run_recipe
from nagent_lsp.config.agent_definitions import Loaded
from nagent_lsp.config.recipe_definitions import Recipe, load_recipes
from nagent_lsp.config.state_root import home_root
from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.core.model import ModelCancelled
from nagent_lsp.core.ports import Buffer, EditorPort, FileChange, Progress
from nagent_lsp.operations.agents import report_once, report_shadowed, workspace_state_root
from nagent_lsp.operations.args import ListArgs, RecipeArgs
from nagent_lsp.operations.buffers import read_rules, read_source_async
from nagent_lsp.operations.conversation import store_for
from nagent_lsp.operations.deliver import RunResult, conversation_record
from nagent_lsp.operations.edit import CONTEXT_TIMEOUT, selection_of, target_path
from nagent_lsp.operations.edit_targets import with_message
from nagent_lsp.operations.profiles import checked_profile
from nagent_lsp.operations.session import Session
from nagent_lsp.operations.trust import repository_trusted, runnable_recipe
from nagent_lsp.store.conversations import ConversationRef
from nagent_lsp.tags.transcript import INTERRUPTED

log = logging.getLogger("nagent_lsp")


def recipes_of(session: Session, state_root: Path | None) -> Loaded[Recipe]:
    loaded = load_recipes(home_root(), state_root, tuple(session.settings.models))
    report_once(session, loaded.problems)
    report_shadowed(session, loaded.shadowed)
    return loaded


@attrs.frozen
class ListedStep:
    step: str
    kind: str  # "command" or "llm"
    output: str
    type: str  # the output's kind: string, number, json


@attrs.frozen
class ListedRecipe:
    """A recipe as `nagent.recipes.list` shows it; `trusted`: false for a repository's recipe whose definitions the
    user does not trust (its command steps do not run); `shadowed`: a repository's recipe the user's own hides."""

    name: str
    description: str
    source: str
    path: str
    steps: list[ListedStep]
    needsRequest: bool
    trusted: bool
    shadowed: bool

    @classmethod
    def of(cls, recipe: Recipe, trusted: bool, shadowed: bool = False) -> ListedRecipe:
        steps = [ListedStep(s.name, "command" if s.is_command else "llm", s.output, s.kind) for s in recipe.steps]
        trusted = trusted or recipe.source != "workspace"  # the user's own and the built-in ones are the user's
        needs = recipe.needs_request
        return cls(recipe.name, recipe.description, recipe.source, recipe.path, steps, needs, trusted, shadowed)


@attrs.frozen
class RecipeList:
    """`nagent.recipes.list`: every recipe, and one message per recipe file that did not load or is shadowed."""

    recipes: list[ListedRecipe]
    problems: list[str]


@attrs.frozen(kw_only=True)
class RecipeResult(RunResult):
    """`nagent.recipe.run`: a run's result, with every step's variable (`outputs`, later values winning)."""

    outputs: dict[str, object]


def list_recipes(session: Session, args: ListArgs) -> RecipeList:
    state_root = workspace_state_root(session, args.uri)
    loaded = recipes_of(session, state_root)
    workspace = [r for r in loaded.items.values() if r.source == "workspace"]
    workspace += [s.item for s in loaded.shadowed if s.item is not None]
    trusted = bool(workspace) and repository_trusted(session, state_root)
    listed = [ListedRecipe.of(r, trusted) for r in loaded.items.values()]
    listed += [ListedRecipe.of(s.item, trusted, shadowed=True) for s in loaded.shadowed if s.item is not None]
    return RecipeList(listed, loaded.notices())


def find_recipe(session: Session, state_root: Path | None, name: str) -> Recipe:
    """The recipe `name`: the user's own when both the user and the repository have one; InvalidArgument when
    unknown or when the file that would run does not load."""
    loaded = recipes_of(session, state_root)
    if name in loaded.blocking:
        raise InvalidArgument("recipe", f"recipe '{name}' cannot be run: {loaded.blocking[name]}")
    if name not in loaded.items:
        known = ", ".join(sorted(loaded.items)) or "none: add ~/.nagent/recipes/NAME.yaml or .nagent/recipes/NAME.yaml"
        raise InvalidArgument("recipe", f"unknown recipe '{name}' (known recipes: {known})")
    return loaded.items[name]


async def run_recipe_command(
    session: Session, port: EditorPort, args: RecipeArgs, finish: Callable[[str], str] | None = None
) -> RecipeResult:
    """`finish` post-processes a delivered `fileText` (the comment path removes its `nagent[RECIPE]:` line)."""
    selection_of("", args.range)  # a malformed range is refused before anything starts
    checked_profile(session.settings, args.profile)
    path = target_path(session, args.uri)
    state_root = session.state_root(path).path
    recipe = find_recipe(session, state_root, args.recipe)
    # Before anything runs (no step, no model call): a repository's command steps need the user's trust.
    recipe = await asyncio.to_thread(runnable_recipe, session, state_root, recipe)
    request = (args.request or "").strip()
    if recipe.needs_request and not request:
        raise InvalidArgument("request", f"recipe '{recipe.name}' uses userRequest: give a request")
    store = store_for(session, path)
    ref = store.resolve(path)
    async with store.lock_for(ref):
        progress = await port.begin_progress(f"nagent: {recipe.name} on {path.name}")
        try:
            result = await _run(session, port, args, recipe, path, store.state_root, ref, request, progress, finish)
            return with_message(result, path.name)
        finally:
            port.end_progress(progress)


async def _run(
    session: Session,
    port: EditorPort,
    args: RecipeArgs,
    recipe: Recipe,
    path: Path,
    state_root: Path,
    ref: ConversationRef,
    request: str,
    progress: Progress,
    finish: Callable[[str], str] | None,
) -> RecipeResult:
    settings = session.settings  # `profile`: the model of every step that names none, for this run
    settings = settings if args.profile is None else attrs.evolve(settings, model=args.profile)
    rules = read_rules(session, path)
    base = await read_source_async(port, path, rules)
    secrets = tuple(filter(None, [settings.api_key(session.environ)]))
    convo = ConversationFile.open(ref.conversation_path, port, secrets, deny_read=settings.denyRead)
    run = RecipeRun(
        recipe=recipe,
        values=await _reserved(session, recipe, path, base.text, args, request),
        settings=settings,
        environ=session.environ,
        cwd=rules.folders[0] if rules.folders else path.parent,
        outputs_dir=state_root / "outputs",
        port=port,
        cancel=progress.cancel,
        secrets=secrets,
        report=lambda message: port.report_progress(progress, message),
        shell=ShellPermission(),
        repository_trusted=True,  # run_recipe_command cleared this recipe (runnable_recipe)
    )
    try:
        outcome = await run_recipe(run)
    except (ModelCancelled, asyncio.CancelledError) as exc:
        convo.append(INTERRUPTED)
        if isinstance(exc, asyncio.CancelledError) and not isinstance(exc, ModelCancelled):
            raise
        outcome = RecipeOutcome(cancelled=True, reason="cancelled")
    convo.append(record_block(recipe, outcome, request or None))
    result = RecipeResult(
        outputs=outcome.outputs,
        response=_response(outcome),
        conversation=conversation_record(ref),
        tokens=run.tokens.counts(),
    )
    if outcome.reason:
        port.end_progress(progress, outcome.reason)
        return attrs.evolve(result, reason=outcome.reason)
    new_text = outcome.outputs.get("fileText")
    if isinstance(new_text, str) and finish is not None:
        new_text = finish(new_text)
    if not isinstance(new_text, str) or new_text == base.text:
        return attrs.evolve(result, reason="no change")
    return await _deliver(session, port, args, recipe, path, state_root, base, new_text, convo, result, progress)


async def _deliver(
    session: Session,
    port: EditorPort,
    args: RecipeArgs,
    recipe: Recipe,
    path: Path,
    state_root: Path,
    base: Buffer,
    new_text: str,
    convo: ConversationFile,
    result: RecipeResult,
    progress: Progress,
) -> RecipeResult:
    """The new `fileText` goes the way of `nagent.edit`'s change (operations.deliver): applied as one change, or
    kept as a proposal awaiting review (`confirmEdits`, `preview`)."""
    from nagent_lsp.operations.deliver import deliver_or_propose

    request = f"recipe {recipe.name}" + (f": {args.request.strip()}" if args.request and args.request.strip() else "")
    changes = [FileChange(path=path, uri=args.uri, base_text=base.text, new_text=new_text, base_version=base.version)]
    preview = args.preview if args.preview is not None else session.settings.confirmEdits
    delivery = await deliver_or_propose(
        session, port, state_root, changes, target=path, request=request, convo=convo,
        conversation=result.conversation, progress=progress, preview=preview,
    )  # fmt: skip
    return result.delivered(delivery)


def _response(outcome: RecipeOutcome) -> str:
    """The last step's output as text (none when it is the file's new text: that is the edit)."""
    done = [r for r in outcome.records if r.error is None]
    return done[-1].text if done and done[-1].step.output != "fileText" else ""


async def _reserved(
    session: Session, recipe: Recipe, path: Path, text: str, args: RecipeArgs, request: str
) -> dict[str, str]:
    """The reserved inputs the recipe's steps list (history and co-edits cost git: computed only when used)."""
    used = {name for step in recipe.steps for name in step.inputs}
    selection = selection_of(text, args.range)
    values = {
        "userRequest": request,
        "file": str(path),
        "fileText": text,
        "selection": selection.text if selection is not None else "",
        "fileHistory": "",
        "coedits": "",
    }
    if "fileHistory" in used:
        values["fileHistory"] = await _bounded(_history, session, path)
    if "coedits" in used:
        values["coedits"] = await _bounded(_coedits, session, path)
    return values


async def _bounded(function: Callable[[Session, Path], str], session: Session, path: Path) -> str:
    try:
        return str(await asyncio.wait_for(asyncio.to_thread(function, session, path), CONTEXT_TIMEOUT))
    except Exception as exc:  # context is a help: a recipe on a file outside git still runs
        log.info("no %s for %s: %s", function.__name__.strip("_"), path, exc)
        return ""


def _history(session: Session, path: Path) -> str:
    from nagent_lsp.operations.history import file_history_block

    return file_history_block(session, path)


def _coedits(session: Session, path: Path) -> str:
    from nagent_lsp.operations.args import CoeditsArgs
    from nagent_lsp.operations.history import coedits_result, render_coedits_text

    return render_coedits_text(coedits_result(session, CoeditsArgs(uri=path.as_uri())))

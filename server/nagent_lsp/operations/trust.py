"""`nagent.trust.status`, `nagent.trust`, `nagent.trust.revoke` and the trust gate of workspace recipes (DESIGN §12).

A repository's nagent definitions (its state root's config.json, context.md|yaml, agents/ and recipes/) come with a
clone: a stranger's input. Until the user trusts them — by their content hash, recorded in the user's own state
(store.trust_records), as direnv does — a workspace recipe's command steps do not run and no workspace recipe is offered
as a code action. Any change to the definitions changes the hash, which revokes the trust; that is reported once.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import attrs

from nagent_lsp.config.agent_definitions import ConfigFileError
from nagent_lsp.config.convert import WIRE_NULL
from nagent_lsp.config.recipe_definitions import Recipe, parse_recipe
from nagent_lsp.config.state_root import home_root
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.operations.agents import workspace_state_root
from nagent_lsp.operations.args import TrustArgs, TrustStatusArgs
from nagent_lsp.operations.session import Session
from nagent_lsp.store.trust_records import Definitions, TrustRecord, TrustRecords, read_definitions

log = logging.getLogger("nagent_lsp")

HOW = (
    "run `nagent-lsp trust` in the repository, or your editor's trust command (VS Code: \"nagent: Trust This "
    "Repository's Definitions…\", Emacs: M-x nagent-trust, Neovim: :NagentTrust)"
)


@attrs.frozen
class TrustState:
    """The result of the three commands (the field names are the contract's); `hash` is null when there are no
    definitions."""

    stateRoot: str
    trusted: bool
    hash: str | None = attrs.field(metadata={WIRE_NULL: True})
    files: list[str]
    changedSinceTrusted: bool
    message: str


@attrs.frozen
class Assessment:
    definitions: Definitions
    record: TrustRecord | None
    own: bool  # the user's own state (~/.nagent): its definitions are the user's

    @property
    def trusted(self) -> bool:
        if self.own:
            return True
        return (
            self.record is not None
            and self.definitions.hash is not None
            and self.definitions.problem is None
            and self.record.hash == self.definitions.hash
        )

    @property
    def changed(self) -> bool:
        return not self.own and self.record is not None and self.record.hash != self.definitions.hash

    @property
    def root(self) -> str:
        return str(self.definitions.state_root)

    def state(self, message: str | None = None) -> TrustState:
        return TrustState(
            stateRoot=self.root,
            trusted=self.trusted,
            hash=self.definitions.hash,
            files=self.definitions.paths,
            changedSinceTrusted=self.changed,
            message=message or self.describe(),
        )

    def describe(self) -> str:
        root, definitions = self.root, self.definitions
        if self.own:
            return f"{root} is your own nagent state: its definitions are yours, nothing to trust"
        if definitions.hash is None:
            return (
                f"no nagent definitions in {root} (config.json, context.md|yaml, agents/, recipes/): nothing to trust"
            )
        if definitions.problem is not None:
            return f"the nagent definitions in {root} cannot be trusted: {definitions.problem}"
        if self.trusted:
            return f"you trust the nagent definitions in {root} ({_summary(definitions)})"
        if self.changed:
            return changed_message(root)
        return (
            f"the nagent definitions in {root} are not trusted: workspace recipes' command steps do not run and no "
            f"workspace recipe is offered as a code action; to trust them, {HOW}"
        )


def changed_message(root: str) -> str:
    return f"the definitions in {root} changed since you trusted them; trust them again: {HOW}"


def _summary(definitions: Definitions) -> str:
    count = len(definitions.files)
    return f"{count} file{'s' if count != 1 else ''}, sha256 {definitions.hash}"


def records() -> TrustRecords:
    return TrustRecords(home_root())


def assess(session: Session, state_root: Path) -> Assessment:
    """Read the definitions and the user's record (disk work: call off the event loop). A change since the user
    trusted them is reported once (the log, which editors show)."""
    definitions = read_definitions(state_root)
    own = os.path.realpath(state_root) == os.path.realpath(home_root())
    found = Assessment(definitions, None if own else records().get(state_root), own)
    if found.changed:
        key = f"trust-changed:{found.root}:{definitions.hash}"
        if key not in session.reported:
            session.reported.add(key)
            log.warning("%s", changed_message(found.root))
    return found


def state_root_of(session: Session, uri: str | None) -> Path:
    """The state root of `uri`'s file (or folder); omitted: the first workspace folder's (else ~/.nagent)."""
    return workspace_state_root(session, uri) or session.state_root(None).path


def trust_status(session: Session, args: TrustStatusArgs) -> TrustState:
    return assess(session, state_root_of(session, args.uri)).state()


def trust_definitions(session: Session, args: TrustArgs) -> TrustState:
    """Record the current hash. `hash` (optional): trust only if the definitions still hash to what the user saw."""
    found = assess(session, state_root_of(session, args.uri))
    definitions = found.definitions
    if found.own or definitions.hash is None:
        return found.state(found.describe() + (": nothing recorded" if not found.own else ""))
    if definitions.problem is not None:
        return found.state()
    if args.hash is not None and args.hash != definitions.hash:
        raise InvalidArgument(
            "hash",
            f"the definitions in {found.root} changed since you looked (sha256 {definitions.hash}, not {args.hash}): "
            "look at them again before trusting them",
        )
    record = records().record(definitions.state_root, definitions.hash)
    trusted = Assessment(definitions, record, False)
    message = (
        f"trusted the nagent definitions in {found.root} ({_summary(definitions)}); their recipes' command steps "
        "may run (under your shell setting) until any of these files changes"
    )
    log.info("%s", message)
    return trusted.state(message)


def revoke_trust(session: Session, args: TrustStatusArgs) -> TrustState:
    found = assess(session, state_root_of(session, args.uri))
    if found.own:
        return found.state()
    removed = records().revoke(found.definitions.state_root)
    after = Assessment(found.definitions, None, False)
    if removed:
        return after.state(f"revoked your trust in the nagent definitions in {found.root}")
    return after.state(f"you did not trust the nagent definitions in {found.root}: nothing to revoke")


def repository_trusted(session: Session, state_root: Path | None) -> bool:
    return state_root is not None and assess(session, state_root).trusted


def runnable_recipe(session: Session, state_root: Path, recipe: Recipe) -> Recipe:
    """The recipe to run. The user's own runs as loaded; a workspace recipe with command steps only once the user
    trusts the repository's definitions — and then as parsed from the very bytes the trusted hash covered (a file
    changed between loading and checking cannot slip through). A workspace recipe of LLM steps only runs anyway:
    it cannot run a program."""
    if recipe.source != "workspace" or not recipe.has_commands:
        return recipe
    found = assess(session, state_root)
    content = found.definitions.content_of(Path(recipe.path)) if found.trusted else None
    if content is None:
        refusal = (
            f"recipe '{recipe.name}' comes from this repository ({recipe.path}) and has command steps; they run only "
            f"once you trust this repository's nagent definitions: {HOW}"
        )
        if found.changed:
            refusal += f" (the definitions in {found.root} changed since you trusted them)"
        raise UserError(refusal)
    try:
        return parse_recipe(content.decode("utf-8"), Path(recipe.path), recipe.source, tuple(session.settings.models))
    except (ConfigFileError, UnicodeDecodeError) as exc:
        raise UserError(f"recipe '{recipe.name}' cannot be run: {exc}") from None

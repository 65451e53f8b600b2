"""A model profile for one request (`profile` on `nagent.edit`, `nagent.instruction.apply`, `nagent.recipe.run`;
issue 25): the user picks one of their `models` from a short list (`nagent.status`'s `profiles`) for this run only.

Only a profile of the settings is accepted, never a raw model id: the list a client offers is the list the server
takes, and a typo is an error naming the field instead of a request sent to a model that does not exist.
"""

from __future__ import annotations

import attrs

from nagent_lsp.config.agent_definitions import Agent
from nagent_lsp.config.settings import Settings
from nagent_lsp.core.errors import InvalidArgument


def profile_names(settings: Settings) -> list[str]:
    """The user's model profiles, sorted (`nagent.status`'s `profiles`)."""
    return sorted(settings.models)


def checked_profile(settings: Settings, profile: str | None, field: str = "profile") -> str | None:
    """`profile` when it names one of the settings' profiles (None stays None); else InvalidArgument naming it."""
    if profile is None:
        return None
    if profile in settings.models:
        return profile
    known = ", ".join(profile_names(settings))
    hint = f"your profiles: {known}" if known else "no model profiles are defined: add them under the setting models"
    raise InvalidArgument(field, f"unknown model profile '{profile}' ({hint})")


def with_profile(settings: Settings, agent: Agent, profile: str | None) -> Agent:
    """The agent the run uses: its model replaced by `profile` for this request (its rules and instructions
    kept)."""
    chosen = checked_profile(settings, profile)
    return agent if chosen is None else attrs.evolve(agent, model=chosen)

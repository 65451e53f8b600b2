"""The checks settings and arguments attach to their fields (`Annotated[int, Between(1, 10)]`), and the error text
they share. Kept apart from config.convert, which builds the cattrs converters: a process that only reads the
defaults (the CLI's `history`, the server until `initialize` carries options) never imports cattrs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

UNKNOWN = "unknown field"


class Invalid(ValueError):
    """A value refused by a structure hook or a check; the message says what was expected."""


def describe_value(value: object) -> str:
    """A value as an error message may show it: numbers and the like, never a string's text."""
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    kinds: dict[type, str] = {dict: "an object", list: "a list"}
    return repr(value) if isinstance(value, (int, float)) else kinds.get(type(value), type(value).__name__)


@attrs.frozen
class Between:
    low: float
    high: float

    def __call__(self, value: float) -> None:
        if not self.low <= value <= self.high:
            raise Invalid(f"must be between {self.low} and {self.high}, got {describe_value(value)}")


@attrs.frozen
class Check:
    ok: Callable[[Any], bool]
    message: str

    def __call__(self, value: object) -> None:
        if not self.ok(value):
            raise Invalid(self.message)

"""Command arguments: one JSON object in, a typed attrs object out, or InvalidArgument naming the field.

Declare an attrs class whose field names are the contract's camelCase names; fields with a default are
optional. Types are checked strictly by config.convert (a str must also be non-empty).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar, cast

import attrs
import cattrs

from nagent_lsp.config.convert import UNKNOWN, converter, problems, shown
from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.core.identity import uri_to_path

T = TypeVar("T")


def parse_args(cls: type[T], raw: object) -> T:
    """The arguments of `workspace/executeCommand`: one object, a list holding one object, or nothing."""
    if isinstance(raw, (list, tuple)):
        if len(raw) > 1:
            raise InvalidArgument("arguments", f"expected one JSON object, got {len(raw)} arguments")
        raw = raw[0] if raw else None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise InvalidArgument("arguments", f"expected a JSON object, got {shown(raw)}")
    try:
        return converter.structure(raw, cls)
    except cattrs.BaseValidationError as exc:
        found = list(problems(exc))
        field, message = next((p for p in found if p[1] == UNKNOWN), found[0])
        if message == UNKNOWN:
            message = f"unknown field (expected {', '.join(sorted(attrs.fields_dict(cast(Any, cls)))) or 'no fields'})"
        raise InvalidArgument(field, message) from None


def file_argument(uri: str, field: str = "uri") -> Path:
    """The local file named by a `file:` URI argument, or InvalidArgument naming the field."""
    path = uri_to_path(uri)
    if path is None:
        raise InvalidArgument(field, f"expected a file:// URI, got {uri!r}")
    return path

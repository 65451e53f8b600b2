"""Command arguments: one JSON object in, a typed attrs object out, or InvalidArgument naming the field.

Declare an attrs class whose field names are the contract's camelCase names; fields with a default are
optional. Types are checked strictly by config.convert (a str must also be non-empty). Before that, every string
of the object, however deep, must be text a file, a log or a model can take: no lone surrogate (JSON's "\ud800",
which UTF-8 cannot encode) and no NUL (which no file name, command line or request text may hold).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs

from nagent_lsp.config.checks import UNKNOWN, describe_value
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
        raise InvalidArgument("arguments", f"expected a JSON object, got {describe_value(raw)}")
    for field, problem in bad_strings(raw):
        raise InvalidArgument(field or "arguments", problem)
    import cattrs  # at the first command, not at import: `file_argument` (the CLI's history) needs no converter

    from nagent_lsp.config.convert import converter, problems

    try:
        return converter.structure(raw, cls)
    except cattrs.BaseValidationError as exc:
        found = list(problems(exc))
        field, message = next((p for p in found if p[1] == UNKNOWN), found[0])
        if message == UNKNOWN:
            message = f"unknown field (expected {', '.join(sorted(attrs.fields_dict(cast(Any, cls)))) or 'no fields'})"
        raise InvalidArgument(field, message) from None


def bad_strings(value: object, path: str = "") -> Iterator[tuple[str, str]]:
    """(dotted field, problem) for each string in a JSON value that is not text: a lone surrogate or a NUL."""
    if isinstance(value, str):
        if "\x00" in value:
            yield path, "contains a NUL character"
        elif not _encodes(value):
            yield path, "is not valid Unicode (it holds a lone surrogate)"
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and ("\x00" in key or not _encodes(key)):
                yield path, "holds a key that is not valid Unicode text"
            else:
                yield from bad_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from bad_strings(item, f"{path}.{index}" if path else str(index))


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def file_argument(uri: str, field: str = "uri") -> Path:
    """The local file named by a `file:` URI argument, or InvalidArgument naming the field."""
    path = uri_to_path(uri)
    if path is None:
        raise InvalidArgument(field, f"expected a file:// URI, got {uri!r}")
    return path

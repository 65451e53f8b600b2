"""Command arguments: one JSON object in, a typed dataclass out, or InvalidArgument naming the field.

Declare a frozen dataclass whose field names are the contract's camelCase names; fields with a default
are optional. Supported field types: str, int, float, bool, dict, list[str], and `X | None`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from pathlib import Path

from nagent_lsp.core.identity import uri_to_path as _uri_to_path
from nagent_lsp.core.errors import InvalidArgument

T = TypeVar("T")


def parse_args(cls: type[T], raw: Any) -> T:
    if raw is None:
        raw = {}
    if isinstance(raw, (list, tuple)):
        # executeCommand passes a list; the contract is a single object (or nothing).
        if len(raw) == 0:
            raw = {}
        elif len(raw) == 1:
            raw = raw[0] if raw[0] is not None else {}
        else:
            raise InvalidArgument("arguments", f"expected one JSON object, got {len(raw)} arguments")
    if not isinstance(raw, dict):
        raise InvalidArgument("arguments", f"expected a JSON object, got {type(raw).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise InvalidArgument(unknown[0], f"unknown field (expected {', '.join(sorted(fields))})")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        if name not in raw:
            if not has_default:
                raise InvalidArgument(name, "required field is missing")
            continue
        values[name] = _check(name, raw[name], hints[name])
    return cls(**values)


def _check(name: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _check(name, value, option)
            except InvalidArgument as exc:
                errors.append(exc)
        raise errors[0] if errors else InvalidArgument(name, "unexpected value")
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        if not isinstance(value, list):
            raise InvalidArgument(name, f"expected a list, got {_kind(value)}")
        return [_check(name, v, item) for v in value]
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise InvalidArgument(name, f"expected an object, got {_kind(value)}")
        return value
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise InvalidArgument(name, f"expected true or false, got {_kind(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(name, f"expected a whole number, got {_kind(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidArgument(name, f"expected a number, got {_kind(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise InvalidArgument(name, f"expected a string, got {_kind(value)}")
        if not value:
            raise InvalidArgument(name, "must not be empty")
        return value
    if dataclasses.is_dataclass(hint):
        return parse_args(hint, value)
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def file_argument(uri: str, field: str = "uri") -> Path:
    """The local file named by a `file:` URI argument, or InvalidArgument naming the field."""
    path = _uri_to_path(uri)
    if path is None:
        raise InvalidArgument(field, f"expected a file:// URI, got {uri!r}")
    return path

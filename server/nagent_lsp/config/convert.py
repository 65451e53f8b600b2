"""One strict cattrs converter for JSON coming in (settings and command arguments), with field-named errors.

JSON is taken as written: no "5" for 5, no 1 for true; a whole-number float counts as an int. Unknown keys are
refused. `Annotated[T, check]` runs each check (a callable raising `Invalid`) after structuring T. Messages
never quote a string value (people paste secrets into the wrong box): a string shows as its length.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

# re-exported: the checks live in config.checks (no cattrs there); the other modules import them from here
from nagent_lsp.config.checks import UNKNOWN, Between, Check, Invalid, describe_value

__all__ = ["UNKNOWN", "Between", "Check", "Invalid", "describe_value", "converter", "problems", "to_wire"]


def _is_number(value: object) -> bool:
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def _strict(kind: type, ok: Callable[[Any], bool], expected: str) -> Callable[[object, type], Any]:
    def structure(value: object, _: type) -> Any:
        if not ok(value):
            raise Invalid(f"expected {expected}, got {describe_value(value)}")
        return kind(value)

    return structure


_PRIMITIVES: dict[type, Callable[[object, type], Any]] = {
    str: _strict(str, lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    int: _strict(int, lambda v: _is_number(v) and float(v).is_integer(), "a whole number"),
    float: _strict(float, _is_number, "a number"),
    bool: _strict(bool, lambda v: isinstance(v, bool), "true or false"),
    dict: _strict(dict, lambda v: isinstance(v, dict), "an object"),
}


def _strings(value: object, kind: type) -> Any:
    if not isinstance(value, (list, tuple)):
        raise Invalid(f"expected a list of strings, got {describe_value(value)}")
    strings = [_PRIMITIVES[str](v, str) for v in value]
    return tuple(strings) if typing.get_origin(kind) is tuple else strings


def _literal(value: object, kind: type) -> Any:
    if value not in typing.get_args(kind):
        raise Invalid(f"expected one of {', '.join(map(str, typing.get_args(kind)))}")
    return value


def _annotated(kind: Any) -> Callable[[object, type], Any]:
    base, *checks = typing.get_args(kind)

    def structure(value: object, _: type) -> Any:
        result = converter.structure(value, base)
        for check in checks:
            check(result)
        return result

    return structure


converter = cattrs.Converter(forbid_extra_keys=True)
for _kind, _hook in _PRIMITIVES.items():
    converter.register_structure_hook(_kind, _hook)
converter.register_structure_hook_func(lambda t: t in (list[str], tuple[str, ...]), _strings)
converter.register_structure_hook_func(lambda t: typing.get_origin(t) is Literal, _literal)
converter.register_structure_hook_factory(lambda t: typing.get_origin(t) is Annotated, _annotated)


def problems(exc: BaseException, path: str = "", kind: Any = None) -> Iterator[tuple[str, str]]:
    """(dotted field name, message) for each value a structuring error refused; unknown keys say UNKNOWN."""
    if isinstance(exc, ForbiddenExtraKeysError):
        yield from ((f"{path}{key}", UNKNOWN) for key in sorted(exc.extra_fields))
    elif isinstance(exc, ClassValidationError):
        named, unnamed = exc.group_exceptions()
        for sub, note in named:
            yield from problems(sub, f"{path}{note.name}.", note.type)
        for sub in unnamed:
            yield from problems(sub, path, kind)
    elif isinstance(exc, IterableValidationError):  # a list's index or a mapping's key names the element
        items, unnamed = exc.group_exceptions()
        for sub, item in items:
            yield from problems(sub, f"{path}{item.index}.", item.type)
        for sub in unnamed:
            yield from problems(sub, path, kind)
    elif isinstance(exc, KeyError):
        yield path.rstrip("."), "required field is missing"
    elif isinstance(exc, Invalid):
        yield path.rstrip("."), str(exc)
    else:  # cattrs' own refusal (a nested object given as a number...): say what was expected, not the value
        yield path.rstrip("."), f"expected {'an object' if attrs.has(kind) else getattr(kind, '__name__', kind)}"


# -- results going out -----------------------------------------------------------------------------------------
# Operations return attrs classes (DESIGN §13 "one engine"); every front end (LSP, the CLI's --json, ACP) turns them
# into JSON with this one function. Field names are already the contract's camelCase; a field left None is an
# optional member that is absent, so it is omitted rather than sent as null (`reason?`, `patchPath?` …). A field
# that must be null on the wire says so with `metadata={"null": True}`.
WIRE_NULL = "null"


def _omit_none_factory(cls: type) -> Callable[[Any], dict[str, Any]]:
    fields = attrs.fields(cls)

    def unstructure(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in fields:
            value = getattr(obj, field.name)
            if value is None and not field.metadata.get(WIRE_NULL):
                continue
            out[field.name] = wire_converter.unstructure(value)
        return out

    return unstructure


wire_converter = cattrs.Converter()
wire_converter.register_unstructure_hook_factory(attrs.has, _omit_none_factory)


def to_wire(result: Any) -> Any:
    """A result as JSON-ready data: attrs instances (at any depth) become objects without their None fields; dicts,
    lists and plain values pass through."""
    return wire_converter.unstructure(result)

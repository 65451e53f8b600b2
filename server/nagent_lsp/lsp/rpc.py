"""JSON-RPC envelopes and LSP params, checked so that every request gets an answer a person can act on.

- `strict_converter()`: lsprotocol's converter, but an integer field takes only a JSON integer, a string field
  only a string, a boolean only true/false, an array field only an array (lsprotocol's converter would turn
  `1.5` into 1, `"7"` into 7 and `"abc"` into `["a", "b", "c"]`).
- `describe_params_error`: a cattrs failure as `params.position.line: expected an integer from 0 to 2147483647`
  (the JSON field names, never a Python exception's text, never the value sent).
- `salvage_id`: the top-level `id` of a message too deeply nested for `json.loads`, so even it is answered.
- `quoted`: a short, safe rendering of a client-sent string for a message.
- `internal_error_message`: what a request that hit a bug is answered with (the details go to the log).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_mutable_sequence,
    is_sequence,
    list_structure_factory,
)
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)

QUOTED_CHARS = 60  # characters of a client-sent string quoted in a message
_RANGE = re.compile(r"^\w+\.(\w+) should be in range \[(-?\d+):(-?\d+)\]")
_SCALAR = re.compile(r'\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|"(?:[^"\\]|\\.)*"|true|false|null)')
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class WrongType(TypeError):
    """A JSON value of the wrong kind for a field; `expected` is said in words."""

    def __init__(self, expected: str, value: object, got: str | None = None):
        super().__init__(expected)
        self.expected = expected
        self.got = got or json_kind(value)


def internal_error_message(method: str) -> str:
    return (
        f"{method} failed because of an internal error in nagent-lsp (a bug). The server log has the details: "
        "start the server with --log-file FILE -v to keep them."
    )


def json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction" if value == value and not value.is_integer() else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a value of another kind"


def quoted(text: object, limit: int = QUOTED_CHARS) -> str:
    """A client-sent string as a message may quote it: printable, at most `limit` characters."""
    if not isinstance(text, str):
        return json_kind(text)
    clean = "".join(ch if ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF else "?" for ch in text[: limit + 1])
    if len(text) > limit:
        clean = f"{clean[:limit]}… ({len(text)} characters)"
    return repr(clean)


# -- the converter ------------------------------------------------------------------------------------


def _strict_int(value: Any, _cls: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise WrongType("an integer", value)


def _strict_str(value: Any, _cls: Any) -> str:
    if isinstance(value, str):
        if has_lone_surrogate(value):  # JSON's "\ud800": no file name, no UTF-8 output can hold it
            raise WrongType("valid Unicode text", value, got="a string with a lone surrogate")
        return value
    raise WrongType("a string", value)


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _strict_bool(value: Any, _cls: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise WrongType("true or false", value)


def _strict_float(value: Any, _cls: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise WrongType("a number", value)


def _array_only(factory: Callable[..., Any]) -> Callable[[Any, cattrs.Converter], Any]:
    def make(cls: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
        inner = factory(cls, converter)

        def structure(value: Any, target: Any) -> Any:
            if not isinstance(value, (list, tuple)):
                raise WrongType("an array", value)
            return inner(value, target)

        return structure

    return make


def strict_converter() -> cattrs.Converter:
    """pygls' converter (lsprotocol's hooks plus pygls' message classes) with strict scalars and arrays."""
    from pygls.protocol import default_converter

    converter = default_converter()
    converter.register_structure_hook(int, _strict_int)
    converter.register_structure_hook(str, _strict_str)
    converter.register_structure_hook(bool, _strict_bool)
    converter.register_structure_hook(float, _strict_float)
    converter.register_structure_hook_factory(is_sequence, _array_only(homogenous_tuple_structure_factory))
    converter.register_structure_hook_factory(is_mutable_sequence, _array_only(list_structure_factory))
    return converter


# -- describing a failure -------------------------------------------------------------------------------


def _camel(name: str) -> str:
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _leaves(exc: BaseException, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], BaseException]]:
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            if isinstance(note, AttributeValidationNote):
                step: str | int = _camel(note.name)
            elif isinstance(note, IterableValidationNote):
                step = note.index if isinstance(note.index, int) else str(note.index)
            else:
                step = "?"
            yield from _leaves(sub, (*path, step))
        for sub in without:
            yield from _leaves(sub, path)
        return
    yield path, exc


def _dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text or "the message"


def _walk(raw: Any, path: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], Any]:
    """The deepest prefix of `path` present in the raw JSON, and the value found there."""
    for depth, step in enumerate(path):
        if isinstance(raw, dict) and isinstance(step, str) and step in raw:
            raw = raw[step]
        elif isinstance(raw, list) and isinstance(step, int) and 0 <= step < len(raw):
            raw = raw[step]
        else:
            return path[:depth], raw
    return path, raw


def _problem(raw: Any, path: tuple[str | int, ...], exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        key = _camel(exc.args[0])
        found, value = _walk(raw, path if path[-1:] == (key,) else (*path, key))
        if isinstance(value, dict) or not found:
            return f"{_dotted((*found, key) if found[-1:] != (key,) else found)}: required"
        return f"{_dotted(found)}: expected an object, got {json_kind(value)}"
    if isinstance(exc, WrongType):
        return f"{_dotted(path)}: expected {exc.expected}, got {exc.got}"
    if isinstance(exc, ValueError) and (match := _RANGE.match(str(exc))):
        name, low, high = match.groups()
        return f"{_dotted((*path, _camel(name)))}: expected an integer from {low} to {high}"
    found, value = _walk(raw, path)
    if found != path or not isinstance(value, (dict, list)):
        # Mostly a scalar, null or array where an object belongs (the structure code could not index it).
        return f"{_dotted(found)}: not valid here ({json_kind(value)})"
    return f"{_dotted(path)}: not a valid value"


def describe_params_error(exc: BaseException, raw: Any = None, *, limit: int = 3) -> str:
    """`params.x.y: what was expected` for each problem (at most `limit`) of a failed structure of the message
    `raw`; paths are the JSON's own."""
    problems: list[str] = []
    if isinstance(exc, BaseValidationError):
        for path, leaf in _leaves(exc, ()):
            text = _problem(raw, path, leaf)
            if text not in problems:
                problems.append(text)
    if not problems:
        return "params: not valid for this method"
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


# -- an id from a message json.loads cannot parse ---------------------------------------------------------


def salvage_id(text: str, scan_limit: int = 1 << 20) -> tuple[bool, Any]:
    """(found, id) of a request `json.loads` could not read (nested too deeply, or cut short): the top-level
    object's "id" member, found only when the object also has a top-level "method" (a request, not a response);
    at most `scan_limit` characters are looked at."""
    depth = 0
    window = text[:scan_limit]
    found: tuple[bool, Any] = (False, None)
    has_method = False
    for token in _TOKEN.finditer(window):
        value = token.group()
        if value in "[{":
            depth += 1
        elif value in "]}":
            depth -= 1
        elif depth == 1 and (after := _SCALAR.match(window, token.end())) is not None:
            if value == '"method"':
                has_method = True
            elif value == '"id"' and not found[0]:
                try:
                    found = (True, json.loads(after.group(1)))
                except ValueError:
                    return False, None
        elif depth == 1 and value == '"method"' and window[token.end() :].lstrip().startswith(":"):
            has_method = True
        if found[0] and has_method:
            return found
    return (False, None)

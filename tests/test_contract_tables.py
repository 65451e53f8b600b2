"""The README's "Server commands" table is the contract, checked against the code that answers.

For every row: the server's command table (lsp/commands.py, as lsp/app.py builds it) has the command; its argument
braces list exactly the fields of the argument class (operations/args.py), and its result braces exactly the
fields of the class the handler returns (its return annotation) — nested objects too where the README spells
them (`history: {…}`, `commits[{…}]`). `name?` is an optional field: for an argument one with a default, for a
result one left out of the JSON when None (`to_wire`; a field marked `{"null": True}` is always sent, as null).
`name[]` is a list, `name{key: value}` a mapping, `name: "a"|"b"` a Literal. A command returning a dict fails:
its result is not typed, so the table cannot be checked.
"""

from __future__ import annotations

import ast
import collections.abc
import functools
import inspect
import operator
import re
import sys
import textwrap
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType

import attrs
import pytest

from nagent_lsp.config.convert import WIRE_NULL
from nagent_lsp.lsp.app import create_server

README = Path(__file__).resolve().parents[1] / "README.md"
TABLE_HEADING = "### Server commands"
# Commands the table leaves out on purpose, and why.
NOT_IN_TABLE = {"nagent.codeAction.run": "described in prose: it returns the result of the command it runs"}


# -- the README's notation ------------------------------------------------------------------------------------------


@dataclass
class Spec:
    """One member of a brace list: `kind` is value, list, map, object or literal; `fields` for an object (or a list
    of objects), `literals` for a Literal."""

    optional: bool = False
    kind: str = "value"
    fields: dict[str, Spec] | None = None
    literals: tuple[str, ...] = ()


@dataclass
class Row:
    commands: list[str]
    argument: dict[str, Spec]
    result: dict[str, Spec] | None  # None: "as `nagent.X`"
    same_as: str | None = None
    line: int = 0


class Parser:
    """`{a, b?, c[], d[{e, f}], g{key: value}, h: {i}, j?: [id], k?: "x"|"y"}` → {name: Spec}."""

    TOKEN = re.compile(r'\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<str>"[^"]*")|(?P<punct>[{}\[\]:,?|]))')

    def __init__(self, text: str):
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            match = self.TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"cannot read {text[pos:]!r} in {text!r}")
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind)))
            pos = match.end()
        self.at = 0
        self.text = text

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        if self.at >= len(self.tokens):
            raise ValueError(f"{self.text!r} ends early")
        kind, value = self.tokens[self.at]
        if expected is not None and value != expected and kind != expected:
            raise ValueError(f"expected {expected} at {value!r} in {self.text!r}")
        self.at += 1
        return value

    def whole(self) -> dict[str, Spec]:
        members = self.object()
        if self.peek() is not None:
            raise ValueError(f"trailing text after the braces in {self.text!r}")
        return members

    def object(self) -> dict[str, Spec]:
        self.take("{")
        members: dict[str, Spec] = {}
        while self.peek() != "}":
            name, spec = self.member()
            if name in members:
                raise ValueError(f"{name} listed twice in {self.text!r}")
            members[name] = spec
            if self.peek() == ",":
                self.take(",")
        self.take("}")
        return members

    def member(self) -> tuple[str, Spec]:
        name = self.take("name")
        spec = Spec()
        if self.peek() == "?":
            self.take("?")
            spec.optional = True
        if self.peek() == "[":
            self.take("[")
            spec.kind = "list"
            if self.peek() == "{":
                spec.fields = self.object()
            self.take("]")
        elif self.peek() == "{":  # name{key: value}: a mapping
            self.take("{")
            self.take("name")
            self.take(":")
            self.take("name")
            self.take("}")
            spec.kind = "map"
        elif self.peek() == ":":
            self.take(":")
            self.value(spec)
        if self.peek() == "?":
            self.take("?")
            spec.optional = True
        return name, spec

    def value(self, spec: Spec) -> None:
        if self.peek() == "{":
            spec.kind, spec.fields = "object", self.object()
        elif self.peek() == "[":
            self.take("[")
            spec.kind = "list"
            if self.peek() == "{":
                spec.fields = self.object()
            else:
                self.take("name")  # [hunkId]: a list of ids
            self.take("]")
        else:
            literals = [self.take("str").strip('"')]
            while self.peek() == "|":
                self.take("|")
                literals.append(self.take("str").strip('"'))
            spec.kind, spec.literals = "literal", tuple(literals)


def _code(cell: str) -> str | None:
    """The cell's first `code span`."""
    match = re.match(r"\s*`([^`]*)`", cell)
    return match.group(1) if match else None


def readme_rows() -> list[Row]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(TABLE_HEADING))
    rows: list[Row] = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 3 or cells[0].strip() in ("command", "---") or set(cells[0].strip()) <= {"-"}:
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        commands = [names[0]]
        commands += [names[0].rsplit(".", 1)[0] + n if n.startswith(".") else n for n in names[1:]]
        argument = _code(cells[1])
        assert argument is not None, f"README.md:{number}: the argument of {commands[0]} is not a `{{…}}` span"
        result_code = _code(cells[2])
        same = re.match(r"\s*as `([^`]+)`", cells[2])
        if same:
            rows.append(Row(commands, Parser(argument).whole(), None, same.group(1), number))
            continue
        assert result_code is not None, f"README.md:{number}: the result of {commands[0]} is not a `{{…}}` span"
        rows.append(Row(commands, Parser(argument).whole(), Parser(result_code).whole(), None, number))
    return rows


# -- the code's classes ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():  # noqa: ANN201 - the server class is the LSP layer's
    return create_server()


def _type_checking_names(module_name: str) -> dict[str, object]:
    """What the handler's module imports under `if TYPE_CHECKING:` (the operations load lazily at run time, so a
    handler's annotation names its result class only there): the names mypy resolves the annotation with."""
    module = sys.modules[module_name]
    tree = ast.parse(textwrap.dedent(inspect.getsource(module)))
    names: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            code = compile(ast.Module(body=node.body, type_ignores=[]), module.__file__ or module_name, "exec")
            exec(code, names)  # noqa: S102 - the package's own import statements
    return names


def result_class(server, command: str) -> object:  # noqa: ANN001
    handler = server.commands.commands[command].handler
    localns = _type_checking_names(handler.__module__)
    try:
        hints = typing.get_type_hints(handler, globalns=handler.__globals__, localns=localns)
    except NameError as exc:
        raise AssertionError(f"{command}: the handler's return annotation does not resolve: {exc}") from None
    return hints.get("return")


def _unwrap_optional(kind: object) -> tuple[object, bool]:
    args = typing.get_args(kind)
    if (typing.get_origin(kind) in (typing.Union, UnionType)) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return functools.reduce(operator.or_, rest), True
    return kind, False


def _strip_annotated(kind: object) -> object:
    while typing.get_origin(kind) is typing.Annotated:
        kind = typing.get_args(kind)[0]
    return kind


SEQUENCES = (list, tuple, collections.abc.Sequence)
MAPPINGS = (dict, collections.abc.Mapping)


@dataclass
class Mismatches:
    found: list[str] = field(default_factory=list)

    def add(self, where: str, message: str) -> None:
        self.found.append(f"{where}: {message}")


def compare(specs: dict[str, Spec], cls: object, where: str, role: str, out: Mismatches) -> None:
    """The README's members against the attrs class `cls`: names, optional marks, and kinds."""
    if not (isinstance(cls, type) and attrs.has(cls)):
        out.add(where, f"the README spells an object, the code gives {cls!r} (not a typed class)")
        return
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in attrs.fields(cls)}
    for name in sorted(set(specs) - set(fields)):
        out.add(where, f"the README lists `{name}`, {cls.__name__} has no such field")
    for name in sorted(set(fields) - set(specs)):
        out.add(where, f"{cls.__name__}.{name} is not in the README")
    for name in sorted(set(specs) & set(fields)):
        spec, attribute = specs[name], fields[name]
        kind, admits_none = _unwrap_optional(_strip_annotated(hints[name]))
        kind = _strip_annotated(kind)
        if role == "argument":
            optional = attribute.default is not attrs.NOTHING
            rule = "has a default" if optional else "is required"
        else:
            optional = attribute.default is None and not attribute.metadata.get(WIRE_NULL)
            rule = "is left out when None" if optional else "is always sent"
            if admits_none and not attribute.metadata.get(WIRE_NULL) and attribute.default is not None:
                out.add(f"{where}.{name}", "may be None (left out) but has no None default: mark it null or `?`")
        if spec.optional != optional:
            mark = "marks it optional (`?`)" if spec.optional else "marks it required (no `?`)"
            out.add(f"{where}.{name}", f"the README {mark}; the field {rule}")
        compare_kind(spec, kind, f"{where}.{name}", role, out)


def compare_kind(spec: Spec, kind: object, where: str, role: str, out: Mismatches) -> None:
    origin = typing.get_origin(kind) or kind
    if spec.kind == "list":
        if origin not in SEQUENCES:
            out.add(where, f"the README says a list (`[]`), the field is {kind!r}")
        elif spec.fields is not None:
            element = _strip_annotated(typing.get_args(kind)[0]) if typing.get_args(kind) else None
            compare(spec.fields, element, f"{where}[]", role, out)
    elif spec.kind == "map":
        if origin not in MAPPINGS:
            out.add(where, f"the README says a mapping (`{{key: value}}`), the field is {kind!r}")
    elif spec.kind == "object":
        assert spec.fields is not None
        compare(spec.fields, kind, where, role, out)
    elif spec.kind == "literal":
        values = typing.get_args(kind) if origin is typing.Literal else None
        if values is None or set(values) != set(spec.literals):
            out.add(where, f"the README says one of {spec.literals}, the field is {kind!r}")


# -- the tests ------------------------------------------------------------------------------------------------------


def test_the_table_lists_every_command_of_the_server(server) -> None:  # noqa: ANN001
    listed = {command for row in readme_rows() for command in row.commands}
    served = set(server.commands.commands)
    assert sorted(listed - served) == [], "in the README's table, but the server has no such command"
    assert sorted(served - listed - set(NOT_IN_TABLE)) == [], "served, but missing from the README's table"


ROWS = [(command, row) for row in readme_rows() for command in row.commands]


@pytest.mark.parametrize(("command", "row"), ROWS, ids=[command for command, _ in ROWS])
def test_arguments_match_the_table(server, command: str, row: Row) -> None:  # noqa: ANN001
    assert command in server.commands, f"README.md:{row.line}: the server has no command {command}"
    out = Mismatches()
    compare(row.argument, server.commands.commands[command].args_type, f"{command} argument", "argument", out)
    assert out.found == [], f"README.md:{row.line}:\n" + "\n".join(out.found)


@pytest.mark.parametrize(("command", "row"), ROWS, ids=[command for command, _ in ROWS])
def test_results_match_the_table(server, command: str, row: Row) -> None:  # noqa: ANN001
    assert command in server.commands, f"README.md:{row.line}: the server has no command {command}"
    cls = result_class(server, command)
    result = row.result
    if row.same_as is not None:  # "as `nagent.edit`": the same members (the class may be another one)
        result = next(r for r in readme_rows() if row.same_as in r.commands).result
    assert result is not None
    origin = typing.get_origin(cls) or cls
    assert origin not in MAPPINGS, f"{command} returns {cls!r}: a dict, not a typed result class"
    out = Mismatches()
    compare(result, cls, f"{command} result", "result", out)
    assert out.found == [], f"README.md:{row.line}:\n" + "\n".join(out.found)


def test_the_notation_is_read_as_written() -> None:
    """The parser itself: a mistake here would let any table pass."""
    specs = Parser('{a, b?, c[], d[{e, f?}], g{key: v}, h: {i}, j?: [id], k?: "x"|"y"}').whole()
    assert specs["a"] == Spec()
    assert specs["b"] == Spec(optional=True)
    assert specs["c"] == Spec(kind="list")
    assert specs["d"] == Spec(kind="list", fields={"e": Spec(), "f": Spec(optional=True)})
    assert specs["g"] == Spec(kind="map")
    assert specs["h"] == Spec(kind="object", fields={"i": Spec()})
    assert specs["j"] == Spec(optional=True, kind="list")
    assert specs["k"] == Spec(optional=True, kind="literal", literals=("x", "y"))
    assert Parser("{}").whole() == {}
    with pytest.raises(ValueError):
        Parser("{a, b").whole()


@attrs.frozen
class Inner:
    x: int


@attrs.frozen
class Outer:
    a: str
    inner: Inner
    items: list[Inner]
    maybe: str | None = None
    null: str | None = attrs.field(default=None, metadata={WIRE_NULL: True})


def test_a_wrong_table_is_caught() -> None:
    """The comparison itself: a missing, an extra, a wrongly optional and a wrongly nested member are all named."""
    out = Mismatches()
    compare(Parser("{a, inner: {x}, items[{x}], maybe?, null}").whole(), Outer, "ok", "result", out)
    assert out.found == []
    compare(Parser("{a?, inner: {y}, items, maybe, null?, extra}").whole(), Outer, "bad", "result", out)
    assert out.found == [
        "bad: the README lists `extra`, Outer has no such field",
        "bad.a: the README marks it optional (`?`); the field is always sent",
        "bad.inner: the README lists `y`, Inner has no such field",
        "bad.inner: Inner.x is not in the README",
        "bad.maybe: the README marks it required (no `?`); the field is left out when None",
        "bad.null: the README marks it optional (`?`); the field is always sent",
    ]

"""Random and malformed JSON-RPC traffic, each case with the answer it must get.

A `Case` is the bytes to write plus what must come back: for each request id, the acceptable error codes (or a
result). Families cover what the hardening campaign found unanswered (issue 12 item 4): positions outside
0..2^31-1 or not integers, unusual method names, requests without params, ill-typed hover/codeAction params,
broken envelopes with an id, `arguments` not a list, deep nesting; plus framing faults (garbage frames,
headers without Content-Length, wrong lengths, invalid UTF-8, batches) and junk notifications, which must
leave the server answering. The targets are benign workspace files: attacks on paths, special files and the
key are campaign.py's.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.abuse.rawserver import MISSING, frame

RESULT = 0  # "a result, not an error" in a set of acceptable codes
PARSE, INVALID_REQUEST, NOT_FOUND, INVALID_PARAMS, INTERNAL = -32700, -32600, -32601, -32602, -32603
USER_ERROR, CANCELLED = -32001, -32800
ANY_ANSWER: frozenset[int] | None = None
# What a command may answer when its arguments are fuzzed: a result, bad params or a user error; never a crash.
COMMAND_ANSWERS = frozenset({RESULT, INVALID_PARAMS, USER_ERROR})

COMMANDS = (
    "nagent.status",
    "nagent.history",
    "nagent.coedits",
    "nagent.split",
    "nagent.patch",
    "nagent.summarize",
    "nagent.edit",
    "nagent.instruction.apply",
    "nagent.conversation.open",
    "nagent.conversation.list",
    "nagent.conversation.clear",
    "nagent.conversation.save",
    "nagent.conversation.load",
    "nagent.conversation.summarize",
    "nagent.conversation.compact",
    "nagent.review.list",
    "nagent.review.show",
    "nagent.review.apply",
    "nagent.review.discard",
    "nagent.agents.list",
    "nagent.recipes.list",
    "nagent.recipe.run",
    "nagent.codeAction.run",
    "nagent.trust.status",
    "nagent.trust",
    "nagent.trust.revoke",
)
CHEAP_COMMANDS = ("nagent.status", "nagent.history", "nagent.coedits", "nagent.conversation.list")
UNUSUAL_METHODS = (
    "",
    " ",
    "$/",
    "$/unknownNotification",
    "textDocument/completion",
    "textDocument/definition",
    "workspace/executeCommand ",
    "TEXTDOCUMENT/HOVER",
    "nagent.status",
    "textDocument/hover\u0000",
    "\ud83d\ude42/method",
    "../../etc/passwd",
    "method\nwith\nnewlines",
    "a" * 5000,
    "initialized/",
    "rpc.discover",
)
POSITIONS_BAD: tuple[Any, ...] = (
    -1,
    -(2**31),
    2**31,
    2**63,
    10**30,
    1.5,
    -0.5,
    "3",
    "",
    None,
    True,
    False,
    [],
    {},
    [1],
    {"line": 1},
    1e308,
)
POSITIONS_GOOD = (0, 1, 3, 2**31 - 1, 1000)
FIELD_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**31,
    2**70,
    1.25,
    "",
    "x",
    "a" * 3000,
    "file:///",
    "file://",
    "untitled:Untitled-1",
    "http://example.com/x.py",
    "file:///nonexistent/dir/file.py",
    "file:///tmp/%2e%2e/%2e%2e/x",
    "file:///a%00b",
    "file:///%ff%fe%fd",
    "\ud800",
    "file:///" + "d/" * 2500,
    [],
    [1, 2],
    {},
    {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 5}},
    {"start": {"line": -1, "character": 0}, "end": {"line": 2**40, "character": 0}},
    {"start": 5, "end": "x"},
)
FIELDS = (
    "uri",
    "request",
    "range",
    "preview",
    "name",
    "line",
    "indexPath",
    "maxCommits",
    "limit",
    "targetBytes",
    "natural",
    "force",
    "dryRun",
    "instruction",
    "agent",
    "id",
    "accept",
    "hunks",
    "rest",
    "recipe",
    "command",
    "argument",
    "bogusField",
)


@dataclass
class Expect:
    msg_id: Any
    codes: frozenset[int] | None  # acceptable error codes (RESULT for a result); None: any answer
    desc: str
    family: str


@dataclass
class Case:
    data: bytes
    family: str
    expects: list[Expect] = field(default_factory=list)
    null_id_errors: int = 0  # answers with id null this case should cause (at least)


class Fuzzer:
    """Cases from a seeded generator; `files` are benign workspace URIs (open or not), `open_uri` one open one."""

    def __init__(self, rng: random.Random, new_id: Callable[[], int], files: list[str], open_uri: str):
        self.rng = rng
        self.new_id = new_id
        self.files = files
        self.open_uri = open_uri
        self.families: list[tuple[float, Callable[[], Case]]] = [
            (18, self.hover),
            (10, self.code_action),
            (22, self.command),
            (9, self.unusual_method),
            (6, self.missing_params),
            (12, self.broken_envelope),
            (2, self.deep_nesting),
            (10, self.framing),
            (11, self.junk_notification),
            (5, self.cancelled),
        ]

    def case(self) -> Case:
        weights = [w for w, _ in self.families]
        make = self.rng.choices([f for _, f in self.families], weights)[0]
        return make()

    # -- helpers --------------------------------------------------------------------------------------------

    def _id(self) -> Any:
        number = self.new_id()
        return f"fuzz-{number}" if self.rng.random() < 0.2 else number

    def _request(self, family: str, method: Any, params: Any, codes: frozenset[int] | None, desc: str) -> Case:
        msg_id = self._id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not MISSING:
            message["params"] = params
        return Case(frame(json.dumps(message)), family, [Expect(msg_id, codes, desc, family)])

    def _uri(self) -> str:
        return self.rng.choice(self.files)

    def _position(self) -> tuple[Any, Any, bool]:
        good = self.rng.random() < 0.3
        pool: tuple[Any, ...] = POSITIONS_GOOD if good else POSITIONS_BAD
        line, character = self.rng.choice(pool), self.rng.choice(POSITIONS_GOOD if good else POSITIONS_GOOD + pool)
        if not good and self.rng.random() < 0.5:
            line, character = character, line
        valid = all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**31 - 1 for v in (line, character))
        return line, character, valid

    # -- families -------------------------------------------------------------------------------------------

    def hover(self) -> Case:
        line, character, valid = self._position()
        params = {"textDocument": {"uri": self._uri()}, "position": {"line": line, "character": character}}
        codes = frozenset({RESULT}) if valid else frozenset({INVALID_PARAMS})
        return self._request("hover", "textDocument/hover", params, codes, f"hover at {line!r}:{character!r}")

    def code_action(self) -> Case:
        (l1, c1, ok1), (l2, c2, ok2) = self._position(), self._position()
        contexts: list[tuple[Any, bool]] = [
            ({"diagnostics": []}, True),
            ({"diagnostics": [], "only": ["quickfix"]}, True),
            ({"diagnostics": "none"}, False),
            ({"diagnostics": [{"range": 5, "message": 3}]}, False),
            ({}, False),
            (None, False),
            ([], False),
        ]
        context, context_ok = self.rng.choice(contexts)
        valid = ok1 and ok2 and context_ok
        params = {
            "textDocument": {"uri": self.rng.choice([self.open_uri, self._uri()])},
            "range": {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}},
            "context": context,
        }
        codes = frozenset({RESULT}) if valid else frozenset({INVALID_PARAMS})
        return self._request("codeAction", "textDocument/codeAction", params, codes, "codeAction")

    def _plausible(self, name: str) -> dict[str, Any]:
        """An argument shaped as the command expects, with values from the edges: it reaches the operation."""
        number = self.rng.choice([0, 1, 3, -1, 10**9, 2**31])
        text = self.rng.choice(
            ["ABUSE:fuzz-edit", "ABUSE:fuzz-edit " + "x" * 3000, "", "ABUSE:fuzz-edit\u0000", "ABUSE:fuzz-edit\ud800"]
        )
        names = ["keep", "../escape", "a/b", "..", "", "n" * 300, "é", ".hidden", "CON", "lone\ud800"]
        fields: dict[str, dict[str, Any]] = {
            "nagent.history": {"maxCommits": number},
            "nagent.coedits": {"limit": number},
            "nagent.split": {"targetBytes": number, "natural": self.rng.random() < 0.5},
            "nagent.conversation.save": {"name": self.rng.choice(names)},
            "nagent.conversation.load": {"name": self.rng.choice(names)},
            "nagent.conversation.compact": {"instruction": text},
            "nagent.instruction.apply": {"line": number},
            "nagent.edit": {"request": text, "preview": self.rng.random() < 0.5},
            "nagent.patch": {"indexPath": self.rng.choice(["/", "", "index.json", "/tmp/none/index.json"])},
            "nagent.review.show": {"id": self.rng.choice(names)},
            "nagent.review.apply": {
                "id": self.rng.choice(names),
                "accept": self.rng.choice([[], ["h1"], ["h1", "h1"]]),
            },
            "nagent.review.discard": {"id": self.rng.choice(names), "hunks": self.rng.choice([["h1"], ["../x"]])},
            "nagent.recipe.run": {"recipe": self.rng.choice(names), "request": text},
            # Never the definitions' real hash: the campaign's repository definitions must stay untrusted.
            "nagent.trust": {"hash": self.rng.choice([*names, "0" * 64])},
            "nagent.codeAction.run": {
                "command": self.rng.choice(["nagent.status", "nagent.history", "nagent.codeAction.run", "x"]),
                "argument": {"uri": self._uri()},
            },
        }
        argument = {"uri": self._uri(), **fields.get(name, {})}
        if name in ("nagent.patch", "nagent.review.show", "nagent.review.apply", "nagent.review.discard"):
            argument.pop("uri")
        if name == "nagent.edit" and self.rng.random() < 0.5:
            a, b = self.rng.choice(POSITIONS_GOOD), self.rng.choice(POSITIONS_GOOD)
            argument["range"] = {"start": {"line": a, "character": 0}, "end": {"line": b, "character": b}}
        return argument

    def _argument(self) -> Any:
        roll = self.rng.random()
        if roll < 0.6:
            fields = self.rng.sample(FIELDS, self.rng.randint(0, 4))
            argument = {name: self.rng.choice(FIELD_VALUES) for name in fields}
            if self.rng.random() < 0.6:
                argument["uri"] = self._uri()
            return argument
        return self.rng.choice(FIELD_VALUES)

    def command(self) -> Case:
        name = self.rng.choice(COMMANDS + CHEAP_COMMANDS * 2 + ("nagent.unknown", "", "NAGENT.STATUS"))
        roll = self.rng.random()
        arguments: Any
        if roll < 0.15:
            arguments = self.rng.choice(["abc", 5, {"uri": self._uri()}, True, 1.5])  # `arguments` not a list
            codes: frozenset[int] | None = frozenset({INVALID_PARAMS})
        elif roll < 0.25:
            arguments = MISSING
            codes = COMMAND_ANSWERS
        else:
            arguments = [self._argument() for _ in range(self.rng.choice([0, 1, 1, 1, 2]))]
            codes = COMMAND_ANSWERS
        if roll > 0.6 and name in COMMANDS:
            arguments = [self._plausible(name)]
        if name not in COMMANDS:
            codes = frozenset({INVALID_PARAMS})  # pygls: an unknown command is an invalid params
        long_running = ("nagent.edit", "nagent.summarize", "nagent.instruction.apply", "nagent.recipe.run")
        if name in long_running or name.startswith(("nagent.conversation.c", "nagent.codeAction.run")):
            codes = None if codes is COMMAND_ANSWERS else codes  # may also be cancelled by the run lock's queue
        params: dict[str, Any] = {"command": name}
        if arguments is not MISSING:
            params["arguments"] = arguments
        return self._request("command", "workspace/executeCommand", params, codes, f"executeCommand {name}")

    def unusual_method(self) -> Case:
        method = self.rng.choice(UNUSUAL_METHODS)
        params: Any = self.rng.choice([MISSING, None, {}, [], {"x": 1}])
        return self._request("method", method, params, frozenset({NOT_FOUND}), f"method {method[:30]!r}")

    def missing_params(self) -> Case:
        method = self.rng.choice(["textDocument/hover", "textDocument/codeAction", "workspace/executeCommand"])
        params = self.rng.choice([MISSING, None])
        return self._request("noParams", method, params, frozenset({INVALID_PARAMS}), f"{method} without params")

    def broken_envelope(self) -> Case:
        msg_id = self._id()
        good_params = {"textDocument": {"uri": self._uri()}, "position": {"line": 0, "character": 0}}
        variants: list[tuple[dict[str, Any], str]] = [
            ({"id": msg_id, "method": "textDocument/hover", "params": good_params}, "no jsonrpc"),
            ({"jsonrpc": "1.0", "id": msg_id, "method": "textDocument/hover", "params": good_params}, "jsonrpc 1.0"),
            ({"jsonrpc": 2, "id": msg_id, "method": "textDocument/hover", "params": good_params}, "jsonrpc 2"),
            ({"jsonrpc": "2.0", "id": msg_id}, "no method"),
            ({"jsonrpc": "2.0", "id": msg_id, "params": {}}, "params, no method"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": 5}, "method 5"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": None}, "method null"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": ["textDocument/hover"]}, "method list"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": {"a": 1}}, "method object"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": "x"}, "params string"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": 5}, "params number"),
            ({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": True}, "params true"),
        ]
        if isinstance(msg_id, int):
            float_id = msg_id + 0.5
            variants.append(({"jsonrpc": "2.0", "id": float_id, "method": "textDocument/hover"}, "fractional id"))
        message, desc = self.rng.choice(variants)
        answer_id = message.get("id", msg_id)
        case = Case(
            frame(json.dumps(message)), "envelope", [Expect(answer_id, frozenset({INVALID_REQUEST}), desc, "envelope")]
        )
        if self.rng.random() < 0.15:  # an id no client could match: answered with id null
            bad = self.rng.choice([True, None, [], {}, [1]])
            message = {"jsonrpc": "2.0", "id": bad, "method": "textDocument/hover", "params": good_params}
            return Case(frame(json.dumps(message)), "envelope", [], null_id_errors=1)
        return case

    def deep_nesting(self) -> Case:
        depth = self.rng.choice([1000, 1500, 3000, 20000])
        msg_id = self.new_id()
        params = "[" * depth + "]" * depth
        inner = self.rng.choice(["workspace/executeCommand", "textDocument/hover", "x/y"])
        body = f'{{"jsonrpc":"2.0","id":{msg_id},"method":"{inner}","params":{{"arguments":{params}}}}}'
        return Case(frame(body), "nesting", [Expect(msg_id, frozenset({INVALID_REQUEST}), f"depth {depth}", "nesting")])

    def _follower(self) -> tuple[bytes, Expect]:
        msg_id = self.new_id()
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "method": "workspace/executeCommand",
                "params": {"command": "nagent.status"},
            }
        )
        return frame(body), Expect(msg_id, frozenset({RESULT}), "status after a framing fault", "framing")

    def framing(self) -> Case:
        kind = self.rng.choice(
            ["garbage", "truncated", "no-length", "longer", "utf8", "batch", "nan", "junk-line", "empty", "zero"]
        )
        follow, follower = self._follower()
        msg_id = self.new_id()
        request = {
            "jsonrpc": "2.0",
            "id": msg_id,
            "method": "textDocument/hover",
            "params": {"textDocument": {"uri": self._uri()}, "position": {"line": 0, "character": 0}},
        }
        body = json.dumps(request).encode()
        expects = [follower]
        null_errors = 0
        if kind == "garbage":
            junk = bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 300)))
            data = frame(b"\x00" + junk)
            null_errors = 1
        elif kind == "truncated":
            cut = self.rng.randint(len(body) // 2, len(body) - 1)
            data = b"Content-Length: %d\r\n\r\n" % cut + body
            expects.append(Expect(msg_id, frozenset({PARSE}), "request cut short", "framing"))
            null_errors = 1  # the rest of the body, glued to the next header
        elif kind == "no-length":
            data = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + body
            expects.append(Expect(msg_id, frozenset({RESULT}), "request without Content-Length", "framing"))
        elif kind == "longer":
            extra = self.rng.randint(1, 18)
            data = b"Content-Length: %d\r\n\r\n" % (len(body) + extra) + body
            expects.append(Expect(msg_id, frozenset({RESULT, PARSE}), "Content-Length too long", "framing"))
        elif kind == "utf8":
            broken = body.replace(b'"uri": "', b'"uri": "\xff\xfe', 1)
            data = frame(broken)
            expects.append(Expect(msg_id, frozenset({PARSE}), "invalid UTF-8", "framing"))
        elif kind == "batch":
            other = self.new_id()
            batch = [request, {**request, "id": other}]
            data = frame(json.dumps(batch))
            expects += [
                Expect(msg_id, frozenset({INVALID_REQUEST}), "batch", "framing"),
                Expect(other, frozenset({INVALID_REQUEST}), "batch", "framing"),
            ]
        elif kind == "nan":
            data = frame(body.replace(b'"line": 0', b'"line": NaN'))
            expects.append(Expect(msg_id, frozenset({PARSE}), "NaN", "framing"))
        elif kind == "junk-line":
            data = b"this is not a header\r\n"
            null_errors = 1
        elif kind == "empty":
            data = frame(b"")
            null_errors = 1
        else:  # "zero": a header declaring 0 bytes, then the body anyway (read as junk, then as a message)
            data = b"Content-Length: 0\r\n\r\n" + body
            expects.append(Expect(msg_id, frozenset({RESULT}), "Content-Length 0 then a body", "framing"))
            null_errors = 1
        return Case(data + follow, "framing", expects, null_id_errors=null_errors)

    def cancelled(self) -> Case:
        """A request cancelled at once (or twice, or before it was sent): answered all the same."""
        msg_id = self._id()
        method, params = self.rng.choice(
            [
                ("workspace/executeCommand", {"command": "nagent.history", "arguments": [{"uri": self._uri()}]}),
                ("workspace/executeCommand", {"command": "nagent.status"}),
                ("textDocument/hover", {"textDocument": {"uri": self._uri()}, "position": {"line": 0, "character": 0}}),
            ]
        )
        request = frame(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}))
        cancel = frame(json.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": msg_id}}))
        order = self.rng.choice([request + cancel, request + cancel + cancel, cancel + request])
        codes = frozenset({RESULT, CANCELLED, USER_ERROR, INVALID_PARAMS})
        return Case(order, "cancel", [Expect(msg_id, codes, f"{method} cancelled", "cancel")])

    def junk_notification(self) -> Case:
        uri = self._uri()
        choices: list[dict[str, Any]] = [
            {
                "method": "textDocument/didChange",
                "params": {"textDocument": {"uri": uri + ".nope", "version": 2}, "contentChanges": [{"text": "x"}]},
            },
            {"method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": "x"}}},
            {"method": "textDocument/didClose", "params": {"textDocument": {"uri": "file:///never/opened"}}},
            {"method": "textDocument/didOpen", "params": {"textDocument": {"uri": 5}}},
            {"method": "textDocument/didOpen", "params": None},
            {"method": "$/cancelRequest", "params": {"id": self.rng.choice([10**9, "nope", None, [], 1.5])}},
            {"method": "$/setTrace", "params": {"value": "loud"}},
            {"method": "workspace/didChangeConfiguration", "params": {"settings": self.rng.choice([None, 5, "x", []])}},
            {"method": "workspace/didChangeWorkspaceFolders", "params": {"event": {"added": "x", "removed": 5}}},
            {"method": "workspace/didRenameFiles", "params": {"files": [{"oldUri": 5, "newUri": None}]}},
            {"method": "window/workDoneProgress/cancel", "params": {"token": {"x": 1}}},
            {"method": self.rng.choice(UNUSUAL_METHODS), "params": {}},
            {"method": 42},
        ]
        message = {"jsonrpc": "2.0", **self.rng.choice(choices)}
        return Case(frame(json.dumps(message)), "notification")

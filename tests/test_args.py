"""Command arguments and settings values through the one strict converter: shapes, field-named errors."""

from __future__ import annotations

import pytest

from nagent_lsp.config import settings
from nagent_lsp.config.parse_args import parse_args
from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.operations.args import EditArgs, HistoryArgs, NoArgs, PatchArgs, SplitArgs


def test_one_object_a_list_holding_it_or_nothing() -> None:
    assert parse_args(PatchArgs, {"indexPath": "/x/index.json"}) == PatchArgs("/x/index.json")
    assert parse_args(PatchArgs, [{"indexPath": "/x/index.json", "dryRun": True}]).dryRun is True
    assert parse_args(NoArgs, None) == parse_args(NoArgs, []) == parse_args(NoArgs, [None]) == NoArgs()
    assert parse_args(HistoryArgs, {"uri": "file:///a", "maxCommits": 3.0}).maxCommits == 3  # JSON has one number


@pytest.mark.parametrize(
    "cls, raw, field, text",
    [
        (NoArgs, {"bogus": 1}, "bogus", "unknown field"),
        (NoArgs, "not an object", "arguments", "expected a JSON object"),
        (NoArgs, [{}, {}], "arguments", "got 2 arguments"),
        (HistoryArgs, {}, "uri", "required field is missing"),
        (HistoryArgs, {"uri": "file:///a", "maxCommits": "many"}, "maxCommits", "expected a whole number"),
        (HistoryArgs, {"uri": "file:///a", "maxCommits": True}, "maxCommits", "expected a whole number, got true"),
        (EditArgs, {"uri": "file:///a", "request": ""}, "request", "expected a non-empty string"),
        (EditArgs, {"uri": "file:///a", "request": "r", "range": [1]}, "range", "expected an object"),
        (SplitArgs, {"uri": "file:///a", "natural": "yes"}, "natural", "expected true or false"),
        (SplitArgs, {"uri": 5, "nope": 1}, "nope", "unknown field (expected natural, targetBytes, uri)"),
    ],
)
def test_bad_arguments_name_the_field(cls, raw, field, text) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_args(cls, raw)
    assert caught.value.field == field and f"'{field}'" in caught.value.message and text in caught.value.message


def test_a_refused_setting_never_shows_its_text() -> None:
    secret = "sk-live-0123456789abcdef"
    values = {key: secret for key in ("temperature", "shell", "apiKeyEnv", "denyRead", "confirmEdits", "maxSteps")}
    resolved = settings.merge([settings.Source("init", {**values, "history": {"maxCommits": secret}})])
    assert sorted(p.key for p in resolved.problems) == sorted([*values, "history.maxCommits"])
    assert all(secret not in str(p) and "keeping the previous value" in str(p) for p in resolved.problems)
    assert resolved.settings == settings.Settings()


def test_dotted_and_nested_keys_layer_per_key() -> None:
    resolved = settings.merge(
        [
            settings.Source("a", {"history.maxCommits": 7, "denyRead": ["*.secret"], "temperature": 1}),
            settings.Source("b", {"history": {"summarize": False}, "model": "", "baseUrl": None}),
        ]
    )
    s = resolved.settings
    assert (s.history.maxCommits, s.history.summarize, s.denyRead, s.temperature) == (7, False, ("*.secret",), 1.0)
    assert s.model == settings.Settings().model and not resolved.problems
    assert s.public()["denyRead"] == ["*.secret"] and s.public()["history"]["maxCommits"] == 7

"""`<nagent-replace>` (DESIGN §11): the pure matcher, the tag, and edits through the real server."""

from __future__ import annotations

from pathlib import Path

import pytest

from nagent_lsp.tags import Replace, parse_reply, protocol_rules
from nagent_lsp.text.search_replace import (
    Block,
    BlockSyntaxError,
    ReplaceFailed,
    apply_blocks,
    parse_blocks,
    render_blocks,
)
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo


def replace_tag(path: str, *blocks: tuple[str, str]) -> str:
    body = "".join(f"<<<<<<< SEARCH\n{s}\n=======\n{r}{chr(10) if r else ''}>>>>>>> REPLACE\n" for s, r in blocks)
    return f'<nagent-replace path="{path}">\n{body}</nagent-replace>'


# --- the pure matcher ----------------------------------------------------------------------------------------------


def test_exact_match_replaces_whole_lines_and_keeps_crlf_and_final_newline() -> None:
    source = "a = 1\r\nb = 2\r\nc = 3"
    applied = apply_blocks(source, [Block("b = 2", "b = 20\nb2 = 21")])
    assert applied.text == "a = 1\r\nb = 20\r\nb2 = 21\r\nc = 3"
    last = apply_blocks(source, [Block("c = 3", "c = 30")])
    assert last.text == "a = 1\r\nb = 2\r\nc = 30"  # still no final newline
    assert applied.tolerant == 0 and applied.lines == ((2, 2),)


def test_whitespace_tolerant_match_reindents_the_replacement() -> None:
    source = "class A:\n    def f(self):\n        return 1\n"
    applied = apply_blocks(source, [Block("def f(self):\n    return 1", "def f(self):\n    return 2")])
    assert applied.text == "class A:\n    def f(self):\n        return 2\n"
    assert applied.tolerant == 1
    trailing = apply_blocks("x = 1   \n", [Block("x = 1", "x = 2")])
    assert trailing.text == "x = 2\n"


def test_exact_wins_over_tolerant_and_ambiguity_is_an_error() -> None:
    source = "x = 1\n  x = 1\n"
    assert apply_blocks(source, [Block("  x = 1", "  y")]).text == "x = 1\n  y\n"
    with pytest.raises(ReplaceFailed) as err:
        apply_blocks("a\nb\na\n", [Block("a", "z")], "f.py")
    assert err.value.block == 1 and "matches 2 places" in err.value.message and "lines 1, 3" in err.value.message


def test_a_failed_block_names_itself_shows_the_closest_lines_and_applies_nothing() -> None:
    source = "".join(f"value_{i} = {i}\n" for i in range(200))
    blocks = [Block("value_3 = 3", "value_3 = 33"), Block("value_120 = 121\nvalue_121 = 121", "gone")]
    with pytest.raises(ReplaceFailed) as err:
        apply_blocks(source, blocks, "vals.py")
    message = err.value.message
    assert err.value.block == 2 and "Block 2 of 2" in message
    assert "   122| value_121 = 121" in message  # the closest lines, numbered as in the file
    assert "Nothing of this <nagent-replace> was applied" in message


def test_blocks_apply_in_order_and_deletion_works() -> None:
    applied = apply_blocks("a\nb\nc\n", [Block("a", "A"), Block("A\nb", "AB"), Block("c", "")])
    assert applied.text == "AB\n"


def test_block_syntax_errors() -> None:
    with pytest.raises(BlockSyntaxError, match="outside a block"):
        parse_blocks("hello\n")
    with pytest.raises(BlockSyntaxError, match="no ======="):
        parse_blocks("<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n")
    with pytest.raises(BlockSyntaxError, match="not closed"):
        parse_blocks("<<<<<<< SEARCH\na\n=======\nb\n")
    with pytest.raises(BlockSyntaxError, match="empty SEARCH"):
        parse_blocks("<<<<<<< SEARCH\n=======\nb\n>>>>>>> REPLACE\n")
    blocks = parse_blocks("<<<<<<< SEARCH\na\n=======\n>>>>>>> REPLACE\n")
    assert blocks == (Block("a", ""),) and parse_blocks(render_blocks(blocks)) == blocks


def test_the_tag_parses_and_a_malformed_one_rejects_the_reply() -> None:
    parsed = parse_reply(replace_tag("a.py", ("x", "y")))
    assert parsed.actions == (Replace("a.py", (Block("x", "y"),)),)
    assert parse_reply(parsed.actions[0].to_tag()).actions == parsed.actions
    bad = parse_reply('<nagent-replace path="a.py">\nx = 1\n</nagent-replace>')
    assert bad.error is not None and "outside a block" in bad.error.message
    rules = protocol_rules()
    assert "<nagent-replace" in rules and "Prefer <nagent-replace>" in rules
    example = rules[rules.index('<nagent-replace path="PATH">\n') : rules.index("</nagent-replace>\n- ") + 17]
    assert isinstance(parse_reply(example).actions[0], Replace)


# --- through the server --------------------------------------------------------------------------------------------

LINES = 5000


def big_file(workspace: Path) -> Path:
    source = "".join(f"def function_{i}(x):\n    return x + {i}\n\n" for i in range(LINES // 3)) + "# end\n"
    assert source.count("\n") >= LINES - 3
    build_repo(workspace, [Commit("big", {"big.py": source})])
    return workspace / "big.py"


async def test_a_replace_on_a_5000_line_file_arrives_as_one_minimal_edit(workspace, editors, fake_model) -> None:
    target = big_file(workspace)
    original = target.read_text()
    tag = replace_tag(
        "big.py", ("def function_1200(x):\n    return x + 1200", "def function_1200(x):\n    return x * 2")
    )
    fake_model.script(text(tag), text("<nagent-response>doubled</nagent-response>"))
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "double 1200"})
        assert result["applied"] is True and result["edits"] == 1, result
        expected = original.replace("    return x + 1200\n", "    return x * 2\n")
        assert editor.text(target) == expected
        edit = editor.recorded.apply_edits[-1].edit
        sent = edit.document_changes[0].edits if edit.document_changes else next(iter(edit.changes.values()))
        assert len(sent) == 1 and len(sent[0].new_text) < 40
    convo = Path(result["conversation"]["path"]).read_text()
    assert '<nagent-replace-result path="big.py" status="ok"' in convo
    # The model's second request carried only the result, not a copy of the file.
    assert len(fake_model.chat_requests[1].messages[-1]["content"]) < 2000


async def test_a_failed_block_is_an_error_result_and_nothing_is_applied(workspace, editors, fake_model) -> None:
    target = big_file(workspace)
    original = target.read_text()
    tag = replace_tag(
        "big.py",
        ("def function_10(x):\n    return x + 10", "def function_10(x):\n    return 0"),
        ("def function_11(x):\n    return x + 999", "nothing"),
    )
    fake_model.script(text(tag), text("<nagent-response>gave up</nagent-response>"))
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "change"})
        assert result["applied"] is False and result["reason"] == "no change"
        assert editor.text(target) == original
    second = fake_model.chat_requests[1].messages[-1]["content"]
    assert 'status="error"' in second and 'block="2"' in second
    assert "Block 2 of 2 did not match" in second
    assert "def function_11(x):" in second and "return x + 11" in second  # the closest lines


async def test_replace_is_held_to_the_write_policy(workspace, editors, fake_model, tmp_path) -> None:
    target = big_file(workspace)
    outside = tmp_path / "outside.py"
    outside.write_text("a = 1\n")
    fake_model.script(
        text(replace_tag(str(outside), ("a = 1", "a = 2"))), text("<nagent-response>no</nagent-response>")
    )
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "x"})
    assert result["applied"] is False and outside.read_text() == "a = 1\n"
    assert "not allowed" in fake_model.chat_requests[1].messages[-1]["content"]

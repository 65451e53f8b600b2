"""nagent.split / nagent.patch / nagent.summarize end to end through the protocol, as real editors."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.text.edits import split_lines
from tests.harness.fake_openai import text


def big_module(functions: int = 2300) -> str:
    """~200 KB of Python with non-ASCII and astral characters (positions differ per encoding)."""
    parts = ['"""A big module é."""\n\nimport os\n\n\n']
    for i in range(functions):
        parts.append(f"def function_{i}(value):\n    # 😀 note {i}\n    total = value + {i}\n    return total\n\n\n")
    return "".join(parts)


def _segments_text(result: dict) -> str:
    return b"".join(Path(s["path"]).read_bytes() for s in result["segments"]).decode("utf-8")


async def test_split_edit_one_segment_patch_applies_minimal_edits(profile, workspace, editors) -> None:
    source = workspace / "big_module.py"
    original = big_module()
    assert len(original.encode()) > 200_000
    source.write_text(original, encoding="utf-8")
    async with editors.open(profile, workspace) as editor:
        uri = editor.open(source)
        split = await editor.command("nagent.split", {"uri": uri})
        assert split["splitType"] == "py" and len(split["segments"]) >= 6
        assert _segments_text(split) == original
        for seg in split["segments"][1:]:
            assert Path(seg["path"]).read_text(encoding="utf-8").startswith("def function_")
        lines = split_lines(original)
        assert [s["startLine"] for s in split["segments"]][0] == 1
        assert split["segments"][-1]["endLine"] == len(lines)

        seg = Path(split["segments"][3]["path"])
        edited = seg.read_text(encoding="utf-8").replace("total = value + ", "total = value * ", 1)
        seg.write_text(edited, encoding="utf-8")
        merged = _segments_text(split)

        result = await editor.command("nagent.patch", {"indexPath": split["indexPath"]})
        assert result["changed"] is True and result["applied"] is True
        assert result["uri"] == uri
        assert len(editor.recorded.apply_edits) == 1
        edit = editor.recorded.apply_edits[0].edit
        sent = [e for change in (edit.document_changes or []) for e in change.edits] or [
            e for edits in (edit.changes or {}).values() for e in edits
        ]
        assert result["edits"] == len(sent) == 1
        assert len(sent[0].new_text) <= 2  # a minimal hunk, not a whole-file replace
        assert editor.text(source) == merged
        assert source.read_text(encoding="utf-8") == original  # the editor owns the write
        diff = Path(result["patchPath"]).read_text(encoding="utf-8")
        assert Path(result["patchPath"]).parent == workspace.resolve() / ".nagent" / "patches"
        assert "-    total = value + " in diff and "+    total = value * " in diff


async def test_buffer_changed_after_split_needs_force(workspace, editors) -> None:
    source = workspace / "big_module.py"
    original = big_module(300)
    source.write_text(original, encoding="utf-8")
    async with editors.open("vscode", workspace) as editor:
        editor.open(source)
        split = await editor.command("nagent.split", {"uri": editor.uri(source), "targetBytes": 4096})
        seg = Path(split["segments"][0]["path"])
        seg.write_text("# added by the model\n" + seg.read_text(encoding="utf-8"), encoding="utf-8")
        editor.change(source, original + "# the user typed this\n")

        error = await editor.command_error("nagent.patch", {"indexPath": split["indexPath"]})
        assert "hash does not match" in error.message
        assert editor.recorded.apply_edits == []

        dry = await editor.command("nagent.patch", {"indexPath": split["indexPath"], "force": True, "dryRun": True})
        assert dry["changed"] is True and dry["applied"] is False and editor.recorded.apply_edits == []

        forced = await editor.command("nagent.patch", {"indexPath": split["indexPath"], "force": True})
        assert forced["applied"] is True
        # Forced: the segments win, so the user's unsplit line is gone and the model's header is in.
        assert editor.text(source) == "# added by the model\n" + original

        error = await editor.command_error("nagent.patch", {"indexPath": str(workspace / "nope" / "index.json")})
        assert "index not found" in error.message
        error = await editor.command_error("nagent.patch", {})
        assert error.code == -32602 and "indexPath" in error.message


async def test_summary_requested_once_per_content(workspace, editors, fake_model) -> None:
    source = workspace / "small.py"
    source.write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    fake_model.script(text("Adds two numbers."), text("Adds two numbers, now documented."))
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(source)
        uri = editor.uri(source)
        first = await editor.command("nagent.summarize", {"uri": uri})
        assert first == {"summary": "Adds two numbers.", "mode": "inline", "cached": False}
        again = await editor.command("nagent.summarize", {"uri": uri})
        assert again == {"summary": "Adds two numbers.", "mode": "inline", "cached": True}
        assert len(fake_model.chat_requests) == 1
        editor.change(source, '"""Math."""\ndef add(a, b):\n    return a + b\n')  # unsaved edit counts
        third = await editor.command("nagent.summarize", {"uri": uri})
        assert third == {"summary": "Adds two numbers, now documented.", "mode": "inline", "cached": False}
        assert len(fake_model.chat_requests) == 2
        assert '"""Math."""' in fake_model.chat_requests[1].messages[-1]["content"]


async def test_summarize_without_model_is_a_clear_error(workspace, editors) -> None:
    source = workspace / "small.py"
    source.write_text("x = 1\n", encoding="utf-8")
    async with editors.open("neovim", workspace) as editor:
        error = await editor.command_error("nagent.summarize", {"uri": editor.uri(source)})
        assert "No model configured" in error.message

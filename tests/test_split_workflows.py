"""split / patch / summarize workflows with an in-memory editor port (no LSP): contract results and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nagent_lsp.config.convert import to_wire
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.core.model import Message
from nagent_lsp.core.ports import ApplyOutcome, Buffer, FileChange
from nagent_lsp.operations import patch as patch_op
from nagent_lsp.operations import split as split_op
from nagent_lsp.operations import summarize as summarize_op
from nagent_lsp.operations.args import PatchArgs, SplitArgs, UriArgs
from nagent_lsp.operations.session import Session
from nagent_lsp.operations.summarize import file_summary_block
from nagent_lsp.text.edits import apply_edits, minimal_edits


# The operations return typed results; these tests check the JSON the wire and `--json` carry (`to_wire`).
def split(*args: Any) -> Any:
    return to_wire(split_op.split(*args))


async def patch(*args: Any) -> Any:
    return to_wire(await patch_op.patch(*args))


async def summarize(*args: Any) -> Any:
    return to_wire(await summarize_op.summarize(*args))


class MemoryPort:
    """Open buffers in memory; apply_change applies minimal edits the way an editor would."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.buffers: dict[Path, list] = {}
        self.changes: list[FileChange] = []
        self.accept = True
        self.logs: list[str] = []

    def workspace_folders(self) -> list[Path]:
        return [self.folder]

    def read_buffer(self, path: Path) -> Buffer | None:
        if path not in self.buffers:
            return None
        text, version = self.buffers[path]
        return Buffer(path, text, version, path.as_uri())

    async def apply_change(self, change: FileChange) -> ApplyOutcome:
        self.changes.append(change)
        if not self.accept:
            return ApplyOutcome(False, 0, "rejected")
        text, version = self.buffers[change.path]
        edits = minimal_edits(text, change.new_text)
        self.buffers[change.path] = [apply_edits(text, edits), version + 1]
        return ApplyOutcome(True, len(edits), None, change.new_text)

    def log(self, level: str, message: str) -> None:
        self.logs.append(message)


def big_python(n: int = 1500) -> str:
    return "".join(f"def function_{i}(x):\r\n    '''doc é😀'''\r\n    return x + {i}\r\n\r\n\r\n" for i in range(n))


@pytest.fixture
def env(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session(workspace_folders=[ws])
    return ws, session, MemoryPort(ws)


async def test_split_reads_the_buffer_not_the_disk(env):
    ws, session, port = env
    path = ws / "big.py"
    path.write_text("on disk\n")
    text = big_python()
    port.buffers[path] = [text, 3]
    result = split(session, port, SplitArgs(uri=path.as_uri(), targetBytes=8192))
    assert set(result) == {"indexPath", "splitType", "sha256", "segments"}
    assert result["splitType"] == "py"
    assert Path(result["indexPath"]).parent.parent == ws / ".nagent" / "splits"
    merged = b"".join(Path(s["path"]).read_bytes() for s in result["segments"])
    assert merged == text.encode()
    assert [s["index"] for s in result["segments"]] == list(range(1, len(result["segments"]) + 1))
    assert all(Path(s["path"]).read_text().startswith("def function_") for s in result["segments"])


async def test_split_errors(env):
    ws, session, port = env
    with pytest.raises(InvalidArgument, match="uri"):
        split(session, port, SplitArgs(uri="untitled:Untitled-1"))
    with pytest.raises(UserError, match="file not found"):
        split(session, port, SplitArgs(uri=(ws / "missing.py").as_uri()))
    (ws / "bin.dat").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="not UTF-8"):
        split(session, port, SplitArgs(uri=(ws / "bin.dat").as_uri()))
    (ws / "x.py").write_text("x\n")
    with pytest.raises(InvalidArgument, match="targetBytes"):
        split(session, port, SplitArgs(uri=(ws / "x.py").as_uri(), targetBytes=0))


async def test_patch_delivers_minimal_edits_through_the_port_and_leaves_disk_alone(env):
    ws, session, port = env
    path = ws / "big.py"
    text = big_python()
    path.write_text(text, newline="")
    port.buffers[path] = [text, 1]
    result = split(session, port, SplitArgs(uri=path.as_uri()))
    seg = Path(result["segments"][2]["path"])
    seg.write_bytes(seg.read_bytes().replace(b"return x + ", b"return x - ", 1))
    out = await patch(session, port, PatchArgs(indexPath=result["indexPath"]))
    assert out["changed"] and out["applied"] and out["uri"] == path.as_uri()
    assert out["edits"] == 1
    expected = b"".join(Path(s["path"]).read_bytes() for s in result["segments"]).decode()
    assert port.buffers[path][0] == expected
    assert path.read_bytes() == text.encode()  # the editor owns the write
    (change,) = port.changes
    assert change.base_text == text and change.base_version == 1
    diff = Path(out["patchPath"]).read_bytes().decode()
    assert Path(out["patchPath"]).parent == ws / ".nagent" / "patches"
    assert diff.startswith("--- a/big.py\n+++ b/big.py\n") and "-    return x + " in diff
    # The index was refreshed: it now matches the new buffer, so a second patch finds nothing to do.
    index = json.loads(Path(result["indexPath"]).read_text())
    assert index["source_sha256"] != result["sha256"]
    again = await patch(session, port, PatchArgs(indexPath=result["indexPath"]))
    assert again == {"changed": False, "applied": False, "uri": path.as_uri(), "edits": 0, "patchPath": None}


async def test_patch_hash_mismatch_unless_forced_and_dry_run(env):
    ws, session, port = env
    path = ws / "big.py"
    text = big_python(300)
    port.buffers[path] = [text, 1]
    result = split(session, port, SplitArgs(uri=path.as_uri()))
    seg = Path(result["segments"][0]["path"])
    seg.write_bytes(b"# header\r\n" + seg.read_bytes())
    port.buffers[path] = [text + "# typed by the user\r\n", 2]
    with pytest.raises(UserError, match="source hash does not match"):
        await patch(session, port, PatchArgs(indexPath=result["indexPath"]))
    dry = await patch(session, port, PatchArgs(indexPath=result["indexPath"], force=True, dryRun=True))
    assert dry["changed"] and not dry["applied"] and dry["edits"] == 2 and Path(dry["patchPath"]).is_file()
    assert port.changes == [] and port.buffers[path][1] == 2
    forced = await patch(session, port, PatchArgs(indexPath=result["indexPath"], force=True))
    assert forced["applied"] and port.buffers[path][0].startswith("# header\r\n")


async def test_patch_not_applied_is_reported_honestly(env):
    ws, session, port = env
    path = ws / "a.py"
    port.buffers[path] = ["a = 1\n" * 10, 1]
    result = split(session, port, SplitArgs(uri=path.as_uri(), targetBytes=12))
    Path(result["segments"][0]["path"]).write_text("a = 2\n")
    port.accept = False
    out = await patch(session, port, PatchArgs(indexPath=result["indexPath"]))
    assert out["changed"] and not out["applied"] and out["patchPath"] is None
    assert any("rejected" in line for line in port.logs)
    # Not applied: the index still describes the buffer, so the patch can be retried.
    port.accept = True
    assert (await patch(session, port, PatchArgs(indexPath=result["indexPath"])))["applied"]


async def test_patch_missing_index_is_a_user_error(env):
    ws, session, port = env
    with pytest.raises(UserError, match="index not found"):
        await patch(session, port, PatchArgs(indexPath=str(ws / "nope" / "index.json")))


class CountingModel:
    def __init__(self):
        self.calls: list[list[Message]] = []

    async def __call__(self, messages: list[Message]) -> str:
        self.calls.append(messages)
        return f"summary number {len(self.calls)}"


async def test_summarize_inline_is_cached_by_content(env):
    ws, session, port = env
    path = ws / "small.py"
    port.buffers[path] = ["x = 1\n", 1]
    model = CountingModel()
    first = await summarize(session, port, UriArgs(uri=path.as_uri()), model)
    assert first == {"summary": "summary number 1", "mode": "inline", "cached": False}
    assert "File: " in model.calls[0][1].content and "x = 1" in model.calls[0][1].content
    again = await summarize(session, port, UriArgs(uri=path.as_uri()), model)
    assert again == {"summary": "summary number 1", "mode": "inline", "cached": True}
    port.buffers[path] = ["x = 2\n", 2]  # unsaved edit: new content, new summary
    third = await summarize(session, port, UriArgs(uri=path.as_uri()), model)
    assert third["cached"] is False and len(model.calls) == 2
    assert "summary number 2" in file_summary_block(session, path, "x = 2\n")


async def test_summarize_large_file_per_segment_then_combined_and_reuses_unchanged_segments(env):
    ws, session, port = env
    path = ws / "big.py"
    text = big_python()  # ~100 KB
    port.buffers[path] = [text, 1]
    model = CountingModel()
    result = await summarize(session, port, UriArgs(uri=path.as_uri()), model)
    assert result["mode"] == "split" and not result["cached"]
    segments = len(model.calls) - 1
    assert segments >= 3
    assert "Lines 1-" in model.calls[-1][1].content
    # Change the end of the file: only the last segment and the combined summary are asked again.
    port.buffers[path] = [text + "def tail():\r\n    pass\r\n", 2]
    await summarize(session, port, UriArgs(uri=path.as_uri()), model)
    assert len(model.calls) == segments + 1 + 2


async def test_summarize_without_model_says_what_to_set(env):
    ws, session, port = env
    path = ws / "small.py"
    port.buffers[path] = ["x = 1\n", 1]
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        await summarize(session, port, UriArgs(uri=path.as_uri()))

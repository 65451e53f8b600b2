"""One request must not freeze or kill the server (DESIGN §12, issue 12 item 3), through the real server.

Special files (FIFOs, /dev/zero, /dev/stdin, links to them) are refused before they are opened; a file over
`maxFileBytes` is refused by its size before it is read; a large split runs in a worker thread while other
requests are answered; splitting is linear in the file's size.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from nagent_lsp.agent.splits import refresh_split, split_text
from nagent_lsp.text.segments import _Cutter, plan_segments
from nagent_lsp.text.split_rules import RULES
from tests.harness.fake_openai import text
from tests.harness.lsp import open_editor

INVALID_PARAMS = -32602
MIB = 1024 * 1024


def special_files(workspace: Path) -> dict[str, Path]:
    fifo = workspace / "pipe.py"
    os.mkfifo(fifo)
    links = {"zero.py": "/dev/zero", "stdin.py": "/dev/stdin", "environ.txt": "/proc/self/environ"}
    for name, target in links.items():
        (workspace / name).symlink_to(target)
    return {"fifo": fifo, **{name: workspace / name for name in links}}


async def test_special_files_are_refused_without_blocking(workspace, editors) -> None:
    files = special_files(workspace)
    async with editors.open("vscode", workspace) as editor:
        for uri in [p.as_uri() for p in files.values()] + ["file:///dev/zero", "file:///dev/stdin"]:
            for command in ("nagent.split", "nagent.summarize"):
                error = await editor.command_error(command, {"uri": uri})
                assert error.code == INVALID_PARAMS and "'uri'" in error.message, error.message
        fifo = await editor.command_error("nagent.split", {"uri": files["fifo"].as_uri()})
        assert "FIFO" in fifo.message and "regular file" in fifo.message
        zero = await editor.command_error("nagent.split", {"uri": "file:///dev/zero"})
        assert "outside the workspace" in zero.message
        # The server is alive and answering (a blocked read would have stalled the loop for good).
        status = await editor.command("nagent.status")
        assert status["workspaceFolders"] == [str(workspace.resolve())]
    splits = workspace / ".nagent" / "splits"
    assert not splits.exists() or not any(splits.iterdir())


async def test_the_models_reads_of_special_files_are_errors_not_hangs(workspace, editors, fake_model) -> None:
    special_files(workspace)
    target = workspace / "app.py"
    target.write_text("x = 1\n", encoding="utf-8")
    reads = [
        '<nagent-read path="pipe.py"/>',
        '<nagent-file-read path="pipe.py"/>',
        '<nagent-read path="zero.py"/>',
        '<nagent-file-read path="stdin.py"/>',
        '<nagent-read path="environ.txt"/>',
    ]
    fake_model.script(text("\n".join(reads)), text("<nagent-response>none of them</nagent-response>"))
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "read the pipes"})
    assert result["response"] == "none of them"
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    convo = convo.split("</initial_context>", 1)[-1]  # the results, not the rules (which name the refusals too)
    assert convo.count("FIFO (named pipe), not a regular file") == 2
    assert convo.count("outside the workspace") == 3  # /dev/zero, /dev/stdin (a pipe in /proc), /proc/self/environ


async def test_files_over_max_file_bytes_are_refused_by_their_size(workspace, editors, fake_model) -> None:
    huge = workspace / "huge.py"
    with huge.open("wb") as f:  # 300 MB, sparse: its size is what the server sees first
        f.truncate(300 * 1000 * 1000)
    target = workspace / "app.py"
    target.write_text("x = 1\n", encoding="utf-8")
    fake_model.script(
        text('<nagent-read path="huge.py"/>\n<nagent-file-read path="huge.py"/>'),
        text("<nagent-response>too big</nagent-response>"),
    )
    async with editors.open("neovim", workspace, model=True) as editor:
        for command, extra in (("nagent.split", {}), ("nagent.summarize", {}), ("nagent.edit", {"request": "x"})):
            error = await editor.command_error(command, {"uri": huge.as_uri(), **extra})
            assert error.code == INVALID_PARAMS, error.message
            assert "300000000 bytes" in error.message and "maxFileBytes (52428800)" in error.message, error.message
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "read it"})
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert convo.count("more than maxFileBytes") == 2
    assert len(fake_model.chat_requests) == 2


async def test_max_file_bytes_setting_bounds_disk_files_and_open_buffers(workspace, tmp_path) -> None:
    small, large = workspace / "small.txt", workspace / "large.txt"
    small.write_text("a\n" * 100, encoding="utf-8")
    large.write_text("b\n" * 3000, encoding="utf-8")
    async with open_editor("vscode", workspace, tmp_path / "home", init_options={"maxFileBytes": 4096}) as editor:
        assert (await editor.command("nagent.split", {"uri": small.as_uri()}))["segments"]
        error = await editor.command_error("nagent.split", {"uri": large.as_uri()})
        assert error.code == INVALID_PARAMS and "6000 bytes" in error.message and "maxFileBytes (4096)" in error.message
        editor.open(small, "c\n" * 3000)  # an open buffer over the limit is refused too
        error = await editor.command_error("nagent.split", {"uri": small.as_uri()})
        assert "maxFileBytes (4096)" in error.message


async def test_a_large_split_runs_off_the_event_loop(workspace, editors) -> None:
    big = workspace / "big.py"
    big.write_bytes(b"\n" * (40 * MIB))  # every line a boundary: the slowest kind of file to plan
    async with editors.open("vscode", workspace) as editor:
        request_id, split = editor.start_command("nagent.split", {"uri": big.as_uri(), "targetBytes": 4 * MIB})
        status = await editor.command("nagent.status")
        # Answered while the split is still running: the split is not on the event loop.
        assert status["workspaceFolders"] and not split.done()
        result = await asyncio.wait_for(split, 120)
    assert sum(Path(s["path"]).stat().st_size for s in result["segments"]) == 40 * MIB


def test_cleanup_deletes_only_files_the_old_index_listed(tmp_path) -> None:
    source = tmp_path / "notes.txt"
    result = split_text("".join(f"paragraph {i}\n\n" for i in range(100)), source, tmp_path / "splits", target_bytes=64)
    folder = result.index_path.parent
    lookalike = folder / "notes-0999.txt"
    lookalike.write_text("not a segment of this index\n")
    neighbour = tmp_path / "notes-0002.txt"
    neighbour.write_text("the user's file\n")
    refresh_split(result.index_path, "short\n")
    assert lookalike.exists() and neighbour.exists()
    assert sorted(p.name for p in folder.iterdir()) == ["index.json", "notes-0001.txt", "notes-0999.txt"]


def test_a_windows_boundary_scan_stops_at_the_window() -> None:
    # Splitting was quadratic: every window's regex scan ran on to the end of the file when the window held no
    # boundary (10 MB took seconds, 300 MB never finished). The scan now stops a line past the window.
    data = b"x = 1\n" * 1_000_000  # 6 MB without a single Python boundary
    rules = RULES["py"]
    scanned: list[tuple[int, int]] = []

    class Recording:
        def finditer(self, string: bytes, pos: int, endpos: int):
            scanned.append((pos, endpos))
            return rules.pattern.finditer(string, pos, endpos)

    cutter = _Cutter(data, rules)
    assert list(cutter.candidates(1000, 5000, Recording())) == []  # type: ignore[arg-type]
    ((pos, endpos),) = scanned
    assert pos <= 1000 and endpos - pos < 5000
    assert plan_segments(data, "py", 32 * 1024)[-1].end_byte == len(data)


def test_a_segment_that_is_a_link_is_never_followed(tmp_path) -> None:
    import pytest

    from nagent_lsp.agent.splits import plan_patch
    from nagent_lsp.core.errors import PatchError

    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE\n")
    text = "".join(f"line {i}\n" for i in range(200))
    result = split_text(text, tmp_path / "notes.txt", tmp_path / "splits", target_bytes=256)
    first = Path(result.index["segments"][0]["path"])
    first.unlink()
    first.symlink_to(outside)
    with pytest.raises(PatchError, match="symbolic link"):
        plan_patch(result.index_path, text)
    refresh_split(result.index_path, "short\n")  # the re-split replaces the link; its target is untouched
    assert outside.read_text() == "OUTSIDE\n" and not first.is_symlink()

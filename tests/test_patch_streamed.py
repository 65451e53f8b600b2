"""`nagent-lsp patch` on disk is planned per changed segment and streamed into its transaction (issue 29): the file it
writes, the diff, the re-index and the all-or-nothing write must be exactly those of the whole-text path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from nagent_lsp.agent.splits import plan_patch, split_text
from nagent_lsp.core.errors import PatchError, SplitError
from tests.harness.gitrepo import Commit, build_repo
from tests.test_cli import cli

BODY = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(9000))


def _split(workspace: Path) -> tuple[dict, list[Path]]:
    build_repo(workspace, [Commit("big", {"big.py": BODY})])
    out = cli("split", "big.py", cwd=workspace)
    assert out.returncode == 0, out.stderr
    split = json.loads(out.stdout)
    return split, [Path(s["path"]) for s in split["segments"]]


def _patch(workspace: Path, index: str, *extra: str, env: dict[str, str] | None = None) -> dict:
    out = cli("patch", index, *extra, cwd=workspace, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _applies(diff: Path, old: str, new: str, tmp: Path) -> None:
    """The written diff turns the old file into the new one (`git apply`, outside any repository)."""
    scratch = tmp / "apply"
    scratch.mkdir()
    (scratch / "big.py").write_text(old)
    done = subprocess.run(["git", "apply", str(diff)], cwd=scratch, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (scratch / "big.py").read_text() == new


def test_edits_in_separate_segments_and_a_dropped_line_break(workspace: Path, tmp_path: Path) -> None:
    split, segs = _split(workspace)
    assert len(segs) > 6
    index = json.loads(Path(split["indexPath"]).read_text())
    assert index["segments"][0]["start_byte"] == 0
    assert index["segments"][-1]["end_byte"] == len(BODY.encode())
    segs[1].write_text(segs[1].read_text().replace("return ", "return -", 1))
    segs[4].write_text(segs[4].read_text().rstrip("\n"))  # its last line break dropped: restored by the patch
    segs[-1].write_text(segs[-1].read_text() + "# tail\n")
    expected = "".join(s.read_text() + ("\n" if i == 4 else "") for i, s in enumerate(segs))
    result = _patch(workspace, split["indexPath"])
    assert result["applied"] is True and result["edits"] >= 3
    assert (workspace / "big.py").read_text() == expected
    _applies(Path(result["patchPath"]), BODY, expected, tmp_path)
    # The index now describes the new file, byte offsets included: a second edit patches on top of the first.
    segs[2].write_text("# replaced\n")
    second = _patch(workspace, split["indexPath"])
    again = "".join(s.read_text() for s in segs)
    assert second["applied"] is True
    assert (workspace / "big.py").read_text() == again
    reindexed = json.loads(Path(split["indexPath"]).read_text())
    assert reindexed["segments"][-1]["end_byte"] == len(again.encode())
    assert reindexed["source_line_count"] == again.count("\n")


def test_unchanged_segments_change_nothing(workspace: Path) -> None:
    split, _ = _split(workspace)
    result = _patch(workspace, split["indexPath"])
    assert result == {**result, "changed": False, "applied": False, "patchPath": None}
    assert (workspace / "big.py").read_text() == BODY


def test_a_file_changed_since_the_split_is_refused(workspace: Path) -> None:
    split, segs = _split(workspace)
    segs[0].write_text("# edited\n")
    (workspace / "big.py").write_text(BODY + "# the user's own line\n")
    out = cli("patch", split["indexPath"], cwd=workspace)
    assert out.returncode != 0 and "changed since it was split" in out.stderr
    assert (workspace / "big.py").read_text() == BODY + "# the user's own line\n"


def test_dry_run_writes_the_diff_only(workspace: Path, tmp_path: Path) -> None:
    split, segs = _split(workspace)
    segs[3].write_text(segs[3].read_text() + "# added\n")
    result = _patch(workspace, split["indexPath"], "--dry-run")
    assert result["changed"] is True and result["applied"] is False
    assert (workspace / "big.py").read_text() == BODY
    _applies(Path(result["patchPath"]), BODY, "".join(s.read_text() for s in segs), tmp_path)


def test_a_killed_streamed_write_is_all_or_nothing(workspace: Path) -> None:
    split, segs = _split(workspace)
    segs[2].write_text(segs[2].read_text() + "# added\n")
    new = "".join(s.read_text() for s in segs)
    # Killed after the temp file, before the journal: nothing changed.
    killed = cli("patch", split["indexPath"], cwd=workspace, env={"NAGENT_LSP_TEST_CRASH_AFTER": "1"})
    assert killed.returncode == 137
    assert (workspace / "big.py").read_text() == BODY
    cli("split", "big.py", cwd=workspace)  # any command recovers first
    assert (workspace / "big.py").read_text() == BODY
    # Killed after the journal (the commit point): the next command finishes it.
    killed = cli("patch", split["indexPath"], cwd=workspace, env={"NAGENT_LSP_TEST_CRASH_AFTER": "2"})
    assert killed.returncode == 137
    cli("split", "big.py", cwd=workspace)
    assert (workspace / "big.py").read_text() == new


def test_split_and_patch_agree_on_max_file_bytes(tmp_path: Path) -> None:
    source = tmp_path / "a.py"
    text = "x = 1\n" * 100
    source.write_text(text)
    with pytest.raises(SplitError, match=r"more than maxFileBytes \(100\); raise the maxFileBytes setting"):
        split_text(text, source, tmp_path / "splits", max_bytes=100)
    result = split_text(text, source, tmp_path / "splits", target_bytes=64, max_bytes=len(text))
    with pytest.raises(PatchError, match=r"more than maxFileBytes \(100 bytes\); raise the maxFileBytes setting"):
        plan_patch(result.index_path, text, max_bytes=100)
    assert plan_patch(result.index_path, text, max_bytes=len(text)).merged == text

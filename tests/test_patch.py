"""patch domain: validation errors, merge, repaired line breaks, diff artifact, re-index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nagent_lsp.agent.splits import plan_patch, refresh_after_apply, reindex, split_text
from nagent_lsp.core.errors import PatchError
from nagent_lsp.store.patches import write_patch
from nagent_lsp.store.split_index import load_index, write_index
from nagent_lsp.text.edits import split_lines, unified_diff

TEXT = "".join(f"def f{i}():\r\n    return {i}  # é😀\r\n\r\n" for i in range(60))


def _split(tmp_path: Path, text: str = TEXT, target: int = 200):
    return split_text(text, tmp_path / "mod.py", tmp_path / "splits", target_bytes=target)


def _seg(index: dict, i: int) -> Path:
    return Path(index["segments"][i]["path"])


def test_unchanged_segments_merge_to_the_current_text(tmp_path):
    result = _split(tmp_path)
    plan = plan_patch(result.index_path, TEXT)
    assert plan.merged == TEXT and not plan.changed


def test_edit_one_segment_merges_and_reindexes(tmp_path):
    result = _split(tmp_path)
    seg = _seg(result.index, 1)
    seg.write_bytes(seg.read_bytes() + b"def added():\r\n    pass\r\n\r\n")
    plan = plan_patch(result.index_path, TEXT)
    assert plan.changed and "def added():\r\n" in plan.merged
    index = reindex(plan)
    assert index == load_index(result.index_path)
    assert index["source_line_count"] == len(split_lines(plan.merged))
    assert index["segments"][1]["end_line_num"] - index["segments"][1]["start_line_num"] + 1 == len(
        split_lines(seg.read_bytes().decode("utf-8"))
    )
    # The index now describes the merged text: a second patch against it validates and changes nothing.
    assert not plan_patch(result.index_path, plan.merged).changed


def test_hash_mismatch_is_rejected_unless_forced(tmp_path):
    result = _split(tmp_path)
    edited_buffer = TEXT.replace("return 3 ", "return 33 ")
    with pytest.raises(PatchError, match=r"source hash does not match index.json \(expected [0-9a-f]{64}, got"):
        plan_patch(result.index_path, edited_buffer)
    plan = plan_patch(result.index_path, edited_buffer, force=True)
    assert plan.merged == TEXT and plan.changed


def test_missing_index_and_missing_segment(tmp_path):
    with pytest.raises(PatchError, match="index not found"):
        plan_patch(tmp_path / "none" / "index.json", "")
    result = _split(tmp_path)
    _seg(result.index, 2).unlink()
    with pytest.raises(PatchError, match="segment not found: .*mod-0003.py"):
        plan_patch(result.index_path, TEXT)


def _rewrite(index_path: Path, change) -> None:
    """An index the server itself wrote wrong (a bug, not a stranger): re-stamped with this user's MAC, so what is
    tested is the index's own checks, which still stand behind the MAC."""
    index = json.loads(index_path.read_text())
    change(index)
    write_index(index_path, index)


def test_gap_and_overlap_are_named(tmp_path):
    result = _split(tmp_path)
    _rewrite(result.index_path, lambda ix: ix["segments"].pop(1))
    with pytest.raises(PatchError, match=r"not contiguous.*gap at lines \d+-\d+"):
        plan_patch(result.index_path, TEXT)

    result = _split(tmp_path)

    def overlap(ix):
        ix["segments"][2]["start_line_num"] -= 1

    _rewrite(result.index_path, overlap)
    with pytest.raises(PatchError, match=r"segments overlap in index.json: segment 3 starts at line"):
        plan_patch(result.index_path, TEXT)

    result = _split(tmp_path)
    _rewrite(result.index_path, lambda ix: ix["segments"].pop())
    with pytest.raises(PatchError, match="cover lines 1-\\d+ but the source had 180 lines"):
        plan_patch(result.index_path, TEXT)


def test_index_without_segments_or_source(tmp_path):
    result = _split(tmp_path)
    _rewrite(result.index_path, lambda ix: ix.update(segments=[]))
    with pytest.raises(PatchError, match="has no segments"):
        plan_patch(result.index_path, TEXT)
    _rewrite(result.index_path, lambda ix: ix.pop("source_path"))
    with pytest.raises(PatchError, match="missing source_path"):
        plan_patch(result.index_path, TEXT)


def test_dropped_final_line_break_of_a_segment_is_restored(tmp_path):
    result = _split(tmp_path)
    seg = _seg(result.index, 0)
    original = seg.read_bytes().decode()
    seg.write_bytes(original.rstrip("\r\n").encode())
    plan = plan_patch(result.index_path, TEXT)
    assert plan.repaired == [0]
    assert plan.merged == original.rstrip("\r\n") + "\r\n" + TEXT[len(original) :]
    reindex(plan)
    assert seg.read_bytes().endswith(b"\r\n")


def test_write_patch_is_a_unified_diff_and_none_when_unchanged(tmp_path):
    assert write_patch(tmp_path / "patches", Path("a.py"), unified_diff("x\n", "x\n", "a.py")) is None
    path = write_patch(tmp_path / "patches", Path("/w/a.py"), unified_diff("x\ny\n", "x\nz\n", "a.py"))
    assert path.parent == tmp_path / "patches" and path.suffix == ".patch"
    assert path.read_text() == "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"


def test_refresh_after_a_three_way_merge_resplits(tmp_path):
    result = _split(tmp_path)
    plan = plan_patch(result.index_path, TEXT)
    final = "user line\n" + TEXT
    index = refresh_after_apply(plan, final)
    merged = b"".join(Path(s["path"]).read_bytes() for s in index["segments"])
    assert merged == final.encode()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["a\n", "b\r\n", "\n", "é😀\n", "def x():\n", "  y\n", "z"]), min_size=1, max_size=60),
    st.integers(20, 200),
    st.text(alphabet="qé😀\r\n", max_size=10),
)
def test_patch_after_any_segment_edit_equals_concatenation(tmp_path, pieces, target, insert):
    text = "".join(pieces)
    result = split_text(text, tmp_path / "f.py", tmp_path / "splits", target_bytes=target)
    seg = _seg(result.index, len(result.index["segments"]) // 2)
    seg.write_bytes(insert.encode() + seg.read_bytes())
    plan = plan_patch(result.index_path, text)
    expected = b"".join(Path(s["path"]).read_bytes() for s in result.index["segments"]).decode()
    if not plan.repaired:
        assert plan.merged == expected
    reindex(plan)
    assert not plan_patch(result.index_path, plan.merged).changed

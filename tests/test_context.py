"""Root context layers and the initial-context builder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nagent_lsp.agent.context import (
    CLOSE_TAG,
    INLINE_LIMIT,
    InstanceFacts,
    Selection,
    build_initial_context,
)
from nagent_lsp.agent.context_layers import default_layer_dirs, load_layer, load_layers, root_context, yaml_paths


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def layer(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / ".nagent"
    path.mkdir(parents=True)
    return path


def test_markdown_layer(layer: Path) -> None:
    put(layer / "context.md", "\n  Be brief.\n\n")
    assert load_layer(layer) == "Be brief."


def test_empty_or_missing_layer(tmp_path: Path) -> None:
    assert load_layer(tmp_path / "nowhere") == ""
    assert load_layer(tmp_path) == ""


def test_yaml_wins_over_markdown_and_lists_files_in_order(layer: Path) -> None:
    put(layer / "context.md", "ignored")
    put(layer / "a.md", "Alpha.\n")
    put(layer / "docs" / "b.md", "Beta.\n")
    put(layer / "context.yaml", "- docs/b.md\n- a.md\n")
    assert load_layer(layer) == "Beta.\n\nAlpha."


def test_yaml_paths_mapping_and_odd_shapes() -> None:
    assert yaml_paths("paths:\n  - one.md\n  - two.md\n") == ["one.md", "two.md"]
    assert yaml_paths("- one.md\n- \n- 3\n") == ["one.md", "3"]
    assert yaml_paths("other: [x]\n") == []
    assert yaml_paths("just a string") == []
    assert yaml_paths("- [unclosed\n") == []


def test_nested_yaml_is_expanded_relative_to_the_layer_dir_missing_skipped(layer: Path) -> None:
    put(layer / "one.md", "First.\n")
    put(layer / "nested" / "two.md", "Second.\n")
    put(layer / "context.yaml", "paths:\n  - one.md\n  - nested/context.yaml\n")
    # Entries of the nested file are relative to the layer dir, not to nested/.
    put(layer / "nested" / "context.yaml", "- nested/two.md\n- missing.md\n- two.md\n")
    assert load_layer(layer) == "First.\n\nSecond."


def test_cycles_and_duplicates_are_skipped(layer: Path) -> None:
    put(layer / "one.md", "One.\n")
    put(layer / "context.yaml", "- one.md\n- sub/context.yaml\n- one.md\n")
    put(layer / "sub" / "context.yaml", "- context.yaml\n- sub/context.yaml\n- one.md\n- two.md\n")
    put(layer / "two.md", "Two.\n")
    assert load_layer(layer) == "One.\n\nTwo."


def test_unreadable_and_binary_files_are_skipped(layer: Path) -> None:
    (layer / "bin.md").write_bytes(b"\xff\xfe\x00bad")
    put(layer / "ok.md", "Fine.\n")
    put(layer / "context.yaml", "- bin.md\n- .\n- ok.md\n")
    assert load_layer(layer) == "Fine."


def test_layers_user_then_project_and_a_repeated_layer_once(tmp_path: Path, layer: Path) -> None:
    home = tmp_path / "home"
    put(home / ".nagent" / "context.md", "User rules.")
    put(layer / "context.md", "Project rules.")
    dirs = default_layer_dirs(layer, home=home)
    assert dirs == [home / ".nagent", layer]
    assert root_context(dirs) == "User rules.\n\nProject rules."
    os.symlink(layer, tmp_path / "alias")
    assert [layer_.text for layer_ in load_layers([layer, tmp_path / "alias", home / ".nagent"])] == [
        "Project rules.",
        "User rules.",
    ]
    # The state root being ~/.nagent itself: its context appears once.
    assert root_context(default_layer_dirs(home / ".nagent", home=home)) == "User rules."


def facts(path: str = "/ws/a.py", file_id: str = "1:2", conversation: str = "a-1") -> InstanceFacts:
    return InstanceFacts(
        target_path=path,
        file_id=file_id,
        conversation=conversation,
        workspace_root="/ws",
        date="2025-01-02",
        os="Linux",
    )


def test_initial_context_order_stable_then_volatile() -> None:
    text = build_initial_context(
        "RULES-TEXT",
        "ROOT-TEXT",
        facts(),
        file_history="HISTORY-TEXT",
        file_summary="SUMMARY-TEXT",
        selection=Selection("SELECTED", 2, 0, 3, 4),
        target_text="TARGET-TEXT\n",
        target_version=7,
    )
    assert text.startswith("<initial_context>\nRULES-TEXT") and text.endswith(CLOSE_TAG)
    assert text.count(CLOSE_TAG) == 1
    marks = [
        "RULES-TEXT",
        "ROOT-TEXT",
        "\nInstance:",
        "- file id: 1:2",
        "{file-history}",
        "HISTORY-TEXT",
        "{file-summary}",
        "Today's date (UTC): 2025-01-02",
        "{target-file",
        "TARGET-TEXT",
        "{selection",
        "SELECTED",
    ]
    positions = [text.index(m) for m in marks]
    assert positions == sorted(positions)
    assert '{target-file path="/ws/a.py" bytes=12 lines=1 version=7' in text
    assert "TARGET-TEXT\n{/target-file}" in text
    assert "lines 3-4" in text


def test_prefix_before_instance_is_identical_for_different_files() -> None:
    a = build_initial_context("R", "C", facts("/ws/a.py", "1:2", "a-1"), file_history="h1", target_text="a")
    b = build_initial_context("R", "C", facts("/ws/b.py", "1:3", "b-2"), file_history="h2", target_text="b")
    assert a.split("\nInstance:")[0] == b.split("\nInstance:")[0]
    assert "a.py" not in a.split("\nInstance:")[0]


def test_empty_parts_are_left_out_and_wrapped_blocks_kept() -> None:
    text = build_initial_context("", "", facts(), file_history="{file-history}\nx\n{/file-history}", target_text="")
    assert "Root context" not in text and "{file-summary}" not in text and "{selection" not in text
    assert text.count("{file-history}") == 1
    assert '{target-file path="/ws/a.py" bytes=0 lines=0' in text


def test_large_target_is_not_inlined() -> None:
    big = "y" * (INLINE_LIMIT + 1)
    text = build_initial_context("R", "", facts(), target_text=big)
    assert big not in text and "yyyy" not in text
    assert f"{INLINE_LIMIT + 1} bytes" in text and '<nagent-file-read path="/ws/a.py"/>' in text
    at_limit = "é" * (INLINE_LIMIT // 2)  # exactly 64 KiB of UTF-8
    assert at_limit in build_initial_context("R", "", facts(), target_text=at_limit)


def test_text_holding_the_closing_tag_cannot_end_the_block() -> None:
    text = build_initial_context(
        f"rules {CLOSE_TAG}",
        "",
        facts(),
        file_summary=f"s {CLOSE_TAG}",
        target_text=f"x = '{CLOSE_TAG}'\n",
        selection=Selection(CLOSE_TAG, 0, 5, 0, 20),
    )
    assert text.count(CLOSE_TAG) == 1 and text.endswith(CLOSE_TAG)
    assert '<nagent-read path="/ws/a.py"/>' in text


def test_gather_fills_date_and_os() -> None:
    f = InstanceFacts.gather(target_path="/x", file_id="1:1", conversation="c")
    assert len(f.date) == 10 and f.os

"""split: exact bytes through split -> merge for every type, boundaries, index fields, refresh."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nagent_lsp.agent.splits import refresh_split, split_text
from nagent_lsp.core.errors import SplitError
from nagent_lsp.store.split_index import load_index
from nagent_lsp.text.segments import count_lines, plan_segments
from nagent_lsp.text.split_rules import TYPES, UnknownSplitType, detect_split_type, normalize_split_type

# Fragments that trigger every type's boundary rules, plus the awkward bytes: CRLF, lone CR, non-ASCII,
# astral characters, braces and tags that unbalance naive depth counting.
FRAGMENTS = st.sampled_from(
    [
        "\n",
        "\r\n",
        "\r",
        "\n\n",
        "  ",
        "\t",
        "x = 1",
        "def f():",
        "class A:",
        "    return 1",
        "@dec",
        "async def g():",
        "# Title",
        "## Sub",
        "{",
        "}",
        "};",
        "[",
        "],",
        "},",
        '"k": 1,',
        "---",
        "- item",
        "key: value",
        "func main() {",
        "fn main() {",
        "pub struct S {",
        "public class A {",
        "#include <x.h>",
        "export const a = 1;",
        "interface I {",
        "<root>",
        "</root>",
        "<a/>",
        "<!-- c -->",
        "// note",
        "é",
        "😀",
        "𝄞",
        "\u2028",
        "ü",
        "日本",
    ]
)
TEXT = st.lists(FRAGMENTS, max_size=120).map("".join)


def _merge(data: bytes, segments) -> bytes:
    return b"".join(data[s.start_byte : s.end_byte] for s in segments)


@settings(max_examples=60, deadline=None)
@given(TEXT, st.sampled_from(TYPES), st.integers(1, 300), st.booleans())
def test_split_then_merge_is_exact_for_every_type(text, kind, target, natural):
    data = text.encode("utf-8")
    segments = plan_segments(data, kind, target, natural)
    assert _merge(data, segments) == data
    # Segments are contiguous whole lines, numbered from 1, and agree with the line count.
    line = 1
    for i, s in enumerate(segments, 1):
        assert s.index == i and s.start_line == line
        chunk = data[s.start_byte : s.end_byte]
        assert chunk, "no empty segments"
        chunk.decode("utf-8")  # never cut inside a character
        if i < len(segments):
            assert chunk.endswith((b"\n", b"\r")) and not (
                chunk.endswith(b"\r") and data[s.end_byte : s.end_byte + 1] == b"\n"
            )
        line = s.end_line + 1
    assert line - 1 == count_lines(data)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TEXT, st.sampled_from(["a.py", "b.md", "c.json", "d.CPP", "e.yml", "f.html", "g"]), st.integers(1, 200))
def test_split_files_on_disk_concatenate_to_the_source(tmp_path, text, name, target):
    source = tmp_path / name
    result = split_text(text, source, tmp_path / "splits", target_bytes=target)
    index = json.loads(result.index_path.read_text(encoding="utf-8"))
    merged = b"".join(Path(s["path"]).read_bytes() for s in index["segments"])
    assert merged == text.encode("utf-8")
    assert index["source_line_count"] == count_lines(text.encode("utf-8"))


def test_index_has_nagents_fields(tmp_path):
    source = tmp_path / "My File.py"
    text = "".join(f"def f{i}():\n    return {i}\n\n" for i in range(200))
    result = split_text(text, source, tmp_path / "splits", target_bytes=1024)
    index = result.index
    assert result.index_path.parent.parent == tmp_path / "splits"
    assert re.fullmatch(r"my-file-[0-9a-f-]{36}", result.index_path.parent.name)
    assert index["source_path"] == str(source)
    assert re.fullmatch(r"[0-9a-f]{64}", index["source_sha256"])
    assert index["source_size_bytes"] == len(text)
    assert index["source_line_count"] == 600
    assert (index["split_type"], index["target_bytes"], index["natural"]) == ("py", 1024, False)
    assert index["created_at"].endswith("+00:00")
    assert index["segment_count"] == len(index["segments"]) > 1
    first = index["segments"][0]
    assert first["segment_index"] == 1 and first["start_line_num"] == 1
    assert first["path"] == str(result.index_path.parent / "My File-0001.py")
    assert result.index_path.read_text().endswith("}\n")


def test_crlf_no_final_newline_and_one_huge_line_survive(tmp_path):
    huge = "é" * 100_000
    text = "a = 1\r\n\r\n" + huge + "\r\nlast line without newline 😀"
    result = split_text(text, tmp_path / "x.txt", tmp_path / "s", target_bytes=64)
    segments = result.index["segments"]
    assert b"".join(Path(s["path"]).read_bytes() for s in segments) == text.encode("utf-8")
    # The huge line is a segment on its own, not cut mid-line.
    assert any(Path(s["path"]).read_bytes() == (huge + "\r\n").encode() for s in segments)


def test_python_cuts_at_top_level_definitions_with_their_decorators_and_comments():
    parts = []
    for i in range(40):
        parts.append(f"# comment for f{i}\n@decorator\ndef f{i}(x):\n    y = x\n\n    return y + {i}\n\n\n")
    data = "".join(parts).encode()
    segments = plan_segments(data, "py", 400)
    assert len(segments) > 5
    for s in segments:
        assert data[s.start_byte : s.end_byte].startswith(b"# comment for f")


def test_python_natural_mode_gives_one_segment_per_definition():
    data = (
        b"import os\n\n\ndef a():\n    pass\n\n\nclass B:\n    def m(self):\n        pass\n\n\n"
        b"async def c():\n    pass\n"
    )
    chunks = [data[s.start_byte : s.end_byte] for s in plan_segments(data, "py", natural=True)]
    assert [c.split(b"\n")[0] for c in chunks] == [b"import os", b"def a():", b"class B:", b"async def c():"]


def test_txt_natural_mode_splits_each_paragraph():
    data = b"one\none\n\ntwo\n\nthree\n"
    assert len(plan_segments(data, "txt", natural=True)) == 3


def test_brace_language_keeps_a_small_function_together_and_cuts_at_depth_zero():
    fn = "int f{i}(int x) {{\n  if (x) {{\n\n    return x;\n  }}\n\n  return {i};\n}}\n\n"
    data = "".join(fn.format(i=i) for i in range(30)).encode()
    segments = plan_segments(data, "cpp", 300)
    for s in segments:
        assert data[s.start_byte : s.end_byte].startswith(b"int f")
    assert len(plan_segments(fn.format(i=1).encode(), "cpp")) == 1


def test_json_cuts_between_top_level_members():
    doc = {f"key{i}": {"a": [1, 2, 3], "b": "x" * 20} for i in range(50)}
    data = json.dumps(doc, indent=2).encode()
    segments = plan_segments(data, "json", 500)
    assert len(segments) > 3
    for s in segments[1:]:
        assert data[s.start_byte : s.end_byte].startswith(b'  "key')


def test_markdown_cut_keeps_heading_with_its_section():
    data = "".join(f"# Section {i}\n\n" + "text line\n" * 20 + "\n" for i in range(10)).encode()
    for s in plan_segments(data, "md", 300)[1:]:
        assert data[s.start_byte : s.end_byte].startswith(b"# Section")


def test_empty_text_has_no_segments():
    assert plan_segments(b"", "py") == []


def test_type_detection_and_aliases():
    assert detect_split_type("a/b.HPP") == "cpp"
    assert detect_split_type("x.tsx") == "ts"
    assert detect_split_type("x.yml") == "yaml"
    assert detect_split_type("Makefile") == "txt"
    assert normalize_split_type(".h") == "cpp"
    assert normalize_split_type("jsonc") == "json"
    assert normalize_split_type("html") == "xml"
    with pytest.raises(UnknownSplitType, match="unknown split type: cobol"):
        normalize_split_type("cobol")


def test_refresh_rebuilds_in_place_and_deletes_stale_segments(tmp_path):
    source = tmp_path / "notes.txt"
    big = "".join(f"paragraph {i}\n\n" for i in range(100))
    result = split_text(big, source, tmp_path / "s", target_bytes=100)
    before = sorted(p.name for p in result.index_path.parent.iterdir())
    assert len(before) > 5
    (result.index_path.parent / "user-notes.md").write_text("keep me")
    index = refresh_split(result.index_path, "short\r\nfile")
    assert index["segment_count"] == 1 and index["source_line_count"] == 2
    names = sorted(p.name for p in result.index_path.parent.iterdir())
    assert names == ["index.json", "notes-0001.txt", "user-notes.md"]
    assert (result.index_path.parent / "notes-0001.txt").read_bytes() == b"short\r\nfile"
    assert load_index(result.index_path) == index


def test_missing_index_is_a_clear_error(tmp_path):
    with pytest.raises(SplitError, match="index not found"):
        load_index(tmp_path / "nope" / "index.json")
    with pytest.raises(SplitError, match="index not found"):
        refresh_split(tmp_path / "nope" / "index.json", "x")

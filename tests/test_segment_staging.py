"""A run's segment edits are visible to that run alone until its change is applied (DESIGN §12, issue 12 item 6).

The model's writes to split segments are held in memory on the run: the run reads them back and merges them,
nothing else sees them. A run that fails leaves every split folder as it was; a run whose change is applied
leaves the split folders it used describing exactly the applied text, so the next run reuses them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.harness.fake_openai import status
from tests.harness.gitrepo import Commit, build_repo

INDEX = r"index_path: (\S+)"
SEGMENT = r"- segment {}: lines \d+-\d+ at (\S+)"
BODY = "".join(f"def function_{i}(value):\n    return value + {i}\n\n\n" for i in range(5000))
A_EDIT = "return value * 7  # run A's edit\n"


def split_folders(workspace: Path) -> list[Path]:
    splits = workspace / ".nagent" / "splits"
    return sorted(p for p in splits.iterdir() if p.is_dir()) if splits.exists() else []


def segment_bytes(index_path: Path) -> bytes:
    index = json.loads(index_path.read_text(encoding="utf-8"))
    return b"".join(Path(s["path"]).read_bytes() for s in index["segments"])


def found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in the model's input"
    return match.group(1)


async def test_a_failed_runs_segment_edits_do_not_leak_into_the_next_run(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("big", {"big.py": BODY})])
    target = workspace / "big.py"
    seen: dict[str, str] = {}

    def run_a(request):
        last = request.messages[-1]["content"]
        if "<nagent-read-result" in last:
            seen["read back"] = last
            return status(400, "the provider failed")  # the run ends: nothing is applied
        if "<nagent-write-result" in last:
            return f'<nagent-read path="{seen["segment"]}"/>'
        if "index_path:" in last:
            seen["index"] = found(INDEX, last)
            seen["segment"] = found(SEGMENT.format(1), last)
            body = Path(seen["segment"]).read_text(encoding="utf-8").replace("return value + 7\n", A_EDIT)
            return f'<nagent-write path="{seen["segment"]}">\n{body}</nagent-write>'
        return f'<nagent-file-read path="{target}"/>'

    fake_model.responder = run_a
    async with editors.open("vscode", workspace, model=True) as editor:
        editor.open(target)
        uri = editor.uri(target)
        error = await editor.command_error("nagent.edit", {"uri": uri, "request": "multiply in function_7"})
        assert "provider failed" in error.message or "400" in error.message, error.message
        # Run A saw its own edit when it read the segment back; the disk never did.
        assert A_EDIT in seen["read back"]
        index_path = Path(seen["index"])
        assert segment_bytes(index_path) == BODY.encode()
        assert A_EDIT.encode() not in b"".join(p.read_bytes() for p in index_path.parent.iterdir())

        # Run B reuses the split, reads the segment A wrote, and merges the split: nothing of A's edit comes back.
        # (The conversation still tells what A did; that is history, not a change.)
        steps: list[str] = []

        def run_b(request):
            last = request.messages[-1]["content"]
            steps.append(last)
            if len(steps) == 1:
                return f'<nagent-file-read path="{target}"/>'
            if len(steps) == 2:
                seen["b listing"] = last
                return f'<nagent-read path="{found(SEGMENT.format(1), last)}"/>'
            if len(steps) == 3:
                seen["b read"] = last
                return f'<nagent-file-patch index="{found(INDEX, seen["b listing"])}"/>'
            return "<nagent-response>nothing to change</nagent-response>"

        fake_model.reset()
        fake_model.responder = run_b
        result = await editor.command("nagent.edit", {"uri": uri, "request": "look only"})
        assert result["applied"] is False and result["reason"] == "no change", result
        assert f"index_path: {index_path}" in seen["b listing"]  # the same split, reused
        assert "return value + 7\n" in seen["b read"] and A_EDIT not in seen["b read"]
        assert 'changed="false"' in steps[3]
        assert editor.text(target) == BODY and editor.recorded.apply_edits == []
    assert split_folders(workspace) == [index_path.parent]
    assert segment_bytes(index_path) == BODY.encode()


async def test_an_applied_runs_split_describes_the_applied_text(workspace, editors, fake_model) -> None:
    build_repo(workspace, [Commit("big", {"big.py": BODY})])
    target = workspace / "big.py"
    seen: dict[str, str] = {}

    def responder(request):
        last = request.messages[-1]["content"]
        if "<nagent-file-patch-result" in last:
            return "<nagent-response>done</nagent-response>"
        if "index_path:" in last:
            seen["index"] = found(INDEX, last)
            segment = found(SEGMENT.format(2), last)
            seen["segment"] = segment
            body = Path(segment).read_text(encoding="utf-8")
            edited = re.sub(r"return value \+ (\d+)\n", r"return value - \1\n", body, count=1)
            seen["edited"] = edited
            # A write to the segment, and a write to a segment the run then never merges.
            other = found(SEGMENT.format(3), last)
            seen["unmerged"] = other
            return (
                f'<nagent-write path="{segment}">\n{edited}</nagent-write>\n'
                f'<nagent-file-patch index="{seen["index"]}"/>\n'
                f'<nagent-write path="{other}">\nnever merged\n</nagent-write>'
            )
        return f'<nagent-file-read path="{target}"/>'

    fake_model.responder = responder
    async with editors.open("eglot", workspace, model=True) as editor:
        editor.open(target)
        uri = editor.uri(target)
        result = await editor.command("nagent.edit", {"uri": uri, "request": "subtract in segment 2"})
        assert result["applied"] is True, result
        final = editor.text(target)
        assert final != BODY and "never merged" not in final
        index_path = Path(seen["index"])
        # Written once the change was applied: the split now holds exactly the editor's text.
        assert segment_bytes(index_path) == final.encode()
        assert b"never merged" not in b"".join(p.read_bytes() for p in index_path.parent.iterdir())
        convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
        assert "never merged with <nagent-file-patch>" in convo and Path(seen["unmerged"]).name in convo

        # The next run finds the same split for the new text instead of making another.
        fake_model.reset()
        fake_model.responder = lambda request: (
            "<nagent-response>read</nagent-response>"
            if "index_path:" in request.messages[-1]["content"]
            else f'<nagent-file-read path="{target}"/>'
        )
        await editor.command("nagent.edit", {"uri": uri, "request": "look"})
        assert f"index_path: {index_path}" in fake_model.chat_requests[-1].messages[-1]["content"]
    assert split_folders(workspace) == [index_path.parent]

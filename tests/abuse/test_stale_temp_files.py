"""Temp files that kills left behind (issue 12 item 10): atomic writes' `.name.XXXXXXXX.tmp` are removed at
start-up — only that pattern, only regular files, only old ones."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from nagent_lsp.store.atomic import STALE_AFTER, atomic_write_text, remove_stale_temp_files
from tests.abuse.rawserver import RawServer, server_env
from tests.harness.gitrepo import Commit, build_repo

pytestmark = pytest.mark.abuse
OLD = time.time() - 2 * STALE_AFTER


def aged(path: Path, text: str = "partial") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (OLD, OLD))
    return path


def test_only_our_old_temp_files_are_removed(tmp_path: Path) -> None:
    root = tmp_path / ".nagent"
    stale = [
        aged(root / "conversations" / ".file-index.json.k2j4x_9a.tmp"),
        aged(root / "splits" / "a" / ".x.abcdefgh.tmp"),
    ]
    fresh = root / "conversations" / ".app-1.qwertyui.tmp"
    fresh.write_text("a write still running")
    kept = [
        aged(root / "notes.tmp"),  # not our pattern
        aged(root / ".app.TOOLONG99.tmp"),  # not mkstemp's alphabet
        aged(root / "conversations" / "app-uuid"),  # a conversation
    ]
    outside = aged(tmp_path / "elsewhere" / ".victim.abcdefgh.tmp")
    link = root / "cache" / ".link.abcdefgh.tmp"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    os.utime(link, (OLD, OLD), follow_symlinks=False)
    removed = remove_stale_temp_files(root)
    assert sorted(removed) == sorted(stale)
    assert not any(p.exists() for p in stale)
    assert fresh.exists() and all(p.exists() for p in kept)
    assert outside.exists() and link.is_symlink(), "a symlink is neither followed nor removed"


def test_the_pattern_is_what_atomic_writes_leave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write killed between creating its temp file and the rename leaves exactly what the cleanup removes."""
    target = tmp_path / "conversations" / "file-index.json"

    def killed(src: str, dst: str) -> None:
        raise KeyboardInterrupt  # stands in for the kill: the temp file is left where it was

    monkeypatch.setattr(os, "replace", killed)
    monkeypatch.setattr(os, "unlink", lambda path: None)  # the kill also skips the cleanup of the except block
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "{}")
    monkeypatch.undo()
    (left,) = list(target.parent.iterdir())
    os.utime(left, (OLD, OLD))
    assert remove_stale_temp_files(tmp_path) == [left]


def test_the_server_cleans_its_state_roots_at_start(tmp_path: Path, isolated_home: Path) -> None:
    ws = tmp_path / "ws"
    build_repo(ws, [Commit("add", {"app.py": "x = 1\n"})])
    stale = [
        aged(ws / ".nagent" / "conversations" / ".file-index.json.a1b2c3d4.tmp"),
        aged(isolated_home / ".nagent" / "cache" / ".summary.zz9_8y7x.tmp"),
    ]
    fresh = ws / ".nagent" / "conversations" / ".app.12345678.tmp"
    fresh.write_text("in progress")
    server = RawServer(ws, server_env(isolated_home, {}), verbose=True).start()  # -v: the INFO line on stderr
    try:
        answer = server.call("initialize", {"processId": None, "rootUri": ws.as_uri(), "capabilities": {}})
        assert answer and "result" in answer
        server.notify("initialized", {})
        assert server.wait_for_stderr("stale temp file"), server.stderr_text()
        assert server.wait_for_stderr(str(isolated_home / ".nagent")) and server.wait_for_stderr(str(ws / ".nagent"))
        assert not any(p.exists() for p in stale)
        assert fresh.exists()
    finally:
        server.stop()

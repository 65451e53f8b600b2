"""A run's conversation appends with deferred fsyncs (issue 29): written before `append` returns, durable by
`synced()`, and rewritten whole when an fsync fails."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from nagent_lsp.agent.conversation_file import ConversationFile
from nagent_lsp.store import conversations
from nagent_lsp.tags.transcript import agent_response_block, user_prompt_block


def _opened(tmp_path: Path) -> ConversationFile:
    path = tmp_path / "conversations" / "a.py-1"
    path.parent.mkdir(parents=True)
    path.write_text(user_prompt_block("first"), encoding="utf-8")
    convo = ConversationFile.open(path)
    convo.defer_syncs()
    return convo


async def test_each_append_is_on_disk_when_append_returns_and_fsynced_when_synced_returns(tmp_path, monkeypatch):
    real_fsync = os.fsync
    gate = threading.Event()
    synced_fds: list[int] = []

    def held_fsync(fd: int) -> None:
        # The worker's fsyncs wait until the test has looked at the file: `append` must not wait for them.
        assert gate.wait(60)
        real_fsync(fd)
        synced_fds.append(fd)

    monkeypatch.setattr(conversations.os, "fsync", held_fsync)
    convo = _opened(tmp_path)
    convo.append(agent_response_block("one"))
    convo.append(agent_response_block("two"))
    # Both appends went through the append path (no rewrite) and are readable at once, before any fsync ran:
    # a crash of the server from here on loses neither.
    assert (convo.appends, convo.rewrites) == (2, 0)
    assert convo.path.read_text(encoding="utf-8") == convo.text
    assert synced_fds == []
    gate.set()
    await convo.synced()
    assert len(synced_fds) == 2  # synced() returned only once both fsyncs had run
    assert convo.path.read_text(encoding="utf-8") == convo.text


async def test_a_failed_fsync_rewrites_the_whole_conversation_atomically(tmp_path, monkeypatch):
    real_fsync = os.fsync
    failing = {"on": True}

    def broken_fsync(fd: int) -> None:
        if failing["on"] and threading.current_thread().name.startswith("nagent-fsync"):
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(conversations.os, "fsync", broken_fsync)
    convo = _opened(tmp_path)
    convo.append(agent_response_block("kept"))
    await convo.synced()
    assert convo.rewrites == 1  # the rewrite (temp file, fsync, rename) stands in for the failed fsync
    assert convo.path.read_text(encoding="utf-8") == convo.text
    assert "kept" in convo.text


@pytest.mark.parametrize("deferred", [False, True])
async def test_appends_without_a_run_that_waits_stay_synchronous(tmp_path, monkeypatch, deferred):
    calls: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        calls.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(conversations.os, "fsync", recording_fsync)
    path = tmp_path / "c"
    path.write_text("x", encoding="utf-8")
    convo = ConversationFile.open(path)
    if deferred:
        convo.defer_syncs()
    convo.append(agent_response_block("y"))
    await convo.synced()  # a no-op when not deferred
    assert len(calls) == 1
    # Only a run that defers (and waits with synced()) moves the fsync off its own thread.
    assert calls[0].startswith("nagent-fsync") == deferred

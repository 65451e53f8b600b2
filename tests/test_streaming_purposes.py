"""Calls bounded to their purpose (issue 23): commit summaries, file summaries, memory folds and compaction each with
their own output cap and instructions; a `length` stop on a summary is kept but marked; `nagent.status` shows each
purpose's model and cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from nagent_lsp.config.settings import ModelProfile, Settings
from nagent_lsp.core.model import Reply, Usage
from nagent_lsp.history.commit_summaries import make_model_summarizer
from nagent_lsp.llm.models import purpose_models, purpose_settings
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo

GUARD = 120.0


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=GUARD,
    )


def test_each_purpose_has_its_own_cap_never_above_its_profiles():
    settings = Settings(
        summaryModel="small",
        models={"small": ModelProfile("small-model", maxOutputTokens=500)},
        fileSummaryMaxTokens=90,
    )
    assert purpose_settings(settings, "edit").maxOutputTokens == 8192
    assert purpose_settings(settings, "fileSummary").maxOutputTokens == 90
    assert purpose_settings(settings, "memory").maxOutputTokens == 500  # the profile's own bound holds
    caps = {p.purpose: (p.model, p.maxOutputTokens, p.capSetting) for p in purpose_models(settings)}
    assert caps == {
        "edit": ("gpt-4.1-mini", 8192, "maxOutputTokens"),
        "commitSummary": ("small-model", 500, "commitSummaryMaxTokens"),
        "fileSummary": ("small-model", 90, "fileSummaryMaxTokens"),
        "memory": ("small-model", 500, "memoryMaxTokens"),
        "compaction": ("small-model", 500, "compactionMaxTokens"),
    }


def test_status_shows_each_purposes_model_and_cap(workspace, model_env):
    out = cli("status", "--folder", str(workspace), cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    purposes = {p["purpose"]: p for p in json.loads(out.stdout)["purposes"]}
    assert purposes["commitSummary"] == {
        "purpose": "commitSummary",
        "model": "fake-model",
        "maxOutputTokens": 1200,
        "capSetting": "commitSummaryMaxTokens",
    }
    assert purposes["edit"]["maxOutputTokens"] == 8192 and purposes["fileSummary"]["maxOutputTokens"] == 400


def test_a_file_summary_is_asked_within_its_cap_and_a_length_stop_is_kept_marked(workspace, fake_model, model_env):
    build_repo(workspace, [Commit("calc", {"calc.py": "def add(a, b):\n    return a + b\n"})])
    fake_model.script(text("Adds two numbers and then goes on and on", finish_reason="length"))
    out = cli("summarize", "calc.py", cwd=workspace, env=model_env)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)["summary"]
    assert summary == "Adds two numbers and then goes on and on […truncated at fileSummaryMaxTokens]"
    (request,) = fake_model.chat_requests
    assert request.body["max_tokens"] == 400 and request.stream  # fileSummaryMaxTokens, not the edit's 8,192
    assert "stop when that is said" in request.messages[0]["content"]


def test_a_commit_summary_reply_cut_at_its_cap_keeps_the_summaries_it_finished():
    items = [("a" * 40, "calc.py", "add", ""), ("b" * 40, "calc.py", "fix", "")]
    cut = '{"summaries": [{"commit": "' + "a" * 40 + '", "path": "calc.py", "summary": "Adds add."}, {"commit": "bbb'
    summarize = make_model_summarizer(lambda messages: Reply(cut, Usage(10, 10), "length"))
    assert summarize(items) == {("a" * 40, "calc.py"): "Adds add."}

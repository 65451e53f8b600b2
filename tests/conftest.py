"""Shared fixtures: an isolated HOME for every test, and the editor profiles to impersonate."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.harness.lsp import PROFILES


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Nothing a test does may read or write the real ~/.nagent or pick up a real API key."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "NAGENT_")):
            monkeypatch.delenv(name)
    return home


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def fake_model():
    """The OpenAI-compatible test server on 127.0.0.1; tests script its replies and read what it was sent."""
    from tests.harness.fake_openai import FakeOpenAI

    server = FakeOpenAI()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def model_env(fake_model, isolated_home: Path) -> dict[str, str]:
    """Environment for a server that talks to the fake model (the key is a marker we can look for).

    Background commit summaries would take scripted replies meant for the edit loop, so the user config
    turns them off; tests of summaries turn them back on in their own settings."""
    config = isolated_home / ".nagent" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('{"history": {"summarize": false}}\n', encoding="utf-8")
    return {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": "sk-test-marker-000", "NAGENT_MODEL": "fake-model"}

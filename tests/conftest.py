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

"""Shared fixtures: an isolated HOME for every test, the editor profiles to impersonate, the fake model, and the
language servers that tests share."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

from tests.harness.lsp import MODEL_KEY, PROFILES, Editors, ServerPool

# Property tests draw the same examples on every run and machine (no example database, no random seed), and a
# busy machine cannot fail them: how long generating an example takes is no finding.
settings.register_profile(
    "nagent", derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("nagent")


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


@pytest.fixture(scope="session")
def shared_fake_model():
    from tests.harness.fake_openai import FakeOpenAI

    server = FakeOpenAI()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fake_model(shared_fake_model):
    """The OpenAI-compatible test server on 127.0.0.1; tests script its replies and read what it was sent.

    One server for the session, started over for every test: no script, responder or recorded request from an
    earlier test, and its delayed replies are dropped."""
    shared_fake_model.reset()
    try:
        yield shared_fake_model
    finally:
        shared_fake_model.reset()


@pytest.fixture
def model_env(fake_model, isolated_home: Path) -> dict[str, str]:
    """Environment for a server of the test's own that talks to the fake model.

    Background commit summaries would take scripted replies meant for the edit loop, so the user config
    turns them off; tests of summaries turn them back on in their own settings."""
    config = isolated_home / ".nagent" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('{"history": {"summarize": false}}\n', encoding="utf-8")
    return {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": MODEL_KEY, "NAGENT_MODEL": "fake-model"}


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def server_pool(tmp_path_factory: pytest.TempPathFactory, shared_fake_model):
    """The language servers tests share (see tests/harness/lsp.py); they live in the session's event loop."""
    pool = ServerPool(tmp_path_factory.mktemp("servers"), shared_fake_model.base_url, MODEL_KEY)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def editors(server_pool: ServerPool, fake_model) -> Editors:
    """Editors on shared servers, each switched to the test's own workspace folder; the fake model is reset."""
    return Editors(server_pool)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A shared server's connection belongs to the event loop that started it: tests using one run in the
    # session's loop (every other test keeps a loop of its own).
    for item in items:
        if "editors" in getattr(item, "fixturenames", ()) and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)

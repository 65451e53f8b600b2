"""Issue 25: commit diffs go to the summary model in the background (on open, hover, history) only with the user's
consent, asked once per repository with window/showMessageRequest naming the model, where it runs and the tokens,
and remembered in the user's own state (~/.nagent/summary-consent.json), never the repository's. A loopback
endpoint needs no consent.

A non-loopback endpoint is simulated without leaving the machine: the model's base URL names a host under the
reserved `.invalid` domain and the server's HTTP proxy (HTTP_PROXY, honoured by the openai SDK's httpx) is a
small forwarder on 127.0.0.1 in front of the fake model."""

from __future__ import annotations

import http.client
import json
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

from nagent_lsp.operations.summary_consent import ALLOW, DENY, Endpoint
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, add_commit, build_repo
from tests.harness.lsp import MODEL_KEY, open_editor, wait_until

REMOTE = "http://summaries.example.invalid/v1"
SUMMARIES = "\n".join(f"{n}. summary number {n}" for n in range(1, 21))


@pytest.fixture
def proxy(fake_model) -> Iterator[str]:
    """An HTTP proxy on 127.0.0.1 that forwards every request to the fake model, whatever host it names."""
    target = urlparse(fake_model.base_url)

    class Forward(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            url = urlparse(self.path)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection")}
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
            connection.request(self.command, url.path + (f"?{url.query}" if url.query else ""), body, headers)
            answer = connection.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            connection.close()

        do_GET = do_POST = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def repo(workspace: Path) -> Path:
    build_repo(
        workspace,
        [Commit(f"change {n}", {"calc.py": "".join(f"x{i} = {i}\n" for i in range(n + 1))}) for n in range(3)],
    )
    return workspace / "calc.py"


def user_config(home: Path, **history: object) -> None:
    config = home / ".nagent" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"history": {"summarize": True, **history}}), encoding="utf-8")


def remote_env(proxy: str) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": REMOTE,
        "OPENAI_API_KEY": MODEL_KEY,
        "NAGENT_MODEL": "fake-model",
        "HTTP_PROXY": proxy,
        "http_proxy": proxy,
        "NO_PROXY": "",
        "no_proxy": "",
    }


def test_what_is_loopback() -> None:
    for url in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1", "http://127.1.2.3"):
        assert Endpoint(url, "m").loopback, url
    for url in (REMOTE, "https://api.openai.com/v1", "http://10.0.0.5/v1", "http://my-box.local/v1"):
        assert not Endpoint(url, "m").loopback, url


async def test_asked_once_per_repository_and_remembered(profile, workspace, isolated_home, fake_model, proxy):
    if profile == "eglot":
        pytest.skip("eglot 1.9 advertises no window capabilities: it is never asked (the setting decides)")
    target = repo(workspace)
    user_config(isolated_home)
    fake_model.default = text(SUMMARIES)
    async with open_editor(profile, workspace, isolated_home, env=remote_env(proxy)) as editor:
        editor.answers = [ALLOW]
        await editor.command("nagent.history", {"uri": editor.uri(target)})
        assert await wait_until(lambda: fake_model.chat_requests, timeout=120)
        (question,) = editor.recorded.message_requests
        assert "fake-model" in question.message and "summaries.example.invalid" in question.message
        assert "tokens" in question.message and workspace.name in question.message
        assert [a.title for a in question.actions or []] == [ALLOW, DENY]
    record = isolated_home / ".nagent" / "summary-consent.json"
    stored = json.loads(record.read_text())["repositories"][str(workspace.resolve())]
    assert stored["answer"] == "allow" and stored["endpoint"] == REMOTE and stored["model"] == "fake-model"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert not list(workspace.rglob("summary-consent.json"))  # the user's state, never the repository's
    # Remembered: a new server sends the next file's summaries without asking again.
    add_commit(workspace, Commit("other", {"other.py": "y = 2\n"}))
    before = len(fake_model.chat_requests)
    async with open_editor(profile, workspace, isolated_home, env=remote_env(proxy)) as editor:
        await editor.command("nagent.history", {"uri": editor.uri(workspace / "other.py")})
        assert await wait_until(lambda: len(fake_model.chat_requests) > before, timeout=120)
        assert editor.recorded.message_requests == []


async def test_declined_sends_nothing(workspace, isolated_home, fake_model, proxy) -> None:
    target = repo(workspace)
    user_config(isolated_home)
    fake_model.default = text(SUMMARIES)
    async with open_editor("vscode", workspace, isolated_home, env=remote_env(proxy)) as editor:
        editor.answers = [DENY]
        await editor.command("nagent.history", {"uri": editor.uri(target)})
        # The batch ends without a request: its warning reaches the client (a positive signal, no sleep).
        assert await wait_until(lambda: any("need your consent" in m.message for m in editor.client.log_messages))
        assert len(editor.recorded.message_requests) == 1
    assert fake_model.chat_requests == []
    stored = json.loads((isolated_home / ".nagent" / "summary-consent.json").read_text())
    assert stored["repositories"][str(workspace.resolve())]["answer"] == "deny"


async def test_loopback_and_always_need_no_question(workspace, isolated_home, fake_model, proxy) -> None:
    target = repo(workspace)
    user_config(isolated_home)
    fake_model.default = text(SUMMARIES)
    loopback = {"OPENAI_BASE_URL": fake_model.base_url, "OPENAI_API_KEY": MODEL_KEY, "NAGENT_MODEL": "fake-model"}
    async with open_editor("neovim", workspace, isolated_home, env=loopback) as editor:
        await editor.command("nagent.history", {"uri": editor.uri(target)})
        assert await wait_until(lambda: fake_model.chat_requests, timeout=120)
        assert editor.recorded.message_requests == []
    fake_model.reset()
    fake_model.default = text(SUMMARIES)
    user_config(isolated_home, summaryConsent="always")
    other = workspace / "other.py"
    add_commit(workspace, Commit("other", {"other.py": "z = 2\n"}))
    async with open_editor("neovim", workspace, isolated_home, env=remote_env(proxy)) as editor:
        await editor.command("nagent.history", {"uri": editor.uri(other)})
        assert await wait_until(lambda: fake_model.chat_requests, timeout=120)
        assert editor.recorded.message_requests == []
    assert not (isolated_home / ".nagent" / "summary-consent.json").exists()


async def test_a_repository_cannot_consent_for_the_user(workspace, isolated_home, fake_model, proxy) -> None:
    """`history.summaryConsent: "always"` in the repository's own config is refused: it may only narrow."""
    target = repo(workspace)
    user_config(isolated_home)
    (workspace / ".nagent").mkdir(exist_ok=True)
    (workspace / ".nagent" / "config.json").write_text(json.dumps({"history": {"summaryConsent": "always"}}))
    fake_model.default = text(SUMMARIES)
    async with open_editor("vscode", workspace, isolated_home, env=remote_env(proxy)) as editor:
        editor.answers = [DENY]
        status = await editor.command("nagent.status")
        assert status["settings"]["history"]["summaryConsent"] == "ask"
        await editor.command("nagent.history", {"uri": editor.uri(target)})
        assert await wait_until(lambda: any("need your consent" in m.message for m in editor.client.log_messages))
        assert len(editor.recorded.message_requests) == 1  # asked, whatever the repository's config said
    assert fake_model.chat_requests == []


def test_summaries_warm_is_the_cli_prompt(workspace, isolated_home, fake_model, proxy) -> None:
    """The CLI never asks in the background: `nagent-lsp summaries warm` states the commits and tokens and asks on
    the terminal (or takes --yes) — that answer is the consent, for that run only; "never" refuses it."""
    import os
    import subprocess
    import sys

    repo(workspace)
    user_config(isolated_home)
    fake_model.default = text(SUMMARIES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NAGENT_"))}
    env.update({**remote_env(proxy), "HOME": str(isolated_home)})

    def warm(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "nagent_lsp", "summaries", "warm", "calc.py", *extra]
        return subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True, timeout=300)

    unconfirmed = warm()  # no terminal, no --yes: nothing is sent
    assert unconfirmed.returncode != 0 and "--yes" in unconfirmed.stderr
    assert fake_model.chat_requests == []
    done = warm("--yes")
    assert done.returncode == 0, done.stderr
    assert "summarised" in done.stdout and len(fake_model.chat_requests) == 1, done.stderr  # the diffs went out
    assert not (isolated_home / ".nagent" / "summary-consent.json").exists()  # that run only, not remembered
    user_config(isolated_home, summaryConsent="never")
    add_commit(workspace, Commit("one more", {"calc.py": "x = 'new'\n"}))
    refused = warm("--yes")
    assert refused.returncode != 0 and 'history.summaryConsent is "never"' in refused.stderr, refused.stderr
    assert len(fake_model.chat_requests) == 1

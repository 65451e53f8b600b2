"""The API key never leaves the server (DESIGN §12, issue 12 item 2), through the real server process.

A canary key sits in the server's environment; the model (allowed to run shell commands) tries to read it back
the ways the hardening campaign did — `/proc/$PPID/environ | rev`, `env | rev`, `/proc/*/environ | base64`, the
server's own /proc entry by pid, unmounting its /proc first — and the canary, reversed or base64-encoded, must
appear in no result, conversation, `.nagent/**` artifact, log line, editor message or model request. Meanwhile
the model works: the fake model server receives the canary as the bearer token.

Both defences are tested apart: with the shell's PID namespace (the default where the system allows it, as here)
and with it switched off, where only the start-up re-exec keeps the key out of the server's environment.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types

from nagent_lsp.agent.shell import namespace_prefix
from nagent_lsp.core.secret_env import command_environ, is_key_like
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo
from tests.harness.lsp import open_editor

DONE = text("<nagent-response>done</nagent-response>")
VISIBLE = ("NAGENT_PROBE_VISIBLE", "plain-value-4711")  # an ordinary variable: commands must still see it


def canary() -> str:
    return f"sk-canary-{uuid.uuid4().hex}"


def encodings(secret: str) -> list[str]:
    """The forms a command could turn the key into: itself, reversed, and base64 at any of the three alignments
    it may have in a longer stream (the part of the encoding that depends on the key alone)."""
    raw = secret.encode()
    forms = [secret, secret[::-1]]
    for skip in range(3):
        body = raw[skip:]
        body = body[: len(body) - len(body) % 3]
        forms.append(base64.b64encode(body).decode())
    return forms


def leaks(haystack: str, secrets: list[str]) -> list[str]:
    """Which encodings of which secrets occur in `haystack` (line breaks ignored: `base64` wraps its output)."""
    flat = haystack.replace("\n", "").replace("\r", "")
    return [form for secret in secrets for form in encodings(secret) if form in haystack or form in flat]


def everything_written(*roots: Path) -> Iterator[tuple[Path, str]]:
    for root in roots:
        if root.is_file():
            yield root, root.read_text(encoding="utf-8", errors="replace")
        elif root.is_dir():
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                yield path, path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture
def bearer_tokens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Authorization headers the fake model server received (it records only that one was sent)."""
    seen: list[str] = []
    original = http.server.BaseHTTPRequestHandler.parse_request

    def parse_request(self: http.server.BaseHTTPRequestHandler) -> bool:
        ok = original(self)
        if ok and self.headers.get("Authorization"):
            seen.append(self.headers["Authorization"])
        return ok

    monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "parse_request", parse_request)
    return seen


def project(workspace: Path) -> Path:
    build_repo(workspace, [Commit("init", {"mod.py": "x = 1\n"})])
    return workspace / "mod.py"


def server_pid(editor) -> int:
    return editor.client._server.pid  # pytest-lsp's asyncio subprocess of the server


SNOOPS = [
    "cat /proc/$PPID/environ | tr '\\0' '\\n' | rev",
    "env | rev",
    "cat /proc/*/environ | base64",
    "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null | rev",
    # the server by its pid (the test knows it; a command could find it with ps), environment and command line
    "cat /proc/{server}/environ | base64; tr '\\0' ' ' < /proc/{server}/cmdline",
    "ps -eo pid,args 2>&1 | head -20",
]
# Root trying to get the host's /proc back before looking: only inside the namespace, where it must fail. Without
# one a root command *can* unmount the host's /proc (the fallback's limit, docs/ARCHITECTURE.md): never run there.
# (Guarded twice: the test is skipped without namespaces, and the command acts only as a child of a namespace's init.)
IN_NAMESPACE_ONLY = [
    "[ \"$PPID\" = 1 ] && { umount /proc; umount -l /proc; cat /proc/*/environ | base64; ls /proc | grep -c '^[0-9]'; }"
]


@pytest.mark.parametrize("isolation", ["namespace", "off"])
async def test_commands_cannot_read_the_key(
    isolation: str, workspace: Path, isolated_home: Path, model_env: dict, fake_model, bearer_tokens, tmp_path: Path
) -> None:
    if isolation == "namespace" and await namespace_prefix() is None:
        pytest.skip("no PID namespaces here (the fallback is the 'off' case)")
    key, token = canary(), canary()
    target = project(workspace)
    log_file = tmp_path / "server.log"
    env = {**model_env, "OPENAI_API_KEY": key, "GITHUB_TOKEN": token, VISIBLE[0]: VISIBLE[1]}
    if isolation == "off":
        env["NAGENT_LSP_SHELL_ISOLATION"] = "off"
    async with open_editor(
        "vscode",
        workspace,
        isolated_home,
        env=env,
        init_options={"shell": "allow"},
        server_args=("-vv", "--log-file", str(log_file)),
    ) as editor:
        pid = server_pid(editor)
        chosen = SNOOPS + (IN_NAMESPACE_ONLY if isolation == "namespace" else [])
        snoops = [s.replace("{server}", str(pid)) for s in chosen]
        fake_model.script(*(text(f"<nagent-shell>{s}</nagent-shell>") for s in snoops), DONE)
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "find the key"})
        status = await editor.command("nagent.status")
        messages = [m.message for m in editor.client.log_messages] + [m.message for m in editor.client.messages]
        own_environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")

    assert result["response"] == "done", result
    assert status["modelConfigured"] is True
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert convo.count("<nagent-shell-result>\nexit_code:") == len(snoops)
    # The commands really ran and dumped environments: the ordinary variable is there, reversed.
    assert f"{VISIBLE[0]}={VISIBLE[1]}"[::-1] in convo
    if isolation == "namespace":
        assert f"/proc/{pid}/environ: No such file or directory" in convo  # the server is not there to read

    secrets = [key, token]
    found = {"result": leaks(json.dumps(result), secrets), "status": leaks(json.dumps(status), secrets)}
    for path, content in everything_written(workspace / ".nagent", isolated_home / ".nagent", log_file):
        found[str(path)] = leaks(content, secrets)
    found["editor messages"] = leaks("\n".join(messages), secrets)
    found["model requests"] = leaks(json.dumps([r.as_json() for r in fake_model.requests]), secrets)
    found["server environ"] = leaks(own_environ, secrets)
    assert {where: forms for where, forms in found.items() if forms} == {}
    assert log_file.stat().st_size > 0  # -vv logged, and none of it holds the key
    # The model still works: it got the key, and only it.
    assert bearer_tokens and set(bearer_tokens) == {f"Bearer {key}"}


async def test_key_named_later_by_workspace_configuration(
    workspace: Path, isolated_home: Path, model_env: dict, fake_model, bearer_tokens
) -> None:
    """`apiKeyEnv` pulled through workspace/configuration after start, naming a variable that was in the
    environment at start under a name nothing would call a key: the model gets it, commands do not."""
    first, later = canary(), canary()
    target = project(workspace)
    env = {**model_env, "OPENAI_API_KEY": first, "LLM_CREDENTIAL_B": later}
    assert not is_key_like("LLM_CREDENTIAL_B")  # the point: only the setting says it is a key
    async with open_editor("vscode", workspace, isolated_home, env=env, init_options={"shell": "allow"}) as editor:
        fake_model.script(DONE)
        editor.open(target)
        await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "one"})
        assert bearer_tokens == [f"Bearer {first}"]

        editor.client.set_configuration({"apiKeyEnv": "LLM_CREDENTIAL_B"}, section="nagent")
        editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        status = await _status_when(editor, lambda s: s["apiKeyEnv"] == "LLM_CREDENTIAL_B")
        assert status["modelConfigured"] is True

        snoop = "env | rev; cat /proc/$PPID/environ | base64; echo var=${LLM_CREDENTIAL_B:-unset}"
        fake_model.script(text(f"<nagent-shell>{snoop}</nagent-shell>"), DONE)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "two"})
    convo = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert "var=unset" in convo
    assert leaks(convo, [first, later]) == []
    assert bearer_tokens[1:] and set(bearer_tokens[1:]) == {f"Bearer {later}"}


async def test_model_configured_by_the_key_alone(workspace: Path, isolated_home: Path) -> None:
    """No base URL: only the key (held in memory, not in the environment) makes a model configured."""
    config = isolated_home / ".nagent" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"apiKeyEnv": "TEAM_LLM", "history": {"summarize": False}}), encoding="utf-8")
    async with open_editor("neovim", workspace, isolated_home, env={"TEAM_LLM": canary()}) as editor:
        status = await editor.command("nagent.status")
        pid = server_pid(editor)
        own_environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert status["modelConfigured"] is True and status["apiKeyEnv"] == "TEAM_LLM"
    assert b"TEAM_LLM=" not in own_environ  # named by the config file: moved out before the server started
    async with open_editor("neovim", workspace, isolated_home) as editor:
        assert (await editor.command("nagent.status"))["modelConfigured"] is False


def test_key_like_names() -> None:
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "MY_KEY",
        "HF_TOKEN",
        "OPENAI_API_KEY_2",
        "npm_token",
        "client_secret",
    ):
        assert is_key_like(name), name
    for name in (
        "PATH",
        "HOME",
        "PWD",
        "KEYTIMEOUT",
        "TOKENIZERS_PARALLELISM",
        "SSH_AUTH_SOCK",
        "AWS_KEY_ID",
        "LANG",
        "GIT_ASKPASS",
    ):
        assert not is_key_like(name), name


def test_command_environment_drops_key_variables_and_hidden_names() -> None:
    base = {"PATH": "/bin", "OPENAI_API_KEY": "k", "GH_TOKEN": "t", "CUSTOM": "c", "KEEP": "yes"}
    assert command_environ(base, hide=["CUSTOM"]) == {"PATH": "/bin", "KEEP": "yes"}
    assert "OPENAI_API_KEY" not in command_environ()  # the server's own environment never had it anyway
    assert os.environ.get("OPENAI_API_KEY") is None


async def _status_when(editor, condition) -> dict:
    status: dict = {}

    async def check() -> bool:
        nonlocal status
        status = await editor.command("nagent.status")
        return bool(condition(status))

    for _ in range(600):  # bounded: a failing test ends instead of hanging
        if await check():
            return status
        await asyncio.sleep(0.05)
    return status


def test_hand_over_reads_only_its_pipe(tmp_path: Path) -> None:
    """The re-executed process reads the secrets from the inherited pipe and closes it; a variable pointing at
    the LSP stream or a regular file is ignored and that descriptor left alone."""
    from nagent_lsp.headless.launch import _receive

    read_end, write_end = os.pipe()
    os.write(write_end, b"OPENAI_API_KEY=sk-a=b\0GH_TOKEN=t\0")
    os.close(write_end)
    assert _receive(str(read_end)) == {"OPENAI_API_KEY": "sk-a=b", "GH_TOKEN": "t"}
    with pytest.raises(OSError):
        os.fstat(read_end)  # closed
    regular = tmp_path / "f"
    regular.write_text("OPENAI_API_KEY=x\0")
    with open(regular, "rb") as f:
        assert _receive(str(f.fileno())) == {}
        os.fstat(f.fileno())  # still open
    assert _receive("0") == {} and _receive("not a number") == {}


def test_start_up_hides_configured_names_but_never_path(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nagent_lsp.headless.launch import secret_names

    (isolated_home / ".nagent").mkdir(exist_ok=True)
    (isolated_home / ".nagent" / "config.json").write_text(json.dumps({"apiKeyEnv": "PATH"}))
    repo = tmp_path / "repo" / "sub"
    (tmp_path / "repo" / ".nagent").mkdir(parents=True)
    (tmp_path / "repo" / ".nagent" / "config.json").write_text(json.dumps({"models": {"m": {"apiKeyEnv": "TEAM_LLM"}}}))
    repo.mkdir()
    monkeypatch.chdir(repo)
    env = {"PATH": "/bin", "TEAM_LLM": "v", "OTHER": "o", "X_TOKEN": "t", "EMPTY_KEY": ""}
    assert secret_names(env) == ["TEAM_LLM", "X_TOKEN"]

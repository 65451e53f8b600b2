"""Conversations that travel with the repository (issue 28, "Sharing safely" and "Conflicts").

What the server writes into a conversation git would pick up is searched for secrets first (token shapes, key-like
assignments, the held key, lines of the workspace's `denyRead` files) and each is redacted, the user's request
included; `nagent-lsp conversations check` finds what is already there (`--fix` redacts it); `outputs/` and
`proposals/` never reach a commit; two clones' appends to one conversation merge as text through a real remote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nagent_lsp.text.secrets import denied_strings, find_secrets, redact_secrets
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo, git, git_env
from tests.harness.lsp import MODEL_KEY, open_editor, wait_until
from tests.test_cli import cli

CALC = "def add(a, b):\n    return a + b\n"
OPENAI = "sk-proj-Zq81hf0a9sdfLkj3Hq0PzXw7"  # shapes a real key has, made up
GITHUB = "ghp_Qw8eRt7yUi6oPa5sDf4gHj3kL2zXc1vBnM0q"
AWS = "AKIAQWERTYUIOPASDFGH"
DB_PASSWORD = "s3cr3t-db-pass-42"  # only in the clone's .env (a denyRead file, never committed)
ENV = f"# local settings\nDB_PASSWORD={DB_PASSWORD}\nDB_HOST=localhost\n"
SECRETS = (OPENAI, GITHUB, AWS, DB_PASSWORD, MODEL_KEY)
AUTHOR = {"GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com"}


def published(tmp_path: Path, files: dict[str, str]) -> Path:
    """A repository pushed to a bare remote; returns the remote (clone it to work in it)."""
    origin = tmp_path / "origin"
    build_repo(origin, [Commit("start", files)])
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "--bare", "-q", str(origin), str(remote))
    return remote


def clone(remote: Path, into: Path) -> Path:
    git(into.parent, "clone", "-q", str(remote), str(into))
    return into


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, env=git_env(AUTHOR))


def conversation_of(result: dict) -> Path:
    return Path(result["conversation"]["path"])


# --- the finder (pure) -------------------------------------------------------------------------------------------


def test_finder_kinds_lines_and_a_second_pass_finds_nothing() -> None:
    sample = (
        "intro\n"
        f"OPENAI_API_KEY={OPENAI}\n"
        f'token = "{GITHUB}"\n'
        f"aws {AWS} here\n"
        "api_key = settings.api_key\n"  # code, not a secret
        '"apiKey": "Zq81hf0a9sdf"\n'
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA+/x=\n-----END RSA PRIVATE KEY-----\n"
        "password: xxxxxxxxxx\n"  # a placeholder
        f"held heldvalue123 and {DB_PASSWORD}\n"
    )
    denied = denied_strings([ENV])
    assert DB_PASSWORD in denied and "# local settings" not in denied
    found = find_secrets(sample, ["heldvalue123"], denied)
    assert [(f.kind, f.line) for f in found] == [
        ("openai key", 2),
        ("github token", 3),
        ("aws key", 4),
        ("key assignment", 6),
        ("private key", 7),
        ("held secret", 11),
        ("denyRead content", 11),
    ]
    cleaned, _ = redact_secrets(sample, ["heldvalue123"], denied)
    assert "api_key = settings.api_key" in cleaned and "password: xxxxxxxxxx" in cleaned
    assert "MIIE" not in cleaned and "[redacted: private key]" in cleaned
    assert all(s not in cleaned for s in (OPENAI, GITHUB, AWS, DB_PASSWORD, "heldvalue123", "Zq81hf0a9sdf"))
    assert find_secrets(cleaned, ["heldvalue123"], denied) == []


def test_finder_leaves_code_and_names_alone() -> None:
    """What a conversation about code is full of: names of keys, reads of them, paths, words; and this project's
    own source and README, which talk about keys everywhere and hold none."""
    code = (
        'apiKeyEnv: "OPENAI_API_KEY"\n'
        'token_type: "bearer_token"\n'
        'self._tokens_param = "max_completion_tokens"\n'
        '"/etc/passwd": "calc-0b8a1f9e"\n'
        'API_KEY = os.environ["API_KEY"]\n'
        "password = getpass()\n"
        "SECRET_KEY=${SECRET_KEY}\n"
    )
    assert find_secrets(code) == []
    root = Path(__file__).resolve().parents[1]
    sources = [*sorted((root / "server" / "nagent_lsp").rglob("*.py")), root / "README.md"]
    assert len(sources) > 100
    found = {f"{p.name}:{f.line}: {f.kind}" for p in sources for f in find_secrets(p.read_text(encoding="utf-8"))}
    assert found == set()


# --- the server: what it writes into a shared conversation -------------------------------------------------------


@pytest.mark.parametrize("profile", ["vscode", "eglot", "neovim"])
async def test_server_redacts_secrets_before_writing_a_shared_conversation(
    profile, tmp_path, editors, fake_model, model_env
) -> None:
    remote = published(tmp_path, {"calc.py": CALC, ".gitignore": ".env\n"})
    work = clone(remote, tmp_path / "work")
    (work / ".env").write_text(ENV, encoding="utf-8")  # the user's own denyRead file in the clone
    target = work / "calc.py"
    fake_model.script(
        text(f"<nagent-response>Use {OPENAI}, AWS {AWS} and the database password {DB_PASSWORD}.</nagent-response>")
    )
    request = f"deploy with the token {GITHUB} please"
    async with editors.open(profile, work, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": request})
    conversation = conversation_of(result).read_text(encoding="utf-8")
    assert "deploy with the token [redacted: github token] please" in conversation  # the request, kept but redacted
    assert "[redacted: openai key]" in conversation and "[redacted: aws key]" in conversation
    assert "[redacted: denyRead content]" in conversation
    assert conversation.count("[redacted:") == 4, conversation  # nothing else: not the rules, the context, the code
    assert all(s not in conversation for s in SECRETS)

    # The check finds nothing left; a fresh `git add -A` takes the conversation and never outputs/ nor proposals/.
    out = cli("conversations", "check", cwd=work, env=model_env)
    assert out.returncode == 0, out.stdout + out.stderr
    root = work / ".nagent"
    for local in ("outputs/run.txt", "proposals/p1/proposal.json"):
        (root / local).parent.mkdir(parents=True, exist_ok=True)
        (root / local).write_text(f"spilled {OPENAI}\n", encoding="utf-8")
    git(work, "add", "-A")
    staged = git(work, "diff", "--cached", "--name-only").split()
    assert f".nagent/conversations/{conversation_of(result).name}" in staged
    assert ".nagent/conversations/.gitattributes" in staged
    assert not [p for p in staged if p.startswith((".nagent/outputs/", ".nagent/proposals/"))], staged
    assert ".env" not in staged
    for secret in SECRETS:
        assert git_grep_cached(work, secret) == "", secret


async def test_a_denyread_file_a_command_printed_is_redacted_in_the_shared_conversation(
    tmp_path, isolated_home, fake_model, model_env
) -> None:
    """The read rules keep `.env` from the model's reads, but a shell command can print it: its lines (and their
    values, though no key-like name holds them) never reach the committed conversation."""
    database_url = "postgres://app:pw9Xk2@db.internal/prod"  # DATABASE_URL is not a key-like name
    remote = published(tmp_path, {"calc.py": CALC, ".gitignore": ".env\n"})
    work = clone(remote, tmp_path / "work")
    (work / ".env").write_text(f"DATABASE_URL={database_url}\n", encoding="utf-8")
    (work / "deploy.cfg").write_text("host prod.internal via bastion-7Qz\n", encoding="utf-8")  # denyRead: yours
    config = isolated_home / ".nagent" / "config.json"
    settings = {"shell": "allow", "denyRead": [".env", "deploy.cfg"], "history": {"summarize": False}}
    config.write_text(json.dumps(settings), encoding="utf-8")
    fake_model.script(
        text("<nagent-shell>cat .env; echo; echo url=$(cut -d= -f2- .env); cat deploy.cfg</nagent-shell>"),
        text("<nagent-response>looked</nagent-response>"),
    )
    target = work / "calc.py"
    async with open_editor("neovim", work, isolated_home, env=model_env) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "show the settings"})
        assert await wait_until(lambda: any("redacted" in m.message for m in editor.client.log_messages))
        logged = [m.message for m in editor.client.log_messages if "redacted" in m.message]
    assert len(logged) == 1 and "denyRead content" in logged[0] and "pw9Xk2" not in logged[0], logged
    conversation = conversation_of(result).read_text(encoding="utf-8")
    shell_result = conversation.rsplit("<nagent-shell-result>", 1)[1]
    assert shell_result.count("[redacted: denyRead content]") == 3, shell_result  # the line, the value, deploy.cfg
    assert database_url not in conversation and "pw9Xk2" not in conversation and "bastion-7Qz" not in conversation


def git_grep_cached(repo: Path, needle: str) -> str:
    try:
        return git(repo, "grep", "--cached", "-l", "-F", needle)
    except Exception:  # noqa: BLE001  exit 1: not found
        return ""


async def test_a_conversation_that_stays_local_is_written_as_it_is(tmp_path, editors, fake_model) -> None:
    """Not in a repository: nothing is shared, so nothing but the API key is redacted (the model reads back its
    own words). Proves the redaction above depends on the conversation being shared."""
    work = tmp_path / "plain"
    work.mkdir()
    target = work / "calc.py"
    target.write_text(CALC, encoding="utf-8")
    fake_model.script(text(f"<nagent-response>Use {OPENAI}.</nagent-response>"))
    async with editors.open("vscode", work, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": f"token {GITHUB}"})
    conversation = conversation_of(result).read_text(encoding="utf-8")
    assert OPENAI in conversation and GITHUB in conversation and "[redacted:" not in conversation


async def test_a_conversation_the_repository_ignores_is_not_redacted(tmp_path, editors, fake_model) -> None:
    remote = published(tmp_path, {"calc.py": CALC, ".gitignore": ".nagent/\n"})
    work = clone(remote, tmp_path / "work")
    target = work / "calc.py"
    fake_model.script(text(f"<nagent-response>Use {OPENAI}.</nagent-response>"))
    async with editors.open("vscode", work, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "go"})
    assert OPENAI in conversation_of(result).read_text(encoding="utf-8")


# --- the CLI ---------------------------------------------------------------------------------------------------------


def test_check_reports_file_line_kind_never_the_secret_and_fix_redacts(tmp_path, model_env) -> None:
    remote = published(tmp_path, {"calc.py": CALC, ".gitignore": ".env\n"})
    work = clone(remote, tmp_path / "work")
    (work / ".env").write_text(ENV, encoding="utf-8")
    folder = work / ".nagent" / "conversations"
    (folder / "saved").mkdir(parents=True)
    planted = folder / "calc-0b7e6a8c-8f0c-4c1b-9d55-1f2e3a4b5c6d"  # as an older server or a hand edit left it
    planted.write_text(f"<user-prompt>\nhello\n</user-prompt>\nkey {OPENAI}\n\npw {DB_PASSWORD}\n", encoding="utf-8")
    saved = folder / "saved" / "before-deploy"
    saved.write_text(f'export GITHUB_TOKEN="{GITHUB}"\n', encoding="utf-8")
    index = folder / "file-index.json"
    index.write_text(json.dumps({"by_file_id": {}, "note": OPENAI}), encoding="utf-8")  # not a conversation
    clean = folder / "other-1"
    clean.write_text("<user-prompt>\nnothing secret\n</user-prompt>\n", encoding="utf-8")

    out = cli("conversations", "check", cwd=work, env=model_env)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert f".nagent/conversations/{planted.name}:4: openai key" in lines
    assert f".nagent/conversations/{planted.name}:6: denyRead content" in lines
    assert ".nagent/conversations/saved/before-deploy:1: github token" in lines
    assert len(lines) == 3, lines
    assert all(s not in out.stdout + out.stderr for s in SECRETS)

    out = cli("conversations", "check", str(work / "calc.py"), "--fix", cwd=tmp_path, env=model_env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert planted.read_text(encoding="utf-8") == (
        "<user-prompt>\nhello\n</user-prompt>\nkey [redacted: openai key]\n\npw [redacted: denyRead content]\n"
    )
    assert saved.read_text(encoding="utf-8") == 'export GITHUB_TOKEN="[redacted: github token]"\n'
    assert OPENAI in index.read_text(encoding="utf-8")  # the JSON index is not a conversation: left alone
    assert clean.read_text(encoding="utf-8") == "<user-prompt>\nnothing secret\n</user-prompt>\n"
    again = cli("conversations", "check", cwd=work, env=model_env)
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr


# --- conflicts: two clones append to one conversation ------------------------------------------------------------


async def test_two_clones_appending_to_one_conversation_merge_as_text(tmp_path, editors, fake_model) -> None:
    remote = published(tmp_path, {"calc.py": CALC})
    first = clone(remote, tmp_path / "a")
    target = first / "calc.py"
    fake_model.script(text("<nagent-response>First answer.</nagent-response>"))
    async with editors.open("vscode", first, model=True) as editor:
        editor.open(target)
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": "explain add"})
    conversation = conversation_of(result)
    relative = conversation.relative_to(first).as_posix()
    attributes = (first / ".nagent" / "conversations" / ".gitattributes").read_text(encoding="utf-8")
    assert "* merge=union" in attributes and "*.json !merge" in attributes
    commit_all(first, "conversation about add")
    git(first, "push", "-q", "origin", "HEAD")

    second = clone(remote, tmp_path / "b")
    assert (second / relative).read_text(encoding="utf-8") == conversation.read_text(encoding="utf-8")
    # Both append a turn to the same conversation, each in their own clone, and commit.
    with (first / relative).open("a", encoding="utf-8") as handle:
        handle.write("\n<user-prompt>\nAnn: handle floats too\n</user-prompt>\n")
    commit_all(first, "Ann's turn")
    git(first, "push", "-q", "origin", "HEAD")
    with (second / relative).open("a", encoding="utf-8") as handle:
        handle.write("\n<user-prompt>\nBob: and add a docstring\n</user-prompt>\n")
    commit_all(second, "Bob's turn")

    git(second, "pull", "-q", "--no-rebase", "--no-edit", "origin", "HEAD", env=git_env(AUTHOR))
    merged = (second / relative).read_text(encoding="utf-8")
    base = conversation.read_text(encoding="utf-8").split("\n<user-prompt>\nAnn")[0]
    # The protocol rules in the initial context show SEARCH/REPLACE markers: no more of them than the base has.
    for marker in ("<<<<<<<", "=======", ">>>>>>>"):
        assert merged.count(marker) == base.count(marker), marker
    assert merged.startswith(base)
    assert "Ann: handle floats too" in merged and "Bob: and add a docstring" in merged
    assert git(second, "status", "--porcelain") == ""  # merged and committed, nothing unresolved

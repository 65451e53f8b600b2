"""Git runs as a reader, never as a command runner (issue 21, finding 2; DESIGN §12).

A repository brings its own git configuration: delivered with its `.git` (an archive), or written by the model as
a `.git` FILE pointing at a git dir of its making. Every program that configuration names — textconv and external
diff drivers, clean/smudge/process filters, merge drivers, fsmonitor, hooks (reference-transaction on update-ref and
fast-import, the remote's receive hooks), the pager, ssh/askpass/credential/proxy commands, upload-pack and
receive-pack — touches a marker file when it runs. Through the real server (hover with blame, nagent.history with
commit summaries from the fake model, nagent.summarize) and the CLI (`history`, `summaries push/fetch`), no marker
may appear, and every operation still answers. A git child's environment never holds the key, and where PID
namespaces work, a git child cannot see the server in /proc.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nagent_lsp.core.isolation import namespace_prefix_blocking
from nagent_lsp.history.summary_notes import NOTES_REF
from tests.harness.fake_openai import FakeOpenAI
from tests.harness.gitrepo import Commit, build_repo, git, git_env
from tests.harness.lsp import open_editor, server_env
from tests.test_history_lsp import poll, summarising_responder

KEY = "sk-git-reader-key-6c1f0e"
HOOKS = (
    "reference-transaction",
    "post-checkout",
    "pre-push",
    "pre-auto-gc",
    "post-index-change",
    "pre-receive",
    "update",
    "post-receive",
    "post-update",
    "push-to-checkout",
    "proc-receive",
    "post-merge",
    "pre-commit",
)
# The test's own pushes to the hostile remote: its hooks must not fire for them either (they would fail the test).
QUIET_RECEIVE_PACK = "git -c core.hooksPath=/dev/null -c core.alternateRefsCommand=true receive-pack"
# Settings of the USER: commit summaries on (show --patch of every commit the hover card shows).
USER_CONFIG = {"history": {"summarize": True}}


class Trap:
    """A directory of markers and the programs a hostile config names; each touches `markers/<what>`."""

    def __init__(self, base: Path):
        self.markers = base / "markers"
        self.markers.mkdir(parents=True)
        self.script = base / "evil.sh"
        self.script.write_text(f'#!/bin/sh\n: > "{self.markers}/$1"\ncat\n', encoding="utf-8")
        self.script.chmod(0o755)
        self.hooks = base / "hooks"
        self.hooks.mkdir()
        for name in HOOKS:
            self.install_hook(self.hooks / name, name)

    def install_hook(self, path: Path, name: str) -> None:
        path.write_text(f'#!/bin/sh\n: > "{self.markers}/hook-{name}"\n', encoding="utf-8")
        path.chmod(0o755)

    def cmd(self, what: str) -> str:
        return f"{self.script} {what}"

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def arm(self, config: Path, include: Path | None = None, prefix: str = "") -> None:
        """Write every hostile entry into the config file `config` (git config --file runs nothing)."""
        entries = {
            "core.fsmonitor": self.cmd(f"{prefix}fsmonitor"),
            "core.hooksPath": str(self.hooks),
            "core.pager": self.cmd(f"{prefix}pager"),
            "core.sshCommand": self.cmd(f"{prefix}ssh"),
            "core.askPass": self.cmd(f"{prefix}askpass"),
            "core.alternateRefsCommand": self.cmd(f"{prefix}alternate-refs"),
            "core.gitProxy": self.cmd(f"{prefix}proxy"),
            "diff.external": self.cmd(f"{prefix}external"),
            "diff.evil.textconv": self.cmd(f"{prefix}textconv"),
            "diff.evil.command": self.cmd(f"{prefix}diff-command"),
            "filter.evil.clean": self.cmd(f"{prefix}clean"),
            "filter.evil.smudge": self.cmd(f"{prefix}smudge"),
            "filter.evil.process": self.cmd(f"{prefix}process"),
            "filter.evil.required": "true",
            "merge.evil.driver": self.cmd(f"{prefix}merge") + " %O %A %B",
            "credential.helper": "!" + self.cmd(f"{prefix}credential"),
            "pager.log": self.cmd(f"{prefix}pager-log"),
            "pager.show": self.cmd(f"{prefix}pager-show"),
            "gpg.program": self.cmd(f"{prefix}gpg"),
            "push.gpgSign": "true",
            "protocol.ext.allow": "always",
        }
        for key, value in entries.items():
            git(config.parent, "config", "--file", str(config), key, value)
        if include is not None:
            for key, value in {
                "diff.evil2.textconv": self.cmd(f"{prefix}textconv2"),
                "filter.evil2.smudge": self.cmd(f"{prefix}smudge2"),
                "filter.evil2.clean": self.cmd(f"{prefix}clean2"),
                "filter.evil2.required": "true",
            }.items():
                git(include.parent, "config", "--file", str(include), key, value)
            # relative to the including file, as a repository ships it
            git(config.parent, "config", "--file", str(config), "include.path", include.name)


def story(root: Path) -> list[str]:
    return build_repo(
        root,
        [
            Commit(
                "start",
                {
                    "a.py": "one\ntwo\n",
                    "doc.md": "d\n",
                    ".gitattributes": "* diff=evil filter=evil merge=evil\n*.md diff=evil2 filter=evil2\n",
                },
                author="Ann Lee",
                email="ann@example.com",
            ),
            Commit("second", {"a.py": "one\nTWO\n", "doc.md": "d2\n"}, author="Bob Ray", email="bob@example.com"),
            Commit("third", {"a.py": "ONE\nTWO\n"}, author="Ann Lee", email="ann@example.com"),
        ],
    )


def user_home(home: Path) -> Path:
    config = home / ".nagent" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps(USER_CONFIG), encoding="utf-8")
    return home


def responder(request) -> dict:
    """Commit summaries for history; one line for nagent.summarize."""
    if "Commit: " in request.messages[-1]["content"]:
        return summarising_responder(request)
    return {"text": "A file of words."}


def cli(folder: Path, home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nagent_lsp", *args],
        cwd=folder,
        env=server_env(home, env),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def note(repo: Path, ref: str, commit: str, entries: dict[str, str]) -> None:
    who = git_env({"GIT_AUTHOR_NAME": "Mate", "GIT_AUTHOR_EMAIL": "mate@example.com"})
    git(repo, "notes", f"--ref={ref}", "add", "-f", "-m", json.dumps(entries), commit, env=who)


@pytest.fixture
def delivered(tmp_path: Path) -> tuple[Path, Path, list[str], Trap]:
    """A repository delivered with its own hostile `.git` (copied as an archive would unpack it), whose origin is
    a bare remote with hostile hooks and config of its own. Returns (workspace, remote, hashes, trap)."""
    trap = Trap(tmp_path / "trap")
    src = tmp_path / "src"
    h = story(src)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(src, "push", "-q", str(remote), "main")
    # a teammate's summaries on the remote, ours in the repository: push must merge, fetch must bring theirs
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "mate"))
    note(tmp_path / "mate", NOTES_REF, h[0], {"a.py": "Mate: start."})
    git(tmp_path / "mate", "push", "-q", "origin", NOTES_REF)
    note(src, NOTES_REF, h[1], {"a.py": "Ours: second."})
    git(src, "remote", "add", "origin", str(remote))
    # now the traps: the remote's own hooks and config, the repository's config and an included file
    for name in HOOKS:
        trap.install_hook(remote / "hooks" / name, f"remote-{name}")
    trap.arm(remote / "config", prefix="remote-")
    trap.arm(src / ".git" / "config", include=src / ".git" / "more.cfg")
    for key in ("remote.origin.uploadpack", "remote.origin.receivepack"):
        git(src, "config", "--file", str(src / ".git" / "config"), key, trap.cmd(key))
    workspace = tmp_path / "work" / "repo"
    shutil.copytree(src, workspace, symlinks=True)
    (workspace / "a.py").write_text("ONE\nTWO\n", encoding="utf-8")  # the work tree as unpacked
    assert trap.fired() == []
    return workspace, remote, h, trap


async def exercise(editor, target: Path, hashes: list[str]) -> None:
    """Hover (blame of the line, the card, commit summaries), nagent.history and nagent.summarize, answered."""
    editor.open(target)
    uri = target.resolve().as_uri()

    async def card() -> str:
        hover = await editor.hover(target, 1)
        return hover.contents.value if hover else ""

    text = await poll(card, lambda t: "**Line 2** last changed" in t and "Model says" in t)
    assert "**Line 2** last changed" in text and f"`{hashes[1][:7]}` Bob Ray" in text, text
    history = await poll(
        lambda: editor.command("nagent.history", {"uri": uri}),
        lambda r: all((c.get("summary") or "").startswith("Model says") for c in r["commits"]),
    )
    assert [c["subject"] for c in history["commits"]] == ["third", "second", "start"]
    assert all(c["summary"].startswith("Model says") for c in history["commits"]), history
    summary = await editor.command("nagent.summarize", {"uri": uri})
    assert summary["summary"] == "A file of words."


async def test_delivered_git_runs_nothing_over_lsp(delivered, tmp_path: Path) -> None:
    workspace, _, h, trap = delivered
    home = user_home(tmp_path / "home")
    with FakeOpenAI(responder=responder) as fake:
        env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.base_url}
        async with open_editor("vscode", workspace, home, env=env) as editor:
            await exercise(editor, workspace / "a.py", h)
            assert trap.fired() == []
            # doc.md names the drivers the included file defines
            hover = await poll(lambda: editor.hover(workspace / "doc.md", 0), lambda r: r is not None)
            assert hover is not None and "last changed" in hover.contents.value
    assert trap.fired() == []


def test_delivered_git_runs_nothing_from_the_cli(delivered, tmp_path: Path) -> None:
    workspace, remote, h, trap = delivered
    home = user_home(tmp_path / "home")
    out = cli(workspace, home, "history", "a.py", "--json")
    assert out.returncode == 0, out.stderr
    assert [c["subject"] for c in json.loads(out.stdout)["commits"]] == ["third", "second", "start"]
    assert trap.fired() == []

    pushed = cli(workspace, home, "summaries", "push")
    assert pushed.returncode == 0, pushed.stderr
    assert "pushed to origin" in pushed.stdout and "merged" in pushed.stdout
    assert trap.fired() == []
    shared = json.loads(git(remote, "notes", f"--ref={NOTES_REF}", "show", h[1]))
    assert shared == {"a.py": "Ours: second."}  # the push really reached the remote, through git-receive-pack

    assert trap.fired() == []
    note(tmp_path / "mate", NOTES_REF, h[2], {"a.py": "Mate: third."})
    git(tmp_path / "mate", "fetch", "-q", "origin", f"+{NOTES_REF}:refs/notes/theirs")
    who = git_env({"GIT_AUTHOR_NAME": "Mate", "GIT_AUTHOR_EMAIL": "mate@example.com"})
    git(tmp_path / "mate", "notes", f"--ref={NOTES_REF}", "merge", "-q", "-s", "union", "refs/notes/theirs", env=who)
    git(tmp_path / "mate", "push", "-q", f"--receive-pack={QUIET_RECEIVE_PACK}", "origin", NOTES_REF)
    assert trap.fired() == []
    fetched = cli(workspace, home, "summaries", "fetch", "origin")
    assert fetched.returncode == 0, fetched.stderr
    assert "merged from origin" in fetched.stdout
    assert json.loads(git(workspace, "notes", f"--ref={NOTES_REF}", "show", h[2])) == {"a.py": "Mate: third."}
    assert trap.fired() == []


def missing_objects(repo: Path) -> int:
    listed = git(repo, "-c", "protocol.allow=never", "rev-list", "--objects", "--missing=print", "--all")
    return sum(1 for line in listed.splitlines() if line.startswith("?"))


@pytest.fixture
def partial(tmp_path: Path) -> tuple[Path, Trap]:
    """A partial clone (`--filter=blob:none`: old blobs are fetched on demand) whose config makes that fetch run
    programs: the remote's upload-pack, ssh, a credential helper, every protocol allowed."""
    trap = Trap(tmp_path / "trap")
    src = tmp_path / "src"
    story(src)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(remote, "config", "uploadpack.allowFilter", "true")
    git(src, "push", "-q", str(remote), "main")
    workspace = tmp_path / "work" / "repo"
    git(
        tmp_path,
        "-c",
        "protocol.file.allow=always",
        "clone",
        "-q",
        "-b",
        "main",  # the bare remote's HEAD names its own default branch
        "--filter=blob:none",
        remote.as_uri(),
        str(workspace),
    )
    config = workspace / ".git" / "config"
    for key, value in {
        "remote.origin.uploadpack": trap.cmd("promisor-upload-pack"),
        "core.sshCommand": trap.cmd("promisor-ssh"),
        "credential.helper": "!" + trap.cmd("promisor-credential"),
        "protocol.allow": "always",
        "protocol.file.allow": "always",
    }.items():
        git(workspace, "config", "--file", str(config), key, value)
    assert missing_objects(workspace) > 0 and trap.fired() == []
    return workspace, trap


async def test_a_partial_clone_never_fetches_on_a_hover(partial, tmp_path: Path) -> None:
    workspace, trap = partial
    missing = missing_objects(workspace)
    home = user_home(tmp_path / "home")
    with FakeOpenAI(responder=responder) as fake:
        env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.base_url}
        async with open_editor("vscode", workspace, home, env=env) as editor:
            editor.open(workspace / "a.py")

            async def card() -> str:
                hover = await editor.hover(workspace / "a.py", 1)
                return hover.contents.value if hover else ""

            text = await poll(card, lambda t: "partial clone" in t)
            assert "partial clone" in text and "does not fetch" in text, text  # said, not "not committed yet"
    cold = cli(workspace, home, "history", "a.py")
    assert cold.returncode == 0 and "third" in cold.stdout, cold.stderr
    blamed = cli(workspace, home, "blame", "a.py")
    assert blamed.returncode == 1 and "partial clone" in blamed.stderr and not blamed.stdout
    assert trap.fired() == [] and missing_objects(workspace) == missing  # nothing ran, nothing was fetched


def test_a_remote_helper_named_by_the_repository_is_refused(delivered, tmp_path: Path) -> None:
    workspace, _, _, trap = delivered
    helper = tmp_path / "bin" / "git-remote-evil"
    helper.parent.mkdir()
    helper.write_text(f'#!/bin/sh\n: > "{trap.markers}/remote-helper"\n', encoding="utf-8")
    helper.chmod(0o755)
    git(workspace, "config", "--file", str(workspace / ".git" / "config"), "remote.origin.vcs", "evil")
    env = {"PATH": f"{helper.parent}{os.pathsep}{os.environ['PATH']}"}
    pushed = cli(workspace, user_home(tmp_path / "home"), "summaries", "push", env=env)
    assert pushed.returncode != 0 and "remote.origin.vcs" in pushed.stderr and "Traceback" not in pushed.stderr
    assert trap.fired() == []


@pytest.fixture
def model_written(tmp_path: Path) -> tuple[Path, list[str], Trap]:
    """A cloned workspace in which the model wrote `sub/.git` (a FILE: gitdir: ../fakegit), the fake git dir with
    a hostile config, and `sub/.gitattributes`. Returns (workspace, the fake history's hashes, trap)."""
    trap = Trap(tmp_path / "trap")
    origin = tmp_path / "origin"
    build_repo(origin, [Commit("benign", {"README.md": "hello\n"})])
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(origin), str(remote))
    workspace = tmp_path / "work" / "clone"
    git(tmp_path, "clone", "-q", str(remote), str(workspace))
    fake = tmp_path / "fake-src"
    h = build_repo(
        fake,
        [
            Commit("start", {"a.py": "one\ntwo\n"}, author="Ann Lee", email="ann@example.com"),
            Commit("second", {"a.py": "one\nTWO\n"}, author="Bob Ray", email="bob@example.com"),
            Commit("third", {"a.py": "ONE\nTWO\n"}, author="Ann Lee", email="ann@example.com"),
        ],
    )
    # what the model's ordinary file writes produce (the lead's denyWrite refuses them now; made here directly)
    shutil.copytree(fake / ".git", workspace / "fakegit")
    trap.arm(workspace / "fakegit" / "config", include=workspace / "fakegit" / "more.cfg")
    sub = workspace / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../fakegit\n", encoding="utf-8")
    (sub / ".gitattributes").write_text("*.py diff=evil filter=evil\n", encoding="utf-8")
    (sub / "a.py").write_text("ONE\nTWO\n", encoding="utf-8")
    assert trap.fired() == []
    return workspace, h, trap


async def test_model_written_git_file_runs_nothing(model_written, tmp_path: Path) -> None:
    workspace, h, trap = model_written
    home = user_home(tmp_path / "home")
    with FakeOpenAI(responder=responder) as fake:
        env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.base_url}
        async with open_editor("eglot", workspace, home, env=env) as editor:
            await exercise(editor, workspace / "sub" / "a.py", h)
    assert trap.fired() == []


def spy(base: Path) -> tuple[Path, Path]:
    """A `git` earlier on PATH that records, per run, its environment, its pid and the pids it sees in /proc."""
    bindir, dumps = base / "spybin", base / "dumps"
    bindir.mkdir()
    dumps.mkdir()
    real = shutil.which("git")
    assert real is not None
    wrapper = bindir / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'd="{dumps}/$(date +%s%N)-$$"\n'
        'mkdir -p "$d"\n'
        'cat /proc/self/environ > "$d/environ"\n'
        'echo "$$" > "$d/pid"\n'
        'ls /proc > "$d/proc"\n'
        f'exec "{real}" "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return bindir, dumps


@pytest.mark.parametrize("isolation", ["namespace", "off"])
async def test_git_children_hold_no_key_and_cannot_see_the_server(isolation: str, delivered, tmp_path: Path) -> None:
    workspace, _, h, trap = delivered
    if isolation == "namespace" and namespace_prefix_blocking() is None:
        pytest.skip("PID namespaces are not available here")
    bindir, dumps = spy(tmp_path)
    home = user_home(tmp_path / "home")
    with FakeOpenAI(responder=responder) as fake:
        env = {
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": fake.base_url,
            "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
            # inherited variables that would point git elsewhere or inject config: dropped for git children
            "GIT_DIR": str(tmp_path / "nowhere"),
            "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor={trap.cmd('inherited-fsmonitor')}'",
            "GIT_EXTERNAL_DIFF": trap.cmd("inherited-external"),
        }
        if isolation == "off":
            env["NAGENT_LSP_SHELL_ISOLATION"] = "off"
        async with open_editor("neovim", workspace, home, env=env) as editor:
            await exercise(editor, workspace / "a.py", h)
            server = editor.client._server  # type: ignore[attr-defined]
            server_pid = str(server.pid)
    runs = [d for d in dumps.iterdir() if (d / "pid").is_file()]
    assert len(runs) >= 3  # log, blame, show at least: the spy really stood in for git
    for run in runs:
        environ = (run / "environ").read_bytes().split(b"\0")
        assert not any(KEY.encode() in entry for entry in environ), run
        assert not any(entry.startswith((b"OPENAI_API_KEY=", b"GIT_DIR=", b"GIT_EXTERNAL_DIFF=")) for entry in environ)
        pid = (run / "pid").read_text().strip()
        seen = (run / "proc").read_text().split()
        if isolation == "namespace":
            assert pid == "1" and server_pid not in seen, (pid, server_pid)
        else:
            assert pid != "1" and server_pid in seen  # the switch really turns the namespace off
    assert trap.fired() == []

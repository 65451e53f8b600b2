"""Issue 25, "context by hand": `@path` mentions in a request include those files, read through the confinement
and denyRead rules, recorded in the conversation, and listed in the result (`mentions`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from nagent_lsp.agent.mentions import mentioned_paths
from tests.harness.fake_openai import text
from tests.harness.gitrepo import Commit, build_repo

ORIGINAL = "def add(a, b):\n    return a + b\n"
HELPER = "HELPER_MARKER = 42\n"
SPACED = "SPACED_MARKER = 1\n"
SECRET = "SECRET_TOKEN=do-not-leak-mention\n"
OUTSIDE = "OUTSIDE_MARKER\n"


def test_what_counts_as_a_mention() -> None:
    request = 'use @helper.py, @"docs/a b.md" and (@lib/x.py). mail ann@example.com; @dataclass @helper.py'
    assert mentioned_paths(request) == [
        ("helper.py", False),
        ("docs/a b.md", True),
        ("lib/x.py", False),
        ("dataclass", False),
    ]


def cloned(tmp_path: Path, workspace: Path) -> Path:
    """A repository with a symbolic link out of it and a secret file committed, pushed and cloned."""
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE, encoding="utf-8")
    origin = tmp_path / "origin"
    build_repo(
        origin,
        [Commit("init", {"calc.py": ORIGINAL, "helper.py": HELPER, "docs/a b.md": SPACED, ".env": SECRET})],
    )
    (origin / "escape.txt").symlink_to(outside)
    subprocess.run(["git", "-C", str(origin), "add", "escape.txt"], check=True)
    subprocess.run(
        ["git", "-C", str(origin), "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-qm", "link"],
        check=True,
    )
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(bare)], check=True)
    workspace.rmdir()
    subprocess.run(["git", "clone", "-q", str(bare), str(workspace)], check=True)
    return workspace / "calc.py"


async def test_mentions_are_read_confined_and_recorded(profile, workspace, editors, fake_model, tmp_path) -> None:
    target = cloned(tmp_path, workspace)
    fake_model.script(text("<nagent-response>read them</nagent-response>"))
    request = 'compare with @helper.py and @"docs/a b.md"; not @.env nor @escape.txt nor @missing/x.py; @dataclass'
    async with editors.open(profile, workspace, model=True) as editor:
        result = await editor.command("nagent.edit", {"uri": editor.uri(target), "request": request})
    mentions = {m["path"]: m for m in result["mentions"]}
    assert list(mentions) == ["helper.py", "docs/a b.md", ".env", "escape.txt", "missing/x.py"]  # no @dataclass
    assert mentions["helper.py"] == {"path": "helper.py", "included": True}
    assert mentions["docs/a b.md"]["included"] is True
    for refused in (".env", "escape.txt", "missing/x.py"):
        assert mentions[refused]["included"] is False and mentions[refused]["reason"], mentions[refused]
    assert "denyRead" in mentions[".env"]["reason"] or "refused" in mentions[".env"]["reason"]
    assert "2 of 5 mentioned files included" in result["message"]
    sent = json.dumps(fake_model.chat_requests[0].body)
    assert "HELPER_MARKER" in sent and "SPACED_MARKER" in sent
    assert "do-not-leak-mention" not in sent and "OUTSIDE_MARKER" not in sent
    conversation = Path(result["conversation"]["path"]).read_text(encoding="utf-8")
    assert '<nagent-read-result path="helper.py" mentioned="true">\nHELPER_MARKER = 42' in conversation
    assert conversation.index("</user-prompt>") < conversation.index("HELPER_MARKER")  # after the request
    assert "do-not-leak-mention" not in conversation and "OUTSIDE_MARKER" not in conversation

"""The abuse campaign against ONE long-lived nagent-lsp process (issue 12; DESIGN §12).

`run_campaign(base, Size.bounded())` builds a workspace (a git repository with planted secrets, symlinks, a FIFO,
a sparse file larger than maxFileBytes), a directory outside it, and a fake model; starts the real server over
raw stdio with a canary API key in its environment; then, in order:

1. fuzz: random and malformed requests (tests/abuse/fuzz.py), in batches, each batch closed by a probe;
2. path attacks: outside files, traversal, symlinks, denyRead names in any case, another repository;
3. crafted split indexes: planted outside the state root, segment paths and sources outside, a user's file next
   to a planted index, the model's <nagent-file-patch> on a crafted index;
4. provider faults: 401/403/404 tried once, 429 retried only by the SDK, a Retry-After shown in progress;
5. shell abuse: the model reads /proc/$PPID/environ and `env` reversed and base64-encoded, leaves setsid children
   holding the output pipe;
6. special files: /dev/zero, /dev/stdin, /dev/urandom, /proc/self/mem, a FIFO, a sparse file over maxFileBytes,
   through split, summarize, edit, codeAction, hover and the model's <nagent-read>, each with a probe behind it;
7. the end: the server must still answer, then shut down cleanly.

Then every byte the server wrote, its stderr, its log files, every file under the campaign's folders and every
request the model received are searched for the canary key (plain, reversed, base64 at three alignments, hex)
and for the planted secrets; every answer and message for tracebacks and Python exception text.

Each attack records the issue item whose defence it checks, so a test can name what failed.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import random
import re
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.abuse.fuzz import (
    INTERNAL,
    INVALID_PARAMS,
    PARSE,
    RESULT,
    USER_ERROR,
    Case,
    Expect,
    Fuzzer,
)
from tests.abuse.rawserver import GUARD, MISSING, RawServer, frame, server_env

TRACEBACK = re.compile(r'Traceback \(most recent call last\)|File "[^"\n]+", line \d+')
PYTHON_TEXT = re.compile(
    r"\[Errno -?\d+\]|embedded null byte|surrogates not allowed|object has no attribute|NoneType|"
    r"\b(?:[A-Z][a-z]+)+(?:Error|Exception): |codec can't (?:en|de)code"
)
REFUSED = frozenset({INVALID_PARAMS, USER_ERROR})
DONE = "<nagent-response>done</nagent-response>"
SCAN_FILE_LIMIT = 64 * 1024 * 1024  # bytes: larger files (the sparse one) are not read by the scan


@dataclass(frozen=True)
class Size:
    name: str
    fuzz_cases: int
    batch: int
    sparse_mib: int  # the oversized workspace file
    long_uri_chars: int
    seed: int = 12

    @staticmethod
    def bounded() -> Size:
        return Size("bounded", fuzz_cases=2500, batch=250, sparse_mib=64, long_uri_chars=1_000_000)

    @staticmethod
    def full(fuzz_cases: int = 10_000) -> Size:
        return Size("full", fuzz_cases=fuzz_cases, batch=250, sparse_mib=300, long_uri_chars=10_000_000)


@dataclass
class Attack:
    name: str
    item: str  # the issue 12 item whose defence this checks
    ok: bool
    detail: str = ""


@dataclass
class Report:
    size: str
    requests: int = 0  # requests sent that had to be answered
    unanswered: list[str] = field(default_factory=list)
    wrong_codes: list[str] = field(default_factory=list)
    internal_errors: list[str] = field(default_factory=list)
    codes: collections.Counter[int] = field(default_factory=collections.Counter)
    null_id_expected: int = 0
    null_id_received: int = 0
    tracebacks: list[str] = field(default_factory=list)  # in answers, editor messages or stderr
    python_text: list[str] = field(default_factory=list)  # in answers
    canary_hits: list[str] = field(default_factory=list)
    secret_hits: list[str] = field(default_factory=list)
    broken_frames: list[str] = field(default_factory=list)
    attacks: list[Attack] = field(default_factory=list)
    alive_at_end: bool = False
    exit_code: int | None = None
    peak_rss_mib: float | None = None
    log_file_bytes: int = 0
    log_messages: int = 0
    longest_log_message: int = 0
    model_requests: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    fuzz_families: collections.Counter[str] = field(default_factory=collections.Counter)

    def attack(self, name: str) -> Attack:
        return next(a for a in self.attacks if a.name == name)

    def failed_attacks(self, item: str | None = None) -> list[Attack]:
        return [a for a in self.attacks if not a.ok and (item is None or a.item == item)]

    def figures(self) -> str:
        codes = ", ".join(f"{'result' if c == RESULT else c}: {n}" for c, n in sorted(self.codes.items()))
        failed = "; ".join(f"{a.name} (item {a.item}): {a.detail}" for a in self.failed_attacks()) or "none"
        lines = [
            f"abuse campaign ({self.size}) against one server process",
            f"  requests sent (each needing an answer): {self.requests}",
            f"  unanswered: {len(self.unanswered)}",
            f"  wrong JSON-RPC codes: {len(self.wrong_codes)}   internal errors (-32603): {len(self.internal_errors)}",
            f"  answers by code: {codes}",
            f"  id-null error answers: {self.null_id_received} (garbage that carried no usable id: "
            f"{self.null_id_expected})",
            f"  tracebacks in answers/messages/stderr: {len(self.tracebacks)}   "
            f"Python exception text in answers: {len(self.python_text)}",
            f"  canary key hits (plain/reversed/base64/hex; stdout, stderr, logs, files, model requests): "
            f"{len(self.canary_hits)}",
            f"  planted secrets found where they must not be: {len(self.secret_hits)}",
            f"  broken frames from the server: {len(self.broken_frames)}",
            f"  attacks: {len(self.attacks)} run, {len(self.failed_attacks())} failed: {failed}",
            f"  window/logMessage: {self.log_messages} (longest {self.longest_log_message} chars); "
            f"log files: {self.log_file_bytes} bytes",
            f"  model requests: {self.model_requests}   peak RSS: {self.peak_rss_mib} MiB",
            f"  server alive at the end: {self.alive_at_end}   exit code: {self.exit_code}",
            "  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()),
        ]
        return "\n".join(lines)


# -- the scene --------------------------------------------------------------------------------------------


@dataclass
class Scene:
    base: Path
    ws: Path
    home: Path
    outside: Path
    canary: str
    secrets: dict[str, str]  # marker -> where it was planted
    app: Path
    fifo: Path
    sparse: Path
    victim: Path
    other_repo_file: Path

    def uri(self, path: Path | str) -> str:
        return Path(path).as_uri() if str(path).startswith("/") else str(path)


def build_scene(base: Path, size: Size) -> Scene:
    from tests.harness.gitrepo import Commit, build_repo

    ws, home, outside = base / "ws", base / "home", base / "outside"
    for folder in (ws, home, outside):
        folder.mkdir(parents=True, exist_ok=True)
    marker = uuid.uuid4().hex[:12]
    secrets = {
        f"OUTSIDE-SECRET-{marker}": "outside/secret.txt",
        f"ENV-SECRET-{marker}": "ws/.env and friends",
        f"KEY-SECRET-{marker}": "ws/id_rsa, ws/secrets/server.pem",
        f"OTHER-REPO-{marker}": "outside/otherrepo/file.py",
    }
    app_text = "import os\n\n\ndef greet(name):\n    # nagent: say hello politely\n    return 'hi ' + name\n"
    util_text = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(400))
    build_repo(
        ws,
        [
            Commit("add app", {"app.py": app_text, "util.py": util_text}, author="Ann", email="ann@example.com"),
            Commit("tweak app", {"app.py": app_text + "\n# more\n"}, author="Bob", email="bob@example.com"),
        ],
    )
    (ws / ".env").write_text(f"TOKEN=ENV-SECRET-{marker}\n")
    (ws / ".ENV").write_text(f"TOKEN=ENV-SECRET-{marker}\n")
    (ws / ".Env.Production").write_text(f"TOKEN=ENV-SECRET-{marker}\n")
    (ws / "id_rsa").write_text(f"-----BEGIN KEY----- KEY-SECRET-{marker}\n")
    (ws / "secrets").mkdir()
    (ws / "secrets" / "server.pem").write_text(f"KEY-SECRET-{marker}\n")
    (outside / "secret.txt").write_text(f"OUTSIDE-SECRET-{marker}\n")
    (outside / "target.py").write_text("print('outside target, must stay unchanged')\n")
    other = outside / "otherrepo"
    build_repo(other, [Commit("other", {"file.py": f"# OTHER-REPO-{marker}\n"})])
    (ws / "link-secret").symlink_to(outside / "secret.txt")
    (ws / "link-outside").symlink_to(outside, target_is_directory=True)
    fifo = ws / "pipe.fifo"
    os.mkfifo(fifo)
    sparse = ws / "huge.log"
    with open(sparse, "wb") as handle:
        handle.truncate(size.sparse_mib * 1024 * 1024)
    (ws / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")
    (ws / "sub").mkdir()
    victim = ws / "sub" / "victim-0007.py"
    victim.write_text("# a user's own file that a planted index names as a segment\n")
    (home / ".gitconfig").write_text("[user]\n\tname = abuse\n\temail = abuse@example.com\n")
    return Scene(
        base=base,
        ws=ws.resolve(),
        home=home.resolve(),
        outside=outside.resolve(),
        canary=f"sk-canary-{uuid.uuid4().hex}",
        secrets=secrets,
        app=(ws / "app.py").resolve(),
        fifo=fifo.resolve(),
        sparse=sparse.resolve(),
        victim=victim.resolve(),
        other_repo_file=(other / "file.py").resolve(),
    )


# -- the fake model's side --------------------------------------------------------------------------------


class Scripts:
    """The fake model's replies, chosen by an `ABUSE:<name>` marker in the request (the last one the conversation
    holds); the reply depends on the turn (assistant messages since that marker) or on the call count."""

    MARK = re.compile(r"ABUSE:([\w.-]+)")

    def __init__(self) -> None:
        self.turns: dict[str, list[Any]] = {}
        self.calls: collections.Counter[str] = collections.Counter()
        self.by_call: dict[str, list[Any]] = {}

    def respond(self, request: Any) -> Any:
        messages = request.messages
        name, start = None, 0
        for index, message in enumerate(messages):
            for found in self.MARK.finditer(str(message.get("content", ""))):
                name, start = found.group(1), index
        if name is None:
            return {"text": "A short summary of the file."}
        self.calls[name] += 1
        if name in self.by_call:
            replies = self.by_call[name]
            return replies[min(self.calls[name], len(replies)) - 1]
        turn = sum(1 for m in messages[start:] if m.get("role") == "assistant")
        replies = self.turns.get(name, [])
        return {"text": replies[turn]} if turn < len(replies) else {"text": DONE}


# -- the run --------------------------------------------------------------------------------------------------


class Campaign:
    def __init__(self, base: Path, size: Size):
        from tests.harness.fake_openai import FakeOpenAI

        self.size = size
        self.scene = build_scene(base, size)
        self.report = Report(size.name)
        self.scripts = Scripts()
        self.fake = FakeOpenAI(responder=self.scripts.respond)
        self.log_file = base / "server.log"
        env = server_env(
            self.scene.home,
            {"OPENAI_API_KEY": self.scene.canary, "OPENAI_BASE_URL": self.fake.base_url, "NAGENT_MODEL": "fake-model"},
        )
        self.server = RawServer(self.scene.ws, env, log_file=self.log_file, verbose=True)
        self.expects: list[Expect] = []
        self.before = all_paths(self.scene.base)  # what exists before the server runs, and what the campaign adds:
        self.planted: set[Path] = set()

    # -- plumbing -----------------------------------------------------------------------------------------------

    def close(self) -> None:
        self.fake.close()

    def expect(self, msg_id: Any, codes: frozenset[int] | None, desc: str, family: str) -> Expect:
        e = Expect(msg_id, codes, desc, family)
        self.expects.append(e)
        return e

    def command(self, name: str, argument: Any, desc: str, family: str, guard: float = GUARD) -> dict[str, Any] | None:
        msg_id = self.server.command(name, argument)
        self.expect(msg_id, None, desc, family)
        self.server.wait_for([msg_id], guard)
        return self.server.answer(msg_id)

    def probe(self, family: str, guard: float = GUARD) -> bool:
        """nagent.status must answer: the server is not stuck behind what came before."""
        msg_id = self.server.command("nagent.status")
        self.expect(msg_id, frozenset({RESULT}), "status probe", family)
        return not self.server.wait_for([msg_id], guard)

    def add(self, name: str, item: str, ok: bool, detail: str = "") -> None:
        self.report.attacks.append(Attack(name, item, bool(ok), "" if ok else detail))

    @staticmethod
    def refused(answer: dict[str, Any] | None) -> bool:
        return bool(answer and "error" in answer and answer["error"].get("code") in REFUSED)

    @staticmethod
    def describe(answer: dict[str, Any] | None) -> str:
        if answer is None:
            return "no answer"
        if "error" in answer:
            return f"error {answer['error'].get('code')}: {str(answer['error'].get('message'))[:160]}"
        return f"result {json.dumps(answer.get('result'))[:160]}"

    # -- phases ----------------------------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.perf_counter()
        try:
            self.phase("start", self.start)
            self.phase("fuzz", self.fuzz)
            self.phase("paths", self.path_attacks)
            self.phase("indexes", self.index_attacks)
            self.phase("provider", self.provider_faults)
            self.phase("shell", self.shell_abuse)
            self.phase("special files", self.special_files)
            self.phase("end", self.end)
        finally:
            self.close()
        self.phase("scan", self.scan)
        self.report.seconds["total"] = time.perf_counter() - started
        return self.report

    def phase(self, name: str, run: Any) -> None:
        started = time.perf_counter()
        if name in ("start", "scan", "end") or self.server.alive():
            run()
        else:
            self.add(f"{name}: server gone before this phase", "4", False, "the server process had exited")
        self.report.seconds[name] = time.perf_counter() - started

    def start(self) -> None:
        s = self.scene
        self.server.start()
        capabilities = {
            "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}},
            "window": {"workDoneProgress": True},
            "general": {"positionEncodings": ["utf-16"]},
        }
        options = {"shell": "allow", "shellTimeout": 3, "maxSteps": 6, "history": {"summarize": False}}
        params = {
            "processId": os.getpid(),
            "rootUri": s.ws.as_uri(),
            "workspaceFolders": [{"uri": s.ws.as_uri(), "name": "ws"}],
            "capabilities": capabilities,
            "initializationOptions": options,
        }
        answer = self.server.call("initialize", params)
        self.add("initialize", "4", bool(answer and "result" in answer), self.describe(answer))
        self.server.notify("initialized", {})
        self.server.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": s.app.as_uri(), "languageId": "python", "version": 1, "text": s.app.read_text()}},
        )

    def fuzz(self) -> None:
        s, size = self.scene, self.size
        files = [
            s.app.as_uri(),
            (s.ws / "util.py").as_uri(),
            (s.ws / "missing.py").as_uri(),
            s.ws.as_uri(),
            (s.ws / "latin1.txt").as_uri(),
            "untitled:Untitled-1",
            "file:///",
        ]
        fuzzer = Fuzzer(random.Random(size.seed), self.server.new_id, files, s.app.as_uri())
        sent = 0
        while sent < size.fuzz_cases and self.server.alive():
            batch = min(size.batch, size.fuzz_cases - sent)
            ids = []
            for _ in range(batch):
                case: Case = fuzzer.case()
                self.report.fuzz_families[case.family] += 1
                self.report.null_id_expected += case.null_id_errors
                for e in case.expects:
                    self.expects.append(e)
                    ids.append(e.msg_id)
                self.server.send_bytes(case.data)
            sent += batch
            # A probe closes the batch (it also frees a body left waiting for a header that never came).
            probe = self.server.command("nagent.status")
            self.expect(probe, frozenset({RESULT}), "batch probe", "fuzz")
            self.server.wait_for([*ids, probe])
        # One long URI and one huge params object, once.
        long_uri = "file:///" + "x" * size.long_uri_chars
        msg_id = self.server.request(
            "textDocument/hover", {"textDocument": {"uri": long_uri}, "position": {"line": 0, "character": 0}}
        )
        self.expect(msg_id, frozenset({RESULT}), "hover on a very long URI", "fuzz")
        msg_id = self.server.command("nagent.split", {"uri": long_uri})
        self.expect(msg_id, REFUSED, "split of a very long URI", "fuzz")
        self.server.wait_for([e.msg_id for e in self.expects[-2:]])

    # -- path attacks (items 7 and 2) ----------------------------------------------------------------------------

    def path_attacks(self) -> None:
        s = self.scene
        attacks: list[tuple[str, str, str, dict[str, Any]]] = [
            (
                "split of a file outside the workspace",
                "7",
                "nagent.split",
                {"uri": (s.outside / "secret.txt").as_uri()},
            ),
            (
                "summarize of a file outside the workspace",
                "7",
                "nagent.summarize",
                {"uri": (s.outside / "secret.txt").as_uri()},
            ),
            (
                "split through ../ out of the workspace",
                "7",
                "nagent.split",
                {"uri": s.ws.as_uri() + "/../outside/secret.txt"},
            ),
            (
                "split through %2e%2e out of the workspace",
                "7",
                "nagent.split",
                {"uri": s.ws.as_uri() + "/%2e%2e/outside/secret.txt"},
            ),
            ("split of a symlink to an outside file", "7", "nagent.split", {"uri": (s.ws / "link-secret").as_uri()}),
            (
                "split through a symlinked folder",
                "7",
                "nagent.split",
                {"uri": (s.ws / "link-outside" / "secret.txt").as_uri()},
            ),
            ("summarize .env", "7", "nagent.summarize", {"uri": (s.ws / ".env").as_uri()}),
            ("summarize .ENV (denyRead ignores case)", "7", "nagent.summarize", {"uri": (s.ws / ".ENV").as_uri()}),
            ("summarize .Env.Production", "7", "nagent.summarize", {"uri": (s.ws / ".Env.Production").as_uri()}),
            ("summarize id_rsa", "7", "nagent.summarize", {"uri": (s.ws / "id_rsa").as_uri()}),
            ("split secrets/server.pem", "7", "nagent.split", {"uri": (s.ws / "secrets" / "server.pem").as_uri()}),
            ("edit .env", "7", "nagent.edit", {"uri": (s.ws / ".env").as_uri(), "request": "ABUSE:edit-env"}),
            ("split /etc/passwd", "7", "nagent.split", {"uri": "file:///etc/passwd"}),
            (
                "split /proc/self/environ (the key's old way out)",
                "2",
                "nagent.split",
                {"uri": "file:///proc/self/environ"},
            ),
            ("summarize /proc/self/environ", "2", "nagent.summarize", {"uri": "file:///proc/self/environ"}),
            (
                "summarize /proc/<server pid>/environ",
                "2",
                "nagent.summarize",
                {"uri": f"file:///proc/{self.server.pid}/environ"},
            ),
            ("split of a file in another repository", "7", "nagent.split", {"uri": s.other_repo_file.as_uri()}),
            (
                "conversation.open in another repository",
                "7",
                "nagent.conversation.open",
                {"uri": s.other_repo_file.as_uri()},
            ),
            ("split of a NUL-bearing URI", "4", "nagent.split", {"uri": s.ws.as_uri() + "/a%00b.py"}),
            ("split of a lone-surrogate URI", "4", "nagent.split", {"uri": s.ws.as_uri() + "/\ud800.py"}),
        ]
        for name, item, command, argument in attacks:
            answer = self.command(command, argument, name, "paths")
            self.add(name, item, self.refused(answer), self.describe(answer))
        self.add(
            "no .nagent/ created in another repository",
            "7",
            not (s.other_repo_file.parent / ".nagent").exists(),
            "outside/otherrepo/.nagent exists",
        )
        msg_id = self.server.request(
            "textDocument/hover",
            {"textDocument": {"uri": (s.outside / "secret.txt").as_uri()}, "position": {"line": 0, "character": 0}},
        )
        self.expect(msg_id, frozenset({RESULT}), "hover outside the workspace", "paths")
        self.server.wait_for([msg_id])

    # -- crafted split indexes (item 1) ----------------------------------------------------------------------

    def index_attacks(self) -> None:
        s = self.scene
        answer = self.command(
            "nagent.split", {"uri": (s.ws / "util.py").as_uri(), "targetBytes": 2000}, "a real split", "indexes"
        )
        real = Path(answer["result"]["indexPath"]) if answer and "result" in answer else None
        self.add("a real split works", "1", real is not None and real.is_file(), self.describe(answer))
        if real is None:
            return
        original = json.loads(real.read_text())
        outside_target = s.outside / "target.py"
        before = outside_target.read_bytes()

        planted = s.outside / "planted" / "index.json"
        planted.parent.mkdir(parents=True, exist_ok=True)
        for entry in original["segments"]:
            (planted.parent / entry["path"]).write_text("print('planted')\n")
        planted.write_text(json.dumps({**original, "source_path": str(outside_target)}))
        self.planted |= all_paths(planted.parent) | {planted.parent}
        answer = self.command(
            "nagent.patch", {"indexPath": str(planted)}, "patch with an index outside the state root", "indexes"
        )
        self.add("patch: index outside the state root", "1", self.refused(answer), self.describe(answer))

        crafted = json.loads(json.dumps(original))
        crafted["segments"][0]["path"] = "../../../../outside/secret.txt"
        real.write_text(json.dumps(crafted))
        answer = self.command(
            "nagent.patch", {"indexPath": str(real)}, "patch with a segment outside its folder", "indexes"
        )
        self.add("patch: segment path outside its folder", "1", self.refused(answer), self.describe(answer))

        crafted = json.loads(json.dumps(original))
        crafted["source_path"] = str(outside_target)
        real.write_text(json.dumps(crafted))
        answer = self.command(
            "nagent.patch", {"indexPath": str(real)}, "patch with a source outside the workspace", "indexes"
        )
        self.add("patch: source outside the workspace", "1", self.refused(answer), self.describe(answer))
        real.write_text(json.dumps(original))

        sub = s.victim.parent
        planted_beside = sub / "index.json"
        entries = [{**original["segments"][0], "path": s.victim.name}]
        planted_beside.write_text(json.dumps({**original, "segments": entries, "source_path": str(s.ws / "util.py")}))
        self.planted.add(planted_beside)
        answer = self.command(
            "nagent.patch", {"indexPath": str(planted_beside)}, "patch with an index beside a user file", "indexes"
        )
        self.add("patch: index planted beside a user's file", "1", self.refused(answer), self.describe(answer))
        self.command("nagent.split", {"uri": (s.ws / "util.py").as_uri(), "targetBytes": 1500}, "re-split", "indexes")
        self.add("stale-segment cleanup spares a user's file", "1", s.victim.exists(), "victim-0007.py was deleted")

        self.scripts.turns["patch-crafted"] = [f'<nagent-file-patch index="{planted}"/>', DONE]
        answer = self.command(
            "nagent.edit",
            {"uri": s.app.as_uri(), "request": "ABUSE:patch-crafted"},
            "model patches a crafted index",
            "indexes",
        )
        self.add(
            "model <nagent-file-patch> on a crafted index",
            "1",
            bool(answer) and outside_target.read_bytes() == before,
            f"outside target changed or no answer ({self.describe(answer)})",
        )
        self.add(
            "outside target file unchanged", "1", outside_target.read_bytes() == before, "outside/target.py changed"
        )

    # -- provider faults (item 9) -------------------------------------------------------------------------------

    def provider_faults(self) -> None:
        s = self.scene
        for code in (401, 403, 404):
            name = f"fault-{code}"
            self.scripts.by_call[name] = [{"status": code, "message": f"fake {code}"}]
            answer = self.command(
                "nagent.edit",
                {"uri": s.app.as_uri(), "request": f"ABUSE:{name}"},
                f"edit against HTTP {code}",
                "provider",
            )
            calls = self.scripts.calls[name]
            self.add(
                f"HTTP {code} is not retried",
                "9",
                bool(answer and "error" in answer) and calls == 1,
                f"{calls} model calls; {self.describe(answer)}",
            )
        name = "fault-429"
        self.scripts.by_call[name] = [{"status": 429, "retry_after": 0, "message": "slow down"}]
        answer = self.command(
            "nagent.edit",
            {"uri": s.app.as_uri(), "request": f"ABUSE:{name}"},
            "edit against HTTP 429 Retry-After: 0",
            "provider",
        )
        calls = self.scripts.calls[name]
        self.add(
            "HTTP 429 retried by the SDK only (at most 4 calls)",
            "9",
            bool(answer) and calls <= 4,
            f"{calls} model calls; {self.describe(answer)}",
        )
        name = "fault-wait"
        self.scripts.by_call[name] = [{"status": 429, "retry_after": 2, "message": "wait"}, {"text": DONE}]
        before = len(self.server.received.progress)
        answer = self.command(
            "nagent.edit",
            {"uri": s.app.as_uri(), "request": f"ABUSE:{name}"},
            "edit against a Retry-After: 2",
            "provider",
        )
        shown = [
            str(p.get("value", {}).get("message", ""))
            for p in self.server.received.progress[before:]
            if isinstance(p, dict) and isinstance(p.get("value"), dict)
        ]
        self.add(
            "a Retry-After wait shows in progress",
            "9",
            any("retrying in" in m for m in shown),
            f"progress messages: {shown[:6]}; {self.describe(answer)}",
        )

    # -- shell abuse (items 2 and 5) ----------------------------------------------------------------------------

    def shell_abuse(self) -> None:
        s = self.scene
        self.scripts.turns["shell-rev"] = [
            "<nagent-shell>cat /proc/$PPID/environ | tr '\\0' '\\n' | rev; env | rev</nagent-shell>",
            "<nagent-shell>env | base64 -w0; echo; cat /proc/*/environ 2>/dev/null | base64 -w0 | head -c 300000"
            "</nagent-shell>",
            "<nagent-shell>for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done | rev | "
            "head -c 300000; ps -eo pid,args | head -50</nagent-shell>",
            DONE,
        ]
        answer = self.command(
            "nagent.edit", {"uri": s.app.as_uri(), "request": "ABUSE:shell-rev"}, "shell reads the environment", "shell"
        )
        self.add("shell: environ read back reversed/base64 (answered)", "2", answer is not None, "no answer")
        tag = random.Random().randrange(10**6, 10**7)
        seconds = [f"97.{tag}", f"98.{tag}"]  # sleep durations no other process has
        self.scripts.turns["shell-daemon"] = [
            f"<nagent-shell>setsid sleep {seconds[0]} & setsid -f sleep {seconds[1]}; echo started</nagent-shell>",
            DONE,
        ]
        started = time.perf_counter()
        first = self.server.command("nagent.edit", {"uri": s.app.as_uri(), "request": "ABUSE:shell-daemon"})
        second = self.server.command("nagent.edit", {"uri": s.app.as_uri(), "request": "ABUSE:after-daemon"})
        self.expect(first, None, "shell leaves children holding the pipe", "shell")
        self.expect(second, None, "edit queued behind it", "shell")
        unanswered = self.server.wait_for([first, second])
        self.report.seconds["shell daemon edit"] = time.perf_counter() - started
        self.add(
            "shell: a child holding the pipe does not hang the edit", "5", not unanswered, f"unanswered: {unanswered}"
        )
        survivors = [pid for pid, args in processes() if any(sec in args for sec in seconds)]
        self.add("shell: setsid children do not outlive the run", "5", not survivors, f"still running: {survivors}")
        for pid in survivors:
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    # -- special files (item 3) ----------------------------------------------------------------------------------

    def special_files(self) -> None:
        s = self.scene
        targets = [
            ("/dev/zero", "file:///dev/zero"),
            ("/dev/stdin", "file:///dev/stdin"),
            ("/dev/urandom", "file:///dev/urandom"),
            ("/proc/self/mem", "file:///proc/self/mem"),
            ("a FIFO in the workspace", s.fifo.as_uri()),
            (f"a {self.size.sparse_mib} MiB file", s.sparse.as_uri()),
        ]
        for label, uri in targets:
            for command, argument in (
                ("nagent.split", {"uri": uri}),
                ("nagent.summarize", {"uri": uri}),
                ("nagent.edit", {"uri": uri, "request": "ABUSE:special"}),
            ):
                msg_id = self.server.command(command, argument)
                self.expect(msg_id, None, f"{command} {label}", "special")
                probe_ok = self.probe("special")
                unanswered = self.server.wait_for([msg_id])
                answer = self.server.answer(msg_id)
                self.add(
                    f"{command} of {label}",
                    "3",
                    probe_ok and not unanswered and self.refused(answer),
                    f"probe answered: {probe_ok}; {self.describe(answer)}",
                )
            for method, params in (
                (
                    "textDocument/codeAction",
                    {
                        "textDocument": {"uri": uri},
                        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                        "context": {"diagnostics": []},
                    },
                ),
                ("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
            ):
                msg_id = self.server.request(method, params)
                self.expect(msg_id, frozenset({RESULT}), f"{method} {label}", "special")
                probe_ok = self.probe("special")
                unanswered = self.server.wait_for([msg_id])
                self.add(f"{method} on {label}", "3", probe_ok and not unanswered, f"probe answered: {probe_ok}")
        self.scripts.turns["read-special"] = [
            f'<nagent-read path="{s.fifo}"/>',
            '<nagent-read path="/dev/zero"/>',
            f'<nagent-read path="{s.sparse}"/>',
            '<nagent-read path=".env"/><nagent-read path=".ENV"/><nagent-read path="link-secret"/>',
            DONE,
        ]
        msg_id = self.server.command("nagent.edit", {"uri": s.app.as_uri(), "request": "ABUSE:read-special"})
        self.expect(msg_id, None, "model reads special files", "special")
        probe_ok = self.probe("special")
        unanswered = self.server.wait_for([msg_id])
        self.add(
            "model <nagent-read> of a FIFO, /dev/zero, a huge file, .env",
            "3",
            probe_ok and not unanswered,
            f"probe answered: {probe_ok}; {self.describe(self.server.answer(msg_id))}",
        )
        rss = self.server.peak_rss_kib()
        self.report.peak_rss_mib = round(rss / 1024, 1) if rss else None

    # -- the end -----------------------------------------------------------------------------------------------

    def end(self) -> None:
        alive = self.server.alive() and self.probe("end")
        self.report.alive_at_end = alive
        s = self.scene
        allowed = (s.ws / ".nagent", s.home / ".nagent", self.log_file.parent / (self.log_file.name + "."))
        new = [
            p
            for p in all_paths(s.base) - self.before - self.planted
            if not any(str(p).startswith(str(root)) for root in allowed)
            and p not in (self.log_file, self.server.stderr_path, s.ws / ".nagent", s.home / ".nagent")
        ]
        self.add("nothing is written outside the state roots", "7", not new, f"new paths: {sorted(map(str, new))[:5]}")
        if self.report.peak_rss_mib is None and self.server.alive():
            rss = self.server.peak_rss_kib()
            self.report.peak_rss_mib = round(rss / 1024, 1) if rss else None
        self.report.exit_code = self.server.stop()

    # -- the scan ------------------------------------------------------------------------------------------

    def scan(self) -> None:  # noqa: C901, PLR0912  2026-11-27: one verdict per kind of answer, tallied in one pass
        r, s, received = self.report, self.scene, self.server.received
        r.requests = len(self.expects)
        for e in self.expects:
            answer = self.server.answer(e.msg_id)
            if answer is None:
                r.unanswered.append(f"[{e.family}] {e.desc} (id {e.msg_id!r})")
                continue
            code = answer["error"].get("code") if isinstance(answer.get("error"), dict) else RESULT
            r.codes[code] += 1
            if code == INTERNAL:
                r.internal_errors.append(f"[{e.family}] {e.desc}: {answer['error'].get('message')}")
            if e.codes is not None and code not in e.codes:
                r.wrong_codes.append(
                    f"[{e.family}] {e.desc}: got {code}, expected {sorted(e.codes)} ({self.describe(answer)})"
                )
        r.null_id_received = len(received.null_id_errors)
        r.broken_frames = list(received.broken_frames)
        for message in received.messages:
            if not isinstance(message, dict):
                continue
            text = json.dumps(message, ensure_ascii=False)
            is_answer = "id" in message and "method" not in message
            if TRACEBACK.search(text):
                r.tracebacks.append(f"{'answer' if is_answer else message.get('method')}: {text[:200]}")
            error = message.get("error") if is_answer else None
            if isinstance(error, dict) and PYTHON_TEXT.search(json.dumps(error, ensure_ascii=False)):
                r.python_text.append(text[:240])
        r.log_messages = len(received.log_messages)
        r.longest_log_message = max((len(m) for m in received.log_messages), default=0)
        stderr = self.server.stderr_text()
        for match in TRACEBACK.finditer(stderr):
            r.tracebacks.append(f"stderr: {stderr[max(0, match.start() - 100) : match.end() + 100]!r}")
        logs = sorted(self.log_file.parent.glob(self.log_file.name + "*"))
        r.log_file_bytes = sum(p.stat().st_size for p in logs)
        r.model_requests = len(self.fake.requests)

        forms = canary_forms(s.canary)
        sources: list[tuple[str, bytes]] = [
            ("server stdout", bytes(self.server.raw)),
            ("server stderr", stderr.encode()),
        ]
        sources += [(f"log file {p.name}", p.read_bytes()) for p in logs]
        model_bytes = json.dumps([q.as_json() for q in self.fake.requests]).encode()
        sources.append(("model requests", model_bytes))
        for path in walk_files(s.base):
            if path in logs or path == self.server.stderr_path:
                continue
            try:
                sources.append((str(path.relative_to(s.base)), path.read_bytes()))
            except OSError:
                continue
        for where, data in sources:
            for label, form in forms:
                if form in data:
                    r.canary_hits.append(f"{label} canary in {where}")
        # Planted secrets: never in what the server wrote, its artifacts, or what the model was sent.
        guarded = [("server stdout", bytes(self.server.raw)), ("model requests", model_bytes)]
        for root in (s.ws / ".nagent", s.home / ".nagent"):
            guarded += [(str(p.relative_to(s.base)), p.read_bytes()) for p in walk_files(root)]
        guarded += [(f"log file {p.name}", p.read_bytes()) for p in logs]
        for where, data in guarded:
            for secret in s.secrets:
                if secret.encode() in data:
                    r.secret_hits.append(f"{secret.split('-')[0]} secret in {where}")


def canary_forms(key: str) -> list[tuple[str, bytes]]:
    """The key as a command could print it: plain, reversed, hex, and base64 at each of three alignments (the
    middle of each encoding, which does not depend on what came before or after it)."""
    raw = key.encode()
    forms = [("plain", raw), ("reversed", raw[::-1]), ("hex", raw.hex().encode())]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw)
        group = -(-pad // 3)  # the first 3-byte group made only of the key's bytes
        forms.append((f"base64+{pad}", encoded[4 * group : 4 * group + 24]))
    return forms


def walk_files(root: Path) -> list[Path]:
    found: list[Path] = []
    if not root.exists():
        return found
    for folder, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder, name)
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size <= SCAN_FILE_LIMIT:
                found.append(path)
    return found


def all_paths(root: Path) -> set[Path]:
    found: set[Path] = set()
    for folder, dirs, files in os.walk(root, followlinks=False):
        found.update(Path(folder, name) for name in (*dirs, *files))
    return found


def processes() -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            found.append((int(entry.name), args))
    return found


def run_campaign(base: Path, size: Size) -> Report:
    campaign = Campaign(base, size)
    return campaign.run()


__all__ = ["Attack", "Report", "Size", "canary_forms", "frame", "run_campaign", "MISSING", "PARSE"]

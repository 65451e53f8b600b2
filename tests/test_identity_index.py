"""File identity, the file index and the conversation store, on real files in temporary folders."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import threading
from pathlib import Path

import pytest

from nagent_lsp.core.identity import file_id_for, slug, uri_to_path
from nagent_lsp.store.conversations import ConversationError, ConversationStore

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    return ConversationStore(tmp_path / "state")


def index_of(store: ConversationStore) -> dict:
    return json.loads((store.directory / "file-index.json").read_text())


def write(path: Path, text: str = "x = 1\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, expected",
    [("My File.v2", "my-file-v2"), ("__init__", "init"), ("---", "file"), ("", "file"), ("héllo wörld", "h-llo-w-rld")],
)
def test_slug(text: str, expected: str) -> None:
    assert slug(text) == expected


def test_file_id_is_device_and_inode(ws: Path) -> None:
    f = write(ws / "a.py")
    st = os.stat(f)
    assert file_id_for(f) == f"{st.st_dev}:{st.st_ino}"
    assert re.fullmatch(r"\d+:\d+", file_id_for(f))


def test_new_file_gets_a_slugged_conversation_in_nagents_schema(ws: Path, store: ConversationStore) -> None:
    f = write(ws / "Hello World.py")
    ref = store.resolve(f)
    assert ref.file_id == file_id_for(f)
    assert ref.path == str(f.resolve())
    assert re.fullmatch(rf"hello-world-{UUID}", ref.conversation)
    assert ref.conversation_path == store.directory / ref.conversation
    assert index_of(store) == {
        "by_file_id": {
            ref.file_id: {"file_id": ref.file_id, "path": str(f.resolve()), "conversation": ref.conversation}
        }
    }
    assert store.resolve(f) == ref
    assert store.resolve(f.as_uri()) == ref


def test_file_uri_with_escapes_resolves_to_the_same_file(ws: Path, store: ConversationStore) -> None:
    f = write(ws / "with space#1.py")
    assert uri_to_path(f.as_uri()) == f
    assert store.resolve(f.as_uri()) == store.resolve(f)


def test_rename_keeps_the_conversation_and_updates_the_path(ws: Path, store: ConversationStore) -> None:
    old = write(ws / "old.py")
    ref = store.resolve(old)
    new = ws / "sub" / "new.py"
    new.parent.mkdir()
    os.rename(old, new)
    moved = store.resolve(new)
    assert moved.conversation == ref.conversation
    assert moved.file_id == ref.file_id
    assert moved.path == str(new)
    assert list(index_of(store)["by_file_id"]) == [ref.file_id]


def test_save_by_replace_rekeys_the_entry(ws: Path, store: ConversationStore) -> None:
    f = write(ws / "a.py")
    ref = store.resolve(f)
    tmp = write(ws / ".a.py.tmp", "x = 2\n")  # created while a.py exists: a different inode
    os.replace(tmp, f)
    assert file_id_for(f) != ref.file_id
    again = store.resolve(f)
    assert again.conversation == ref.conversation
    assert again.file_id == file_id_for(f)
    assert list(index_of(store)["by_file_id"]) == [again.file_id]


def test_did_rename_files_updates_paths_without_a_resolve(ws: Path, store: ConversationStore) -> None:
    a = write(ws / "pkg" / "a.py")
    b = write(ws / "pkg" / "deep" / "b.py")
    other = write(ws / "pkg2" / "c.py")
    refs = {p: store.resolve(p) for p in (a, b, other)}
    os.rename(ws / "pkg", ws / "lib")
    changed = store.rename((ws / "pkg").as_uri(), (ws / "lib").as_uri())
    assert sorted(r.path for r in changed) == [str(ws / "lib" / "a.py"), str(ws / "lib" / "deep" / "b.py")]
    by_conv = {r.conversation: r.path for r in store.refs()}
    assert by_conv[refs[a].conversation] == str(ws / "lib" / "a.py")
    assert by_conv[refs[b].conversation] == str(ws / "lib" / "deep" / "b.py")
    assert by_conv[refs[other].conversation] == str(other)

    os.rename(ws / "lib" / "a.py", ws / "lib" / "z.py")
    store.rename(ws / "lib" / "a.py", ws / "lib" / "z.py")
    assert {r.conversation: r.path for r in store.refs()}[refs[a].conversation] == str(ws / "lib" / "z.py")


def test_untitled_buffer_is_keyed_by_uri_until_saved(ws: Path, store: ConversationStore) -> None:
    ref = store.resolve("untitled:Untitled-1")
    assert ref.untitled and ref.file_id == "uri:untitled:Untitled-1"
    assert ref.conversation.startswith("untitled-1-")
    assert store.resolve("untitled:Untitled-1") == ref
    saved = write(ws / "saved.py")
    (moved,) = store.rename("untitled:Untitled-1", saved.as_uri())
    assert moved.conversation == ref.conversation and moved.file_id == file_id_for(saved)
    assert store.resolve(saved).conversation == ref.conversation
    assert list(index_of(store)["by_file_id"]) == [file_id_for(saved)]


def test_new_file_not_on_disk_yet_moves_to_its_file_id_when_saved(ws: Path, store: ConversationStore) -> None:
    f = ws / "later.py"
    ref = store.resolve(f.as_uri())
    assert ref.file_id == f"uri:{f.as_uri()}" and ref.path == str(f)
    write(f)
    again = store.resolve(f)
    assert again.conversation == ref.conversation and again.file_id == file_id_for(f)
    assert list(index_of(store)["by_file_id"]) == [again.file_id]


def test_a_directory_is_not_a_conversation(ws: Path, store: ConversationStore) -> None:
    with pytest.raises(ConversationError, match="not a file"):
        store.resolve(ws)


def test_concurrent_resolves_from_threads_lose_nothing(ws: Path, tmp_path: Path) -> None:
    files = [write(ws / f"f{i}.py") for i in range(40)]
    shared = write(ws / "shared.py")
    results: list = []
    errors: list = []
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            store = ConversationStore(tmp_path / "state")  # a separate store per thread, like two servers
            barrier.wait()
            for f in files[n::8]:
                results.append(store.resolve(f))
            results.append(store.resolve(shared))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    entries = index_of(ConversationStore(tmp_path / "state"))["by_file_id"]
    assert set(entries) == {file_id_for(f) for f in [*files, shared]}
    shared_convs = {r.conversation for r in results if r.path == str(shared)}
    assert len(shared_convs) == 1


def _resolve_many(state: str, paths: list[str]) -> None:
    store = ConversationStore(Path(state))
    for p in paths:
        store.resolve(p)


def test_concurrent_resolves_from_processes_lose_nothing(ws: Path, tmp_path: Path) -> None:
    files = [str(write(ws / f"p{i}.py")) for i in range(24)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_resolve_many, args=(str(tmp_path / "state"), files[n::4])) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
        assert p.exitcode == 0
    entries = index_of(ConversationStore(tmp_path / "state"))["by_file_id"]
    assert set(entries) == {file_id_for(f) for f in files}


def test_archive_moves_the_conversation_aside_and_starts_fresh(ws: Path, store: ConversationStore) -> None:
    ref = store.resolve(write(ws / "a.py"))
    assert store.archive(ref) is None  # nothing yet
    ref.conversation_path.write_text("<user-prompt>\nhello\n</user-prompt>\n")
    archived = store.archive(ref)
    assert archived is not None and archived.parent == ref.conversation_path.parent
    assert re.fullmatch(rf"{re.escape(ref.conversation)}-{UUID}", archived.name)
    assert "hello" in archived.read_text()
    assert ref.conversation_path.read_text() == ""


def test_save_and_load(ws: Path, store: ConversationStore) -> None:
    ref = store.resolve(write(ws / "a.py"))
    with pytest.raises(ConversationError, match="nothing to save"):
        store.save(ref, "v1")
    ref.conversation_path.write_text("version one\n")
    saved = store.save(ref, "v1")
    assert saved == store.directory / "saved" / "v1" and saved.read_text() == "version one\n"
    ref.conversation_path.write_text("version two\n")
    assert store.load(ref, "v1") == ref.conversation_path
    assert ref.conversation_path.read_text() == "version one\n"
    archives = [p for p in store.directory.iterdir() if p.name.startswith(ref.conversation + "-")]
    assert [p.read_text() for p in archives] == ["version two\n"]
    with pytest.raises(ConversationError, match=r"no saved conversation named 'nope' \(saved: v1\)"):
        store.load(ref, "nope")
    for bad in ("../x", "a/b", ".hidden", ".."):
        with pytest.raises(ConversationError, match="invalid conversation name"):
            store.save(ref, bad)


def test_legacy_index_is_read_and_rewritten(ws: Path, store: ConversationStore) -> None:
    f = write(ws / "a.py")
    store.directory.mkdir(parents=True)
    (store.directory / "file-index.json").write_text(json.dumps({str(f): "a-legacy", str(ws / "gone.py"): "g"}))
    ref = store.resolve(f)
    assert ref.conversation == "a-legacy" and ref.file_id == file_id_for(f)
    entries = index_of(store)["by_file_id"]
    assert entries[f"path:{ws / 'gone.py'}"]["conversation"] == "g"


def test_corrupt_index_is_kept_aside(ws: Path, store: ConversationStore) -> None:
    store.directory.mkdir(parents=True)
    (store.directory / "file-index.json").write_text("{not json")
    ref = store.resolve(write(ws / "a.py"))
    assert list(index_of(store)["by_file_id"]) == [ref.file_id]
    backups = list(store.directory.glob("file-index.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_text() == "{not json"


def test_hand_edited_conversation_name_cannot_leave_the_folder(ws: Path, store: ConversationStore) -> None:
    f = write(ws / "a.py")
    fid = file_id_for(f)
    store.directory.mkdir(parents=True)
    (store.directory / "file-index.json").write_text(
        json.dumps({"by_file_id": {fid: {"file_id": fid, "path": str(f), "conversation": "../../escape"}}})
    )
    assert store.resolve(f).conversation_path == store.directory / "escape"


async def test_runs_on_one_file_take_turns(ws: Path, store: ConversationStore) -> None:
    ref = store.resolve(write(ws / "a.py"))
    assert store.lock_for(ref) is store.lock_for(ref.file_id)
    assert store.lock_for(ref) is not store.lock_for(store.resolve(write(ws / "b.py")))
    order: list[str] = []

    async def run(name: str) -> None:
        async with store.lock_for(ref):
            order.append(f"{name} start")
            await asyncio.sleep(0.01)
            order.append(f"{name} end")

    await asyncio.gather(run("one"), run("two"))
    assert order == ["one start", "one end", "two start", "two end"]


# --- the conversation commands' workflows (in process, with a fake editor port) ----------------------

from nagent_lsp.config.convert import to_wire  # noqa: E402
from nagent_lsp.config.parse_args import parse_args  # noqa: E402
from nagent_lsp.core.errors import InvalidArgument, UserError  # noqa: E402
from nagent_lsp.operations import conversation as wf  # noqa: E402
from nagent_lsp.operations.args import NamedArgs, UriArgs  # noqa: E402
from nagent_lsp.operations.session import Session  # noqa: E402


class ShowPort:
    def __init__(self, shows: bool):
        self.shows = shows
        self.shown: list[Path] = []

    async def show_document(self, path: Path) -> bool:
        self.shown.append(path)
        return self.shows

    def read_buffer(self, path: Path) -> None:
        return None  # no open buffers: conversations are read from the disk


async def test_conversation_commands(ws: Path) -> None:
    session = Session(workspace_folders=[ws])
    f = write(ws / "a.py")
    port = ShowPort(True)
    opened = to_wire(await wf.open_conversation(session, port, parse_args(UriArgs, [{"uri": f.as_uri()}])))
    conv = Path(opened["path"])
    assert opened["shown"] is True and port.shown == [conv]
    assert conv.parent == ws / ".nagent" / "conversations" and conv.read_text() == ""
    assert (ws / ".nagent" / ".gitignore").exists()
    reopened = to_wire(await wf.open_conversation(session, ShowPort(False), UriArgs(f.as_uri())))
    assert reopened == {"path": str(conv), "shown": False, "draftLine": 0}  # an empty conversation: type on line 0

    listed = to_wire(wf.list_conversations(session))
    assert listed == {"files": [{"fileId": file_id_for(f), "path": str(f), "conversation": str(conv)}]}

    conv.write_text("<user-prompt>\nfirst\n</user-prompt>\n")
    saved = to_wire(wf.save_conversation(session, NamedArgs(f.as_uri(), "keep")))
    assert Path(saved["path"]).read_text() == conv.read_text()
    cleared = to_wire(await wf.clear_conversation(session, UriArgs(f.as_uri())))
    assert "first" in Path(cleared["archivedPath"]).read_text() and conv.read_text() == ""
    loaded = to_wire(await wf.load_conversation(session, NamedArgs(f.as_uri(), "keep")))
    assert loaded == {"path": str(conv)} and "first" in conv.read_text()

    with pytest.raises(UserError, match="no saved conversation named 'nope'"):
        await wf.load_conversation(session, NamedArgs(f.as_uri(), "nope"))
    with pytest.raises(InvalidArgument, match="'name'"):
        await wf.load_conversation(session, NamedArgs(f.as_uri(), "../x"))
    with pytest.raises(InvalidArgument, match="'uri'"):
        parse_args(UriArgs, {})
    with pytest.raises(UserError, match="not a file"):
        await wf.clear_conversation(session, UriArgs(ws.as_uri()))

    os.rename(f, ws / "b.py")
    assert wf.files_renamed(session, [(f.as_uri(), (ws / "b.py").as_uri())]) == 1
    assert wf.list_conversations(session).files[0].path == str(ws / "b.py")


async def test_clear_waits_for_a_running_edit(ws: Path) -> None:
    session = Session(workspace_folders=[ws])
    f = write(ws / "a.py")
    store, ref = wf.resolve(session, f.as_uri())
    ref.conversation_path.write_text("before\n")
    order: list[str] = []
    running, asked = asyncio.Event(), asyncio.Event()

    async def edit_run() -> None:
        async with store.lock_for(ref):
            order.append("run start")
            running.set()
            await asyncio.wait_for(asked.wait(), 60)
            for _ in range(20):  # turns of the loop in which a clear that does not wait would go ahead
                await asyncio.sleep(0)
            with ref.conversation_path.open("a") as handle:
                handle.write("appended by the run\n")
            order.append("run end")

    async def clear() -> None:
        await asyncio.wait_for(running.wait(), 60)
        order.append("clear asked")
        asked.set()
        result = await wf.clear_conversation(session, UriArgs(f.as_uri()))
        order.append("clear done")
        assert "appended by the run" in Path(result.archivedPath).read_text()

    await asyncio.gather(edit_run(), clear())
    assert order == ["run start", "clear asked", "run end", "clear done"]

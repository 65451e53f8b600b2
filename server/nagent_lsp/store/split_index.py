"""Split indexes on disk: the one reader and writer of `index.json` and its segment files.

The text comes from the caller (the editor's buffer when open), never re-read here, so the index hash
describes exactly what was split.

An index is the server's own only when it says so and where it says so: every index this module writes
carries `written_by: "nagent-lsp"` and `split_folder_id`, the device and inode of the folder it was written
into. `load_index` refuses an index without both, or whose folder is not that folder: a copy of a split
committed to a repository, unpacked from an archive or planted beside a user's file lives in a folder with
another inode, and a repository cannot choose the inode its checkout gets — but a checkout can happen to
reuse a freed inode. So the index also carries this user's MAC (`store.provenance`, domain "split-index")
over everything else in it, the stamp included: a copied, committed or edited index is refused even when the
inodes match. (The secret lives in `~/.nagent/`, outside every repository; a model command with `shell: allow`
runs as the user and could read it, but such a command can write any file anyway.) Every segment path must lie
directly inside the index's folder. Cleanup deletes only files the old index listed there.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nagent_lsp.core.errors import SplitError
from nagent_lsp.core.identity import file_id_for, short_slug
from nagent_lsp.store import provenance
from nagent_lsp.store.atomic import atomic_write_stat, atomic_write_text
from nagent_lsp.store.files import FileTooLarge, NotRegularFile, file_kind, read_regular_bytes

INDEX = "index.json"
WRITER = "nagent-lsp"
INDEX_MAX_BYTES = 16 * 1024 * 1024  # an index of a 50 MiB file is a few hundred KiB
MAC_KIND = "split-index"


class UntrustedIndex(SplitError):
    """An index the server did not write, or one that points outside its own folder."""


@dataclass(frozen=True)
class SplitResult:
    index_path: Path
    index: dict[str, Any]


def _stamp(index_path: Path, index: dict[str, Any]) -> None:
    index["written_by"] = WRITER
    index["split_folder_id"] = file_id_for(index_path.parent)
    index["mac"] = provenance.mac(MAC_KIND, _canonical(index))


def _canonical(index: dict[str, Any]) -> bytes:
    """What the MAC covers: every field but `mac`, in one spelling."""
    body = {k: v for k, v in index.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def verify_index(index_path: Path, index: dict[str, Any]) -> None:
    """UntrustedIndex unless the index carries this user's MAC over its content."""
    try:
        genuine = provenance.verify(MAC_KIND, _canonical(index), index.get("mac"))
    except provenance.ProvenanceError as exc:
        raise UntrustedIndex(f"{index_path} cannot be checked, so it is not trusted: {exc.message}") from None
    except (TypeError, ValueError, RecursionError):
        genuine = False
    if not genuine:
        raise UntrustedIndex(
            f"{index_path} was not written by nagent-lsp for you, or was changed since (its MAC does not verify), "
            "so it is not trusted; split the file again"
        )


def write_index(index_path: Path, index: dict[str, Any]) -> None:
    """Write `index` (stamped in place as the server's own) into its folder."""
    _stamp(index_path, index)
    atomic_write_text(index_path, _readable_json(index))


def _readable_json(index: dict[str, Any]) -> str:
    """The index as JSON a person can read: one field a line, one segment a line. `json.dumps(indent=...)` takes the
    pure-Python encoder (40 ms for the 1,500 segments of a 50 MB file), a dumps per segment makes an encoder each
    (20 ms); the segments are dumped at once and broken between entries: `}, {"` occurs nowhere else in compact JSON
    of flat objects, since a quote inside a string is escaped."""
    fields = []
    for key, value in index.items():
        if key == "segments" and isinstance(value, list) and value:
            body = json.dumps(value, ensure_ascii=False)[1:-1].replace('}, {"', '},\n    {"')
            text = "[\n    " + body + "\n  ]"
        else:
            text = json.dumps(value, ensure_ascii=False)
        fields.append(f"  {json.dumps(key, ensure_ascii=False)}: {text}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def write_split(index_path: Path, index: dict[str, Any], blobs: list[bytes]) -> None:
    folder = index_path.parent.resolve()
    for entry, blob in zip(index["segments"], blobs, strict=False):
        entry[STAMP] = file_stamp(atomic_write_stat(segment_path(folder, entry), blob))
    write_index(index_path, index)


# A segment's stamp: the (inode, size, mtime in ns) of its file when its bytes were known to be its range of the
# source (written by the split, or read by a patch). A patch takes a segment whose file still has that stamp as
# unchanged without reading it (git's stat check of its index); any write to the file changes its mtime, a
# replacement its inode. Racy stamps are never trusted (`stamp_holds`): one whose mtime is not older than the
# index file (a write in the same clock tick, after the stamp was taken, would keep the mtime), and a patch stamps
# a file it read only when its mtime is older than STAMP_SETTLED.
STAMP = "stamp"
STAMP_SETTLED = 2_000_000_000  # ns: a file last written longer ago than this (coarse file system clocks) is stamped


def file_stamp(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def settled_stamp(st: os.stat_result, now_ns: int) -> list[int] | None:
    """The stamp of a file a patch read (`st`: its fstat before the read), None while its last write is recent."""
    return file_stamp(st) if now_ns - st.st_mtime_ns > STAMP_SETTLED else None


def stamp_holds(path: str, entry: dict[str, Any], index_mtime_ns: int) -> bool:
    """Whether the segment file at `path` (from `segment_paths`) is unchanged since its entry's stamp: a regular
    file (not followed if a link), same inode, size and mtime, the stamp older than the index file and its size the
    entry's byte range."""
    stamp = entry.get(STAMP)
    if type(stamp) is not list or len(stamp) != 3 or not all(type(v) is int for v in stamp):
        return False
    if stamp[1] != entry["end_byte"] - entry["start_byte"] or stamp[2] >= index_mtime_ns:
        return False
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and [st.st_ino, st.st_size, st.st_mtime_ns] == stamp


def segment_path(folder: Path, entry: dict[str, Any]) -> Path:
    """The file of one segment entry; UntrustedIndex unless it lies directly inside `folder` (resolved).

    The path is judged without following its last component: a segment that is a symlink is refused when it
    is read or deleted (`read_segment`, `remove_stale_segments`), never followed."""
    return folder / _segment_name(str(folder), folder, entry)


def _segment_name(prefix: str, folder: Path, entry: dict[str, Any]) -> str:
    """The file name of a segment entry whose path lies directly inside `folder` (`prefix`: str(folder))."""
    raw = entry.get("path")
    if not isinstance(raw, str) or not raw or "\0" in raw:
        raise UntrustedIndex("a segment has no valid path")
    if not os.path.isabs(raw):
        raise UntrustedIndex(f"segment path {raw!r} is not absolute")
    lexical = os.path.normpath(raw)  # ".." folded first, so the name below is the file's own
    parent, name = os.path.split(lexical)
    if not name or name in (INDEX, ".", "..") or (parent != prefix and _resolved(parent) != folder):
        raise UntrustedIndex(f"segment path {raw!r} is not a file of its split folder {folder}")
    return name


def segment_paths(folder: Path, entries: list[dict[str, Any]]) -> list[str]:
    """`segment_path` of each entry as a string (one Path per segment costs more than reading a small one)."""
    prefix = str(folder)
    return [os.path.join(prefix, _segment_name(prefix, folder, entry)) for entry in entries]


def _resolved(parent: str) -> Path | None:
    try:
        return Path(parent).resolve()
    except (OSError, RuntimeError):
        return None


def read_index_file(index_path: Path) -> Any:
    """The parsed JSON of an index file through the bounded reader (a FIFO or a huge file is refused)."""
    try:
        raw = read_regular_bytes(index_path, INDEX_MAX_BYTES)
    except FileNotFoundError:
        raise SplitError(f"index not found: {index_path}") from None
    except NotRegularFile as exc:
        if exc.kind == "a directory":
            raise SplitError(f"index not found: {index_path}") from None
        raise UntrustedIndex(f"not a split index: {index_path} is {exc.kind}") from None
    except FileTooLarge as exc:
        raise UntrustedIndex(f"not a split index: {index_path} is {exc.size} bytes") from None
    except OSError as exc:
        raise SplitError(f"index cannot be read: {index_path} ({exc.strerror or exc})") from None
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise SplitError(f"index is not valid JSON: {index_path}: {exc}") from None


def load_index(index_path: Path, *, verify: bool = True) -> dict[str, Any]:
    """A split index the server wrote, with every segment inside its folder; SplitError (UntrustedIndex for a
    foreign one) otherwise. Where the folder may be is the caller's rule (agent.splits.load_trusted_split).
    `verify=False` leaves the MAC to the caller (`verify_index`), who checks more first: the more specific
    refusal (a segment or source outside) is the one reported."""
    index_path = Path(index_path)
    index = read_index_file(index_path)
    if not isinstance(index, dict):
        raise SplitError(f"index is not a JSON object: {index_path}")
    folder = index_path.parent.resolve()
    try:
        folder_id = file_id_for(folder)
    except OSError:
        raise SplitError(f"index not found: {index_path}") from None
    if index.get("written_by") != WRITER or index.get("split_folder_id") != folder_id:
        raise UntrustedIndex(
            f"{index_path} was not written by nagent-lsp in this folder, so it is not trusted; split the file again"
        )
    if not isinstance(index.get("source_path"), str) or not index["source_path"]:
        raise SplitError(f"index.json missing source_path: {index_path}")
    segments = index.get("segments")
    if not isinstance(segments, list) or not segments:
        raise SplitError(f"index.json has no segments: {index_path}")
    prefix = str(folder)
    for position, entry in enumerate(segments, 1):
        if (
            not isinstance(entry, dict)
            or type(entry.get("start_line_num")) is not int
            or type(entry.get("end_line_num")) is not int
            or not isinstance(entry.get("path"), str)
        ):
            raise SplitError(f"index.json segment {position} needs start_line_num, end_line_num and path")
        _segment_name(prefix, folder, entry)
    if verify:
        verify_index(index_path, index)
    return index


class SegmentsTooLarge(SplitError):
    """The segments read so far and this one hold more than the merge may (maxFileBytes)."""


_SEGMENT_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_SEGMENT_FLAGS |= getattr(os, "O_NOFOLLOW", 0)


def _read_small_regular(path: Path | str, limit: int) -> bytes:
    return _read_small_regular_stat(path, limit)[0]


def _read_small_regular_stat(path: Path | str, limit: int) -> tuple[bytes, os.stat_result]:
    """`read_regular_bytes(path, limit, follow_symlinks=False)` for the many small files of a split, with the same
    checks (a link or a non-regular file refused before it is opened, the open non-blocking, never following a link,
    re-checked with fstat, at most limit + 1 bytes read) and fewer Python steps: a 50 MB file has 1,500 segments."""
    st = os.stat(path, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(Path(path), file_kind(st.st_mode))
    if st.st_size > limit:
        raise FileTooLarge(Path(path), st.st_size, limit)
    try:
        fd = os.open(path, _SEGMENT_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link after the stat
            raise NotRegularFile(Path(path), "a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped between the stat and the open
            raise NotRegularFile(Path(path), file_kind(st.st_mode))
        if st.st_size > limit:
            raise FileTooLarge(Path(path), st.st_size, limit)
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:  # it changed after the fstat: read it the careful way, stamped as changing
            return read_regular_bytes(path, limit, follow_symlinks=False), os.fstat(fd)
        return data, st
    finally:
        os.close(fd)


def read_segment(path: Path | str, limit: int) -> bytes:
    """One segment's bytes (a path `segment_path` accepted) through the bounded reader; never through a link.
    `limit`: the bytes the merge may still take (SegmentsTooLarge beyond)."""
    return read_segment_stat(path, limit)[0]


def read_segment_stat(path: Path | str, limit: int) -> tuple[bytes, os.stat_result]:
    """`read_segment`, with the file's fstat taken before the read (what `settled_stamp` stamps)."""
    try:
        return _read_small_regular_stat(path, limit)
    except FileNotFoundError:
        raise SplitError(f"segment not found: {path}") from None
    except FileTooLarge:
        raise SegmentsTooLarge(f"segment {path} would take the merged file past maxFileBytes") from None
    except NotRegularFile as exc:
        raise UntrustedIndex(f"segment {path} cannot be used: {exc}") from None
    except OSError as exc:
        raise SplitError(f"segment cannot be read: {path} ({exc.strerror or exc})") from None


def remove_stale_segments(index_path: Path, index: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    """Delete the files the old index listed inside the index folder that the new index no longer uses.

    Nothing else is ever deleted: not a file merely named like a segment, not a path outside the folder."""
    if not old:
        return
    folder = index_path.parent.resolve()
    keep = set()
    for entry in index["segments"]:
        try:
            keep.add(segment_path(folder, entry))
        except UntrustedIndex:
            continue
    for entry in old.get("segments", []):
        try:
            path = segment_path(folder, entry) if isinstance(entry, dict) else None
        except UntrustedIndex:
            continue  # listed but not ours to delete
        if path is not None and path not in keep and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def split_dir_name(splits_dir: Path, source: Path) -> Path:
    """A fresh `splits_dir/<slug(stem)>-<uuid4>` path for one split of `source` (not created)."""
    return splits_dir / f"{short_slug(source.stem)}-{uuid.uuid4()}"


def new_split_dir(splits_dir: Path, source: Path) -> Path:
    """A fresh `splits_dir/<slug(stem)>-<uuid4>/` for one split of `source`, created."""
    out_dir = split_dir_name(splits_dir, source)
    out_dir.mkdir(parents=True, exist_ok=False)
    return out_dir


def find_split_dirs(splits_root: Path, target: Path, target_file_id: str | None = None) -> list[Path]:
    """The split folders (`splits/*/index.json`) whose index names the target as its source: by file id when
    known (the target may have been renamed since it was split), else by path. Discovery only: what is found
    is used after the trusted loader accepts it."""
    target = Path(target).resolve()
    found: list[Path] = []
    if not Path(splits_root).is_dir():
        return found
    for index in sorted(Path(splits_root).glob(f"*/{INDEX}")):
        try:
            data = read_index_file(index)
        except SplitError:
            continue  # a damaged or foreign index is not ours to trust
        source = data.get("source_path") if isinstance(data, dict) else None
        if not isinstance(source, str) or not source or "\0" in source:
            continue
        # The source must still exist: a split of a file that is gone (or was replaced) is stale.
        try:
            source_id = file_id_for(source)
        except (OSError, ValueError):
            continue
        if source_id == target_file_id if target_file_id else os.path.realpath(source) == str(target):
            found.append(index.parent)
    return found

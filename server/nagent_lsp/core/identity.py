"""File identity (DESIGN §2): a file is its device + inode, so its conversation survives renames.

Buffers that have no file on disk yet (untitled documents, a new file not saved yet) are keyed by their
URI until they are saved.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from pathlib import Path
from urllib.parse import unquote, unquote_to_bytes, urlparse

URI_KEY_PREFIX = "uri:"
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def file_id_for(path: Path | str) -> str:
    """`"{st_dev}:{st_ino}"` of the file (symlinks followed); raises OSError when it does not exist."""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


def slug(text: str) -> str:
    """Runs of anything but ASCII letters and digits become '-', trimmed, lowercase; empty → 'file'."""
    return _NON_ALNUM.sub("-", text).strip("-").lower() or "file"


def new_conversation_name(stem: str) -> str:
    return f"{slug(stem)}-{uuid.uuid4()}"


def uri_key(uri: str) -> str:
    return URI_KEY_PREFIX + uri


def is_uri_key(key: str) -> bool:
    return key.startswith(URI_KEY_PREFIX)


def looks_like_uri(value: str) -> bool:
    # A scheme of two or more letters: "C:" style drive letters are paths, not URIs.
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", value) is not None and not value.startswith("/")


def uri_to_path(uri: str) -> Path | None:
    """The local path of a `file:` URI; None for any other scheme (untitled:, vscode-notebook:, ...)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    if parsed.netloc and parsed.netloc != "localhost":
        return None
    # Percent-escapes are the path's bytes: a name that is not UTF-8 (b"caf\xe9.c" is `caf%E9.c`) must come back as
    # the same file, not as U+FFFD (urllib's `unquote` replaces undecodable bytes).
    return Path(os.fsdecode(unquote_to_bytes(parsed.path)))


def normalise(path: Path | str) -> Path:
    """Absolute, `~` expanded, symlinks resolved where they exist (a missing tail stays as written)."""
    return Path(os.path.expanduser(str(path))).resolve()


def uri_stem(uri: str) -> str:
    """A readable stem for a URI-keyed buffer: `untitled:Untitled-1` → `Untitled-1`."""
    parsed = urlparse(uri)
    tail = unquote(parsed.path or parsed.netloc or "").rstrip("/").rsplit("/", 1)[-1]
    return Path(tail).stem or tail


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def short_slug(name: str) -> str:
    """A slug short enough for folder and file names (split folders, patch files)."""
    return slug(name)[:48].strip("-") or "file"

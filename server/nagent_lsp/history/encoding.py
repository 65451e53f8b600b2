"""Git data is bytes: how history turns them into text, and paths back into the bytes git knows.

Git stores author names, e-mails, subjects and paths as bytes in whatever encoding the committer's machine used
(git.git itself has a Latin-1 author in 7eb93c8965, written without an `encoding` header). The index keeps the exact
bytes, so a path found on disk still matches the path git reports; text is made only where a person or a JSON result
needs it, by `display`.

`display` decodes UTF-8 and shows each byte that is not part of valid UTF-8 as its Latin-1 character. Why Latin-1
rather than U+FFFD replacement: every byte stays visible and distinct (b"K\\xe5gedal" reads "Kågedal", not "K�gedal"),
the legacy text that real histories hold is overwhelmingly Latin-1, valid UTF-8 around a stray byte is kept as it is,
and the result is always a valid Unicode string, so every JSON result encodes as UTF-8 without an exception.

Paths cross two other boundaries: the file system (Python's `os.fsdecode`/`os.fsencode`, lossless through
surrogateescape) and git's command line (the same: subprocess encodes arguments with `os.fsencode`). `to_bytes` and
`git_arg` are those two conversions, named so the code says which side it is on.
"""

from __future__ import annotations

import codecs
import os

_HANDLER = "nagent-latin1"


def _latin1_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return error.object[error.start : error.end].decode("latin-1"), error.end


codecs.register_error(_HANDLER, _latin1_fallback)


def display(raw: bytes) -> str:
    """Readable text for git bytes: UTF-8, with any byte that is not valid UTF-8 shown as its Latin-1 character."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", _HANDLER)


def to_bytes(path: str) -> bytes:
    """The exact bytes of a path Python got from the file system (surrogateescape round-trips any byte)."""
    return os.fsencode(path)


def git_arg(raw: bytes) -> str:
    """A path in git's bytes as a command-line argument that reaches git byte for byte."""
    return os.fsdecode(raw)

"""Reading a file's exact text from disk: one reader for every port and operation, so CRLF, a missing final
newline and encoding errors are treated the same everywhere (text is never newline-translated)."""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.core.errors import UserError


def read_disk_text(path: Path, missing_ok: bool = True) -> str:
    """The file's exact text ("" when it does not exist and `missing_ok`); a UserError when it is not UTF-8."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        if missing_ok:
            return ""
        raise UserError(f"file not found: {path}") from None
    except IsADirectoryError:
        raise UserError(f"not a file: {path}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None

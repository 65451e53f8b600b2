"""One logger ("nagent_lsp") to stderr or a file, for the server and the CLI alike.

Log lines a person can read: every record is capped at MAX_RECORD characters (a 10 MB URI does not make a
10 MB line), a traceback is written only at -v and then capped too, and a log file rotates at LOG_FILE_BYTES
keeping LOG_FILE_BACKUPS older files. The editor never gets a traceback (lsp/log_forwarding.py formats without one).
"""

from __future__ import annotations

import logging
import sys

MAX_RECORD = 4000  # characters of one log message
MAX_TRACEBACK = 16000  # characters of one traceback (at -v)
LOG_FILE_BYTES = 5 * 1024 * 1024
LOG_FILE_BACKUPS = 2
_OTHER_LOGGERS = ("pygls", "asyncio")  # libraries whose records reach the same handler, formatted alike


def cap(text: str, limit: int = MAX_RECORD) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def one_line(error: BaseException, limit: int = 300) -> str:
    """`ExceptionType: first line of its message`, capped: for a log line, never for a reply to the user."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return cap(f"{type(error).__name__}: {text}" if text else type(error).__name__, limit)


class CappedFormatter(logging.Formatter):
    """Formats a record as one capped message; its traceback only when `tracebacks` is on.

    Unlike logging.Formatter it never caches the traceback on the record, so handlers sharing a record (the log
    file with tracebacks, the editor without) each get their own form."""

    def __init__(self, fmt: str | None = None, *, tracebacks: bool = False, limit: int = MAX_RECORD, omitted: str = ""):
        super().__init__(fmt)
        self.tracebacks = tracebacks
        self.limit = limit
        self.omitted = omitted  # appended to a record whose traceback is left out

    def format(self, record: logging.LogRecord) -> str:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not turn into logging's own traceback on stderr
            message = str(record.msg)
        record.message = cap(message, self.limit)
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        if record.exc_info and record.exc_info[0] is not None:
            if self.tracebacks:
                text += "\n" + cap(self.formatException(record.exc_info), MAX_TRACEBACK)
            else:
                text += self.omitted
        if record.stack_info and self.tracebacks:
            text += "\n" + cap(self.formatStack(record.stack_info), MAX_TRACEBACK)
        return text


def setup_logging(verbose: int = 0, log_file: str | None = None) -> logging.Logger:
    logger = logging.getLogger("nagent_lsp")
    logger.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING)
    handler: logging.Handler
    if log_file:
        # Imported only with a log file: logging.handlers pulls in socket, pickle and queue (~20 ms at every start).
        from logging.handlers import RotatingFileHandler

        handler = RotatingFileHandler(
            log_file,
            maxBytes=LOG_FILE_BYTES,
            backupCount=LOG_FILE_BACKUPS,
            encoding="utf-8",
            errors="backslashreplace",
        )
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        CappedFormatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s",
            tracebacks=verbose >= 1,
            omitted=" (run with -v for the traceback)",
        )
    )
    logger.handlers[:] = [handler]
    logger.propagate = False
    for name in _OTHER_LOGGERS:
        other = logging.getLogger(name)
        other.handlers[:] = [handler]
        other.propagate = False
    # The HTTP stack logs request headers at DEBUG; keep it quiet so a key can never leak through it.
    for noisy in ("httpx", "httpcore", "openai", "pygls"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose < 3 else logging.INFO)
    return logger

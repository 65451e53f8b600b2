"""Logging set up on first use, for CLI commands whose fast path never logs (issue 29: importing `logging` is
~15 ms of `nagent-lsp history FILE`, whose floor is `nagent-lsp --version` plus one `git log`).

`set_up_later` records what the command line asked for; the first `logger()` call (a module about to log) or
`set_up_now()` (the command leaving its fast path) applies it with core/logs.setup_logging, exactly as an eager
start would have. Without `set_up_later` (the server, other commands, tests) `logger()` is `logging.getLogger`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

_wanted: list[tuple[int, str | None]] = []  # at most one entry: the setup still to make


def set_up_later(verbose: int, log_file: str | None) -> None:
    _wanted[:] = [(verbose, log_file)]


def set_up_now() -> None:
    try:
        verbose, log_file = _wanted.pop()  # atomic: two threads logging at once set it up once
    except IndexError:
        return
    from nagent_lsp.core.logs import setup_logging

    setup_logging(verbose, log_file)


def logger(name: str) -> logging.Logger:
    import logging

    set_up_now()
    return logging.getLogger(name)


def info(name: str, message: str, *args: object) -> None:
    """An info record, dropped without importing logging when the pending setup would drop it (no -v)."""
    if _wanted and _wanted[0][0] < 1:
        return
    logger(name).info(message, *args)

"""One logger ("nagent_lsp") to stderr or a file, for the server and the CLI alike."""

from __future__ import annotations

import logging
import sys


def setup_logging(verbose: int = 0, log_file: str | None = None) -> logging.Logger:
    logger = logging.getLogger("nagent_lsp")
    logger.setLevel(logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING)
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.handlers[:] = [handler]
    logger.propagate = False
    # The HTTP stack logs request headers at DEBUG; keep it quiet so a key can never leak through it.
    for noisy in ("httpx", "httpcore", "openai", "pygls"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose < 3 else logging.INFO)
    return logger

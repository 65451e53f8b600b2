"""Objects made at start-up that live as long as the process: made with the collector off, then frozen out of it.

A server's start allocates ~100k objects it keeps until it exits (pygls and lsprotocol's types and converters, the
ACP SDK's models, the attrs classes). The cyclic collector, triggered every few hundred allocations, scanned them
over and over while they were being made: 150-250 ms of the LSP server's time to answer `initialize` on 2 cores
(issue 29, benchmarks/startup.py). `gc.freeze()` then moves them to a generation no later collection scans."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def long_lived() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()

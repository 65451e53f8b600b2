"""`python -m nagent_lsp`, plus one request a test may send to look inside: `nagent/test/requestTable` answers
how many entries pygls' table of running requests holds and how many of them are finished (a finished one left
there is a leak: it keeps its task and result alive for the life of the server). Used by tests/test_resources.py;
run as `python -m tests.harness.probed_server [nagent-lsp arguments]` from the repository root."""

from __future__ import annotations

import sys
from typing import Any

from nagent_lsp.lsp import app
from nagent_lsp.lsp.pygls_private import request_table
from nagent_lsp.lsp.server import NagentServer

PROBE = "nagent/test/requestTable"
_create = app.create_server


def create_probed_server() -> NagentServer:
    server = _create()

    @server.feature(PROBE)
    def probe(ls: NagentServer, params: Any = None) -> dict[str, int]:
        futures = list(request_table(ls.nagent_protocol).values())
        return {"entries": len(futures), "finished": sum(1 for f in futures if f.done())}

    return server


if __name__ == "__main__":
    app.create_server = create_probed_server
    from nagent_lsp.headless.cli import main

    raise SystemExit(main(sys.argv[1:]))

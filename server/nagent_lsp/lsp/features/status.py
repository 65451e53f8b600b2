"""`nagent.status`."""

from __future__ import annotations

from typing import Any

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.config.args import parse_args
from nagent_lsp.operations.status import status
from dataclasses import dataclass


@dataclass(frozen=True)
class StatusArgs:
    pass


def register(server: Any) -> None:
    def run(ls: Any, raw: Any) -> dict[str, Any]:
        parse_args(StatusArgs, raw)
        return status(ls.session)

    register_command(server, "nagent.status", run)

"""`nagent.split`, `nagent.patch` and `nagent.summarize`."""

from __future__ import annotations

from typing import Any

from nagent_lsp.lsp.commands import register_command
from nagent_lsp.lsp.port import LspPort
from nagent_lsp.operations import patch as patch_wf
from nagent_lsp.operations import split as split_wf
from nagent_lsp.operations import summarize as summarize_wf
from nagent_lsp.config.args import parse_args


def register(server: Any) -> None:
    async def run_split(ls: Any, raw: Any) -> dict[str, Any]:
        # async (not a worker thread): the buffer is read from the server's document store on its own loop.
        return split_wf.split(ls.session, LspPort(ls), parse_args(split_wf.SplitArgs, raw))

    async def run_patch(ls: Any, raw: Any) -> dict[str, Any]:
        return await patch_wf.patch(ls.session, LspPort(ls), parse_args(patch_wf.PatchArgs, raw))

    async def run_summarize(ls: Any, raw: Any) -> dict[str, Any]:
        return await summarize_wf.summarize(ls.session, LspPort(ls), parse_args(summarize_wf.SummarizeArgs, raw))

    register_command(server, "nagent.split", run_split)
    register_command(server, "nagent.patch", run_patch)
    register_command(server, "nagent.summarize", run_summarize)

"""`nagent-lsp split FILE`, `patch INDEX`, `summarize FILE`: the same workflows as the editor commands, on disk."""

from __future__ import annotations

import argparse
from collections.abc import Coroutine

from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.headless.port import DiskPort
from nagent_lsp.operations.args import PatchArgs, SplitArgs, UriArgs


def run_split(args: argparse.Namespace) -> int:
    from nagent_lsp.operations.split import split

    def run() -> None:
        path = args.file.resolve()
        session = session_for(path)
        print_json(
            split(
                session, DiskPort(session.workspace_folders), SplitArgs(path.as_uri(), args.target_bytes, args.natural)
            )
        )

    return run_guarded(run)


def run_patch(args: argparse.Namespace) -> int:
    from nagent_lsp.operations.patch import patch, patch_on_disk

    def run() -> Coroutine[object, object, None] | None:
        index = args.index.resolve()
        session = session_for(index)
        port, patch_args = DiskPort(session.workspace_folders), PatchArgs(str(index), args.force, args.dry_run)
        done = patch_on_disk(session, port, patch_args)  # issue 29: the streamed patch needs no event loop
        if done is not None:
            print_json(done)
            return None

        async def whole_text() -> None:
            print_json(await patch(session, port, patch_args))

        return whole_text()

    return run_guarded(run)


def run_summarize(args: argparse.Namespace) -> int:
    from nagent_lsp.operations.summarize import summarize

    async def run() -> None:
        path = args.file.resolve()
        session = session_for(path)
        print_json(await summarize(session, DiskPort(session.workspace_folders), UriArgs(path.as_uri())))

    return run_guarded(run)

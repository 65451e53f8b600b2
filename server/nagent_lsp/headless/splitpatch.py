"""`nagent-lsp split FILE`, `patch INDEX`, `summarize FILE`: the same workflows as the editor commands, on disk."""

from __future__ import annotations

import argparse
from pathlib import Path

from nagent_lsp.cli import print_json, subcommand
from nagent_lsp.headless.common import run_guarded, session_for
from nagent_lsp.headless.port import DiskPort
from nagent_lsp.workflows.patch import PatchArgs, patch
from nagent_lsp.workflows.split import SplitArgs, split
from nagent_lsp.workflows.summarize import SummarizeArgs, summarize


def _split_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)
    parser.add_argument("--target-bytes", type=int, default=None, help="segment size to aim for (default 32768)")
    parser.add_argument("--natural", action="store_true", help="cut at every natural boundary")


def _patch_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("index", type=Path, help="the split's index.json")
    parser.add_argument("--force", action="store_true", help="patch even if the file changed since the split")
    parser.add_argument("--dry-run", action="store_true", help="write the diff, change nothing")


def _file_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path)


@subcommand("split", "split a large file into segments at natural boundaries (prints the JSON result)", _split_args)
def run_split(args: argparse.Namespace) -> int:
    def run() -> None:
        path = args.file.resolve()
        session = session_for(path)
        print_json(split(session, DiskPort(session.workspace_folders), SplitArgs(path.as_uri(), args.target_bytes, args.natural)))

    return run_guarded(run)


@subcommand("patch", "merge a split's segments back into its file (atomic write; prints the JSON result)", _patch_args)
def run_patch(args: argparse.Namespace) -> int:
    async def run() -> None:
        index = args.index.resolve()
        session = session_for(index)
        print_json(await patch(session, DiskPort(session.workspace_folders), PatchArgs(str(index), args.force, args.dry_run)))

    return run_guarded(run)


@subcommand("summarize", "summarise a file with the configured model (cached by content)", _file_args)
def run_summarize(args: argparse.Namespace) -> int:
    async def run() -> None:
        path = args.file.resolve()
        session = session_for(path)
        print_json(await summarize(session, DiskPort(session.workspace_folders), SummarizeArgs(path.as_uri())))

    return run_guarded(run)

"""Command line: the language server (default) and headless runs of the same workflows."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from nagent_lsp import __version__

# Headless subcommands register themselves here: name -> (help, add_arguments, run(args) -> exit code).
SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def subcommand(name: str, help_text: str, add_arguments: Callable[[argparse.ArgumentParser], None]):
    def wrap(run: Callable[[argparse.Namespace], int]):
        SUBCOMMANDS[name] = (help_text, add_arguments, run)
        return run

    return wrap


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nagent-lsp", description="nagent language server and headless tools")
    parser.add_argument("--version", action="version", version=f"nagent-lsp {__version__}")
    parser.add_argument("--tcp", action="store_true", help="serve over TCP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    parser.add_argument("--log-file", help="write logs to this file instead of stderr")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _load_headless()
    for name, (help_text, add_arguments, _run) in sorted(SUBCOMMANDS.items()):
        p = sub.add_parser(name, help=help_text)
        add_arguments(p)
    return parser


def _load_headless() -> None:
    # Importing registers the subcommands; kept lazy so `--version` stays fast.
    from nagent_lsp import headless  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from nagent_lsp.lsp.logs import setup_logging

    setup_logging(args.verbose, args.log_file)
    if args.command:
        return SUBCOMMANDS[args.command][2](args)
    from nagent_lsp.lsp.server import create_server

    server = create_server()
    if args.tcp:
        server.start_tcp(args.host, args.port)
    else:
        server.start_io()
    return 0


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help="the file")
    parser.add_argument("--json", action="store_true", help="print the command's JSON result")

"""`nagent-lsp context FILE [--json] [--full]`: the layers of FILE's initial context, in the order the model sees
them — the user's and the project's root context, then the repository's rules files (AGENTS.md, CLAUDE.md,
`.claude/rules`, Copilot instructions) — each with its source and size; `--full` adds their text."""

from __future__ import annotations

import argparse
import sys

from nagent_lsp.core.errors import InvalidArgument
from nagent_lsp.headless.common import print_json, run_guarded, session_for
from nagent_lsp.operations.context_info import ContextLayers, context_layers


def run(args: argparse.Namespace) -> int:
    def show() -> None:
        path = args.file.resolve()
        if not path.is_file():
            raise InvalidArgument("file", f"{args.file} is not a file")
        result = context_layers(session_for(path), path, with_text=args.full)
        if args.json:
            print_json(result)
        else:
            _print(result)
        for problem in result.problems:
            print(f"warning: rules file {problem}", file=sys.stderr)

    return run_guarded(show)


def _print(result: ContextLayers) -> None:
    if not result.layers:
        print(f"No context layers for {result.target}.")
    for layer in result.layers:
        notes = [layer.scope]
        if layer.matched:
            notes.append(f"matched {layer.matched}")
        if layer.truncated:
            notes.append("truncated")
        if layer.omitted:
            notes.append("left out: over the total cap")
        print(f"{layer.label}  {layer.source}  {layer.bytes} bytes  ({', '.join(notes)})")
        if layer.text is not None:
            print(layer.text.rstrip("\n") + "\n")

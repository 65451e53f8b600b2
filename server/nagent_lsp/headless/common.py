"""What every headless subcommand does: a session for the file's workspace, errors as exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from nagent_lsp.config.state_root import git_toplevel
from nagent_lsp.core.errors import InvalidArgument, UserError
from nagent_lsp.operations.session import Session
from nagent_lsp.store.transaction import recover_all


def session_for(path: Path) -> Session:
    """The workspace is the file's repository (else the current folder), as an editor opened there would see it."""
    path = path.resolve()
    top = git_toplevel(str(path.parent if not path.is_dir() else path))
    folder = Path(top) if top else Path.cwd().resolve()
    session = Session(workspace_folders=[folder])
    for problem in session.reload():
        print(f"warning: {problem}", file=sys.stderr)
    # A change set a killed command left half written is finished (or undone) before anything reads the files.
    recover_all([session.state_root(f).path for f in session.workspace_folders])
    return session


def run_guarded(action: Callable[[], Any]) -> int:
    """Exit 0 on success, 1 with the message on a user-actionable error, 2 on a bad argument."""
    try:
        result = action()
        if isinstance(result, Coroutine):
            import asyncio  # only the asynchronous subcommands (edit, patch, summarize) pay for it

            asyncio.run(result)
    except UserError as exc:
        print(f"nagent-lsp: {exc.message}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidArgument) else 1
    except BrokenPipeError:  # `nagent-lsp history F | head`: the reader left, nothing to report
        return 0
    except FileNotFoundError as exc:
        print(f"nagent-lsp: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _is_model_error(exc):
            raise
        print(f"nagent-lsp: {exc}", file=sys.stderr)
        return 1
    return 0


def _is_model_error(exc: BaseException) -> bool:
    """A ModelError, without importing the model layer: a command that never loaded it (history, status) cannot
    have raised one."""
    model = sys.modules.get("nagent_lsp.core.model")
    return model is not None and isinstance(exc, model.ModelError)


def print_json(value: object) -> None:
    """A result as the server would send it (`to_wire`: the same JSON for `--json` as on the wire)."""
    import json

    from nagent_lsp.config.convert import to_wire  # cattrs: only a command that prints JSON pays for it

    json.dump(to_wire(value), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")

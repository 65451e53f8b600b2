"""The model's actions in an editor session: confined reads, the write policy, the shell and its permission.

Pure or port-driven: nothing here imports pygls; the editor is reached only through `EditorPort` methods.
"""

from nagent_lsp.actions.confine import Refused, confine_read
from nagent_lsp.actions.permission import ShellDecision, ShellPermission
from nagent_lsp.actions.read import READ_LIMIT, ReadOutcome, read_action
from nagent_lsp.actions.shell import ShellResult, run_shell
from nagent_lsp.actions.write import WriteTarget, check_write, find_segment_dirs

__all__ = [
    "READ_LIMIT",
    "ReadOutcome",
    "Refused",
    "ShellDecision",
    "ShellPermission",
    "ShellResult",
    "WriteTarget",
    "check_write",
    "confine_read",
    "find_segment_dirs",
    "read_action",
    "run_shell",
]

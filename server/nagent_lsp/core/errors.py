"""Errors a workflow raises for the user; the LSP layer maps them to JSON-RPC errors, the CLI to exit codes."""

from __future__ import annotations


class UserError(Exception):
    """A failure the user must act on (no model, file outside the workspace, hash mismatch...)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidArgument(UserError):
    """A malformed command argument; the message names the field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"invalid argument '{field}': {message}")
        self.field = field


class SplitError(ValueError):
    """A split/index problem the user can act on; the message says what."""


class PatchError(ValueError):
    """A patch the user must fix (missing index or segment, hash mismatch, gap, overlap)."""

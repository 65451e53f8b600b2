"""Headless runs of the workflows (the CLI's subcommands), over a disk-backed editor port."""

from nagent_lsp.headless import edit, history, splitpatch, status  # noqa: F401

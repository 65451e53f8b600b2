"""Headless runs of the operations (the CLI and its subcommands), over a disk-backed editor port."""

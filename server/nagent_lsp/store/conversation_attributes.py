"""`<state root>/conversations/.gitattributes`: two people appending to one conversation merge as text.

A conversation only grows at its end, so git's built-in `union` merge driver keeps both sides' appended turns (ours,
then theirs) with no conflict markers: what two clones add to the same conversation is all kept. The JSON files
(the file index, the shared manifest) are structured: a union of their lines could be invalid JSON, so they keep
git's ordinary text merge (a conflict the user sees) and `.gitattributes` itself is never union-merged. `union` is
built into git: no driver is named that a config would have to define.

The file is the server's own (the model may never write a `.gitattributes`, denyWrite): written before the server
first writes into a conversation git shares (agent/shared_conversations.py), in a root made by an older server
too; a `.gitattributes` that is already there (the user's, or a link) is left as it is.
"""

from __future__ import annotations

from pathlib import Path

from nagent_lsp.store.atomic import atomic_write_text

NAME = ".gitattributes"
MARKER = "# Written by nagent-lsp: conversations merge as text (both sides' appended turns are kept)."
ATTRIBUTES = MARKER + "\n* merge=union\n*.json !merge\n.gitattributes !merge\n.* !merge\n"


def ensure_attributes(conversations: Path) -> bool:
    """Write `conversations/.gitattributes` unless something is there already (the user's, or a link); True when
    written."""
    target = conversations / NAME
    if target.exists() or target.is_symlink():
        return False
    atomic_write_text(target, ATTRIBUTES)
    return True

"""The `shell` permission (DESIGN §5.4): allow, deny, or ask the user with Run once / Always / Deny.

No answer (the client cannot ask, the user dismissed the prompt, the request timed out) means deny.
"Always" holds for the rest of the server session, unless the setting is later changed to `deny`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

RUN_ONCE = "Run once"
ALWAYS = "Always"
DENY = "Deny"
CHOICES = [RUN_ONCE, ALWAYS, DENY]


class Asker(Protocol):
    async def ask(self, message: str, choices: list[str]) -> str | None: ...


@dataclass(frozen=True)
class ShellDecision:
    allowed: bool
    reason: str  # why, for the action's result when refused and for the log


class ShellPermission:
    """One per session: remembers an "Always" answer."""

    def __init__(self) -> None:
        self.always = False

    async def decide(self, mode: str, command: str, port: Asker, cwd: str = "") -> ShellDecision:
        if mode == "deny":
            return ShellDecision(False, "shell commands are disabled (setting nagent.shell is 'deny')")
        if mode == "allow":
            return ShellDecision(True, "allowed by setting nagent.shell = 'allow'")
        if mode != "ask":
            return ShellDecision(False, f"unknown nagent.shell value {mode!r}; treated as 'deny'")
        if self.always:
            return ShellDecision(True, "allowed: the user chose Always earlier in this session")
        where = f" in {cwd}" if cwd else ""
        answer = await port.ask(f"nagent wants to run a shell command{where}:\n\n{command}", list(CHOICES))
        if answer == RUN_ONCE:
            return ShellDecision(True, "allowed once by the user")
        if answer == ALWAYS:
            self.always = True
            return ShellDecision(True, "allowed by the user (Always)")
        if answer == DENY:
            return ShellDecision(False, "the user denied this shell command")
        return ShellDecision(
            False, "shell command not run: the user could not be asked or did not answer (nagent.shell is 'ask')"
        )

"""Permissions (DESIGN §5.4, §10): the `shell` setting, and an agent's Magent-style rules per tool.

`ShellPermission` asks the user with Run once / Always / Deny when the mode is `ask`. No answer (the client
cannot ask, the user dismissed the prompt, the request timed out) means deny. "Always" holds for the rest of the
server session, unless the setting is later changed to `deny`.

`Permissions` are an agent's rules: a tool (`read`, `write`, `shell`, `conversation`) maps to `allow`/`ask`/`deny`
or to an ordered list of (pattern, value) — path globs for read/write (matched on the path relative to its
workspace folder and on the absolute path), command globs for shell (nano_harness's allowlist: `"pytest *"`,
`"git status"`) — with `"*"` as the fallback. Resolution: the tool's rule → the first matching pattern → `"*"` →
the default the settings give. `Policy` adds the trust rule: rules from a workspace file (a cloned repository)
can only narrow that default, never widen it; built-in and user rules may widen it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal, Protocol

Value = Literal["allow", "ask", "deny"]
VALUES: tuple[Value, ...] = ("deny", "ask", "allow")  # narrowest first
TOOLS = ("read", "write", "shell", "conversation")
Rule = Value | tuple[tuple[str, Value], ...]

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

    def __init__(self, policy: Policy | None = None) -> None:
        self.always = False
        self.policy = policy  # an agent's `shell` rules (command globs) over the setting; None: the setting alone

    async def decide(self, mode: str, command: str, port: Asker, cwd: str = "") -> ShellDecision:
        if self.policy is not None and mode in VALUES:
            decided, why = self.policy.decide("shell", (command.strip(),), mode)
            if why != "default":
                if decided == "deny":
                    return ShellDecision(False, f"shell command denied by {why}")
                if decided == "allow":
                    return ShellDecision(True, f"allowed by {why}")
            mode = decided
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


def narrower(a: Value, b: Value) -> Value:
    return a if VALUES.index(a) <= VALUES.index(b) else b


@dataclass(frozen=True)
class Permissions:
    """An agent's rules per tool; a tool without a rule takes the default."""

    rules: Mapping[str, Rule] = field(default_factory=dict)

    def resolve(self, tool: str, subjects: tuple[str, ...], default: Value) -> tuple[Value, str]:
        """(value, which rule gave it) for one use of `tool` on `subjects` (the forms a path or command may be
        matched in)."""
        rule = self.rules.get(tool)
        if rule is None:
            return default, "default"
        if isinstance(rule, str):
            return rule, f"{tool}: {rule}"
        for pattern, value in rule:
            if pattern != "*" and any(fnmatchcase(s, pattern) for s in subjects):
                return value, f"{tool} pattern {pattern!r}: {value}"
        for pattern, value in rule:
            if pattern == "*":
                return value, f"{tool} pattern '*': {value}"
        return default, "default"


@dataclass(frozen=True)
class Policy:
    """One run's permissions: the agent's rules, whether its file may widen the settings, and its name."""

    agent: str = "edit"
    permissions: Permissions = field(default_factory=Permissions)
    trusted: bool = True  # built-in or user file; False: a workspace file, which only narrows

    def decide(self, tool: str, subjects: tuple[str, ...], default: Value) -> tuple[Value, str]:
        """The value for this use, and a reason fit for the conversation when it is not `allow`."""
        value, which = self.permissions.resolve(tool, subjects, default)
        if which == "default":
            return value, "default"
        if not self.trusted and VALUES.index(value) > VALUES.index(default):
            return default, (
                f"agent '{self.agent}' (a workspace file) asks for {which}, but a workspace agent cannot widen the "
                f"user's settings ({tool} is {default!r})"
            )
        return value, f"agent '{self.agent}' permission {which}"

    def read_check(self, folders: Sequence[Path]) -> Callable[[Path], str | None] | None:
        """The `read` rule as a narrowing of the read rules (agent.sandbox.ReadRules): a read the rule does not
        allow is refused. Reads are never asked for (there may be dozens per turn): `ask` counts as `deny`."""
        if "read" not in self.permissions.rules:
            return None
        roots = [Path(f) for f in folders]

        def check(path: Path) -> str | None:
            value, why = self.decide("read", subjects_of(path, roots), "allow")
            return None if value == "allow" else f"read refused by {why}"

        return check

    def write_check(self, folders: Sequence[Path], port: Asker) -> Callable[[Path], Awaitable[tuple[bool, str]]]:
        """The `write` rule for `EditSession.write_permission`: (allowed, reason). Applied after writeScope and
        denyWrite, so it can only narrow them; `ask` asks the user (no answer: deny)."""
        roots = [Path(f) for f in folders]

        async def check(path: Path) -> tuple[bool, str]:
            return await self.use("write", subjects_of(path, roots), "allow", port, f"write {path}")

        return check

    async def use(
        self, tool: str, subjects: tuple[str, ...], default: Value, port: Asker, what: str
    ) -> tuple[bool, str]:
        """Whether one use of `tool` may go ahead: (allowed, reason for the conversation when not)."""
        value, why = self.decide(tool, subjects, default)
        shown = "the default" if why == "default" else why
        if value == "allow":
            return True, ""
        if value == "deny":
            return False, f"agent '{self.agent}' may not {what} ({shown})"
        answer = await port.ask(f"nagent (agent '{self.agent}') wants to {what}", [ALLOW_ONCE, DENY])
        if answer == ALLOW_ONCE:
            return True, ""
        return False, f"agent '{self.agent}' may {what} only when the user allows it ({shown}), and the user did not"


ALLOW_ONCE = "Allow"


def subjects_of(path: Path, folders: Sequence[Path]) -> tuple[str, ...]:
    """The forms a path rule's glob is matched against: relative to its workspace folder (posix), and absolute."""
    forms = [path.as_posix()]
    for folder in folders:
        try:
            forms.insert(0, path.relative_to(folder).as_posix())
            break
        except ValueError:
            continue
    return tuple(forms)

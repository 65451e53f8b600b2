"""Token accounting for a run: provider figures when given, else the chars/4 estimate."""

from __future__ import annotations

from dataclasses import dataclass

from nagent_lsp.core.model import Usage


@dataclass
class Tokens:
    input: int = 0
    output: int = 0
    turns: int = 0
    estimated: bool = False

    def add(self, usage: Usage) -> None:
        self.input += usage.input
        self.output += usage.output
        self.turns += 1
        self.estimated = self.estimated or usage.estimated

    def absorb(self, child: Tokens) -> None:
        """A sub-conversation's tokens roll up into its parent's (its turns are its own)."""
        self.input += child.input
        self.output += child.output
        self.estimated = self.estimated or child.estimated

    def as_result(self) -> dict[str, int]:
        return {"input": self.input, "output": self.output, "turns": self.turns}

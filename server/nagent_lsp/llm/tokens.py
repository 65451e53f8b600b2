"""Token accounting for a run: provider figures when given, else the chars/4 estimate (DESIGN §5.6, §11).

`input`/`output`/`turns` count the conversation's own model calls (sub-conversations roll up into them);
`cacheRead` is the part of `input` the provider served from its prompt cache; `memory` counts the calls that folded
old turns into a summary (input + output of the summary model), kept apart so a run shows what its memory cost.
`cost` is reported when the prices are known: the model profile's `price` (per million tokens) for the run's
calls and the summary profile's for memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import attrs

from nagent_lsp.core.model import Message, Usage, estimate_tokens

Price = tuple[float, float]  # (input, output) per million tokens


@attrs.frozen
class TokenCounts:
    """A run's `tokens` as a command's result names them; `cost` is left out when a needed price is unknown."""

    input: int
    output: int
    turns: int
    cacheRead: int
    memory: int
    cost: float | None = None


@dataclass
class Tokens:
    input: int = 0
    output: int = 0
    turns: int = 0
    estimated: bool = False
    cache_read: int = 0
    memory_input: int = 0
    memory_output: int = 0
    memory_calls: int = 0
    price: Price | None = None  # the run's model profile price, when it has one
    memory_price: Price | None = None  # the summary model's (None: memory is unpriced)
    # Calls priced one by one (a recipe's steps may each use another profile): their cost so far, and whether one
    # had no price (then the run's cost is unknown).
    call_cost: float = 0.0
    priced_calls: int = 0
    unpriced_calls: int = 0

    def add(self, usage: Usage) -> None:
        self.input += usage.input
        self.output += usage.output
        self.cache_read += usage.cache_read
        self.turns += 1
        self.estimated = self.estimated or usage.estimated

    def add_priced(self, usage: Usage, price: Price | None) -> None:
        """A call on its own model profile: counted as `add` does, and priced with that profile's price."""
        self.add(usage)
        if price is None:
            self.unpriced_calls += 1
        else:
            self.priced_calls += 1
            self.call_cost += usage.input * price[0] + usage.output * price[1]

    def add_unanswered(self, messages: list[Message]) -> None:
        """A call that got no reply (cancelled mid-request): what was sent still counts, as the estimate."""
        self.input += estimate_tokens("".join(m.content for m in messages))
        self.turns += 1
        self.estimated = True

    def add_memory(self, usage: Usage) -> None:
        self.memory_input += usage.input
        self.memory_output += usage.output
        self.memory_calls += 1
        self.estimated = self.estimated or usage.estimated

    def add_memory_unanswered(self, messages: list[Message]) -> None:
        self.memory_input += estimate_tokens("".join(m.content for m in messages))
        self.memory_calls += 1
        self.estimated = True

    def absorb(self, child: Tokens) -> None:
        """A sub-conversation's tokens roll up into its parent's (its turns are its own)."""
        self.input += child.input
        self.output += child.output
        self.cache_read += child.cache_read
        self.memory_input += child.memory_input
        self.memory_output += child.memory_output
        self.memory_calls += child.memory_calls
        self.estimated = self.estimated or child.estimated

    @property
    def memory(self) -> int:
        return self.memory_input + self.memory_output

    def cost(self) -> float | None:
        """In the price's currency; None when a price that is needed is unknown."""
        if self.priced_calls or self.unpriced_calls:
            if self.unpriced_calls or (self.memory and self.memory_price is None):
                return None
            total = self.call_cost
        elif self.price is None or (self.memory and self.memory_price is None):
            return None
        else:
            total = self.input * self.price[0] + self.output * self.price[1]
        if self.memory and self.memory_price is not None:
            total += self.memory_input * self.memory_price[0] + self.memory_output * self.memory_price[1]
        return round(total / 1_000_000, 6)

    def counts(self) -> TokenCounts:
        """The contract's `tokens` (DESIGN §4.1): {input, output, turns, cacheRead, memory, cost?}."""
        return TokenCounts(self.input, self.output, self.turns, self.cache_read, self.memory, self.cost())

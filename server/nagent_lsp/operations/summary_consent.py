"""Consent before commit diffs leave the machine (issue 25): background commit summaries send each commit's diff
to the summary model, started by nothing more than opening or hovering a file. Before the first batch of a
repository goes to an endpoint that is not on this machine, the user is asked once — naming the repository, the
model, where it runs and about how many tokens the first batch is — and the answer is remembered in the user's
own state (`store.summary_consent`: `~/.nagent/summary-consent.json`), never the repository's.

- `history.summaryConsent`: `"ask"` (the default), `"always"` (never ask), `"never"` (no summaries by a model
  off this machine). A repository's config may only narrow it (config.settings.NARROW_ONLY).
- A loopback endpoint (`localhost`, `127.0.0.0/8`, `::1`) needs no consent: nothing leaves the machine.
- The question is asked by the front end that registered an asker (`set_asker`: the LSP server's
  `window/showMessageRequest`); with none, or no answer, nothing is sent and the session does not ask again for
  that repository (a restart asks again; the setting decides for good). Summaries already shared through git
  notes are read either way: they come from the team, not the model.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

import attrs

from nagent_lsp.config.settings import Settings
from nagent_lsp.config.state_root import home_root
from nagent_lsp.operations.session import Session

log = logging.getLogger("nagent_lsp")

DEFAULT_ENDPOINT = "https://api.openai.com/v1"  # the openai SDK's, when no baseUrl is set
ALLOW = "Allow for this repository"
DENY = "Not for this repository"
Asker = Callable[[str, list[str]], "str | None"]  # blocking: called from a worker thread, returns the choice
Decision = Literal["allow", "deny", "ask"]
SummaryItem = tuple[str, str, str, str]
Summarizer = Callable[[list[SummaryItem]], dict[tuple[str, str], str]]


class ConsentNotGiven(RuntimeError):
    """No consent for this batch: its commits keep their subjects (history.commit_summaries records no summary)."""


@attrs.frozen
class Endpoint:
    url: str
    model: str

    @property
    def host(self) -> str:
        return urlparse(self.url).hostname or self.url

    @property
    def loopback(self) -> bool:
        host = urlparse(self.url).hostname
        if host is None:
            return False
        if host == "localhost" or host.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False  # a name: where it resolves is not known without asking the network


def endpoint_of(settings: Settings) -> Endpoint:
    """Where commit summaries go: the summary model (`summaryModel`, else `model`) and its endpoint."""
    from nagent_lsp.llm.models import summary_settings

    resolved = summary_settings(settings)
    return Endpoint(resolved.baseUrl or DEFAULT_ENDPOINT, resolved.model)


class SummaryConsent:
    """One per session: the front end's asker, the questions in flight, the repositories whose question went
    unanswered this session, and a token per repository replaced on every decision (the history service remakes
    its summarizer when it changes)."""

    def __init__(self) -> None:
        self.asker: Asker | None = None
        self._lock = threading.Lock()
        self._asking: dict[str, threading.Event] = {}
        self._unanswered: set[str] = set()
        self._granted: set[str] = set()  # consent given for this session only (`nagent-lsp summaries warm`)
        self._tokens: dict[str, object] = {}

    def token(self, root: Path) -> object:
        with self._lock:
            return self._tokens.setdefault(str(root), object())

    def _decided(self, root: Path) -> None:
        with self._lock:
            self._tokens[str(root)] = object()

    def decision(self, settings: Settings, root: Path) -> Decision:
        from nagent_lsp.store.summary_consent import ConsentRecords

        endpoint = endpoint_of(settings)
        choice = settings.history.summaryConsent
        if choice == "always" or endpoint.loopback:
            return "allow"
        if choice == "never":
            return "deny"
        with self._lock:
            if str(root) in self._granted:
                return "allow"
        stored = ConsentRecords(home_root()).get(root, endpoint.url)
        if stored is not None:
            return stored
        with self._lock:
            return "deny" if str(root) in self._unanswered else "ask"

    def ask(self, settings: Settings, root: Path, items: list[SummaryItem]) -> Decision:
        """Ask (once at a time per repository) and remember the answer; "ask" back when nobody answered."""
        key = str(root)
        with self._lock:
            waiting = self._asking.get(key)
            mine = waiting is None
            if mine:
                waiting = self._asking[key] = threading.Event()
        assert waiting is not None
        if not mine:
            waiting.wait()
            return self.decision(settings, root)
        try:
            return self._ask(settings, root, items)
        finally:
            with self._lock:
                self._asking.pop(key, None)
            waiting.set()
            self._decided(root)

    def _ask(self, settings: Settings, root: Path, items: list[SummaryItem]) -> Decision:
        from nagent_lsp.store.summary_consent import ConsentRecords

        endpoint = endpoint_of(settings)
        asker = self.asker
        title = asker(question(root, endpoint, items), [ALLOW, DENY]) if asker is not None else None
        if title not in (ALLOW, DENY):
            with self._lock:
                self._unanswered.add(str(root))
            log.info(
                "commit summaries of %s not sent to %s: no answer to the consent question (set "
                'history.summaryConsent to "always" to send them without asking, "never" to stop asking)',
                root,
                endpoint.host,
            )
            return "ask"
        answer: Literal["allow", "deny"] = "allow" if title == ALLOW else "deny"
        ConsentRecords(home_root()).record(root, endpoint.url, endpoint.model, answer)
        return answer


def question(root: Path, endpoint: Endpoint, items: list[SummaryItem]) -> str:
    """The one question, naming the repository, the model, where it runs and the first batch's tokens."""
    from nagent_lsp.core.model import estimate_tokens
    from nagent_lsp.history.commit_summaries import summary_prompt

    tokens = sum(estimate_tokens(m.content) for m in summary_prompt(items))
    return (
        f"nagent: send the diffs of {root.name}'s recent commits to {endpoint.model} at {endpoint.host} for one-line "
        f"summaries? About {tokens:,} tokens for these {len(items)} commits, more as you open other files. "
        f"Remembered for {root} (in ~/.nagent/summary-consent.json; setting history.summaryConsent)."
    )


def grant_for_this_run(session: Session, roots: list[Path]) -> None:
    """The user confirmed sending these repositories' diffs now (`nagent-lsp summaries warm` asks on the terminal,
    or `--yes`): allowed for this session, not remembered. UserError when `history.summaryConsent` is "never"
    and the endpoint is off this machine."""
    from nagent_lsp.core.errors import UserError

    settings = session.settings
    endpoint = endpoint_of(settings)
    if settings.history.summaryConsent == "never" and not endpoint.loopback:
        raise UserError(
            f'history.summaryConsent is "never": commit diffs are not sent to {endpoint.host} (set it to "ask" '
            'or "always" to summarise with that model)'
        )
    consent = consent_of(session)
    for root in roots:
        with consent._lock:
            consent._granted.add(str(root))
        consent._decided(root)


def consent_of(session: Session) -> SummaryConsent:
    found = vars(session).get("_summary_consent")
    if not isinstance(found, SummaryConsent):
        found = vars(session).setdefault("_summary_consent", SummaryConsent())
    assert isinstance(found, SummaryConsent)
    return found


def set_asker(session: Session, asker: Asker | None) -> None:
    """The front end's way to ask the user (blocking, from a worker thread)."""
    consent_of(session).asker = asker


def gated(session: Session, root: Path, summarizer: Summarizer | None) -> Summarizer | None:
    """`summarizer` as far as the user's consent lets it run for `root`: itself, None (declined), or a summarizer
    whose first batch asks and waits for the answer (a batch without consent raises `ConsentNotGiven`)."""
    if summarizer is None:
        return None
    consent = consent_of(session)
    settings = session.settings
    decision = consent.decision(settings, root)
    if decision == "allow":
        return summarizer
    if decision == "deny":
        return None

    def asking(items: list[SummaryItem]) -> dict[tuple[str, str], str]:
        decided = consent.decision(settings, root)
        if decided == "ask":
            decided = consent.ask(settings, root, items)
        if decided != "allow":
            raise ConsentNotGiven(f"commit summaries of {root} need your consent (history.summaryConsent)")
        return summarizer(items)

    return asking

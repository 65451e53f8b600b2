"""The bounded abuse campaign: random and malformed requests, path attacks, crafted split indexes, provider
faults, shell abuse and special files against ONE long-lived server with a canary API key in its environment
(tests/abuse/campaign.py). One run serves every test below; each checks one promise of DESIGN §12 and names the
issue 12 item whose defence it is.
"""

from __future__ import annotations

import pytest

from tests.abuse.campaign import Report, Size, run_campaign

pytestmark = pytest.mark.abuse


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    result = run_campaign(tmp_path_factory.mktemp("abuse"), Size.bounded())
    print(result.figures())
    return result


def _listed(items: list[str]) -> str:
    return "\n".join(items[:20])


def test_every_request_with_an_id_is_answered(report: Report) -> None:
    assert report.requests > 1000
    assert report.unanswered == [], _listed(report.unanswered)


def test_the_server_survives_and_exits_cleanly(report: Report) -> None:
    assert report.alive_at_end
    assert report.exit_code == 0
    assert report.broken_frames == [], _listed(report.broken_frames)


def test_answers_carry_the_right_json_rpc_codes(report: Report) -> None:
    """-32700 for what is not JSON, -32600 for broken envelopes, -32601 for unknown methods, -32602 for params
    that do not fit (item 4); and no internal error (-32603) for anything a client can send."""
    assert report.wrong_codes == [], _listed(report.wrong_codes)
    assert report.internal_errors == [], _listed(report.internal_errors)
    for code in (-32700, -32600, -32601, -32602):
        assert report.codes[code] > 0, f"the fuzz never provoked {code}"
    assert report.null_id_received >= report.null_id_expected > 0


def test_no_traceback_or_python_exception_text_reaches_the_editor(report: Report) -> None:
    """Item 8: answers and window/logMessage carry messages, never tracebacks or Python exception text."""
    assert report.tracebacks == [], _listed(report.tracebacks)
    assert report.python_text == [], _listed(report.python_text)


def test_log_messages_and_log_files_are_bounded(report: Report) -> None:
    """Item 8: a 1 MB URI does not make a 1 MB log message; the log file rotates."""
    assert report.longest_log_message <= 2100
    assert report.log_file_bytes <= 3 * 5 * 1024 * 1024


def test_the_canary_key_appears_nowhere(report: Report) -> None:
    """Item 2: not in any answer, message, log, artifact or model request — plain, reversed, base64 or hex."""
    assert report.canary_hits == [], _listed(report.canary_hits)
    assert report.failed_attacks("2") == []


def test_planted_secrets_stay_where_they_are(report: Report) -> None:
    """Items 7 and 1: .env, id_rsa, outside files and another repository's files reach no artifact, answer or
    model request."""
    assert report.secret_hits == [], _listed(report.secret_hits)


@pytest.mark.parametrize(
    "item, what",
    [
        ("1", "crafted split indexes are refused, nothing outside is read, written or deleted"),
        ("3", "special files are refused without blocking other requests"),
        ("4", "protocol-level attacks are refused with a message"),
        ("5", "the shell timeout holds and no child outlives the run"),
        ("7", "reads are confined: outside files, traversal, symlinks, denyRead in any case, other repositories"),
        ("9", "provider errors that cannot pass are not retried; a Retry-After wait is shown"),
    ],
)
def test_attacks_are_refused(report: Report, item: str, what: str) -> None:
    assert any(a.item == item for a in report.attacks), f"no attack checks item {item}"
    failed = [f"{a.name}: {a.detail}" for a in report.failed_attacks(item)]
    assert failed == [], f"item {item} ({what}):\n" + _listed(failed)
